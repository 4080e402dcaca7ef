//! A MachineConfigNode as a reader sees it (`machineconfiguration.openshift.io/v1`): the node
//! and pool it is for, the config it is updating to, and its update conditions
//! ([`node_conditions`](super::node_conditions)). The agent writes these objects as raw JSON
//! (`agent::cluster::mcn`); the companion's controller reads them for a node's progress, and
//! only for that: the Node's annotations stay the source of truth, as in the MCO.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::node_conditions::{
    APPLIED_FILES, APPLIED_FILES_AND_OS, APPLIED_OS_IMAGE, CORDONED, Condition, DRAINED,
    IMAGE_PULLED_FROM_REGISTRY, NODE_DEGRADED, NOT_YET_OCCURRED, REBOOTED_NODE, RESUMED, Status,
    UNCORDONED, UPDATE_COMPLETE, UPDATE_EXECUTED, UPDATE_POST_ACTION_COMPLETE, UPDATE_PREPARED,
    UPDATED,
};
use crate::machineconfig::{API_VERSION, GROUP, nullable};

/// The update's steps in the order an update takes them: of two conditions changed in the same
/// second, the later step is the node's latest.
pub const UPDATE_ORDER: [&str; 15] = [
    UPDATED,
    UPDATE_PREPARED,
    UPDATE_EXECUTED,
    CORDONED,
    DRAINED,
    IMAGE_PULLED_FROM_REGISTRY,
    APPLIED_FILES,
    APPLIED_OS_IMAGE,
    APPLIED_FILES_AND_OS,
    UPDATE_POST_ACTION_COMPLETE,
    REBOOTED_NODE,
    RESUMED,
    UPDATE_COMPLETE,
    UNCORDONED,
    NODE_DEGRADED,
];

/// A MachineConfigNode, with the fields a reader of a node's progress needs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigNode {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "nullable")]
    pub spec: MachineConfigNodeSpec,
    #[serde(default, deserialize_with = "nullable")]
    pub status: MachineConfigNodeStatus,
}

/// `spec`: the node, its pool and the config it should run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigNodeSpec {
    #[serde(default, deserialize_with = "nullable")]
    pub node: Name,
    #[serde(default, deserialize_with = "nullable")]
    pub pool: Name,
    #[serde(default, deserialize_with = "nullable")]
    pub config_version: ConfigVersion,
}

/// `status`: the update conditions and the config versions the agent reports.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigNodeStatus {
    #[serde(default, deserialize_with = "nullable")]
    pub conditions: Vec<Condition>,
    #[serde(default, deserialize_with = "nullable")]
    pub config_version: ConfigVersion,
}

/// `{name: ...}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Name {
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
}

/// `configVersion`: `desired` in the spec; `current` and `desired` in the status.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConfigVersion {
    #[serde(default, deserialize_with = "nullable")]
    pub current: String,
    #[serde(default, deserialize_with = "nullable")]
    pub desired: String,
}

/// Where a condition type comes in an update ([`UPDATE_ORDER`]); `None` for the types that are
/// not steps of an update (pinned image sets).
pub fn update_rank(kind: &str) -> Option<usize> {
    UPDATE_ORDER.iter().position(|k| *k == kind)
}

impl MachineConfigNode {
    /// `metadata.name` (the node's name).
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The condition of type `kind`, if the object has it.
    pub fn condition(&self, kind: &str) -> Option<&Condition> {
        self.status.conditions.iter().find(|c| c.kind == kind)
    }

    /// Whether the node says it runs `config` and is done (`Updated` True, and `configVersion`
    /// current is `config`).
    pub fn is_updated_to(&self, config: &str) -> bool {
        self.status.config_version.current == config
            && self.condition(UPDATED).map(|c| c.status) == Some(Status::True)
    }

    /// The message of a True `NodeDegraded` condition: why the node's update failed.
    pub fn degraded_message(&self) -> Option<&str> {
        self.condition(NODE_DEGRADED)
            .filter(|c| c.status == Status::True && !c.message.is_empty())
            .map(|c| c.message.as_str())
    }

    /// The step the node took last: the condition that changed last (of two in the same second,
    /// the later step of an update), leaving out the placeholders of a new object. `None` when
    /// nothing has happened yet.
    pub fn latest_step(&self) -> Option<&Condition> {
        let rank = update_rank;
        self.status
            .conditions
            .iter()
            .filter(|c| c.reason != NOT_YET_OCCURRED && rank(&c.kind).is_some())
            .max_by_key(|c| {
                (
                    c.last_transition_time.parse::<Timestamp>().ok(),
                    rank(&c.kind),
                )
            })
    }
}

crate::layering::resource!(MachineConfigNode, "MachineConfigNode", "machineconfignodes");

#[cfg(test)]
#[path = "machine_config_node_tests.rs"]
mod tests;
