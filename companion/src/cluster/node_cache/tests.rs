use super::*;
use crate::cluster::nodes::rollout_step;
use machine_config::MachineConfigPool;
use machine_config::mco::annotations::{CURRENT_CONFIG, DESIRED_CONFIG, DESIRED_IMAGE, STATE};
use serde_json::json;

/// A worker Node as the API has it, at `version`, with `desired` and `state`.
fn node(name: &str, uid: &str, version: &str, desired: &str, state: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name, "uid": uid, "resourceVersion": version,
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {"node-role.kubernetes.io/worker": ""},
                     "annotations": {CURRENT_CONFIG: "old", DESIRED_CONFIG: desired, STATE: state}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .unwrap()
}

fn pool(max_unavailable: i64, target: &str) -> MachineConfigPool {
    MachineConfigPool::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": "worker"},
        "spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}},
                 "maxUnavailable": max_unavailable, "configuration": {"name": target}}
    }))
    .unwrap()
}

/// Ten workers, all Done on `old`, at resourceVersion 1.
fn workers() -> Vec<Arc<Node>> {
    (0..10)
        .map(|i| {
            Arc::new(node(
                &format!("w{i}"),
                &format!("uid-{i}"),
                "1",
                "old",
                "Done",
            ))
        })
        .collect()
}

/// The names a rollout step over `nodes` to `target` targets (maxUnavailable 2).
fn step(nodes: &[Arc<Node>], target: &str) -> Vec<String> {
    let refs: Vec<&Node> = nodes.iter().map(|n| &**n).collect();
    rollout_step(&pool(2, target), &refs, |_| target.to_string())
        .into_iter()
        .map(|(n, _)| nodes::name(n).to_string())
        .collect()
}

/// `name` Done on `config`, at resourceVersion `version`.
fn done_on(name: &str, config: &str, version: &str) -> Arc<Node> {
    let uid = format!("uid-{}", &name[1..]);
    let mut n = node(name, &uid, version, config, "Done");
    let annotations = n.metadata.annotations.as_mut().unwrap();
    annotations.insert(CURRENT_CONFIG.into(), config.into());
    Arc::new(n)
}

/// The API's answer to setting desiredConfig `new` on `of`.
fn answer(of: &Node, version: &str) -> Node {
    answer_to(of, "new", version)
}

/// The API's answer to setting desiredConfig `config` on `of`.
fn answer_to(of: &Node, config: &str, version: &str) -> Node {
    let mut written = of.clone();
    set_desired(&mut written, config);
    written.metadata.resource_version = Some(version.to_string());
    written
}

fn set_desired(node: &mut Node, config: &str) {
    let annotations = node.metadata.annotations.get_or_insert_default();
    annotations.insert(DESIRED_CONFIG.to_string(), config.to_string());
}

fn record(written: &mut BTreeMap<String, Written>, node: Node, at: Instant) {
    let name = nodes::name(&node).to_string();
    // what the controller writes
    let keys = vec![DESIRED_CONFIG.to_string(), DESIRED_IMAGE.to_string()];
    let node = Arc::new(node);
    written.insert(name, Written { node, keys, at });
}

#[test]
fn the_next_pass_sees_its_own_targets_before_the_watch_does() {
    let now = Instant::now();
    // w0 and w1 already run `new`; the rest run `old`
    let mut cached = workers();
    cached[0] = done_on("w0", "new", "2");
    cached[1] = done_on("w1", "new", "2");
    let first = step(&cached, "new");
    assert_eq!(first, ["w2", "w3"]);
    let mut written = BTreeMap::new();
    for i in [2, 3] {
        record(&mut written, answer(&cached[i], "3"), now);
    }

    // A newer config arrives before the watch delivered those two patches. On the cache alone
    // the pass sees w2 and w3 Done and nobody unavailable, and targets two more (w0 and w1,
    // first in order) while w2 and w3 update: four at once, over maxUnavailable 2.
    assert_eq!(step(&cached, "newer"), ["w0", "w1"]);
    // With the answers it sees w2 and w3 unavailable and targets none.
    let seen = view(cached.clone(), &mut written, now).expect("within patience");
    assert_eq!(seen.len(), 10);
    assert_eq!(step(&seen, "newer"), Vec::<String>::new());
    assert_eq!(written.len(), 2, "kept until the cache shows them");

    // The watch catches up (the agents already moved on: Working, a later version): the
    // answers are dropped and the cache alone is the view.
    for i in [2, 3] {
        let uid = format!("uid-{i}");
        cached[i] = Arc::new(node(&format!("w{i}"), &uid, "4", "new", "Working"));
    }
    let seen = view(cached.clone(), &mut written, now).unwrap();
    assert!(written.is_empty());
    assert_eq!(nodes::desired(&seen[2]), Some("new"));
    assert_eq!(seen[2].metadata.resource_version.as_deref(), Some("4"));
    assert_eq!(step(&seen, "newer"), Vec::<String>::new());

    // Both finish: the next step takes the next two.
    cached[2] = done_on("w2", "new", "5");
    cached[3] = done_on("w3", "new", "5");
    let seen = view(cached, &mut written, now).unwrap();
    assert_eq!(step(&seen, "newer"), ["w0", "w1"]);
}

