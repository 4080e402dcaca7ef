//! Fidelity of the Kubernetes API test server, checked with the real `kubectl` (installed by
//! tests/setup.sh): whatever kubectl needs and the server lacks is a server bug.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use mco_test_support::apiserver::{TestApiServer, fixtures};
use serde_json::{Value, json};

fn kubectl(server: &TestApiServer, args: &[&str]) -> Output {
    let cache = server.dir().join("kube-cache");
    let output = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .arg("--cache-dir")
        .arg(&cache)
        .args(args)
        .env("HOME", server.dir())
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

fn kubectl_ok(server: &TestApiServer, args: &[&str]) -> String {
    let output = kubectl(server, args);
    assert!(output.status.success(), "kubectl {args:?} failed");
    String::from_utf8(output.stdout).unwrap()
}

fn node_annotation(server: &TestApiServer, node: &str, key: &str) -> Option<String> {
    server
        .get("nodes", None, node)?
        .pointer(&format!("/metadata/annotations/{}", key.replace('/', "~1")))
        .and_then(Value::as_str)
        .map(String::from)
}

fn unschedulable(server: &TestApiServer, node: &str) -> bool {
    server
        .get("nodes", None, node)
        .unwrap()
        .pointer("/spec/unschedulable")
        == Some(&json!(true))
}

#[test]
fn get_annotate_cordon_uncordon_nodes() {
    let server = TestApiServer::start().unwrap();
    server.seed(fixtures::node("n1")).unwrap();
    server.seed(fixtures::node("n2")).unwrap();

    let list: Value =
        serde_json::from_str(&kubectl_ok(&server, &["get", "nodes", "-o", "json"])).unwrap();
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["n1", "n2"]);

    kubectl_ok(
        &server,
        &[
            "annotate",
            "node",
            "n1",
            "machineconfiguration.openshift.io/state=Working",
        ],
    );
    assert_eq!(
        node_annotation(&server, "n1", "machineconfiguration.openshift.io/state").as_deref(),
        Some("Working")
    );
    // Without --overwrite kubectl refuses to change an existing annotation (it checks the object).
    assert!(
        !kubectl(
            &server,
            &[
                "annotate",
                "node",
                "n1",
                "machineconfiguration.openshift.io/state=Done"
            ]
        )
        .status
        .success()
    );
    kubectl_ok(
        &server,
        &[
            "annotate",
            "--overwrite",
            "node",
            "n1",
            "machineconfiguration.openshift.io/state=Done",
        ],
    );
    assert_eq!(
        node_annotation(&server, "n1", "machineconfiguration.openshift.io/state").as_deref(),
        Some("Done")
    );
    kubectl_ok(
        &server,
        &[
            "annotate",
            "node",
            "n1",
            "machineconfiguration.openshift.io/state-",
        ],
    );
    assert_eq!(
        node_annotation(&server, "n1", "machineconfiguration.openshift.io/state"),
        None
    );

    kubectl_ok(&server, &["cordon", "n1"]);
    assert!(unschedulable(&server, "n1"));
    let table = kubectl_ok(&server, &["get", "nodes"]);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("n1") && l.contains("Ready,SchedulingDisabled")),
        "{table}"
    );
    let cordoned = kubectl_ok(
        &server,
        &[
            "get",
            "nodes",
            "--field-selector",
            "spec.unschedulable=true",
            "-o",
            "name",
        ],
    );
    assert_eq!(cordoned.trim(), "node/n1");
    kubectl_ok(&server, &["uncordon", "n1"]);
    assert!(!unschedulable(&server, "n1"));

    kubectl_ok(&server, &["label", "node", "n2", "mco.example/pool=infra"]);
    let selected = kubectl_ok(
        &server,
        &[
            "get",
            "nodes",
            "-l",
            "mco.example/pool in (infra,other)",
            "-o",
            "name",
        ],
    );
    assert_eq!(selected.trim(), "node/n2");
    let missing = kubectl(&server, &["get", "node", "nope"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("nodes \"nope\" not found"));
}

const MACHINE_CONFIGS: &str = r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 99-worker-motd
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.2.0
    storage:
      files:
      - path: /etc/motd
        mode: 420
        contents:
          source: data:,hello
