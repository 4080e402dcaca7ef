//! The scale harness (`tests/bench/scale.sh` builds and runs it; never part of the test run):
//! `--nodes` Node objects in two pools (`worker`, and `infra` of `--small-pool` nodes), each a
//! real `mco-agent start` on a small root; a files-only rollout through each pool with
//! `maxUnavailable: 10%`, then `--bursts` times `--fetches` concurrent first-boot fetches of
//! the worker pool's ~1 MiB config. Prints what each cost; asserts nothing about speed
//! (docs/benchmarks.md keeps the figures).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use mco_cluster_tests::Binaries;
use mco_cluster_tests::scale::roll::RollReport;
use mco_cluster_tests::scale::{PoolSpec, ScaleCluster, Spec, firstboot, procstat};

#[derive(Parser, Debug)]
struct Args {
    #[arg(long)]
    agent_bin: PathBuf,
    #[arg(long)]
    companion_bin: PathBuf,
    #[arg(long)]
    apiserver_bin: PathBuf,
    /// Node objects in all.
    #[arg(long, default_value_t = 1000)]
    nodes: usize,
    /// Nodes of the `infra` pool (the rest are `worker`).
    #[arg(long, default_value_t = 100)]
    small_pool: usize,
    /// Concurrent first-boot fetches in a burst.
    #[arg(long, default_value_t = 1000)]
    fetches: usize,
    /// Bursts of first-boot fetches, one after the other (each its own p99).
    #[arg(long, default_value_t = 10)]
    bursts: usize,
    /// How long a first-boot fetch may take before it counts as failed (Ignition's own
    /// per-request timeout is 10 s for the connection and the response headers).
    #[arg(long, default_value_t = 10)]
    fetch_timeout_s: u64,
    /// The size of the file each pool's config carries (incompressible; base64 in the config).
    #[arg(long, default_value_t = 760 * 1024)]
    payload_bytes: usize,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.small_pool == 0 || args.small_pool >= args.nodes {
        bail!("need 0 < --small-pool < --nodes");
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(run(args))
}

async fn run(args: Args) -> Result<()> {
    let bins = Binaries {
        agent: args.agent_bin.clone(),
        companion: args.companion_bin.clone(),
        apiserver: args.apiserver_bin.clone(),
        // built beside the agent; the scale harness's nodes have no OS, so it is never started
        rpmostreed: args.agent_bin.with_file_name("e2e-mco-test-rpmostreed"),
    };
    let pools = vec![
        PoolSpec {
            name: "infra".into(),
            nodes: args.small_pool,
        },
        PoolSpec {
            name: "worker".into(),
            nodes: args.nodes - args.small_pool,
        },
    ];
    let spec = Spec {
        pools: pools.clone(),
        max_unavailable: "10%".into(),
        payload_bytes: args.payload_bytes,
    };
    println!("# scale harness: {} nodes; pools {pools:?}", args.nodes);
    let started = Instant::now();
    let cluster = ScaleCluster::start(&bins, spec).await?;
    let companion_pid = cluster
        .companion
        .pid()
        .context("the companion is not running")?;
    println!(
        "setup: {:.1} s (every node Done on its pool's config); companion {:?}; API server {:?}",
        started.elapsed().as_secs_f64(),
        procstat::usage(companion_pid)?,
        procstat::usage(cluster.api.pid())?
    );
    println!("load average after setup: {}", load());
    let mut reports = Vec::new();
    for (n, pool) in pools.iter().enumerate() {
        let report = cluster.roll(pool, &format!("scale: {n}\n")).await?;
        print_roll(&report);
        reports.push(report);
    }
    let port = cluster
        .companion
        .url()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .context("the companion's port")?;
    let mut p99s = Vec::new();
    for n in 1..=args.bursts {
        let before = procstat::usage(companion_pid)?;
        let overflows_before = procstat::listen_overflows()?;
        let burst = firstboot::burst(
            cluster.companion.ca_pem(),
            port,
            "/config/worker",
            args.fetches,
            Duration::from_secs(args.fetch_timeout_s),
        )
        .await?;
        let after = procstat::usage(companion_pid)?;
        let overflows = procstat::listen_overflows()?.saturating_sub(overflows_before);
        let p99 = burst.quantile(0.99);
        p99s.push(p99);
        println!(
            "first-boot burst {n}: {} concurrent of /config/worker ({} bytes): {} ok, {} failed {:?}; p50 {}, p99 {} (failures count as timeouts), max {}; all done in {:.2} s; listen-queue overflows {overflows}; companion CPU {:.2} s, peak RSS {} KiB (before the burst {} KiB)",
            args.fetches,
            burst.body_bytes,
            burst.latencies.len(),
            burst.failures,
            burst.first_failures,
            shown(burst.quantile(0.5)),
            shown(p99),
            shown(burst.quantile(1.0)),
            burst.wall.as_secs_f64(),
            after.cpu.saturating_sub(before.cpu).as_secs_f64(),
            after.peak_rss_kib,
            before.peak_rss_kib,
        );
    }
    println!(
        "first-boot p99 of the {} bursts: {}",
        p99s.len(),
        p99s.iter()
            .map(|p| shown(*p))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("load average at the end: {}", load());
    println!(
        "totals: companion {:?}; API server {:?}; harness {:?}",
        procstat::usage(companion_pid)?,
        procstat::usage(cluster.api.pid())?,
        procstat::usage(std::process::id())?
    );
    let refused = cluster.refused_requests()?;
    if !refused.is_empty() {
        bail!(
            "the shipped RBAC refused {} request(s), first: {}",
            refused.len(),
            refused[0]
        );
    }
    Ok(())
}

fn print_roll(r: &RollReport) {
    let n = r.pool.nodes as f64;
    println!(
        "\n## rollout of pool {} ({} nodes, each a real agent, maxUnavailable 10%) to {}",
        r.pool.name, r.pool.nodes, r.rendered
    );
    println!(
        "took {:.2} s; most nodes unavailable at once: {}",
        r.took.as_secs_f64(),
        r.max_unavailable
    );
    println!(
        "companion: CPU {:.2} s ({:.2} ms per node), RSS {} KiB, peak RSS {} KiB",
        r.companion_cpu.as_secs_f64(),
        r.companion_cpu.as_secs_f64() * 1000.0 / n,
        r.companion.rss_kib,
        r.companion.peak_rss_kib
    );
    println!(
        "API test server: CPU {:.2} s ({:.2} ms per node), RSS {} KiB, peak RSS {} KiB",
        r.apiserver_cpu.as_secs_f64(),
        r.apiserver_cpu.as_secs_f64() * 1000.0 / n,
        r.apiserver.rss_kib,
        r.apiserver.peak_rss_kib
    );
    println!(
        "the pool's agents: CPU {:.2} s ({:.1} ms per update)",
        r.agents_cpu.as_secs_f64(),
        r.agents_cpu.as_secs_f64() * 1000.0 / n
    );
    let companion = &r.requests.companion;
    println!(
        "companion API requests: {} ({:.2} per node updated), watches apart: {}",
        companion.total(),
        companion.total() as f64 / n,
        companion.watches()
    );
    for (what, count) in &companion.by_kind {
        println!("  {what}: {count} ({:.2} per node)", *count as f64 / n);
    }
    let agent = &r.requests.agents;
    println!(
        "agent API requests: {} from {} nodes ({:.2} per update), watches apart: {}",
        agent.total(),
        r.requests.agent_nodes.len(),
        agent.total() as f64 / n,
        agent.watches()
    );
    for (what, count) in &agent.by_kind {
        println!("  {what}: {:.2} per update", *count as f64 / n);
    }
    let others = &r.requests.other_agents;
    println!(
        "the other pools' agents meanwhile: {} requests {:?}",
        others.total(),
        others.by_kind
    );
    println!("load average: {}", r.load);
}

/// A latency in milliseconds, or `timeout` for a failed fetch.
fn shown(latency: Option<Duration>) -> String {
    match latency {
        Some(Duration::MAX) => "timeout".to_string(),
        Some(d) => format!("{:.0} ms", d.as_secs_f64() * 1000.0),
        None => "none".to_string(),
    }
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}
