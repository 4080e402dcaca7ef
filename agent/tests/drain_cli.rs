//! The agent's `drain` and `uncordon` commands against the Kubernetes API test server: a
//! blocking PodDisruptionBudget named in the error, the drain once it frees up, the uncordon,
//! and a missing kubeconfig named. (The drain itself is `mco-kube`'s, tested in
//! `mco-kube/tests/cluster_drain.rs`.)

use std::process::Command;

use mco_test_support::apiserver::{Target, TestApiServer, fixtures};
use serde_json::{Value, json};

const NODE: &str = "worker-0";

fn cluster() -> TestApiServer {
    let server = TestApiServer::start().unwrap();
    server.seed(fixtures::node(NODE)).unwrap();
    server.seed(fixtures::node("worker-1")).unwrap();
    server.seed(fixtures::namespace("apps")).unwrap();
    server
}

fn pod_names(server: &TestApiServer, node: &str) -> Vec<String> {
    let mut names: Vec<String> = server
        .list("pods", None)
        .iter()
        .filter(|p| p["spec"]["nodeName"] == node)
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

fn node(server: &TestApiServer) -> Value {
    server.get("nodes", None, NODE).unwrap()
}

fn agent(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mco-agent"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn drain_and_uncordon_commands() {
    let server = cluster();
    server
        .seed(fixtures::pod("apps", "web-1", NODE, &[("app", "web")]))
        .unwrap();
    server
        .seed(fixtures::pod("apps", "batch", NODE, &[]))
        .unwrap();
    server
        .seed(fixtures::pdb(
            "apps",
            "web",
            &[("app", "web")],
            json!({"minAvailable": 1}),
        ))
        .unwrap();
    let kubeconfig = server.kubeconfig().to_str().unwrap().to_string();

    let blocked = agent(&[
        "drain",
        "--node-name",
        NODE,
        "--kubeconfig",
        &kubeconfig,
        "--timeout",
        "2s",
    ]);
    let stderr = String::from_utf8_lossy(&blocked.stderr);
    assert_eq!(blocked.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("pod apps/web-1: eviction refused by PodDisruptionBudget \"web\""),
        "{stderr}"
    );
    assert_eq!(pod_names(&server, NODE), ["web-1"]);

    server
        .patch(
            "poddisruptionbudgets",
            Some("apps"),
            "web",
            &json!({"spec": {"minAvailable": 0}}),
            Target::Main,
        )
        .unwrap();
    let drained = agent(&[
        "drain",
        "--node-name",
        NODE,
        "--kubeconfig",
        &kubeconfig,
        "--timeout",
        "20s",
    ]);
    let stdout = String::from_utf8_lossy(&drained.stdout);
    assert!(
        drained.status.success(),
        "{}",
        String::from_utf8_lossy(&drained.stderr)
    );
    assert!(
        stdout.contains("evicted pod apps/web-1")
            && stdout.contains(&format!("node/{NODE} drained")),
        "{stdout}"
    );
    assert_eq!(node(&server)["spec"]["unschedulable"], true);

    let uncordoned = agent(&["uncordon", "--node-name", NODE, "--kubeconfig", &kubeconfig]);
    assert!(
        uncordoned.status.success(),
        "{}",
        String::from_utf8_lossy(&uncordoned.stderr)
    );
    assert!(node(&server)["spec"].get("unschedulable").is_none());

    let missing = agent(&[
        "drain",
        "--node-name",
        NODE,
        "--kubeconfig",
        "/nonexistent/kubeconfig",
    ]);
    assert_eq!(missing.status.code(), Some(65));
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("kubeconfig /nonexistent/kubeconfig")
    );
}

/// An API server that cannot be reached: the drain ends with the cause, not "timed out".
#[test]
fn an_unreachable_api_server_is_the_cause_said() {
    let server = cluster();
    let text = std::fs::read_to_string(server.kubeconfig()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, text).unwrap();
    drop(server);
    let out = agent(&[
        "drain",
        "--node-name",
        NODE,
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--timeout",
        "2s",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.starts_with(&format!("error: failed to drain node {NODE} after 2s: "))
            && stderr.contains("timed out; last error: ")
            && stderr
                .lines()
                .next()
                .unwrap()
                .ends_with("connection refused"),
        "{stderr}"
    );
    // uncordon too: bounded by its --timeout (it retried for 90 s, silently, before it had one)
    let out = agent(&[
        "uncordon",
        "--node-name",
        NODE,
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--timeout",
        "2s",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let first = stderr.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("error: ") && first.ends_with("connection refused"),
        "{stderr}"
    );
}
