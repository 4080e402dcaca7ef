//! `mco-agent recover` against a running agent in a cluster (the API test server, the companion
//! serving the pool, the rpm-ostree stand-in; see `daemon_env`): a drifted Degraded node is
//! cleared without a reboot, a node stuck on an update that cannot complete is re-targeted to
//! the config it runs, and nothing changes without a confirmation.

mod common;
mod daemon_env;
mod os_env;

use std::process::{Output, Stdio};

use daemon_env::{NODE, Node, machine_config, secs};
use machine_config::mco::annotations::{DESIRED_CONFIG, REASON};

const BASE_FILE: &str = "/etc/nmstate/openshift/base.yaml";
const FORCE_FILE: &str = "/run/machine-config-daemon-force";

/// A node in the cluster that applied the base config.
async fn provisioned() -> (Node, String) {
    let base = machine_config("00-base", &[(BASE_FILE, "base: 1\n")], &[]);
    let mut node = Node::new(&[("00-base.yaml", &base)]).await.with_cluster();
    let name = node.rendered_name();
    node.start_agent(&[]);
    node.set_desired(&name);
    node.wait_annotations("the first application", secs(30), "Done", Some(&name))
        .await;
    (node, name)
}

/// Runs `mco-agent recover` for the node with `extra` arguments, stdin closed.
fn recover(node: &Node, extra: &[&str]) -> (String, i32) {
    let (_, kubeconfig) = node.cluster.as_ref().unwrap();
    let out: Output = common::agent()
        .arg("recover")
        .arg("--root")
        .arg(&node.root)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--node-name", NODE])
        .arg("--boot-id-file")
        .arg(&node.boot_file)
        .args(extra)
        .env("DBUS_SYSTEM_BUS_ADDRESS", node.os.bus.address())
        .env_remove("RUST_LOG")
        .env_remove("INVOCATION_ID")
        .env_remove("JOURNAL_STREAM")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr, code) = common::text(&out);
    (format!("{stdout}{stderr}"), code)
}

fn recover_events(node: &Node) -> Vec<String> {
    node.api()
        .list("events", None)
        .into_iter()
        .filter(|e| e["reason"] == "RecoverRequested")
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drifted_degraded_node_is_reapplied_without_a_reboot() {
    let (node, base) = provisioned().await;
    let (out, code) = recover(&node, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("nothing to recover: the node is Done in {base}")),
        "{out}"
    );

    std::fs::write(node.path(BASE_FILE), "edited by hand\n").unwrap();
    node.wait_annotations("drift", secs(10), "Degraded", Some(&base))
        .await;

    // Without --yes and without a terminal: the remedy is shown, nothing changes.
    let (out, code) = recover(&node, &[]);
    // not confirmed: nothing changed (docs/agent.md, "Exit codes")
    assert_eq!(code, 4, "{out}");
    assert!(
        out.contains(&format!("content mismatch for file \"{BASE_FILE}\"")),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "Remedy: re-apply {base} over what is on disk (the force file; a reboot only if the plan needs one): the disk differs from {base} (1 mismatch)"
        )),
        "{out}"
    );
    assert!(
        out.contains("not confirmed: no terminal to ask on (run with --yes"),
        "{out}"
    );
    assert!(!node.path(FORCE_FILE).exists());
    assert_eq!(node.read(BASE_FILE).as_deref(), Some("edited by hand\n"));

    let (out, code) = recover(&node, &["--yes", "--wait", "30s"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("Recovered: the node is Done in {base}")),
        "{out}"
    );
    assert_eq!(node.read(BASE_FILE).as_deref(), Some("base: 1\n"));
    assert!(!node.path(FORCE_FILE).exists());
    assert_eq!(node.logind.reboots(), 0);
    let events = recover_events(&node);
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(events[0].starts_with(&format!("mco-agent recover: re-apply {base}")));
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_stuck_on_a_missing_config_is_retargeted_to_the_one_it_runs() {
    let (node, base) = provisioned().await;
    node.set_desired("rendered-worker-gone");
    node.wait_annotations("the failed fetch", secs(30), "Degraded", Some(&base))
        .await;
    let reason = node.annotation(REASON).unwrap();
    assert!(
        reason.starts_with("cannot get the desired config rendered-worker-gone"),
        "{reason}"
    );

    let (out, code) = recover(&node, &["--yes", "--wait", "30s"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "Remedy: re-target the node to {base}, the config it runs (desiredConfig rendered-worker-gone -> {base})"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!("Recovered: the node is Done in {base}")),
        "{out}"
    );
    assert!(!out.contains("no agent runs"), "{out}");
    assert_eq!(node.annotation(DESIRED_CONFIG).as_deref(), Some(&*base));
    assert_eq!(node.annotation(REASON).as_deref(), Some(""));
    assert_eq!(node.logind.reboots(), 0);
    assert_eq!(recover_events(&node).len(), 1);
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_cluster_a_node_cannot_be_retargeted() {
    let (node, base) = provisioned().await;
    node.set_desired("rendered-worker-gone");
    node.wait_annotations("the failed fetch", secs(30), "Degraded", Some(&base))
        .await;
    let (out, code) = recover(&node, &["--no-cluster", "--yes"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("recover cannot help: the update to rendered-worker-gone failed and the disk is still in"),
        "{out}"
    );
    let (out, code) = recover(&node, &["--no-cluster", "--action", "retarget", "--yes"]);
    // no remedy applies: the node stays as it is (docs/agent.md, "Exit codes")
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("the cluster could not be reached"), "{out}");
    assert!(!node.path(FORCE_FILE).exists());
    node.stop().await;
}

/// `mco-agent status` of the node at `node`, human form.
fn status(node: &Node) -> String {
    let out = common::agent()
        .arg("status")
        .arg("--root")
        .arg(&node.root)
        .arg("--sysroot")
        .arg(node.os.sysroot.path())
        .arg("--boot-id-file")
        .arg(&node.boot_file)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let (stdout, stderr, code) = common::text(&out);
    assert_eq!(code, 0, "{stdout}{stderr}");
    stdout
}

/// A failed fetch is in `status` (not only in the log) while the agent runs; once it is gone,
/// `status` says so and that the state is only what it last reported, and `recover --wait`
/// warns that nobody is there to act.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_recover_say_whether_an_agent_runs_and_its_last_failure() {
    let (mut node, base) = provisioned().await;
    let pid = node.last_agent_pid().unwrap();
    node.set_desired("rendered-worker-gone");
    node.wait_annotations("the failed fetch", secs(30), "Degraded", Some(&base))
        .await;
    let text = status(&node);
    assert!(
        text.contains(&format!("Agent:        running (pid {pid}) since ")),
        "{text}"
    );
    assert!(text.contains("State:        Degraded\n"), "{text}");
    assert!(
        text.contains("Last error:   cannot get the desired config rendered-worker-gone from "),
        "{text}"
    );

    node.kill_agent().await;
    let text = status(&node);
    assert!(
        text.contains(&format!("Agent:        not running (pid {pid}, started ")),
        "{text}"
    );
    assert!(
        text.contains("State:        Degraded (as last reported, "),
        "{text}"
    );
    let (out, code) = recover(&node, &["--yes", "--wait", "1s"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("warning: no agent runs on this node to act on it"),
        "{out}"
    );
    node.stop().await;
}
