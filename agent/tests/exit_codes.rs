//! docs/agent.md's table of exit codes, one test per row: a command that ends with that
//! outcome, as a person or a script runs it. The table and these tests list the same codes.

mod common;
mod daemon_env;
mod os_env;

use std::fs;
use std::os::unix::process::CommandExt;
use std::process::Stdio;

use common::{agent, examples_dir, run, seed_root, text};

fn example(name: &str) -> String {
    examples_dir().join(name).display().to_string()
}

/// The codes this file tests, one per row of the table.
const TESTED: [i32; 9] = [0, 1, 2, 3, 4, 64, 65, 75, 77];

/// A root the examples apply to, with 00-worker-base applied.
fn applied_root() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    seed_root(dir.path());
    let root = dir.path().display().to_string();
    let (out, err, code) = text(&run(&[
        "once-from",
        &example("00-worker-base.yaml"),
        "--root",
        &root,
        "--skip-os",
        "--skip-reboot",
    ]));
    assert_eq!(code, 0, "{out}{err}");
    (dir, root)
}

#[test]
fn the_documented_table_has_the_tested_codes() {
    let doc = fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/agent.md")).unwrap();
    let table = doc
        .split("## Exit codes")
        .nth(1)
        .expect("docs/agent.md has an Exit codes section");
    let codes: Vec<i32> = table
        .lines()
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| l.strip_prefix("| ")?.split(' ').next()?.parse().ok())
        .collect();
    assert_eq!(codes, TESTED);
}

#[test]
fn code_0_success() {
    let (_dir, root) = applied_root();
    let (out, err, code) = text(&run(&[
        "validate",
        "--config",
        &example("00-worker-base.yaml"),
        "--root",
        &root,
    ]));
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
}

#[test]
fn code_1_the_node_is_not_as_wanted() {
    let (dir, root) = applied_root();
    fs::write(dir.path().join("etc/chrony.conf"), "edited by hand\n").unwrap();
    let (out, _, code) = text(&run(&[
        "validate",
        "--config",
        &example("00-worker-base.yaml"),
        "--root",
        &root,
    ]));
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("content mismatch for file \"/etc/chrony.conf\""),
        "{out}"
    );
}

#[test]
fn code_2_unreconcilable() {
    let dir = tempfile::tempdir().unwrap();
    let new = dir.path().join("fips.yaml");
    let base = fs::read_to_string(example("00-worker-base.yaml")).unwrap();
    fs::write(&new, base.replace("spec:\n", "spec:\n  fips: true\n")).unwrap();
    let (out, err, code) = text(&run(&[
        "diff",
        &example("00-worker-base.yaml"),
        new.to_str().unwrap(),
    ]));
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.starts_with("unreconcilable: "), "{out}");
}

#[test]
fn code_3_the_command_could_not_do_its_work() {
    let (_dir, root) = applied_root();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/config/worker", closed.local_addr().unwrap());
    drop(closed);
    let (out, err, code) = text(&run(&[
        "once-from",
        &url,
        "--insecure-http",
        "--root",
        &root,
        "--skip-reboot",
    ]));
    assert_eq!(code, 3, "{out}{err}");
    assert!(err.contains(&format!("error: cannot reach {url}")), "{err}");
}

#[test]
fn code_4_not_confirmed() {
    let (_dir, root) = applied_root();
    let (out, err, code) = text(&run(&[
        "once-from",
        &example("01-worker-files-only.yaml"),
        "--root",
        &root,
        "--skip-os",
        "--skip-reboot",
    ]));
    assert_eq!(code, 0, "{out}{err}");
    let rollback = agent()
        .args(["rollback", "--root", &root])
        .stdin(Stdio::null())
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let (out, err, code) = text(&rollback);
    assert_eq!(code, 4, "{out}{err}");
    assert!(err.contains("pass --yes"), "{err}");
    assert!(err.contains("nothing was changed"), "{err}");
}

#[test]
fn code_64_usage() {
    let (out, err, code) = text(&run(&["validate", "--config-file", "x.yaml"]));
    assert_eq!(code, 64, "{out}{err}");
    assert!(
        err.starts_with("error: unexpected argument '--config-file'"),
        "{err}"
    );
}

#[test]
fn code_65_invalid_input() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.yaml");
    let (out, err, code) = text(&run(&[
        "validate",
        "--config",
        missing.to_str().unwrap(),
        "--root",
        dir.path().to_str().unwrap(),
    ]));
    assert_eq!(code, 65, "{out}{err}");
    assert_eq!(
        err,
        format!(
            "error: reading {}: no such file or directory\n",
            missing.display()
        )
    );
}

/// `start` stops to be restarted when the cluster's enabled feature gates change (the unit's
/// `RestartForceExitStatus=75` brings it back at once). Against the API test server with the
/// shipped node rules; the gate is flipped by an admin's status write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_75_restart_for_changed_feature_gates() {
    use daemon_env::{Node, machine_config, secs};
    use mco_test_support::apiserver::Target;
    use serde_json::json;

    let base = machine_config(
        "00-base",
        &[("/etc/nmstate/openshift/base.yaml", "base: 1\n")],
        &[],
    );
    let mut node = Node::new(&[("00-base.yaml", &base)]).await.with_cluster();
    let gates = |enabled: &[&str]| {
        json!({"featureGates": [{"version": "4.18.3",
            "enabled": enabled.iter().map(|n| json!({"name": n})).collect::<Vec<_>>(),
            "disabled": []}]})
    };
    node.api()
        .seed(
            json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
                     "metadata": {"name": "version"},
                     "status": {"desired": {"version": "4.18.3"}}}),
        )
        .unwrap();
    node.api()
        .seed(
            json!({"apiVersion": "config.openshift.io/v1", "kind": "FeatureGate",
                     "metadata": {"name": "cluster"}, "status": gates(&[])}),
        )
        .unwrap();
    let rendered = node.rendered_name();
    node.start_agent(&[]);
    node.set_desired(&rendered);
    node.wait_annotations("the first config", secs(30), "Done", Some(&rendered))
        .await;
    node.api()
        .patch(
            "featuregates",
            None,
            "cluster",
            &json!({"status": gates(&["ImageModeStatusReporting"])}),
            Target::Status,
        )
        .unwrap();
    let status = node.wait_agent_exit(secs(60)).await;
    assert_eq!(status.code(), Some(75), "{}", node.logs());
    assert!(
        node.logs()
            .contains("restarting: the cluster's feature gates changed"),
        "{}",
        node.logs()
    );
}

#[test]
fn code_77_permission_refused() {
    let (dir, root) = applied_root();
    let before = common::snapshot(dir.path());
    // as an unprivileged user (nobody): the root's etc is root's
    let out = agent()
        .args(["once-from", &example("01-worker-files-only.yaml")])
        .args(["--root", &root, "--skip-os", "--skip-reboot"])
        .env_remove("RUST_LOG")
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let (out, err, code) = text(&out);
    assert_eq!(code, 77, "{out}{err}");
    assert_eq!(
        err,
        format!(
            "error: needs root; nothing was changed ({root}/etc is not writable by this user)\n\
             hint: run it as root (e.g. with sudo)\n"
        )
    );
    assert_eq!(common::snapshot(dir.path()), before, "the root changed");
}