---
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: worker
spec:
  machineConfigSelector:
    matchLabels:
      machineconfiguration.openshift.io/role: worker
  nodeSelector:
    matchLabels:
      node-role.kubernetes.io/worker: ""
"#;

#[test]
fn create_get_patch_machine_configs() {
    let server = TestApiServer::start().unwrap();
    let file = server.dir().join("mc.yaml");
    std::fs::write(&file, MACHINE_CONFIGS).unwrap();
    let created = kubectl_ok(&server, &["create", "-f", file.to_str().unwrap()]);
    assert!(
        created.contains("machineconfig.machineconfiguration.openshift.io/99-worker-motd created"),
        "{created}"
    );
    assert!(
        created.contains("machineconfigpool.machineconfiguration.openshift.io/worker created"),
        "{created}"
    );

    let mcs = kubectl_ok(&server, &["get", "mc"]);
    assert!(
        mcs.lines()
            .any(|l| l.starts_with("99-worker-motd") && l.contains("3.2.0")),
        "{mcs}"
    );
    let mcps = kubectl_ok(&server, &["get", "mcp"]);
    assert!(mcps.lines().any(|l| l.starts_with("worker")), "{mcps}");

    let again = kubectl(&server, &["create", "-f", file.to_str().unwrap()]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));

    kubectl_ok(
        &server,
        &[
            "patch",
            "mcp",
            "worker",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"paused":true}}"#,
        ],
    );
    let pool = server.get("machineconfigpools", None, "worker").unwrap();
    assert_eq!(pool["spec"]["paused"], true);
    assert_eq!(pool["metadata"]["generation"], 2);
    kubectl_ok(
        &server,
        &[
            "patch",
            "mcp",
            "worker",
            "--subresource",
            "status",
            "--type",
            "merge",
            "-p",
            r#"{"status":{"machineCount":2,"configuration":{"name":"rendered-worker-0123"}}}"#,
        ],
    );
    let mcps = kubectl_ok(&server, &["get", "mcp", "worker"]);
    assert!(mcps.contains("rendered-worker-0123"), "{mcps}");
    let config = kubectl_ok(
        &server,
        &[
            "get",
            "mcp",
            "worker",
            "-o",
            "jsonpath={.status.configuration.name} {.metadata.generation}",
        ],
    );
    assert_eq!(config, "rendered-worker-0123 2");
    kubectl_ok(&server, &["delete", "mc", "99-worker-motd"]);
    assert!(
        server
            .get("machineconfigs", None, "99-worker-motd")
            .is_none()
    );
}

/// A node with a DaemonSet pod, an emptyDir pod and two web pods; a third web pod on
/// another node. `budget` is the web pods' PDB.
fn drain_cluster(budget: Value) -> TestApiServer {
    let server = TestApiServer::start().unwrap();
    for node in ["n1", "n2"] {
        server.seed(fixtures::node(node)).unwrap();
    }
    server.seed(fixtures::namespace("apps")).unwrap();
    server.seed(fixtures::daemonset("apps", "agent")).unwrap();
    server
        .seed(fixtures::daemonset_pod("apps", "agent-n1", "n1", "agent"))
        .unwrap();
    server
        .seed(fixtures::emptydir_pod(
            "apps",
            "cache",
            "n1",
            &[("app", "cache")],
        ))
        .unwrap();
    server
        .seed(fixtures::pod("apps", "web-1", "n1", &[("app", "web")]))
        .unwrap();
    server
        .seed(fixtures::pod("apps", "web-2", "n1", &[("app", "web")]))
        .unwrap();
    server
        .seed(fixtures::pod("apps", "web-3", "n2", &[("app", "web")]))
        .unwrap();
    server
        .seed(fixtures::pdb("apps", "web", &[("app", "web")], budget))
        .unwrap();
    server
}

