//! The agent's Node protocol against the Kubernetes API test server (in process, HTTPS):
//! annotations, reason truncation, conflicts and API faults, the desiredConfig watch, events, MachineConfigs.

use std::time::{Duration, Instant};

use futures::StreamExt;
use machine_config::mco::NodeState;
use machine_config::mco::annotations::{
    CURRENT_CONFIG, DESIRED_CONFIG, DESIRED_IMAGE, POST_CONFIG_ACTION, REASON, STATE,
};
use mco_kube::{ClusterError, ClusterOptions, DesiredTarget, KubeNodeApi, NodeApi, RetryPolicy};
use mco_test_support::apiserver::{Target, TestApiServer, fixtures};
use serde_json::{Value, json};

const NODE: &str = "worker-0";
/// How long a test waits for something that should happen: generous, so a loaded CI machine
/// never fails a correct agent; a wrong one still fails, only later.
const PATIENCE: Duration = Duration::from_secs(30);

fn annotation(server: &TestApiServer, key: &str) -> Option<String> {
    let node = server.get("nodes", None, NODE)?;
    node.pointer(&format!("/metadata/annotations/{}", key.replace('/', "~1")))
        .and_then(Value::as_str)
        .map(String::from)
}

async fn setup() -> (TestApiServer, KubeNodeApi) {
    let server = TestApiServer::start().unwrap();
    let mut node = fixtures::node(NODE);
    node["metadata"]["annotations"] =
        json!({DESIRED_CONFIG: "rendered-worker-0", CURRENT_CONFIG: "rendered-worker-0"});
    server.seed(node).unwrap();
    let kubeconfig = server.dir().join("kubelet.kubeconfig");
    server
        .write_kubeconfig(&kubeconfig, &format!("system:node:{NODE}"))
        .unwrap();
    let mut options = ClusterOptions::new(NODE);
    options.kubeconfig = kubeconfig;
    options.retry = RetryPolicy {
        initial_delay: Duration::from_millis(50),
        max_delay: Duration::from_millis(400),
        attempt_timeout: Duration::from_millis(700),
    };
    let api = KubeNodeApi::connect(&options).await.unwrap();
    (server, api)
}

#[tokio::test]
async fn annotation_protocol() {
    let (server, api) = setup().await;
    let read = api.annotations().await.unwrap();
    assert_eq!(read.desired_config(), Some("rendered-worker-0"));
    assert_eq!(
        read.state(),
        Ok(NodeState::Done),
        "absent state reads as Done"
    );

    api.report(NodeState::Working, "").await.unwrap();
    assert_eq!(annotation(&server, STATE).as_deref(), Some("Working"));

    let long = format!("{}{}", "é".repeat(1990), "ü".repeat(100));
    api.report(NodeState::Degraded, &long).await.unwrap();
    let reason = annotation(&server, REASON).unwrap();
    assert_eq!(reason.chars().count(), 2000);
    assert!(reason.ends_with(&"ü".repeat(10)));
    assert_eq!(annotation(&server, STATE).as_deref(), Some("Degraded"));

    api.report(
        NodeState::Unreconcilable,
        "can't reconcile config a with b: ignition disks section contains changes",
    )
    .await
    .unwrap();
    assert_eq!(
        annotation(&server, STATE).as_deref(),
        Some("Unreconcilable")
    );

    api.set_current("rendered-worker-1").await.unwrap();
    assert_eq!(
        annotation(&server, CURRENT_CONFIG).as_deref(),
        Some("rendered-worker-1")
    );
    assert_eq!(annotation(&server, STATE).as_deref(), Some("Done"));
    assert_eq!(annotation(&server, REASON).as_deref(), Some(""));

    api.set_annotations(&[(POST_CONFIG_ACTION, Some("Rebooting"))])
        .await
        .unwrap();
    assert_eq!(
        api.annotations().await.unwrap().post_config_action(),
        Some("Rebooting")
    );
    api.set_annotations(&[(POST_CONFIG_ACTION, None)])
        .await
        .unwrap();
    assert_eq!(annotation(&server, POST_CONFIG_ACTION), None);

    // Every write went out with the node's own identity, as a merge patch.
    let writes: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .collect();
    assert_eq!(writes.len(), 6);
    assert!(
        writes
            .iter()
            .all(|r| r.user == format!("system:node:{NODE}") && r.status == 200)
    );
}

