//! The Kubernetes side both binaries share: the Node object and the node's pods, as the agent
//! drives them on its own node and the companion's drain controller drives them for a node.
//!
//! - [`annotations`]: the MCD's `machineconfiguration.openshift.io/*` annotation protocol.
//! - [`NodeApi`]: what the agent's daemon calls (report state, set the current config, drain,
//!   uncordon, follow `desiredConfig`, record events, read rendered MachineConfigs, its
//!   MachineConfigNode), with [`KubeNodeApi`] on a real API server and `FakeNodeApi` in memory
//!   (feature `fakes`).
//! - [`drain`]: cordon and drain through the Eviction API ([`Drainer`], also the companion's
//!   drain controller's); [`DrainMode::Controller`] hands draining to a drain controller through
//!   `desiredDrain`/`lastAppliedDrain` instead.
//! - [`events`]: core/v1 Events with the MCD's reasons and source.
//! - [`fleet`]: the pools and nodes as `kubectl mco status` and the companion's status page
//!   show them (one reader for both).
//! - [`objects`]: the Pod and Node as the drain reads them (the fields it uses; read-only).
//! - [`kube_mcn`]: the node's MachineConfigNode read, created and patched (what its conditions
//!   say is the agent's business); the object each write returns is kept, so the next write
//!   reads no copy from the API server.
//! - `node_view`: the Node as the agent's watch and its own writes last showed it, read instead
//!   of a GET before each write (docs/benchmarks.md, "API requests per update").
//!
//! Every write is retried through transient failures (conflicts, throttling, 5xx, hung or
//! dropped connections) until it lands or the caller drops it ([`retry`]).
//!
//! Neither binary's library is below this crate: `mco-agent` and `mco-companion` both build on
//! it and on `machine-config`, never on each other (`agent/tests/layers.rs` checks).

pub mod annotations;
mod client;
mod controller_drain;
pub mod drain;
pub mod error;
pub mod events;
#[cfg(any(test, feature = "fakes"))]
mod fake;
pub mod fleet;
mod handshake;
pub mod kube_mcn;
mod kube_node;
mod named;
mod node_view;
pub mod objects;
pub mod retry;

use std::collections::BTreeMap;
use std::path::PathBuf;

use async_trait::async_trait;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::ConfigMap;
use machine_config::ControllerConfig;
use machine_config::feature_gates::{ClusterVersion, FeatureGate};
use machine_config::mco::NodeState;
use machine_config::mco::events::DEFAULT_EVENT_NAMESPACE;
use machine_config::{MachineConfig, MachineConfigPool, MachineConfiguration};
use serde_json::Value;

pub use annotations::{DesiredTarget, NodeAnnotations};
pub use client::{KUBELET_KUBECONFIG, client_from_kubeconfig, node_name};
pub use drain::{DrainOptions, DrainReport, Drainer};
pub use error::{BlockedPod, Blocker, ClusterError, DrainError};
#[cfg(any(test, feature = "fakes"))]
pub use fake::FakeNodeApi;
pub use handshake::HandshakeOptions;
pub use kube_node::KubeNodeApi;
pub use retry::RetryPolicy;

/// Who drains the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DrainMode {
    /// The agent cordons and evicts itself (the default).
    #[default]
    Agent,
    /// A drain controller does, asked through `desiredDrain` (as the MCD asks the MCO's).
    Controller,
}

/// How the agent talks to the cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterOptions {
    pub node_name: String,
    /// Credentials for node writes and events (the kubelet's by default).
    pub kubeconfig: PathBuf,
    /// Separate credentials for listing and evicting pods, if any.
    pub eviction_kubeconfig: Option<PathBuf>,
    pub drain_mode: DrainMode,
    pub drain: DrainOptions,
    pub handshake: HandshakeOptions,
    /// Namespace of the node's events.
    pub event_namespace: String,
    pub retry: RetryPolicy,
}

impl ClusterOptions {
    /// Defaults for `node_name`: the kubelet's kubeconfig, agent-driven drains with the MCD's
    /// timeouts, events where the MCD puts them.
    pub fn new(node_name: &str) -> Self {
        Self {
            node_name: node_name.to_string(),
            kubeconfig: PathBuf::from(KUBELET_KUBECONFIG),
            eviction_kubeconfig: None,
            drain_mode: DrainMode::Agent,
            drain: DrainOptions::default(),
            handshake: HandshakeOptions::default(),
            event_namespace: DEFAULT_EVENT_NAMESPACE.to_string(),
            retry: RetryPolicy::default(),
        }
    }
}

