//! Crash safety (needs `--features failpoints`; `tests/run.sh` runs it so): the agent is killed
//! with SIGKILL at every step of a rebootless update and of a reboot update
//! (`FAILPOINTS=<point>=return(kill)` makes it kill itself there), then started again. Every
//! time, no managed file is ever half-written, and the node converges to the desired config
//! with a status file, `currentconfig` and (with a cluster) the Node's annotations that agree.

#![cfg(feature = "failpoints")]

mod common;
mod daemon_env;
mod os_env;

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use daemon_env::{Node, done_in, machine_config, secs};
use mco_agent::cluster::annotations::{CURRENT_CONFIG, REASON, STATE};

const FILE_A: &str = "/etc/nmstate/openshift/a.yaml";
const FILE_B: &str = "/etc/containers/policy.json";

fn config(version: u32, kargs: &[&str]) -> String {
    machine_config(
        "00-base",
        &[
            (FILE_A, &format!("a: {version}\n")),
            (FILE_B, &format!("{{\"v\": {version}}}\n")),
        ],
        kargs,
    )
}

/// Starts the agent with `point` armed and waits for it to kill itself there.
async fn crash_at(node: &mut Node, point: &str) {
    node.start_agent(&[("FAILPOINTS", &format!("{point}=return(kill)"))]);
    let status = node.wait_agent_exit(secs(60)).await;
    assert_eq!(
        status.signal(),
        Some(9),
        "{point}: the agent did not die by SIGKILL ({status:?})\n{}",
        node.logs()
    );
}

/// Every managed file holds one whole version or the other (never a mix or a fragment).
fn assert_whole(node: &Node, versions: &[u32], point: &str) {
    let a = node.read(FILE_A);
    let b = node.read(FILE_B);
    let whole_a = versions
        .iter()
        .any(|v| a.as_deref() == Some(format!("a: {v}\n").as_str()));
    let whole_b = versions
        .iter()
        .any(|v| b.as_deref() == Some(format!("{{\"v\": {v}}}\n").as_str()));
    assert!(
        whole_a && whole_b,
        "{point}: partially written files: {a:?} {b:?}\n{}",
        node.logs()
    );
}

/// The status, `currentconfig`, the annotations and the files agree on `name` at `version`.
fn assert_converged(node: &Node, name: &str, version: u32, point: &str) {
    if node.cluster.is_some() {
        assert_eq!(
            node.annotation(CURRENT_CONFIG).as_deref(),
            Some(name),
            "{point}"
        );
        assert_eq!(node.annotation(STATE).as_deref(), Some("Done"), "{point}");
        assert_eq!(node.annotation(REASON).as_deref(), Some(""), "{point}");
    }
    assert_whole(node, &[version], point);
    let current = node
        .read("/etc/machine-config-daemon/currentconfig")
        .unwrap();
    assert!(
        current.contains(&format!("\"name\":\"{name}\"")),
        "{point}: currentconfig is not {name}"
    );
    assert!(
        !node
            .path("/etc/machine-config-daemon/mco-agent-update.json")
            .exists(),
        "{point}: update record left"
    );
}

const REBOOTLESS_POINTS: &[&str] = &[
    "engine::recorded",
    "engine::writing",
    "engine::apply-midway",
    "engine::written",
    "engine::post-actions",
    "engine::committed",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_every_step_of_a_rebootless_update_it_converges() {
    let mut node = Node::new(&[("00-base.yaml", &config(0, &[]))]).await;
    node.start_agent(&[]);
    node.wait_status("provisioned", secs(30), done_in(&node.rendered_name()))
        .await;
    node.kill_agent().await;
    for (i, point) in REBOOTLESS_POINTS.iter().enumerate() {
        let version = i as u32 + 1;
        node.write_manifest("00-base.yaml", &config(version, &[]));
        let name = node.rendered_name();
        crash_at(&mut node, point).await;
        assert_whole(&node, &[version - 1, version], point);
        node.start_agent(&[]);
        node.wait_status(point, secs(60), done_in(&name)).await;
        node.kill_agent().await;
        assert_converged(&node, &name, version, point);
    }
    assert_eq!(node.logind.reboots(), 0);
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_while_rolling_back_it_rolls_back_again_then_converges() {
    let mut node = Node::new(&[("00-base.yaml", &config(0, &[]))]).await;
    node.start_agent(&[]);
    node.wait_status("provisioned", secs(30), done_in(&node.rendered_name()))
        .await;
    node.kill_agent().await;
    node.write_manifest("00-base.yaml", &config(1, &[]));
    let name = node.rendered_name();
    crash_at(&mut node, "engine::apply-midway").await;
    // The restart rolls back; killed in the middle of that, and again after the files.
    crash_at(&mut node, "engine::rolling-back").await;
    assert_whole(&node, &[0, 1], "rolling-back");
    crash_at(&mut node, "engine::rolled-back-files").await;
    assert_whole(&node, &[0], "rolled-back-files");
    node.start_agent(&[]);
    node.wait_status("converged", secs(60), done_in(&name))
        .await;
    node.kill_agent().await;
    assert_converged(&node, &name, 1, "after the rollbacks");
    node.stop().await;
}

const REBOOT_POINTS: &[&str] = &[
    "engine::recorded",
    "engine::drained",
    "engine::writing",
    "engine::apply-midway",
    "engine::written",
    "engine::os-cleaned",
    "engine::os-rebased",
    "engine::os-kargs",
    "engine::os-done",
    "engine::reboot-recorded",
    "engine::reboot-requested",
];

/// Runs the agent until it asks for a reboot, kills it, reboots.
async fn until_rebooted(node: &mut Node, point: &str) {
    let before = node.logind.reboots();
    node.start_agent(&[]);
    let deadline = std::time::Instant::now() + secs(60);
    while node.logind.reboots() == before {
        assert!(
            std::time::Instant::now() < deadline,
            "{point}: no reboot requested\n{}",
            node.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    node.kill_agent().await;
    node.reboot();
}

/// With a cluster: the test sets `desiredConfig` as the node controller would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_every_step_of_a_reboot_update_it_converges() {
    let mut node = Node::new(&[("00-base.yaml", &config(0, &[]))])
        .await
        .with_cluster();
    node.start_agent(&[]);
    let base = node.target_rendered().await;
    node.wait_status("provisioned", secs(30), done_in(&base))
        .await;
    node.kill_agent().await;
    let mut version = 0;
    let mut points: Vec<(&str, bool)> = REBOOT_POINTS.iter().map(|p| (*p, false)).collect();
    points.extend([("engine::verifying", true), ("engine::committed", true)]);
    for (point, after_reboot) in points {
        version += 1;
        let karg = format!("mco.crash={version}");
        node.write_manifest("00-base.yaml", &config(version, &[&karg]));
        let name = node.target_rendered().await;
        if after_reboot {
            until_rebooted(&mut node, point).await;
        }
        crash_at(&mut node, point).await;
        assert_whole(&node, &[version - 1, version], point);
        if !after_reboot {
            // A kill after the reboot was requested may or may not have been followed by it.
            until_rebooted(&mut node, point).await;
        }
        node.start_agent(&[]);
        node.wait_status(point, secs(60), done_in(&name)).await;
        node.wait_annotations(point, secs(30), "Done", Some(&name))
            .await;
        node.kill_agent().await;
        assert_converged(&node, &name, version, point);
        let options = node.os.deployments()[0].options.clone();
        assert!(options.contains(&karg), "{point}: {karg} not in {options}");
    }
    node.stop().await;
}
