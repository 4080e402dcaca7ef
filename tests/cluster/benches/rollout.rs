//! Benchmark (not a test): the files-only rollout of the cluster tier, timed. Three nodes,
//! `maxUnavailable: 1`, every component a process (`tests/cluster/src`); for each of
//! `ROLLOUTS` successive changes of a MachineConfig, the time from the change to the whole
//! pool Done, and the API requests each agent made per update (the API test server's audit).
//! `cargo bench -p mco-cluster-tests --bench rollout` prints the median, the spread and the
//! requests per update by verb and resource; docs/benchmarks.md keeps the figures.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use mco_cluster_tests::{Cluster, Spec, binaries, secs};

const ROLLOUTS: usize = 7;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    // Only under `cargo bench` (`--bench`): a test runner listing the targets gets no tests.
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        if !args.iter().any(|a| a == "--list") {
            eprintln!("benchmark: run it with `cargo bench -p mco-cluster-tests --bench rollout`");
        }
        return Ok(());
    }
    let cluster = Cluster::start(binaries!(), Spec::default()).await?;
    let nodes = cluster.node_names();
    let before = cluster.api.audit()?.len();
    let mut took: Vec<Duration> = Vec::new();
    for n in 0..ROLLOUTS {
        let start = Instant::now();
        let next = cluster.change_base_file(&format!("bench: {n}\n")).await?;
        cluster.wait_pool_done(&next, secs(120)).await?;
        took.push(start.elapsed());
    }
    let audit = cluster.api.audit()?;
    let mut per_kind: BTreeMap<String, usize> = BTreeMap::new();
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    for event in &audit[before..] {
        let Some(node) = event.user.strip_prefix("system:node:") else {
            continue;
        };
        *per_node.entry(node.to_string()).or_default() += 1;
        let what = if event.subresource.is_empty() {
            format!("{} {}", event.verb, event.resource)
        } else {
            format!("{} {}/{}", event.verb, event.resource, event.subresource)
        };
        *per_kind.entry(what).or_default() += 1;
    }
    took.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "files-only rollout, {} nodes, maxUnavailable 1, {ROLLOUTS} runs: median {:.0} ms, min {:.0} ms, max {:.0} ms",
        nodes.len(),
        ms(took[took.len() / 2]),
        ms(took[0]),
        ms(took[took.len() - 1])
    );
    let updates = (ROLLOUTS * nodes.len()) as f64;
    let total: usize = per_node.values().sum();
    println!(
        "agent API requests per update: {:.1} (per node over {ROLLOUTS} rollouts: {per_node:?})",
        total as f64 / updates
    );
    for (what, count) in &per_kind {
        println!("  {what}: {:.1} per update", *count as f64 / updates);
    }
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        println!("load average at the end: {}", load.trim());
    }
    cluster.finish().await
}
