//! The agent under the identity the shipped manifests give it, end to end: the API test server
//! enforces the Node authorizer, NodeRestriction and the RBAC objects of `manifests/` (loaded
//! from the files); the agent runs with the kubelet's client certificate (`system:node:node-0`
//! in `system:nodes`) along both of its code paths that reach the API beyond its own Node (the
//! pool lookup without `--pool`, and configs by name without a config server: refused by
//! the shipped rules, allowed once `manifests/api-source/` is applied). The server's
//! audit then shows every (verb, resource) the agent used: the test fails on a request nothing
//! allowed and on a permission of `mco-agent-node` that no request needed.
//! Real: the agent binary, kube-rs, the shipped YAML; standing in: the API server (the test
//! server's model of kube-apiserver 1.33's authorizers, docs/test-apiserver.md).

mod common;
mod daemon_env;
mod os_env;

use daemon_env::{NODE, Node, machine_config, secs};
use mco_test_support::shipped::{self, NODE_API_SOURCE_ROLE, NODE_ROLE};
use serde_json::json;

const FILE: &str = "/etc/nmstate/openshift/base.yaml";

fn config(version: u32) -> String {
    machine_config("00-base", &[(FILE, &format!("base: {version}\n"))], &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_needs_exactly_the_shipped_node_rules() {
    let mut node = Node::new(&[("00-base.yaml", &config(1))])
        .await
        .with_cluster();
    node.api()
        .seed(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfigPool",
            "metadata": {"name": "worker"},
            "spec": {
                "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": "worker"}},
                "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}},
            },
        }))
        .unwrap();

    // Host-first, without --pool: the agent lists the pools to find its own.
    node.pool_arg = None;
    let first = node.rendered_name();
    node.start_agent(&[]);
    node.set_desired(&first);
    node.wait_annotations("the first config", secs(30), "Done", Some(&first))
        .await;
    assert!(
        node.logs()
            .contains("the MachineConfigPool selecting the node"),
        "the agent did not find its pool by listing pools: {}",
        node.logs()
    );
    node.kill_agent().await;

    // Without a config server: the rendered config by name from the API, as the MCD reads it.
    // The shipped node rules do not allow it (a per-node config would be readable by every
    // node): the agent is refused and says what to do.
    node.config_server_arg = false;
    node.write_manifest("00-base.yaml", &config(2));
    node.api().seed(node.rendered_config_of("worker")).unwrap();
    let second = node.rendered_name();
    assert_ne!(second, first);
    node.start_agent(&[]);
    node.set_desired(&second);
    let deadline = std::time::Instant::now() + secs(30);
    while !node
        .logs()
        .contains("nodes may not read MachineConfigs under the shipped RBAC")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent did not say that reading MachineConfigs was refused: {}",
            node.logs()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(node.read(FILE).as_deref(), Some("base: 1\n"));
    node.kill_agent().await;
    let refused_before = shipped::role_use(
        &node.api().audit(),
        &format!("system:node:{NODE}"),
        NODE_ROLE,
    )
    .unwrap()
    .refused;
    assert!(
        !refused_before.is_empty()
            && refused_before.iter().all(|r| r.starts_with(&format!(
                "get machineconfigs.machineconfiguration.openshift.io {second}"
            ))),
        "only the read of the rendered config is refused: {refused_before:#?}"
    );

    // With manifests/api-source/ applied (clusters without per-node configs), it may.
    shipped::load_api_source_rbac(node.api()).unwrap();
    node.start_agent(&[]);
    node.set_desired(&second);
    node.wait_annotations("the second config", secs(30), "Done", Some(&second))
        .await;
    assert_eq!(node.read(FILE).as_deref(), Some("base: 2\n"));
    node.kill_agent().await;

    let user = format!("system:node:{NODE}");
    let usage = shipped::role_use(&node.api().audit(), &user, NODE_ROLE).unwrap();
    eprintln!("{user} used:\n  {}", usage.used.join("\n  "));
    assert!(
        usage
            .used
            .iter()
            .any(|p| p.starts_with("get machineconfigs")),
        "the agent never read a MachineConfig: {:?}",
        usage.used
    );
    assert_eq!(
        usage.refused, refused_before,
        "requests of the agent the shipped rules refuse, beyond the read without api-source/"
    );
    assert!(
        usage.unused.is_empty(),
        "permissions of ClusterRole {NODE_ROLE} (manifests/node-rbac.yaml) no request of the agent needed: {:#?}",
        usage.unused
    );
    let optional = shipped::role_use(&node.api().audit(), &user, NODE_API_SOURCE_ROLE).unwrap();
    assert!(
        optional.unused.is_empty(),
        "permissions of ClusterRole {NODE_API_SOURCE_ROLE} (manifests/api-source/) no request of the agent needed: {:#?}",
        optional.unused
    );
    node.stop().await;
}
