//! What `recover` proposes for a node, decided from what it found (no I/O here).
//!
//! The two remedies are the ones the MCO documentation gives admins as hand edits:
//! - **re-apply** the desired config over whatever the disk holds: the force file
//!   (`/run/machine-config-daemon-force`), which the running agent acts on within seconds,
//!   skipping the on-disk validation and rebooting only when the plan needs it;
//! - **re-target** the node to the config it actually runs: its `desiredConfig` annotation set
//!   back to `currentConfig`, so the agent stops trying an update that cannot complete (an
//!   unreachable or broken rendered config) and the node is Done again.
//!
//! Everything else (an update making progress, a healthy node) is left alone.

use std::fmt;

/// What `recover` found about the node.
#[derive(Debug, Clone, Default)]
pub struct Findings {
    /// The node's state (`Done`, `Working`, `Degraded`, `Unreconcilable`), when known.
    pub state: Option<String>,
    pub reason: String,
    /// The config the node is in (`currentconfig`); `None` when nothing was applied yet.
    pub current: Option<String>,
    /// The config the node should be in (the Node's `desiredConfig`, else the status file).
    pub desired: Option<String>,
    /// The update in progress: (from, to, step).
    pub pending: Option<(String, String, String)>,
    /// Mismatches of the disk against the current config; `None` when it could not be checked.
    pub drift: Option<Vec<String>>,
    /// The disk matches the desired config (when it differs from the current one and could be
    /// read): the update was applied but not recorded as complete.
    pub disk_matches_desired: Option<bool>,
    /// The force file is present (a re-apply is already asked for).
    pub force_file: bool,
    /// The Node can be written (a cluster was reached with the node's credentials).
    pub cluster: bool,
}

/// What `recover` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Remedy {
    /// Nothing is wrong.
    Nothing { why: String },
    /// Something is going on that a remedy would disturb: wait for it.
    Wait { why: String },
    /// Re-apply `config` with the force file.
    Reapply { config: String, why: String },
    /// Set the Node's `desiredConfig` to `to` (the config the node runs) instead of `from`.
    Retarget {
        from: String,
        to: String,
        why: String,
    },
    /// Neither remedy applies; `why` says what would.
    CannotHelp { why: String },
}

impl Remedy {
    /// Whether the remedy changes anything (and so needs a confirmation).
    pub fn acts(&self) -> bool {
        matches!(self, Remedy::Reapply { .. } | Remedy::Retarget { .. })
    }
}

impl fmt::Display for Remedy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Remedy::Nothing { why } => write!(f, "nothing to recover: {why}"),
            Remedy::Wait { why } => write!(f, "nothing to do now: {why}"),
            Remedy::Reapply { config, why } => write!(
                f,
                "re-apply {config} over what is on disk (the force file; a reboot only if the plan needs one): {why}"
            ),
            Remedy::Retarget { from, to, why } => write!(
                f,
                "re-target the node to {to}, the config it runs (desiredConfig {from} -> {to}): {why}"
            ),
            Remedy::CannotHelp { why } => write!(f, "recover cannot help: {why}"),
        }
    }
}

/// The remedy an admin asked for by name (`--action`), instead of the proposed one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Action {
    Reapply,
    Retarget,
}

fn is(state: &Option<String>, want: &str) -> bool {
    state.as_deref() == Some(want)
}

fn failed(f: &Findings) -> bool {
    is(&f.state, "Degraded") || is(&f.state, "Unreconcilable")
}

fn mismatches(n: usize) -> String {
    match n {
        1 => "1 mismatch".to_string(),
        n => format!("{n} mismatches"),
    }
}

