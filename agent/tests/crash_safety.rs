//! Crash safety (needs `--features failpoints`; `tests/run.sh` runs it so): the agent is killed
//! with SIGKILL at every step of a rebootless update and of a reboot update
//! (`FAILPOINTS=<point>=return(kill)` makes it kill itself there), then started again. Every
//! time, no managed file is ever half-written, and the node converges to the desired config
//! with a status file, `currentconfig` and (with a cluster) the Node's annotations that agree,
//! and no temp file left: a kill in the middle of writing a managed file
//! (`engine::temp-written=return(kill@PATH)`, between the temp file and its rename) leaves one,
//! which the restarted agent removes.
//! On a booted sysroot (the booted simulation), an unplanned reboot while OS changes are staged
//! finalization-locked converges too, without a rollback or a Degraded state; so does an
//! update that leaves image mode, killed at each of its failpoints (`leave_image_mode`).

#![cfg(feature = "failpoints")]

mod common;
mod daemon_env;
#[path = "crash_safety/leave_image_mode.rs"]
mod leave_image_mode;
mod os_env;

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use daemon_env::{Node, done_in, machine_config, secs};
use machine_config::mco::annotations::{CURRENT_CONFIG, REASON, STATE};
use mco_agent::os::OsUpdater;

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

/// Starts the agent with `point` armed (`name`, killing there, or a whole `name=action`) and
/// waits for it to kill itself there.
async fn crash_at(node: &mut Node, point: &str) {
    let spec = if point.contains('=') {
        point.to_string()
    } else {
        format!("{point}=return(kill)")
    };
    node.start_agent(&[("FAILPOINTS", &spec)]);
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

/// The temp files of atomic writes anywhere in the node's root (`.<name>.mco-tmp-<pid>-<n>`).
fn temp_files(node: &Node) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![node.root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                dirs.push(entry.path());
            } else if entry.file_name().to_string_lossy().contains(".mco-tmp-") {
                found.push(entry.path());
            }
        }
    }
    found
}

/// The status, `currentconfig`, the annotations and the files agree on `name` at `version`;
/// no temp file of an interrupted write is left.
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
    // The test's own kill of the agent that converged may come in the middle of a write (of
    // the status file, say): the next start removes that one.
    let last = node.last_agent_pid().map(|pid| format!(".mco-tmp-{pid}-"));
    let left: Vec<_> = temp_files(node)
        .into_iter()
        .filter(|p| {
            last.as_ref()
                .is_none_or(|l| !p.to_string_lossy().contains(l))
        })
        .collect();
    assert_eq!(
        left,
        Vec::<std::path::PathBuf>::new(),
        "{point}: temp files left"
    );
}

/// Killed in the middle of writing a managed file: its temp file is written, not yet renamed.
const TEMP_WRITTEN: &str = "engine::temp-written=return(kill@/etc/containers/policy.json)";

const REBOOTLESS_POINTS: &[&str] = &[
    "engine::recorded",
    "engine::writing",
    TEMP_WRITTEN,
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
        if *point == TEMP_WRITTEN {
            let left = temp_files(&node);
            assert!(
                left.iter().any(|p| p
                    .to_string_lossy()
                    .contains("/etc/containers/.policy.json.mco-tmp-")),
                "{point}: no temp file left by the kill: {left:?}"
            );
        }
        node.start_agent(&[]);
        node.wait_status(point, secs(60), done_in(&name)).await;
        node.kill_agent().await;
        assert_converged(&node, &name, version, point);
        if *point == TEMP_WRITTEN {
            assert!(
                node.logs()
                    .contains("removed a temp file left by an interrupted write"),
                "{point}\n{}",
                node.logs()
            );
        }
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

/// Whether process `pid` is alive (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    })
}

/// `return(pause)`: the agent writes the failpoint's name to `$FAILPOINTS_PAUSED` and stays at
/// that step (the VM power-cut scenarios cut the power then); killed there, it converges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_at_a_failpoint_it_says_where_and_stays_there() {
    let mut node = Node::new(&[("00-base.yaml", &config(0, &[]))]).await;
    node.start_agent(&[]);
    node.wait_status("provisioned", secs(30), done_in(&node.rendered_name()))
        .await;
    node.kill_agent().await;
    node.write_manifest("00-base.yaml", &config(1, &[]));
    let name = node.rendered_name();
    let marker = node.dir.path().join("paused");
    let marker_env = marker.display().to_string();
    node.start_agent(&[
        ("FAILPOINTS", "engine::written=return(pause)"),
        ("FAILPOINTS_PAUSED", &marker_env),
    ]);
    let deadline = std::time::Instant::now() + secs(60);
    while !marker.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "no pause marker\n{}",
            node.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        "engine::written\n"
    );
    tokio::time::sleep(secs(1)).await;
    let pid = node.last_agent_pid().unwrap();
    assert!(alive(pid), "the paused agent exited\n{}", node.logs());
    // Paused after the files, before anything is committed.
    assert_whole(&node, &[1], "paused at engine::written");
    assert!(
        !node
            .read("/etc/machine-config-daemon/currentconfig")
            .unwrap()
            .contains(&name)
    );
    assert!(node.logs().contains("failpoint: paused"), "{}", node.logs());
    node.kill_agent().await;
    node.start_agent(&[]);
    node.wait_status("after the pause", secs(60), done_in(&name))
        .await;
    node.kill_agent().await;
    assert_converged(&node, &name, 1, "after the pause");
    node.stop().await;
}

