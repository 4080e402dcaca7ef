//! SIGTERM (what `systemctl stop` and a shutdown send) stops `mco-agent start` within seconds
//! wherever it is, and the next start converges (agent/src/stop.rs):
//! - while a drain waits on a PodDisruptionBudget (a wait on the API server that would hold the
//!   stop for the drain's hour without the fix);
//! - with `--features failpoints` (`tests/run.sh` runs it so, with the crash-safety tests): held
//!   at every step of a reboot update and of a rebootless update (`return(hold)`), then stopped,
//!   once restarted in the same boot and once after a reboot nobody asked for.
//!
//! Each stop is a wait for the process to exit, with a timeout that names it; how long stops
//! take is measured by `tests/bench/stop_time.sh`, not asserted here.

mod common;
mod daemon_env;
mod os_env;

use std::time::Duration;

use daemon_env::{Node, done_in, machine_config, secs};
use mco_test_support::apiserver::fixtures;
use serde_json::json;

/// How long a stop may take before the test calls it stuck: far beyond any measured stop (a
/// stuck agent never exits; the unit's `TimeoutStopSec` is the real bound).
const STUCK: Duration = Duration::from_secs(30);

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

/// The regression case of the stuck stop: SIGTERM came while the loop was inside an update
/// that waited (here a drain refused by a PodDisruptionBudget, retried for up to an hour), and
/// the agent only looked at signals between updates, so systemd waited its whole stop timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_a_drain_waits_on_a_budget_stops_at_once_and_the_next_start_converges() {
    let mut node = Node::new(&[("00-base.yaml", &config(0, &[]))])
        .await
        .with_cluster();
    node.start_agent(&[]);
    let base = node.target_rendered().await;
    node.wait_status("provisioned", secs(30), done_in(&base))
        .await;
    node.wait_annotations("provisioned", secs(30), "Done", Some(&base))
        .await;
    let api = node.api();
    api.seed(fixtures::namespace("apps")).unwrap();
    api.seed(fixtures::pod(
        "apps",
        "web-1",
        daemon_env::NODE,
        &[("app", "web")],
    ))
    .unwrap();
    api.seed(fixtures::pdb(
        "apps",
        "web-budget",
        &[("app", "web")],
        json!({"minAvailable": 1}),
    ))
    .unwrap();
    node.write_manifest("00-base.yaml", &config(1, &["mco.stop=1"]));
    let name = node.target_rendered().await;
    node.wait_status("the drain", secs(60), |s| {
        s.pending_step.as_deref() == Some("Draining")
    })
    .await;
    let (status, took) = node.stop_agent(STUCK).await;
    assert!(status.success(), "{status:?}\n{}", node.logs());
    eprintln!("stopped {took:?} after SIGTERM, in the drain");
    assert!(
        node.logs()
            .contains("stopping: an update in progress resumes"),
        "{}",
        node.logs()
    );
    // Nothing was written; the record waits at the drain for the next start.
    assert_eq!(
        node.read(FILE_A).as_deref(),
        Some("a: 0\n"),
        "{}",
        node.logs()
    );
    let record = node
        .read("/etc/machine-config-daemon/mco-agent-update.json")
        .expect("the update record");
    assert!(record.contains("\"step\":\"Draining\""), "{record}");

    // The budget lets go; the next start drains, reboots, and the boot completes the update.
    node.api()
        .delete("poddisruptionbudgets", Some("apps"), "web-budget")
        .unwrap();
    node.start_agent(&[]);
    node.wait_reboot_requested(secs(60)).await;
    let (status, _) = node.stop_agent(STUCK).await;
    assert!(status.success(), "{status:?}");
    node.reboot();
    node.start_agent(&[]);
    node.wait_status("converged", secs(60), done_in(&name))
        .await;
    node.wait_annotations("converged", secs(30), "Done", Some(&name))
        .await;
    assert_eq!(node.read(FILE_A).as_deref(), Some("a: 1\n"));
    node.stop().await;
}

#[cfg(feature = "failpoints")]
mod at_every_step {
    use super::*;

    /// How long the agent may take to reach a failpoint (a large config on a loaded machine).
    const REACH: Duration = Duration::from_secs(180);

    /// The steps of a rebootless update (a file-only change, no drain without a cluster).
    const REBOOTLESS_POINTS: &[&str] = &[
        "engine::recorded",
        "engine::writing",
        "engine::temp-written=return(hold@/etc/containers/policy.json)",
        "engine::apply-midway",
        "engine::written",
        "engine::post-actions",
        "engine::committed",
    ];

