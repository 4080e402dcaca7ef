//! The update state machine's allowed transitions: every change of the recorded step (a new
//! record, a step recorded over another, the record dropped) is checked against
//! [`TRANSITIONS`] before it is made ([`check`]), so this table is what the engine can do.
//! `docs/architecture.md` shows the same table and diagram; a test compares them.
//!
//! `None` is "no record": no update in progress (before an update, and after it completed or
//! was rolled back). A restart that finds a step and runs it again records nothing new, so it
//! needs no row.

use anyhow::{Result, bail};

use super::record::Step;
use Step::{
    BootFailed, Draining, NotTaken, Os, PostActions, RebootRequested, RebootingBack,
    RewritingFiles, RollingBack, Verifying, Writing,
};

/// One allowed change of the recorded step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    pub from: Option<Step>,
    pub to: Option<Step>,
    /// What makes the engine take it.
    pub when: &'static str,
}

const fn t(from: Option<Step>, to: Option<Step>, when: &'static str) -> Transition {
    Transition { from, to, when }
}

/// Every transition the engine may make, grouped by the step it leaves.
pub const TRANSITIONS: &[Transition] = &[
    t(
        None,
        Some(Draining),
        "a new update whose plan drains the node",
    ),
    t(
        None,
        Some(Writing),
        "a new update whose plan does not drain",
    ),
    t(Some(Draining), Some(Writing), "the node is drained"),
    t(
        Some(Draining),
        None,
        "the drain failed: nothing was written, the record is dropped (Degraded)",
    ),
    t(Some(Draining), Some(RollingBack), "re-targeted"),
    t(
        Some(Writing),
        Some(Os),
        "files, units and users written; the plan changes the OS",
    ),
    t(
        Some(Writing),
        Some(PostActions),
        "written; no OS change and no reboot",
    ),
    t(
        Some(Writing),
        Some(RebootRequested),
        "written; no OS change but the plan reboots",
    ),
    t(
        Some(Writing),
        Some(RollingBack),
        "writing failed, a restart found it interrupted, or re-targeted",
    ),
    t(
        Some(Os),
        Some(PostActions),
        "staged; the plan does not reboot (the default policy reboots for every OS change)",
    ),
    t(Some(Os), Some(RebootRequested), "staged; the plan reboots"),
    t(
        Some(Os),
        Some(Verifying),
        "a restart after a reboot nobody asked for finds the new OS running",
    ),
    t(
        Some(Os),
        Some(RollingBack),
        "staging failed, a restart in the same boot, a restart after a reboot into neither OS, or re-targeted",
    ),
    t(
        Some(PostActions),
        None,
        "the actions ran: committed, uncordoned, Done",
    ),
    t(
        Some(PostActions),
        Some(RollingBack),
        "an action failed, or re-targeted",
    ),
    t(
        Some(RebootRequested),
        None,
        "nothing can reboot and no boot of the root can be observed (`once-from --root`): committed as written",
    ),
    t(
        Some(RebootRequested),
        Some(Os),
        "a restart after a reboot that came before ours was requested, the deployment from before the update still running: stage again",
    ),
    t(
        Some(RebootRequested),
        Some(Verifying),
        "the node booted again (a new boot id)",
    ),
    t(
        Some(RebootRequested),
        Some(RollingBack),
        "the reboot request failed, or re-targeted",
    ),
    t(
        Some(Verifying),
        None,
        "booted image, kernel arguments and files match: committed, uncordoned, Done",
    ),
    t(
        Some(Verifying),
        Some(NotTaken),
        "the update did not take (Degraded, never rebooted again automatically)",
    ),
    t(Some(Verifying), Some(RollingBack), "re-targeted"),
    t(
        Some(Verifying),
        Some(RewritingFiles),
        "the update leaves image mode and the node runs the base image: the files the `/etc` merge dropped are written again (once per update)",
    ),
    t(
        Some(RewritingFiles),
        Some(RebootRequested),
        "written again: one more reboot, so that every service starts with its files",
    ),
    t(
        Some(RewritingFiles),
        Some(NotTaken),
        "writing them again failed (Degraded; the next try writes again)",
    ),
    t(Some(RewritingFiles), Some(RollingBack), "re-targeted"),
    t(
        Some(Verifying),
        Some(BootFailed),
        "booted as planned, but a health check did not pass within the deadline",
    ),
    t(
        Some(NotTaken),
        None,
        "a later verification finds that the update took: committed, Done",
    ),
    t(
        Some(NotTaken),
        Some(NotTaken),
        "verified again, still not taken",
    ),
    t(
        Some(NotTaken),
        Some(RewritingFiles),
        "tried again after writing the files again failed (still not written again)",
    ),
    t(
        Some(NotTaken),
        Some(RollingBack),
        "re-targeted (a new desired config or the force file recovers the node)",
    ),
    t(
        Some(RollingBack),
        None,
        "rolled back to the current config (Degraded with the reason; the daemon retries)",
    ),
    t(
        Some(RollingBack),
        Some(RollingBack),
        "re-targeted while rolling back",
    ),
    t(
        None,
        Some(BootFailed),
        "`mco-agent rollback`: back to the config (and deployment) before the last update",
    ),
    t(
        Some(BootFailed),
        Some(RebootingBack),
        "the previous deployment is the default again, files, units and users are back",
    ),
    t(
        Some(RebootingBack),
        None,
        "booted back: the failed target recorded, Degraded with the failed check",
    ),
];

/// Whether the engine may go from `from` to `to`.
pub fn allowed(from: Option<Step>, to: Option<Step>) -> bool {
    TRANSITIONS.iter().any(|t| t.from == from && t.to == to)
}

/// `Ok` when the engine may go from `from` to `to`; otherwise an error naming both (a bug in
/// the engine: the update stops, with the previous step still recorded).
pub fn check(from: Option<Step>, to: Option<Step>) -> Result<()> {
    if !allowed(from, to) {
        bail!(
            "bug: the update state machine has no transition from {} to {}",
            name(from),
            name(to)
        );
    }
    Ok(())
}

/// A step's name, `(none)` for no record (as the table in `docs/architecture.md` writes it).
pub fn name(step: Option<Step>) -> &'static str {
    step.map_or("(none)", Step::as_str)
}

#[cfg(test)]
mod tests;