const REBOOT_POINTS: &[&str] = &[
    "engine::recorded",
    "engine::drained",
    "engine::writing",
    TEMP_WRITTEN,
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
    node.reboot_os().await;
}

/// With a cluster: the test sets `desiredConfig` as the node controller would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_every_step_of_a_reboot_update_it_converges() {
    // The booted simulation: a reboot boots the deployment the update staged, as on a node, so
    // the next update's `cleanup -p` removes only what that update staged.
    let mut node = Node::new_booted(&[("00-base.yaml", &config(0, &[]))], BOOTED_STANDIN)
        .await
        .with_cluster();
    node.start_agent(&[]);
    let base = node.target_rendered().await;
    node.wait_status("provisioned", secs(30), done_in(&base))
        .await;
    // the node's annotations are written by a queue: reported before the kill
    node.wait_annotations("provisioned", secs(30), "Done", Some(&base))
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

/// The ignored child test that runs the rpm-ostree stand-in in the booted simulation.
const BOOTED_STANDIN: &str = "booted_standin";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the rpm-ostree stand-in of the booted crash-safety test, which runs it"]
async fn booted_standin() {
    os_env::booted_standin_main().await;
}

/// An OS image (pinned by digest) the booted stand-in maps to a new commit of the sysroot.
fn os_image(node: &Node, version: u32) -> String {
    let image = format!("quay.io/example/fakeos@sha256:{version:064x}");
    let rev = format!("fakeos/v{version}");
    node.os
        .sysroot
        .commit(&rev, &format!("{version}.0"))
        .unwrap();
    node.os.map_image(&image, &rev);
    image
}

