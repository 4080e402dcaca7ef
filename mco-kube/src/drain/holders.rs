//! What holds a drain a drain controller is doing, seen from the node: the pods still on it that
//! a drain removes ([`pods::disposition`]), each with what keeps it there — a
//! PodDisruptionBudget of its namespace that allows no disruption now (named, with the API
//! server's words for its refusal), a deletion that has not finished (its finalizers), or
//! nothing the node can see ("not evictable yet"). The words are those of a drain's own errors
//! ([`BlockedPod`]), so the node's `reason` reads the same whoever drains.

use std::collections::{BTreeMap, BTreeSet};

use kube::api::{Api, ListParams};
use kube::core::{Selector, SelectorExt};
use tokio::time::Instant;

use super::evict::budget_refusal;
use super::pods::{self, Disposition};
use crate::error::{BlockedPod, Blocker, ClusterError};
use crate::objects::{Pod, PodDisruptionBudget};
use crate::retry::{RetryPolicy, with_retry_until};

/// The budgets of each namespace that has pods to evict, or why they could not be read.
pub type Budgets = BTreeMap<String, Result<Vec<PodDisruptionBudget>, String>>;

/// The namespaces whose budgets [`holders`] needs: those of the pods a drain evicts.
pub fn namespaces_to_read(pods: &[Pod]) -> BTreeSet<String> {
    pods.iter()
        .filter(|pod| pods::disposition(pod) == Disposition::Evict)
        .map(|pod| pod.metadata.namespace.clone().unwrap_or_default())
        .collect()
}

/// Whether `budget` selects `pod` (a budget without a selector selects none, policy/v1).
fn selects(budget: &PodDisruptionBudget, pod: &Pod) -> bool {
    let Some(selector) = budget.spec.as_ref().and_then(|s| s.selector.clone()) else {
        return false;
    };
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    Selector::try_from(selector).is_ok_and(|s| s.matches(&labels))
}

/// A budget that refuses an eviction now, as the Eviction API would say it.
fn refusing(budget: &PodDisruptionBudget) -> Option<Blocker> {
    let status = budget.status.clone().unwrap_or_default();
    (status.disruptions_allowed <= 0).then(|| {
        budget_refusal(
            budget.metadata.name.as_deref().unwrap_or_default(),
            status.desired_healthy,
            status.current_healthy,
        )
    })
}

/// The order pods are named in: those a budget holds first (what `kubectl mco` and the status
/// page show of a drain is its first pod, `fleet::drain_block`), then those being deleted.
fn rank(blocker: &Blocker) -> u8 {
    match blocker {
        Blocker::Budget { .. } => 0,
        Blocker::Terminating { .. } => 1,
        _ => 2,
    }
}

/// Each pod of `pods` a drain removes, with what holds it, budgets first; the pods a drain
/// leaves (running DaemonSet pods, mirror pods) are not named.
pub fn holders(pods: &[Pod], budgets: &Budgets) -> Vec<BlockedPod> {
    let mut blocked: Vec<BlockedPod> = pods
        .iter()
        .filter_map(|pod| {
            let namespace = pod.metadata.namespace.clone().unwrap_or_default();
            let blocker = match pods::disposition(pod) {
                Disposition::Skip(_) => return None,
                Disposition::Wait => Blocker::Terminating {
                    finalizers: pod.metadata.finalizers.clone().unwrap_or_default(),
                },
                Disposition::Evict => match budgets.get(&namespace) {
                    Some(Ok(budgets)) => budgets
                        .iter()
                        .filter(|b| selects(b, pod))
                        .find_map(refusing)
                        .unwrap_or(Blocker::NotEvictableYet),
                    Some(Err(why)) => Blocker::Unknown(why.clone()),
                    None => Blocker::Unknown(format!(
                        "the PodDisruptionBudgets of namespace {namespace} were not read"
                    )),
                },
            };
            Some(BlockedPod {
                namespace,
                name: pod.metadata.name.clone().unwrap_or_default(),
                blocker,
            })
        })
        .collect();
    blocked.sort_by_key(|b| rank(&b.blocker));
    blocked
}