/// The remedy for what was found.
pub fn propose(f: &Findings) -> Remedy {
    let Some(current) = f.current.clone() else {
        return Remedy::CannotHelp {
            why: "no config was ever applied here (no currentconfig): the node has not completed its first boot (mco-firstboot) or `once-from`".to_string(),
        };
    };
    if f.force_file {
        return Remedy::Wait {
            why: "the force file is present: the agent re-applies the desired config at its next sync (within seconds while it runs)".to_string(),
        };
    }
    let desired = f.desired.clone().unwrap_or_else(|| current.clone());
    if let Some((from, to, step)) = &f.pending
        && step == "Draining"
    {
        // The agent retries a blocked drain by itself; only the blocker's owner can unblock it.
        return Remedy::Wait {
            why: format!(
                "the update {from} -> {to} waits for the drain{}: the agent keeps retrying; move or delete the blocking pod, or change its PodDisruptionBudget",
                if f.reason.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", f.reason)
                }
            ),
        };
    }
    if let Some((from, to, step)) = &f.pending
        && !failed(f)
    {
        return Remedy::Wait {
            why: format!(
                "the update {from} -> {to} is in progress at step {step}{}",
                if f.reason.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", f.reason)
                }
            ),
        };
    }
    match &f.drift {
        Some(found) if !found.is_empty() => {
            if desired != current && f.disk_matches_desired == Some(true) {
                return Remedy::Reapply {
                    why: format!(
                        "the disk matches {desired} but the node records {current}: the update was applied and not completed"
                    ),
                    config: desired,
                };
            }
            return Remedy::Reapply {
                why: format!(
                    "the disk differs from {current} ({})",
                    mismatches(found.len())
                ),
                config: desired,
            };
        }
        Some(_) => {}
        None => {
            return Remedy::CannotHelp {
                why: format!(
                    "the disk could not be checked against {current}; see `mco-agent validate`"
                ),
            };
        }
    }
    // The disk is in the current config.
    if desired != current && failed(f) {
        if !f.cluster {
            return Remedy::CannotHelp {
                why: format!(
                    "the update to {desired} failed and the disk is still in {current}, but without the cluster the node cannot be re-targeted: fix {desired} where it comes from, or run `recover` where the node's kubeconfig is readable"
                ),
            };
        }
        return Remedy::Retarget {
            from: desired,
            to: current.clone(),
            why: format!(
                "the update failed ({}) and the disk is still in {current}",
                if f.reason.is_empty() {
                    "no reason given"
                } else {
                    &f.reason
                }
            ),
        };
    }
    if failed(f) {
        return Remedy::Reapply {
            why: format!(
                "the node is {} but its disk matches {current}: a re-apply clears it",
                f.state.as_deref().unwrap_or_default()
            ),
            config: current,
        };
    }
    if desired != current {
        return Remedy::Wait {
            why: format!("the node is to move from {current} to {desired}: the agent is on it"),
        };
    }
    Remedy::Nothing {
        why: format!(
            "the node is {} in {current} and its disk matches it",
            f.state.as_deref().unwrap_or("(state unknown)")
        ),
    }
}

