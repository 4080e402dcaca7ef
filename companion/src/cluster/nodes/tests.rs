use super::*;
use serde_json::{Value, json};

/// A worker node: (name, current, desired, state, ready, zone, created).
fn node(
    name: &str,
    current: &str,
    desired: &str,
    state: &str,
    ready: bool,
    zone: Option<&str>,
    created: &str,
) -> Node {
    let mut labels = json!({"node-role.kubernetes.io/worker": ""});
    if let Some(zone) = zone {
        labels[ZONE_LABEL] = json!(zone);
    }
    let mut annotations = serde_json::Map::new();
    for (k, v) in [
        (CURRENT_CONFIG, current),
        (DESIRED_CONFIG, desired),
        (STATE, state),
    ] {
        if !v.is_empty() {
            annotations.insert(k.into(), json!(v));
        }
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels, "annotations": annotations,
                     "creationTimestamp": created},
        "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
    }))
    .unwrap()
}

fn pool(name: &str, target: &str, max_unavailable: Value, paused: bool) -> MachineConfigPool {
    MachineConfigPool::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": name, "generation": 3},
        "spec": {"machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": name}},
                 "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}},
                 "maxUnavailable": max_unavailable, "paused": paused,
                 "configuration": {"name": target}},
        "status": {"configuration": {"name": "old"}}
    }))
    .unwrap()
}

const T0: &str = "2026-01-01T00:00:00Z";

fn fleet(states: &[(&str, &str, &str, bool)]) -> Vec<Node> {
    // worker-0..n, zones b, a, none...; created in order
    states
        .iter()
        .enumerate()
        .map(|(i, (current, desired, state, ready))| {
            let zone = [Some("zone-b"), Some("zone-a"), None][i % 3];
            node(
                &format!("worker-{i}"),
                current,
                desired,
                state,
                *ready,
                zone,
                &format!("2026-01-01T00:00:0{i}Z"),
            )
        })
        .collect()
}

fn names(step: &[(&Node, String)]) -> Vec<String> {
    step.iter()
        .map(|(n, c)| format!("{}={c}", name(n)))
        .collect()
}

#[test]
fn node_states() {
    let rows: Vec<(Node, bool, bool, bool, bool)> = vec![
        // (node, done, ready, failing, unavailable)
        (
            node("a", "c1", "c1", "Done", true, None, T0),
            true,
            true,
            false,
            false,
        ),
        (
            node("b", "c1", "c2", "Working", true, None, T0),
            false,
            true,
            false,
            true,
        ),
        (
            node("c", "c1", "c2", "Done", true, None, T0),
            false,
            true,
            false,
            true,
        ),
        (
            node("d", "c1", "c2", "Degraded", true, None, T0),
            false,
            true,
            true,
            false,
        ),
        (
            node("e", "c1", "c2", "Unreconcilable", true, None, T0),
            false,
            true,
            true,
            false,
        ),
        (
            node("f", "c1", "c1", "Done", false, None, T0),
            true,
            false,
            false,
            true,
        ),
        (
            node("g", "c1", "c1", "Degraded", true, None, T0),
            false,
            true,
            false,
            true,
        ),
        (
            node("h", "", "", "", true, None, T0),
            false,
            true,
            false,
            true,
        ),
    ];
    for (n, done, ready, failing, unavailable) in rows {
        assert_eq!(
            (
                is_done(&n),
                is_ready(&n),
                is_failing(&n),
                is_unavailable(&n)
            ),
            (done, ready, failing, unavailable),
            "{}",
            name(&n)
        );
    }
    let mut cordoned = node("x", "c1", "c1", "Done", true, None, T0);
    cordoned.spec = Some(serde_json::from_value(json!({"unschedulable": true})).unwrap());
    assert_eq!(
        not_ready(&cordoned).unwrap(),
        "node x is reporting Unschedulable"
    );
}

