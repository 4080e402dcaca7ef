//! `MachineConfiguration/cluster`'s node disruption status kept by the companion's controller
//! against the Kubernetes API test server (real generation bookkeeping and status subresource),
//! and read by the agent library's watch as the daemon reads it: created when missing, the
//! default table merged with the admin's policies, `observedGeneration` following the spec.

use std::time::{Duration, Instant};

use machine_config::MachineConfiguration;
use machine_config::machineconfiguration::{FilePolicy, PolicyAction, ServiceRef};
use machine_config::policy::default_policy;
use machine_config::render::RenderOptions;
use mco_agent::cluster::policy_watch::{PolicyWait, PolicyWatch};
use mco_agent::cluster::{ClusterOptions, KubeNodeApi, NodeApi};
use mco_companion::cluster::{self, controller};
use mco_test_support::apiserver::{Target, TestApiServer, fixtures};
use serde_json::{Value, json};
use tokio::sync::watch;

fn object(server: &TestApiServer) -> Option<Value> {
    server.get("machineconfigurations", None, "cluster")
}

async fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_keeps_the_status_and_the_agent_follows_it() {
    let server = TestApiServer::start().unwrap();
    server.seed(fixtures::node("worker-0")).unwrap();
    let client = cluster::client(server.kubeconfig()).await.unwrap();
    let (_stop, shutdown) = watch::channel(false);
    tokio::spawn(controller::run(client, RenderOptions::default(), shutdown));

    // Missing: created, and its status computed from the empty spec (the default table).
    wait_for("the status of generation 1", || {
        object(&server).is_some_and(|o| o["status"]["observedGeneration"] == 1)
    })
    .await;
    let created: MachineConfiguration = serde_json::from_value(object(&server).unwrap()).unwrap();
    assert_eq!(created.spec.node_disruption_policy, Default::default());
    assert_eq!(
        created
            .status
            .node_disruption_policy_status
            .cluster_policies,
        default_policy()
    );

    // The agent's watch sees it, ready.
    let kubeconfig = server.dir().join("kubelet.kubeconfig");
    server
        .write_kubeconfig(&kubeconfig, "system:node:worker-0")
        .unwrap();
    let mut options = ClusterOptions::new("worker-0");
    options.kubeconfig = kubeconfig;
    let agent = KubeNodeApi::connect(&options).await.unwrap();
    let policies = PolicyWatch::spawn(agent.machine_configuration());
    let wait = PolicyWait {
        poll: Duration::from_millis(50),
        timeout: Duration::from_secs(20),
    };
    assert_eq!(policies.ready(wait).await.unwrap().generation(), 1);

    // The admin declares a change rebootless and replaces a default entry.
    let user = json!({"files": [
        {"path": "/etc/foo.conf", "actions": [{"type": "Restart", "restart": {"serviceName": "foo.service"}}]},
        {"path": "/etc/containers/policy.json", "actions": [{"type": "None"}]}
    ]});
    server
        .patch(
            "machineconfigurations",
            None,
            "cluster",
            &json!({"spec": {"nodeDisruptionPolicy": user}}),
            Target::Main,
        )
        .unwrap();
    wait_for("the status of generation 2", || {
        object(&server).is_some_and(|o| o["status"]["observedGeneration"] == 2)
    })
    .await;
    let ready = policies.ready(wait).await.unwrap();
    assert_eq!(ready.generation(), 2);
    let files = &ready
        .status
        .node_disruption_policy_status
        .cluster_policies
        .files;
    let action = |type_: &str, restart: Option<&str>| PolicyAction {
        type_: type_.into(),
        reload: None,
        restart: restart.map(|s| ServiceRef {
            service_name: s.into(),
        }),
    };
    assert_eq!(
        files
            .iter()
            .find(|f| f.path == "/etc/containers/policy.json"),
        Some(&FilePolicy {
            path: "/etc/containers/policy.json".into(),
            actions: vec![action("None", None)],
        }),
        "the user's entry takes the default's place"
    );
    assert_eq!(
        files.last(),
        Some(&FilePolicy {
            path: "/etc/foo.conf".into(),
            actions: vec![action("Restart", Some("foo.service"))],
        }),
        "a new entry is appended"
    );
    assert_eq!(files.len(), default_policy().files.len() + 1);
}
