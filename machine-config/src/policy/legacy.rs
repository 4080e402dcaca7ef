//! The MCD's legacy post-update action (first boot, no NodeDisruptionPolicy): any unit change
//! reboots, a few files reload or restart crio.

use serde::Serialize;

use crate::diff::ConfigDiff;

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
