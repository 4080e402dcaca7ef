//! `mco-agent start` with a cluster, the cluster's node disruption policy and the drain
//! controller, end to end without a VM. Real: the agent process (`--drain-mode controller`),
//! the Kubernetes API test server, the companion's config server, its
//! `MachineConfiguration/cluster` status computation and its drain controller (in the test's
//! runtime); the rpm-ostree stand-in over a real ostree sysroot. Stand-ins: logind (a fake;
//! the reboot is simulated by a new boot id), the node controller (the test sets
//! `desiredConfig`).

mod common;
mod daemon_env;
mod os_env;

use std::time::{Duration, Instant};

use daemon_env::{Node, machine_config, secs};
use machine_config::MachineConfiguration;
use machine_config::mco::annotations::{DESIRED_DRAIN, LAST_APPLIED_DRAIN};
use mco_companion::cluster::drain::{self, schedule::DrainTimings};
use mco_companion::cluster::{drain_client, policy_status};
use mco_test_support::apiserver::Target;
use serde_json::json;
use tokio::sync::watch;

const BASE_FILE: &str = "/etc/nmstate/openshift/base.yaml";
const APP_FILE: &str = "/etc/mco-test/app.conf";

/// The pool's config: a file the default policies apply without a reboot, and (`app`) one no
/// default policy covers.
fn config(app: Option<u32>, kargs: &[&str]) -> String {
    let app = app.map(|n| format!("app: {n}\n"));
    let mut files = vec![(BASE_FILE, "base: 1\n")];
    if let Some(app) = &app {
        files.push((APP_FILE, app));
    }
    machine_config("00-base", &files, kargs)
}

async fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_policy_makes_a_change_rebootless_and_the_drain_controller_drains_a_reboot() {
    let mut node = Node::new(&[("00-base.yaml", &config(None, &[]))])
        .await
        .with_cluster();
    let base = node.rendered_name();
    // The companion's drain controller answers the agent's desiredDrain requests.
    let client = drain_client(node.api().kubeconfig()).await.unwrap();
    let (_stop, shutdown) = watch::channel(false);
    let timings = DrainTimings {
        requeue: Duration::from_millis(200),
        ..DrainTimings::default()
    };
    tokio::spawn(drain::run(client.clone(), timings, shutdown));
    node.start_agent(&[("MCO_AGENT_DRAIN_MODE", "controller")]);
    node.set_desired(&base);
    node.wait_annotations("the first application", secs(30), "Done", Some(&base))
        .await;

    // The admin declares changes to APP_FILE rebootless; the operator's status follows.
    node.api()
        .patch(
            "machineconfigurations",
            None,
            "cluster",
            &json!({"spec": {"nodeDisruptionPolicy": {"files": [
                {"path": APP_FILE, "actions": [{"type": "None"}]}
            ]}}}),
            Target::Main,
        )
        .unwrap();
    let configurations = kube::Api::<MachineConfiguration>::all(client);
    assert!(policy_status::sync(&configurations).await.unwrap());
    let status = &node
        .api()
        .get("machineconfigurations", None, "cluster")
        .unwrap()["status"];
    assert_eq!(status["observedGeneration"], 2);

    node.write_manifest("00-base.yaml", &config(Some(2), &[]));
    let rebootless = node.rendered_name();
    node.wait_served(&rebootless).await;
    node.set_desired(&rebootless);
    node.wait_annotations("the rebootless update", secs(30), "Done", Some(&rebootless))
        .await;
    assert_eq!(node.read(APP_FILE).as_deref(), Some("app: 2\n"));
    assert_eq!(
        node.logind.reboots(),
        0,
        "the cluster's policy made it rebootless"
    );
    assert_eq!(
        node.annotation(DESIRED_DRAIN),
        node.annotation(LAST_APPLIED_DRAIN)
    );

    // Kernel arguments reboot: the agent asks for a drain, the controller cordons and drains,
    // then the agent stages and asks for the reboot.
    node.write_manifest("00-base.yaml", &config(Some(2), &["mco.policy=1"]));
    let kargs = node.rendered_name();
    node.wait_served(&kargs).await;
    node.set_desired(&kargs);
    node.wait_reboot_requested(secs(30)).await;
    let drained = format!("drain-{kargs}");
    assert_eq!(
        node.annotation(DESIRED_DRAIN).as_deref(),
        Some(drained.as_str())
    );
    assert_eq!(
        node.annotation(LAST_APPLIED_DRAIN).as_deref(),
        Some(drained.as_str()),
        "the controller answered before the agent went on"
    );
    let unschedulable = |node: &Node| {
        node.api().get("nodes", None, daemon_env::NODE).unwrap()["spec"]["unschedulable"] == true
    };
    assert!(unschedulable(&node), "cordoned by the controller");

    node.kill_agent().await;
    node.reboot();
    node.start_agent(&[("MCO_AGENT_DRAIN_MODE", "controller")]);
    node.wait_annotations("Done after the reboot", secs(30), "Done", Some(&kargs))
        .await;
    let uncordoned = format!("uncordon-{kargs}");
    wait_for("the controller's uncordon", || {
        node.annotation(LAST_APPLIED_DRAIN).as_deref() == Some(uncordoned.as_str())
    })
    .await;
    assert!(!unschedulable(&node));
    node.stop().await;
}
