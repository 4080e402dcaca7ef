//! The node controller's decisions, as pure functions over Nodes and pools (the MCO's
//! `LayeredNodeState`, `getAllCandidateMachines`, `sortNodeList` and `calculateStatus` for
//! non-layered pools):
//!
//! - a node is *done* when `currentConfig == desiredConfig` (both set), `currentImage ==
//!   desiredImage` (both absent outside image mode) and `state == Done`;
//! - *ready* when no `Ready` condition says other than True, no `DiskPressure` or
//!   `NetworkUnavailable` condition says other than False, and it is schedulable;
//! - *failing* when current ≠ desired and the state is `Degraded` or `Unreconcilable`;
//! - *unavailable* when not ready, or not done and not failing (working, or not started);
//! - a rollout step targets at most `maxUnavailable − unavailable − failing` ready nodes whose
//!   desired config (or, in an image-mode pool, desired image) is not their target, by zone
//!   label then age (oldest first), never in a paused pool.
//!
//! A node's *target* is its per-node rendered config when it has MachineConfigs of its own, else
//! the pool's `spec.configuration.name`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use machine_config::MachineConfigPool;
use machine_config::mco::NodeState;
use machine_config::mco::annotations::{
    CURRENT_CONFIG, CURRENT_IMAGE, DESIRED_CONFIG, DESIRED_IMAGE, REASON, STATE,
};
use machine_config::pool::{PoolCondition, PoolStatus};

/// The zone label candidates are ordered by.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

fn annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// The node's `state` annotation; `None` when absent, empty or not a state.
fn state(node: &Node) -> Option<NodeState> {
    annotation(node, STATE)?.parse().ok()
}

/// `metadata.name`.
pub fn name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

/// The node's `desiredConfig` annotation.
pub fn desired(node: &Node) -> Option<&str> {
    annotation(node, DESIRED_CONFIG)
}

/// The node's `desiredImage` annotation (image-mode pools).
pub fn desired_image(node: &Node) -> Option<&str> {
    annotation(node, DESIRED_IMAGE)
}

/// Current == desired (both set), the same image (or none), and the daemon reports `Done`.
pub fn is_done(node: &Node) -> bool {
    let current = annotation(node, CURRENT_CONFIG);
    current.is_some()
        && current == desired(node)
        && annotation(node, CURRENT_IMAGE) == desired_image(node)
        && state(node) == Some(NodeState::Done)
}

/// Why the node cannot take workloads, if it cannot.
pub fn not_ready(node: &Node) -> Option<String> {
    let conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(Vec::as_slice)
        .unwrap_or_default();
    for c in conditions {
        let bad = match c.type_.as_str() {
            "Ready" => c.status != "True",
            "DiskPressure" | "NetworkUnavailable" => c.status != "False",
            _ => false,
        };
        if bad {
            return Some(format!(
                "node {} is reporting {}={}",
                name(node),
                c.type_,
                c.status
            ));
        }
    }
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        return Some(format!("node {} is reporting Unschedulable", name(node)));
    }
    None
}

/// Schedulable and healthy.
pub fn is_ready(node: &Node) -> bool {
    not_ready(node).is_none()
}

/// The daemon gave up on its desired config (Degraded or Unreconcilable, not yet there).
pub fn is_failing(node: &Node) -> bool {
    annotation(node, CURRENT_CONFIG) != desired(node) && is_degraded(node)
}

/// The daemon reports Degraded or Unreconcilable.
pub fn is_degraded(node: &Node) -> bool {
    matches!(
        state(node),
        Some(NodeState::Degraded | NodeState::Unreconcilable)
    )
}

/// Counts against maxUnavailable.
pub fn is_unavailable(node: &Node) -> bool {
    !is_ready(node) || (!is_done(node) && !is_failing(node))
}

