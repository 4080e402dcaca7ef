//! The node's MachineConfigNode (`machineconfiguration.openshift.io/v1`, named like the node):
//! created when missing (owned by the Node, so it goes with it), `spec` kept to the node's pool
//! and `desiredConfig`, and at each step of an update the conditions of
//! [`machine_config::mco::node_conditions`] written through the status subresource with
//! `status.configVersion` (from the Node's annotations) and `observedGeneration`. With the
//! cluster's `ImageModeStatusReporting` gate ([`Gates`]) also `spec.configImage` and
//! `status.configImage` (from the image annotations) and the gate's image conditions.
//!
//! The annotations stay the source of truth: a failure here is returned for the caller to log,
//! and the next step writes the whole state again (the conditions are recomputed from what the
//! object holds then), so a lost write heals itself.

use std::time::SystemTime;

use machine_config::irreconcilable::IrreconcilableChange;
use machine_config::mco::node_conditions::{
    Condition, NOT_YET_SET, NodeFacts, Progress, merge_with, status_desired,
};
use machine_config::mco::node_image_conditions::{Gates, update_target};
use serde_json::{Value, json};

use super::NodeApi;
use super::error::ClusterError;

pub use mco_kube::kube_mcn::{API_VERSION, KIND};

/// Held across each read-modify-write of the object's status: the update's steps and the
/// pinned image sets ([`super::mcn_pinned`]) write its conditions from two tasks, and a merge
/// patch of `status.conditions` replaces the list, so two writes interleaved would lose one.
pub(super) static WRITES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A new MachineConfigNode for `node` (UID `uid`) in `pool`, wanting `desired`.
pub fn new_object(node: &str, uid: &str, pool: &str, desired: &str) -> Value {
    with_spec(node, uid, spec(node, pool, desired))
}

pub(super) fn with_spec(node: &str, uid: &str, spec: Value) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": node,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}],
        },
        "spec": spec,
    })
}

fn spec(node: &str, pool: &str, desired: &str) -> Value {
    json!({
        "node": {"name": node},
        "pool": {"name": pool},
        "configVersion": {"desired": desired},
    })
}

/// `spec`, with the gate `configImage.desiredImage` (the `desiredImage` annotation, if any).
pub(super) fn gated_spec(
    node: &str,
    pool: &str,
    desired: &str,
    image: Option<&str>,
    gates: Gates,
) -> Value {
    let mut out = spec(node, pool, desired);
    if gates.image_mode_status_reporting {
        out["configImage"] = match image {
            Some(image) => json!({"desiredImage": image}),
            None => json!({}),
        };
    }
    out
}

