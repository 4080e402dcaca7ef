//! Agent-driven drain: cordon (verified), evict the node's pods through the Eviction API in
//! parallel (a PodDisruptionBudget's refusal is retried every 5 s), wait until they are gone,
//! in attempts of 90 s within an overall hour (the MCD's numbers, configurable). A drain that
//! cannot finish names each pod left and what holds it: the PodDisruptionBudget and its
//! message, finalizers, or the API error.
//!
//! Skipped: running DaemonSet pods and mirror pods; finished pods are removed (see
//! [`pods::disposition`]).

mod evict;
pub mod holders;
pub mod pods;

use std::time::Duration;

use futures::future::BoxFuture;

use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use tokio::time::Instant;
use tracing::{info, warn};

use super::error::{BlockedPod, ClusterError, DrainError};
use super::objects::{Node, Pod};
use super::retry::{RetryPolicy, with_retry_until};
use evict::Target;
use pods::Disposition;

/// Timeouts and pacing of a drain.
#[derive(Debug, Clone, PartialEq)]
pub struct DrainOptions {
    /// One attempt (cordon, list, evict, wait) gives up after this long (the drain
    /// controller's 90 s).
    pub attempt_timeout: Duration,
    /// The drain gives up after this long (the MCD's hour).
    pub overall_timeout: Duration,
    /// Delay before repeating an eviction a PodDisruptionBudget refused (kubectl's 5 s).
    pub eviction_retry: Duration,
    /// Delay between attempts.
    pub attempt_pause: Duration,
    /// How often to check that evicted pods are gone.
    pub poll_interval: Duration,
}

impl Default for DrainOptions {
    fn default() -> Self {
        Self {
            attempt_timeout: Duration::from_secs(90),
            overall_timeout: Duration::from_secs(3600),
            eviction_retry: Duration::from_secs(5),
            attempt_pause: Duration::from_secs(5),
            poll_interval: Duration::from_secs(1),
        }
    }
}

/// What a successful drain did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DrainReport {
    /// `namespace/name` of the pods evicted (or waited for).
    pub removed: Vec<String>,
    /// `namespace/name` and why of the pods left alone.
    pub skipped: Vec<(String, &'static str)>,
    pub elapsed: Duration,
}

/// Drains one node. Node writes use the node's credential, pod reads and evictions the
/// eviction credential (the same client when there is no separate one).
#[derive(Clone)]
pub struct Drainer {
    node: String,
    nodes: Api<Node>,
    pods_client: kube::Client,
    options: DrainOptions,
    retry: RetryPolicy,
}

impl Drainer {
    pub fn new(
        node: &str,
        node_client: kube::Client,
        pods_client: kube::Client,
        options: DrainOptions,
        retry: RetryPolicy,
    ) -> Self {
        Self {
            node: node.to_string(),
            nodes: Api::all(node_client),
            pods_client,
            options,
            retry,
        }
    }

    pub fn options(&self) -> &DrainOptions {
        &self.options
    }

    /// Sets `spec.unschedulable` until the patched Node shows it, before `deadline` (the
    /// patch's answer is the Node as stored: no read-back).
    async fn set_unschedulable(
        &self,
        unschedulable: bool,
        deadline: Instant,
    ) -> Result<(), DrainError> {
        let verb = if unschedulable { "cordon" } else { "uncordon" };
        let fail = |message: String| DrainError::Cordon {
            verb,
            node: self.node.clone(),
            message,
        };
        let value = if unschedulable {
            json!(true)
        } else {
            json!(null)
        };
        let patch = Patch::Merge(json!({"spec": {"unschedulable": value}}));
        let params = PatchParams::default();
        let work = async {
            loop {
                let action = format!("{verb} node {}", self.node);
                let node = with_retry_until(&self.retry, &action, deadline, || {
                    self.nodes.patch(&self.node, &params, &patch)
                })
                .await
                // the error's action is ours: said once, by `fail`
                .map_err(|e| fail(e.without_action(&action)))?;
                let now = node.spec.and_then(|s| s.unschedulable).unwrap_or(false);
                if now == unschedulable {
                    return Ok(());
                }
                warn!(node = %self.node, verb, "spec.unschedulable did not take, retrying");
                tokio::time::sleep(self.retry.initial_delay).await;
            }
        };
        match tokio::time::timeout_at(deadline, work).await {
            Ok(result) => result,
            Err(_) => Err(fail("timed out".into())),
        }
    }

    /// Marks the node unschedulable.
    pub async fn cordon(&self) -> Result<(), DrainError> {
        self.set_unschedulable(true, Instant::now() + self.options.attempt_timeout)
            .await
    }

    /// Makes the node schedulable again.
    pub async fn uncordon(&self) -> Result<(), DrainError> {
        self.set_unschedulable(false, Instant::now() + self.options.attempt_timeout)
            .await
    }

    /// Cordons and empties the node, retrying attempts until the overall timeout.
    pub async fn drain(&self) -> Result<DrainReport, DrainError> {
        self.drain_reporting(|_| Box::pin(async {})).await
    }

