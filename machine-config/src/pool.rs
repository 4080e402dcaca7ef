//! The `MachineConfigPool` object and label-selector matching.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::document::parse_value;
use crate::error::{Issue, ParseError};
use crate::ignition::{typed, unreachable_json};
use crate::machineconfig::{API_VERSION, GROUP, check_type_meta, nullable};
use crate::pinned_image_set::PinnedImageRef;

/// A MachineConfigPool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigPool {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "nullable")]
    pub spec: PoolSpec,
    #[serde(default, deserialize_with = "nullable")]
    pub status: PoolStatus,
}

/// `spec` of a pool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_config_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    #[serde(default, deserialize_with = "nullable")]
    pub paused: bool,
    /// The rendered config targeted for this pool.
    #[serde(default, deserialize_with = "nullable")]
    pub configuration: PoolConfiguration,
    /// The PinnedImageSets whose images the pool's nodes pull and pin, by name (filled by the
    /// controller: [`crate::pinned_image_set::pool_set_names`]).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub pinned_image_sets: Vec<PinnedImageRef>,
}

/// A rendered config reference with the MachineConfigs it was rendered from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolConfiguration {
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub name: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub source: Vec<ObjectReference>,
}

/// `status` of a pool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolStatus {
    #[serde(default, deserialize_with = "nullable")]
    pub observed_generation: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub configuration: PoolConfiguration,
    #[serde(default, deserialize_with = "nullable")]
    pub machine_count: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub updated_machine_count: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub ready_machine_count: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub unavailable_machine_count: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub degraded_machine_count: i64,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<PoolCondition>,
}

/// A status condition (`Updated`, `Updating`, `Degraded`, `RenderDegraded`, ...).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub reason: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub message: String,
}

impl MachineConfigPool {
    /// Parses a pool from YAML or JSON.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, ParseError> {
        Self::from_value(parse_value(bytes)?)
    }

    /// Parses a pool from a decoded JSON value, checking `maxUnavailable`.
    pub fn from_value(value: Value) -> Result<Self, ParseError> {
        check_type_meta(&value, "MachineConfigPool")?;
        let pool: MachineConfigPool = typed(value)?;
        if let Some(IntOrString::String(s)) = &pool.spec.max_unavailable
            && parse_percent(s).is_none()
        {
            return Err(ParseError::Invalid(vec![Issue::new(
                "$.spec.maxUnavailable",
                format!("invalid value {s:?}: must be an integer or a percentage like \"10%\""),
            )]));
        }
        Ok(pool)
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// How many of `total` nodes may be updating at once: `maxUnavailable` as a count or a
    /// percentage of `total` rounded down, default 1, never less than 1 (the MCO's rule).
    pub fn max_unavailable(&self, total: usize) -> usize {
        let n = match &self.spec.max_unavailable {
            None => 1,
            Some(IntOrString::Int(i)) => usize::try_from(*i).unwrap_or(0),
            Some(IntOrString::String(s)) => {
                parse_percent(s).map_or(1, |p| (total as u128 * u128::from(p) / 100) as usize)
            }
        };
        n.max(1)
    }

    /// Whether the pool's `machineConfigSelector` selects a MachineConfig with these labels
    /// (a missing or empty selector selects nothing, as in the MCO).
    pub fn selects_machine_config(&self, labels: &BTreeMap<String, String>) -> bool {
        pool_selects(self.spec.machine_config_selector.as_ref(), labels)
    }

    /// Whether the pool's `nodeSelector` selects a node with these labels (a missing or empty
    /// selector selects nothing, as in the MCO).
    pub fn selects_node(&self, labels: &BTreeMap<String, String>) -> bool {
        pool_selects(self.spec.node_selector.as_ref(), labels)
    }

    /// Serializes to compact JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| unreachable_json(&e))
    }
}

/// The pool a node belongs to, decided as the MCO does (`GetPoolsForNode`): among the pools
/// whose `nodeSelector` selects the node's `labels`, a custom pool (neither `master` nor
/// `worker`) wins over `worker`, and `master` wins over both; more than one custom pool is an
/// error naming the node. `None` when no pool selects the node (it is not managed).
pub fn primary_pool<'a>(
    node: &str,
    labels: &BTreeMap<String, String>,
    pools: &'a [MachineConfigPool],
) -> Result<Option<&'a MachineConfigPool>, String> {
    let matching = pools.iter().filter(|p| p.selects_node(labels));
    let (mut master, mut worker, mut custom) = (None, None, Vec::new());
    for pool in matching {
        match pool.name() {
            "master" => master = Some(pool),
            "worker" => worker = Some(pool),
            _ => custom.push(pool),
        }
    }
    match custom.as_slice() {
        [_, _, ..] => Err(format!(
            "node {node} belongs to {} custom roles, cannot proceed with this Node",
            custom.len()
        )),
        [only] => Ok(Some(master.unwrap_or(only))),
        [] => Ok(master.or(worker)),
    }
}

