//! Each node's progress through an update, from its MachineConfigNode: the controller keeps a
//! watch-fed cache of them and says in its journal when a node's update takes a step (`node
//! worker-1 (pool worker) updating to rendered-worker-B: Drained Unknown: Draining node…`),
//! so `journalctl -u mco-companion` follows a rollout node by node, and a degraded node whose
//! `reason` annotation is empty is explained in the pool's status by its MachineConfigNode's
//! `NodeDegraded` message (as the MCO's pool status takes that message).
//!
//! Never depended on: the Node annotations decide everything (who is updated, available,
//! degraded, targeted), as in the MCO. A cluster without the type, an RBAC without the rule, a
//! node whose agent writes none, or an object older than the node's update only means less is
//! said: the watch's failure is logged once (then at debug level until it recovers), and an
//! object is read only for the config its spec names.

use std::collections::HashMap;

use futures::StreamExt;
use kube::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use machine_config::mco::machine_config_node::MachineConfigNode;
use machine_config::mco::node_conditions::{NODE_DEGRADED, Status};

/// What a MachineConfigNode says of its node's update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    /// The node runs the config its spec names, and says so.
    Updated { config: String },
    /// The node is updating to `config`; its latest step.
    Step {
        config: String,
        kind: String,
        status: Status,
        message: String,
    },
}

impl Progress {
    /// The node's progress, if its object tells any: `None` before its first step.
    pub fn of(mcn: &MachineConfigNode) -> Option<Progress> {
        let config = mcn.spec.config_version.desired.clone();
        if mcn.is_updated_to(&config) {
            return Some(Progress::Updated { config });
        }
        let step = mcn.latest_step()?;
        Some(Progress::Step {
            config,
            kind: step.kind.clone(),
            status: step.status,
            message: step.message.clone(),
        })
    }

    /// Whether the step is a failure (`NodeDegraded` True).
    fn is_failure(&self) -> bool {
        matches!(self, Progress::Step { kind, status: Status::True, .. } if kind == NODE_DEGRADED)
    }

    /// The journal line for node `node` of `pool`.
    pub fn line(&self, node: &str, pool: &str) -> String {
        match self {
            Progress::Updated { config } => {
                format!("node {node} (pool {pool}) updated to {config}")
            }
            Progress::Step {
                config,
                kind,
                status,
                message,
            } => format!(
                "node {node} (pool {pool}) updating to {config}: {kind} {status:?}: {message}"
            ),
        }
    }
}

/// The progress last said of each node: a step is said when it differs from the last one said,
/// and a node's arrival only after a step of its was said (not for every node at start-up).
#[derive(Default)]
pub struct Journal {
    said: HashMap<String, Progress>,
}

impl Journal {
    /// The line to log for this version of a node's object, if any, and whether it is a failure.
    pub fn next(&mut self, mcn: &MachineConfigNode) -> Option<(String, bool)> {
        let node = mcn.name().to_string();
        let now = Progress::of(mcn)?;
        let before = self.said.get(&node);
        let say = match (&now, before) {
            (_, Some(b)) if *b == now => false,
            (Progress::Updated { .. }, None) => false,
            _ => true,
        };
        let line = say.then(|| (now.line(&node, &mcn.spec.pool.name), now.is_failure()));
        self.said.insert(node, now);
        line
    }

    /// Forgets a node whose object is gone.
    pub fn forget(&mut self, node: &str) {
        self.said.remove(node);
    }
}

/// The MachineConfigNodes' cache, and the task that fills it and writes the journal lines.
pub fn watch(
    api: Api<MachineConfigNode>,
) -> (
    Store<MachineConfigNode>,
    impl std::future::Future<Output = ()> + Send,
) {
    let (store, writer) = reflector::store();
    let events =
        reflector::reflector(writer, watcher(api, watcher::Config::default())).default_backoff();
    let task = async move {
        let mut journal = Journal::default();
        let mut failing = false;
        futures::pin_mut!(events);
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Apply(mcn) | watcher::Event::InitApply(mcn)) => {
                    failing = false;
                    match journal.next(&mcn) {
                        Some((line, true)) => tracing::warn!("{line}"),
                        Some((line, false)) => tracing::info!("{line}"),
                        None => {}
                    }
                }
                Ok(watcher::Event::Delete(mcn)) => journal.forget(mcn.name()),
                Ok(watcher::Event::Init | watcher::Event::InitDone) => failing = false,
                Err(err) if !failing => {
                    failing = true;
                    tracing::warn!(
                        "watching MachineConfigNodes: {err}; nodes' progress is not shown \
                         (the Node annotations are all the controller needs)"
                    );
                }
                Err(err) => tracing::debug!("watching MachineConfigNodes: {err}"),
            }
        }
    };
    (store, task)
}

/// The `NodeDegraded` message of `node`'s MachineConfigNode, if it says the node is degraded.
pub fn degraded_message(mcns: &Store<MachineConfigNode>, node: &str) -> Option<String> {
    let mcn = mcns.get(&ObjectRef::new(node))?;
    mcn.degraded_message().map(str::to_string)
}

#[cfg(test)]
#[path = "progress_tests.rs"]
mod tests;
