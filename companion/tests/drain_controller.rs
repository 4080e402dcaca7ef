//! The companion's drain controller against the Kubernetes API test server (in process, HTTPS,
//! real Eviction API with PodDisruptionBudgets), with its timings shrunk: a budget that blocks
//! the drain (retries, `DrainThresholdExceeded` naming the pod and the budget, `DrainFailed`),
//! an external uncordon re-cordoned, the drain finishing once the budget allows it,
//! `lastAppliedDrain` written only then, and the uncordon. Then the agent's side of the
//! handshake (`DrainMode::Controller`, the agent library's real client) against it.
//! Nothing stands in but the pods (objects without a kubelet; the server deletes evicted ones).

use std::time::{Duration, Instant};

use machine_config::mco::annotations::{DESIRED_DRAIN, LAST_APPLIED_DRAIN, REASON};
use mco_companion::cluster::drain::{self, schedule::DrainTimings};
use mco_kube::{ClusterOptions, DrainMode, KubeNodeApi, NodeApi, RetryPolicy};
use mco_test_support::apiserver::{ServerOptions, Target, TestApiServer, fixtures};
use serde_json::{Value, json};
use tokio::sync::watch;

const NODE: &str = "worker-0";

fn timings() -> DrainTimings {
    DrainTimings {
        requeue: Duration::from_millis(200),
        failing_threshold: Duration::from_millis(600),
        failing_requeue: Duration::from_millis(300),
        timeout: Duration::from_millis(1500),
        attempt: Duration::from_secs(1),
        eviction_retry: Duration::from_millis(100),
        poll: Duration::from_millis(50),
    }
}

/// Permissions of the shipped ClusterRole only drains use (as in `tests/cluster.rs`, whose
/// rollout uses the rest).
const DRAIN_ONLY: [&str; 4] = [
    "get nodes",
    "list pods",
    "create pods/eviction",
    "create events",
];

/// The API test server enforcing the Node authorizer and the RBAC of `manifests/`; the
/// controller runs as the companion's service account (the test acts as the admin).
fn cluster() -> TestApiServer {
    let server = TestApiServer::start_with(ServerOptions::rbac()).unwrap();
    mco_test_support::shipped::load_rbac(&server).unwrap();
    server.seed(fixtures::node(NODE)).unwrap();
    server.seed(fixtures::namespace("apps")).unwrap();
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
    server
}

/// Starts the drain controller (its log in the test's output); dropping the sender stops it.
async fn start_controller(server: &TestApiServer) -> watch::Sender<bool> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("mco_companion=info")
        .with_test_writer()
        .try_init();
    let kubeconfig = mco_test_support::shipped::companion_kubeconfig(server).unwrap();
    let client = mco_companion::cluster::drain_client(&kubeconfig)
        .await
        .unwrap();
    let (stop, shutdown) = watch::channel(false);
    tokio::spawn(drain::run(client, timings(), shutdown));
    stop
}

fn node(server: &TestApiServer) -> Value {
    server.get("nodes", None, NODE).unwrap()
}

fn annotation(server: &TestApiServer, key: &str) -> Option<String> {
    node(server)["metadata"]["annotations"][key]
        .as_str()
        .map(String::from)
}

fn unschedulable(server: &TestApiServer) -> bool {
    node(server)["spec"]["unschedulable"] == true
}

fn annotate(server: &TestApiServer, key: &str, value: &str) {
    server
        .patch(
            "nodes",
            None,
            NODE,
            &json!({"metadata": {"annotations": {key: value}}}),
            Target::Main,
        )
        .unwrap();
}

