//! RBAC as the real `kubectl` (installed by tests/setup.sh) sees it on the test server with
//! authorization on: `auth can-i` answers and exit codes, `auth can-i --list`, `auth whoami`,
//! a forbidden `get` (exit code and message), `apply -f` of RBAC objects that changes what a
//! service account may do, impersonation with `--as`, and the binary's credential and audit
//! options.

use std::path::{Path, PathBuf};
use std::process::Output;

use mco_test_support::apiserver::{ServerOptions, TestApiServer, fixtures, read_audit_log};

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

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

struct Cluster {
    server: TestApiServer,
    admin: PathBuf,
    node: PathBuf,
    companion: PathBuf,
}

fn cluster() -> Cluster {
    let server = TestApiServer::start_with(ServerOptions::rbac()).unwrap();
    for node in ["n1", "n2"] {
        server.seed(fixtures::node(node)).unwrap();
    }
    let node = server.dir().join("n1.kubeconfig");
    server.write_node_kubeconfig(&node, "n1").unwrap();
    let companion = server.dir().join("companion.kubeconfig");
    server
        .write_service_account_kubeconfig(&companion, "mco", "companion")
        .unwrap();
    Cluster {
        admin: server.kubeconfig().to_path_buf(),
        server,
        node,
        companion,
    }
}

#[test]
fn can_i_answers_for_a_node() {
    let c = cluster();
    let yes = run(&c.server, &c.node, &["auth", "can-i", "get", "nodes/n1"]);
    assert!(yes.status.success());
    assert_eq!(stdout(&yes), "yes");
    let no = run(&c.server, &c.node, &["auth", "can-i", "get", "nodes/n2"]);
    assert_eq!(no.status.code(), Some(1));
    assert_eq!(
        stdout(&no),
        "no - node 'n1' cannot read 'n2', only its own Node object"
    );
    let status = run(
        &c.server,
        &c.node,
        &["auth", "can-i", "patch", "nodes", "--subresource", "status"],
    );
    assert_eq!(stdout(&status), "yes");
    let mcs = run(
        &c.server,
        &c.node,
        &[
            "auth",
            "can-i",
            "list",
            "machineconfigs.machineconfiguration.openshift.io",
        ],
    );
    assert_eq!((mcs.status.code(), stdout(&mcs).as_str()), (Some(1), "no"));

    let whoami = run(
        &c.server,
        &c.node,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username} {.status.userInfo.groups}",
        ],
    );
    assert_eq!(
        stdout(&whoami),
        r#"system:node:n1 ["system:nodes","system:authenticated"]"#,
        "the kubelet certificate's CN and O"
    );
    let list = run(&c.server, &c.node, &["auth", "can-i", "--list"]);
    assert!(list.status.success());
    assert!(
        stderr(&list).contains(
            "Warning: the list may be incomplete: node authorizer does not support user rule resolution"
        ),
        "{}",
        stderr(&list)
    );
}

#[test]
fn a_forbidden_get_fails_with_the_servers_message() {
    let c = cluster();
    let denied = run(&c.server, &c.node, &["get", "node", "n2"]);
    assert_eq!(denied.status.code(), Some(1));
    assert_eq!(
        stderr(&denied).trim_end(),
        "Error from server (Forbidden): nodes \"n2\" is forbidden: User \"system:node:n1\" cannot \
         get resource \"nodes\" in API group \"\" at the cluster scope: node 'n1' cannot read \
         'n2', only its own Node object"
    );
    let own = run(&c.server, &c.node, &["get", "node", "n1", "-o", "name"]);
    assert_eq!(stdout(&own), "node/n1");
    let listed = run(&c.server, &c.companion, &["get", "nodes"]);
    assert_eq!(listed.status.code(), Some(1));
    assert!(stderr(&listed).contains(
        "nodes is forbidden: User \"system:serviceaccount:mco:companion\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"
    ));
}

const COMPANION_RBAC: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: mco}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "mco:companion"}
rules:
- apiGroups: [machineconfiguration.openshift.io]
  resources: [machineconfigs, machineconfigpools]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list, watch, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "mco:companion"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "mco:companion"}
subjects:
- {kind: ServiceAccount, name: companion, namespace: mco}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: fleetlock, namespace: mco}
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: fleetlock, namespace: mco}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: fleetlock}
subjects:
- {kind: ServiceAccount, name: companion}
"#;

