//! The agent under the identity the shipped manifests give it, end to end: the API test server
//! enforces the Node authorizer, NodeRestriction and the RBAC objects of `manifests/` (loaded
//! from the files); the agent runs with the kubelet's client certificate (`system:node:node-0`
//! in `system:nodes`) along each of its code paths that reach the API beyond its own Node (the
//! pool lookup without `--pool`, and configs by name without a config server: refused by
//! the shipped rules, allowed once `manifests/api-source/` is applied), and, in a test of its
//! own, `--drain-mode controller` naming what holds a drain (the pods and budgets it lists,
//! with the MCO's drain controller played by the test). The server's
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
    // Listing budgets is --drain-mode controller's, used (and checked) by the test below.
    let unused: Vec<&String> = usage
        .unused
        .iter()
        .filter(|p| !p.contains("poddisruptionbudgets"))
        .collect();
    assert!(
        unused.is_empty(),
        "permissions of ClusterRole {NODE_ROLE} (manifests/node-rbac.yaml) no request of the agent needed: {unused:#?}"
    );
    let optional = shipped::role_use(&node.api().audit(), &user, NODE_API_SOURCE_ROLE).unwrap();
    assert!(
        optional.unused.is_empty(),
        "permissions of ClusterRole {NODE_API_SOURCE_ROLE} (manifests/api-source/) no request of the agent needed: {:#?}",
        optional.unused
    );
    node.stop().await;
}

/// A file the admin's policy drains for, without a reboot.
const DRAINED_FILE: &str = "/etc/mco-test/drained.conf";