#[test]
fn rollout_respects_max_unavailable_zone_and_age() {
    let all_done = [("old", "old", "Done", true); 5];
    let nodes = fleet(&all_done);
    let refs: Vec<&Node> = nodes.iter().collect();
    let target = |_: &Node| "new".to_string();
    // zone-a (worker-1, worker-4) first, then zone-b (worker-0, worker-3), then no zone (worker-2)
    let two = pool("worker", "new", json!(2), false);
    assert_eq!(
        names(&rollout_step(&two, &refs, target)),
        ["worker-1=new", "worker-4=new"]
    );
    let all = pool("worker", "new", json!(10), false);
    assert_eq!(
        names(&rollout_step(&all, &refs, target)),
        [
            "worker-1=new",
            "worker-4=new",
            "worker-0=new",
            "worker-3=new",
            "worker-2=new"
        ]
    );
    // 40% of 5 = 2; 10% of 5 rounds down to 0, which means 1
    assert_eq!(
        rollout_step(&pool("worker", "new", json!("40%"), false), &refs, target).len(),
        2
    );
    assert_eq!(
        rollout_step(&pool("worker", "new", json!("10%"), false), &refs, target).len(),
        1
    );
    // default 1; paused: none
    assert_eq!(
        rollout_step(&pool("worker", "new", Value::Null, false), &refs, target).len(),
        1
    );
    assert!(rollout_step(&pool("worker", "new", json!(2), true), &refs, target).is_empty());

    // two nodes already working toward `new`: no capacity left
    let nodes = fleet(&[
        ("old", "new", "Working", true),
        ("old", "new", "Done", true),
        ("old", "old", "Done", true),
        ("old", "old", "Done", true),
        ("old", "old", "Done", true),
    ]);
    let refs: Vec<&Node> = nodes.iter().collect();
    assert!(rollout_step(&two, &refs, target).is_empty());

    // one updated, one working: one more
    let nodes = fleet(&[
        ("new", "new", "Done", true),
        ("old", "new", "Working", true),
        ("old", "old", "Done", true),
        ("old", "old", "Done", false),
        ("old", "old", "Done", true),
    ]);
    let refs: Vec<&Node> = nodes.iter().collect();
    // worker-3 is not ready: unavailable, so no capacity with maxUnavailable 2
    assert!(rollout_step(&two, &refs, target).is_empty());
    let three = pool("worker", "new", json!(3), false);
    // capacity 1; not-ready worker-3 is no candidate; zone-a first: worker-4
    assert_eq!(
        names(&rollout_step(&three, &refs, target)),
        ["worker-4=new"]
    );

    // a node failing on the target counts against capacity
    let nodes = fleet(&[
        ("old", "new", "Degraded", true),
        ("old", "old", "Done", true),
        ("old", "old", "Done", true),
    ]);
    let refs: Vec<&Node> = nodes.iter().collect();
    assert_eq!(names(&rollout_step(&two, &refs, target)), ["worker-1=new"]);

    // per-node targets
    let per_node = |n: &Node| {
        if name(n) == "worker-1" {
            "new-w1".to_string()
        } else {
            "new".to_string()
        }
    };
    let nodes = fleet(&all_done[..2]);
    let refs: Vec<&Node> = nodes.iter().collect();
    assert_eq!(
        names(&rollout_step(&two, &refs, per_node)),
        ["worker-1=new-w1", "worker-0=new"]
    );
}