/// Reads the pods bound to `node` and the budgets of their namespaces, each call given one
/// attempt's time of `retry`. Pods that cannot be listed are an error (nothing is known); a
/// namespace whose budgets cannot be listed makes its pods' holders unknown.
pub async fn read(
    client: &kube::Client,
    node: &str,
    retry: &RetryPolicy,
) -> Result<Vec<BlockedPod>, ClusterError> {
    let pods: Api<Pod> = Api::all(client.clone());
    let params = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let action = format!("listing the pods of node {node}");
    let deadline = Instant::now() + retry.attempt_timeout;
    let pods = with_retry_until(retry, &action, deadline, || pods.list(&params))
        .await?
        .items;
    let mut budgets = Budgets::new();
    let every = ListParams::default();
    for namespace in namespaces_to_read(&pods) {
        let api: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &namespace);
        let action = format!("listing the PodDisruptionBudgets of namespace {namespace}");
        let deadline = Instant::now() + retry.attempt_timeout;
        let listed = with_retry_until(retry, &action, deadline, || api.list(&every))
            .await
            .map(|list| list.items)
            .map_err(|e| e.to_string());
        budgets.insert(namespace, listed);
    }
    Ok(holders(&pods, &budgets))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::waiting_for_drain_controller;
    use serde_json::json;
    use std::time::Duration;

    fn pod(name: &str, labels: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "apps", "labels": labels},
            "spec": {},
            "status": {"phase": "Running"},
        }))
        .unwrap()
    }

    fn budget(
        name: &str,
        selector: serde_json::Value,
        status: serde_json::Value,
    ) -> PodDisruptionBudget {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "apps"},
            "spec": {"selector": selector},
            "status": status,
        }))
        .unwrap()
    }

    fn held(status: serde_json::Value) -> Budgets {
        Budgets::from([(
            "apps".to_string(),
            Ok(vec![
                budget(
                    "other",
                    json!({"matchLabels": {"app": "db"}}),
                    json!({"disruptionsAllowed": 0}),
                ),
                budget("web", json!({"matchLabels": {"app": "web"}}), status),
            ]),
        )])
    }

    #[test]
    fn a_budget_allowing_no_disruption_holds_its_pods_in_the_drains_words() {
        // Listed as the API lists them, by name; named with the budget's pod first.
        let pods = [
            pod("cache", json!({"app": "cache"})),
            pod("web-1", json!({"app": "web"})),
        ];
        let budgets =
            held(json!({"disruptionsAllowed": 0, "desiredHealthy": 1, "currentHealthy": 1}));
        let blocked = holders(&pods, &budgets);
        assert_eq!(
            waiting_for_drain_controller("worker-0", Duration::from_secs(180), &blocked),
            "Waiting for the drain controller: node worker-0 not drained after 3m: \
             pod apps/web-1: eviction refused by PodDisruptionBudget \"web\" \
             (The disruption budget web needs 1 healthy pods and has 1 currently); \
             pod apps/cache: not evictable yet"
        );
        // Once the budget allows a disruption, nothing the node sees holds the pod.
        let freed =
            held(json!({"disruptionsAllowed": 1, "desiredHealthy": 1, "currentHealthy": 2}));
        assert_eq!(
            holders(&pods[1..], &freed)[0].blocker,
            Blocker::NotEvictableYet
        );
    }

    #[test]
    fn pods_a_drain_leaves_are_not_named_and_terminating_ones_show_their_finalizers() {
        let mut daemon = pod("agent-x", json!({}));
        daemon.metadata.owner_references = serde_json::from_value(json!([
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "u", "controller": true}
        ]))
        .unwrap();
        let mut leaving = pod("db-0", json!({"app": "db"}));
        leaving.metadata.deletion_timestamp =
            serde_json::from_value(json!("2026-01-01T00:00:00Z")).unwrap();
        leaving.metadata.finalizers = Some(vec!["example.com/hold".into()]);
        let pods = [daemon, leaving];
        // The terminating pod's namespace needs no budget read: it is evicted already.
        assert!(namespaces_to_read(&pods).is_empty());
        let blocked = holders(&pods, &Budgets::new());
        assert_eq!(blocked.len(), 1);
        assert_eq!(
            blocked[0].to_string(),
            "pod apps/db-0: evicted but still terminating (finalizers: example.com/hold)"
        );
        assert_eq!(
            waiting_for_drain_controller("worker-0", Duration::from_secs(61), &[]),
            "Waiting for the drain controller: node worker-0 not drained after 1m 1s: no pod left to evict"
        );
    }

    #[test]
    fn budgets_that_cannot_be_read_make_what_holds_their_pods_unknown() {
        let pods = [pod("web-1", json!({"app": "web"}))];
        let budgets = Budgets::from([(
            "apps".to_string(),
            Err("listing the PodDisruptionBudgets of namespace apps: forbidden (HTTP 403 Forbidden)".to_string()),
        )]);
        assert_eq!(
            holders(&pods, &budgets)[0].to_string(),
            "pod apps/web-1: unknown (listing the PodDisruptionBudgets of namespace apps: forbidden (HTTP 403 Forbidden))"
        );
    }

    #[test]
    fn selectors_follow_policy_v1() {
        let web = pod("web-1", json!({"app": "web", "tier": "front"}));
        let with = |selector| budget("b", selector, json!({}));
        assert!(selects(&with(json!({})), &web), "{{}} selects every pod");
        assert!(
            !selects(&with(serde_json::Value::Null), &web),
            "no selector selects none"
        );
        assert!(selects(
            &with(
                json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]})
            ),
            &web
        ));
        assert!(!selects(&with(json!({"matchLabels": {"app": "db"}})), &web));
        // A budget without status yet allows no disruption (the API refuses until it has one).
        assert!(refusing(&with(json!({}))).is_some());
    }
}