/// The pool a node belongs to ([`machine_config::pool::primary_pool`], the MCO's rules).
pub fn primary_pool<'a>(
    node: &Node,
    pools: &'a [MachineConfigPool],
) -> Result<Option<&'a MachineConfigPool>, String> {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    machine_config::pool::primary_pool(name(node), &labels, pools)
}

/// `(node, config)` pairs to set `desiredConfig` on in this step (outside image mode).
pub fn rollout_step<'a>(
    pool: &MachineConfigPool,
    nodes: &[&'a Node],
    target: impl Fn(&Node) -> String,
) -> Vec<(&'a Node, String)> {
    rollout_step_with_image(pool, nodes, target, None)
}

/// `(node, config)` pairs to set `desiredConfig` (and `desiredImage` to `image`, or remove it
/// when `None`) on in this step: a node whose desired image differs is a candidate like one
/// whose desired config does, within the same `maxUnavailable`.
pub fn rollout_step_with_image<'a>(
    pool: &MachineConfigPool,
    nodes: &[&'a Node],
    target: impl Fn(&Node) -> String,
    image: Option<&str>,
) -> Vec<(&'a Node, String)> {
    if pool.spec.paused || pool.spec.configuration.name.is_empty() {
        return Vec::new();
    }
    let max = pool.max_unavailable(nodes.len());
    let unavailable = nodes.iter().filter(|n| is_unavailable(n)).count();
    if unavailable >= max {
        return Vec::new();
    }
    let mut capacity = max - unavailable;
    let mut failing = 0;
    let mut candidates = Vec::new();
    for node in nodes {
        let wanted = target(node);
        if desired(node) == Some(wanted.as_str()) && desired_image(node) == image {
            if is_failing(node) {
                failing += 1;
            }
            continue;
        }
        if is_ready(node) {
            candidates.push((*node, wanted));
        }
    }
    if failing >= capacity {
        return Vec::new();
    }
    capacity -= failing;
    candidates.sort_by(|(a, _), (b, _)| zone_then_age(a, b));
    candidates.truncate(capacity);
    candidates
}

/// Zone label order (nodes without one last), then oldest first.
fn zone_then_age(a: &Node, b: &Node) -> std::cmp::Ordering {
    let zone = |n: &Node| {
        n.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(ZONE_LABEL))
            .cloned()
    };
    let created = |n: &Node| n.metadata.creation_timestamp.as_ref().map(|t| t.0);
    match (zone(a), zone(b)) {
        (Some(x), Some(y)) if x != y => x.cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        _ => created(a)
            .cmp(&created(b))
            .then_with(|| name(a).cmp(name(b))),
    }
}

/// The pool's status from its nodes. `render_error` is the render step's failure (RenderDegraded).
pub fn pool_status(
    pool: &MachineConfigPool,
    nodes: &[&Node],
    target: impl Fn(&Node) -> String,
    render_error: Option<&str>,
    now: &str,
) -> PoolStatus {
    pool_status_with_image(pool, nodes, target, None, render_error, &|_| None, now)
}

