//! The fleet as an administrator looks at it: every MachineConfigPool with its machine counts,
//! and each node's state, configs, the update step its MachineConfigNode is at, and why it is
//! Degraded or blocked. `kubectl mco status -o json` prints a [`FleetStatus`] and the
//! companion's `/status.json` serves the same one: both call [`read`], so the two never differ.
//!
//! [`read`] lists the pools, Nodes and MachineConfigNodes (three LISTs, no watch), and the
//! last events of the MCD's component; [`build`] puts them together and is what the table
//! tests drive.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use machine_config::mco::annotations::{CURRENT_CONFIG, DESIRED_CONFIG, REASON, STATE};
use machine_config::mco::events::SOURCE_COMPONENT;
use machine_config::mco::machine_config_node::MachineConfigNode;
use machine_config::pool::{MachineConfigPool, primary_pool};
use serde::{Deserialize, Serialize};

use crate::error::ClusterError;
use crate::objects::Node;

/// How many of the MCD's events [`read`] keeps (the newest).
pub const EVENTS_KEPT: usize = 10;

/// The whole fleet: `kubectl mco status -o json` and the companion's `/status.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetStatus {
    pub pools: Vec<PoolSummary>,
    /// Nodes no pool selects (the MCO leaves them alone), by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmanaged_nodes: Vec<String>,
    /// The newest events of the MCD's component, newest first.
    #[serde(default)]
    pub events: Vec<EventSummary>,
}

/// One pool: its config, counts and conditions as its status says, and its nodes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolSummary {
    pub name: String,
    /// The rendered config the pool's nodes run when updated (`status.configuration`).
    pub config: String,
    /// The rendered config the pool targets (`spec.configuration`).
    pub target_config: String,
    pub machine_count: i64,
    pub updated_machine_count: i64,
    pub ready_machine_count: i64,
    pub unavailable_machine_count: i64,
    pub degraded_machine_count: i64,
    pub paused: bool,
    /// The pool's `Updated` condition is True.
    pub updated: bool,
    /// The pool's `Updating` condition is True.
    pub updating: bool,
    /// The message of a True `Degraded` (or `NodeDegraded`/`RenderDegraded`) condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded: Option<String>,
    pub nodes: Vec<NodeSummary>,
}

/// One node of a pool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSummary {
    pub name: String,
    /// The `state` annotation (`Done` when absent, as the MCD reads it).
    pub state: String,
    pub current_config: String,
    pub desired_config: String,
    /// The step its MachineConfigNode was at last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<Step>,
    /// Why the node is Degraded, or what holds its update (a drain's message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The pod and PodDisruptionBudget a drain is blocked on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_blocked_by: Option<DrainBlock>,
}

/// A MachineConfigNode condition: the step a node's update is at.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    #[serde(rename = "type")]
    pub kind: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_transition_time: String,
}

/// The pod a drain could not evict, and the budget refusing it (when one does).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainBlock {
    /// `namespace/name`.
    pub pod: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<String>,
}

/// One event of the MCD's component.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventSummary {
    pub time: String,
    pub node: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub reason: String,
    pub message: String,
}

impl FleetStatus {
    /// The pool named `name`.
    pub fn pool(&self, name: &str) -> Option<&PoolSummary> {
        self.pools.iter().find(|p| p.name == name)
    }
}

impl NodeSummary {
    /// Why the node is where it is, in one line (the plugin's REASON column and the page's):
    /// the pod and budget holding its drain, else its reason, else empty.
    pub fn why(&self) -> String {
        match (&self.drain_blocked_by, &self.reason) {
            (Some(block), _) => match &block.budget {
                Some(pdb) => format!("drain blocked by pod {} (budget {pdb})", block.pod),
                None => format!("drain blocked by pod {}", block.pod),
            },
            (None, Some(reason)) => reason.clone(),
            (None, None) => String::new(),
        }
    }
}

