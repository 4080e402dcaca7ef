//! Benchmark (`cargo bench -p mco-agent --bench rebootless_update`): how long a files-only update
//! takes end to end, from `desiredConfig` written on the Node to `state=Done` with the new
//! `currentConfig` read back from the API (issue goal: under 1 s, no reboot). The same node as
//! the end-to-end tests (`tests/daemon_env`): the Kubernetes API test server, the companion
//! serving the pool over TLS, the rpm-ostree stand-in over a real ostree sysroot on a private
//! bus, a fake logind, and `mco-agent start` as a process on a temp root.
//!
//! Where the time goes is read from the timestamps of the agent's own log lines, one per step of
//! the update ([`phases`]), and reported as the median of each phase.
//!
//! Only runs under `cargo bench` (`--bench`); listed by a test runner, it has no tests.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/daemon_env/mod.rs"]
mod daemon_env;
#[path = "../tests/os_env/mod.rs"]
mod os_env;
#[path = "rebootless_update/phases.rs"]
mod phases;

use std::time::{Duration, SystemTime};

use daemon_env::{Node, machine_config, secs};

const UPDATES: u32 = 15;
const GOAL: Duration = Duration::from_secs(1);
/// Files whose default disruption policy needs no reboot: None, a crio reload, None.
const FILES: [&str; 3] = [
    "/etc/nmstate/openshift/base.yaml",
    "/etc/containers/registries.d/99-bench.yaml",
    "/var/lib/kubelet/config.json",
];

fn config(version: u32) -> String {
    let contents = format!("version: {version}\n");
    let files: Vec<(&str, &str)> = FILES.iter().map(|p| (*p, contents.as_str())).collect();
    machine_config("00-base", &files, &[])
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        if !args.iter().any(|a| a == "--list") {
            eprintln!(
                "benchmark: run it with `cargo bench -p mco-agent --bench rebootless_update`"
            );
        }
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(bench());
}

async fn bench() {
    let mut node = Node::new(&[("00-base.yaml", &config(0))])
        .await
        .with_cluster();
    let base = node.rendered_name();
    node.start_agent(&[]);
    node.set_desired(&base);
    node.wait_annotations("the first application", secs(60), "Done", Some(&base))
        .await;

    let mut took = Vec::new();
    let mut breakdown = Vec::new();
    for version in 1..=UPDATES {
        node.write_manifest("00-base.yaml", &config(version));
        let rendered = node.rendered_name();
        node.wait_served(&rendered).await;
        let set = SystemTime::now();
        node.set_desired(&rendered);
        took.push(
            node.wait_annotations("the update", secs(60), "Done", Some(&rendered))
                .await,
        );
        breakdown.push(
            phases::of_update(&node.logs(), set, SystemTime::now())
                .unwrap_or_else(|e| panic!("update {version}: {e}\n{}", node.logs())),
        );
        assert_eq!(
            node.read(FILES[0]).as_deref(),
            Some(format!("version: {version}\n").as_str())
        );
    }
    assert_eq!(node.logind.reboots(), 0, "a files-only update rebooted");
    node.stop().await;

    took.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let within = took.iter().filter(|d| **d < GOAL).count();
    println!(
        "files-only update, desiredConfig set -> state=Done (API read back every 5 ms; goal {GOAL:?})"
    );
    println!(
        "{UPDATES} updates of {} files: min {:.1} ms, median {:.1} ms, max {:.1} ms; {within}/{UPDATES} within the goal, 0 reboots",
        FILES.len(),
        ms(took[0]),
        ms(took[took.len() / 2]),
        ms(took[took.len() - 1]),
    );
    println!("median of each phase (ms), from the agent's log timestamps:");
    let names = phases::PHASES.iter().map(|(name, _)| *name);
    for (i, name) in names.chain([phases::SEEN]).enumerate() {
        let mut phase: Vec<Duration> = breakdown.iter().map(|b| b[i]).collect();
        phase.sort();
        println!(
            "  {:>7.2}  (max {:>7.2})  {name}",
            ms(phase[phase.len() / 2]),
            ms(phase[phase.len() - 1])
        );
    }
}