/// [`pool_status`] of a pool whose nodes should run `image` (image mode) or none.
/// `degraded_message` is what else says why a node is degraded (its MachineConfigNode), used
/// when the node's `reason` annotation is empty.
pub fn pool_status_with_image(
    pool: &MachineConfigPool,
    nodes: &[&Node],
    target: impl Fn(&Node) -> String,
    image: Option<&str>,
    render_error: Option<&str>,
    degraded_message: &dyn Fn(&str) -> Option<String>,
    now: &str,
) -> PoolStatus {
    let total = nodes.len() as i64;
    let updated: Vec<&&Node> = nodes
        .iter()
        .filter(|n| {
            is_done(n) && desired(n) == Some(target(n).as_str()) && desired_image(n) == image
        })
        .collect();
    let ready = updated.iter().filter(|n| is_ready(n)).count() as i64;
    let degraded: Vec<&&Node> = nodes.iter().filter(|n| is_degraded(n)).collect();
    let unavailable = nodes.iter().filter(|n| is_unavailable(n)).count() as i64;
    let mut status = PoolStatus {
        observed_generation: pool.metadata.generation.unwrap_or_default(),
        configuration: pool.status.configuration.clone(),
        machine_count: total,
        updated_machine_count: updated.len() as i64,
        ready_machine_count: ready,
        unavailable_machine_count: unavailable,
        degraded_machine_count: degraded.len() as i64,
        conditions: pool.status.conditions.clone(),
    };
    let target_line = format!("MachineConfig {}", pool.spec.configuration.name);
    let all_updated = updated.len() as i64 == total && ready == total && unavailable == 0;
    let mut set = |type_: &str, on: bool, reason: String, message: String| {
        set_condition(&mut status.conditions, type_, on, reason, message, now);
    };
    if all_updated {
        set(
            "Updated",
            true,
            String::new(),
            format!("All nodes are updated with {target_line}"),
        );
        set("Updating", false, String::new(), String::new());
    } else {
        set("Updated", false, String::new(), String::new());
        if pool.spec.paused {
            set(
                "Updating",
                false,
                String::new(),
                format!("Pool is paused; will not update to {target_line}"),
            );
        } else {
            set(
                "Updating",
                true,
                String::new(),
                format!("All nodes are updating to {target_line}"),
            );
        }
    }
    let node_degraded_message = degraded
        .iter()
        .filter_map(|n| {
            let reason = annotation(n, REASON)
                .map(str::to_string)
                .or_else(|| degraded_message(name(n)))?;
            Some(format!("Node {} is reporting: {reason:?}", name(n)))
        })
        .collect::<Vec<_>>()
        .join(", ");
    if degraded.is_empty() {
        set("NodeDegraded", false, String::new(), String::new());
    } else {
        set(
            "NodeDegraded",
            true,
            format!(
                "{} nodes are reporting degraded status on sync",
                degraded.len()
            ),
            node_degraded_message.clone(),
        );
    }
    match render_error {
        Some(err) => set(
            "RenderDegraded",
            true,
            String::new(),
            format!(
                "Failed to render configuration for pool {}: {err}",
                pool.name()
            ),
        ),
        None => set("RenderDegraded", false, String::new(), String::new()),
    }
    let degraded_any = !degraded.is_empty() || render_error.is_some();
    let message = if degraded.is_empty() {
        String::new()
    } else {
        node_degraded_message
    };
    set("Degraded", degraded_any, String::new(), message);
    if all_updated {
        status.configuration = pool.spec.configuration.clone();
    }
    status
}

/// Sets a condition, keeping its transition time when the status does not change.
pub(super) fn set_condition(
    conditions: &mut Vec<PoolCondition>,
    type_: &str,
    on: bool,
    reason: String,
    message: String,
    now: &str,
) {
    let status = if on { "True" } else { "False" }.to_string();
    let fresh = PoolCondition {
        type_: type_.to_string(),
        status: status.clone(),
        last_transition_time: Some(now.to_string()),
        reason,
        message,
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => {
            let transition = if existing.status == status {
                existing.last_transition_time.clone()
            } else {
                fresh.last_transition_time.clone()
            };
            *existing = PoolCondition {
                last_transition_time: transition,
                ..fresh
            };
        }
        None => conditions.push(fresh),
    }
}

/// Nodes of each pool, by pool name (a node in no pool, or in an ambiguous set, is left out).
pub fn nodes_by_pool<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    pools: &[MachineConfigPool],
) -> BTreeMap<String, Vec<&'a Node>> {
    let mut out: BTreeMap<String, Vec<&Node>> = BTreeMap::new();
    for node in nodes {
        match primary_pool(node, pools) {
            Ok(Some(pool)) => out.entry(pool.name().to_string()).or_default().push(node),
            Ok(None) => {}
            Err(err) => tracing::warn!("{err}"),
        }
    }
    out
}

#[cfg(test)]
mod tests;
