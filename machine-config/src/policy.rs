//! Node disruption: which actions a diff needs (the MCD's default NodeDisruptionPolicy merged
//! with user policies), whether a drain is needed, and the legacy (first-boot) calculation.

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::diff::ConfigDiff;
use crate::machineconfiguration::{FilePolicy, NodeDisruptionPolicy, PolicyAction, UnitPolicy};

/// One post-update action.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    None,
    Drain,
    Reload(String),
    Restart(String),
    DaemonReload,
    /// `systemctl reload crio` after a registries.conf change.
    Special,
    Reboot,
}

impl Action {
    /// The type name used in policies and in `diff --json`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Action::None => "None",
            Action::Drain => "Drain",
            Action::Reload(_) => "Reload",
            Action::Restart(_) => "Restart",
            Action::DaemonReload => "DaemonReload",
            Action::Special => "Special",
            Action::Reboot => "Reboot",
        }
    }

    /// The service of a Reload/Restart.
    pub fn unit(&self) -> Option<&str> {
        match self {
            Action::Reload(u) | Action::Restart(u) => Some(u),
            _ => None,
        }
    }

    /// Converts a policy's action (already checked by [`NodeDisruptionPolicy::check`]); an
    /// unknown type or a Reload/Restart without a service is treated as `Reboot`, the safe side.
    pub fn from_policy(a: &PolicyAction) -> Action {
        let svc = |s: &Option<crate::machineconfiguration::ServiceRef>| {
            s.as_ref()
                .map(|s| s.service_name.clone())
                .filter(|n| !n.is_empty())
        };
        match a.type_.as_str() {
            "None" => Action::None,
            "Drain" => Action::Drain,
            "DaemonReload" => Action::DaemonReload,
            "Special" => Action::Special,
            "Reload" => svc(&a.reload).map_or(Action::Reboot, Action::Reload),
            "Restart" => svc(&a.restart).map_or(Action::Reboot, Action::Restart),
            _ => Action::Reboot,
        }
    }
}

impl Serialize for Action {
    /// `{"type": "Restart", "unit": "crio.service"}` (`unit` only for Reload/Restart).
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("type", self.type_name())?;
        if let Some(u) = self.unit() {
            m.serialize_entry("unit", u)?;
        }
        m.end()
    }
}

fn pa(type_: &str, svc: Option<&str>) -> PolicyAction {
    let service = svc.map(|s| crate::machineconfiguration::ServiceRef {
        service_name: s.to_string(),
    });
    PolicyAction {
        type_: type_.to_string(),
        reload: if type_ == "Reload" {
            service.clone()
        } else {
            None
        },
        restart: if type_ == "Restart" { service } else { None },
    }
}

/// The MCD's default cluster policies.
pub fn default_policy() -> NodeDisruptionPolicy {
    let file = |path: &str, actions: Vec<PolicyAction>| FilePolicy {
        path: path.to_string(),
        actions,
    };
    let reload_crio = || vec![pa("Reload", Some("crio.service"))];
    NodeDisruptionPolicy {
        files: vec![
            file("/var/lib/kubelet/config.json", vec![pa("None", None)]),
            file(
                "/etc/machine-config-daemon/no-reboot/containers-gpg.pub",
                reload_crio(),
            ),
            file("/etc/containers/policy.json", reload_crio()),
            file("/etc/containers/registries.conf", vec![pa("Special", None)]),
            file("/etc/containers/registries.d", reload_crio()),
            file("/etc/crio/policies", reload_crio()),
            file("/etc/nmstate/openshift", vec![pa("None", None)]),
            file(
                "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
                vec![
                    pa("Restart", Some("coreos-update-ca-trust.service")),
                    pa("Restart", Some("crio.service")),
                ],
            ),
            file(
                "/etc/kubernetes/credential-providers",
                vec![pa("Restart", Some("kubelet.service"))],
            ),
            file(
                "/etc/systemd/system/kubelet.service.d/40-kubelet-crio-image-credential-provider.conf",
                vec![
                    pa("DaemonReload", None),
                    pa("Restart", Some("kubelet.service")),
                ],
            ),
            file(
                "/etc/iri-registry",
                vec![pa("Restart", Some("iri-registry.service"))],
            ),
            file(
                "/usr/local/bin/load-registry-image.sh",
                vec![pa("Restart", Some("iri-registry.service"))],
            ),
            file(
                "/etc/pki/ca-trust/source/anchors/iri-root-ca.crt",
                vec![pa("Restart", Some("coreos-update-ca-trust.service"))],
            ),
        ],
        units: vec![UnitPolicy {
            name: "iri-registry.service".to_string(),
            actions: vec![
                pa("DaemonReload", None),
                pa("Restart", Some("iri-registry.service")),
            ],
        }],
        sshkey: Some(crate::machineconfiguration::SshKeyPolicy {
            actions: vec![pa("None", None)],
        }),
    }
}