/// Plays the MCO's drain controller, which writes nothing into the node's reason: cordons a
/// node that asks for a drain and answers (the node's pods evicted, the request copied into
/// `lastAppliedDrain`) only once PodDisruptionBudget `apps/web-budget` allows a disruption;
/// answers an uncordon at once. Runs until dropped.
async fn mco_drain_controller(api: &mco_test_support::apiserver::TestApiServer) {
    use machine_config::mco::annotations::{DESIRED_DRAIN, LAST_APPLIED_DRAIN};
    use mco_test_support::apiserver::Target;
    loop {
        let node = api.get("nodes", None, NODE).unwrap();
        let annotation = |key: &str| {
            node["metadata"]["annotations"][key]
                .as_str()
                .map(String::from)
        };
        let desired = annotation(DESIRED_DRAIN);
        if desired.is_some() && desired != annotation(LAST_APPLIED_DRAIN) {
            let draining = desired.as_deref().is_some_and(|d| d.starts_with("drain-"));
            api.patch(
                "nodes",
                None,
                NODE,
                &json!({"spec": {"unschedulable": draining.then_some(true)}}),
                Target::Main,
            )
            .unwrap();
            let allowed = api
                .get("poddisruptionbudgets", Some("apps"), "web-budget")
                .is_none_or(|b| b["status"]["disruptionsAllowed"].as_i64().unwrap_or(0) > 0);
            if !draining || allowed {
                for pod in api.list("pods", Some("apps")) {
                    if pod["spec"]["nodeName"] == NODE {
                        api.delete(
                            "pods",
                            Some("apps"),
                            pod["metadata"]["name"].as_str().unwrap(),
                        )
                        .unwrap();
                    }
                }
                let answer = json!({"metadata": {"annotations": {LAST_APPLIED_DRAIN: desired}}});
                api.patch("nodes", None, NODE, &answer, Target::Main)
                    .unwrap();
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// `mco-agent start --drain-mode controller` under the shipped rules, with the MCO's drain
/// controller (played by the test), which says nothing in the node while a budget holds its
/// drain: once the drain has gone on past the bound (1 s here), the agent's reason names the pod
/// and the budget, the state stays Working; once the budget allows it the controller finishes
/// and the update completes, the reason cleared. Its reads of pods and budgets are allowed (no
/// refused request), and the budget rule of `mco-agent-node` is used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_drain_held_by_a_budget_is_named_in_the_reason_until_it_completes() {
    use machine_config::MachineConfiguration;
    use machine_config::mco::annotations::REASON;
    use mco_test_support::apiserver::{Target, fixtures};

    let with_file = |n: u32| {
        machine_config(
            "00-base",
            &[
                (FILE, "base: 1\n"),
                (DRAINED_FILE, &format!("drained: {n}\n")),
            ],
            &[],
        )
    };
    let mut node = Node::new(&[("00-base.yaml", &with_file(1))])
        .await
        .with_cluster();
    node.agent_args = [
        "--drain-report-after",
        "1s",
        "--drain-report-every",
        "300ms",
    ]
    .map(String::from)
    .to_vec();
    // The admin drains for DRAINED_FILE, no reboot; the operator's status follows.
    node.api()
        .patch(
            "machineconfigurations",
            None,
            "cluster",
            &json!({"spec": {"nodeDisruptionPolicy": {"files": [
                {"path": DRAINED_FILE, "actions": [{"type": "Drain"}]}
            ]}}}),
            Target::Main,
        )
        .unwrap();
    let admin = mco_companion::cluster::drain_client(node.api().kubeconfig())
        .await
        .unwrap();
    let configurations = kube::Api::<MachineConfiguration>::all(admin);
    assert!(
        mco_companion::cluster::policy_status::sync(&configurations)
            .await
            .unwrap()
    );

    node.start_agent(&[("MCO_AGENT_DRAIN_MODE", "controller")]);
    let controller = mco_drain_controller(node.api());
    let scenario = async {
        let first = node.rendered_name();
        node.set_desired(&first);
        node.wait_annotations("the first config", secs(30), "Done", Some(&first))
            .await;

        let api = node.api();
        api.seed(fixtures::namespace("apps")).unwrap();
        api.seed(fixtures::pod("apps", "web-1", NODE, &[("app", "web")]))
            .unwrap();
        api.seed(fixtures::pdb(
            "apps",
            "web-budget",
            &[("app", "web")],
            json!({"maxUnavailable": 0}),
        ))
        .unwrap();
        node.write_manifest("00-base.yaml", &with_file(2));
        let second = node.rendered_name();
        node.wait_served(&second).await;
        node.set_desired(&second);
        wait_for(
            secs(30),
            "the pod and its budget in the node's reason",
            || {
                node.annotation(REASON)
                    .is_some_and(|r| r.starts_with("Waiting for the drain controller:"))
            },
        )
        .await;
        let reason = node.annotation(REASON).unwrap();
        assert!(
            reason.starts_with(&format!(
                "Waiting for the drain controller: node {NODE} not drained after "
            )) && reason.ends_with(
                ": pod apps/web-1: eviction refused by PodDisruptionBudget \"web-budget\" \
                     (The disruption budget web-budget needs 1 healthy pods and has 1 currently)"
            ),
            "{reason}"
        );
        assert_eq!(
            node.annotation("machineconfiguration.openshift.io/state")
                .as_deref(),
            Some("Working")
        );
        assert_eq!(
            node.read(DRAINED_FILE).as_deref(),
            Some("drained: 1\n"),
            "not before the drain"
        );

        api.patch(
            "poddisruptionbudgets",
            Some("apps"),
            "web-budget",
            &json!({"spec": {"maxUnavailable": 1}}),
            Target::Main,
        )
        .unwrap();
        node.wait_annotations("the update once drained", secs(30), "Done", Some(&second))
            .await;
        assert_eq!(node.read(DRAINED_FILE).as_deref(), Some("drained: 2\n"));
        assert_eq!(node.annotation(REASON).as_deref(), Some(""));
        assert_eq!(
            node.logind.reboots(),
            0,
            "the policy drains without a reboot"
        );
    };
    tokio::select! {
        () = scenario => {}
        () = controller => unreachable!("the drain controller runs until dropped"),
    }
    node.kill_agent().await;

    let user = format!("system:node:{NODE}");
    let usage = shipped::role_use(&node.api().audit(), &user, NODE_ROLE).unwrap();
    assert_eq!(
        usage.refused,
        Vec::<String>::new(),
        "requests the shipped rules refused"
    );
    assert!(
        !usage
            .unused
            .iter()
            .any(|p| p.contains("poddisruptionbudgets")),
        "the agent never listed budgets: {:?}",
        usage.used
    );
    node.stop().await;
}
