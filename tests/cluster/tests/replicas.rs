//! Three companion replicas with leader election (a Lease on the API test server, the tier's
//! short timings: lease 6 s, renew deadline 4 s, retry 1 s) behind a front, as a Deployment
//! behind its Service: one leader; every replica serves; the leader killed, cut off from the
//! API server, or every replica restarted in turn during a rollout or a first-boot burst, and
//! the rollout finishes with no more than `maxUnavailable` nodes unavailable in any sample, no
//! node targeted twice and no drain started twice.

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use mco_cluster_tests::companion::{Companion, LEASE_DURATION};
use mco_cluster_tests::scale::firstboot::IGNITION_ACCEPT;
use mco_cluster_tests::transitions::Transitions;
use mco_cluster_tests::{Cluster, DrainMode, Spec, binaries, secs};
use mco_test_support::https_get;

const REBOOT_FILE: &str = "/etc/mco-e2e/reboot.conf";
/// A handover may take the lease duration after the last renewal, plus one try (1 s with its
/// jitter) of the replica that takes over; and a loaded machine's slack.
const HANDOVER_LIMIT: Duration = LEASE_DURATION.saturating_add(Duration::from_secs(4));

fn three_replicas(drain_mode: DrainMode) -> Spec {
    Spec {
        replicas: 3,
        drain_mode,
        ..Spec::default()
    }
}

/// Waits until the Lease names a replica other than `not`; returns it and the time it took.
async fn wait_leader(
    cluster: &Cluster,
    not: Option<usize>,
    limit: Duration,
) -> anyhow::Result<(usize, Duration)> {
    let start = Instant::now();
    loop {
        if let Some(leader) = Companion::leader(&cluster.client).await?
            && Some(leader) != not
        {
            return Ok((leader, start.elapsed()));
        }
        ensure!(
            start.elapsed() < limit,
            "no replica other than {not:?} took the leader Lease within {limit:?}:\n{}",
            cluster.diagnostics().await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Which replicas logged `needle`.
fn replicas_that_logged(cluster: &Cluster, needle: &str) -> Vec<usize> {
    (0..cluster.companion.replica_count())
        .filter(|i| !cluster.companion.log_lines(*i, needle).is_empty())
        .collect()
}

/// One GET of the worker pool's config from `port`, as Ignition fetches it.
async fn fetch(cluster: &Cluster, port: u16, path: &str) -> anyhow::Result<https_get::Fetched> {
    let config = mco_test_support::tls::ignition_like_client_config(cluster.companion.ca_pem())?;
    https_get::get(
        config,
        None,
        "127.0.0.1",
        port,
        "127.0.0.1",
        path,
        &[("Accept", IGNITION_ACCEPT)],
    )
    .await
}

/// Three replicas started at the same moment: exactly one leads and runs the controllers
/// (which rendered the pool and provisioned the nodes); every replica serves Ignition and
/// `/healthz` on its own, leader or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_started_at_once_elect_one_leader_and_all_serve() -> anyhow::Result<()> {
    let cluster = Cluster::start(binaries!(), three_replicas(DrainMode::Agent)).await?;
    let (leader, _) = wait_leader(&cluster, None, secs(1)).await?;
    ensure!(
        replicas_that_logged(&cluster, "became the leader") == [leader],
        "replicas that became the leader: {:?} (the Lease names {leader})",
        replicas_that_logged(&cluster, "became the leader")
    );
    ensure!(
        replicas_that_logged(&cluster, "controller started") == [leader],
        "replicas that ran the controller: {:?}",
        replicas_that_logged(&cluster, "controller started")
    );
    for i in 0..3 {
        let port = cluster.companion.replica_port(i);
        let config = fetch(&cluster, port, "/config/worker").await?;
        ensure!(
            config.status == 200 && config.body_bytes > 0,
            "replica {i}: {config:?}"
        );
        let health = fetch(&cluster, port, "/healthz").await?;
        ensure!(health.status == 200, "replica {i} /healthz: {health:?}");
    }
    // the rollout a leader drives completes (the others only serve)
    let next = cluster.change_base_file("base: 2\n").await?;
    cluster.wait_pool_done(&next, secs(60)).await?;
    cluster.finish().await
}

/// The leader SIGKILLed mid-rollout (drains by the companion's drain controller, a reboot per
/// node): another replica takes the Lease within the lease duration and finishes the rollout;
/// no node targeted twice, no drain started twice, never more than maxUnavailable down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_killed_mid_rollout_hands_over_without_harm() -> anyhow::Result<()> {
    let mut cluster = Cluster::start(binaries!(), three_replicas(DrainMode::Controller)).await?;
    let transitions = Transitions::start(cluster.client.clone());
    let next = cluster
        .apply_files_config("50-e2e-reboot", &[(REBOOT_FILE, "reboot: 1\n")])
        .await?;
    cluster.wait_targeted(&next, secs(30)).await?;
    let (leader, _) = wait_leader(&cluster, None, secs(5)).await?;
    cluster.companion.kill_replica(leader);
    let (successor, took) = wait_leader(&cluster, Some(leader), HANDOVER_LIMIT).await?;
    eprintln!("replica {leader} killed: replica {successor} leads after {took:?}");
    cluster.wait_pool_done_rebooting(&next, secs(180)).await?;
    transitions.check_once(&next)?;
    cluster.finish().await
}

/// The leader's connection to the API server cut mid-rollout: it stops acting by its renew
/// deadline (it says so), another replica takes over within the lease duration and finishes
/// the rollout; with its connection back, the old leader follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_from_the_api_steps_down_and_another_takes_over() -> anyhow::Result<()> {
    let mut cluster = Cluster::start(binaries!(), three_replicas(DrainMode::Controller)).await?;
    let transitions = Transitions::start(cluster.client.clone());
    let next = cluster
        .apply_files_config("50-e2e-reboot", &[(REBOOT_FILE, "reboot: 1\n")])
        .await?;
    cluster.wait_targeted(&next, secs(30)).await?;
    let (leader, _) = wait_leader(&cluster, None, secs(5)).await?;
    cluster.companion.cut_api(leader)?;
    let (successor, took) = wait_leader(&cluster, Some(leader), HANDOVER_LIMIT).await?;
    eprintln!("replica {leader} cut off: replica {successor} leads after {took:?}");
    let stepped_down = cluster.companion.log_lines(leader, "lost the leadership");
    ensure!(
        !stepped_down.is_empty(),
        "replica {leader} never said it stopped leading:\n{}",
        cluster.companion.logs()
    );
    cluster.companion.restore_api(leader)?;
    cluster.wait_pool_done_rebooting(&next, secs(180)).await?;
    ensure!(
        Companion::leader(&cluster.client).await? == Some(successor),
        "the leadership moved again after the connection came back"
    );
    transitions.check_once(&next)?;
    cluster.finish().await
}

