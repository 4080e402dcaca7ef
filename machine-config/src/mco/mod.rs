//! The machine-config operator's names on a node, defined once for the agent, the companion
//! and `mco-firstboot`: the files the MCD and the config server (MCS) read and write
//! ([`paths`]), the Node annotations of the MCD protocol ([`annotations`]), the node states
//! ([`NodeState`]), the reasons of the events the MCD records ([`events`]) and the
//! MachineConfigNode conditions it moves at each step of an update ([`node_conditions`]) and
//! how a reader finds a node's progress in them ([`machine_config_node`]).
//!
//! Every value here is the MCO's own spelling: a node or a cluster run by the MCO reads the
//! same files and keys.

pub mod annotations;
pub mod events;
pub mod image;
pub mod machine_config_node;
pub mod node_conditions;
pub mod node_image_conditions;
pub mod paths;
pub mod pinned_images;
pub mod states;

pub use states::{NodeState, UnknownState};

/// Name of the empty config a node starts from before anything was applied (the MCD's
/// first-boot baseline, `mco-empty-mc`).
pub const EMPTY_CONFIG_NAME: &str = "mco-empty-mc";

/// The taint the MCC's node controller keeps on the nodes of a pool that are still waiting to
/// be targeted by its rollout (`pkg/constants`: `NodeUpdateInProgressTaint`), so that the
/// scheduler prefers nodes that will not be drained soon: key `UpdateInProgress`, no value,
/// effect `PreferNoSchedule`.
pub const UPDATE_IN_PROGRESS_TAINT_KEY: &str = "UpdateInProgress";
pub const UPDATE_IN_PROGRESS_TAINT_EFFECT: &str = "PreferNoSchedule";
