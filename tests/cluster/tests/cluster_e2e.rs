//! The cluster end-to-end scenarios: each one short function over the [`Cluster`] fixture
//! (three nodes provisioned through Ignition, `maxUnavailable: 1`), with the pool's
//! availability sampled throughout and checked by `finish` (no sample may see more than
//! `maxUnavailable` nodes unavailable).

use std::time::Duration;

use machine_config::mco::annotations::{CURRENT_CONFIG, LAST_APPLIED_DRAIN};
use machine_config::mco::paths::NODE_ANNOTATIONS_BAK;
use mco_cluster_tests::cluster::BASE_FILE;
use mco_cluster_tests::{Cluster, DrainMode, Spec, binaries, secs};
use serde_json::json;

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

/// A file the cluster's policy (set by the scenario) updates without a drain or a reboot.
const POLICY_FILE: &str = "/etc/mco-e2e/policy.conf";
/// A file no policy names: its change drains and reboots the node.
const REBOOT_FILE: &str = "/etc/mco-e2e/reboot.conf";

/// Scenario 1's other rollouts: a change the administrator made rebootless with a policy in
/// `MachineConfiguration/cluster` completes without a drain or a reboot (the agents run with
/// `--skip-reboot`: a reboot would leave them waiting, never Done), each plan naming the
/// cluster's entry; then a change that needs a reboot completes with one reboot per node
/// (simulated: the agent stopped, a new boot id, the agent started again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_made_rebootless_by_the_cluster_policy_and_one_with_a_reboot_complete()
-> anyhow::Result<()> {
    let mut cluster = Cluster::start(binaries!(), Spec::default()).await?;
    cluster
        .set_cluster_policy(
            json!({"files": [{"path": POLICY_FILE, "actions": [{"type": "None"}]}]}),
        )
        .await?;
    let rebootless = cluster
        .apply_files_config("50-e2e-policy", &[(POLICY_FILE, "policy: 1\n")])
        .await?;
    cluster.wait_pool_done(&rebootless, secs(60)).await?;
    for name in cluster.node_names() {
        let logs = cluster.node(&name).logs();
        anyhow::ensure!(
            logs.contains(&format!(
                "{POLICY_FILE}: None (cluster policy {POLICY_FILE})"
            )),
            "{name}'s plan does not name the cluster's policy entry:\n{logs}"
        );
        anyhow::ensure!(
            !logs.contains("drain complete"),
            "{name} was drained:\n{logs}"
        );
    }
    anyhow::ensure!(
        cluster.boots().values().all(|b| *b == 1),
        "{:?}",
        cluster.boots()
    );

    let rebooting = cluster
        .apply_files_config("50-e2e-reboot", &[(REBOOT_FILE, "reboot: 1\n")])
        .await?;
    let took = cluster
        .wait_pool_done_rebooting(&rebooting, secs(120))
        .await?;
    eprintln!("{rebooting} with a reboot per node in {took:?}");
    anyhow::ensure!(
        cluster.boots().values().all(|b| *b == 2),
        "{:?}",
        cluster.boots()
    );
    for name in cluster.node_names() {
        anyhow::ensure!(cluster.node_read(&name, REBOOT_FILE).as_deref() == Some("reboot: 1\n"));
        anyhow::ensure!(cluster.node(&name).logs().contains("drain complete"));
        let drain = cluster.annotations(&name).await?[LAST_APPLIED_DRAIN].clone();
        anyhow::ensure!(drain == format!("uncordon-{rebooting}"), "{name}: {drain}");
    }
    cluster.finish().await
}

/// Scenario 3: a PodDisruptionBudget that blocks the first targeted node's drain stops the
/// rollout there, the node's reason naming the pod and the budget and no other node targeted;
/// once the budget allows it, the rollout completes (a drain and a reboot per node). Meanwhile
/// the nodes waiting to be targeted carry the `UpdateInProgress` taint, and none once all are.
async fn a_budget_blocks_the_rollout_at_one_node_until_it_allows(
    drain_mode: DrainMode,
) -> anyhow::Result<()> {
    let spec = Spec {
        drain_mode,
        ..Spec::default()
    };
    let mut cluster = Cluster::start(binaries!(), spec).await?;
    cluster.create_namespace("apps").await?;
    for name in cluster.node_names() {
        cluster
            .create_ready_pod("apps", &format!("web-{name}"), &name, &[("app", "web")])
            .await?;
    }
    let budget = json!({"maxUnavailable": 0});
    cluster
        .set_budget("apps", "web-budget", &[("app", "web")], budget)
        .await?;
    let next = cluster
        .apply_files_config("50-e2e-reboot", &[(REBOOT_FILE, "reboot: 1\n")])
        .await?;
    let targeted = cluster.wait_targeted(&next, secs(30)).await?;
    let blocked = &targeted[0];
    // The nodes still waiting to be targeted carry the UpdateInProgress taint, the targeted
    // one does not.
    let waiting: Vec<String> = cluster
        .node_names()
        .into_iter()
        .filter(|n| n != blocked)
        .collect();
    cluster.wait_tainted(&waiting, secs(30)).await?;
    let reason = cluster
        .wait_reason(blocked, "PodDisruptionBudget \"web-budget\"", secs(60))
        .await?;
    anyhow::ensure!(
        reason.contains(&format!(
            "pod apps/web-{blocked}: eviction refused by PodDisruptionBudget \"web-budget\""
        )),
        "{blocked}'s reason: {reason}"
    );
    // held there: a few drain attempts later, still the only node targeted, nobody updated
    tokio::time::sleep(Duration::from_secs(5)).await;
    anyhow::ensure!(
        cluster.targeted(&next).await? == [blocked.clone()],
        "targeted while {blocked} is blocked: {:?}",
        cluster.targeted(&next).await?
    );
    for name in cluster.node_names() {
        let current = cluster.annotations(&name).await?[CURRENT_CONFIG].clone();
        anyhow::ensure!(current != next, "{name} updated while the budget blocked");
    }
    anyhow::ensure!(
        cluster.tainted_update_in_progress().await? == waiting,
        "the UpdateInProgress taint moved while the rollout was held: {:?}",
        cluster.tainted_update_in_progress().await?
    );

    cluster
        .set_budget("apps", "web-budget", &[], json!({"maxUnavailable": 1}))
        .await?;
    let took = cluster.wait_pool_done_rebooting(&next, secs(180)).await?;
    eprintln!("{next} past the budget in {took:?}");
    // Every node was targeted: none keeps the taint.
    cluster.wait_tainted(&[], secs(30)).await?;
    cluster.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_blocks_an_agent_drain_until_it_allows() -> anyhow::Result<()> {
    a_budget_blocks_the_rollout_at_one_node_until_it_allows(DrainMode::Agent).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_blocks_a_drain_controller_drain_until_it_allows() -> anyhow::Result<()> {
    a_budget_blocks_the_rollout_at_one_node_until_it_allows(DrainMode::Controller).await
}
