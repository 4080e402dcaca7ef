//! The cluster end-to-end scenarios: each one short function over the [`Cluster`] fixture
//! (three nodes provisioned through Ignition, `maxUnavailable: 1`), with the pool's
//! availability sampled throughout and checked by `finish`.

use mco_cluster_tests::{Cluster, Spec, binaries, secs};

/// Successive files-only rollouts complete: every node Done on the new config,
/// `updatedMachineCount` equal to the pool size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn successive_files_only_rollouts_complete() -> anyhow::Result<()> {
    let cluster = Cluster::start(binaries!(), Spec::default()).await?;
    for n in 2..=4 {
        let next = cluster.change_base_file(&format!("base: {n}\n")).await?;
        let took = cluster.wait_pool_done(&next, secs(60)).await?;
        eprintln!("rollout {n}: {next} on every node in {took:?}");
    }
    cluster.finish().await
}
