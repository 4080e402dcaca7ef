//! The RBAC of `manifests/` as the real `kubectl` sees it: applied with `kubectl apply -f` by
//! the admin to the API test server with authorization on, then `auth can-i` for a node's
//! kubelet (impersonated with `--as`/`--as-group`, and with its own certificate) and for the
//! companion's service account, `auth can-i --list`, and a forbidden `get`. What each identity
//! may do is what docs/security.md says; the end-to-end tests prove each rule is needed
//! (agent/tests/daemon_cluster_rbac.rs, companion/tests/cluster.rs).

use std::path::{Path, PathBuf};
use std::process::Output;

use mco_test_support::apiserver::{ServerOptions, TestApiServer, fixtures};
use mco_test_support::shipped::{self, COMPANION_NAMESPACE, COMPANION_SERVICE_ACCOUNT};

const NODE_AS: [&str; 4] = ["--as", "system:node:worker-0", "--as-group", "system:nodes"];

fn run(server: &TestApiServer, kubeconfig: &Path, args: &[&str]) -> Output {
    let output = server
        .kubectl(kubeconfig)
        .args(args)
        .output()
        .expect("running kubectl (tests/setup.sh installs it)");
    eprintln!(
        "kubectl {}: {}\nstdout: {}\nstderr: {}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout)
        .trim_end()
        .to_string()
}

/// A server with authorization on, two worker nodes, and the shipped RBAC applied with
/// `kubectl apply -f` (the ServiceAccount, Deployment, Service and ConfigMap are left out: the
/// test server does not serve those types, and nothing runs them here).
fn cluster() -> (TestApiServer, PathBuf) {
    let server = TestApiServer::start_with(ServerOptions::rbac()).unwrap();
    for node in ["worker-0", "worker-1"] {
        server.seed(fixtures::node(node)).unwrap();
    }
    let rbac: Vec<serde_json::Value> = shipped::objects()
        .unwrap()
        .into_iter()
        .filter(|o| {
            let kind = o["kind"].as_str().unwrap_or_default();
            kind == "Namespace" || kind.starts_with("ClusterRole") || kind.starts_with("Role")
        })
        .collect();
    assert_eq!(
        rbac.len(),
        7,
        "the namespace, two ClusterRoles, the companion's Role for its FleetLock Leases, and their bindings"
    );
    let file = server.dir().join("shipped-rbac.yaml");
    let docs: Vec<String> = rbac.iter().map(|o| format!("---\n{o}\n")).collect();
    std::fs::write(&file, docs.concat()).unwrap();
    let admin = server.kubeconfig().to_path_buf();
    let applied = run(&server, &admin, &["apply", "-f", file.to_str().unwrap()]);
    assert!(applied.status.success());
    assert!(
        stdout(&applied)
            .contains("clusterrolebinding.rbac.authorization.k8s.io/mco-agent-node created"),
        "{}",
        stdout(&applied)
    );
    (server, admin)
}

#[test]
fn a_node_may_do_what_its_agent_needs_and_no_more() {
    let (server, admin) = cluster();
    let can = |args: &[&str]| {
        let mut all = vec!["auth", "can-i"];
        all.extend_from_slice(args);
        all.extend_from_slice(&NODE_AS);
        stdout(&run(&server, &admin, &all))
    };
    assert_eq!(can(&["patch", "nodes/worker-0"]), "yes");
    assert_eq!(
        can(&[
            "list",
            "machineconfigpools.machineconfiguration.openshift.io"
        ]),
        "yes"
    );
    assert_eq!(can(&["create", "pods/eviction", "-n", "default"]), "yes");
    // --drain-mode controller names the budgets that hold a drain; it never changes one
    assert_eq!(
        can(&["list", "poddisruptionbudgets.policy", "-n", "apps"]),
        "yes"
    );
    assert_eq!(
        can(&["patch", "poddisruptionbudgets.policy/web", "-n", "apps"]),
        "no"
    );
    // NodeRestriction and the Node authorizer keep a node to its own objects; the rest, RBAC
    assert_eq!(
        can(&["get", "nodes/worker-1"]),
        "no - node 'worker-0' cannot read 'worker-1', only its own Node object"
    );
    assert_eq!(
        can(&["list", "machineconfigs.machineconfiguration.openshift.io"]),
        "no"
    );
    // per-node configs may hold a node's secrets: nodes read no MachineConfig at all (their
    // agents get configs from the config server, which proves who asks)
    assert_eq!(
        can(&[
            "get",
            "machineconfigs.machineconfiguration.openshift.io/rendered-worker-1"
        ]),
        "no"
    );
    assert_eq!(
        can(&[
            "get",
            "machineconfigpools.machineconfiguration.openshift.io/worker"
        ]),
        "no"
    );
    assert_eq!(
        can(&["create", "machineconfigs.machineconfiguration.openshift.io"]),
        "no"
    );
    assert_eq!(
        can(&[
            "patch",
            "machineconfigpools.machineconfiguration.openshift.io/worker"
        ]),
        "no"
    );
    // the Node authorizer reads a secret only by name, of a pod bound to the node
    assert_eq!(
        can(&["get", "secrets", "-n", "kube-system"]),
        "no - No Object name found"
    );
}

#[test]
fn the_kubelets_own_credentials_list_the_shipped_rules_and_a_get_beyond_them_is_forbidden() {
    let (server, _admin) = cluster();
    let node = server.dir().join("worker-0.kubeconfig");
    server.write_node_kubeconfig(&node, "worker-0").unwrap();
    let list = run(&server, &node, &["auth", "can-i", "--list"]);
    assert!(list.status.success());
    let rows: Vec<Vec<String>> = stdout(&list)
        .lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect();
    let row = |resource: &str| {
        rows.iter()
            .find(|r| r.first().map(String::as_str) == Some(resource))
            .cloned()
            .unwrap_or_default()
    };
    assert!(
        row("machineconfigs.machineconfiguration.openshift.io").is_empty(),
        "a node may read MachineConfigs: {rows:?}"
    );
    assert_eq!(
        row("machineconfigpools.machineconfiguration.openshift.io")[1..],
        // watch: the pinned image sets a node's pools list (docs/daemon.md)
        ["[]", "[]", "[list", "watch]"]
    );

    let denied = run(&server, &node, &["get", "machineconfigpool", "worker"]);
    assert_eq!(denied.status.code(), Some(1));
    let message = String::from_utf8_lossy(&denied.stderr);
    assert!(
        message.starts_with(
            "Error from server (Forbidden): machineconfigpools.machineconfiguration.openshift.io \
             \"worker\" is forbidden: User \"system:node:worker-0\" cannot get resource \
             \"machineconfigpools\" in API group \"machineconfiguration.openshift.io\" at the \
             cluster scope"
        ),
        "{message}"
    );
}

#[test]
fn the_companion_may_render_roll_out_and_serve_and_no_more() {
    let (server, admin) = cluster();
    let sa = format!("system:serviceaccount:{COMPANION_NAMESPACE}:{COMPANION_SERVICE_ACCOUNT}");
    let can = |args: &[&str]| {
        let mut all = vec!["auth", "can-i", "--as", sa.as_str()];
        all.extend_from_slice(args);
        stdout(&run(&server, &admin, &all))
    };
    let mc = "machineconfigs.machineconfiguration.openshift.io";
    let pool = "machineconfigpools.machineconfiguration.openshift.io";
    assert_eq!(can(&["create", mc]), "yes");
    assert_eq!(can(&["watch", mc]), "yes");
    assert_eq!(can(&["patch", pool, "--subresource", "status"]), "yes");
    assert_eq!(can(&["patch", "nodes/worker-1"]), "yes");
    assert_eq!(can(&["delete", mc]), "no");
    assert_eq!(can(&["update", pool]), "no");
    assert_eq!(can(&["delete", "nodes/worker-1"]), "no");
    assert_eq!(can(&["delete", "pods", "-n", "default"]), "no");
    assert_eq!(can(&["get", "secrets", "-n", COMPANION_NAMESPACE]), "no");
}

/// MachineConfigNodes: RBAC lets every node create and patch them (and patch their status);
/// the shipped ValidatingAdmissionPolicy, whose rule the test server enforces, keeps each node
/// to the one named like itself.
#[test]
fn a_node_writes_only_its_own_machine_config_node() {
    let (server, admin) = cluster();
    let can = |args: &[&str]| {
        let mut all = vec!["auth", "can-i"];
        all.extend_from_slice(args);
        all.extend_from_slice(&NODE_AS);
        stdout(&run(&server, &admin, &all))
    };
    let mcn = "machineconfignodes.machineconfiguration.openshift.io";
    assert_eq!(can(&["create", mcn]), "yes");
    assert_eq!(can(&["patch", &format!("{mcn}/worker-0")]), "yes");
    assert_eq!(
        can(&[
            "patch",
            &format!("{mcn}/worker-0"),
            "--subresource",
            "status"
        ]),
        "yes"
    );
    assert_eq!(can(&["delete", &format!("{mcn}/worker-0")]), "no");
    assert_eq!(can(&["list", mcn]), "no");

    let node = server.dir().join("worker-0.kubeconfig");
    server.write_node_kubeconfig(&node, "worker-0").unwrap();
    let object = |name: &str| {
        let file = server.dir().join(format!("mcn-{name}.json"));
        let mcn = serde_json::json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfigNode",
            "metadata": {"name": name},
            "spec": {"node": {"name": name}, "pool": {"name": "worker"},
                     "configVersion": {"desired": "rendered-worker-1"}},
        });
        std::fs::write(&file, mcn.to_string()).unwrap();
        file
    };
    let own = run(
        &server,
        &node,
        &["create", "-f", object("worker-0").to_str().unwrap()],
    );
    assert!(own.status.success());
    // A patch (kubectl reads the object first, then PATCHes it: an UPDATE to admission).
    let patch = [
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"pool":{"name":"infra"}}}"#,
    ];
    let own = [&["patch", "machineconfignode", "worker-0"][..], &patch].concat();
    assert!(run(&server, &node, &own).status.success());
    let created = run(
        &server,
        &admin,
        &["create", "-f", object("worker-1").to_str().unwrap()],
    );
    assert!(created.status.success());
    let theirs = [&["patch", "machineconfignode", "worker-1"][..], &patch].concat();
    let denied = run(&server, &node, &theirs);
    assert_eq!(denied.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&denied.stderr).contains(
            "denied request: updates to MCN worker-1 can only be done from the MCN's owner node"
        ),
        "{denied:?}"
    );
    assert!(
        run(
            &server,
            &admin,
            &["delete", "machineconfignode", "worker-1"]
        )
        .status
        .success()
    );

    let other = run(
        &server,
        &node,
        &["create", "-f", object("worker-1").to_str().unwrap()],
    );
    assert_eq!(other.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&other.stderr).trim_end(),
        "Error from server (Forbidden): error when creating \"".to_string()
            + server.dir().join("mcn-worker-1.json").to_str().unwrap()
            + "\": machineconfignodes.machineconfiguration.openshift.io \"worker-1\" is forbidden: \
               ValidatingAdmissionPolicy 'mco-agent-machineconfignode-owner' with binding \
               'mco-agent-machineconfignode-owner' denied request: updates to MCN worker-1 can \
               only be done from the MCN's owner node"
    );
}

