//! The controller's view of the Nodes: a watch-fed cache (a reflector) of what the node
//! controller reads, so that a pass costs no Node request (every pass used to list all Nodes
//! of the cluster, and passes follow Node events: its CPU and memory grew with the cluster's
//! size times the node events; docs/benchmarks.md, "A 1,000-node pool").
//!
//! **Only what the controller reads is kept** ([`slim`]): name, uid, resourceVersion, labels,
//! creationTimestamp, the `machineconfiguration.openshift.io/` annotations,
//! `spec.unschedulable`, `spec.taints` (for the `UpdateInProgress` taint) and the conditions'
//! type, status, reason and message. A Node's images,
//! addresses, capacity, managedFields and its other components' annotations (often most of
//! its size) are dropped before the cache stores it.
//!
//! **A pass never acts on its own stale view.** A pass targets at most `maxUnavailable` minus
//! the unavailable nodes, counting a node whose `desiredConfig` it just set as unavailable
//! (not done). The watch delivers the controller's own patches a little later; a pass that
//! runs before (the next one starts 50 ms after the events that woke it) sees those nodes
//! still Done on their old config. Mostly it would only target them again (they come first in
//! the same order), but not when the candidates changed meanwhile: a newer config makes the
//! nodes just updated candidates again, ahead of the ones being targeted, and the pass would
//! target as many more as it thinks free. So the controller keeps
//! the API's answer to each `desiredConfig` patch (the Node just after the write, [`record`])
//! and the view reads that answer instead of the cached Node until the cache shows the values
//! written (`desiredConfig` and `desiredImage`, or the answer's resourceVersion): only the
//! controller writes them, so a cached Node without them predates the write and the answer is
//! the newer of the two. The drain controller reads its own cache the same way, with the
//! answers to its `lastAppliedDrain` writes (which only it makes): a pass that still saw the
//! request open would drain the node again. Once the cache shows them the answer is dropped; so it is when the
//! Node is gone or was recreated (another uid). This gives the pass what a fresh list would
//! have given, without waiting for the watch (which would stall a pass) or counting in-flight
//! targets (which would need its own rule for when a target stops being in flight).
//!
//! Should the cache not show a write within [`PATIENCE`] (a stalled watch, or desiredConfig
//! changed by someone else while the watch relisted, so that the written value never shows),
//! the pass lists the Nodes fresh, as every pass once did, and the listed versions of the
//! Nodes the cache lags on take the answers' place ([`relisted`]): passes after it read them
//! until the cache shows them, and list again should it still lag after another [`PATIENCE`].
//!
//! [`record`]: NodeCache::record

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::ListParams;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use machine_config::mco::annotations::PREFIX;

use super::nodes;

/// How long the cache may take to show the controller's own write before a pass stops
/// trusting it and lists the Nodes.
pub const PATIENCE: Duration = Duration::from_secs(15);

/// The Nodes as the controller sees them: the watch's cache and the controller's own writes.
pub struct NodeCache {
    api: Api<Node>,
    store: Store<Node>,
    written: Mutex<BTreeMap<String, Written>>,
}

/// The API's answer to one of the controller's writes to a Node, the annotations it wrote,
/// and when it came.
#[derive(Clone, Debug)]
pub struct Written {
    pub node: Arc<Node>,
    pub keys: Vec<String>,
    pub at: Instant,
}

/// The cache of all Nodes, and a stream that yields whenever a Node changed (after the cache
/// took the change in). The stream must be polled for the cache to fill.
pub fn watch(api: Api<Node>) -> (NodeCache, impl Stream<Item = ()> + Send) {
    let (store, writer) = reflector::store();
    let events = watcher(api.clone(), watcher::Config::default()).modify(slim);
    let changes = reflector::reflector(writer, events)
        .default_backoff()
        .touched_objects()
        .filter_map(|event| async move {
            match event {
                Ok(_) => Some(()),
                Err(err) => {
                    tracing::warn!("watching Nodes: {err}");
                    None
                }
            }
        });
    let cache = NodeCache {
        api,
        store,
        written: Mutex::new(BTreeMap::new()),
    };
    (cache, changes)
}

impl NodeCache {
    /// Until the watch's first list is in.
    pub async fn wait_until_ready(&self) -> Result<()> {
        self.store
            .wait_until_ready()
            .await
            .context("watching Nodes")
    }