fn pods(server: &TestApiServer) -> Vec<String> {
    let mut names: Vec<String> = server
        .list("pods", Some("apps"))
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

/// Messages of the events with `reason`.
fn events(server: &TestApiServer, reason: &str) -> Vec<String> {
    server
        .list("events", None)
        .iter()
        .filter(|e| e["reason"] == reason)
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

async fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_drain_is_retried_until_the_budget_allows_it() {
    let server = cluster();
    let _stop = start_controller(&server).await;
    annotate(&server, DESIRED_DRAIN, "drain-rendered-worker-b");

    wait_for("the cordon", || unschedulable(&server)).await;
    wait_for("the unprotected pod evicted", || pods(&server) == ["web-1"]).await;
    wait_for("DrainThresholdExceeded", || {
        !events(&server, "DrainThresholdExceeded").is_empty()
    })
    .await;
    let exceeded = &events(&server, "DrainThresholdExceeded")[0];
    assert!(
        exceeded.starts_with(
            "Drain failed. Drain has been failing for more than 0.01 minutes. Waiting 0.005 minutes then retrying. Error message from drain: failed to drain node worker-0 after"
        ),
        "{exceeded}"
    );
    assert!(
        exceeded.contains("pod apps/web-1: eviction refused by PodDisruptionBudget \"web-budget\""),
        "the pod and the budget are named: {exceeded}"
    );
    wait_for("DrainFailed", || !events(&server, "DrainFailed").is_empty()).await;
    assert_eq!(
        events(&server, "DrainFailed")[0],
        "node worker-0: drain exceeded timeout: 1.5s. Will continue to retry."
    );
    assert_eq!(
        annotation(&server, LAST_APPLIED_DRAIN),
        None,
        "not drained yet"
    );
    let reason = annotation(&server, REASON).unwrap_or_default();
    assert!(
        reason.contains("pod apps/web-1: eviction refused by PodDisruptionBudget \"web-budget\""),
        "the node's reason names the pod and the budget: {reason}"
    );

    // Someone uncordons the node during the drain: it is cordoned again.
    server
        .patch(
            "nodes",
            None,
            NODE,
            &json!({"spec": {"unschedulable": null}}),
            Target::Main,
        )
        .unwrap();
    wait_for("the re-cordon", || unschedulable(&server)).await;
    assert_eq!(annotation(&server, LAST_APPLIED_DRAIN), None);

    // The budget allows the eviction now: the drain completes and is reported.
    server
        .patch(
            "poddisruptionbudgets",
            Some("apps"),
            "web-budget",
            &json!({"spec": {"minAvailable": 0}}),
            Target::Main,
        )
        .unwrap();
    wait_for("lastAppliedDrain", || {
        annotation(&server, LAST_APPLIED_DRAIN).as_deref() == Some("drain-rendered-worker-b")
    })
    .await;
    assert_eq!(pods(&server), Vec::<String>::new());
    assert!(unschedulable(&server));
    assert_eq!(
        annotation(&server, REASON).as_deref(),
        Some(""),
        "the failure is cleared"
    );

    annotate(&server, DESIRED_DRAIN, "uncordon-rendered-worker-b");
    wait_for("the uncordon", || {
        annotation(&server, LAST_APPLIED_DRAIN).as_deref() == Some("uncordon-rendered-worker-b")
    })
    .await;
    assert!(!unschedulable(&server));

    // the drain used each permission of the shipped role that only drains need, and nothing
    // it asked for was refused
    let user = format!(
        "system:serviceaccount:{}:{}",
        mco_test_support::shipped::COMPANION_NAMESPACE,
        mco_test_support::shipped::COMPANION_SERVICE_ACCOUNT
    );
    let usage = mco_test_support::shipped::role_use(
        &server.audit(),
        &user,
        mco_test_support::shipped::COMPANION_ROLE,
    )
    .unwrap();
    eprintln!("{user} used:\n  {}", usage.used.join("\n  "));
    assert!(usage.refused.is_empty(), "refused: {:#?}", usage.refused);
    for permission in DRAIN_ONLY {
        assert!(
            !usage.unused.contains(&permission.to_string()),
            "the drain never used {permission}: {:#?}",
            usage.used
        );
    }
}

/// The agent's handshake (`--drain-mode controller`) with the companion's controller: the
/// agent's drain returns once the controller has drained, its uncordon once it uncordoned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_handshake_is_answered() {
    let server = cluster();
    let kubeconfig = server.dir().join("kubelet.kubeconfig");
    server
        .write_kubeconfig(&kubeconfig, &format!("system:node:{NODE}"))
        .unwrap();
    let mut options = ClusterOptions::new(NODE);
    options.kubeconfig = kubeconfig;
    options.drain_mode = DrainMode::Controller;
    options.handshake.poll_interval = Duration::from_millis(50);
    options.retry = RetryPolicy {
        initial_delay: Duration::from_millis(50),
        max_delay: Duration::from_millis(500),
        attempt_timeout: Duration::from_secs(2),
    };
    let agent = KubeNodeApi::connect(&options).await.unwrap();
    let _stop = start_controller(&server).await;

    let drained = agent.drain("rendered-worker-b");
    let free_up = async {
        wait_for("the controller's first refused eviction", || {
            pods(&server) == ["web-1"] && unschedulable(&server)
        })
        .await;
        assert_eq!(annotation(&server, LAST_APPLIED_DRAIN), None);
        server
            .delete("poddisruptionbudgets", Some("apps"), "web-budget")
            .unwrap();
    };
    let (result, ()) = tokio::join!(drained, free_up);
    result.unwrap();
    assert_eq!(pods(&server), Vec::<String>::new());
    assert_eq!(
        annotation(&server, LAST_APPLIED_DRAIN).as_deref(),
        Some("drain-rendered-worker-b")
    );

    agent.uncordon("rendered-worker-b").await.unwrap();
    assert!(!unschedulable(&server));
    assert_eq!(
        annotation(&server, LAST_APPLIED_DRAIN).as_deref(),
        Some("uncordon-rendered-worker-b")
    );
}
