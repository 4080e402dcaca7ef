//! The MCC node controller's `UpdateInProgress:PreferNoSchedule` taint: on every pass over a
//! pool that is not paused, each of its nodes still waiting to be targeted by the rollout (its
//! `desiredConfig`, or in an image-mode pool its `desiredImage`, is not its target yet) carries
//! the taint, and a node that has been targeted loses it, so the scheduler prefers nodes that
//! will not be drained soon. The taint goes when the node is targeted, not when its update
//! finishes, as in the MCC (whose code comment says otherwise; its condition decides).
//!
//! A node targeted in the same pass is not tainted first (the MCC taints it, then removes the
//! taint at its next pass). Writes replace the node's taint list under its `resourceVersion`,
//! read fresh, so a taint another controller adds meanwhile is never lost; a write that fails
//! is logged and made again at the next pass, as the MCC's are.

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::Api;
use kube::api::{Patch, PatchParams};
use machine_config::MachineConfigPool;
use machine_config::mco::{UPDATE_IN_PROGRESS_TAINT_EFFECT, UPDATE_IN_PROGRESS_TAINT_KEY};
use serde_json::json;

/// Attempts of one taint write through conflicts (the MCC's `Backoff{Steps: 5}`).
const ATTEMPTS: usize = 5;
/// First wait after a conflict, doubled each time.
const CONFLICT_WAIT: Duration = Duration::from_millis(100);

fn is_update_taint(taint: &Taint) -> bool {
    taint.key == UPDATE_IN_PROGRESS_TAINT_KEY && taint.effect == UPDATE_IN_PROGRESS_TAINT_EFFECT
}

fn taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
}

/// Whether the node carries the taint.
pub fn has_taint(node: &Node) -> bool {
    taints(node).iter().any(is_update_taint)
}

/// The node's taints with the update taint present (`wanted`) or gone, the others kept in
/// their order; `None` when they already are so.
pub fn retainted(node: &Node, wanted: bool) -> Option<Vec<Taint>> {
    if has_taint(node) == wanted {
        return None;
    }
    let mut out: Vec<Taint> = taints(node)
        .iter()
        .filter(|t| !is_update_taint(t))
        .cloned()
        .collect();
    if wanted {
        out.push(Taint {
            key: UPDATE_IN_PROGRESS_TAINT_KEY.into(),
            effect: UPDATE_IN_PROGRESS_TAINT_EFFECT.into(),
            value: None,
            time_added: None,
        });
    }
    Some(out)
}

/// `(node, wanted)` for the nodes of `pool` whose taint must change: a node `targeted` does
/// not say is targeted must carry it, the others must not; nothing in a paused pool or one with
/// no rendered config yet (the MCC returns before its taint loop for a paused pool).
pub fn changes<'a>(
    pool: &MachineConfigPool,
    nodes: &[&'a Node],
    targeted: impl Fn(&Node) -> bool,
) -> Vec<(&'a Node, bool)> {
    if pool.spec.paused || pool.spec.configuration.name.is_empty() {
        return Vec::new();
    }
    nodes
        .iter()
        .filter_map(|n| {
            let wanted = !targeted(n);
            (has_taint(n) != wanted).then_some((*n, wanted))
        })
        .collect()
}

