//! The MachineConfigNode's update conditions (`machineconfiguration.openshift.io/v1`,
//! `status.conditions`) as the MCD moves them: which condition (and child condition) each
//! step of an update sets, with the MCD's reasons and messages ([`Progress::change`]), and how
//! a change is folded into the conditions already there ([`merge`], the rules of the MCO's
//! `upgrademonitor`). Pure: the agent's `cluster::mcn` reads and writes the object.
//!
//! The condition set is the one the MCO uses without the `ImageModeStatusReporting` feature
//! gate (a single `AppliedFilesAndOS`), plus the pinned-image-set singletons; with the gate
//! ([`node_image_conditions`](super::node_image_conditions)) files and OS are separate
//! conditions, image pulls are reported and `configImage` is kept.

use serde::{Deserialize, Serialize};

/// `status.configVersion.desired` before the update is known to be compatible.
pub const NOT_YET_SET: &str = "not-yet-set";

/// Reason of the placeholder conditions of a new MachineConfigNode.
pub const NOT_YET_OCCURRED: &str = "NotYetOccurred";

/// Condition types, in the order the MCO fills in a new object's placeholders.
pub const CONDITION_TYPES: [&str; 14] = [
    UPDATE_PREPARED,
    UPDATE_EXECUTED,
    UPDATE_POST_ACTION_COMPLETE,
    UPDATE_COMPLETE,
    RESUMED,
    DRAINED,
    APPLIED_FILES_AND_OS,
    CORDONED,
    REBOOTED_NODE,
    UPDATED,
    UNCORDONED,
    NODE_DEGRADED,
    PINNED_IMAGE_SETS_DEGRADED,
    PINNED_IMAGE_SETS_PROGRESSING,
];

pub const UPDATE_PREPARED: &str = "UpdatePrepared";
pub const UPDATE_EXECUTED: &str = "UpdateExecuted";
pub const UPDATE_POST_ACTION_COMPLETE: &str = "UpdatePostActionComplete";
pub const UPDATE_COMPLETE: &str = "UpdateComplete";
pub const UPDATED: &str = "Updated";
pub const RESUMED: &str = "Resumed";
pub const DRAINED: &str = "Drained";
pub const APPLIED_FILES_AND_OS: &str = "AppliedFilesAndOS";
pub const CORDONED: &str = "Cordoned";
pub const UNCORDONED: &str = "Uncordoned";
pub const REBOOTED_NODE: &str = "RebootedNode";
pub const NODE_DEGRADED: &str = "NodeDegraded";
pub const PINNED_IMAGE_SETS_PROGRESSING: &str = "PinnedImageSetsProgressing";
pub const PINNED_IMAGE_SETS_DEGRADED: &str = "PinnedImageSetsDegraded";
/// Image-mode status reporting (the `ImageModeStatusReporting` gate) only.
pub const APPLIED_FILES: &str = "AppliedFiles";
pub const APPLIED_OS_IMAGE: &str = "AppliedOSImage";
pub const IMAGE_PULLED_FROM_REGISTRY: &str = "ImagePulledFromRegistry";

/// Conditions that never have a child; the MCO rewrites them even when unchanged.
const SINGLETONS: [&str; 2] = [PINNED_IMAGE_SETS_DEGRADED, PINNED_IMAGE_SETS_PROGRESSING];

/// A metav1.Condition status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    True,
    False,
    Unknown,
}

/// One entry of `status.conditions` (metav1.Condition).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub kind: String,
    pub status: Status,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub last_transition_time: String,
}

/// A condition as a step sets it (its time is stamped when merged).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Set {
    pub kind: &'static str,
    pub status: Status,
    pub reason: String,
    pub message: String,
}

/// What one step writes: a parent condition and maybe a child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub parent: Set,
    pub child: Option<Set>,
}

