//! `mco-agent start` with a cluster, end to end without a VM: the Kubernetes API test server
//! holds the Node (the test plays the node controller by setting `desiredConfig`), the
//! companion serves the pool (host-first: the agent fetches the rendered config from it and
//! checks the served name against `desiredConfig`), rpm-ostree is the stand-in over a real
//! ostree sysroot, logind a fake; the agent is a process on a temp root.

mod common;
mod daemon_env;
mod os_env;

use std::time::Duration;

use daemon_env::{NODE, Node, machine_config, secs};
use machine_config::mco::annotations::{POST_CONFIG_ACTION, REASON};
use mco_test_support::apiserver::Target;
use serde_json::json;

const BASE_FILE: &str = "/etc/nmstate/openshift/base.yaml";
const POLICY: &str = "/etc/containers/policy.json";

fn config(version: u32, kargs: &[&str]) -> String {
    machine_config(
        "00-base",
        &[(BASE_FILE, &format!("base: {version}\n")), (POLICY, "{}\n")],
        kargs,
    )
}

/// A node in the cluster that applied the base config.
async fn provisioned() -> (Node, String) {
    let mut node = Node::new(&[("00-base.yaml", &config(1, &[]))])
        .await
        .with_cluster();
    let base = node.rendered_name();
    node.start_agent(&[]);
    node.set_desired(&base);
    node.wait_annotations("the first application", secs(30), "Done", Some(&base))
        .await;
    (node, base)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn desired_config_to_done_rebootless_then_a_reboot_update() {
    let (mut node, base) = provisioned().await;
    assert_eq!(node.read(BASE_FILE).as_deref(), Some("base: 1\n"));

    // Files only: desiredConfig -> Done without a reboot.
    node.write_manifest("00-base.yaml", &config(2, &[]));
    // The companion re-renders within its reload interval; then the controller targets the node.
    let files_only = node.rendered_name();
    node.wait_served(&files_only).await;
    node.set_desired(&files_only);
    let took = node
        .wait_annotations("the rebootless update", secs(30), "Done", Some(&files_only))
        .await;
    eprintln!("rebootless update: desiredConfig set -> state=Done in {took:?}");
    assert_eq!(node.read(BASE_FILE).as_deref(), Some("base: 2\n"));
    assert_eq!(node.logind.reboots(), 0);
    assert_ne!(files_only, base);

    // Kernel arguments: staged, a reboot requested; Done only after the reboot.
    node.write_manifest("00-base.yaml", &config(2, &["mco.cluster=1"]));
    let kargs = node.rendered_name();
    node.wait_served(&kargs).await;
    node.set_desired(&kargs);
    node.wait_reboot_requested(secs(30)).await;
    // Still in the old config, Working, marked as rebooting (node writes land asynchronously).
    node.wait_annotations("Working", secs(10), "Working", Some(&files_only))
        .await;
    let deadline = std::time::Instant::now() + secs(10);
    while node.annotation(POST_CONFIG_ACTION).as_deref() != Some("Rebooting") {
        assert!(
            std::time::Instant::now() < deadline,
            "post-config-action never set to Rebooting"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(node.os.deployments()[0].options.contains("mco.cluster=1"));
    node.kill_agent().await;
    node.reboot();
    node.start_agent(&[]);
    node.wait_annotations("Done after the reboot", secs(30), "Done", Some(&kargs))
        .await;
    assert_eq!(node.annotation(POST_CONFIG_ACTION).as_deref(), Some(""));
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreconcilable_drift_and_the_force_file_on_the_node() {
    let (node, base) = provisioned().await;
    node.write_manifest(
        "10-groups.yaml",
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 10-groups\n  labels: {machineconfiguration.openshift.io/role: worker}\nspec:\n  config:\n    ignition: {version: 3.2.0}\n    passwd: {groups: [{name: admins}]}\n",
    );
    let bad = node.rendered_name();
    node.wait_served(&bad).await;
    node.set_desired(&bad);
    node.wait_annotations("Unreconcilable", secs(30), "Unreconcilable", Some(&base))
        .await;
    assert!(
        node.annotation(REASON)
            .unwrap()
            .ends_with("ignition Passwd Groups section contains changes")
    );

    // Back to the base config; then a hand edit of a managed file.
    node.remove_manifest("10-groups.yaml");
    node.wait_served(&base).await;
    node.set_desired(&base);
    node.wait_annotations("Done again", secs(30), "Done", Some(&base))
        .await;
    std::fs::write(node.path(BASE_FILE), "edited by hand\n").unwrap();
    node.wait_annotations("drift", secs(10), "Degraded", Some(&base))
        .await;
    assert_eq!(
        node.annotation(REASON).unwrap(),
        format!("content mismatch for file \"{BASE_FILE}\"")
    );
    std::fs::write(node.path(BASE_FILE), "base: 1\n").unwrap();
    node.wait_annotations("fixed", secs(10), "Done", Some(&base))
        .await;

    // Drift again; the force file re-applies the config, without a reboot.
    std::fs::write(node.path(BASE_FILE), "edited again\n").unwrap();
    node.wait_annotations("drift", secs(10), "Degraded", Some(&base))
        .await;
    std::fs::write(node.path("/run/machine-config-daemon-force"), "").unwrap();
    node.wait_annotations("forced", secs(30), "Done", Some(&base))
        .await;
    assert_eq!(node.read(BASE_FILE).as_deref(), Some("base: 1\n"));
    assert!(!node.path("/run/machine-config-daemon-force").exists());
    assert_eq!(node.logind.reboots(), 0);
    node.stop().await;
}

/// A custom pool of the companion: the worker configs plus the infra ones.
const INFRA_POOL: &str = r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata: {name: infra}
spec:
  machineConfigSelector:
    matchExpressions:
    - {key: machineconfiguration.openshift.io/role, operator: In, values: [worker, infra]}
"#;

const INFRA_FILE: &str = "/etc/nmstate/openshift/infra.yaml";

/// The cluster's pools, as the MCO holds them: selecting nodes by role.
fn cluster_pool(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        "metadata": {"name": name},
        "spec": {
            "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": name}},
            "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}},
        },
    })
}