/// The remedy named by `action`, when it makes sense for what was found.
pub fn forced(f: &Findings, action: Action) -> Remedy {
    let Some(current) = f.current.clone() else {
        return propose(f);
    };
    let desired = f.desired.clone().unwrap_or_else(|| current.clone());
    match action {
        Action::Reapply => Remedy::Reapply {
            config: desired,
            why: "asked for (--action reapply)".to_string(),
        },
        Action::Retarget if desired == current => Remedy::Nothing {
            why: format!("the node's desired config is already {current}, the config it runs"),
        },
        Action::Retarget if !f.cluster => Remedy::CannotHelp {
            why: "re-targeting sets the Node's desiredConfig: the cluster could not be reached with the node's kubeconfig".to_string(),
        },
        Action::Retarget => Remedy::Retarget {
            from: desired,
            to: current,
            why: "asked for (--action retarget)".to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(state: &str, current: &str, desired: &str) -> Findings {
        Findings {
            state: Some(state.to_string()),
            current: Some(current.to_string()),
            desired: Some(desired.to_string()),
            drift: Some(vec![]),
            cluster: true,
            ..Findings::default()
        }
    }

    fn kind(r: &Remedy) -> &'static str {
        match r {
            Remedy::Nothing { .. } => "nothing",
            Remedy::Wait { .. } => "wait",
            Remedy::Reapply { .. } => "reapply",
            Remedy::Retarget { .. } => "retarget",
            Remedy::CannotHelp { .. } => "cannot",
        }
    }

    #[test]
    fn remedies_by_what_was_found() {
        let drifted = |mut f: Findings| {
            f.drift = Some(vec!["content mismatch for file \"/etc/a\"".to_string()]);
            f
        };
        let cases: Vec<(&str, Findings, &str)> = vec![
            ("healthy", found("Done", "A", "A"), "nothing"),
            (
                "never applied",
                Findings {
                    current: None,
                    ..found("Done", "A", "A")
                },
                "cannot",
            ),
            (
                "force file already there",
                Findings {
                    force_file: true,
                    ..drifted(found("Degraded", "A", "A"))
                },
                "wait",
            ),
            (
                "drifted and Degraded",
                drifted(found("Degraded", "A", "A")),
                "reapply",
            ),
            (
                "update in progress",
                Findings {
                    pending: Some(("A".into(), "B".into(), "Draining".into())),
                    ..found("Working", "A", "B")
                },
                "wait",
            ),
            (
                "update failed, disk still in A",
                Findings {
                    reason: "cannot get the desired config B".into(),
                    ..found("Degraded", "A", "B")
                },
                "retarget",
            ),
            (
                "update failed, no cluster",
                Findings {
                    cluster: false,
                    ..found("Degraded", "A", "B")
                },
                "cannot",
            ),
            (
                "applied but not completed",
                Findings {
                    disk_matches_desired: Some(true),
                    pending: Some(("A".into(), "B".into(), "Verifying".into())),
                    ..drifted(found("Degraded", "A", "B"))
                },
                "reapply",
            ),
            (
                "drain blocked",
                Findings {
                    pending: Some(("A".into(), "B".into(), "Draining".into())),
                    reason: "pod default/db blocked by PodDisruptionBudget default/db".into(),
                    ..found("Degraded", "A", "B")
                },
                "wait",
            ),
            (
                "Degraded, disk fine",
                found("Degraded", "A", "A"),
                "reapply",
            ),
            ("moving on", found("Done", "A", "B"), "wait"),
            (
                "disk unreadable",
                Findings {
                    drift: None,
                    ..found("Degraded", "A", "A")
                },
                "cannot",
            ),
        ];
        for (name, findings, want) in cases {
            let got = propose(&findings);
            assert_eq!(kind(&got), want, "{name}: {got}");
        }
    }

    #[test]
    fn what_each_remedy_names() {
        let mut f = found("Degraded", "A", "B");
        f.drift = Some(vec!["x".into(), "y".into()]);
        assert_eq!(
            propose(&f),
            Remedy::Reapply {
                config: "B".into(),
                why: "the disk differs from A (2 mismatches)".into()
            }
        );
        f.drift = Some(vec![]);
        f.reason = "boom".into();
        let r = propose(&f);
        assert_eq!(
            r.to_string(),
            "re-target the node to A, the config it runs (desiredConfig B -> A): the update failed (boom) and the disk is still in A"
        );
        assert!(r.acts());
        assert!(!propose(&found("Done", "A", "A")).acts());
    }

    #[test]
    fn forced_actions() {
        let f = found("Done", "A", "B");
        assert_eq!(kind(&forced(&f, Action::Reapply)), "reapply");
        assert_eq!(kind(&forced(&f, Action::Retarget)), "retarget");
        assert_eq!(
            kind(&forced(&found("Done", "A", "A"), Action::Retarget)),
            "nothing"
        );
        let offline = Findings {
            cluster: false,
            ..f
        };
        assert_eq!(kind(&forced(&offline, Action::Retarget)), "cannot");
    }
}