/// A step of an update, as the MachineConfigNode tells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    /// The node's config is not its desired one.
    NeedsUpdate,
    /// The update is compatible. The MCD's message lists its legacy post-config actions, which
    /// it calculates on first boot only (on a running node the cluster's policy decides, and the
    /// list it prints is empty), so the message never names the policy's actions.
    Prepared {
        drain: bool,
    },
    /// The update cannot be applied in place.
    Unreconcilable {
        from: String,
        to: String,
        error: String,
    },
    /// The post-config actions cannot be calculated (the cluster's disruption policy status is
    /// not ready): nothing is changed and the update is retried.
    ActionsUnavailable {
        from: String,
        to: String,
        error: String,
    },
    DrainNotRequired,
    /// Draining for `config` (`desiredDrain` `drain-<config>`).
    Draining {
        config: String,
    },
    Cordoned,
    Drained {
        config: String,
    },
    DrainFailed {
        config: String,
        error: String,
    },
    /// Files (and the OS when `os`) are being written; `files`: files or users change.
    ApplyingFilesAndOs {
        os: bool,
        files: bool,
    },
    AppliedFilesAndOs {
        os: bool,
        files: bool,
    },
    RebootRequired,
    NoRebootRequired,
    /// A post-config action reloaded `unit`: a service as the policy names it, `crio` for
    /// `Special`, `daemon-reload` for `DaemonReload` (the MCD's names).
    ServiceReloaded {
        unit: String,
    },
    Rebooted,
    /// In `config` after an update (`applying`: the annotations are being written), or after
    /// the agent started.
    Resumed {
        config: String,
        applying: bool,
    },
    Uncordoned,
    UncordonFailed {
        error: String,
    },
    Updated,
    /// An update failed with `error` (`None`: it succeeded).
    Degraded {
        error: Option<String>,
    },
    /// rpm-ostree is pulling the OS `image` (written with `ImageModeStatusReporting` only).
    PullingImage {
        image: String,
    },
    /// The OS `image` was pulled (written with `ImageModeStatusReporting` only).
    ImagePulled {
        image: String,
    },
    /// Pulling the OS `image` failed (written with `ImageModeStatusReporting` only).
    ImagePullFailed {
        image: String,
        error: String,
    },
}

/// What a message needs from the Node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeFacts<'a> {
    pub name: &'a str,
    pub last_applied_drain: &'a str,
}

pub(crate) fn set(kind: &'static str, status: Status, reason: &str, message: String) -> Set {
    Set {
        kind,
        status,
        reason: reason.to_string(),
        message,
    }
}

/// A parent with a child whose reason is the parent's type and the child's type joined.
pub(crate) fn pair(
    parent: &'static str,
    child: &'static str,
    statuses: (Status, Status),
    messages: (&str, String),
) -> Change {
    Change {
        parent: set(parent, statuses.0, child, messages.0.to_string()),
        child: Some(set(
            child,
            statuses.1,
            &format!("{parent}{child}"),
            messages.1,
        )),
    }
}

pub(crate) fn single(kind: &'static str, status: Status, reason: &str, message: String) -> Change {
    Change {
        parent: set(kind, status, reason, message),
        child: None,
    }
}

/// "" or "not", as the MCD fills in "OS will %s need an update".
fn not(needed: bool) -> &'static str {
    if needed { "" } else { "not" }
}

use Status::{False, True, Unknown};