/// `status.configImage` with the gate: the image annotations there are; `null` (removed by the
/// merge patch) when there are none, as the MCO's apply leaves it out.
fn config_image(current: Option<&str>, desired: Option<&str>) -> Value {
    let mut out = serde_json::Map::new();
    if let Some(c) = current {
        out.insert("currentImage".into(), json!(c));
    }
    if let Some(d) = desired {
        out.insert("desiredImage".into(), json!(d));
    }
    if out.is_empty() {
        Value::Null
    } else {
        Value::Object(out)
    }
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

pub(super) fn now() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// Writes `progress` into the node's MachineConfigNode (creating it, and correcting its spec,
/// first when needed), without feature gates. Nothing is written when nothing changes.
pub async fn report(
    api: &dyn NodeApi,
    pool: &str,
    progress: &Progress,
) -> Result<(), ClusterError> {
    report_with(api, pool, progress, Gates::default()).await
}

/// [`report`] under the cluster's feature `gates`.
pub async fn report_with(
    api: &dyn NodeApi,
    pool: &str,
    progress: &Progress,
    gates: Gates,
) -> Result<(), ClusterError> {
    report_batch(api, pool, std::slice::from_ref(progress), gates).await
}

/// Writes several steps' `progress`, in order, in one status write (what each would have
/// written one after the other, merged): the agent reports the steps of a short stretch of an
/// update together (`daemon::cluster`), so that an update costs a few writes, not one per
/// condition.
pub async fn report_batch(
    api: &dyn NodeApi,
    pool: &str,
    progress: &[Progress],
    gates: Gates,
) -> Result<(), ClusterError> {
    let _writing = WRITES.lock().await;
    let node = api.node_name().to_string();
    let annotations = api.annotations().await?;
    let facts = NodeFacts {
        name: &node,
        last_applied_drain: annotations.last_applied_drain().unwrap_or_default(),
    };
    let changes: Vec<_> = progress
        .iter()
        .flat_map(|p| gates.changes(p, &facts))
        .collect();
    if changes.is_empty() {
        return Ok(());
    }
    let desired = annotations
        .desired_config()
        .filter(|d| !d.is_empty())
        .unwrap_or(NOT_YET_SET)
        .to_string();
    let images = (
        annotations.current_image().filter(|i| !i.is_empty()),
        annotations.desired_image().filter(|i| !i.is_empty()),
    );
    let want_spec = gated_spec(&node, pool, &desired, images.1, gates);
    let object = match api.machine_config_node().await? {
        None => {
            let uid = api.node_uid().await?;
            api.create_machine_config_node(&with_spec(&node, &uid, want_spec))
                .await?
        }
        Some(o)
            if str_at(&o, "/spec/pool/name") != Some(pool)
                || str_at(&o, "/spec/configVersion/desired") != Some(desired.as_str())
                || str_at(&o, "/spec/node/name") != Some(node.as_str())
                || (gates.image_mode_status_reporting
                    && o.pointer("/spec/configImage/desiredImage")
                        .and_then(Value::as_str)
                        != images.1) =>
        {
            let mut patch_spec = want_spec;
            if patch_spec.get("configImage") == Some(&json!({})) {
                // a merge patch removes the image that went
                patch_spec["configImage"] = json!({"desiredImage": null});
            }
            api.patch_machine_config_node(&json!({"spec": patch_spec}), false)
                .await?
        }
        Some(o) => o,
    };
    let before = conditions(&object);
    let target = update_target(
        &desired,
        str_at(&object, "/spec/configImage/desiredImage"),
        str_at(&object, "/status/configImage/currentImage"),
    );
    let (now, types) = (now(), gates.condition_types());
    let mut merged: Option<Vec<Condition>> = None;
    for change in &changes {
        let base = merged.as_deref().unwrap_or(&before);
        if let Some(next) = merge_with(base, change, &target, &now, types) {
            merged = Some(next);
        }
    }
    let last = changes.last().expect("not empty");
    let mut version = json!({"desired": status_desired(last, annotations.desired_config())});
    if let Some(current) = annotations.current_config().filter(|c| !c.is_empty()) {
        version["current"] = json!(current);
    }
    let image = config_image(images.0, images.1);
    let same_image = !gates.image_mode_status_reporting
        || object.pointer("/status/configImage") == Some(&image)
        || (image.is_null() && object.pointer("/status/configImage").is_none());
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
    if merged.is_none() && same_version && same_generation && same_image {
        return Ok(());
    }
    let conditions = merged.unwrap_or(before);
    let mut patch = json!({"status": {
        "conditions": conditions,
        "configVersion": version,
        "observedGeneration": generation,
    }});
    if gates.image_mode_status_reporting {
        patch["status"]["configImage"] = image;
    }
    api.patch_machine_config_node(&patch, true).await?;
    Ok(())
}

/// Sets the MachineConfigNode's `status.irreconcilableChanges` to `changes` (removed when
/// empty), as the MCD's reporter does once the node is in its desired config; the object must
/// exist (the MCD's error otherwise). Nothing is written when it already says so.
pub async fn report_irreconcilable(
    api: &dyn NodeApi,
    changes: &[IrreconcilableChange],
) -> Result<(), ClusterError> {
    let Some(object) = api.machine_config_node().await? else {
        return Err(ClusterError::Client {
            action: "reporting irreconcilable differences".into(),
            message: format!(
                "MCN for {} node does not exist. Skipping irreconcilable differences reporting",
                api.node_name()
            ),
        });
    };
    let want = (!changes.is_empty()).then(|| json!(changes));
    if object.pointer("/status/irreconcilableChanges") == want.as_ref() {
        return Ok(());
    }
    let patch = json!({"status": {"irreconcilableChanges": want}});
    api.patch_machine_config_node(&patch, true).await?;
    Ok(())
}

#[cfg(test)]
#[path = "mcn_tests.rs"]
mod tests;
