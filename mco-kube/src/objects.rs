//! The core/v1 Pod and Node (and the policy/v1 PodDisruptionBudget) as the agent reads them: the object's metadata and only the spec
//! and status fields the agent looks at; serde skips the rest of the JSON.
//!
//! Why not k8s-openapi's `Pod` and `Node`: their deserializers cover every field of the API
//! (volume sources, probes, affinity, container statuses, node conditions and images...), and
//! each is compiled into the agent for a list, a watch or a patch's answer whose other fields
//! it never reads (about 330 KB of the release binary; docs/benchmarks.md, "Size").
//!
//! These types are read-only on purpose: they implement `Deserialize` but not `Serialize`, so
//! kube's `Api::replace`/`create` do not accept them and a slim object can never be written
//! back (a PUT of one would drop every field it does not hold). The agent changes a Node with
//! merge patches and evicts pods through the Eviction subresource only.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde::Deserialize;
use serde::de::IgnoredAny;

/// A Pod as the drain reads it (see [`crate::drain::pods`]).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Pod {
    /// Name, namespace, uid, annotations (mirror pods), ownerReferences (DaemonSets),
    /// deletionTimestamp and finalizers.
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: Option<PodSpec>,
    pub status: Option<PodStatus>,
}

/// `spec` of a [`Pod`].
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodSpec {
    pub volumes: Option<Vec<Volume>>,
}

/// One of a pod's volumes: only whether it is an emptyDir (its data is lost with the pod).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Volume {
    /// Present (any content) when the volume is an emptyDir; `null` counts as absent, as it
    /// does for k8s-openapi's `Option<EmptyDirVolumeSource>`.
    #[serde(rename = "emptyDir")]
    pub empty_dir: Option<IgnoredAny>,
}

/// `status` of a [`Pod`].
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodStatus {
    /// `Pending`, `Running`, `Succeeded`, `Failed` or `Unknown`.
    pub phase: Option<String>,
}

// Same paths, kind and scope as k8s-openapi's types, so `Api<Pod>` lists, gets and watches them.
machine_config::api_resource!(
    Pod,
    "",
    "v1",
    "v1",
    "Pod",
    "pods",
    k8s_openapi::NamespaceResourceScope
);

/// A Node as the agent reads it: its annotations (the MCD protocol), labels (the pool), uid
/// (events) and whether it is cordoned.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Node {
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: Option<NodeSpec>,
}

/// `spec` of a [`Node`].
#[derive(Debug, Clone, Default, Deserialize)]
pub struct NodeSpec {
    pub unschedulable: Option<bool>,
}

machine_config::api_resource!(
    Node,
    "",
    "v1",
    "v1",
    "Node",
    "nodes",
    k8s_openapi::ClusterResourceScope
);

/// A policy/v1 PodDisruptionBudget as the agent reads it while a drain controller drains its
/// node: which pods it selects and whether it allows a disruption now
/// ([`crate::drain::holders`]).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodDisruptionBudget {
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: Option<PodDisruptionBudgetSpec>,
    pub status: Option<PodDisruptionBudgetStatus>,
}

/// `spec` of a [`PodDisruptionBudget`].
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodDisruptionBudgetSpec {
    /// Absent selects no pod, `{}` every pod of the namespace (policy/v1).
    pub selector: Option<LabelSelector>,
}

/// `status` of a [`PodDisruptionBudget`], as the disruption controller writes it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodDisruptionBudgetStatus {
    #[serde(default)]
    pub disruptions_allowed: i32,
    #[serde(default)]
    pub current_healthy: i32,
    #[serde(default)]
    pub desired_healthy: i32,
}

machine_config::api_resource!(
    PodDisruptionBudget,
    "policy",
    "policy/v1",
    "v1",
    "PodDisruptionBudget",
    "poddisruptionbudgets",
    k8s_openapi::NamespaceResourceScope
);

#[cfg(test)]
#[path = "objects_tests.rs"]
mod tests;