/// The node's side of the MCD protocol. Writes retry transient API failures until they land;
/// bound a call with a timeout (or drop it) to give up.
#[async_trait]
pub trait NodeApi: Send + Sync {
    fn node_name(&self) -> &str;

    /// The node's annotations, read fresh.
    async fn annotations(&self) -> Result<NodeAnnotations, ClusterError>;

    /// Writes `state` and `reason` (cut to 2000 characters).
    async fn report(&self, state: NodeState, reason: &str) -> Result<(), ClusterError>;

    /// The MCD's SetDone: `currentConfig=config`, `state=Done`, `reason=""`, in one write.
    async fn set_current(&self, config: &str) -> Result<(), ClusterError>;

    /// Sets (Some) or removes (None) annotations in one write, e.g. `post-config-action`.
    async fn set_annotations(&self, changes: &[(&str, Option<&str>)]) -> Result<(), ClusterError>;

    /// Cordons and drains the node before applying `config` (events `Cordon`, `Drain`, and
    /// `FailedToDrain` with the error naming the blocking pods and budgets on failure).
    async fn drain(&self, config: &str) -> Result<(), ClusterError>;

    /// Makes the node schedulable after `config` is applied (event `Uncordon`).
    async fn uncordon(&self, config: &str) -> Result<(), ClusterError>;

    /// `desiredConfig` (with `desiredImage`) now and whenever either changes (consecutive
    /// repeats dropped). Never ends; a broken watch is re-established with backoff.
    fn desired(&self) -> BoxStream<'static, DesiredTarget>;

    /// Records an Event on the node with one of the MCD's reasons ([`machine_config::mco::events::reason`]).
    async fn event(&self, reason: &str, message: &str) -> Result<(), ClusterError>;

    /// Reads a (rendered) MachineConfig by name, as the MCD reads the desired one.
    async fn get_machine_config(&self, name: &str) -> Result<MachineConfig, ClusterError>;

    /// The node's labels, read fresh.
    async fn labels(&self) -> Result<BTreeMap<String, String>, ClusterError>;

    /// Every MachineConfigPool (the node's credentials may not be allowed to list them).
    async fn machine_config_pools(&self) -> Result<Vec<MachineConfigPool>, ClusterError>;

    /// `MachineConfiguration/cluster` now and whenever it changes (`None` while it does not
    /// exist). Never ends; a broken watch is re-established with backoff.
    fn machine_configuration(&self) -> BoxStream<'static, Option<MachineConfiguration>>;

    /// The ControllerConfig `machine-config-controller` now and whenever it changes (`None`
    /// while it does not exist or cannot be read). Never ends.
    fn controller_config(&self) -> BoxStream<'static, Option<ControllerConfig>>;

    /// `FeatureGate/cluster` now and whenever it changes (`None` while it does not exist or
    /// cannot be read). Never ends.
    fn feature_gate(&self) -> BoxStream<'static, Option<FeatureGate>>;

    /// `ClusterVersion/version` now and whenever it changes (`None` while it does not exist or
    /// cannot be read). Never ends.
    fn cluster_version(&self) -> BoxStream<'static, Option<ClusterVersion>>;

    /// Reads a ConfigMap; `None` when it does not exist.
    async fn config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ConfigMap>, ClusterError>;

    /// The Node's UID (for owner references).
    async fn node_uid(&self) -> Result<String, ClusterError>;

    /// The node's MachineConfigNode (named like the node), `None` when there is none.
    async fn machine_config_node(&self) -> Result<Option<Value>, ClusterError>;

    /// Creates the node's MachineConfigNode; returns it as stored.
    async fn create_machine_config_node(&self, object: &Value) -> Result<Value, ClusterError>;

    /// Merge-patches the node's MachineConfigNode (`status`: through the status subresource,
    /// as the API requires for `status`); returns it as stored.
    async fn patch_machine_config_node(
        &self,
        patch: &Value,
        status: bool,
    ) -> Result<Value, ClusterError>;
}
