//! The agent's drains against the Kubernetes API test server (in process, HTTPS): evictions in
//! parallel with a separate credential, DaemonSet, mirror and emptyDir pods, a blocking
//! PodDisruptionBudget named in the error, one that frees up, the controller handshake. The
//! agent's `drain`/`uncordon` commands are tested with the agent (`agent/tests/drain_cli.rs`).

use std::time::{Duration, Instant};

use machine_config::mco::annotations::{DESIRED_DRAIN, LAST_APPLIED_DRAIN, REASON, STATE};
use mco_kube::{ClusterOptions, DrainMode, DrainOptions, KubeNodeApi, NodeApi, RetryPolicy};
use mco_test_support::apiserver::{Target, TestApiServer, fixtures};
use serde_json::{Value, json};

const NODE: &str = "worker-0";
const EVICTOR: &str =
    "system:serviceaccount:openshift-machine-config-operator:machine-config-daemon";

fn fast_drain() -> DrainOptions {
    DrainOptions {
        attempt_timeout: Duration::from_secs(20),
        overall_timeout: Duration::from_secs(30),
        eviction_retry: Duration::from_millis(500),
        attempt_pause: Duration::from_millis(200),
        poll_interval: Duration::from_millis(100),
    }
}

fn cluster() -> TestApiServer {
    let server = TestApiServer::start().unwrap();
    server.seed(fixtures::node(NODE)).unwrap();
    server.seed(fixtures::node("worker-1")).unwrap();
    server.seed(fixtures::namespace("apps")).unwrap();
    server
}

/// The node's kubeconfig, the test's quick handshake polls and retries.
fn options(server: &TestApiServer, mode: DrainMode) -> ClusterOptions {
    let kubeconfig = server.dir().join("kubelet.kubeconfig");
    server
        .write_kubeconfig(&kubeconfig, &format!("system:node:{NODE}"))
        .unwrap();
    let mut options = ClusterOptions::new(NODE);
    options.kubeconfig = kubeconfig;
    options.drain_mode = mode;
    options.handshake.poll_interval = Duration::from_millis(100);
    options.retry = RetryPolicy {
        initial_delay: Duration::from_millis(50),
        max_delay: Duration::from_millis(500),
        attempt_timeout: Duration::from_secs(2),
    };
    options
}

async fn node_api(server: &TestApiServer, mode: DrainMode, drain: DrainOptions) -> KubeNodeApi {
    let eviction = server.dir().join("evictor.kubeconfig");
    server.write_kubeconfig(&eviction, EVICTOR).unwrap();
    let mut options = options(server, mode);
    options.eviction_kubeconfig = Some(eviction);
    options.drain = drain;
    KubeNodeApi::connect(&options).await.unwrap()
}

/// Pod `apps/web-1` on the node, held by budget `web-budget` (`maxUnavailable: 0`).
fn seed_held_pod(server: &TestApiServer) {
    server
        .seed(fixtures::pod("apps", "web-1", NODE, &[("app", "web")]))
        .unwrap();
    server
        .seed(fixtures::pdb(
            "apps",
            "web-budget",
            &[("app", "web")],
            json!({"maxUnavailable": 0}),
        ))
        .unwrap();
}

