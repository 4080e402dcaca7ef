//! The cluster end-to-end scenarios: each one short function over the [`Cluster`] fixture
//! (three nodes provisioned through Ignition, `maxUnavailable: 1`), with the pool's
//! availability sampled throughout and checked by `finish` (no sample may see more than
//! `maxUnavailable` nodes unavailable).

use std::time::Duration;

use machine_config::mco::annotations::LAST_APPLIED_DRAIN;
use machine_config::mco::paths::NODE_ANNOTATIONS_BAK;
use mco_cluster_tests::cluster::BASE_FILE;
use mco_cluster_tests::{Cluster, Spec, binaries, secs};

/// Successive files-only rollouts complete: every node Done on the new config,
/// `updatedMachineCount` equal to the pool size. (Before the agent named its `desiredConfig`
/// to the config server, the first rollout deadlocked: the server served the pool's old
/// config until a node had updated, and every agent refused it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn successive_files_only_rollouts_complete() -> anyhow::Result<()> {
    let cluster = Cluster::start(binaries!(), Spec::default()).await?;
    for n in 2..=4 {
        let next = cluster.change_base_file(&format!("base: {n}\n")).await?;
        let took = cluster.wait_pool_done(&next, secs(60)).await?;
        eprintln!("rollout {n}: {next} on every node in {took:?}");
        for name in cluster.node_names() {
            let on_disk = cluster.node_read(&name, BASE_FILE);
            anyhow::ensure!(
                on_disk.as_deref() == Some(format!("base: {n}\n").as_str()),
                "{name}: {BASE_FILE} is {on_disk:?}"
            );
        }
    }
    cluster.finish().await
}

/// A pool paused mid-rollout targets no further node; unpaused, the rollout finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_pool_stops_targeting_and_finishes_once_unpaused() -> anyhow::Result<()> {
    let cluster = Cluster::start(binaries!(), Spec::default()).await?;
    let next = cluster.change_base_file("base: 2\n").await?;
    cluster.wait_targeted(&next, secs(30)).await?;
    cluster.set_paused(true).await?;
    // what the controller targeted before it saw the pause, then nothing more
    tokio::time::sleep(Duration::from_millis(500)).await;
    let at_pause = cluster.targeted(&next).await?;
    tokio::time::sleep(secs(2)).await;
    let later = cluster.targeted(&next).await?;
    anyhow::ensure!(
        at_pause == later,
        "the paused pool targeted more nodes: {at_pause:?} then {later:?}"
    );
    anyhow::ensure!(
        later.len() < cluster.node_names().len(),
        "every node was targeted before the pause took effect: {later:?}"
    );
    cluster.set_paused(false).await?;
    cluster.wait_pool_done(&next, secs(60)).await?;
    cluster.finish().await
}

/// The change is reverted mid-rollout: the pool renders the previous config again, the nodes
/// already targeted have their `desiredConfig` moved back to it, and every node ends Done on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_desired_config_moved_back_mid_rollout_retargets_cleanly() -> anyhow::Result<()> {
    let cluster = Cluster::start(binaries!(), Spec::default()).await?;
    let first = cluster.pool().await?.spec.configuration.name;
    let next = cluster.change_base_file("base: 2\n").await?;
    let targeted = cluster.wait_targeted(&next, secs(30)).await?;
    let back = cluster.change_base_file("base: 1\n").await?;
    anyhow::ensure!(back == first, "reverting rendered {back}, not {first}");
    cluster.wait_pool_done(&first, secs(60)).await?;
    for name in cluster.node_names() {
        let on_disk = cluster.node_read(&name, BASE_FILE);
        anyhow::ensure!(
            on_disk.as_deref() == Some("base: 1\n"),
            "{name} (targeted at {next}: {}): {BASE_FILE} is {on_disk:?}",
            targeted.contains(&name)
        );
    }
    cluster.finish().await
}

/// The companion killed and restarted mid-rollout, then the API server dropping every watch
/// mid-rollout: the rollouts are delayed, nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_companion_restart_and_dropped_watches_lose_nothing() -> anyhow::Result<()> {
    let mut cluster = Cluster::start(binaries!(), Spec::default()).await?;
    let next = cluster.change_base_file("base: 2\n").await?;
    cluster.wait_targeted(&next, secs(30)).await?;
    cluster.kill_companion();
    tokio::time::sleep(secs(1)).await;
    cluster.start_companion()?;
    cluster.wait_pool_done(&next, secs(90)).await?;

    let after = cluster.change_base_file("base: 3\n").await?;
    cluster.wait_targeted(&after, secs(30)).await?;
    cluster.api.drop_watches()?;
    cluster.wait_pool_done(&after, secs(90)).await?;
    cluster.finish().await
}

/// A fresh node joins (first boot through the served files, then its Node registers) and a
/// node the MCO's daemon managed is taken over: both end Done without an annotation written by
/// hand, the adopted one without a drain and without its files rewritten; the next rollout
/// targets both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_node_and_an_adopted_mcd_node_end_done() -> anyhow::Result<()> {
    let spec = Spec {
        spare: 2,
        ..Spec::default()
    };
    let mut cluster = Cluster::start(binaries!(), spec).await?;
    let current = cluster.pool().await?.spec.configuration.name;
    let joined = cluster.join_node().await?;
    cluster.wait_pool_done(&current, secs(60)).await?;

    let adopted = cluster.adopt_mcd_node().await?;
    let base_file = cluster.node(&adopted).path(BASE_FILE);
    let written_at = std::fs::metadata(&base_file)?.modified()?;
    cluster.wait_pool_done(&current, secs(60)).await?;
    let drain = cluster.annotations(&adopted).await?[LAST_APPLIED_DRAIN].clone();
    anyhow::ensure!(
        drain == format!("uncordon-{current}"),
        "{adopted} was drained on adoption: lastAppliedDrain {drain}"
    );
    anyhow::ensure!(
        std::fs::metadata(&base_file)?.modified()? == written_at,
        "adopting {adopted} rewrote {BASE_FILE}"
    );
    anyhow::ensure!(cluster.node(&adopted).path(NODE_ANNOTATIONS_BAK).exists());

    let next = cluster.change_base_file("base: 2\n").await?;
    cluster.wait_pool_done(&next, secs(60)).await?;
    for name in [&joined, &adopted] {
        anyhow::ensure!(cluster.node_read(name, BASE_FILE).as_deref() == Some("base: 2\n"));
    }
    cluster.finish().await
}
