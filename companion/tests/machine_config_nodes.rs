//! The controller reads MachineConfigNodes where they help and never depends on them, against
//! the API test server with RBAC enforced from `manifests/`:
//! - a Degraded node whose `reason` annotation is empty is explained in the pool's status by its
//!   MachineConfigNode's `NodeDegraded` message;
//! - with the MachineConfigNode rule taken out of the companion's ClusterRole (a cluster that
//!   refuses them), a rollout completes all the same, the refused watch notwithstanding.

use std::time::{Duration, Instant};

use machine_config::mco::annotations::{CURRENT_CONFIG, DESIRED_CONFIG, STATE};
use machine_config::render::RenderOptions;
use mco_companion::cluster::{self, controller};
use mco_test_support::apiserver::{ServerOptions, Target, TestApiServer};
use mco_test_support::shipped::{
    self, COMPANION_NAMESPACE, COMPANION_ROLE, COMPANION_SERVICE_ACCOUNT,
};
use serde_json::{Value, json};
use tokio::sync::watch;

const ROLE: &str = "machineconfiguration.openshift.io/role";
const NODES: [&str; 2] = ["worker-0", "worker-1"];

/// The API test server with the shipped RBAC objects, changed by `edit` first.
fn cluster(edit: impl Fn(&mut Value)) -> (TestApiServer, std::path::PathBuf) {
    let api = TestApiServer::start_with(ServerOptions::rbac()).unwrap();
    for mut object in shipped::rbac_objects().unwrap() {
        edit(&mut object);
        api.seed(object).unwrap();
    }
    let kubeconfig = mco_test_support::shipped::companion_kubeconfig(&api).unwrap();
    api.seed(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": "worker"},
        "spec": {
            "machineConfigSelector": {"matchLabels": {ROLE: "worker"}},
            "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}},
            "maxUnavailable": 1
        }
    }))
    .unwrap();
    add_config(&api, "00-worker", "/etc/base");
    for (i, name) in NODES.iter().enumerate() {
        api.seed(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"node-role.kubernetes.io/worker": ""},
                         "creationTimestamp": format!("2026-01-01T00:00:0{i}Z")},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .unwrap();
    }
    (api, kubeconfig)
}

fn add_config(api: &TestApiServer, name: &str, path: &str) {
    api.seed(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {ROLE: "worker"}},
        "spec": {"config": {"ignition": {"version": "3.2.0"}, "storage": {"files": [
            {"path": path, "mode": 420, "contents": {"source": "data:,x"}}]}}}
    }))
    .unwrap();
}

