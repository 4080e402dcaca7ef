//! Records, from a watch of the Nodes (every change the API server stored, not samples), each
//! node's successive `desiredConfig` and `desiredDrain` values and its cordons: what a
//! scenario checks to say no node was targeted twice and no drain started twice, whoever led.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use machine_config::mco::annotations::{DESIRED_CONFIG, DESIRED_DRAIN};

/// One node's history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    /// Each value `desiredConfig` took, in order (a repeat only after another value).
    pub desired_configs: Vec<String>,
    /// Each value `desiredDrain` took, in order.
    pub desired_drains: Vec<String>,
    /// How often the node went from schedulable to cordoned.
    pub cordons: usize,
    cordoned: bool,
}

/// The running recorder; stops when dropped.
pub struct Transitions {
    nodes: Arc<Mutex<BTreeMap<String, History>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Transitions {
    /// Starts watching the Nodes with `client` (from their current state on).
    pub fn start(client: kube::Client) -> Transitions {
        let nodes = Arc::new(Mutex::new(BTreeMap::<String, History>::new()));
        let recorded = nodes.clone();
        let task = tokio::spawn(async move {
            let mut stream = watcher(Api::<Node>::all(client), watcher::Config::default())
                .default_backoff()
                .applied_objects()
                .boxed();
            while let Some(event) = stream.next().await {
                let Ok(node) = event else { continue };
                let name = node.metadata.name.clone().unwrap_or_default();
                let annotations = node.metadata.annotations.clone().unwrap_or_default();
                let cordoned = node
                    .spec
                    .as_ref()
                    .and_then(|s| s.unschedulable)
                    .unwrap_or(false);
                let mut all = recorded.lock().unwrap_or_else(|p| p.into_inner());
                let history = all.entry(name).or_default();
                push_changed(
                    &mut history.desired_configs,
                    annotations.get(DESIRED_CONFIG),
                );
                push_changed(&mut history.desired_drains, annotations.get(DESIRED_DRAIN));
                if cordoned && !history.cordoned {
                    history.cordons += 1;
                }
                history.cordoned = cordoned;
            }
        });
        Transitions { nodes, task }
    }

    /// Every node's history so far.
    pub fn histories(&self) -> BTreeMap<String, History> {
        self.nodes.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Fails naming the node if a node was targeted at `config` more than once, or was asked
    /// to drain for it (`drain-<config>`) more than once, or cordoned more than once since the
    /// recorder started; or if one was never targeted at it.
    pub fn check_once(&self, config: &str) -> anyhow::Result<()> {
        let drain = format!("drain-{config}");
        for (node, history) in self.histories() {
            let targeted = history
                .desired_configs
                .iter()
                .filter(|c| *c == config)
                .count();
            let drains = history
                .desired_drains
                .iter()
                .filter(|d| **d == drain)
                .count();
            anyhow::ensure!(
                targeted == 1,
                "{node} was targeted at {config} {targeted} times: {history:?}"
            );
            anyhow::ensure!(
                drains <= 1 && history.cordons <= 1,
                "{node} was asked {drains} times to drain for {config}, cordoned {} times: {history:?}",
                history.cordons
            );
        }
        Ok(())
    }
}

fn push_changed(values: &mut Vec<String>, value: Option<&String>) {
    if let Some(value) = value
        && values.last() != Some(value)
    {
        values.push(value.clone());
    }
}

impl Drop for Transitions {
    fn drop(&mut self) {
        self.task.abort();
    }
}
