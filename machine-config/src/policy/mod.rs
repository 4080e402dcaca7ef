//! Node disruption: which actions a diff needs under the cluster's node disruption policies
//! ([`ClusterPolicies`]: the MCO's default table with the user's policies merged in), which
//! policy entry chose each action ([`decide`], [`Decision`]), whether a drain is needed, and the
//! legacy (first-boot) calculation ([`legacy_action`]).

mod decide;
mod defaults;
mod legacy;
mod spec_rules;

use std::fmt;

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};

use crate::machineconfiguration::{
    FilePolicy, MachineConfiguration, MachineConfigurationStatus, NodeDisruptionPolicy,
    NodeDisruptionPolicyStatus, PolicyAction, ServiceRef, UnitPolicy,
};

pub use decide::{Decided, Decision, Origin, Rule, Subject, decide};
pub use defaults::{HOOKS_DIR, default_policy};
pub use legacy::{LegacyAction, legacy_action};
pub use spec_rules::SPEC_ACTION_TYPES;
pub(crate) use spec_rules::check_spec;

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
        let svc = |s: &Option<ServiceRef>| {
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

impl fmt::Display for Action {
    /// `Restart crio.service`, `DaemonReload`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.unit() {
            Some(u) => write!(f, "{} {u}", self.type_name()),
            None => f.write_str(self.type_name()),
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

/// The node disruption policies an update is planned with, in the form of the MCO's
/// `status.nodeDisruptionPolicyStatus.clusterPolicies`: the default table with the user's
/// policies (`spec.nodeDisruptionPolicy`) merged in. The default value is the default table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ClusterPolicies(NodeDisruptionPolicy);

impl Default for ClusterPolicies {
    fn default() -> Self {
        ClusterPolicies(default_policy())
    }
}

impl ClusterPolicies {
    /// The default table merged with `user` as the MCO's operator merges them: a user entry
    /// takes the place of the default entry of the same path or unit (else it is appended), a
    /// user SSH policy with actions replaces the default one.
    pub fn merged(user: &NodeDisruptionPolicy) -> Self {
        let mut merged = default_policy();
        for f in &user.files {
            match merged.files.iter_mut().find(|d| d.path == f.path) {
                Some(slot) => *slot = f.clone(),
                None => merged.files.push(f.clone()),
            }
        }
        for u in &user.units {
            match merged.units.iter_mut().find(|d| d.name == u.name) {
                Some(slot) => *slot = u.clone(),
                None => merged.units.push(u.clone()),
            }
        }
        if let Some(ssh) = user.sshkey.as_ref().filter(|s| !s.actions.is_empty()) {
            merged.sshkey = Some(ssh.clone());
        }
        ClusterPolicies(merged)
    }

    /// Policies already merged, as a MachineConfiguration's status holds them.
    pub fn from_status(merged: NodeDisruptionPolicy) -> Self {
        ClusterPolicies(merged)
    }

    /// The merged policies.
    pub fn policies(&self) -> &NodeDisruptionPolicy {
        &self.0
    }

    /// The policy of the longest path equal to or above `path` (the MCD's closest match).
    pub fn file_policy(&self, path: &str) -> Option<&FilePolicy> {
        // The first of the longest, as the MCD keeps a match only when it is strictly longer.
        self.0.files.iter().filter(|p| under(&p.path, path)).fold(
            None,
            |best: Option<&FilePolicy>, p| match best {
                Some(b) if b.path.len() >= p.path.len() => Some(b),
                _ => Some(p),
            },
        )
    }

    /// The policy of the unit named exactly `name`.
    pub fn unit_policy(&self, name: &str) -> Option<&UnitPolicy> {
        self.0.units.iter().find(|u| u.name == name)
    }

    /// Where a file entry comes from: the default table when it is one of its entries as is.
    pub fn file_origin(&self, entry: &FilePolicy) -> Origin {
        origin(default_policy().files.contains(entry))
    }

    /// Where a unit entry comes from.
    pub fn unit_origin(&self, entry: &UnitPolicy) -> Origin {
        origin(default_policy().units.contains(entry))
    }

    /// Where the SSH key policy comes from.
    pub fn sshkey_origin(&self) -> Origin {
        origin(self.0.sshkey == default_policy().sshkey)
    }
}

fn origin(is_default: bool) -> Origin {
    if is_default {
        Origin::Default
    } else {
        Origin::Cluster
    }
}

/// Whether `path` is `policy` or lies under it as a directory, as the MCD's
/// `FindClosestFilePolicyPathMatch` and `IsSubdirectory` decide: the policy path cleaned
/// (`/etc/myapp/` is `/etc/myapp`) and a separator appended, so `/` (`//`) matches no file.
fn under(policy: &str, path: &str) -> bool {
    path == policy || clean(path).starts_with(&format!("{}/", clean(policy)))
}

/// Go's `filepath.Clean` for the paths policies name: repeated separators and `.` elements
/// dropped, `..` resolved lexically (never above the root), no trailing separator but on `/`.
fn clean(path: &str) -> String {
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            p => parts.push(p),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_string(),
        (false, false) => joined,
    }
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

/// The policies a `MachineConfiguration` carries, here rather than beside the type so that the
/// model of the object does not depend on the policy logic built on it.
impl MachineConfiguration {
    /// The cluster policies in the status.
    pub fn status_policies(&self) -> ClusterPolicies {
        ClusterPolicies::from_status(
            self.status
                .node_disruption_policy_status
                .cluster_policies
                .clone(),
        )
    }

    /// The node disruption status the MCO's operator computes from the spec: the default
    /// table with `spec.nodeDisruptionPolicy` merged in, and `observedGeneration` the object's
    /// generation.
    pub fn computed_policy_status(&self) -> MachineConfigurationStatus {
        MachineConfigurationStatus {
            observed_generation: self.generation(),
            node_disruption_policy_status: NodeDisruptionPolicyStatus {
                cluster_policies: ClusterPolicies::merged(&self.spec.node_disruption_policy)
                    .policies()
                    .clone(),
            },
        }
    }
}