#[test]
fn an_answer_goes_when_the_cache_holds_its_version_or_the_node_is_gone_or_new() {
    let now = Instant::now();
    let cached = workers();
    let mut written = BTreeMap::new();
    // w0: the cache holds exactly the written version (whatever its annotations say)
    let same_version = answer_to(&cached[0], "other", "1");
    record(&mut written, same_version, now);
    // w1: recreated under the same name (another uid)
    record(
        &mut written,
        answer(&node("w1", "uid-old", "1", "old", "Done"), "2"),
        now,
    );
    // w9: deleted since
    record(&mut written, answer(&cached[9], "2"), now);
    // w2: not shown yet
    record(&mut written, answer(&cached[2], "2"), now);

    let seen = view(cached[..9].to_vec(), &mut written, now).unwrap();
    assert_eq!(
        seen.len(),
        9,
        "a deleted node is not brought back by its answer"
    );
    assert_eq!(written.keys().collect::<Vec<_>>(), ["w2"]);
    assert_eq!(nodes::desired(&seen[0]), Some("old"));
    assert_eq!(nodes::desired(&seen[1]), Some("old"));
    assert_eq!(nodes::desired(&seen[2]), Some("new"));
}

#[test]
fn a_cache_that_does_not_show_a_write_in_time_is_not_trusted() {
    let start = Instant::now();
    let cached = workers();
    let mut written = BTreeMap::new();
    record(&mut written, answer(&cached[0], "2"), start);
    assert!(view(cached.clone(), &mut written, start + PATIENCE).is_some());
    assert!(
        view(
            cached,
            &mut written,
            start + PATIENCE + Duration::from_secs(1)
        )
        .is_none(),
        "past PATIENCE the pass lists Nodes instead"
    );
}

#[test]
fn slim_keeps_what_the_controller_reads_and_nothing_else() {
    let mut full: Node = serde_json::from_value(json!({
        "metadata": {"name": "w0", "uid": "u", "resourceVersion": "7",
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {"node-role.kubernetes.io/worker": "", "topology.kubernetes.io/zone": "a"},
                     "annotations": {DESIRED_CONFIG: "new", "k8s.ovn.org/node-subnets": "x".repeat(4096)},
                     "managedFields": [{"manager": "kubelet", "operation": "Update"}],
                     "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "y"}]},
        "spec": {"unschedulable": true, "podCIDR": "10.0.0.0/24", "providerID": "aws://x"},
        "status": {
            "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                            "message": "PLEG", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}],
            "images": [{"names": ["quay.io/a@sha256:0"], "sizeBytes": 1}],
            "capacity": {"cpu": "4"},
            "nodeInfo": {"architecture": "amd64", "bootID": "b", "containerRuntimeVersion": "c",
                         "kernelVersion": "k", "kubeProxyVersion": "p", "kubeletVersion": "v",
                         "machineID": "m", "operatingSystem": "linux", "osImage": "o",
                         "systemUUID": "s"}}
    }))
    .unwrap();
    slim(&mut full);
    let expected: Node = serde_json::from_value(json!({
        "metadata": {"name": "w0", "uid": "u", "resourceVersion": "7",
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {"node-role.kubernetes.io/worker": "", "topology.kubernetes.io/zone": "a"},
                     "annotations": {DESIRED_CONFIG: "new"}},
        "spec": {"unschedulable": true},
        "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                                   "message": "PLEG"}]}
    }))
    .unwrap();
    assert_eq!(full, expected);
    assert!(!nodes::is_ready(&full), "readiness survives");
}

#[test]
fn a_fresh_list_takes_the_place_of_the_answers_it_is_newer_than() {
    let start = Instant::now();
    let cached = workers();
    let mut written = BTreeMap::new();
    record(&mut written, answer(&cached[0], "2"), start);
    record(&mut written, answer(&cached[9], "2"), start);
    let late = start + PATIENCE + Duration::from_secs(1);
    assert!(view(cached.clone(), &mut written, late).is_none());

    // the list: w0 as someone else left it after the controller's write; w9 gone
    let mut listed = cached[..9].to_vec();
    listed[0] = Arc::new(answer_to(&cached[0], "by-hand", "3"));
    relisted(&listed, &mut written, late);
    assert_eq!(written.keys().collect::<Vec<_>>(), ["w0"]);

    // The watch still lags: later passes read the listed version, within a new PATIENCE.
    let seen = view(cached.clone(), &mut written, late + PATIENCE).unwrap();
    assert_eq!(nodes::desired(&seen[0]), Some("by-hand"));
    assert_eq!(seen[0].metadata.resource_version.as_deref(), Some("3"));
    // Once the cache shows that version, it is the view again.
    let mut caught_up = cached;
    caught_up[0] = listed[0].clone();
    view(caught_up, &mut written, late + PATIENCE).unwrap();
    assert!(written.is_empty());
}

#[test]
fn the_drain_controllers_answers_are_shown_by_last_applied_drain() {
    use machine_config::mco::annotations::LAST_APPLIED_DRAIN;
    let now = Instant::now();
    let drained = |version: &str, applied: &str| {
        let mut n = node("w0", "uid-0", version, "new", "Working");
        let annotations = n.metadata.annotations.as_mut().unwrap();
        annotations.insert(LAST_APPLIED_DRAIN.into(), applied.into());
        Arc::new(n)
    };
    let mut written = BTreeMap::new();
    let answer = drained("5", "drain-new");
    let keys = vec![LAST_APPLIED_DRAIN.to_string()];
    written.insert(
        "w0".to_string(),
        Written {
            node: answer,
            keys,
            at: now,
        },
    );
    // the cache still has the request open: the pass reads the answer (nothing to do)
    let seen = view(vec![drained("4", "uncordon-old")], &mut written, now).unwrap();
    assert_eq!(seen[0].metadata.resource_version.as_deref(), Some("5"));
    // a later version with the written value: the cache is the view again
    let seen = view(vec![drained("6", "drain-new")], &mut written, now).unwrap();
    assert_eq!(seen[0].metadata.resource_version.as_deref(), Some("6"));
    assert!(written.is_empty());
}
