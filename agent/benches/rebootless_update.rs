//! Benchmark (`cargo bench -p mco-agent --bench rebootless_update`): how long a files-only update
//! takes end to end, from `desiredConfig` written on the Node to `state=Done` with the new
//! `currentConfig` read back from the API (issue goal: under 1 s, no reboot). The same node as
//! the end-to-end tests (`tests/daemon_env`): the Kubernetes API test server, the companion
//! serving the pool over TLS, the rpm-ostree stand-in over a real ostree sysroot on a private
//! bus, a fake logind, and `mco-agent start` as a process on a temp root.
//!
//! Measured as another client of the API sees it, not from inside the server: the benchmark is
//! an administrator's client over HTTPS that sets `desiredConfig` with a PATCH and waits on a
//! watch of the Node for `state=Done` with the new `currentConfig`. `MCO_BENCH_API_LATENCY=5ms`
//! adds that much to every request the API server answers (the agent's and the benchmark's
//! alike): an API server across a link, as an etcd-backed one in another rack is.
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

use std::time::{Duration, Instant, SystemTime};

use daemon_env::{Node, machine_config, secs};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node as KubeNode;
use kube::api::{Api, Patch, PatchParams, WatchEvent, WatchParams};

const UPDATES: u32 = 15;
const GOAL: Duration = Duration::from_secs(1);
const NODE: &str = daemon_env::NODE;
const STATE: &str = "machineconfiguration.openshift.io/state";
const CURRENT: &str = "machineconfiguration.openshift.io/currentConfig";
const DESIRED: &str = "machineconfiguration.openshift.io/desiredConfig";

/// `MCO_BENCH_API_LATENCY` (`5ms`), or none.
fn api_latency() -> Option<Duration> {
    let value = std::env::var("MCO_BENCH_API_LATENCY").ok()?;
    Some(humantime::parse_duration(&value).unwrap_or_else(|e| {
        panic!("MCO_BENCH_API_LATENCY={value:?}: not a duration like 5ms: {e}")
    }))
}
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
    let latency = api_latency();
    if let Some(latency) = latency {
        node.api().faults().delay("*", "*", latency, None);
    }
    let admin = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(node.api().kubeconfig()).expect("admin kubeconfig"),
        &Default::default(),
    )
    .await
    .expect("admin kube config");
    let nodes: Api<KubeNode> = Api::all(kube::Client::try_from(admin).expect("admin client"));
    node.start_agent(&[]);
    node.set_desired(&base);
    node.wait_annotations("the first application", secs(60), "Done", Some(&base))
        .await;

    let requests_before = node.api().requests().len();
    let mut took = Vec::new();
    let mut breakdown = Vec::new();
    for version in 1..=UPDATES {
        node.write_manifest("00-base.yaml", &config(version));
        let rendered = node.rendered_name();
        node.wait_served(&rendered).await;
        let set = SystemTime::now();
        took.push(update_seen_done(&nodes, &rendered).await);
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
    // the last update's best-effort writes (Events, the MachineConfigNode) land after Done
    let settled = daemon_env::requests::settled(&node, Duration::from_millis(500)).await;
    let by_kind = daemon_env::requests::tally(&node.api().requests()[requests_before..settled]);
    node.stop().await;

    took.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let within = took.iter().filter(|d| **d < GOAL).count();
    println!(
        "files-only update, desiredConfig PATCH sent -> state=Done seen on another client's watch; added API latency per request: {}; goal {GOAL:?}",
        latency.map_or("none".to_string(), |l| format!("{l:?}"))
    );
    println!(
        "{UPDATES} updates of {} files: min {:.1} ms, median {:.1} ms, max {:.1} ms; {within}/{UPDATES} within the goal, 0 reboots",
        FILES.len(),
        ms(took[0]),
        ms(took[took.len() / 2]),
        ms(took[took.len() - 1]),
    );
    let per_update = |n: usize| n as f64 / f64::from(UPDATES);
    println!(
        "the agent's API requests per update, watches apart (the API server's request log): {:.2}",
        per_update(by_kind.values().sum())
    );
    for (kind, count) in &by_kind {
        println!("  {:>5.2}  {kind}", per_update(*count));
    }
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

/// Sets the node's `desiredConfig` to `rendered` as an administrator's client would, and waits
/// on a watch (opened first, from the Node's current resourceVersion) for the event that shows
/// `state=Done` on it; the time from sending the PATCH to that event.
async fn update_seen_done(nodes: &Api<KubeNode>, rendered: &str) -> Duration {
    let version = nodes
        .get(NODE)
        .await
        .expect("get the Node")
        .metadata
        .resource_version
        .expect("a resourceVersion");
    let mut events = nodes
        .watch(
            &WatchParams::default().fields(&format!("metadata.name={NODE}")),
            &version,
        )
        .await
        .expect("watch the Node")
        .boxed();
    let patch = serde_json::json!({"metadata": {"annotations": {DESIRED: rendered}}});
    let start = Instant::now();
    nodes
        .patch(NODE, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("set desiredConfig");
    let wait = async {
        while let Some(event) = events.next().await {
            if let WatchEvent::Modified(node) = event.expect("a watch event") {
                let annotations = node.metadata.annotations.unwrap_or_default();
                let done = annotations.get(STATE).map(String::as_str) == Some("Done");
                if done && annotations.get(CURRENT).map(String::as_str) == Some(rendered) {
                    return start.elapsed();
                }
            }
        }
        panic!("the watch of {NODE} ended before the update to {rendered} was Done");
    };
    tokio::time::timeout(secs(60), wait)
        .await
        .unwrap_or_else(|_| panic!("the update to {rendered} not Done within 60 s"))
}