    /// The steps of a reboot update (with a cluster: a drain) before its reboot; then those
    /// of the boot after it.
    const REBOOT_POINTS: &[&str] = &[
        "engine::recorded",
        "engine::drained",
        "engine::writing",
        "engine::temp-written=return(hold@/etc/containers/policy.json)",
        "engine::apply-midway",
        "engine::written",
        "engine::os-cleaned",
        "engine::os-rebased",
        "engine::os-kargs",
        "engine::os-done",
        "engine::reboot-recorded",
        "engine::reboot-requested",
    ];
    const AFTER_REBOOT_POINTS: &[&str] = &["engine::verifying", "engine::committed"];

    /// How the stopped agent comes back.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Then {
        /// `systemctl stop`, then `start` in the same boot.
        Restart,
        /// A reboot nobody asked for (the shutdown's SIGTERM), then the next boot's start.
        Reboot,
    }

    /// Starts the agent with `point` held, waits until it holds there, stops it with SIGTERM
    /// (which must end it, successfully), and returns how long the stop took.
    async fn stop_at(node: &mut Node, point: &str) -> Duration {
        let spec = if point.contains('=') {
            point.to_string()
        } else {
            format!("{point}=return(hold)")
        };
        let name = point.split('=').next().unwrap();
        let marker = node.dir.path().join("held");
        let _ = std::fs::remove_file(&marker);
        let marker_env = marker.display().to_string();
        node.start_agent(&[("FAILPOINTS", &spec), ("FAILPOINTS_PAUSED", &marker_env)]);
        let deadline = std::time::Instant::now() + REACH;
        while std::fs::read_to_string(&marker).ok().as_deref() != Some(&format!("{name}\n")) {
            assert!(
                std::time::Instant::now() < deadline,
                "{point}: the agent did not reach the point within {REACH:?}\n{}",
                node.logs()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let (status, took) = node.stop_agent(STUCK).await;
        assert!(
            status.success(),
            "{point}: the stopped agent exited with {status:?}\n{}",
            node.logs()
        );
        took
    }

    /// Runs the agent until the node is Done in `name`, following the reboots it asks for
    /// (each one a SIGTERM of the parked agent, then a new boot).
    async fn converge(node: &mut Node, name: &str, point: &str) {
        for _ in 0..3 {
            let reboots = node.logind.reboots();
            node.start_agent(&[]);
            let deadline = std::time::Instant::now() + secs(60);
            loop {
                // (the status may be Done already, from the stopped agent that finished its
                // step: this start is looked at once it runs)
                let started = node
                    .last_log()
                    .lines()
                    .any(|l| l.contains("cli::start") && l.contains(" starting"));
                if started && node.status().is_some_and(|s| done_in(name)(&s)) {
                    if node.cluster.is_some() {
                        node.wait_annotations(point, secs(30), "Done", Some(name))
                            .await;
                    }
                    let (status, _) = node.stop_agent(STUCK).await;
                    assert!(status.success(), "{point}: {status:?}\n{}", node.logs());
                    return;
                }
                if node.logind.reboots() > reboots {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "{point}: not Done in {name} within 60 s: {:?}\n{}",
                    node.status(),
                    node.logs()
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            // Parked for the reboot it asked for: the shutdown's SIGTERM ends it.
            let (status, _) = node.stop_agent(STUCK).await;
            assert!(status.success(), "{point}: parked agent: {status:?}");
            node.reboot();
        }
        panic!("{point}: more than 3 reboots\n{}", node.logs());
    }

    /// Every managed file holds one whole version of the two.
    fn assert_whole(node: &Node, version: u32, point: &str) {
        let a = node.read(FILE_A);
        let ok = [version - 1, version]
            .iter()
            .any(|v| a.as_deref() == Some(format!("a: {v}\n").as_str()));
        assert!(ok, "{point}: {FILE_A} is {a:?}\n{}", node.logs());
    }

    fn assert_converged(node: &Node, name: &str, version: u32, point: &str) {
        assert_eq!(
            node.read(FILE_A).as_deref(),
            Some(format!("a: {version}\n").as_str()),
            "{point}"
        );
        let current = node
            .read("/etc/machine-config-daemon/currentconfig")
            .unwrap();
        assert!(current.contains(&format!("\"name\":\"{name}\"")), "{point}");
        assert!(
            node.read("/etc/machine-config-daemon/mco-agent-update.json")
                .is_none(),
            "{point}: update record left"
        );
    }

    /// One update to `version` (its config `manifest`), stopped at `point` and brought back as
    /// `then` says.
    async fn stopped_update(
        node: &mut Node,
        version: u32,
        manifest: &str,
        point: &str,
        after_reboot: bool,
        then: Then,
    ) -> Duration {
        node.write_manifest("00-base.yaml", manifest);
        let name = node.target_rendered().await;
        if after_reboot {
            let reboots = node.logind.reboots();
            node.start_agent(&[]);
            let deadline = std::time::Instant::now() + secs(60);
            while node.logind.reboots() == reboots {
                assert!(
                    std::time::Instant::now() < deadline,
                    "{point}: no reboot\n{}",
                    node.logs()
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let (status, _) = node.stop_agent(STUCK).await;
            assert!(status.success(), "{point}: {status:?}");
            node.reboot();
        }
        let reboots = node.logind.reboots();
        let took = stop_at(node, point).await;
        assert_whole(node, version, point);
        // A reboot asked for before the stop happens; otherwise one nobody asked for, or none.
        if node.logind.reboots() > reboots || then == Then::Reboot {
            node.reboot();
        }
        converge(node, &name, point).await;
        assert_converged(node, &name, version, point);
        took
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stopped_at_every_step_of_a_rebootless_update_it_exits_and_converges() {
        let mut node = Node::new(&[("00-base.yaml", &config(0, &[]))]).await;
        node.start_agent(&[]);
        node.wait_status("provisioned", secs(30), done_in(&node.rendered_name()))
            .await;
        node.kill_agent().await;
        let mut version = 0;
        for then in [Then::Restart, Then::Reboot] {
            for point in REBOOTLESS_POINTS {
                version += 1;
                let manifest = config(version, &[]);
                let took = stopped_update(&mut node, version, &manifest, point, false, then).await;
                eprintln!("{point} ({then:?}): stopped in {took:?}");
            }
        }
        assert_eq!(node.logind.reboots(), 0);
        node.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stopped_at_every_step_of_a_reboot_update_it_exits_and_converges() {
        let mut node = Node::new(&[("00-base.yaml", &config(0, &[]))])
            .await
            .with_cluster();
        node.start_agent(&[]);
        let base = node.target_rendered().await;
        node.wait_status("provisioned", secs(30), done_in(&base))
            .await;
        node.wait_annotations("provisioned", secs(30), "Done", Some(&base))
            .await;
        node.kill_agent().await;
        let mut version = 0;
        let points = REBOOT_POINTS
            .iter()
            .map(|p| (*p, false))
            .chain(AFTER_REBOOT_POINTS.iter().map(|p| (*p, true)));
        for (point, after_reboot) in points {
            for then in [Then::Restart, Then::Reboot] {
                version += 1;
                let karg = format!("mco.stop={version}");
                let manifest = config(version, &[&karg]);
                let took =
                    stopped_update(&mut node, version, &manifest, point, after_reboot, then).await;
                eprintln!("{point} ({then:?}): stopped in {took:?}");
                let options = node.os.deployments()[0].options.clone();
                assert!(options.contains(&karg), "{point}: {karg} not in {options}");
            }
        }
        node.stop().await;
    }

    /// `config(version)` and `files` more files of `kib` KiB each, all of them changed in
    /// every version: the writes of a large config.
    fn large_config(version: u32, files: usize, kib: usize) -> String {
        let line = format!("{version:0>1023}\n");
        let contents = line.repeat(kib);
        let paths: Vec<String> = (0..files)
            .map(|i| format!("/etc/nmstate/openshift/bench-{i:04}.yaml"))
            .collect();
        let a = format!("a: {version}\n");
        let b = format!("{{\"v\": {version}}}\n");
        let mut all = vec![(FILE_A, a.as_str()), (FILE_B, b.as_str())];
        all.extend(paths.iter().map(|p| (p.as_str(), contents.as_str())));
        machine_config("00-base", &all, &[])
    }

    fn env_or(name: &str, default: usize) -> usize {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }

    /// The stop-time benchmark (`tests/bench/stop_time.sh` runs it and reads its lines): a
    /// config of `MCO_STOP_BENCH_FILES` files of `MCO_STOP_BENCH_KIB` KiB (default 8 of 64;
    /// more with the variables), stopped at every step of a rebootless update. Prints one `stop-time` line per
    /// step; the longest is the bound `TimeoutStopSec` is sized from.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "a benchmark: tests/bench/stop_time.sh"]
    async fn stop_time_at_every_step_with_a_large_config() {
        let files = env_or("MCO_STOP_BENCH_FILES", 8);
        let kib = env_or("MCO_STOP_BENCH_KIB", 64);
        let mut node = Node::new(&[("00-base.yaml", &large_config(0, files, kib))]).await;
        node.start_agent(&[]);
        node.wait_status("provisioned", secs(120), done_in(&node.rendered_name()))
            .await;
        node.kill_agent().await;
        let points = REBOOTLESS_POINTS
            .iter()
            .chain(&["engine::temp-written=return(hold@/etc/nmstate/openshift/bench-0000.yaml)"]);
        let mut version = 0;
        for point in points {
            version += 1;
            let manifest = large_config(version, files, kib);
            let took =
                stopped_update(&mut node, version, &manifest, point, false, Then::Restart).await;
            println!(
                "stop-time {:.3} s at {point} ({files} files of {kib} KiB)",
                took.as_secs_f64()
            );
        }
        node.stop().await;
    }
}