fn pods_on(server: &TestApiServer, node: &str) -> Vec<String> {
    server
        .list("pods", None)
        .iter()
        .filter(|p| p["spec"]["nodeName"] == node)
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn drain_with_an_allowing_budget() {
    let server = drain_cluster(json!({"minAvailable": 1}));
    server.set_pod_termination_delay(Duration::from_millis(1500));

    let refused = kubectl(&server, &["drain", "n1", "--timeout=20s"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("DaemonSet-managed") && stderr.contains("local storage"),
        "{stderr}"
    );

    let started = Instant::now();
    kubectl_ok(
        &server,
        &[
            "drain",
            "n1",
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--timeout=60s",
        ],
    );
    // kubectl waited for the graceful termination of the evicted pods.
    assert!(started.elapsed() >= Duration::from_millis(1500));
    assert!(unschedulable(&server, "n1"));
    assert_eq!(pods_on(&server, "n1"), ["agent-n1"]);
    assert_eq!(pods_on(&server, "n2"), ["web-3"]);
    let evictions = server
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/eviction") && r.status == 201)
        .count();
    assert_eq!(
        evictions, 3,
        "web-1, web-2 and cache are evicted, not deleted"
    );
    kubectl_ok(&server, &["uncordon", "n1"]);
    assert!(!unschedulable(&server, "n1"));
}

#[test]
fn drain_blocked_by_a_budget_times_out() {
    let server = drain_cluster(json!({"minAvailable": 3}));
    let pdb = server
        .get("poddisruptionbudgets", Some("apps"), "web")
        .unwrap();
    assert_eq!(pdb["status"]["disruptionsAllowed"], 0);
    assert_eq!(pdb["status"]["currentHealthy"], 3);

    let started = Instant::now();
    let output = kubectl(
        &server,
        &[
            "drain",
            "n1",
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--timeout=8s",
        ],
    );
    assert!(!output.status.success(), "drain must fail on its timeout");
    assert!(started.elapsed() >= Duration::from_secs(8));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{stderr}"
    );
    assert!(stderr.contains("global timeout reached"), "{stderr}");
    // Retried every 5 s: two rounds of 429 for each web pod within 8 s.
    let blocked = server
        .requests()
        .iter()
        .filter(|r| r.path == "/api/v1/namespaces/apps/pods/web-1/eviction" && r.status == 429)
        .count();
    assert!(
        blocked >= 2,
        "web-1 eviction attempts answered 429: {blocked}"
    );
    // The emptyDir pod was not protected and is gone; the web pods stay.
    let mut left = pods_on(&server, "n1");
    left.sort();
    assert_eq!(left, ["agent-n1", "web-1", "web-2"]);
    assert!(unschedulable(&server, "n1"));
}

#[test]
fn binary_serves_seeded_manifests_over_http() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let seed = dir.path().join("seed.yaml");
    let node = serde_json::to_string(&fixtures::node("seeded")).unwrap();
    std::fs::write(&seed, format!("{node}\n---\n{MACHINE_CONFIGS}")).unwrap();
    let kubeconfig = dir.path().join("admin.kubeconfig");
    let node_kubeconfig = dir.path().join("node.kubeconfig");
    struct KillOnDrop(std::process::Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            // Already gone when the test got as far as stopping it.
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let child = Command::new(env!("CARGO_BIN_EXE_mco-test-apiserver"))
        .args(["--listen", "127.0.0.1:0", "--http", "--seed"])
        .arg(&seed)
        .arg("--kubeconfig-out")
        .arg(&kubeconfig)
        .arg("--user-kubeconfig")
        .arg(format!("system:node:seeded={}", node_kubeconfig.display()))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let mut url = String::new();
    std::io::BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    for config in [&kubeconfig, &node_kubeconfig] {
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(config)
            .arg("--cache-dir")
            .arg(dir.path().join("cache"))
            .args(["get", "nodes,mc,mcp", "-o", "name"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let names = String::from_utf8(out.stdout).unwrap();
        assert_eq!(
            names.lines().collect::<Vec<_>>(),
            [
                "node/seeded",
                "machineconfig.machineconfiguration.openshift.io/99-worker-motd",
                "machineconfigpool.machineconfiguration.openshift.io/worker"
            ]
        );
    }
    let status = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.0.wait().unwrap();
    assert!(
        exit.success(),
        "the server exits cleanly on SIGTERM: {exit}"
    );
}