fn annotation(api: &TestApiServer, node: &str, key: &str) -> String {
    let n = api.get("nodes", None, node).unwrap();
    n["metadata"]["annotations"][key]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn annotate(api: &TestApiServer, node: &str, annotations: Value) {
    let patch = json!({"metadata": {"annotations": annotations}});
    api.patch("nodes", None, node, &patch, Target::Main)
        .unwrap();
}

fn target(api: &TestApiServer) -> String {
    let pool = api.get("machineconfigpools", None, "worker").unwrap();
    pool["spec"]["configuration"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn pool_condition(api: &TestApiServer, kind: &str) -> (String, String) {
    let pool = api.get("machineconfigpools", None, "worker").unwrap();
    let found = pool["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == kind)
        .cloned()
        .unwrap_or(Value::Null);
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (text(&found["status"]), text(&found["message"]))
}

async fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts the controller as the companion's service account; the nodes boot into the pool's
/// first config. Returns it and the channel that stops it.
async fn start_controller(
    api: &TestApiServer,
    kubeconfig: &std::path::Path,
) -> (
    tokio::task::JoinHandle<anyhow::Result<()>>,
    watch::Sender<bool>,
) {
    let client = cluster::client(kubeconfig).await.unwrap();
    let (stop, shutdown) = watch::channel(false);
    let running = tokio::spawn(controller::run(client, RenderOptions::default(), shutdown));
    wait_for("the pool rendered", || !target(api).is_empty()).await;
    let first = target(api);
    for n in NODES {
        annotate(
            api,
            n,
            json!({CURRENT_CONFIG: first, DESIRED_CONFIG: first, STATE: "Done"}),
        );
    }
    wait_for("the pool Updated", || {
        pool_condition(api, "Updated").0 == "True"
    })
    .await;
    (running, stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_degraded_node_without_a_reason_is_explained_by_its_machine_config_node() {
    let (api, kubeconfig) = cluster(|_| {});
    let (running, stop) = start_controller(&api, &kubeconfig).await;
    let config = target(&api);
    // what the agent writes when an update fails, without the reason annotation (lost, or an
    // older agent's)
    api.seed(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigNode",
        "metadata": {"name": "worker-1"},
        "spec": {"node": {"name": "worker-1"}, "pool": {"name": "worker"},
                 "configVersion": {"desired": config}},
    }))
    .unwrap();
    let degraded = json!({"status": {"conditions": [{
        "type": "NodeDegraded", "status": "True", "reason": "NodeDegraded",
        "message": "failed to drain node: worker-1 after 1 hour",
        "lastTransitionTime": "2026-11-26T10:00:00Z"}]}});
    api.patch(
        "machineconfignodes",
        None,
        "worker-1",
        &degraded,
        Target::Status,
    )
    .unwrap();
    annotate(&api, "worker-1", json!({STATE: "Degraded"}));
    wait_for("NodeDegraded with the MachineConfigNode's message", || {
        pool_condition(&api, "NodeDegraded")
            == (
                "True".into(),
                "Node worker-1 is reporting: \"failed to drain node: worker-1 after 1 hour\""
                    .into(),
            )
    })
    .await;
    // the annotation's reason, once there, is the source
    annotate(
        &api,
        "worker-1",
        json!({"machineconfiguration.openshift.io/reason": "disk full"}),
    );
    wait_for("NodeDegraded with the annotation's reason", || {
        pool_condition(&api, "NodeDegraded").1 == "Node worker-1 is reporting: \"disk full\""
    })
    .await;
    stop.send(true).unwrap();
    running.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_that_refuses_machine_config_nodes_still_rolls_out() {
    let (api, kubeconfig) = cluster(|object| {
        if object["kind"] == "ClusterRole" && object["metadata"]["name"] == COMPANION_ROLE {
            let rules = object["rules"].as_array_mut().unwrap();
            rules.retain(|r| !r["resources"].to_string().contains("machineconfignodes"));
        }
    });
    let (running, stop) = start_controller(&api, &kubeconfig).await;
    let first = target(&api);
    add_config(&api, "10-worker-more", "/etc/more");
    wait_for("a new render", || target(&api) != first).await;
    let second = target(&api);
    // play the agents: one node at a time (maxUnavailable 1)
    let deadline = Instant::now() + Duration::from_secs(60);
    while NODES
        .iter()
        .any(|n| annotation(&api, n, CURRENT_CONFIG) != second)
    {
        assert!(Instant::now() < deadline, "the rollout did not finish");
        for n in NODES {
            let desired = annotation(&api, n, DESIRED_CONFIG);
            if desired == second && annotation(&api, n, CURRENT_CONFIG) != second {
                annotate(&api, n, json!({CURRENT_CONFIG: second, STATE: "Done"}));
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_for("the pool Updated on the new config", || {
        pool_condition(&api, "Updated").0 == "True"
    })
    .await;
    let user = format!("system:serviceaccount:{COMPANION_NAMESPACE}:{COMPANION_SERVICE_ACCOUNT}");
    let usage = shipped::role_use(&api.audit(), &user, COMPANION_ROLE).unwrap();
    assert!(
        usage
            .refused
            .iter()
            .any(|r| r.starts_with("list machineconfignodes")),
        "the controller asked for MachineConfigNodes and was refused: {:#?}",
        usage.refused
    );
    stop.send(true).unwrap();
    running.await.unwrap().unwrap();
}