#[test]
fn applying_rbac_objects_changes_what_a_service_account_may_do() {
    let c = cluster();
    let can = |args: &[&str]| {
        let mut all = vec!["auth", "can-i"];
        all.extend_from_slice(args);
        stdout(&run(&c.server, &c.companion, &all))
    };
    assert_eq!(can(&["list", "machineconfigpools"]), "no");
    assert_eq!(can(&["create", "leases", "-n", "mco"]), "no");
    let file = c.server.dir().join("rbac.yaml");
    std::fs::write(&file, COMPANION_RBAC).unwrap();
    let applied = run(
        &c.server,
        &c.admin,
        &["apply", "-f", file.to_str().unwrap()],
    );
    assert!(applied.status.success());
    assert!(stdout(&applied).contains("rolebinding.rbac.authorization.k8s.io/fleetlock created"));
    assert_eq!(can(&["list", "machineconfigpools"]), "yes");
    assert_eq!(can(&["create", "leases", "-n", "mco"]), "yes");
    assert_eq!(can(&["create", "leases", "-n", "default"]), "no");
    assert_eq!(can(&["delete", "leases", "-n", "mco"]), "no");
    assert_eq!(can(&["patch", "nodes/n2"]), "yes");

    let list = stdout(&run(
        &c.server,
        &c.companion,
        &["auth", "can-i", "--list", "-n", "mco"],
    ));
    let rows: Vec<Vec<&str>> = list
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        [
            "Resources",
            "Non-Resource",
            "URLs",
            "Resource",
            "Names",
            "Verbs"
        ]
    );
    assert!(
        rows.contains(&vec![
            "leases.coordination.k8s.io",
            "[]",
            "[]",
            "[get",
            "create",
            "update]"
        ]),
        "{list}"
    );
    assert!(
        rows.contains(&vec![
            "nodes", "[]", "[]", "[get", "list", "watch", "patch]"
        ]),
        "{list}"
    );
    assert!(rows.contains(&vec!["[/healthz]", "[]", "[get]"]), "{list}");

    // The administrator may impersonate; the service account may not.
    let as_node = run(
        &c.server,
        &c.admin,
        &[
            "--as",
            "system:node:n1",
            "--as-group",
            "system:nodes",
            "auth",
            "can-i",
            "get",
            "nodes/n2",
        ],
    );
    assert_eq!(
        stdout(&as_node),
        "no - node 'n1' cannot read 'n2', only its own Node object"
    );
    let refused = run(
        &c.server,
        &c.companion,
        &["--as", "system:node:n1", "get", "node", "n1"],
    );
    assert_eq!(refused.status.code(), Some(1));
    assert!(stderr(&refused).contains(
        "users \"system:node:n1\" is forbidden: User \"system:serviceaccount:mco:companion\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
    ), "{}", stderr(&refused));
}

#[test]
fn the_binary_mints_credentials_and_writes_the_audit() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let seed = path("rbac.yaml");
    std::fs::write(&seed, COMPANION_RBAC).unwrap();
    struct KillOnDrop(std::process::Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            // Already gone when the test got as far as stopping it.
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_mco-test-apiserver"))
        .arg("--rbac")
        .arg("--seed")
        .arg(&seed)
        .arg("--kubeconfig-out")
        .arg(path("admin.kubeconfig"))
        .arg("--node-kubeconfig")
        .arg(format!("n1={}", path("n1.kubeconfig").display()))
        .arg("--serviceaccount-kubeconfig")
        .arg(format!(
            "mco/companion={}",
            path("companion.kubeconfig").display()
        ))
        .arg("--user-kubeconfig")
        .arg(format!("alice={}", path("alice.kubeconfig").display()))
        .arg("--user-groups")
        .arg("alice=mco-admins,qa")
        .arg("--client-ca-out")
        .arg(path("client-ca.crt"))
        .arg("--audit-log")
        .arg(path("audit.jsonl"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let mut url = String::new();
    std::io::BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let kubectl = |kubeconfig: &str, args: &[&str]| {
        let output = std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(path(kubeconfig))
            .arg("--cache-dir")
            .arg(path("cache"))
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout)
            .trim_end()
            .to_string()
    };
    let who = |kubeconfig: &str| {
        kubectl(
            kubeconfig,
            &[
                "auth",
                "whoami",
                "-o",
                "jsonpath={.status.userInfo.username} {.status.userInfo.groups}",
            ],
        )
    };
    assert_eq!(
        who("n1.kubeconfig"),
        r#"system:node:n1 ["system:nodes","system:authenticated"]"#
    );
    assert_eq!(
        who("companion.kubeconfig"),
        r#"system:serviceaccount:mco:companion ["system:serviceaccounts","system:serviceaccounts:mco","system:authenticated"]"#
    );
    assert_eq!(
        who("alice.kubeconfig"),
        r#"alice ["mco-admins","qa","system:authenticated"]"#
    );
    assert_eq!(
        who("admin.kubeconfig"),
        r#"admin ["system:masters","system:authenticated"]"#
    );
    assert_eq!(
        kubectl("companion.kubeconfig", &["get", "mc", "-o", "name"]),
        ""
    );
    assert!(
        std::fs::read_to_string(path("client-ca.crt"))
            .unwrap()
            .contains("BEGIN CERTIFICATE")
    );

    let events = read_audit_log(&path("audit.jsonl")).unwrap();
    let companion: Vec<String> = events
        .iter()
        .filter(|e| {
            e.user == "system:serviceaccount:mco:companion" && e.non_resource_path.is_empty()
        })
        .map(|e| format!("{} {}", e.permission(), e.allowed))
        .collect();
    assert_eq!(
        companion,
        [
            "create selfsubjectreviews.authentication.k8s.io true",
            "list machineconfigs.machineconfiguration.openshift.io true"
        ]
    );
}