fn pod_names(server: &TestApiServer, node: &str) -> Vec<String> {
    let mut names: Vec<String> = server
        .list("pods", None)
        .iter()
        .filter(|p| p["spec"]["nodeName"] == node)
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

fn node(server: &TestApiServer) -> Value {
    server.get("nodes", None, NODE).unwrap()
}

fn annotation(server: &TestApiServer, key: &str) -> Option<String> {
    node(server)["metadata"]["annotations"][key]
        .as_str()
        .map(String::from)
}

fn event_reasons(server: &TestApiServer) -> Vec<String> {
    let mut events = server.list("events", None);
    events.sort_by_key(|e| {
        e["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    });
    events
        .iter()
        .map(|e| e["reason"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn drain_evicts_in_parallel_and_leaves_running_daemonset_and_mirror_pods() {
    let server = cluster();
    server.seed(fixtures::daemonset("apps", "agent")).unwrap();
    server
        .seed(fixtures::daemonset_pod("apps", "agent-w0", NODE, "agent"))
        .unwrap();
    server
        .seed(fixtures::mirror_pod("kube-system", "etcd-w0", NODE))
        .unwrap();
    server
        .seed(fixtures::emptydir_pod(
            "apps",
            "cache",
            NODE,
            &[("app", "cache")],
        ))
        .unwrap();
    // Finished pods go, a DaemonSet's too (kubectl's filters let every finished pod through).
    let mut finished = fixtures::pod("apps", "job-done", NODE, &[]);
    finished["status"]["phase"] = json!("Succeeded");
    server.seed(finished).unwrap();
    let mut failed = fixtures::daemonset_pod("apps", "agent-old", NODE, "agent");
    failed["status"]["phase"] = json!("Failed");
    server.seed(failed).unwrap();
    let mut unmanaged = fixtures::pod("apps", "bare", NODE, &[]);
    unmanaged["metadata"]["ownerReferences"] = json!([]);
    server.seed(unmanaged).unwrap();
    for i in 1..=3 {
        server
            .seed(fixtures::pod(
                "apps",
                &format!("web-{i}"),
                NODE,
                &[("app", "web")],
            ))
            .unwrap();
    }
    server
        .seed(fixtures::pod(
            "apps",
            "web-other",
            "worker-1",
            &[("app", "web")],
        ))
        .unwrap();
    server
        .seed(fixtures::pdb(
            "apps",
            "web",
            &[("app", "web")],
            json!({"maxUnavailable": "75%"}),
        ))
        .unwrap();
    // Each evicted pod takes 2 s to terminate: one after the other would take 14 s.
    server.set_pod_termination_delay(Duration::from_secs(2));

    let api = node_api(&server, DrainMode::Agent, fast_drain()).await;
    let started = Instant::now();
    api.drain("rendered-worker-1").await.unwrap();
    let elapsed = started.elapsed();
    eprintln!("drain of 7 pods with 2 s termination each took {elapsed:?}");
    // One after the other cannot take less than 14 s; in parallel it takes about 2 s. The bound
    // sits well under the serial floor so a loaded machine does not fail a parallel drain.
    assert!(
        elapsed >= Duration::from_secs(2) && elapsed < Duration::from_millis(9500),
        "{elapsed:?}: the evictions did not run in parallel"
    );

    assert_eq!(node(&server)["spec"]["unschedulable"], true);
    assert_eq!(pod_names(&server, NODE), ["agent-w0", "etcd-w0"]);
    assert_eq!(pod_names(&server, "worker-1"), ["web-other"]);
    let requests = server.requests();
    let evictions: Vec<_> = requests
        .iter()
        .filter(|r| r.path.ends_with("/eviction") && r.status == 201)
        .collect();
    assert_eq!(
        evictions.len(),
        7,
        "web-1..3, cache, bare, job-done and agent-old are evicted"
    );
    assert!(
        evictions.iter().all(|r| r.user == EVICTOR),
        "evictions use the eviction credential"
    );
    assert!(
        requests
            .iter()
            .filter(|r| r.path.starts_with("/api/v1/nodes/") && r.method == "PATCH")
            .all(|r| r.user == format!("system:node:{NODE}"))
    );
    assert!(
        !requests.iter().any(|r| r.method == "DELETE"),
        "nothing is deleted directly"
    );
    assert_eq!(
        annotation(&server, DESIRED_DRAIN).as_deref(),
        Some("drain-rendered-worker-1")
    );
    assert_eq!(
        annotation(&server, LAST_APPLIED_DRAIN).as_deref(),
        Some("drain-rendered-worker-1")
    );
    assert_eq!(event_reasons(&server), ["Cordon", "Drain"]);

    api.uncordon("rendered-worker-1").await.unwrap();
    assert!(node(&server)["spec"].get("unschedulable").is_none());
    assert_eq!(
        annotation(&server, LAST_APPLIED_DRAIN).as_deref(),
        Some("uncordon-rendered-worker-1")
    );
    assert_eq!(event_reasons(&server), ["Cordon", "Drain", "Uncordon"]);
}

#[tokio::test]
async fn a_blocking_budget_is_named_in_the_error() {
    let server = cluster();
    server
        .seed(fixtures::pod("apps", "web-1", NODE, &[("app", "web")]))
        .unwrap();
    server
        .seed(fixtures::pod("apps", "free", NODE, &[]))
        .unwrap();
    server
        .seed(fixtures::pdb(
            "apps",
            "web-budget",
            &[("app", "web")],
            json!({"minAvailable": 1}),
        ))
        .unwrap();
    let options = DrainOptions {
        attempt_timeout: Duration::from_secs(2),
        overall_timeout: Duration::from_secs(3),
        ..fast_drain()
    };
    let api = node_api(&server, DrainMode::Agent, options).await;
    let err = api
        .drain("rendered-worker-1")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(&format!("failed to drain node {NODE} after ")),
        "{err}"
    );
    assert!(
        err.contains("pod apps/web-1: eviction refused by PodDisruptionBudget \"web-budget\" (The disruption budget web-budget needs 1 healthy pods and has 1 currently)"),
        "{err}"
    );
    assert_eq!(
        pod_names(&server, NODE),
        ["web-1"],
        "the unprotected pod is gone"
    );
    assert_eq!(event_reasons(&server), ["Cordon", "Drain", "FailedToDrain"]);
    let failed = server
        .list("events", None)
        .into_iter()
        .find(|e| e["reason"] == "FailedToDrain")
        .unwrap();
    assert_eq!(failed["message"], err);
    assert_eq!(failed["type"], "Warning");
    assert_eq!(annotation(&server, LAST_APPLIED_DRAIN), None);
}

#[tokio::test]
async fn a_budget_that_frees_up_lets_the_drain_finish() {
    let server = cluster();
    server
        .seed(fixtures::pod("apps", "web-1", NODE, &[("app", "web")]))
        .unwrap();
    let mut starting = fixtures::pod("apps", "web-2", "worker-1", &[("app", "web")]);
    starting["status"]["conditions"] = json!([{"type": "Ready", "status": "False"}]);
    server.seed(starting).unwrap();
    server
        .seed(fixtures::pdb(
            "apps",
            "web",
            &[("app", "web")],
            json!({"minAvailable": 1}),
        ))
        .unwrap();
    let api = node_api(&server, DrainMode::Agent, fast_drain()).await;

    let started = Instant::now();
    let drain = api.drain("rendered-worker-1");
    let free_up = async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        server
            .patch("pods", Some("apps"), "web-2", &ready, Target::Status)
            .unwrap();
    };
    let (result, ()) = tokio::join!(drain, free_up);
    result.unwrap();
    assert!(started.elapsed() >= Duration::from_secs(2));
    assert_eq!(pod_names(&server, NODE), Vec::<String>::new());
    let refused = server
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/web-1/eviction") && r.status == 429)
        .count();
    assert!(refused >= 2, "retried while the budget refused: {refused}");
}

/// While a budget blocks the drain, each failed attempt puts the pods left and what holds them
/// in the node's reason (what an admin sees in `oc describe node`); the drain completes once
/// the budget allows it, and the reason is cleared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_drain_shows_the_pod_and_budget_in_the_reason_until_it_completes() {
    let server = cluster();
    seed_held_pod(&server);
    let short_attempts = DrainOptions {
        attempt_timeout: Duration::from_millis(700),
        ..fast_drain()
    };
    let api = node_api(&server, DrainMode::Agent, short_attempts).await;
    let drain = api.drain("rendered-worker-1");
    let watch = async {
        let deadline = Instant::now() + Duration::from_secs(20);
        let reason = loop {
            let reason = annotation(&server, REASON).unwrap_or_default();
            if !reason.is_empty() {
                break reason;
            }
            assert!(
                Instant::now() < deadline,
                "no reason while the drain is blocked"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(
            reason.starts_with("failed to drain node worker-0 after ")
                && reason.contains(
                    "pod apps/web-1: eviction refused by PodDisruptionBudget \"web-budget\""
                )
                && reason.ends_with("; retrying in 200ms"),
            "{reason}"
        );
        assert_eq!(
            annotation(&server, LAST_APPLIED_DRAIN),
            None,
            "not drained yet"
        );
        server
            .patch(
                "poddisruptionbudgets",
                Some("apps"),
                "web-budget",
                &json!({"spec": {"maxUnavailable": 1}}),
                Target::Main,
            )
            .unwrap();
    };
    let (result, ()) = tokio::join!(drain, watch);
    result.unwrap();
    assert_eq!(pod_names(&server, NODE), Vec::<String>::new());
    assert_eq!(annotation(&server, REASON).as_deref(), Some(""), "cleared");
    assert_eq!(
        annotation(&server, LAST_APPLIED_DRAIN).as_deref(),
        Some("drain-rendered-worker-1")
    );
}

#[tokio::test]
async fn api_faults_during_a_drain_are_retried() {
    let server = cluster();
    server
        .seed(fixtures::pod("apps", "web-1", NODE, &[("app", "web")]))
        .unwrap();
    server
        .faults()
        .fail_next("PATCH", &format!("/api/v1/nodes/{NODE}"), 2, 503);
    server.faults().fail_next("GET", "/api/v1/pods", 1, 500);
    server.faults().fail_next("POST", "*/eviction", 2, 500);
    let api = node_api(&server, DrainMode::Agent, fast_drain()).await;
    api.drain("rendered-worker-1").await.unwrap();
    assert_eq!(pod_names(&server, NODE), Vec::<String>::new());
    assert_eq!(node(&server)["spec"]["unschedulable"], true);
}

/// Plays the MCO's drain controller: copies desiredDrain to lastAppliedDrain after a delay.
fn controller(server: &TestApiServer, rounds: usize) {
    let mut seen = 0;
    let give_up = Instant::now() + Duration::from_secs(20);
    while seen < rounds && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(150));
        let desired = annotation(server, DESIRED_DRAIN);
        if desired.is_some() && desired != annotation(server, LAST_APPLIED_DRAIN) {
            let unschedulable = desired.as_deref().is_some_and(|d| d.starts_with("drain-"));
            let patch = json!({"metadata": {"annotations": {LAST_APPLIED_DRAIN: desired}}, "spec": {"unschedulable": if unschedulable { json!(true) } else { json!(null) }}});
            server
                .patch("nodes", None, NODE, &patch, Target::Main)
                .unwrap();
            seen += 1;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_handshake() {
    let server = cluster();
    let mut options = fast_drain();
    options.overall_timeout = Duration::from_secs(5);
    let api = node_api(&server, DrainMode::Controller, options).await;
    std::thread::scope(|scope| {
        scope.spawn(|| controller(&server, 2));
        let runtime = tokio::runtime::Handle::current();
        tokio::task::block_in_place(|| {
            runtime.block_on(async {
                api.drain("rendered-worker-1").await.unwrap();
                assert_eq!(node(&server)["spec"]["unschedulable"], true);
                api.uncordon("rendered-worker-1").await.unwrap();
            })
        });
    });
    assert!(node(&server)["spec"].get("unschedulable").is_none());
    assert_eq!(
        annotation(&server, LAST_APPLIED_DRAIN).as_deref(),
        Some("uncordon-rendered-worker-1")
    );
    assert_eq!(event_reasons(&server), ["Cordon", "Drain", "Uncordon"]);
    assert!(
        !server
            .requests()
            .iter()
            .any(|r| r.path.ends_with("/eviction")),
        "the controller drains, not the agent"
    );
}

#[tokio::test]
async fn controller_handshake_times_out_with_the_mcd_message() {
    let server = cluster();
    let mut options = options(&server, DrainMode::Controller);
    options.handshake.drain_timeout = Duration::from_secs(1);
    // Saying what holds the drain meanwhile changes neither the error nor the events.
    options.handshake.report_after = Duration::from_millis(200);
    options.handshake.report_every = Duration::from_millis(200);
    let api = KubeNodeApi::connect(&options).await.unwrap();
    let err = api.drain("rendered-worker-1").await.unwrap_err();
    assert!(
        annotation(&server, REASON).is_some_and(|r| r.ends_with(": no pod left to evict")),
        "the agent said what holds the drain while it waited"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "failed to drain node: {NODE} after 1s. Please see machine-config-controller logs for more information"
        )
    );
    assert_eq!(
        annotation(&server, DESIRED_DRAIN).as_deref(),
        Some("drain-rendered-worker-1")
    );
    assert_eq!(event_reasons(&server), ["Cordon", "Drain", "FailedToDrain"]);
}

/// A `--drain-mode controller` client that says what holds a drain after `report_after`, then
/// every 200 ms.
async fn controller_api(server: &TestApiServer, report_after: Duration) -> KubeNodeApi {
    let mut options = options(server, DrainMode::Controller);
    options.handshake.report_after = report_after;
    options.handshake.report_every = Duration::from_millis(200);
    KubeNodeApi::connect(&options).await.unwrap()
}

/// A pod held by a budget that allows no disruption, one held by nothing, and the node
/// `Working`, as the agent leaves it before a drain.
fn blocked_cluster() -> TestApiServer {
    let server = cluster();
    seed_held_pod(&server);
    server
        .seed(fixtures::pod("apps", "cache", NODE, &[("app", "cache")]))
        .unwrap();
    let working = json!({"metadata": {"annotations": {STATE: "Working", REASON: ""}}});
    server
        .patch("nodes", None, NODE, &working, Target::Main)
        .unwrap();
    server
}

/// Waits until `check` holds for the node's reason; returns it.
async fn wait_reason(server: &TestApiServer, what: &str, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let reason = annotation(server, REASON).unwrap_or_default();
        if check(&reason) {
            return reason;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; the reason is {reason:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Plays the MCO's drain controller finishing: the pods evicted, the request copied into
/// `lastAppliedDrain` (the node cordoned), and `extra` annotations with it.
fn finish_drain(server: &TestApiServer, extra: Value) {
    for pod in pod_names(server, NODE) {
        server.delete("pods", Some("apps"), &pod).unwrap();
    }
    let mut patch = json!({"metadata": {"annotations": {LAST_APPLIED_DRAIN: annotation(server, DESIRED_DRAIN)}}, "spec": {"unschedulable": true}});
    patch["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    server
        .patch("nodes", None, NODE, &patch, Target::Main)
        .unwrap();
}

/// With the MCO's drain controller, which writes nothing into the node, a drain that goes on
/// gets what holds it into the reason from the agent (the pods and budgets it reads), in its
/// own drain's words; the state stays Working; once the controller answers, the reason is
/// cleared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_controller_drain_names_the_pods_and_budgets_that_hold_it() {
    let server = blocked_cluster();
    let api = controller_api(&server, Duration::from_millis(300)).await;
    let drain = api.drain("rendered-worker-1");
    let controller = async {
        let reason = wait_reason(&server, "what holds the drain", |r| !r.is_empty()).await;
        assert!(
            reason
                .starts_with("Waiting for the drain controller: node worker-0 not drained after ")
                && reason.contains(
                    "pod apps/web-1: eviction refused by PodDisruptionBudget \"web-budget\" \
                     (The disruption budget web-budget needs 1 healthy pods and has 1 currently)"
                )
                && reason.contains("pod apps/cache: not evictable yet"),
            "{reason}"
        );
        assert_eq!(annotation(&server, STATE).as_deref(), Some("Working"));
        // Renewed while the drain goes on: the elapsed time moves.
        wait_reason(&server, "a renewed reason", |r| {
            r.starts_with("Waiting for the drain controller:") && r != reason
        })
        .await;
        finish_drain(&server, json!({}));
    };
    let (result, ()) = tokio::join!(drain, controller);
    result.unwrap();
    assert_eq!(annotation(&server, REASON).as_deref(), Some(""), "cleared");
    assert_eq!(annotation(&server, STATE).as_deref(), Some("Working"));
    assert!(
        !server
            .requests()
            .iter()
            .any(|r| r.path.ends_with("/eviction")),
        "the controller drains, not the agent"
    );
}

/// The companion's drain controller writes each failed try's message into the reason itself:
/// while one is there the agent writes nothing, even when its own look came first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_companions_drain_message_is_left_to_the_companion() {
    let server = blocked_cluster();
    let api = controller_api(&server, Duration::from_millis(300)).await;
    let drain = api.drain("rendered-worker-1");
    let companion = "Drain failed. Waiting 1 minute then retrying. Error message from drain: \
                     failed to drain node worker-0 after 1m 30s: pod apps/web-1: eviction refused";
    let controller = async {
        wait_reason(&server, "the agent's first look", |r| {
            r.starts_with("Waiting for the drain controller:")
        })
        .await;
        // The controller's failed try lands after the agent's look.
        let patch = json!({"metadata": {"annotations": {REASON: companion}}});
        server
            .patch("nodes", None, NODE, &patch, Target::Main)
            .unwrap();
        // Through five of the agent's looks (200 ms apart), the reason stays the controller's.
        let until = Instant::now() + Duration::from_secs(1);
        while Instant::now() < until {
            assert_eq!(annotation(&server, REASON).as_deref(), Some(companion));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The companion clears its own message with its answer.
        finish_drain(&server, json!({REASON: ""}));
    };
    let (result, ()) = tokio::join!(drain, controller);
    result.unwrap();
    assert_eq!(annotation(&server, REASON).as_deref(), Some(""));
}

/// A drain the controller answers within the bound reads no pods and writes no reason; pods and
/// budgets the agent may not read leave the wait going on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quick_controller_drain_reads_nothing_and_a_failed_read_is_only_logged() {
    let server = blocked_cluster();
    let api = controller_api(&server, Duration::from_secs(30)).await;
    std::thread::scope(|scope| {
        scope.spawn(|| controller(&server, 1));
        let runtime = tokio::runtime::Handle::current();
        tokio::task::block_in_place(|| {
            runtime.block_on(async { api.drain("rendered-worker-1").await.unwrap() })
        });
    });
    assert!(
        !server
            .requests()
            .iter()
            .any(|r| r.method == "GET" && r.path.ends_with("/pods")),
        "no pods read within the bound"
    );
    assert_eq!(annotation(&server, REASON).as_deref(), Some(""));

    let server = blocked_cluster();
    server.faults().fail_next("GET", "/api/v1/pods", 1000, 503);
    let api = controller_api(&server, Duration::from_millis(100)).await;
    let drain = api.drain("rendered-worker-2");
    let controller = async {
        let deadline = Instant::now() + Duration::from_secs(20);
        while server
            .requests()
            .iter()
            .filter(|r| r.path == "/api/v1/pods" && r.status == 503)
            .count()
            < 5
        {
            assert!(
                Instant::now() < deadline,
                "the agent never tried to read the pods"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            annotation(&server, REASON).as_deref(),
            Some(""),
            "unknown: nothing written"
        );
        finish_drain(&server, json!({}));
    };
    let (result, ()) = tokio::join!(drain, controller);
    result.unwrap();
}

#[tokio::test]
async fn single_replica_nodes_are_not_drained() {
    let server = cluster();
    server
        .seed(fixtures::pod("apps", "web-1", NODE, &[]))
        .unwrap();
    server
        .patch("nodes", None, NODE, &json!({"metadata": {"annotations": {"machineconfiguration.openshift.io/controlPlaneTopology": "SingleReplica"}}}), Target::Main)
        .unwrap();
    let api = node_api(&server, DrainMode::Agent, fast_drain()).await;
    api.drain("rendered-worker-1").await.unwrap();
    assert_eq!(pod_names(&server, NODE), ["web-1"]);
    assert!(node(&server)["spec"].get("unschedulable").is_none());
    let events = server.list("events", None);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["message"], "Drain not required, skipping");
}
