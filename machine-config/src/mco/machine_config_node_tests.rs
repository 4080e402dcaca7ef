use super::*;
use serde_json::{Value, json};

fn condition(kind: &str, status: &str, reason: &str, message: &str, time: &str) -> Value {
    json!({"type": kind, "status": status, "reason": reason, "message": message,
           "lastTransitionTime": time})
}

const T0: &str = "2026-11-26T10:00:00Z";
const T1: &str = "2026-11-26T10:00:01Z";
const T2: &str = "2026-11-26T10:00:07Z";

/// A MachineConfigNode as the agent writes it: the placeholders of a new object, then `steps`
/// (each replacing the placeholder of its type).
fn mcn(steps: &[Value], current: &str) -> MachineConfigNode {
    let mut conditions: Vec<Value> = crate::mco::node_conditions::CONDITION_TYPES
        .iter()
        .map(|k| {
            condition(
                k,
                "False",
                NOT_YET_OCCURRED,
                "This node has not yet updated",
                T0,
            )
        })
        .collect();
    for step in steps {
        let slot = conditions
            .iter_mut()
            .find(|c| c["type"] == step["type"])
            .expect("a known condition type");
        *slot = step.clone();
    }
    serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigNode",
        "metadata": {"name": "worker-0"},
        "spec": {"node": {"name": "worker-0"}, "pool": {"name": "worker"},
                 "configVersion": {"desired": "rendered-worker-b"}},
        "status": {"conditions": conditions,
                   "configVersion": {"current": current, "desired": "rendered-worker-b"}},
    }))
    .unwrap()
}

#[test]
fn the_latest_step_is_the_last_change_and_the_later_step_in_the_same_second() {
    let prepared = condition(
        UPDATE_PREPARED,
        "True",
        UPDATE_PREPARED,
        "Update Compatible.",
        T1,
    );
    let executing = condition(UPDATE_EXECUTED, "Unknown", CORDONED, "Started", T1);
    let cordoned = condition(
        CORDONED,
        "True",
        "UpdateExecutedCordoned",
        "Cordoned node",
        T1,
    );
    let draining = condition(
        DRAINED,
        "Unknown",
        "UpdateExecutedDrained",
        "Draining node",
        T2,
    );
    let degraded = condition(NODE_DEGRADED, "True", "NodeDegraded", "failed to drain", T2);
    let cases: [(&str, Vec<Value>, Option<(&str, Status)>); 5] = [
        ("a new object", vec![], None),
        (
            "prepared",
            vec![prepared.clone()],
            Some((UPDATE_PREPARED, Status::True)),
        ),
        (
            "cordoned in the second the execution started",
            vec![prepared.clone(), cordoned.clone(), executing.clone()],
            Some((CORDONED, Status::True)),
        ),
        (
            "draining",
            vec![
                prepared.clone(),
                executing.clone(),
                cordoned.clone(),
                draining.clone(),
            ],
            Some((DRAINED, Status::Unknown)),
        ),
        (
            "degraded while draining",
            vec![prepared, executing, cordoned, draining, degraded],
            Some((NODE_DEGRADED, Status::True)),
        ),
    ];
    for (what, steps, want) in cases {
        let got = mcn(&steps, "rendered-worker-a");
        let got = got.latest_step().map(|c| (c.kind.as_str(), c.status));
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn updated_and_degraded_are_read_from_the_conditions() {
    let updated = condition(UPDATED, "True", UPDATED, "Node worker-0 Updated", T2);
    let done = mcn(std::slice::from_ref(&updated), "rendered-worker-b");
    assert!(done.is_updated_to("rendered-worker-b"));
    assert!(!done.is_updated_to("rendered-worker-c"));
    assert_eq!(done.degraded_message(), None);
    // Updated True for the config it left: not updated to the new one
    assert!(!mcn(&[updated], "rendered-worker-a").is_updated_to("rendered-worker-b"));

    let degraded = condition(
        NODE_DEGRADED,
        "True",
        "NodeDegraded",
        "drain failed: pdb",
        T2,
    );
    assert_eq!(
        mcn(&[degraded], "rendered-worker-a").degraded_message(),
        Some("drain failed: pdb")
    );
    let recovered = condition(
        NODE_DEGRADED,
        "False",
        "NodeDegraded",
        "drain failed: pdb",
        T2,
    );
    assert_eq!(
        mcn(&[recovered], "rendered-worker-a").degraded_message(),
        None
    );
}

#[test]
fn a_bare_or_null_object_reads_as_empty() {
    for object in [
        json!({"metadata": {"name": "n"}}),
        json!({"metadata": {"name": "n"}, "spec": null, "status": null}),
        json!({"metadata": {"name": "n"}, "status": {"conditions": null, "configVersion": null}}),
    ] {
        let mcn: MachineConfigNode = serde_json::from_value(object.clone()).unwrap();
        assert_eq!(mcn.name(), "n", "{object}");
        assert_eq!(mcn.latest_step(), None, "{object}");
        assert!(!mcn.is_updated_to(""), "{object}");
    }
}