#[tokio::test]
async fn writes_survive_conflicts_errors_and_hangs() {
    let (server, api) = setup().await;
    let pattern = format!("/api/v1/nodes/{NODE}");
    server.faults().fail_next("PATCH", &pattern, 2, 409);
    server.faults().fail_next("PATCH", &pattern, 3, 503);
    server.faults().fail_next("PATCH", &pattern, 1, 500);
    server.faults().hang_next("PATCH", &pattern, 1);
    api.report(
        NodeState::Degraded,
        "content mismatch for file \"/etc/foo\"",
    )
    .await
    .unwrap();
    assert_eq!(annotation(&server, STATE).as_deref(), Some("Degraded"));
    assert_eq!(
        annotation(&server, REASON).as_deref(),
        Some("content mismatch for file \"/etc/foo\"")
    );
    let statuses: Vec<u16> = server
        .requests()
        .iter()
        .filter(|r| r.method == "PATCH")
        .map(|r| r.status)
        .collect();
    assert_eq!(
        statuses,
        [409, 409, 503, 503, 503, 500, 200],
        "the hung attempt never answered"
    );

    // A permanent error is returned, not retried forever.
    server.faults().fail_next("PATCH", &pattern, 1, 403);
    let err = api.report(NodeState::Done, "").await.unwrap_err();
    assert_eq!(err.code(), Some(403));

    // Reads retry too.
    server.faults().fail_next("GET", &pattern, 2, 503);
    assert_eq!(
        api.annotations().await.unwrap().state(),
        Ok(NodeState::Degraded)
    );
}

#[tokio::test]
async fn every_desired_config_change_reaches_the_agent_across_dropped_watches() {
    let (server, api) = setup().await;
    // Drive the stream all along, as the daemon does.
    let mut stream = api.desired();
    let (tx, mut desired) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(value) = stream.next().await {
            if tx.send(value).is_err() {
                break;
            }
        }
    });
    let first = tokio::time::timeout(PATIENCE, desired.recv())
        .await
        .unwrap();
    assert_eq!(
        first.map(|t| t.config).as_deref(),
        Some("rendered-worker-0")
    );

    let set = |config: &str| {
        server
            .patch(
                "nodes",
                None,
                NODE,
                &json!({"metadata": {"annotations": {DESIRED_CONFIG: config}}}),
                Target::Main,
            )
            .unwrap();
    };
    // Every change arrives, in order (the reaction time is measured by
    // `cargo bench -p mco-agent --bench desired_watch`, not here).
    for i in 1..=5 {
        let config = format!("rendered-worker-{i}");
        set(&config);
        let got = tokio::time::timeout(PATIENCE, desired.recv())
            .await
            .unwrap();
        assert_eq!(got, Some(DesiredTarget::config(&config)));
    }
    // In an image-mode pool a new desiredImage alone is a new target.
    let image = "registry.example/ocl/worker@sha256:2222222222222222222222222222222222222222222222222222222222222222";
    server
        .patch(
            "nodes",
            None,
            NODE,
            &json!({"metadata": {"annotations": {DESIRED_IMAGE: image}}}),
            Target::Main,
        )
        .unwrap();
    let got = tokio::time::timeout(PATIENCE, desired.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (got.config.as_str(), got.image.as_deref()),
        ("rendered-worker-5", Some(image))
    );
    server
        .patch(
            "nodes",
            None,
            NODE,
            &json!({"metadata": {"annotations": {DESIRED_IMAGE: null}}}),
            Target::Main,
        )
        .unwrap();
    let got = tokio::time::timeout(PATIENCE, desired.recv())
        .await
        .unwrap();
    assert_eq!(got, Some(DesiredTarget::config("rendered-worker-5")));

    // Unrelated changes and repeats are not reported.
    server
        .patch(
            "nodes",
            None,
            NODE,
            &json!({"metadata": {"labels": {"x": "y"}}}),
            Target::Main,
        )
        .unwrap();
    set("rendered-worker-5");

    // A dropped watch is re-established and nothing is lost.
    let watches = |status: u16| {
        server
            .requests()
            .iter()
            .filter(|r| r.method == "GET" && r.query.contains("watch=true") && r.status == status)
            .count()
    };
    let lists = || {
        server
            .requests()
            .iter()
            .filter(|r| r.method == "GET" && r.query.contains("limit="))
            .count()
    };
    let before = watches(200);
    server.faults().drop_watches();
    wait_for(|| watches(200) > before).await;
    set("rendered-worker-6");
    let got = tokio::time::timeout(PATIENCE, desired.recv())
        .await
        .unwrap();
    assert_eq!(got.map(|t| t.config).as_deref(), Some("rendered-worker-6"));

    // Dropped again, the API fails the re-watch, and meanwhile the watch history is compacted
    // past the agent's version: the watcher backs off, gets 410 Gone, lists again.
    server
        .faults()
        .fail_next("GET", "/api/v1/nodes?*watch=true*", 2, 503);
    server.faults().drop_watches();
    wait_for(|| watches(503) == 1).await;
    set("rendered-worker-7");
    server.compact();
    let got = tokio::time::timeout(PATIENCE, desired.recv())
        .await
        .unwrap();
    assert_eq!(got.map(|t| t.config).as_deref(), Some("rendered-worker-7"));
    assert_eq!(watches(503), 2);
    assert_eq!(lists(), 2, "the watcher listed again after 410 Gone");
}