impl Progress {
    /// The conditions this step sets, with the MCD's reasons and messages.
    pub fn change(&self, node: &NodeFacts<'_>) -> Change {
        match self {
            Progress::NeedsUpdate => single(
                UPDATED,
                False,
                UPDATED,
                format!("Node {} needs an update", node.name),
            ),
            Progress::Prepared { drain } => single(
                UPDATE_PREPARED,
                True,
                UPDATE_PREPARED,
                format!("Update Compatible. Post Cfg Actions: [] Drain Required: {drain}"),
            ),
            Progress::Unreconcilable { from, to, error } => single(
                UPDATE_PREPARED,
                Unknown,
                UPDATE_PREPARED,
                format!(
                    "Update Failed compatibility validation. MachineConfigs {from} and {to} are not compatible. Err: {error}"
                ),
            ),
            Progress::ActionsUnavailable { from, to, error } => single(
                UPDATE_PREPARED,
                Unknown,
                UPDATE_PREPARED,
                format!(
                    "Update Failed compatibility validation. MachineConfigs {from} and {to} are not available for update. Error calculating post config change actions: {error}"
                ),
            ),
            Progress::DrainNotRequired => {
                let m = "Node Drain Not required for this update.";
                pair(UPDATE_EXECUTED, DRAINED, (Unknown, False), (m, m.into()))
            }
            Progress::Draining { config } => pair(
                UPDATE_EXECUTED,
                DRAINED,
                (Unknown, Unknown),
                (
                    "Draining Node as part of update executed phase",
                    format!(
                        "Draining node. The drain will not be complete until desired drainer drain-{config} matches current drainer {}",
                        node.last_applied_drain
                    ),
                ),
            ),
            Progress::Cordoned => pair(
                UPDATE_EXECUTED,
                CORDONED,
                (Unknown, True),
                (
                    "Cordoned Node as part of update executed phase",
                    "Cordoned node. The node is reporting Unschedulable = true".into(),
                ),
            ),
            Progress::Drained { config } => pair(
                UPDATE_EXECUTED,
                DRAINED,
                (Unknown, True),
                (
                    "Drained Node as part of update executed phase",
                    format!(
                        "Drained node. The drain is complete as the desired drainer matches current drainer: drain-{config}"
                    ),
                ),
            ),
            Progress::DrainFailed { config, error } => pair(
                UPDATE_EXECUTED,
                DRAINED,
                (Unknown, Unknown),
                (
                    "Node Drain has not succeeded",
                    format!(
                        "Error: Node Drain has not succeeded. Error is: {error} The drain will not be complete until desired drainer drain-{config} matches current drainer {}",
                        node.last_applied_drain
                    ),
                ),
            ),
            Progress::ApplyingFilesAndOs { os, files } => pair(
                UPDATE_EXECUTED,
                APPLIED_FILES_AND_OS,
                (Unknown, Unknown),
                (
                    "Updating the Files and OS on disk as a part of the in progress phase",
                    format!(
                        "Applying files and new OS config to node. OS will {} need an update. SSH Keys will {} need an update",
                        not(*os),
                        not(*files)
                    ),
                ),
            ),
            Progress::AppliedFilesAndOs { os, files } => pair(
                UPDATE_EXECUTED,
                APPLIED_FILES_AND_OS,
                (True, True),
                (
                    "Updated the Files and OS on disk as a part of the in progress phase",
                    format!(
                        "Applied files and new OS config to node. OS did {} need an update. SSH Keys did {} need an update",
                        not(*os),
                        not(*files)
                    ),
                ),
            ),
            Progress::RebootRequired => single(
                REBOOTED_NODE,
                Unknown,
                REBOOTED_NODE,
                "Upgrade requires a reboot.".into(),
            ),
            Progress::NoRebootRequired => single(
                UPDATE_POST_ACTION_COMPLETE,
                True,
                "None",
                "Changes do not require a reboot".into(),
            ),
            Progress::ServiceReloaded { unit } => single(
                UPDATE_POST_ACTION_COMPLETE,
                True,
                UPDATE_POST_ACTION_COMPLETE,
                format!("Node has reloaded service {unit}"),
            ),
            Progress::Rebooted => single(
                REBOOTED_NODE,
                True,
                REBOOTED_NODE,
                "Node has rebooted".into(),
            ),
            Progress::Resumed { config, applying } => single(
                RESUMED,
                True,
                RESUMED,
                format!(
                    "In desired config {config}. Resumed normal operations.{}",
                    if *applying {
                        " Applying proper annotations."
                    } else {
                        ""
                    }
                ),
            ),
            Progress::Uncordoned => pair(
                UPDATE_COMPLETE,
                UNCORDONED,
                (True, True),
                (
                    "Uncordoned Node as part of completing upgrade phase",
                    "UnCordoned node. The node is reporting Unschedulable = false".into(),
                ),
            ),
            Progress::UncordonFailed { error } => pair(
                UPDATE_COMPLETE,
                UNCORDONED,
                (Unknown, Unknown),
                (
                    "Failed to Uncordon Node as part of completing upgrade phase",
                    format!(
                        "Error: Failed to UnCordon node. Error is: {error} The node is reporting Unschedulable = true"
                    ),
                ),
            ),
            Progress::Updated => single(
                UPDATED,
                True,
                UPDATED,
                format!("Node {} Updated", node.name),
            ),
            Progress::Degraded { error: None } => single(
                NODE_DEGRADED,
                False,
                NODE_DEGRADED,
                format!("Node {} upgrade succeeded", node.name),
            ),
            Progress::Degraded { error: Some(e) } => single(
                NODE_DEGRADED,
                True,
                NODE_DEGRADED,
                format!("Node {} upgrade failure. {e}", node.name),
            ),
            Progress::PullingImage { image } => single(
                IMAGE_PULLED_FROM_REGISTRY,
                Unknown,
                IMAGE_PULLED_FROM_REGISTRY,
                format!("Pulling OS image {image} from registry"),
            ),
            Progress::ImagePulled { image } => single(
                IMAGE_PULLED_FROM_REGISTRY,
                True,
                IMAGE_PULLED_FROM_REGISTRY,
                format!("Successfully pulled OS image {image} from registry"),
            ),
            Progress::ImagePullFailed { image, error } => single(
                IMAGE_PULLED_FROM_REGISTRY,
                False,
                IMAGE_PULLED_FROM_REGISTRY,
                format!("Failed to pull OS image {image} from registry: {error}"),
            ),
        }
    }
}