#[test]
fn status_counts_and_conditions() {
    let target = |_: &Node| "new".to_string();
    let nodes = fleet(&[
        ("new", "new", "Done", true),
        ("old", "new", "Working", true),
        ("old", "new", "Degraded", true),
        ("old", "old", "Done", true),
        ("new", "new", "Done", false),
    ]);
    let mut nodes = nodes;
    nodes[2]
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(REASON.into(), "disk on fire".into());
    let refs: Vec<&Node> = nodes.iter().collect();
    let p = pool("worker", "new", json!(2), false);
    let status = pool_status(&p, &refs, target, None, T0);
    assert_eq!(
        (
            status.machine_count,
            status.updated_machine_count,
            status.ready_machine_count,
            status.unavailable_machine_count,
            status.degraded_machine_count,
            status.observed_generation
        ),
        (5, 2, 1, 2, 1, 3)
    );
    let cond = |s: &PoolStatus, t: &str| {
        let c = s.conditions.iter().find(|c| c.type_ == t).unwrap();
        (c.status.clone(), c.message.clone())
    };
    assert_eq!(cond(&status, "Updated").0, "False");
    assert_eq!(
        cond(&status, "Updating"),
        (
            "True".into(),
            "All nodes are updating to MachineConfig new".into()
        )
    );
    assert_eq!(
        cond(&status, "NodeDegraded"),
        (
            "True".into(),
            "Node worker-2 is reporting: \"disk on fire\"".into()
        )
    );
    assert_eq!(cond(&status, "Degraded").0, "True");
    assert_eq!(cond(&status, "RenderDegraded").0, "False");
    assert_eq!(status.configuration.name, "old");

    let paused = pool("worker", "new", json!(2), true);
    let status = pool_status(&paused, &refs, target, Some("boom"), "2026-01-02T00:00:00Z");
    assert_eq!(
        cond(&status, "Updating"),
        (
            "False".into(),
            "Pool is paused; will not update to MachineConfig new".into()
        )
    );
    assert_eq!(
        cond(&status, "RenderDegraded"),
        (
            "True".into(),
            "Failed to render configuration for pool worker: boom".into()
        )
    );

    // everything updated: Updated, configuration follows spec, transition times kept when unchanged
    let done = fleet(&[("new", "new", "Done", true), ("new", "new", "Done", true)]);
    let refs: Vec<&Node> = done.iter().collect();
    let first = pool_status(&p, &refs, target, None, T0);
    assert_eq!(
        cond(&first, "Updated"),
        (
            "True".into(),
            "All nodes are updated with MachineConfig new".into()
        )
    );
    assert_eq!(first.configuration.name, "new");
    let mut p2 = p.clone();
    p2.status = first.clone();
    let second = pool_status(&p2, &refs, target, None, "2026-05-05T00:00:00Z");
    let updated = second
        .conditions
        .iter()
        .find(|c| c.type_ == "Updated")
        .unwrap();
    assert_eq!(updated.last_transition_time.as_deref(), Some(T0));
    assert_eq!(cond(&second, "Degraded").0, "False");
}

/// A degraded node without a `reason` annotation is explained by its MachineConfigNode; the
/// annotations still decide who is degraded (an object saying so of a Done node is not read).
#[test]
fn a_degraded_node_without_a_reason_is_explained_by_its_machine_config_node() {
    let nodes = fleet(&[
        ("old", "new", "Degraded", true),
        ("old", "new", "Degraded", true),
        ("new", "new", "Done", true),
    ]);
    let refs: Vec<&Node> = nodes.iter().collect();
    let p = pool("worker", "new", json!(1), false);
    let said_by_mcns = |node: &str| match node {
        "worker-0" => Some("failed to drain node: pdb".to_string()),
        "worker-2" => Some("an old failure".to_string()),
        _ => None,
    };
    let target = |_: &Node| "new".to_string();
    let status = pool_status_with_image(&p, &refs, target, None, None, &said_by_mcns, T0);
    let degraded = status
        .conditions
        .iter()
        .find(|c| c.type_ == "NodeDegraded")
        .unwrap();
    assert_eq!(status.degraded_machine_count, 2);
    assert_eq!(
        degraded.message,
        "Node worker-0 is reporting: \"failed to drain node: pdb\""
    );
}

