//! Samples the pool's availability throughout a scenario: every few tens of milliseconds it
//! lists the Nodes and counts those of the pool that are unavailable, by a definition written
//! here rather than taken from the companion (the code under test): not `Ready`, cordoned, or
//! not done (`currentConfig` ≠ `desiredConfig`, `state` ≠ `Done`, or in an image-mode pool
//! `currentImage` ≠ `desiredImage`, as the MCO's `LayeredNodeState` counts it). Nodes still being
//! provisioned (first boot, bootstrap) are left out until they are first Done: they are not
//! disrupted by a rollout.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;
use machine_config::mco::NodeState;
use machine_config::mco::annotations::{
    CURRENT_CONFIG, CURRENT_IMAGE, DESIRED_CONFIG, DESIRED_IMAGE, STATE,
};

/// How often the pool is sampled.
pub const INTERVAL: Duration = Duration::from_millis(40);

/// One sample with more unavailable nodes than allowed.
#[derive(Debug, Clone)]
pub struct Violation {
    pub after: Duration,
    pub unavailable: Vec<String>,
}

#[derive(Debug, Default)]
struct State {
    samples: usize,
    max_seen: usize,
    violations: Vec<Violation>,
    /// Nodes left out until they are first Done.
    provisioning: BTreeSet<String>,
}

/// The running sampler; stops when dropped.
pub struct Sampler {
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    /// Samples the nodes labelled `role_label` with `client`; more than `max_unavailable`
    /// unavailable nodes in one sample is a violation.
    pub fn start(client: kube::Client, role_label: &str, max_unavailable: usize) -> Sampler {
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let selector = role_label.to_string();
        let started = Instant::now();
        let task = tokio::spawn(async move {
            let nodes: Api<Node> = Api::all(client);
            let params = ListParams::default().labels(&selector);
            loop {
                if let Ok(list) = nodes.list(&params).await {
                    let mut state = shared.lock().unwrap_or_else(|p| p.into_inner());
                    let mut unavailable = Vec::new();
                    for node in &list.items {
                        let name = node.metadata.name.clone().unwrap_or_default();
                        if state.provisioning.contains(&name) {
                            if is_available(node) {
                                state.provisioning.remove(&name);
                            }
                            continue;
                        }
                        if !is_available(node) {
                            unavailable.push(name);
                        }
                    }
                    state.samples += 1;
                    state.max_seen = state.max_seen.max(unavailable.len());
                    if unavailable.len() > max_unavailable {
                        state.violations.push(Violation {
                            after: started.elapsed(),
                            unavailable,
                        });
                    }
                }
                tokio::time::sleep(INTERVAL).await;
            }
        });
        Sampler { state, task }
    }

    /// Leaves `node` out until it is first Done.
    pub fn provisioning(&self, node: &str) {
        self.lock().provisioning.insert(node.to_string());
    }

    /// Counts the most unavailable nodes in one sample from now on.
    pub fn restart_max_seen(&self) {
        self.lock().max_seen = 0;
    }

    /// (samples taken, most unavailable nodes in one sample, the violations).
    pub fn summary(&self) -> (usize, usize, Vec<Violation>) {
        let state = self.lock();
        (state.samples, state.max_seen, state.violations.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Ready, schedulable, and done: `currentConfig == desiredConfig`, `state == Done`, and
/// `currentImage == desiredImage` when the node has a `desiredImage`.
pub fn is_available(node: &Node) -> bool {
    let annotation = |key: &str| {
        node.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .filter(|v| !v.is_empty())
    };
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let schedulable = node.spec.as_ref().and_then(|s| s.unschedulable) != Some(true);
    let done = annotation(CURRENT_CONFIG).is_some()
        && annotation(CURRENT_CONFIG) == annotation(DESIRED_CONFIG)
        && annotation(STATE).map(String::as_str) == Some(NodeState::Done.as_str())
        && (annotation(DESIRED_IMAGE).is_none()
            || annotation(CURRENT_IMAGE) == annotation(DESIRED_IMAGE));
    ready && schedulable && done
}
