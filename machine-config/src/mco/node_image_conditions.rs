//! The MachineConfigNode as the MCD writes it with the `ImageModeStatusReporting` feature gate
//! (Tech Preview on current releases; off by default): files and OS are two conditions
//! (`AppliedFiles`, `AppliedOSImage`) instead of `AppliedFilesAndOS`, each OS image pull is
//! reported (`ImagePulledFromRegistry`), `spec.configImage.desiredImage` and
//! `status.configImage` follow the node's image annotations, and the messages of an update to
//! an image name the image. Without the gate none of this is written, as upstream.

use super::node_conditions::{
    APPLIED_FILES, APPLIED_OS_IMAGE, Change, DRAINED, IMAGE_PULLED_FROM_REGISTRY, NODE_DEGRADED,
    NodeFacts, PINNED_IMAGE_SETS_DEGRADED, PINNED_IMAGE_SETS_PROGRESSING, Progress, REBOOTED_NODE,
    RESUMED, Status, UNCORDONED, UPDATE_COMPLETE, UPDATE_EXECUTED, UPDATE_POST_ACTION_COMPLETE,
    UPDATE_PREPARED, UPDATED, pair,
};
use super::node_conditions::{CONDITION_TYPES, CORDONED};

/// Condition types of a new object with the gate, in the MCO's order.
pub const IMAGE_MODE_CONDITION_TYPES: [&str; 16] = [
    UPDATE_PREPARED,
    UPDATE_EXECUTED,
    UPDATE_POST_ACTION_COMPLETE,
    UPDATE_COMPLETE,
    RESUMED,
    DRAINED,
    APPLIED_FILES,
    APPLIED_OS_IMAGE,
    CORDONED,
    REBOOTED_NODE,
    UPDATED,
    UNCORDONED,
    IMAGE_PULLED_FROM_REGISTRY,
    NODE_DEGRADED,
    PINNED_IMAGE_SETS_DEGRADED,
    PINNED_IMAGE_SETS_PROGRESSING,
];

/// The cluster's feature gates that change what the MachineConfigNode holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gates {
    /// `ImageModeStatusReporting`.
    pub image_mode_status_reporting: bool,
}

impl Gates {
    /// The condition types a new object gets placeholders for.
    pub fn condition_types(&self) -> &'static [&'static str] {
        if self.image_mode_status_reporting {
            &IMAGE_MODE_CONDITION_TYPES
        } else {
            &CONDITION_TYPES
        }
    }

    /// What `progress` writes, in order (each change one write): nothing for an image pull
    /// without the gate, two changes for files and OS applied together with it.
    pub fn changes(&self, progress: &Progress, node: &NodeFacts<'_>) -> Vec<Change> {
        let gated = self.image_mode_status_reporting;
        match progress {
            Progress::PullingImage { .. }
            | Progress::ImagePulled { .. }
            | Progress::ImagePullFailed { .. }
                if !gated =>
            {
                vec![]
            }
            Progress::ApplyingFilesAndOs { os, files } if gated => {
                split(*files, *os, false).collect()
            }
            Progress::AppliedFilesAndOs { os, files } if gated => {
                split(*files, *os, true).collect()
            }
            other => vec![other.change(node)],
        }
    }
}

/// The gate's `AppliedFiles` then `AppliedOSImage` changes (`done`: applied, else applying).
fn split(files: bool, os: bool, done: bool) -> impl Iterator<Item = Change> {
    use Status::{True, Unknown};
    let status = if done {
        (True, True)
    } else {
        (Unknown, Unknown)
    };
    let files = files.then(|| {
        let messages = if done {
            (
                "Updated the Files on disk as a part of the in progress phase",
                "Applied files. SSH Keys did need an update",
            )
        } else {
            (
                "Updating the Files on disk as a part of the in progress phase",
                "Applying files to node.",
            )
        };
        pair(
            UPDATE_EXECUTED,
            APPLIED_FILES,
            status,
            (messages.0, messages.1.to_string()),
        )
    });
    let os = os.then(|| {
        let messages = if done {
            (
                "Updated the OS on disk as a part of the in progress phase",
                "Applied new OS config to node.",
            )
        } else {
            (
                "Updating the OS on disk as a part of the in progress phase",
                "Applying new OS config to node.",
            )
        };
        pair(
            UPDATE_EXECUTED,
            APPLIED_OS_IMAGE,
            status,
            (messages.0, messages.1.to_string()),
        )
    });
    files.into_iter().chain(os)
}

/// What "Action during update to TARGET: ..." names when `Updated=True` resets the other
/// conditions: the desired image when the object's `spec.configImage.desiredImage` differs from
/// its `status.configImage.currentImage`, "disable image mode" when the image goes, else the
/// desired config (both images are empty without the gate).
pub fn update_target(
    desired_config: &str,
    desired_image: Option<&str>,
    current_image: Option<&str>,
) -> String {
    let desired_image = desired_image.unwrap_or_default();
    if desired_image == current_image.unwrap_or_default() {
        desired_config.to_string()
    } else if desired_image.is_empty() {
        "disable image mode".to_string()
    } else {
        desired_image.to_string()
    }
}

#[cfg(test)]
#[path = "node_image_conditions_tests.rs"]
mod tests;
