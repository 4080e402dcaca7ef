//! Evicting one pod through `policy/v1` Eviction, retrying while a PodDisruptionBudget refuses
//! (429) or the API fails, then waiting until the pod is gone.

use std::time::Duration;

use crate::objects::Pod;
use kube::api::{Api, ListParams};
use kube::core::Status;
use serde_json::json;
use tokio::time::Instant;
use tracing::{info, warn};

use super::Drainer;
use crate::error::Blocker;

/// A pod to get rid of.
#[derive(Debug, Clone)]
pub(super) struct Target {
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
    /// Already terminating: wait only.
    pub wait_only: bool,
}

enum Attempt {
    Evicted,
    Gone,
    Refused(Blocker),
}

/// How the API server's cause of a refusal names the budget.
const BUDGET_CAUSE_PREFIX: &str = "The disruption budget ";

/// `The disruption budget web needs 2 healthy pods and has 2 currently` → `web`.
fn budget_name(cause: &str) -> Option<&str> {
    let rest = cause.strip_prefix(BUDGET_CAUSE_PREFIX)?;
    rest.split_whitespace().next()
}

/// What an eviction refused by budget `pdb` (no disruption allowed, `desired` healthy pods
/// needed, `current` healthy) meets: the API server's cause, as [`refusal`] reads it from a
/// 429. For a drain seen from the node, where the budget is read rather than met.
pub(super) fn budget_refusal(pdb: &str, desired: i32, current: i32) -> Blocker {
    Blocker::Budget {
        pdb: pdb.to_string(),
        detail: format!(
            "{BUDGET_CAUSE_PREFIX}{pdb} needs {desired} healthy pods and has {current} currently"
        ),
    }
}

/// What a 429 says: the budget that refused, or throttling.
fn refusal(status: &Status) -> Blocker {
    let causes = status
        .details
        .as_ref()
        .map(|d| d.causes.as_slice())
        .unwrap_or_default();
    match causes.iter().find(|c| c.reason == "DisruptionBudget") {
        Some(cause) => Blocker::Budget {
            pdb: budget_name(&cause.message)
                .unwrap_or("<unnamed>")
                .to_string(),
            detail: cause.message.clone(),
        },
        None => Blocker::Error(format!(
            "eviction refused: {} (HTTP {})",
            status.message, status.code
        )),
    }
}

impl Drainer {
    async fn evict_once(&self, target: &Target) -> Attempt {
        let body = json!({
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": target.name, "namespace": target.namespace},
            "deleteOptions": {},
        });
        let request = http::Request::post(format!(
            "/api/v1/namespaces/{}/pods/{}/eviction",
            target.namespace, target.name
        ))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(&body).unwrap_or_default());
        let request = match request {
            Ok(r) => r,
            Err(e) => {
                return Attempt::Refused(Blocker::Error(format!("building the eviction: {e}")));
            }
        };
        let call = self.pods_client.request::<Status>(request);
        match tokio::time::timeout(self.retry.attempt_timeout, call).await {
            Ok(Ok(_)) => Attempt::Evicted,
            Ok(Err(kube::Error::Api(status))) if status.code == 404 => Attempt::Gone,
            Ok(Err(kube::Error::Api(status))) if status.code == 429 => {
                Attempt::Refused(refusal(&status))
            }
            Ok(Err(kube::Error::Api(status))) => Attempt::Refused(Blocker::Error(format!(
                "eviction failed: {} (HTTP {} {})",
                status.message, status.code, status.reason
            ))),
            Ok(Err(other)) => Attempt::Refused(Blocker::Error(format!("eviction failed: {other}"))),
            Err(_) => Attempt::Refused(Blocker::Error(format!(
                "eviction got no answer within {:?}",
                self.retry.attempt_timeout
            ))),
        }
    }

    /// Evicts `target` (unless it is terminating already) and waits until it is gone, all
    /// before `deadline`; otherwise says what stands in the way.
    pub(super) async fn evict_and_wait(
        &self,
        target: &Target,
        deadline: Instant,
    ) -> Result<(), Blocker> {
        let key = format!("{}/{}", target.namespace, target.name);
        if !target.wait_only {
            loop {
                match self.evict_once(target).await {
                    Attempt::Evicted => {
                        info!(node = %self.node, pod = %key, "evicted pod");
                        break;
                    }
                    Attempt::Gone => return Ok(()),
                    Attempt::Refused(blocker) => {
                        let now = Instant::now();
                        if now >= deadline {
                            return Err(blocker);
                        }
                        // The last try falls on the deadline.
                        let retry = self.options.eviction_retry.min(deadline - now);
                        warn!(node = %self.node, pod = %key, %blocker, "eviction refused, retrying in {retry:?}");
                        tokio::time::sleep(retry).await;
                    }
                }
            }
        }
        self.wait_gone(target, deadline).await
    }

    /// Polls until the pod is gone (or replaced by a new pod of the same name). It lists the
    /// node's pods by name rather than getting the pod: the kubelet's identity may list the
    /// pods bound to its node, but the Node authorizer refuses a GET of a pod once it is gone
    /// (nothing relates it to the node any more), so a GET would see "forbidden" for "gone".
    async fn wait_gone(&self, target: &Target, deadline: Instant) -> Result<(), Blocker> {
        let pods: Api<Pod> = Api::namespaced(self.pods_client.clone(), &target.namespace);
        let params = ListParams::default().fields(&format!(
            "spec.nodeName={},metadata.name={}",
            self.node, target.name
        ));
        let poll: Duration = self.options.poll_interval;
        loop {
            let last =
                match tokio::time::timeout(self.retry.attempt_timeout, pods.list(&params)).await {
                    Ok(Ok(list)) => match list
                        .items
                        .into_iter()
                        .find(|p| p.metadata.uid == target.uid)
                    {
                        None => return Ok(()),
                        Some(pod) => Blocker::Terminating {
                            finalizers: pod.metadata.finalizers.unwrap_or_default(),
                        },
                    },
                    Ok(Err(e)) => Blocker::Error(format!("checking that the pod is gone: {e}")),
                    Err(_) => Blocker::Error("checking that the pod is gone: no answer".into()),
                };
            let now = Instant::now();
            if now >= deadline {
                return Err(last);
            }
            tokio::time::sleep(poll.min(deadline - now)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_budget() {
        let status: Status = serde_json::from_value(json!({
            "status": "Failure",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "reason": "TooManyRequests",
            "code": 429,
            "details": {"causes": [{
                "reason": "DisruptionBudget",
                "message": "The disruption budget web needs 2 healthy pods and has 2 currently",
            }]},
        }))
        .unwrap();
        match refusal(&status) {
            Blocker::Budget { pdb, detail } => {
                assert_eq!(pdb, "web");
                assert!(detail.contains("needs 2 healthy pods"));
            }
            other => panic!("{other:?}"),
        }
        // The same words when the budget is read rather than met.
        assert_eq!(
            budget_refusal("web", 2, 2),
            refusal(&status),
            "a budget read says what its refusal says"
        );
        let throttled = Status::failure("slow down", "TooManyRequests").with_code(429);
        assert!(matches!(refusal(&throttled), Blocker::Error(_)));
    }
}