#[test]
fn primary_pool_rules() {
    let worker = pool("worker", "w", json!(1), false);
    let infra = pool("infra", "i", json!(1), false);
    let master = pool("master", "m", json!(1), false);
    let gpu = pool("gpu", "g", json!(1), false);
    let pools = vec![worker, infra, master, gpu];
    let with_roles = |roles: &[&str]| {
        let mut n = node("n", "", "", "", true, None, T0);
        n.metadata.labels = Some(
            roles
                .iter()
                .map(|r| (format!("node-role.kubernetes.io/{r}"), String::new()))
                .collect(),
        );
        n
    };
    let pick = |roles: &[&str]| {
        primary_pool(&with_roles(roles), &pools).map(|p| p.map(|p| p.name().to_string()))
    };
    assert_eq!(pick(&[]), Ok(None));
    assert_eq!(pick(&["worker"]), Ok(Some("worker".into())));
    assert_eq!(pick(&["worker", "infra"]), Ok(Some("infra".into())));
    assert_eq!(pick(&["worker", "master"]), Ok(Some("master".into())));
    assert_eq!(
        pick(&["worker", "infra", "gpu"]),
        Err("node n belongs to 2 custom roles, cannot proceed with this Node".into())
    );
}

/// `node` with image annotations set (empty: absent).
fn with_images(mut n: Node, current: &str, desired: &str) -> Node {
    let a = n.metadata.annotations.get_or_insert_with(Default::default);
    for (k, v) in [(CURRENT_IMAGE, current), (DESIRED_IMAGE, desired)] {
        if !v.is_empty() {
            a.insert(k.into(), v.into());
        }
    }
    n
}

#[test]
fn image_mode_rollouts_and_status() {
    const IMG: &str = "registry.example/ocl/worker@sha256:2";
    const OLD: &str = "registry.example/ocl/worker@sha256:1";
    let p = pool("worker", "rendered-2", json!(1), false);
    let target = |_: &Node| "rendered-2".to_string();
    struct Case {
        name: &'static str,
        /// (current image, desired image) of three nodes done in rendered-2.
        images: [(&'static str, &'static str); 3],
        image: Option<&'static str>,
        step: Vec<&'static str>,
        updated: i64,
    }
    let cases = [
        Case {
            name: "a pool enters image mode: one node at a time",
            images: [("", ""), ("", ""), ("", "")],
            image: Some(IMG),
            // zone-a first
            step: vec!["worker-1=rendered-2"],
            updated: 0,
        },
        Case {
            name: "a node updating to the image counts against maxUnavailable",
            images: [(OLD, IMG), (OLD, OLD), (OLD, OLD)],
            image: Some(IMG),
            step: vec![],
            updated: 0,
        },
        Case {
            name: "the next node once the first is in the image",
            images: [(IMG, IMG), (OLD, OLD), (OLD, OLD)],
            image: Some(IMG),
            step: vec!["worker-1=rendered-2"],
            updated: 1,
        },
        Case {
            name: "all in the image: nothing to do",
            images: [(IMG, IMG), (IMG, IMG), (IMG, IMG)],
            image: Some(IMG),
            step: vec![],
            updated: 3,
        },
        Case {
            name: "the pool leaves image mode: desiredImage goes, one at a time",
            images: [(IMG, IMG), (IMG, IMG), (IMG, IMG)],
            image: None,
            step: vec!["worker-1=rendered-2"],
            updated: 0,
        },
    ];
    for c in cases {
        let nodes: Vec<Node> = fleet(&[
            ("rendered-2", "rendered-2", "Done", true),
            ("rendered-2", "rendered-2", "Done", true),
            ("rendered-2", "rendered-2", "Done", true),
        ])
        .into_iter()
        .zip(c.images)
        .map(|(n, (cur, des))| with_images(n, cur, des))
        .collect();
        let refs: Vec<&Node> = nodes.iter().collect();
        let step = rollout_step_with_image(&p, &refs, target, c.image);
        assert_eq!(names(&step), c.step, "{}", c.name);
        let status = pool_status_with_image(&p, &refs, target, c.image, None, &|_| None, T0);
        assert_eq!(status.updated_machine_count, c.updated, "{}", c.name);
    }
}