/// `value` as `kubectl mco -o json` prints it and the companion's `/status.json` serves it:
/// pretty-printed, with a final newline. One function, so the two are the same bytes.
pub fn to_json<T: Serialize>(value: &T) -> serde_json::Result<String> {
    Ok(serde_json::to_string_pretty(value)? + "\n")
}

fn api_of(client: &kube::Client, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(machine_config::machineconfig::GROUP, "v1", kind);
    Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
}

fn typed<T: serde::de::DeserializeOwned>(
    action: &str,
    objects: Vec<DynamicObject>,
) -> Result<Vec<T>, ClusterError> {
    objects
        .into_iter()
        .map(|o| {
            let value = serde_json::to_value(o).map_err(|e| e.to_string())?;
            serde_json::from_value(value).map_err(|e| e.to_string())
        })
        .collect::<Result<_, String>>()
        .map_err(|message| ClusterError::Client {
            action: action.to_string(),
            message,
        })
}

/// Reads the fleet from the API: pools, Nodes and MachineConfigNodes, and the MCD's events in
/// `events_namespace` (every namespace when `None`).
pub async fn read(
    client: &kube::Client,
    events_namespace: Option<&str>,
) -> Result<FleetStatus, ClusterError> {
    let all = ListParams::default();
    let action = "listing machineconfigpools";
    let pools = api_of(client, "MachineConfigPool")
        .list(&all)
        .await
        .map_err(|e| ClusterError::from_kube(action, e))?;
    let pools: Vec<MachineConfigPool> = typed(action, pools.items)?;

    let action = "listing nodes";
    let nodes = Api::<Node>::all(client.clone())
        .list(&all)
        .await
        .map_err(|e| ClusterError::from_kube(action, e))?;

    // A cluster without MachineConfigNodes (the feature off) still has a status.
    let action = "listing machineconfignodes";
    let mcns = match api_of(client, "MachineConfigNode").list(&all).await {
        Ok(list) => typed(action, list.items)?,
        Err(kube::Error::Api(status)) if status.code == 404 => Vec::new(),
        Err(e) => return Err(ClusterError::from_kube(action, e)),
    };

    let action = "listing events";
    let events_api: Api<Event> = match events_namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let events = events_api
        .list(&ListParams::default().fields(&format!("source={SOURCE_COMPONENT}")))
        .await
        .map_err(|e| ClusterError::from_kube(action, e))?;

    Ok(build(&pools, &nodes.items, &mcns, &events.items))
}

/// The fleet from its objects.
pub fn build(
    pools: &[MachineConfigPool],
    nodes: &[Node],
    mcns: &[MachineConfigNode],
    events: &[Event],
) -> FleetStatus {
    let mcn_of: BTreeMap<&str, &MachineConfigNode> = mcns.iter().map(|m| (m.name(), m)).collect();
    let mut status = FleetStatus {
        pools: pools.iter().map(pool_summary).collect(),
        ..FleetStatus::default()
    };
    status.pools.sort_by(|a, b| a.name.cmp(&b.name));
    for node in nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let pool = match primary_pool(&name, &labels, pools) {
            Ok(Some(pool)) => pool.name().to_string(),
            // A node in two custom pools is the MCO's error too: it shows as unmanaged.
            Ok(None) | Err(_) => {
                status.unmanaged_nodes.push(name);
                continue;
            }
        };
        let summary = node_summary(node, mcn_of.get(name.as_str()).copied());
        if let Some(p) = status.pools.iter_mut().find(|p| p.name == pool) {
            p.nodes.push(summary);
        }
    }
    for pool in &mut status.pools {
        pool.nodes.sort_by(|a, b| a.name.cmp(&b.name));
    }
    status.unmanaged_nodes.sort();
    status.events = event_summaries(events);
    status
}