    /// Every Node, as fresh as the controller's own writes ([`view`]), listed from the API
    /// when the cache has not shown a write within [`PATIENCE`].
    pub async fn nodes(&self) -> Result<Vec<Arc<Node>>> {
        let cached = self.store.state();
        let seen = {
            let mut written = self.written();
            view(cached, &mut written, Instant::now())
        };
        if let Some(nodes) = seen {
            return Ok(nodes);
        }
        tracing::warn!(
            "the Node watch has not shown the controller's own writes in {PATIENCE:?}: listing Nodes"
        );
        let listed: Vec<Arc<Node>> = self
            .api
            .list(&ListParams::default())
            .await
            .context("listing Nodes")?
            .items
            .into_iter()
            .map(|mut node| {
                slim(&mut node);
                Arc::new(node)
            })
            .collect();
        relisted(&listed, &mut self.written(), Instant::now());
        Ok(listed)
    }

    /// Keeps the API's answer to a write of the annotations `keys` until the cache shows it.
    pub fn record(&self, mut node: Node, keys: &[&str]) {
        slim(&mut node);
        let name = nodes::name(&node).to_string();
        let written = Written {
            node: Arc::new(node),
            keys: keys.iter().map(|k| k.to_string()).collect(),
            at: Instant::now(),
        };
        self.written().insert(name, written);
    }

    fn written(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Written>> {
        // a panic elsewhere cannot leave the map half-updated (inserts and removals are whole)
        self.written.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The Nodes a pass reads: each cached Node, or the answer to the controller's write to it
/// while the cache does not show that write. Drops the answers the cache shows and those of
/// Nodes gone or recreated. `None` when an answer has waited longer than [`PATIENCE`].
pub fn view(
    cached: Vec<Arc<Node>>,
    written: &mut BTreeMap<String, Written>,
    now: Instant,
) -> Option<Vec<Arc<Node>>> {
    let mut kept = BTreeMap::new();
    let mut nodes = Vec::with_capacity(cached.len());
    for node in cached {
        let name = nodes::name(&node);
        match written.remove(name) {
            Some(w) if w.node.metadata.uid == node.metadata.uid && !shows(&node, &w) => {
                nodes.push(w.node.clone());
                kept.insert(name.to_string(), w);
            }
            _ => nodes.push(node),
        }
    }
    *written = kept;
    let late = written
        .values()
        .any(|w| now.saturating_duration_since(w.at) > PATIENCE);
    (!late).then_some(nodes)
}

/// After a fresh list: the listed version of each Node the cache lags on replaces the answer
/// (it is newer), and waits its own [`PATIENCE`]; the answers of Nodes not listed go.
pub fn relisted(listed: &[Arc<Node>], written: &mut BTreeMap<String, Written>, now: Instant) {
    let listed: BTreeMap<&str, &Arc<Node>> = listed.iter().map(|n| (nodes::name(n), n)).collect();
    written.retain(|name, w| match listed.get(name.as_str()) {
        Some(node) => {
            w.node = Arc::clone(node);
            w.at = now;
            true
        }
        None => false,
    });
}

/// Whether `cached` is the written Node or a later version of it: the same resourceVersion,
/// or the written annotations' values.
fn shows(cached: &Node, written: &Written) -> bool {
    let version = |n: &Node| n.metadata.resource_version.clone();
    let value = |n: &Node, key: &str| {
        n.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .cloned()
    };
    (version(cached).is_some() && version(cached) == version(&written.node))
        || written
            .keys
            .iter()
            .all(|k| value(cached, k) == value(&written.node, k))
}

/// Reduces a Node to what the controller reads (the module doc lists it).
pub fn slim(node: &mut Node) {
    let meta = std::mem::take(&mut node.metadata);
    let annotations = meta.annotations.map(|a| {
        a.into_iter()
            .filter(|(k, _)| k.starts_with(PREFIX))
            .collect()
    });
    node.metadata = ObjectMeta {
        name: meta.name,
        uid: meta.uid,
        resource_version: meta.resource_version,
        creation_timestamp: meta.creation_timestamp,
        labels: meta.labels,
        annotations,
        ..ObjectMeta::default()
    };
    node.spec = node.spec.take().map(|spec| NodeSpec {
        unschedulable: spec.unschedulable,
        taints: spec.taints,
        ..NodeSpec::default()
    });
    node.status = node.status.take().map(|status| NodeStatus {
        conditions: status.conditions.map(|conditions| {
            conditions
                .into_iter()
                .map(|c| NodeCondition {
                    type_: c.type_,
                    status: c.status,
                    reason: c.reason,
                    message: c.message,
                    ..NodeCondition::default()
                })
                .collect()
        }),
        ..NodeStatus::default()
    });
}

#[cfg(test)]
mod tests;
