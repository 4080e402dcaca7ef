use super::*;
use serde_json::{Value, json};

fn condition(kind: &str, status: &str, message: &str, time: &str) -> Value {
    json!({"type": kind, "status": status, "reason": kind, "message": message,
           "lastTransitionTime": time})
}

/// `worker-1`'s object wanting `desired`, running `current`, with `conditions`.
fn mcn(desired: &str, current: &str, conditions: Vec<Value>) -> MachineConfigNode {
    serde_json::from_value(json!({
        "metadata": {"name": "worker-1"},
        "spec": {"node": {"name": "worker-1"}, "pool": {"name": "worker"},
                 "configVersion": {"desired": desired}},
        "status": {"conditions": conditions,
                   "configVersion": {"current": current, "desired": desired}},
    }))
    .unwrap()
}

#[test]
fn the_journal_says_each_step_once_and_the_arrival_of_a_node_it_followed() {
    let needs = condition(
        "Updated",
        "False",
        "Node worker-1 needs an update",
        "2026-11-26T10:00:00Z",
    );
    let prepared = condition(
        "UpdatePrepared",
        "True",
        "Update Compatible.",
        "2026-11-26T10:00:01Z",
    );
    let draining = condition(
        "Drained",
        "Unknown",
        "Draining node",
        "2026-11-26T10:00:02Z",
    );
    let failed = condition(
        "NodeDegraded",
        "True",
        "failed to drain node",
        "2026-11-26T10:00:09Z",
    );
    let updated = condition(
        "Updated",
        "True",
        "Node worker-1 Updated",
        "2026-11-26T10:01:00Z",
    );
    let b = "rendered-worker-b";
    let on = "node worker-1 (pool worker) updating to rendered-worker-b";
    type Version = (&'static str, MachineConfigNode, Option<(String, bool)>);
    let versions: Vec<Version> = vec![
        // at start-up, a node already updated is not announced
        (
            "start-up",
            mcn(
                "rendered-worker-a",
                "rendered-worker-a",
                vec![condition(
                    "Updated",
                    "True",
                    "Node worker-1 Updated",
                    "2026-11-26T09:00:00Z",
                )],
            ),
            None,
        ),
        (
            "needs an update",
            mcn(b, "rendered-worker-a", vec![needs.clone()]),
            Some((
                format!("{on}: Updated False: Node worker-1 needs an update"),
                false,
            )),
        ),
        (
            "the same object again",
            mcn(b, "rendered-worker-a", vec![needs.clone()]),
            None,
        ),
        (
            "prepared",
            mcn(
                b,
                "rendered-worker-a",
                vec![needs.clone(), prepared.clone()],
            ),
            Some((
                format!("{on}: UpdatePrepared True: Update Compatible."),
                false,
            )),
        ),
        (
            "draining",
            mcn(
                b,
                "rendered-worker-a",
                vec![needs.clone(), prepared.clone(), draining.clone()],
            ),
            Some((format!("{on}: Drained Unknown: Draining node"), false)),
        ),
        (
            "degraded",
            mcn(
                b,
                "rendered-worker-a",
                vec![needs, prepared, draining, failed],
            ),
            Some((
                format!("{on}: NodeDegraded True: failed to drain node"),
                true,
            )),
        ),
        (
            "updated",
            mcn(b, b, vec![updated.clone()]),
            Some((
                "node worker-1 (pool worker) updated to rendered-worker-b".to_string(),
                false,
            )),
        ),
        ("updated, again", mcn(b, b, vec![updated]), None),
    ];
    let mut journal = Journal::default();
    for (what, object, want) in versions {
        assert_eq!(journal.next(&object), want, "{what}");
    }
}

#[test]
fn a_forgotten_node_is_new_again_and_an_object_without_steps_says_nothing() {
    let mut journal = Journal::default();
    assert_eq!(journal.next(&mcn("rendered-worker-b", "", vec![])), None);
    let step = mcn(
        "rendered-worker-b",
        "rendered-worker-a",
        vec![condition(
            "Cordoned",
            "True",
            "Cordoned node",
            "2026-11-26T10:00:00Z",
        )],
    );
    assert!(journal.next(&step).is_some());
    assert!(journal.next(&step).is_none());
    journal.forget("worker-1");
    assert!(
        journal.next(&step).is_some(),
        "a node that came back is followed again"
    );
}