async fn wait_for(mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "condition not met within {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn events_and_machine_configs() {
    let (server, api) = setup().await;
    api.annotations().await.unwrap();
    api.event(
        "NodeDone",
        "Setting node worker-0, currentConfig rendered-worker-0 to Done",
    )
    .await
    .unwrap();
    api.event(
        "OnDiskStateValidationFailed",
        "content mismatch for file \"/etc/foo\"",
    )
    .await
    .unwrap();
    let events = server.list("events", Some("openshift-machine-config-operator"));
    assert_eq!(events.len(), 2);
    let done = &events.iter().find(|e| e["reason"] == "NodeDone").unwrap();
    assert_eq!(done["type"], "Normal");
    assert_eq!(
        done["source"],
        json!({"component": "machineconfigdaemon", "host": NODE})
    );
    assert_eq!(done["involvedObject"]["kind"], "Node");
    assert_eq!(done["involvedObject"]["name"], NODE);
    assert_eq!(
        done["involvedObject"]["uid"],
        server.get("nodes", None, NODE).unwrap()["metadata"]["uid"]
    );
    let failed = events
        .iter()
        .find(|e| e["reason"] == "OnDiskStateValidationFailed")
        .unwrap();
    assert_eq!(failed["type"], "Warning");

    // Without the MCO's namespace the events go to `default`.
    server
        .delete("namespaces", None, "openshift-machine-config-operator")
        .unwrap();
    api.event("Reboot", "Node will reboot into config rendered-worker-1")
        .await
        .unwrap();
    assert_eq!(server.list("events", Some("default")).len(), 1);

    server
        .seed(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {"name": "rendered-worker-1"},
            "spec": {"config": {"ignition": {"version": "3.2.0"}}, "kernelArguments": ["nosmt"]},
        }))
        .unwrap();
    let mc = api.get_machine_config("rendered-worker-1").await.unwrap();
    assert_eq!(mc.name(), "rendered-worker-1");
    let missing = api
        .get_machine_config("rendered-worker-404")
        .await
        .unwrap_err();
    assert!(matches!(missing, ClusterError::MachineConfigNotFound(_)));
    assert_eq!(
        missing.to_string(),
        "machineconfig.machineconfiguration.openshift.io \"rendered-worker-404\" not found"
    );
}