/// Every replica restarted in turn (SIGTERM, as a rolling update does) during a rollout: each
/// stops within the grace period, a leader that stops hands the Lease over at once (released,
/// not left to expire), and the rollout finishes without harm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_during_a_rollout_loses_nothing() -> anyhow::Result<()> {
    let mut cluster = Cluster::start(binaries!(), three_replicas(DrainMode::Agent)).await?;
    let transitions = Transitions::start(cluster.client.clone());
    let next = cluster.change_base_file("base: 2\n").await?;
    cluster.wait_targeted(&next, secs(30)).await?;
    for i in 0..3 {
        let leader = Companion::leader(&cluster.client).await?;
        let stopped =
            tokio::task::block_in_place(|| cluster.companion.terminate_replica(i, secs(25)))?;
        if leader == Some(i) {
            ensure!(
                !cluster
                    .companion
                    .log_lines(i, "released the leader Lease")
                    .is_empty(),
                "replica {i} led and did not release the Lease:\n{}",
                cluster.companion.logs()
            );
            // released: the next leader takes it at its next try, not a lease duration later
            let (successor, took) = wait_leader(&cluster, Some(i), secs(4)).await?;
            eprintln!(
                "replica {i} stopped in {stopped:?}; replica {successor} leads after {took:?}"
            );
        }
        tokio::task::block_in_place(|| cluster.companion.start_replica(i))?;
    }
    cluster.wait_pool_done(&next, secs(90)).await?;
    transitions.check_once(&next)?;
    cluster.finish().await
}

/// Every replica restarted in turn while 24 machines fetch their first-boot config through the
/// front, retrying as Ignition does: every fetch ends with the config.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_during_a_first_boot_burst_fails_no_retried_fetch() -> anyhow::Result<()>
{
    let mut cluster = Cluster::start(
        binaries!(),
        Spec {
            nodes: 1,
            ..three_replicas(DrainMode::Agent)
        },
    )
    .await?;
    let config = mco_test_support::tls::ignition_like_client_config(cluster.companion.ca_pem())?;
    let front = cluster
        .companion
        .url()
        .rsplit(':')
        .next()
        .context("the front's port")?
        .parse::<u16>()?;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut machines = Vec::new();
    for m in 0..24u8 {
        let (config, done) = (config.clone(), done.clone());
        machines.push(tokio::spawn(async move {
            // each machine fetches again and again until the restarts are over: every fetch
            // retried (as Ignition retries) until it got the config
            let (mut fetches, mut retries) = (0u32, 0u32);
            let source = std::net::Ipv4Addr::new(127, 2, 0, m + 1);
            loop {
                let started = Instant::now();
                loop {
                    let got = https_get::get(
                        config.clone(),
                        Some(source),
                        "127.0.0.1",
                        front,
                        "127.0.0.1",
                        "/config/worker",
                        &[("Accept", IGNITION_ACCEPT)],
                    )
                    .await;
                    match got {
                        Ok(got) if got.status == 200 && got.body_bytes > 0 => break,
                        other => {
                            retries += 1;
                            anyhow::ensure!(
                                started.elapsed() < Duration::from_secs(60),
                                "machine {m}: no config within 60 s, last: {other:?}"
                            );
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                    }
                }
                fetches += 1;
                if done.load(std::sync::atomic::Ordering::SeqCst) {
                    return Ok((fetches, retries));
                }
            }
        }));
    }
    for i in 0..3 {
        tokio::task::block_in_place(|| cluster.companion.terminate_replica(i, secs(25)))?;
        tokio::task::block_in_place(|| cluster.companion.start_replica(i))?;
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let (mut fetches, mut retries) = (0, 0);
    for machine in machines {
        let (f, r) = machine.await??;
        fetches += f;
        retries += r;
    }
    eprintln!("{fetches} fetches through 3 restarts, {retries} retried");
    ensure!(fetches >= 24, "only {fetches} fetches");
    cluster.finish().await
}