/// The test server does not run CEL: it models the shipped policy's rule. The shipped policy
/// must say exactly what is modelled (and be bound, denying).
#[test]
fn the_shipped_machine_config_node_policy_is_the_one_the_test_server_models() {
    let name = "mco-agent-machineconfignode-owner";
    let policy = shipped::object("ValidatingAdmissionPolicy", name).unwrap();
    let spec = &policy["spec"];
    assert_eq!(
        spec["matchConditions"][0]["expression"],
        "'system:nodes' in request.userInfo.groups"
    );
    assert_eq!(
        spec["validations"][0]["expression"],
        "request.userInfo.username == 'system:node:' + object.metadata.name"
    );
    assert_eq!(
        spec["validations"][0]["messageExpression"],
        r"'updates to MCN ' + string(object.metadata.name) + ' can only be done from the MCN\'s owner node'"
    );
    let rules = &spec["matchConstraints"]["resourceRules"][0];
    assert_eq!(rules["operations"], serde_json::json!(["CREATE", "UPDATE"]));
    assert_eq!(
        rules["resources"],
        serde_json::json!(["machineconfignodes", "machineconfignodes/status"])
    );
    let binding = shipped::object("ValidatingAdmissionPolicyBinding", name).unwrap();
    assert_eq!(binding["spec"]["policyName"], name);
    assert_eq!(
        binding["spec"]["validationActions"],
        serde_json::json!(["Deny"])
    );
}