/// The default policies with the user's merged in: a user entry replaces the default entry of
/// the same path or unit; a user SSH policy replaces the default one.
pub fn cluster_policy(user: &NodeDisruptionPolicy) -> NodeDisruptionPolicy {
    let mut merged = default_policy();
    for f in &user.files {
        merged.files.retain(|d| d.path != f.path);
        merged.files.push(f.clone());
    }
    for u in &user.units {
        merged.units.retain(|d| d.name != u.name);
        merged.units.push(u.clone());
    }
    if user.sshkey.is_some() {
        merged.sshkey = user.sshkey.clone();
    }
    merged
}

/// Whether `path` is `policy` or lies under it (as a directory).
fn under(policy: &str, path: &str) -> bool {
    let dir = policy.trim_end_matches('/');
    path == policy || path.starts_with(&format!("{dir}/"))
}

/// The actions of the longest policy path equal to or above `path`.
pub fn closest_file_policy<'a>(path: &str, policies: &'a [FilePolicy]) -> Option<&'a FilePolicy> {
    policies
        .iter()
        .filter(|p| under(&p.path, path))
        .max_by_key(|p| p.path.len())
}

/// The actions for a diff under `policy` (already merged with the defaults; see
/// [`cluster_policy`]). `force` means the force file is present.
pub fn actions(diff: &ConfigDiff, policy: &NodeDisruptionPolicy, force: bool) -> Vec<Action> {
    if force || diff.os_changes() {
        return vec![Action::Reboot];
    }
    if diff.files.is_empty() && diff.units.is_empty() && !diff.passwd {
        return vec![Action::None];
    }
    let mut out: Vec<Action> = Vec::new();
    for path in diff.files.all() {
        let Some(p) = closest_file_policy(path, &policy.files) else {
            return vec![Action::Reboot];
        };
        out.extend(p.actions.iter().map(Action::from_policy));
    }
    for name in diff.units.all() {
        let Some(p) = policy.units.iter().find(|u| &u.name == name) else {
            return vec![Action::Reboot];
        };
        out.extend(p.actions.iter().map(Action::from_policy));
    }
    if diff.passwd {
        match &policy.sshkey {
            Some(s) => out.extend(s.actions.iter().map(Action::from_policy)),
            None => return vec![Action::Reboot],
        }
    }
    if out.contains(&Action::Reboot) {
        return vec![Action::Reboot];
    }
    if out.iter().all(|a| *a == Action::None) {
        return vec![Action::None];
    }
    out.retain(|a| *a != Action::None);
    out
}

/// Whether the actions need a drain. `registries_unsafe` is the verdict of the registries.conf
/// analysis, consulted only for `Special`.
pub fn drain_required(actions: &[Action], registries_unsafe: impl FnOnce() -> bool) -> bool {
    if actions
        .iter()
        .any(|a| matches!(a, Action::Reboot | Action::Drain))
    {
        return true;
    }
    actions.contains(&Action::Special) && registries_unsafe()
}

/// The first-boot binary's (legacy) post-update action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum LegacyAction {
    #[serde(rename = "none")]
    None,
    #[serde(rename = "reload crio")]
    ReloadCrio,
    #[serde(rename = "restart crio")]
    RestartCrio,
    #[serde(rename = "reboot")]
    Reboot,
}

impl LegacyAction {
    /// The MCD's string for it.
    pub fn as_str(self) -> &'static str {
        match self {
            LegacyAction::None => "none",
            LegacyAction::ReloadCrio => "reload crio",
            LegacyAction::RestartCrio => "restart crio",
            LegacyAction::Reboot => "reboot",
        }
    }
}

fn directly_in(dir: &str, path: &str) -> bool {
    path.strip_prefix(dir)
        .and_then(|rest| rest.strip_prefix('/'))
        .is_some_and(|name| !name.is_empty() && !name.contains('/'))
}

/// The MCD's legacy calculation (no NodeDisruptionPolicy; any unit change reboots).
pub fn legacy_action(diff: &ConfigDiff, force: bool) -> LegacyAction {
    if force || diff.os_changes() || !diff.units.is_empty() {
        return LegacyAction::Reboot;
    }
    let mut action = LegacyAction::None;
    for path in diff.files.all() {
        let p = path.as_str();
        match p {
            "/etc/kubernetes/kubelet-ca.crt" | "/var/lib/kubelet/config.json" => {}
            "/etc/containers/registries.conf"
            | "/etc/machine-config-daemon/no-reboot/containers-gpg.pub"
            | "/etc/containers/policy.json" => {
                if action != LegacyAction::RestartCrio {
                    action = LegacyAction::ReloadCrio;
                }
            }
            _ if directly_in("/etc/containers/registries.d", p) => {
                if action != LegacyAction::RestartCrio {
                    action = LegacyAction::ReloadCrio;
                }
            }
            "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt" => {
                action = LegacyAction::RestartCrio;
            }
            _ if directly_in("/etc/nmstate/openshift", p) => {}
            _ => return LegacyAction::Reboot,
        }
    }
    action
}
