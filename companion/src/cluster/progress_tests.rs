use super::*;
use serde_json::{Value, json};

fn condition(kind: &str, status: &str, message: &str, time: &str) -> Value {
    json!({"type": kind, "status": status, "reason": kind, "message": message,
           "lastTransitionTime": time})
}

/// `worker-1`'s object wanting `desired`, running `current`, with `conditions`.
fn mcn(desired: &str, current: &str, conditions: &[&Value]) -> MachineConfigNode {
    serde_json::from_value(json!({
        "metadata": {"name": "worker-1"},
        "spec": {"node": {"name": "worker-1"}, "pool": {"name": "worker"},
                 "configVersion": {"desired": desired}},
        "status": {"conditions": conditions,
                   "configVersion": {"current": current, "desired": desired}},
    }))
    .unwrap()
}

fn lines(said: Vec<Progress>) -> Vec<String> {
    said.iter().map(|p| p.line("worker-1", "worker")).collect()
}

const A: &str = "rendered-worker-a";
const B: &str = "rendered-worker-b";
const ON: &str = "node worker-1 (pool worker) updating to rendered-worker-b";

#[test]
fn each_version_says_the_conditions_it_changed_whatever_their_times() {
    // every step in the second the node left its last update (transition times tie)
    let t = "2026-11-26T10:00:00Z";
    let was_updated = condition(
        "Updated",
        "True",
        "Node worker-1 Updated",
        "2026-11-26T09:00:00Z",
    );
    let resumed_off = condition("Resumed", "False", "Action during update to a: In a", t);
    let needs = condition("Updated", "False", "Node worker-1 needs an update", t);
    let prepared = condition("UpdatePrepared", "True", "Update Compatible.", t);
    let executing = condition("UpdateExecuted", "Unknown", "Started", t);
    let draining = condition("Drained", "Unknown", "Draining node", t);
    let drained = condition("Drained", "True", "Drained node", t);
    let failed = condition("NodeDegraded", "True", "failed to drain node", t);
    let updated = condition(
        "Updated",
        "True",
        "Node worker-1 Updated",
        "2026-11-26T10:01:00Z",
    );
    type Version<'a> = (&'a str, MachineConfigNode, Vec<String>);
    let versions: Vec<Version> = vec![
        // at start-up, a node already updated is not announced
        ("start-up", mcn(A, A, &[&was_updated]), vec![]),
        (
            "needs an update",
            mcn(B, A, &[&needs, &resumed_off]),
            vec![
                format!("{ON}: Updated False: Node worker-1 needs an update"),
                format!("{ON}: Resumed False: Action during update to a: In a"),
            ],
        ),
        (
            "the same object again",
            mcn(B, A, &[&needs, &resumed_off]),
            vec![],
        ),
        (
            "prepared, in the same second as a later step's condition",
            mcn(B, A, &[&needs, &resumed_off, &prepared]),
            vec![format!("{ON}: UpdatePrepared True: Update Compatible.")],
        ),
        (
            "a parent and its child in one write, in update order",
            mcn(
                B,
                A,
                &[&needs, &resumed_off, &prepared, &draining, &executing],
            ),
            vec![
                format!("{ON}: UpdateExecuted Unknown: Started"),
                format!("{ON}: Drained Unknown: Draining node"),
            ],
        ),
        (
            "drained",
            mcn(
                B,
                A,
                &[&needs, &resumed_off, &prepared, &drained, &executing],
            ),
            vec![format!("{ON}: Drained True: Drained node")],
        ),
        (
            "degraded",
            mcn(
                B,
                A,
                &[
                    &needs,
                    &resumed_off,
                    &prepared,
                    &drained,
                    &executing,
                    &failed,
                ],
            ),
            vec![format!("{ON}: NodeDegraded True: failed to drain node")],
        ),
        (
            "updated (the other conditions turned False are not listed)",
            mcn(B, B, &[&updated, &resumed_off]),
            vec!["node worker-1 (pool worker) updated to rendered-worker-b".to_string()],
        ),
        ("updated, again", mcn(B, B, &[&updated]), vec![]),
    ];
    let mut journal = Journal::default();
    for (what, object, want) in versions {
        assert_eq!(lines(journal.next(&object)), want, "{what}");
    }
}

#[test]
fn a_failure_is_a_warning_and_a_node_seen_first_mid_update_says_its_latest_step() {
    let mut journal = Journal::default();
    assert!(
        journal.next(&mcn(B, "", &[])).is_empty(),
        "nothing happened yet"
    );
    journal.forget("worker-1");
    let cordoned = condition("Cordoned", "True", "Cordoned node", "2026-11-26T10:00:01Z");
    let needs = condition("Updated", "False", "needs", "2026-11-26T10:00:00Z");
    assert_eq!(
        lines(journal.next(&mcn(B, A, &[&needs, &cordoned]))),
        [format!("{ON}: Cordoned True: Cordoned node")]
    );
    let failed = condition("NodeDegraded", "True", "boom", "2026-11-26T10:00:02Z");
    let said = journal.next(&mcn(B, A, &[&needs, &cordoned, &failed]));
    assert_eq!(said.len(), 1);
    assert!(said[0].is_failure());
    journal.forget("worker-1");
    assert_eq!(
        journal
            .next(&mcn(B, A, &[&needs, &cordoned, &failed]))
            .len(),
        1,
        "a node that came back is followed again"
    );
}