    /// [`Drainer::drain`], telling `on_retry` why each failed attempt failed (what the node's
    /// `reason` shows while the drain goes on: the pods left and what holds them) before the
    /// next one.
    pub async fn drain_reporting(
        &self,
        on_retry: impl Fn(&DrainError) -> BoxFuture<'static, ()> + Send + Sync,
    ) -> Result<DrainReport, DrainError> {
        let started = Instant::now();
        let overall = started + self.options.overall_timeout;
        loop {
            let deadline = (Instant::now() + self.options.attempt_timeout).min(overall);
            let failure = match self.attempt(deadline).await {
                Ok(mut report) => {
                    report.elapsed = started.elapsed();
                    info!(node = %self.node, seconds = report.elapsed.as_secs_f64(), "drain complete");
                    return Ok(report);
                }
                Err(failure) => failure,
            };
            let (node, elapsed) = (self.node.clone(), started.elapsed());
            let error = match failure {
                Attempt::Blocked(blocked) => DrainError::Blocked {
                    node,
                    elapsed,
                    blocked,
                },
                Attempt::Failed(message) => DrainError::Failed {
                    node,
                    elapsed,
                    message,
                },
            };
            if Instant::now() + self.options.attempt_pause >= overall {
                return Err(error);
            }
            warn!(node = %self.node, failure = %error, "drain attempt failed; retrying in {:?}", self.options.attempt_pause);
            on_retry(&error).await;
            tokio::time::sleep(self.options.attempt_pause).await;
        }
    }

    async fn attempt(&self, deadline: Instant) -> Result<DrainReport, Attempt> {
        self.set_unschedulable(true, deadline)
            .await
            .map_err(|e| Attempt::Failed(e.to_string()))?;
        let pods = self
            .node_pods(deadline)
            .await
            .map_err(|e| Attempt::Failed(e.to_string()))?;
        let mut report = DrainReport::default();
        let mut targets = Vec::new();
        for pod in &pods {
            let key = pods::pod_key(pod);
            let target = |wait_only| Target {
                namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                name: pod.metadata.name.clone().unwrap_or_default(),
                uid: pod.metadata.uid.clone(),
                wait_only,
            };
            match pods::disposition(pod) {
                Disposition::Skip(why) => report.skipped.push((key, why)),
                Disposition::Wait => targets.push(target(true)),
                Disposition::Evict => {
                    if pods::has_empty_dir(pod) {
                        info!(node = %self.node, pod = %key, "evicting a pod with emptyDir data; the data is lost");
                    }
                    targets.push(target(false));
                }
            }
        }
        let results =
            futures::future::join_all(targets.iter().map(|t| self.evict_and_wait(t, deadline)))
                .await;
        let mut blocked = Vec::new();
        for (target, result) in targets.iter().zip(results) {
            match result {
                Ok(()) => report
                    .removed
                    .push(format!("{}/{}", target.namespace, target.name)),
                Err(blocker) => blocked.push(BlockedPod {
                    namespace: target.namespace.clone(),
                    name: target.name.clone(),
                    blocker,
                }),
            }
        }
        if blocked.is_empty() {
            Ok(report)
        } else {
            Err(Attempt::Blocked(blocked))
        }
    }

    async fn node_pods(&self, deadline: Instant) -> Result<Vec<Pod>, ClusterError> {
        let pods: Api<Pod> = Api::all(self.pods_client.clone());
        let params = ListParams::default().fields(&format!("spec.nodeName={}", self.node));
        let action = format!("listing the pods of node {}", self.node);
        // past the deadline, the error says what the last attempt met
        let list = with_retry_until(&self.retry, &action, deadline, || pods.list(&params)).await?;
        Ok(list.items)
    }
}

/// Why an attempt failed.
enum Attempt {
    Failed(String),
    Blocked(Vec<BlockedPod>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Blocker;

    #[test]
    fn messages_name_pods_and_budgets() {
        let err = DrainError::Blocked {
            node: "n1".into(),
            elapsed: Duration::from_secs(90),
            blocked: vec![
                BlockedPod {
                    namespace: "apps".into(),
                    name: "web-1".into(),
                    blocker: Blocker::Budget {
                        pdb: "web".into(),
                        detail:
                            "The disruption budget web needs 2 healthy pods and has 2 currently"
                                .into(),
                    },
                },
                BlockedPod {
                    namespace: "apps".into(),
                    name: "db-0".into(),
                    blocker: Blocker::Terminating {
                        finalizers: vec!["example.com/hold".into()],
                    },
                },
            ],
        };
        assert_eq!(
            err.to_string(),
            "failed to drain node n1 after 1m 30s: pod apps/web-1: eviction refused by PodDisruptionBudget \"web\" \
             (The disruption budget web needs 2 healthy pods and has 2 currently); \
             pod apps/db-0: evicted but still terminating (finalizers: example.com/hold)"
        );
    }

    #[test]
    fn a_cordon_that_fails_says_its_action_once() {
        let action = "cordon node n1";
        let timed_out = crate::ClusterError::Client {
            action: action.into(),
            message: "timed out; last error: connection refused".into(),
        };
        let err = DrainError::Cordon {
            verb: "cordon",
            node: "n1".into(),
            message: timed_out.without_action(action),
        };
        assert_eq!(
            err.to_string(),
            "failed to cordon node n1: timed out; last error: connection refused"
        );
        // another action's error is kept whole
        assert_eq!(
            timed_out.without_action("uncordon node n1"),
            "cordon node n1: timed out; last error: connection refused"
        );
    }
}
