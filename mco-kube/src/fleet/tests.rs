use serde_json::{Value, json};

use super::*;

fn pool(name: &str, role: &str, paused: bool, conditions: Value) -> MachineConfigPool {
    serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        "metadata": {"name": name},
        "spec": {
            "paused": paused,
            "configuration": {"name": format!("rendered-{name}-2")},
            "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{role}"): ""}}
        },
        "status": {
            "configuration": {"name": format!("rendered-{name}-1")},
            "machineCount": 2, "updatedMachineCount": 1, "readyMachineCount": 1,
            "unavailableMachineCount": 1, "degradedMachineCount": 0,
            "conditions": conditions
        }
    }))
    .unwrap()
}

fn node(name: &str, role: &str, annotations: Value) -> Node {
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": {format!("node-role.kubernetes.io/{role}"): ""},
            "annotations": annotations
        }
    }))
    .unwrap()
}

fn mcn(name: &str, conditions: Value) -> MachineConfigNode {
    serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigNode",
        "metadata": {"name": name},
        "status": {"conditions": conditions}
    }))
    .unwrap()
}

const DRAIN_MESSAGE: &str = "failed to drain node w-1 after 1m: pod app/db-0: eviction refused by PodDisruptionBudget \"db\" (0 disruptions allowed)";

#[test]
fn pools_nodes_steps_and_reasons() {
    let pools = [
        pool(
            "worker",
            "worker",
            false,
            json!([{"type": "Updating", "status": "True"}]),
        ),
        pool(
            "master",
            "master",
            true,
            json!([{"type": "Degraded", "status": "True", "reason": "NodeDegraded", "message": "1 node is reporting degraded status"}]),
        ),
    ];
    let nodes = [
        node(
            "w-0",
            "worker",
            json!({CURRENT_CONFIG: "rendered-worker-2", DESIRED_CONFIG: "rendered-worker-2"}),
        ),
        node(
            "w-1",
            "worker",
            json!({CURRENT_CONFIG: "rendered-worker-1", DESIRED_CONFIG: "rendered-worker-2", STATE: "Working"}),
        ),
        node(
            "m-0",
            "master",
            json!({STATE: "Degraded", REASON: "unexpected on-disk state validating against rendered-master-1"}),
        ),
        node("infra-0", "infra", json!({})),
    ];
    let mcns = [mcn(
        "w-1",
        json!([
            {"type": "UpdatePrepared", "status": "True", "reason": "Done", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Drained", "status": "Unknown", "reason": "Draining", "message": DRAIN_MESSAGE, "lastTransitionTime": "2026-01-01T00:01:00Z"}
        ]),
    )];
    let status = build(&pools, &nodes, &mcns, &[]);

    assert_eq!(
        status.pools.iter().map(|p| &p.name).collect::<Vec<_>>(),
        ["master", "worker"]
    );
    assert_eq!(status.unmanaged_nodes, ["infra-0"]);

    let master = status.pool("master").unwrap();
    assert!(master.paused);
    assert_eq!(
        master.degraded.as_deref(),
        Some("1 node is reporting degraded status")
    );
    assert_eq!(master.nodes[0].state, "Degraded");
    assert_eq!(
        master.nodes[0].reason.as_deref(),
        Some("unexpected on-disk state validating against rendered-master-1")
    );
    assert_eq!(master.nodes[0].drain_blocked_by, None);

    let worker = status.pool("worker").unwrap();
    assert!(worker.updating && !worker.updated && worker.degraded.is_none());
    assert_eq!(
        (worker.config.as_str(), worker.target_config.as_str()),
        ("rendered-worker-1", "rendered-worker-2")
    );
    let [done, working] = &worker.nodes[..] else {
        panic!("two workers: {:?}", worker.nodes)
    };
    assert_eq!(
        (
            done.state.as_str(),
            done.step.is_none(),
            done.reason.is_none()
        ),
        ("Done", true, true)
    );
    let step = working.step.as_ref().unwrap();
    assert_eq!(
        (step.kind.as_str(), step.status.as_str()),
        ("Drained", "Unknown")
    );
    assert_eq!(working.reason.as_deref(), Some(DRAIN_MESSAGE));
    assert_eq!(
        working.drain_blocked_by,
        Some(DrainBlock {
            pod: "app/db-0".into(),
            budget: Some("db".into())
        })
    );
}

#[test]
fn drain_messages() {
    type Want<'a> = Option<(&'a str, Option<&'a str>)>;
    let cases: [(&str, Want); 5] = [
        (DRAIN_MESSAGE, Some(("app/db-0", Some("db")))),
        // The agent's reason while a drain controller drains (budgets named first).
        (
            &crate::error::waiting_for_drain_controller(
                "n",
                std::time::Duration::from_secs(180),
                &[crate::BlockedPod {
                    namespace: "app".into(),
                    name: "db-0".into(),
                    blocker: crate::Blocker::Budget {
                        pdb: "db".into(),
                        detail: "The disruption budget db needs 1 healthy pods and has 1 currently"
                            .into(),
                    },
                }],
            ),
            Some(("app/db-0", Some("db"))),
        ),
        (
            "failed to drain node n after 10s: pod a/b: evicted but still terminating",
            Some(("a/b", None)),
        ),
        ("unexpected on-disk state", None),
        ("the pod is fine: yes", None),
    ];
    for (message, want) in cases {
        let want = want.map(|(pod, budget)| DrainBlock {
            pod: pod.into(),
            budget: budget.map(String::from),
        });
        assert_eq!(drain_block(message), want, "{message}");
    }
}

#[test]
fn json_shape() {
    let status = build(&[pool("worker", "worker", false, json!([]))], &[], &[], &[]);
    let value = serde_json::to_value(&status).unwrap();
    assert_eq!(value["pools"][0]["targetConfig"], "rendered-worker-2");
    assert_eq!(value["pools"][0]["machineCount"], 2);
    assert_eq!(value["events"], json!([]));
    let back: FleetStatus = serde_json::from_value(value).unwrap();
    assert_eq!(back, status);
}
