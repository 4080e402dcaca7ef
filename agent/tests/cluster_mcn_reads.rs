//! The agent's MachineConfigNode against the Kubernetes API test server: the object is read
//! once, then known from each write's answer (agent/src/cluster/kube_mcn.rs), and a write that
//! fails (the object deleted meanwhile) makes the next step read and recreate it.

use std::time::Duration;

use machine_config::mco::annotations::{CURRENT_CONFIG, DESIRED_CONFIG};
use machine_config::mco::node_conditions::Progress;
use mco_agent::cluster::{ClusterOptions, KubeNodeApi, RetryPolicy, mcn};
use mco_test_support::apiserver::{TestApiServer, fixtures};
use serde_json::{Value, json};

const NODE: &str = "worker-0";
const MCN: &str = "machineconfignodes";

fn mcn_requests(server: &TestApiServer, method: &str) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.method == method && r.path.contains("/machineconfignodes"))
        .count()
}

/// The object's conditions that are True, by type.
fn true_conditions(object: &Value) -> Vec<String> {
    object["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["status"] == "True")
        .map(|c| c["type"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn the_machine_config_node_is_read_once_then_known_from_the_writes() {
    let server = TestApiServer::start().unwrap();
    let mut node = fixtures::node(NODE);
    node["metadata"]["annotations"] =
        json!({DESIRED_CONFIG: "rendered-worker-1", CURRENT_CONFIG: "rendered-worker-0"});
    server.seed(node).unwrap();
    let kubeconfig = server.dir().join("kubelet.kubeconfig");
    server
        .write_kubeconfig(&kubeconfig, &format!("system:node:{NODE}"))
        .unwrap();
    let mut options = ClusterOptions::new(NODE);
    options.kubeconfig = kubeconfig;
    options.retry = RetryPolicy {
        initial_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(100),
        attempt_timeout: Duration::from_millis(700),
    };
    let api = KubeNodeApi::connect(&options).await.unwrap();

    let steps = [
        Progress::NeedsUpdate,
        Progress::Prepared {
            actions: vec![],
            drain: false,
        },
        Progress::DrainNotRequired,
    ];
    for step in &steps {
        mcn::report(&api, "worker", step).await.unwrap();
    }
    assert_eq!(
        mcn_requests(&server, "GET"),
        1,
        "one read, at the first step"
    );
    assert_eq!(mcn_requests(&server, "POST"), 1);
    assert_eq!(mcn_requests(&server, "PATCH"), 3, "each step's status");
    let written = server.get(MCN, None, NODE).unwrap();
    assert!(
        !true_conditions(&written).is_empty(),
        "the last step's condition is there: {written:#}"
    );
    assert_eq!(
        written["status"]["configVersion"]["desired"],
        "rendered-worker-1"
    );

    // The object goes (an admin, or the Node's garbage collection): the next write fails, and
    // the step after it reads, finds nothing and creates it again, with the whole state.
    server.delete(MCN, None, NODE).unwrap();
    assert!(
        mcn::report(&api, "worker", &Progress::Cordoned)
            .await
            .is_err(),
        "a patch of a deleted object fails"
    );
    let gets = mcn_requests(&server, "GET");
    mcn::report(&api, "worker", &Progress::Cordoned)
        .await
        .unwrap();
    assert_eq!(mcn_requests(&server, "GET"), gets + 1, "read afresh");
    assert_eq!(mcn_requests(&server, "POST"), 2, "created again");
    let again = server.get(MCN, None, NODE).unwrap();
    assert_eq!(
        again["spec"]["configVersion"]["desired"],
        "rendered-worker-1"
    );
    assert!(!true_conditions(&again).is_empty(), "{again:#}");
}