/// Without `--pool`, the agent asks the config server for the pool selecting its Node (a custom
/// pool wins over worker), or, when it may not list pools, the one its role labels name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_pool_the_agent_follows_the_pool_of_its_node() {
    let infra_mc = machine_config("10-infra", &[(INFRA_FILE, "infra: 1\n")], &[]).replace(
        "machineconfiguration.openshift.io/role: worker",
        "machineconfiguration.openshift.io/role: infra",
    );
    let mut node = Node::new(&[
        ("00-base.yaml", &config(1, &[])),
        ("pool-infra.yaml", INFRA_POOL),
        ("10-infra.yaml", &infra_mc),
    ])
    .await
    .with_cluster();
    node.pool_arg = None;
    for pool in ["worker", "infra", "master"] {
        node.api().seed(cluster_pool(pool)).unwrap();
    }
    node.api()
        .patch(
            "nodes",
            None,
            NODE,
            &json!({"metadata": {"labels": {"node-role.kubernetes.io/infra": ""}}}),
            Target::Main,
        )
        .unwrap();
    let infra = node.rendered_name_of("infra");
    assert_ne!(infra, node.rendered_name());
    node.wait_served_in("infra", &infra).await;
    node.start_agent(&[]);
    node.set_desired(&infra);
    node.wait_annotations("Done in the infra pool", secs(30), "Done", Some(&infra))
        .await;
    assert_eq!(node.read(INFRA_FILE).as_deref(), Some("infra: 1\n"));
    assert!(
        node.logs()
            .contains("the MachineConfigPool selecting the node"),
        "{}",
        node.logs()
    );
    node.kill_agent().await;

    // The node's credentials may not list pools: its role labels say the same.
    node.api().faults().fail_next(
        "GET",
        "/apis/machineconfiguration.openshift.io/v1/machineconfigpools",
        1000,
        403,
    );
    node.write_manifest(
        "10-infra.yaml",
        &infra_mc.replace("infra%3A%201", "infra%3A%202"),
    );
    let infra2 = node.rendered_name_of("infra");
    assert_ne!(infra2, infra);
    node.wait_served_in("infra", &infra2).await;
    node.start_agent(&[]);
    node.set_desired(&infra2);
    node.wait_annotations("Done again", secs(30), "Done", Some(&infra2))
        .await;
    assert_eq!(node.read(INFRA_FILE).as_deref(), Some("infra: 2\n"));
    assert!(
        node.logs().contains("the node's role labels"),
        "{}",
        node.logs()
    );
    node.stop().await;
}

/// Following the API server (no config server), a node that no MachineConfigPool selects is
/// not an error: its MachineConfigNode names the pool `not-yet-set`, as the MCD's does
/// (`GetPrimaryPoolNameForMCN`), and the agent still applies the `desiredConfig` it is given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_no_pool_selects_names_the_pool_not_yet_set() {
    let mut node = Node::new(&[("00-base.yaml", &config(1, &[]))])
        .await
        .with_cluster();
    mco_test_support::shipped::load_api_source_rbac(node.api()).unwrap();
    node.pool_arg = None;
    node.config_server_arg = false;
    // Pools exist, but none selects node-0 once it has no role label.
    for pool in ["worker", "master"] {
        node.api().seed(cluster_pool(pool)).unwrap();
    }
    node.api()
        .patch(
            "nodes",
            None,
            NODE,
            &json!({"metadata": {"labels": {"node-role.kubernetes.io/worker": null}}}),
            Target::Main,
        )
        .unwrap();
    node.api().seed(node.rendered_config_of("worker")).unwrap();
    let base = node.rendered_name();
    node.start_agent(&[]);
    node.set_desired(&base);
    node.wait_annotations("Done without a pool", secs(30), "Done", Some(&base))
        .await;
    assert_eq!(node.read(BASE_FILE).as_deref(), Some("base: 1\n"));
    // The MachineConfigNode is written by the agent's writer task: wait for it.
    let deadline = std::time::Instant::now() + secs(10);
    let mcn = loop {
        if let Some(mcn) = node.api().get("machineconfignodes", None, NODE) {
            break mcn;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no MachineConfigNode for {NODE} within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        mcn["spec"]["pool"]["name"],
        "not-yet-set",
        "{mcn:#}\n{}",
        node.logs()
    );
    assert!(
        node.logs()
            .contains("No primary pool is associated with node: node-0"),
        "{}",
        node.logs()
    );
    node.stop().await;
}
