//! The fleet as the scale harness sees it through one watch on all Nodes: which pool each node
//! is in, whether it is available (by the tier's own definition, [`crate::sampler::is_available`]),
//! the most nodes of a pool unavailable at once, and which are Done on which config.
//!
//! One watch rather than polling: listing 1,000 Nodes every few tens of milliseconds would make
//! the harness the API server's main load and blur what the companion and the agents cost.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use machine_config::mco::NodeState;
use machine_config::mco::annotations::{CURRENT_CONFIG, STATE};

use crate::sampler::is_available;

/// A pool as the fleet tells its nodes apart: its name and its nodes' role label.
#[derive(Debug, Clone)]
pub struct PoolLabel {
    pub pool: String,
    pub node_label: String,
}

/// What the watch last saw of one node.
#[derive(Debug, Clone, Default)]
struct Seen {
    pool: String,
    current: String,
    state: String,
    available: bool,
}

#[derive(Debug, Default)]
struct State {
    nodes: HashMap<String, Seen>,
    /// The most nodes of each pool unavailable at once since the last reset.
    max_unavailable: BTreeMap<String, usize>,
}

/// The running watch; stops when dropped.
pub struct Fleet {
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Fleet {
    /// Watches every Node with `client` (an administrator).
    pub fn start(client: kube::Client, pools: Vec<PoolLabel>) -> Fleet {
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let task = tokio::spawn(async move {
            let api: Api<Node> = Api::all(client);
            let mut events = watcher(api, watcher::Config::default())
                .default_backoff()
                .applied_objects()
                .boxed();
            while let Some(event) = events.next().await {
                let Ok(node) = event else { continue };
                let name = node.metadata.name.clone().unwrap_or_default();
                let annotation = |key: &str| {
                    node.metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(key).cloned())
                        .unwrap_or_default()
                };
                let labels = node.metadata.labels.clone().unwrap_or_default();
                let pool = pools
                    .iter()
                    .find(|p| labels.contains_key(&p.node_label))
                    .map(|p| p.pool.clone())
                    .unwrap_or_default();
                let seen = Seen {
                    pool,
                    current: annotation(CURRENT_CONFIG),
                    state: annotation(STATE),
                    available: is_available(&node),
                };
                lock(&shared).observe(&name, seen);
            }
        });
        Fleet { state, task }
    }

    /// Starts counting the most unavailable nodes per pool afresh.
    pub fn reset_max_unavailable(&self) {
        lock(&self.state).max_unavailable.clear();
    }

    /// The most nodes of `pool` unavailable at once since the last reset.
    pub fn max_unavailable(&self, pool: &str) -> usize {
        lock(&self.state)
            .max_unavailable
            .get(pool)
            .copied()
            .unwrap_or(0)
    }

    /// (nodes of `pool` Done on `config`, nodes of `pool`) as last seen.
    pub fn done_on(&self, pool: &str, config: &str) -> (usize, usize) {
        let state = lock(&self.state);
        let members = state.nodes.values().filter(|s| s.pool == pool);
        let (mut done, mut total) = (0, 0);
        for seen in members {
            total += 1;
            if seen.current == config && seen.state == NodeState::Done.as_str() && seen.available {
                done += 1;
            }
        }
        (done, total)
    }
}

impl State {
    fn observe(&mut self, name: &str, seen: Seen) {
        let pool = seen.pool.clone();
        self.nodes.insert(name.to_string(), seen);
        let unavailable = self
            .nodes
            .values()
            .filter(|s| s.pool == pool && !s.available)
            .count();
        let max = self.max_unavailable.entry(pool).or_default();
        *max = (*max).max(unavailable);
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}
