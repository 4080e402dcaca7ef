//! The MCD's node disruption calculation (`calculatePostConfigChangeNodeDisruptionAction`),
//! keeping for every change the policy entry that chose its actions, so a plan can say why it
//! reboots, drains or restarts what it does.

use std::fmt;

use serde::Serialize;

use super::{Action, ClusterPolicies};
use crate::diff::ConfigDiff;
use crate::machineconfiguration::PolicyAction;

/// What changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "name", rename_all = "snake_case")]
pub enum Subject {
    /// A file added, changed or removed.
    File(String),
    /// A unit (or its drop-ins) added, changed or removed.
    Unit(String),
    /// The core user's SSH keys or password hash.
    SshKeys,
    /// An OS part: `osImageURL`, `kernel arguments`, `FIPS`, `kernel type`, `extensions`.
    Os(&'static str),
    /// The force file is present.
    Force,
    /// Nothing a policy covers (files, units, SSH keys) changed.
    Nothing,
}

/// Where a policy entry comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// The MCO's default table.
    Default,
    /// The cluster's own policies (`MachineConfiguration` `spec.nodeDisruptionPolicy`).
    Cluster,
}

/// What chose the actions of a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum Rule {
    /// A policy entry: its origin and what it names (a path, a unit, or `sshkey`).
    Policy { origin: Origin, entry: String },
    /// No entry matches: the change reboots.
    NoPolicy,
    /// OS changes and the force file reboot whatever the policies say.
    Always,
    /// No policy applies: nothing they cover changed.
    NothingChanged,
}

/// The actions one change needs, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    pub subject: Subject,
    pub actions: Vec<Action>,
    pub rule: Rule,
}

/// The actions of a whole update and the decision behind each change.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decided {
    pub actions: Vec<Action>,
    pub decisions: Vec<Decision>,
}

impl fmt::Display for Decision {
    /// `/etc/foo.conf: Restart foo.service (cluster policy /etc/foo.conf)`,
    /// `/etc/containers/registries.conf: Special (default policy)`,
    /// `reboot: no policy matches /etc/bar`, `reboot: kernel arguments changed`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match &self.subject {
            Subject::File(path) => path.clone(),
            Subject::Unit(name) => format!("unit {name}"),
            Subject::SshKeys => "SSH keys".to_string(),
            Subject::Os(part) => return write!(f, "reboot: {part} changed"),
            Subject::Force => return f.write_str("reboot: the force file is present"),
            Subject::Nothing => {
                return f.write_str("none: no changes in files, units or SSH keys");
            }
        };
        match &self.rule {
            Rule::Policy { origin, entry } => {
                let actions: Vec<String> = self.actions.iter().map(Action::to_string).collect();
                let actions = if actions.is_empty() {
                    "no actions".to_string()
                } else {
                    actions.join(", ")
                };
                let origin = match origin {
                    Origin::Default => "default",
                    Origin::Cluster => "cluster",
                };
                // The default table's exact matches need no repeating; a directory entry, or
                // the cluster's own entry, is named.
                let named = match (&self.subject, origin) {
                    (Subject::File(path), "default") if path == entry => String::new(),
                    (Subject::Unit(_) | Subject::SshKeys, "default") => String::new(),
                    _ => format!(" {entry}"),
                };
                write!(f, "{what}: {actions} ({origin} policy{named})")
            }
            Rule::NoPolicy => write!(f, "reboot: no policy matches {what}"),
            Rule::Always | Rule::NothingChanged => f.write_str(&what),
        }
    }
}

fn converted(actions: &[PolicyAction]) -> Vec<Action> {
    actions.iter().map(Action::from_policy).collect()
}

/// The actions for a diff under `policies`, as the MCD computes them, with a decision per
/// change. `force`: the force file is present. The MCD stops at the first change no policy
/// matches; every change is decided here (the actions are the same: a single `Reboot`).
pub fn decide(diff: &ConfigDiff, policies: &ClusterPolicies, force: bool) -> Decided {
    let reboot = |subject| Decision {
        subject,
        actions: vec![Action::Reboot],
        rule: Rule::Always,
    };
    if force {
        return finish(vec![reboot(Subject::Force)]);
    }
    if diff.os_changes() {
        let parts = [
            (diff.os_update, "osImageURL"),
            (diff.kargs_changed, "kernel arguments"),
            (diff.fips, "FIPS"),
            (diff.kernel_type, "kernel type"),
            (diff.extensions_changed, "extensions"),
        ];
        let decisions = parts
            .iter()
            .filter(|(changed, _)| *changed)
            .map(|(_, part)| reboot(Subject::Os(part)))
            .collect();
        return finish(decisions);
    }
    if diff.files.is_empty() && diff.units.is_empty() && !diff.passwd {
        return finish(vec![Decision {
            subject: Subject::Nothing,
            actions: vec![Action::None],
            rule: Rule::NothingChanged,
        }]);
    }
    let no_policy = |subject| Decision {
        subject,
        actions: vec![Action::Reboot],
        rule: Rule::NoPolicy,
    };
    let mut decisions = Vec::new();
    for path in diff.files.all() {
        let subject = Subject::File(path.clone());
        decisions.push(match policies.file_policy(path) {
            Some(p) => Decision {
                subject,
                actions: converted(&p.actions),
                rule: Rule::Policy {
                    origin: policies.file_origin(p),
                    entry: p.path.clone(),
                },
            },
            None => no_policy(subject),
        });
    }
    for name in diff.units.all() {
        let subject = Subject::Unit(name.clone());
        decisions.push(match policies.unit_policy(name) {
            Some(p) => Decision {
                subject,
                actions: converted(&p.actions),
                rule: Rule::Policy {
                    origin: policies.unit_origin(p),
                    entry: p.name.clone(),
                },
            },
            None => no_policy(subject),
        });
    }
    if diff.passwd {
        decisions.push(match &policies.policies().sshkey {
            Some(s) => Decision {
                subject: Subject::SshKeys,
                actions: converted(&s.actions),
                rule: Rule::Policy {
                    origin: policies.sshkey_origin(),
                    entry: "sshkey".to_string(),
                },
            },
            None => no_policy(Subject::SshKeys),
        });
    }
    finish(decisions)
}

/// The update's actions from its decisions, as the MCD's
/// `calculatePostConfigChangeNodeDisruptionActionFromMCDiffs` reduces them: any `Reboot` is a
/// single `Reboot`; `None` goes when other actions remain, and all-`None` is a single `None`;
/// policies with `actions: []` add nothing, so an update whose policies all say so has no
/// action at all (no de-duplication otherwise).
fn finish(decisions: Vec<Decision>) -> Decided {
    let mut actions: Vec<Action> = decisions
        .iter()
        .flat_map(|d| d.actions.iter().cloned())
        .collect();
    if actions.contains(&Action::Reboot) {
        actions = vec![Action::Reboot];
    } else if actions.is_empty() {
    } else if actions.iter().all(|a| *a == Action::None) {
        actions = vec![Action::None];
    } else {
        actions.retain(|a| *a != Action::None);
    }
    Decided { actions, decisions }
}
