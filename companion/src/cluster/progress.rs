//! Each node's progress through an update, from its MachineConfigNode: the controller keeps a
//! watch-fed cache of them and says in its journal each step a node's update takes (`node
//! worker-1 (pool worker) updating to rendered-worker-B: Drained Unknown: Draining node…`, a
//! line per condition a version of the object changed) and when it arrives (`… updated to …`),
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
use machine_config::mco::machine_config_node::{MachineConfigNode, update_rank};
use machine_config::mco::node_conditions::{Condition, NODE_DEGRADED, NOT_YET_OCCURRED, Status};

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

/// What was seen of a node's object last: whether it said the node was updated, and its
/// conditions.
struct Seen {
    updated: bool,
    conditions: Vec<Condition>,
}

/// Turns the versions of each node's object into what they say anew. Steps are found by
/// comparing a version's conditions with the last version's, not by their transition times:
/// those are whole seconds, and a fast update takes several steps in one.
#[derive(Default)]
pub struct Journal {
    seen: HashMap<String, Seen>,
}

impl Journal {
    /// What this version of a node's object says that the last one did not: each condition it
    /// changed, in the order an update takes them, or, when it says the node arrived, that.
    /// The first version seen of a node says its latest step if it is updating (what it was
    /// doing when the controller started), nothing if it is updated.
    pub fn next(&mut self, mcn: &MachineConfigNode) -> Vec<Progress> {
        let config = &mcn.spec.config_version.desired;
        let updated = mcn.is_updated_to(config);
        let now = Seen {
            updated,
            conditions: mcn.status.conditions.clone(),
        };
        match self.seen.insert(mcn.name().to_string(), now) {
            None => Progress::of(mcn)
                .filter(|p| !matches!(p, Progress::Updated { .. }))
                .into_iter()
                .collect(),
            Some(before) if updated => match before.updated {
                true => Vec::new(),
                false => vec![Progress::Updated {
                    config: config.clone(),
                }],
            },
            Some(before) => changed(&before.conditions, &mcn.status.conditions)
                .into_iter()
                .map(|c| Progress::Step {
                    config: config.clone(),
                    kind: c.kind.clone(),
                    status: c.status,
                    message: c.message.clone(),
                })
                .collect(),
        }
    }

    /// Forgets a node whose object is gone.
    pub fn forget(&mut self, node: &str) {
        self.seen.remove(node);
    }
}

/// The conditions of `after` that are new or differ from `before` (status, reason or message),
/// placeholders left out, in the order an update takes them.
fn changed<'a>(before: &[Condition], after: &'a [Condition]) -> Vec<&'a Condition> {
    let same = |c: &Condition| {
        before.iter().any(|b| {
            b.kind == c.kind
                && b.status == c.status
                && b.reason == c.reason
                && b.message == c.message
        })
    };
    let mut out: Vec<&Condition> = after
        .iter()
        .filter(|c| c.reason != NOT_YET_OCCURRED && update_rank(&c.kind).is_some() && !same(c))
        .collect();
    out.sort_by_key(|c| update_rank(&c.kind));
    out
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
                    let pool = &mcn.spec.pool.name;
                    for said in journal.next(&mcn) {
                        let line = said.line(mcn.name(), pool);
                        if said.is_failure() {
                            tracing::warn!("{line}");
                        } else {
                            tracing::info!("{line}");
                        }
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
