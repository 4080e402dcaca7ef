//! The node's MachineConfigNode (`machineconfiguration.openshift.io/v1`, named like the node):
//! created when missing (owned by the Node, so it goes with it), `spec` kept to the node's pool
//! and `desiredConfig`, and at each step of an update the conditions of
//! [`machine_config::mco::node_conditions`] written through the status subresource with
//! `status.configVersion` (from the Node's annotations) and `observedGeneration`.
//!
//! The annotations stay the source of truth: a failure here is returned for the caller to log,
//! and the next step writes the whole state again (the conditions are recomputed from what the
//! object holds then), so a lost write heals itself.

use std::time::SystemTime;

use machine_config::mco::node_conditions::{
    Condition, NOT_YET_SET, NodeFacts, Progress, merge, status_desired,
};
use serde_json::{Value, json};

use super::NodeApi;
use super::error::ClusterError;

/// API version and kind of the object.
pub const API_VERSION: &str = "machineconfiguration.openshift.io/v1";
pub const KIND: &str = "MachineConfigNode";

/// A new MachineConfigNode for `node` (UID `uid`) in `pool`, wanting `desired`.
pub fn new_object(node: &str, uid: &str, pool: &str, desired: &str) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": node,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}],
        },
        "spec": spec(node, pool, desired),
    })
}

fn spec(node: &str, pool: &str, desired: &str) -> Value {
    json!({
        "node": {"name": node},
        "pool": {"name": pool},
        "configVersion": {"desired": desired},
    })
}

fn str_at<'a>(object: &'a Value, pointer: &str) -> Option<&'a str> {
    object.pointer(pointer).and_then(Value::as_str)
}

/// The conditions of `object` (entries that do not parse are dropped: they are rewritten).
pub fn conditions(object: &Value) -> Vec<Condition> {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|all| {
            all.iter()
                .filter_map(|c| serde_json::from_value(c.clone()).ok())
                .collect()
        })
        .unwrap_or_default()
}

fn now() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// Writes `progress` into the node's MachineConfigNode (creating it, and correcting its spec,
/// first when needed). Nothing is written when nothing changes.
pub async fn report(
    api: &dyn NodeApi,
    pool: &str,
    progress: &Progress,
) -> Result<(), ClusterError> {
    let node = api.node_name().to_string();
    let annotations = api.annotations().await?;
    let desired = annotations
        .desired_config()
        .filter(|d| !d.is_empty())
        .unwrap_or(NOT_YET_SET)
        .to_string();
    let object = match api.machine_config_node().await? {
        None => {
            let uid = api.node_uid().await?;
            api.create_machine_config_node(&new_object(&node, &uid, pool, &desired))
                .await?
        }
        Some(o)
            if str_at(&o, "/spec/pool/name") != Some(pool)
                || str_at(&o, "/spec/configVersion/desired") != Some(desired.as_str())
                || str_at(&o, "/spec/node/name") != Some(node.as_str()) =>
        {
            let patch = json!({"spec": spec(&node, pool, &desired)});
            api.patch_machine_config_node(&patch, false).await?
        }
        Some(o) => o,
    };
    let facts = NodeFacts {
        name: &node,
        last_applied_drain: annotations.last_applied_drain().unwrap_or_default(),
    };
    let change = progress.change(&facts);
    let before = conditions(&object);
    let merged = merge(&before, &change, &desired, &now());
    let mut version = json!({"desired": status_desired(&change, annotations.desired_config())});
    if let Some(current) = annotations.current_config().filter(|c| !c.is_empty()) {
        version["current"] = json!(current);
    }
    let generation = object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(1)
        .max(1);
    let same_version = object.pointer("/status/configVersion") == Some(&version);
    let same_generation = object
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64)
        == Some(generation);
    if merged.is_none() && same_version && same_generation {
        return Ok(());
    }
    let conditions = merged.unwrap_or(before);
    let patch = json!({"status": {
        "conditions": conditions,
        "configVersion": version,
        "observedGeneration": generation,
    }});
    api.patch_machine_config_node(&patch, true).await?;
    Ok(())
}

#[cfg(test)]
#[path = "mcn_tests.rs"]
mod tests;
