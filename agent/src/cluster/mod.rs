//! The agent's side of the cluster: its Node object and the node's pods.
//!
//! The Kubernetes client code the companion shares (the [`NodeApi`] trait and [`KubeNodeApi`],
//! drains through the Eviction API, the drain-controller handshake, events, retries, the
//! annotation protocol) lives in the `mco-kube` crate and is re-exported here, so that the
//! agent names it `crate::cluster::...` as before. What only the agent does with it is here:
//!
//! - [`pool`]: the node's pool, from the MachineConfigPools selecting it or its role labels.
//! - [`mcn`]: the node's MachineConfigNode, its conditions moved at each step of an update.
//! - [`mcn_pinned`]: the pinned image sets in that MachineConfigNode.
//! - [`pinned_watch`]: what the pinned image sets of the node are, followed through watches.
//! - [`feature_gates`]: the cluster's feature gates (`FeatureGate/cluster` at the cluster's
//!   version), read at start-up and followed; a change of the enabled set restarts the agent.
//! - [`policy_watch`]: `MachineConfiguration/cluster` followed through a watch, and the MCD's
//!   wait for its node disruption policy status.

pub mod feature_gates;
pub mod mcn;
pub mod mcn_pinned;
pub mod pinned_watch;
pub mod policy_watch;
pub mod pool;

pub use mco_kube::*;