/// Sets (`wanted`) or removes the taint on `node`, from a fresh read, under its
/// `resourceVersion`; retried on conflicts. Returns whether it wrote.
pub async fn set(nodes: &Api<Node>, node: &str, wanted: bool) -> Result<bool> {
    let mut wait = CONFLICT_WAIT;
    for attempt in 1..=ATTEMPTS {
        let current = nodes.get(node).await.with_context(|| {
            format!("reading node {node} for its {UPDATE_IN_PROGRESS_TAINT_KEY} taint")
        })?;
        let Some(taints) = retainted(&current, wanted) else {
            return Ok(false);
        };
        let patch = json!({
            "metadata": {"resourceVersion": current.metadata.resource_version},
            "spec": {"taints": taints},
        });
        match nodes
            .patch(node, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 && attempt < ATTEMPTS => {
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
            Err(e) => {
                let what = if wanted { "setting" } else { "removing" };
                return Err(e).with_context(|| {
                    format!("{what} the {UPDATE_IN_PROGRESS_TAINT_KEY} taint on node {node}")
                });
            }
        }
    }
    unreachable!("the last attempt returns")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(taints: &[(&str, &str)]) -> Node {
        let taints: Vec<_> = taints
            .iter()
            .map(|(k, e)| json!({"key": k, "effect": e}))
            .collect();
        serde_json::from_value(json!({"metadata": {"name": "n"}, "spec": {"taints": taints}}))
            .unwrap()
    }

    fn keys(taints: &[Taint]) -> Vec<(String, String)> {
        taints
            .iter()
            .map(|t| (t.key.clone(), t.effect.clone()))
            .collect()
    }

    #[test]
    fn retainted_adds_and_removes_only_the_update_taint() {
        let ours = (
            UPDATE_IN_PROGRESS_TAINT_KEY,
            UPDATE_IN_PROGRESS_TAINT_EFFECT,
        );
        let other = ("node-role.kubernetes.io/infra", "NoSchedule");
        // same key, another effect: not the MCC's taint (MatchTaint compares key and effect)
        let look_alike = (UPDATE_IN_PROGRESS_TAINT_KEY, "NoSchedule");
        let s = |(k, e): (&str, &str)| (k.to_string(), e.to_string());
        type Case<'a> = (
            &'a [(&'a str, &'a str)],
            bool,
            Option<Vec<(String, String)>>,
        );
        let cases: &[Case] = &[
            (&[], true, Some(vec![s(ours)])),
            (&[], false, None),
            (&[ours], true, None),
            (&[ours], false, Some(vec![])),
            (&[other], true, Some(vec![s(other), s(ours)])),
            (&[ours, other], false, Some(vec![s(other)])),
            (&[look_alike], true, Some(vec![s(look_alike), s(ours)])),
            (&[look_alike], false, None),
        ];
        for (before, wanted, after) in cases {
            let got = retainted(&node(before), *wanted).map(|t| keys(&t));
            assert_eq!(&got, after, "{before:?} wanted={wanted}");
        }
        let n = serde_json::from_value::<Node>(json!({"metadata": {"name": "n"}})).unwrap();
        assert!(!has_taint(&n));
        assert_eq!(retainted(&n, true).map(|t| keys(&t)), Some(vec![s(ours)]));
    }

    #[test]
    fn changes_follow_targeting_except_in_a_paused_pool() {
        let ours = (
            UPDATE_IN_PROGRESS_TAINT_KEY,
            UPDATE_IN_PROGRESS_TAINT_EFFECT,
        );
        let named = |name: &str, taints: &[(&str, &str)]| {
            let mut n = node(taints);
            n.metadata.name = Some(name.into());
            n
        };
        // a: targeted, tainted (loses it); b: targeted, clean; c: waiting, clean (gains it);
        // d: waiting, tainted
        let (a, b, c, d) = (
            named("a", &[ours]),
            named("b", &[]),
            named("c", &[]),
            named("d", &[ours]),
        );
        let all = [&a, &b, &c, &d];
        let targeted = |n: &Node| matches!(n.metadata.name.as_deref(), Some("a" | "b"));
        let pool = |paused: bool, config: &str| -> MachineConfigPool {
            serde_json::from_value(json!({
                "apiVersion": "machineconfiguration.openshift.io/v1",
                "kind": "MachineConfigPool",
                "metadata": {"name": "worker"},
                "spec": {"paused": paused, "configuration": {"name": config}},
            }))
            .unwrap()
        };
        let names = |v: Vec<(&Node, bool)>| -> Vec<(String, bool)> {
            v.into_iter()
                .map(|(n, w)| (n.metadata.name.clone().unwrap(), w))
                .collect()
        };
        let cases = [
            (
                pool(false, "rendered-worker-b"),
                vec![("a".to_string(), false), ("c".to_string(), true)],
            ),
            (pool(true, "rendered-worker-b"), vec![]),
            (pool(false, ""), vec![]),
        ];
        for (p, expected) in cases {
            assert_eq!(names(changes(&p, &all, targeted)), expected, "{:?}", p.spec);
        }
    }
}