/// On a booted node, OS changes are staged finalization-locked: a reboot nobody asked for
/// between the rebase and the kernel arguments (or before the reboot was asked for) drops them,
/// the old deployment boots, and the agent stages them again, releases them with
/// `FinalizeDeployment` and converges, without a rollback or a Degraded state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unplanned_reboot_while_locked_staged_converges_without_degrading() {
    let mut node = Node::new_booted(&[("00-base.yaml", &config(0, &[]))], BOOTED_STANDIN).await;
    node.start_agent(&[]);
    node.wait_status("provisioned", secs(60), done_in(&node.rendered_name()))
        .await;
    node.kill_agent().await;
    let mut reboots = 0;
    for (version, point) in [(1, "engine::os-rebased"), (2, "engine::reboot-recorded")] {
        let image = os_image(&node, version);
        let karg = format!("mco.locked={version}");
        let yaml = config(version, &[&karg]).replacen(
            "spec:\n",
            &format!("spec:\n  osImageURL: {image}\n"),
            1,
        );
        node.write_manifest("00-base.yaml", &yaml);
        let name = node.target_rendered().await;
        crash_at(&mut node, point).await;
        let client = node.os.client().await;
        let staged = client.status().await.unwrap().staged().cloned();
        client.close().await.unwrap();
        let staged = staged.unwrap_or_else(|| panic!("{point}: nothing staged\n{}", node.logs()));
        assert!(staged.finalization_locked, "{point}: {staged:?}");

        // The unplanned reboot: the locked deployment is dropped, the old one boots again.
        node.reboot_os().await;
        let booted = node.os.deployments()[0].clone();
        assert!(!booted.options.contains(&karg), "{point}: {booted:?}");

        // The agent stages again and releases the deployment: rpm-ostree asks logind.
        node.start_agent(&[]);
        let deadline = std::time::Instant::now() + secs(60);
        while node.logind.reboots() == reboots {
            assert!(
                std::time::Instant::now() < deadline,
                "{point}: no reboot requested\n{}",
                node.logs()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        reboots += 1;
        node.kill_agent().await;
        node.reboot_os().await;
        node.start_agent(&[]);
        node.wait_status(point, secs(60), done_in(&name)).await;
        node.kill_agent().await;
        assert_converged(&node, &name, version, point);
        let booted = node.os.deployments()[0].clone();
        assert!(booted.options.contains(&karg), "{point}: {booted:?}");
        assert_eq!(
            booted
                .origin_value("origin", "container-image-reference")
                .as_deref(),
            Some(format!("ostree-unverified-registry:{image}").as_str()),
            "{point}"
        );
        assert_eq!(node.logind.reboots(), reboots, "{point}: one reboot");
        assert!(
            node.logs().contains("staging them again"),
            "{point}: not staged again\n{}",
            node.logs()
        );
        assert!(
            !node.logs().contains("-> Degraded"),
            "{point}: the node was Degraded on the way\n{}",
            node.logs()
        );
    }
    node.stop().await;
}

/// A health check of the node's root that always fails.
fn failing_health_check(node: &Node) {
    use std::os::unix::fs::PermissionsExt;
    let path = node.path("/etc/mco-agent/health.d/50-fail");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "#!/bin/sh\necho broken\nexit 1\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The health checks give up after one round.
const HEALTH_AT_ONCE: (&str, &str) = ("MCO_AGENT_HEALTH_DEADLINE", "100ms");

/// Like [`crash_at`], with the health checks giving up at once.
async fn crash_in_health_at(node: &mut Node, point: &str) {
    let spec = format!("{point}=return(kill)");
    node.start_agent(&[("FAILPOINTS", &spec), HEALTH_AT_ONCE]);
    let status = node.wait_agent_exit(secs(60)).await;
    assert_eq!(
        status.signal(),
        Some(9),
        "{point}: the agent did not die by SIGKILL ({status:?})\n{}",
        node.logs()
    );
}

/// Runs the agent (health checks giving up at once) until it asks for a reboot, kills it,
/// reboots.
async fn until_rebooted_in_health(node: &mut Node, point: &str) {
    let before = node.logind.reboots();
    node.start_agent(&[HEALTH_AT_ONCE]);
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
    node.reboot_os().await;
}

const BOOT_ROLLBACK_POINTS: &[&str] = &[
    "engine::boot-failed",
    "engine::boot-os-rolled-back",
    "engine::boot-files-rolled-back",
    "engine::reboot-back-recorded",
    "engine::rolled-back-boot",
];

/// A reboot update whose boot fails a health check is rolled back (previous deployment and
/// files, one reboot back, Degraded with the check's output); killed at every step of that, it
/// converges to the same end, and the agent never reboots into the failed target again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_every_step_of_a_boot_rollback_it_converges() {
    let mut node = Node::new(&[("00-base.yaml", &config(0, &[]))]).await;
    node.start_agent(&[]);
    let base = node.rendered_name();
    node.wait_status("provisioned", secs(30), done_in(&base))
        .await;
    node.kill_agent().await;
    failing_health_check(&node);
    for (i, point) in BOOT_ROLLBACK_POINTS.iter().enumerate() {
        let version = i as u32 + 1;
        let karg = format!("mco.bad={version}");
        node.write_manifest("00-base.yaml", &config(version, &[&karg]));
        let name = node.rendered_name();
        // Into the update: staged, rebooted.
        until_rebooted_in_health(&mut node, point).await;
        if *point == "engine::rolled-back-boot" {
            // Killed after the reboot back.
            until_rebooted_in_health(&mut node, point).await;
            crash_in_health_at(&mut node, point).await;
        } else {
            crash_in_health_at(&mut node, point).await;
            assert_whole(&node, &[0, version], point);
            until_rebooted_in_health(&mut node, point).await;
        }
        let reboots = node.logind.reboots();
        node.start_agent(&[HEALTH_AT_ONCE]);
        let (status, _) = node
            .wait_status(point, secs(60), |s| {
                s.state == machine_config::mco::NodeState::Degraded
                    && s.pending_step.is_none()
                    && s.reason.contains("rolled back to")
            })
            .await;
        assert_eq!(status.current.as_deref(), Some(base.as_str()), "{point}");
        assert!(
            status.reason.starts_with(&format!(
                "boot into {name} failed: health check /etc/mco-agent/health.d/50-fail exited with 1: broken"
            )),
            "{point}: {}",
            status.reason
        );
        assert!(
            status.reason.contains(&format!("; rolled back to {base}")),
            "{point}: {}",
            status.reason
        );
        // No boot loop: the same target is not tried again.
        tokio::time::sleep(secs(1)).await;
        assert_eq!(node.logind.reboots(), reboots, "{point}: rebooted again");
        node.kill_agent().await;
        assert_whole(&node, &[0], point);
        let current = node
            .read("/etc/machine-config-daemon/currentconfig")
            .unwrap();
        assert!(current.contains(&format!("\"name\":\"{base}\"")), "{point}");
        let options = node.os.deployments()[0].options.clone();
        assert!(!options.contains(&karg), "{point}: {karg} in {options}");
        assert!(
            node.read("/etc/machine-config-daemon/mco-agent-failed-target.json")
                .is_some_and(|t| t.contains(&name)),
            "{point}: no failed target"
        );
    }
    node.stop().await;
}