fn stamp(s: &Set, now: &str) -> Condition {
    Condition {
        kind: s.kind.to_string(),
        status: s.status,
        reason: s.reason.clone(),
        message: s.message.clone(),
        last_transition_time: now.to_string(),
    }
}

/// Folds `change` into `existing` as the MCO does; `None` when nothing is to be written (the
/// parent is already there with the same status and message). `desired` is the
/// MachineConfigNode's `spec.configVersion.desired`, named in the messages of the conditions
/// an `Updated=True` resets to False. `now` is an RFC 3339 time.
pub fn merge(
    existing: &[Condition],
    change: &Change,
    desired: &str,
    now: &str,
) -> Option<Vec<Condition>> {
    merge_with(existing, change, desired, now, &CONDITION_TYPES)
}

/// [`merge`] with the condition types a new object gets placeholders for (`types`, which
/// depend on the feature gates) and `target` named in the reset messages ("Action during
/// update to TARGET: ..."; see
/// [`update_target`](super::node_image_conditions::update_target)).
pub fn merge_with(
    existing: &[Condition],
    change: &Change,
    target: &str,
    now: &str,
    types: &[&str],
) -> Option<Vec<Condition>> {
    let desired = target;
    let parent = stamp(&change.parent, now);
    let child = change.child.as_ref().map(|c| stamp(c, now));
    if existing.is_empty() {
        // A new object: the step's conditions, then a placeholder for every other type.
        let mut out = vec![parent];
        out.extend(child);
        for &kind in types {
            if !out.iter().any(|c| c.kind == kind) {
                out.push(Condition {
                    kind: kind.to_string(),
                    status: False,
                    reason: NOT_YET_OCCURRED.to_string(),
                    message: format!("This node has not yet entered the {kind} phase"),
                    last_transition_time: now.to_string(),
                });
            }
        }
        return Some(out);
    }
    let reset = parent.kind == UPDATED;
    let (mut found_parent, mut found_child) = (false, false);
    let mut out = Vec::with_capacity(existing.len() + 2);
    for c in existing {
        let mut c = c.clone();
        if c.kind == UPDATED && c.status == True && c.kind != parent.kind {
            // Updated=True seen by any other step: something changed the node since.
            c = Condition {
                kind: UPDATED.to_string(),
                status: False,
                reason: UPDATED.to_string(),
                message: "This node is not updated, sensed disruption via a manual update."
                    .to_string(),
                last_transition_time: now.to_string(),
            };
        } else if let Some(child) = child.as_ref().filter(|ch| ch.kind == c.kind) {
            found_child = true;
            c = child.clone();
        } else if c.kind == parent.kind {
            found_parent = true;
            let unchanged = c.status == parent.status && c.message == parent.message;
            if unchanged && !SINGLETONS.contains(&c.kind.as_str()) {
                return None;
            }
            c = parent.clone();
        } else if c.status != False && reset && !SINGLETONS.contains(&c.kind.as_str()) {
            // (The MCO also resets the pinned-image conditions here: a node whose images
            // failed to pull would read PinnedImageSetsDegraded=False after any update. They
            // tell of the pinned image sets alone, so they are kept: docs/mcd-compatibility.md.)
            c.status = False;
            c.last_transition_time = now.to_string();
            c.message = format!("Action during update to {desired}: {}", c.message);
        }
        out.push(c);
    }
    if !found_child && let Some(child) = child {
        out.push(child);
    }
    if !found_parent {
        out.push(parent);
    }
    Some(out)
}

/// `status.configVersion.desired` after `change`: the node's `desiredConfig` once the update
/// is known to be compatible (any step but a failed preparation), else [`NOT_YET_SET`].
pub fn status_desired(change: &Change, desired_config: Option<&str>) -> String {
    let prepared = change.parent.kind == UPDATE_PREPARED;
    let compatible = !prepared || change.parent.status == True;
    match desired_config.filter(|d| !d.is_empty()) {
        Some(d) if compatible => d.to_string(),
        _ => NOT_YET_SET.to_string(),
    }
}

#[cfg(test)]
#[path = "node_conditions_tests.rs"]
mod tests;
