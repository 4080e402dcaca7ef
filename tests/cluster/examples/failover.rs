//! The companion's leader failover, measured (`tests/bench/failover.sh` runs it): three replicas
//! against the API test server with the cluster tier's leader election timings (lease 6 s,
//! renew deadline 4 s, retry 1 s); `--runs` times, the leader is SIGKILLed (a crash: the Lease
//! must expire) and the time until another replica holds the Lease is taken; then the new leader
//! gets SIGTERM (a rolling update: it releases the Lease) and the same is taken. The killed and
//! stopped replicas are started again before the next run. Prints each run and the spread.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use mco_cluster_tests::companion::Companion;
use mco_cluster_tests::{Binaries, Cluster, Spec};

#[derive(Debug, Parser)]
struct Args {
    /// The e2e-mco-companion binary.
    #[arg(long)]
    companion_bin: PathBuf,
    /// The e2e-mco-test-apiserver binary.
    #[arg(long)]
    apiserver_bin: PathBuf,
    /// Handovers of each kind.
    #[arg(long, default_value_t = 10)]
    runs: usize,
}

async fn wait_leader(cluster: &Cluster, not: Option<usize>) -> Result<(usize, Duration)> {
    let start = Instant::now();
    loop {
        if let Some(leader) = Companion::leader(&cluster.client).await?
            && Some(leader) != not
        {
            return Ok((leader, start.elapsed()));
        }
        if start.elapsed() > Duration::from_secs(60) {
            bail!("no replica other than {not:?} took the Lease within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn spread(name: &str, mut took: Vec<Duration>) {
    took.sort();
    let secs: Vec<f64> = took.iter().map(Duration::as_secs_f64).collect();
    let mean = secs.iter().sum::<f64>() / secs.len() as f64;
    let sd = (secs.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / secs.len() as f64).sqrt();
    println!(
        "{name}: {} runs, min {:.2} s, median {:.2} s, max {:.2} s, mean {mean:.2} s, sd {sd:.2} s",
        secs.len(),
        secs[0],
        secs[secs.len() / 2],
        secs[secs.len() - 1]
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args = Args::parse();
    let spec = Spec {
        nodes: 0,
        replicas: 3,
        ..Spec::default()
    };
    // no node: no agent, no OS
    let bins = Binaries {
        agent: PathBuf::from("/nonexistent"),
        companion: args.companion_bin.clone(),
        apiserver: args.apiserver_bin.clone(),
        rpmostreed: PathBuf::from("/nonexistent"),
    };
    let mut cluster = Cluster::start(bins, spec).await?;
    let (mut kills, mut stops) = (Vec::new(), Vec::new());
    for run in 1..=args.runs {
        let (leader, _) = wait_leader(&cluster, None).await?;
        // a moment after a renewal or long after: the runs fall anywhere in the retry period
        tokio::time::sleep(Duration::from_millis(rand::random_range(0..1000))).await;
        cluster.companion.kill_replica(leader);
        let (successor, took) = wait_leader(&cluster, Some(leader)).await?;
        println!(
            "run {run}: SIGKILL to replica {leader}: replica {successor} leads after {took:.2?}"
        );
        kills.push(took);
        cluster.companion.start_replica(leader)?;

        tokio::time::sleep(Duration::from_millis(rand::random_range(0..1000))).await;
        let started = Instant::now();
        let stopped = tokio::task::block_in_place(|| {
            cluster
                .companion
                .terminate_replica(successor, Duration::from_secs(30))
        })?;
        let (next, _) = wait_leader(&cluster, Some(successor)).await?;
        let took = started.elapsed();
        println!(
            "run {run}: SIGTERM to replica {successor} (exited in {stopped:.2?}): replica {next} \
             leads after {took:.2?}"
        );
        stops.push(took);
        cluster
            .companion
            .start_replica(successor)
            .context("restarting the stopped replica")?;
    }
    spread("SIGKILL to the leader (the Lease expires)", kills);
    spread("SIGTERM to the leader (it releases the Lease)", stops);
    cluster.finish().await
}