/// Every pool a node is in, as the MCO lists them (`GetPoolsForNode`): its
/// [`primary_pool`], and `worker` besides a custom pool when `worker` selects the node too (a
/// custom pool's nodes keep the worker pool's pinned images, for one).
pub fn pools_for_node<'a>(
    node: &str,
    labels: &BTreeMap<String, String>,
    pools: &'a [MachineConfigPool],
) -> Result<Vec<&'a MachineConfigPool>, String> {
    let Some(primary) = primary_pool(node, labels, pools)? else {
        return Ok(Vec::new());
    };
    let mut out = vec![primary];
    if !matches!(primary.name(), "master" | "worker")
        && let Some(worker) = pools
            .iter()
            .find(|p| p.name() == "worker" && p.selects_node(labels))
    {
        out.push(worker);
    }
    Ok(out)
}

fn pool_selects(sel: Option<&LabelSelector>, labels: &BTreeMap<String, String>) -> bool {
    sel.is_some_and(|s| !selector_is_empty(s) && selector_matches(s, labels))
}

/// A selector with no requirements.
pub fn selector_is_empty(sel: &LabelSelector) -> bool {
    sel.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
        && sel.match_expressions.as_ref().is_none_or(Vec::is_empty)
}

fn parse_percent(s: &str) -> Option<u32> {
    s.strip_suffix('%')?.parse().ok()
}

/// Kubernetes label-selector semantics: every `matchLabels` pair and every `matchExpressions`
/// requirement must hold; an empty selector matches everything. Unknown operators match nothing.
pub fn selector_matches(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let pairs_ok = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let exprs_ok = sel.match_expressions.iter().flatten().all(|req| {
        let values = req.values.as_deref().unwrap_or_default();
        let current = labels.get(&req.key);
        match req.operator.as_str() {
            "In" => current.is_some_and(|v| values.contains(v)),
            "NotIn" => current.is_none_or(|v| !values.contains(v)),
            "Exists" => current.is_some(),
            "DoesNotExist" => current.is_none(),
            _ => false,
        }
    });
    pairs_ok && exprs_ok
}

impl k8s_openapi::Resource for MachineConfigPool {
    const API_VERSION: &'static str = API_VERSION;
    const GROUP: &'static str = GROUP;
    const KIND: &'static str = "MachineConfigPool";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "machineconfigpools";
    type Scope = k8s_openapi::ClusterResourceScope;
}

impl k8s_openapi::Metadata for MachineConfigPool {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod primary_pool_tests {
    use super::*;

    fn pool(name: &str) -> MachineConfigPool {
        MachineConfigPool::from_value(serde_json::json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfigPool",
            "metadata": {"name": name},
            "spec": {"nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}}},
        }))
        .unwrap()
    }

    #[test]
    fn the_mcos_rules() {
        let pools: Vec<_> = ["worker", "infra", "master", "gpu"].map(pool).into();
        let pick = |roles: &[&str]| {
            let labels = roles
                .iter()
                .map(|r| (format!("node-role.kubernetes.io/{r}"), String::new()))
                .collect();
            primary_pool("n", &labels, &pools).map(|p| p.map(|p| p.name().to_string()))
        };
        let some = |n: &str| Ok(Some(n.to_string()));
        assert_eq!(pick(&[]), Ok(None));
        assert_eq!(pick(&["worker"]), some("worker"));
        assert_eq!(pick(&["infra"]), some("infra"));
        assert_eq!(pick(&["worker", "infra"]), some("infra"));
        assert_eq!(pick(&["worker", "master"]), some("master"));
        assert_eq!(pick(&["master", "infra", "worker"]), some("master"));
        let two = Err("node n belongs to 2 custom roles, cannot proceed with this Node".into());
        assert_eq!(pick(&["worker", "infra", "gpu"]), two);
        assert_eq!(pick(&["master", "infra", "gpu"]), two);
    }

    #[test]
    fn every_pool_of_a_node() {
        let pools: Vec<_> = ["worker", "infra", "master"].map(pool).into();
        let names = |roles: &[&str]| {
            let labels = roles
                .iter()
                .map(|r| (format!("node-role.kubernetes.io/{r}"), String::new()))
                .collect();
            pools_for_node("n", &labels, &pools)
                .unwrap()
                .iter()
                .map(|p| p.name().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&["worker"]), ["worker"]);
        assert_eq!(names(&["worker", "infra"]), ["infra", "worker"]);
        assert_eq!(names(&["infra"]), ["infra"]);
        assert_eq!(names(&["worker", "master"]), ["master"]);
        assert!(names(&[]).is_empty());
    }

    #[test]
    fn a_pool_without_a_node_selector_selects_nothing() {
        let mut empty = pool("empty");
        empty.spec.node_selector = None;
        let labels = BTreeMap::from([("node-role.kubernetes.io/empty".to_string(), String::new())]);
        assert_eq!(primary_pool("n", &labels, &[empty]), Ok(None));
    }
}
