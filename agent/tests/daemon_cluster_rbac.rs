//! The agent under the identity the shipped manifests give it, end to end: the API test server
//! enforces the Node authorizer, NodeRestriction and the RBAC objects of `manifests/` (loaded
//! from the files); the agent runs with the kubelet's client certificate (`system:node:node-0`
//! in `system:nodes`) along both of its code paths that reach the API beyond its own Node (the
//! pool lookup without `--pool`, and configs by name without a config server: refused by
//! the shipped rules, allowed once `manifests/api-source/` is applied). The server's
//! audit then shows every (verb, resource) the agent used: the test fails on a request nothing
//! allowed and on a permission of `mco-agent-node` that no request needed. The cluster is an
//! OpenShift one: a ControllerConfig asking for a service-CA rotation (the certificate writer
//! reads it and the `kubeconfig-data` ConfigMap), a FeatureGate and a ClusterVersion.
//! Real: the agent binary, kube-rs, the shipped YAML; standing in: the API server (the test
//! server's model of kube-apiserver 1.33's authorizers, docs/test-apiserver.md).

mod common;
mod daemon_env;
mod os_env;

use daemon_env::{NODE, Node, machine_config, secs};
use mco_test_support::shipped::{self, NODE_API_SOURCE_ROLE, NODE_ROLE};
use serde_json::json;

const FILE: &str = "/etc/nmstate/openshift/base.yaml";
const LAST_SYNCED: &str =
    "machineconfiguration.openshift.io/lastSyncedControllerConfigResourceVersion";
const LAST_OBSERVED: &str = "machineconfiguration.openshift.io/lastObservedServerCAAnnotation";

fn b64(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// A CA certificate (PEM) with the common name `cn`, the same for every call.
fn ca(cn: &str) -> String {
    static CAS: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());
    let mut cas = CAS.lock().unwrap();
    if let Some((_, pem)) = cas.iter().find(|(c, _)| c == cn) {
        return pem.clone();
    }
    let pem = mco_test_support::tls::TestCa::new(cn)
        .unwrap()
        .cert_pem()
        .trim()
        .to_string();
    cas.push((cn.to_string(), pem.clone()));
    pem
}

fn kubeconfig(ca_pem: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://api-int:6443\n    certificate-authority-data: {}\n",
        b64(ca_pem)
    )
}

/// What an OpenShift cluster has for the node: the ControllerConfig (asking for a service-CA
/// rotation), the kubeconfig-data ConfigMap, the feature gates; and the node's kubeconfigs.
/// Returns the ControllerConfig's resourceVersion.
fn seed_openshift(node: &Node) -> String {
    let api = node.api();
    for object in [
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "kubeconfig-data", "namespace": "openshift-machine-config-operator"},
               "data": {"ca-bundle.crt": format!("{}\n{}\n", ca("old-signer"), ca("new-signer"))}}),
        json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "ControllerConfig",
               "metadata": {"name": "machine-config-controller",
                            "annotations": {"machineconfiguration.openshift.io/service-ca-rotate": "true"}},
               "spec": {"kubeAPIServerServingCAData": b64("kubelet-ca")}}),
        json!({"apiVersion": "config.openshift.io/v1", "kind": "FeatureGate",
               "metadata": {"name": "cluster"},
               "status": {"featureGates": [{"version": "4.18.3", "enabled": [], "disabled": [{"name": "ImageModeStatusReporting"}]}]}}),
        json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
               "metadata": {"name": "version"},
               "status": {"desired": {"version": "4.18.3"}}}),
    ] {
        api.seed(object).unwrap();
    }
    let version = api
        .get("controllerconfigs", None, "machine-config-controller")
        .unwrap()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    for path in ["/etc/kubernetes/kubeconfig", "/var/lib/kubelet/kubeconfig"] {
        let host = node.path(path);
        std::fs::create_dir_all(host.parent().unwrap()).unwrap();
        std::fs::write(host, kubeconfig(&ca("old-signer"))).unwrap();
    }
    version
}

async fn wait_for(timeout: std::time::Duration, what: &str, done: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Waits for the node's MachineConfigNode to name `config` as desired.
async fn mcn_names(node: &Node, config: &str) {
    wait_for(
        secs(30),
        &format!("the MachineConfigNode naming {config}"),
        || {
            node.api()
                .get("machineconfignodes", None, NODE)
                .is_some_and(|mcn| mcn["spec"]["configVersion"]["desired"] == config)
        },
    )
    .await;
}

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

    let cc_version = seed_openshift(&node);

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
    // The certificate writer wrote the ControllerConfig's files, rotated the kubeconfigs'
    // CA and recorded it.
    node.wait_annotations("the first config", secs(30), "Done", Some(&first))
        .await;
    wait_for(secs(30), "the certificate writer's annotations", || {
        node.annotation(LAST_SYNCED).as_deref() == Some(cc_version.as_str())
            && node.annotation(LAST_OBSERVED).as_deref() == Some("true")
    })
    .await;
    assert_eq!(
        node.read("/etc/kubernetes/kubelet-ca.crt").as_deref(),
        Some("kubelet-ca\n")
    );
    assert!(
        node.read("/etc/kubernetes/kubeconfig")
            .is_some_and(|k| k.contains(&b64(&format!(
                "{}\n{}",
                ca("old-signer"),
                ca("new-signer")
            )))),
        "the bootstrap kubeconfig did not take the rotated CA"
    );
    // The MachineConfigNode is written by the agent's writer task, after Done: wait for it to
    // name the first config, so that the change below must patch its spec (a kill before the
    // writer ran would leave the create to a later agent, with the spec already current).
    mcn_names(&node, &first).await;
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
    // As above: the spec's patch to the second config lands after Done.
    mcn_names(&node, &second).await;
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
