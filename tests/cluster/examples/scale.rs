//! The scale harness (`tests/bench/scale.sh` builds and runs it; never part of the test run):
//! `--nodes` Node objects in two pools (`worker`, and `infra` of `--small-pool` nodes), a real
//! `mco-agent start` on `--agents` of them (shared between the pools in proportion), the rest
//! played by the harness; a files-only rollout through each pool with `maxUnavailable: 10%`,
//! then `--fetches` concurrent first-boot fetches of the worker pool's ~1 MiB config. Prints
//! what each cost; asserts nothing about speed (docs/benchmarks.md keeps the figures).

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
    /// Nodes running a real `mco-agent start`.
    #[arg(long, default_value_t = 250)]
    agents: usize,
    /// How long a played agent's update takes, in milliseconds.
    #[arg(long, default_value_t = 300)]
    played_update_ms: u64,
    /// Concurrent first-boot fetches.
    #[arg(long, default_value_t = 1000)]
    fetches: usize,
    /// The size of the file each pool's config carries (incompressible; base64 in the config).
    #[arg(long, default_value_t = 760 * 1024)]
    payload_bytes: usize,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.small_pool == 0 || args.small_pool >= args.nodes || args.agents < 2 {
        bail!("need 0 < --small-pool < --nodes and --agents >= 2");
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
    let small_agents = (args.agents * args.small_pool / args.nodes).max(1);
    let pools = vec![
        PoolSpec {
            name: "infra".into(),
            nodes: args.small_pool,
            agents: small_agents,
        },
        PoolSpec {
            name: "worker".into(),
            nodes: args.nodes - args.small_pool,
            agents: args.agents - small_agents,
        },
    ];
    let spec = Spec {
        pools: pools.clone(),
        max_unavailable: "10%".into(),
        played_update: Duration::from_millis(args.played_update_ms),
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
    let (played, failures) = cluster.fleet.played();
    println!(
        "played updates: {played}; failed patches: {}",
        failures.len()
    );
    if let Some(first) = failures.first() {
        println!("  first failure: {first}");
    }

    let before = procstat::usage(companion_pid)?;
    let port = cluster
        .companion
        .url()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .context("the companion's port")?;
    let burst = firstboot::burst(
        cluster.companion.ca_pem(),
        port,
        "/config/worker",
        args.fetches,
    )
    .await?;
    let after = procstat::usage(companion_pid)?;
    let ms = |d: Option<Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0);
    println!(
        "first-boot fetches: {} concurrent of /config/worker ({} bytes): {} ok, {} failed {:?}; p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms; all done in {:.2} s; companion CPU {:.2} s, peak RSS {} KiB (before the burst {} KiB)",
        args.fetches,
        burst.body_bytes,
        burst.latencies.len(),
        burst.failures,
        burst.first_failures,
        ms(burst.quantile(0.5)),
        ms(burst.quantile(0.99)),
        ms(burst.latencies.last().copied()),
        burst.wall.as_secs_f64(),
        after.cpu.saturating_sub(before.cpu).as_secs_f64(),
        after.peak_rss_kib,
        before.peak_rss_kib,
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
    let agents = r.pool.agents as f64;
    println!(
        "\n## rollout of pool {} ({} nodes, {} real agents, maxUnavailable 10%) to {}",
        r.pool.name, r.pool.nodes, r.pool.agents, r.rendered
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
        "real agents: CPU {:.2} s ({:.1} ms per update)",
        r.agents_cpu.as_secs_f64(),
        r.agents_cpu.as_secs_f64() * 1000.0 / agents
    );
    let companion = &r.requests.companion;
    println!(
        "companion API requests: {} ({:.2} per node updated)",
        companion.total(),
        companion.total() as f64 / n
    );
    for (what, count) in &companion.by_kind {
        println!("  {what}: {count} ({:.2} per node)", *count as f64 / n);
    }
    let agent = &r.requests.agents;
    println!(
        "agent API requests: {} from {} nodes ({:.2} per update)",
        agent.total(),
        r.requests.agent_nodes.len(),
        agent.total() as f64 / agents
    );
    for (what, count) in &agent.by_kind {
        println!("  {what}: {:.2} per update", *count as f64 / agents);
    }
    let others = &r.requests.other_agents;
    println!(
        "the other pools' agents meanwhile: {} requests {:?}",
        others.total(),
        others.by_kind
    );
    println!("load average: {}", r.load);
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}