fn pool_summary(pool: &MachineConfigPool) -> PoolSummary {
    let condition = |kind: &str| {
        pool.status
            .conditions
            .iter()
            .find(|c| c.type_ == kind && c.status == "True")
    };
    let degraded = ["Degraded", "NodeDegraded", "RenderDegraded"]
        .iter()
        .find_map(|kind| condition(kind))
        .map(|c| {
            if c.message.is_empty() {
                c.reason.clone()
            } else {
                c.message.clone()
            }
        });
    let s = &pool.status;
    PoolSummary {
        name: pool.name().to_string(),
        config: s.configuration.name.clone(),
        target_config: pool.spec.configuration.name.clone(),
        machine_count: s.machine_count,
        updated_machine_count: s.updated_machine_count,
        ready_machine_count: s.ready_machine_count,
        unavailable_machine_count: s.unavailable_machine_count,
        degraded_machine_count: s.degraded_machine_count,
        paused: pool.spec.paused,
        updated: condition("Updated").is_some(),
        updating: condition("Updating").is_some(),
        degraded,
        nodes: Vec::new(),
    }
}

fn node_summary(node: &Node, mcn: Option<&MachineConfigNode>) -> NodeSummary {
    let annotations = node.metadata.annotations.clone().unwrap_or_default();
    let get = |key: &str| annotations.get(key).cloned().unwrap_or_default();
    let state = match get(STATE) {
        s if s.is_empty() => "Done".to_string(),
        s => s,
    };
    let step = mcn.and_then(MachineConfigNode::latest_step).map(|c| Step {
        kind: c.kind.clone(),
        status: serde_json::to_value(c.status)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default(),
        message: c.message.clone(),
        last_transition_time: c.last_transition_time.clone(),
    });
    // Why: the Degraded reason first, else a step that has not gone through (a drain waiting
    // on a budget says so in its message).
    let reason = Some(get(REASON))
        .filter(|r| !r.is_empty() && state != "Done")
        .or_else(|| mcn.and_then(|m| m.degraded_message().map(String::from)))
        .or_else(|| {
            step.as_ref()
                .filter(|s| s.status != "True" && !s.message.is_empty())
                .map(|s| s.message.clone())
        });
    let drain_blocked_by = reason.as_deref().and_then(drain_block);
    NodeSummary {
        name: node.metadata.name.clone().unwrap_or_default(),
        state,
        current_config: get(CURRENT_CONFIG),
        desired_config: get(DESIRED_CONFIG),
        step,
        reason,
        drain_blocked_by,
    }
}

/// The first blocked pod of a drain's message (`... pod NS/NAME: eviction refused by
/// PodDisruptionBudget "PDB" (...)`, as [`crate::DrainError`] words it).
pub fn drain_block(message: &str) -> Option<DrainBlock> {
    let start = message.find("pod ")? + "pod ".len();
    let rest = &message[start..];
    let (pod, after) = rest.split_once(": ")?;
    if !pod.contains('/') || pod.contains(' ') {
        return None;
    }
    let budget = after
        .strip_prefix("eviction refused by PodDisruptionBudget \"")
        .and_then(|b| b.split_once('"'))
        .map(|(name, _)| name.to_string());
    Some(DrainBlock {
        pod: pod.to_string(),
        budget,
    })
}

fn event_summaries(events: &[Event]) -> Vec<EventSummary> {
    let time = |e: &Event| {
        e.last_timestamp
            .as_ref()
            .or(e.first_timestamp.as_ref())
            .map(|t| t.0.to_string())
            .or_else(|| e.event_time.as_ref().map(|t| t.0.to_string()))
            .or_else(|| {
                e.metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|t| t.0.to_string())
            })
            .unwrap_or_default()
    };
    let mut out: Vec<EventSummary> = events
        .iter()
        .map(|e| EventSummary {
            time: time(e),
            node: e.involved_object.name.clone().unwrap_or_default(),
            kind: e.type_.clone().unwrap_or_default(),
            reason: e.reason.clone().unwrap_or_default(),
            message: e.message.clone().unwrap_or_default(),
        })
        .collect();
    out.sort_by(|a, b| b.time.cmp(&a.time));
    out.truncate(EVENTS_KEPT);
    out
}

#[cfg(test)]
mod tests;
