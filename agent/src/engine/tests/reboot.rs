//! Reboot updates: staged OS changes, the reboot request, verification after the boot.

use machine_config::mco::NodeState;

use super::*;
use crate::engine::Outcome;
use crate::engine::fake::ClusterCall;
use crate::os::{CleanupTarget, KargsChange, OsCall, OsUpdater};

fn a() -> MachineConfig {
    mc("rendered-a", &[(CRIO_POLICY, "{}\n")], &["nosmt"], IMAGE)
}

fn b() -> MachineConfig {
    mc(
        "rendered-b",
        &[(CRIO_POLICY, "{}\n"), (REBOOT_FILE, "b\n")],
        &["nosmt", "mitigations=off"],
        IMAGE,
    )
}

/// A node in `a` with the OS that goes with it.
async fn node_in_a() -> Node {
    let node = Node::new();
    node.provision(&mc("rendered-0", &[(CRIO_POLICY, "{}\n")], &[], IMAGE))
        .await;
    let r = node.engine().update(&a(), false).await;
    assert_eq!(r.outcome, Outcome::Rebooting);
    node.reboot(false);
    assert_eq!(node.engine().resume().await.unwrap().outcome, Outcome::Done);
    node
}

#[tokio::test]
async fn a_kargs_change_stages_reboots_and_commits_only_after_the_boot_is_verified() {
    let node = node_in_a().await;
    let before = node.os.calls().len();
    let report = node.engine().update(&b(), false).await;
    assert_eq!(report.outcome, Outcome::Rebooting, "{report:?}");
    assert!(!report.verified);
    assert_eq!(
        node.os.calls()[before..]
            .iter()
            .filter(|c| !matches!(c, OsCall::Status | OsCall::Resume))
            .cloned()
            .collect::<Vec<_>>(),
        vec![
            OsCall::Cleanup(vec![CleanupTarget::Pending]),
            OsCall::KernelArgs {
                existing: None,
                change: KargsChange::from_argv(&[
                    "--delete-if-present=nosmt",
                    "--append=nosmt",
                    "--append=mitigations=off"
                ])
                .unwrap(),
            },
        ]
    );
    assert_eq!(
        node.rebooter.reasons().last().unwrap(),
        "Node will reboot into config rendered-b"
    );
    assert!(
        node.cluster
            .calls()
            .contains(&ClusterCall::Drain("rendered-b".into()))
    );
    // Files are written, the OS is staged, but the node is not in rendered-b until it booted.
    assert_eq!(node.read(REBOOT_FILE).as_deref(), Some("b\n"));
    assert_eq!(node.current().as_deref(), Some("rendered-a"));
    assert_eq!(node.recorded_step().as_deref(), Some("RebootRequested"));

    node.reboot(false);
    let report = node.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:?}");
    // the report says it verified a recorded update (once-from words it so)
    assert!(report.verified && report.applied.is_none(), "{report:?}");
    assert_eq!(node.current().as_deref(), Some("rendered-b"));
    assert_eq!(node.recorded_step(), None);
    assert_eq!(
        node.cluster.calls().last(),
        Some(&ClusterCall::SetDone("rendered-b".into()))
    );
}

#[tokio::test]
async fn a_restart_before_the_reboot_requests_it_again() {
    let node = node_in_a().await;
    node.engine().update(&b(), false).await;
    let reboots = node.rebooter.reasons().len();
    let report = node.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Rebooting);
    assert_eq!(node.rebooter.reasons().len(), reboots + 1);
    assert_eq!(node.current().as_deref(), Some("rendered-a"));
}

/// The reboots into the update boot the deployment from before it, twice: the first time the
/// OS changes are staged again (a power cut before the staged deployment was finalized), the
/// second time the update did not take.
async fn lose_the_reboot_twice(node: &Node) {
    node.reboot(true);
    let report = node.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Rebooting, "{report:?}");
    node.reboot(true);
}

#[tokio::test]
async fn a_reboot_that_did_not_take_degrades_with_what_is_missing_and_never_commits() {
    let node = node_in_a().await;
    node.engine().update(&b(), false).await;
    lose_the_reboot_twice(&node).await;
    let report = node.engine().resume().await.unwrap();
    assert_eq!(
        report.outcome,
        Outcome::Degraded(
            "update to rendered-b did not take after the reboot: missing expected kernel arguments: [mitigations=off]".into()
        )
    );
    assert!(!report.verified);
    assert_eq!(node.current().as_deref(), Some("rendered-a"));
    assert_eq!(node.recorded_step().as_deref(), Some("NotTaken"));
    assert_eq!(node.cluster.last_state().unwrap().0, NodeState::Degraded);
    // No reboot loop: a restart verifies again and stays Degraded.
    let reboots = node.rebooter.reasons().len();
    let report = node.engine().resume().await.unwrap();
    assert!(matches!(report.outcome, Outcome::Degraded(_)));
    assert_eq!(node.rebooter.reasons().len(), reboots);

    // The force file recovers it: current is still rendered-a, so the kernel arguments are
    // staged again (the MCD's #5133 could not).
    let report = node.engine().update(&b(), true).await;
    assert_eq!(report.outcome, Outcome::Rebooting, "{report:?}");
    node.reboot(false);
    assert_eq!(node.engine().resume().await.unwrap().outcome, Outcome::Done);
    assert_eq!(node.current().as_deref(), Some("rendered-b"));
}

/// A reboot that did not take is verified again at each start: once a later boot runs the
/// update (here the kernel arguments, set by hand, and a reboot), it is committed.
#[tokio::test]
async fn an_update_that_did_not_take_is_committed_once_a_later_boot_runs_it() {
    let node = node_in_a().await;
    node.engine().update(&b(), false).await;
    lose_the_reboot_twice(&node).await;
    let report = node.engine().resume().await.unwrap();
    assert!(matches!(report.outcome, Outcome::Degraded(_)), "{report:?}");
    assert_eq!(node.recorded_step().as_deref(), Some("NotTaken"));
    node.os
        .kernel_args(
            None,
            &KargsChange::from_argv(&["--append=mitigations=off"]).unwrap(),
        )
        .await
        .unwrap();
    node.reboot(false);
    let report = node.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:?}");
    assert!(report.verified);
    assert_eq!(node.current().as_deref(), Some("rendered-b"));
    assert_eq!(node.recorded_step(), None);
}

#[tokio::test]
async fn desired_going_back_to_current_retargets_cleanly() {
    let node = node_in_a().await;
    node.engine().update(&b(), false).await;
    lose_the_reboot_twice(&node).await;
    assert!(matches!(
        node.engine().resume().await.unwrap().outcome,
        Outcome::Degraded(_)
    ));
    let report = node.engine().update(&a(), false).await;
    assert_eq!(report.outcome, Outcome::Done, "{report:?}");
    assert_eq!(node.read(REBOOT_FILE), None);
    assert_eq!(node.current().as_deref(), Some("rendered-a"));
    assert_eq!(node.recorded_step(), None);
    assert_eq!(
        node.cluster.last_state(),
        Some((NodeState::Done, String::new()))
    );
}

#[tokio::test]
async fn skip_reboot_leaves_the_update_waiting_for_a_reboot() {
    let node = node_in_a().await;
    let seams = Seams {
        rebooter: None,
        no_reboot: "--skip-reboot".into(),
        ..node.seams()
    };
    let reboots = node.rebooter.reasons().len();
    let report = node.engine_with(seams.clone()).update(&b(), false).await;
    assert_eq!(report.outcome, Outcome::NeedsReboot);
    assert_eq!(node.rebooter.reasons().len(), reboots);
    assert_eq!(node.recorded_step().as_deref(), Some("RebootRequested"));
    // Run again in the same boot: still waiting.
    assert_eq!(
        node.engine_with(seams.clone())
            .update(&b(), false)
            .await
            .outcome,
        Outcome::NeedsReboot
    );
    node.reboot(false);
    assert_eq!(
        node.engine_with(seams).resume().await.unwrap().outcome,
        Outcome::Done
    );
    assert_eq!(node.current().as_deref(), Some("rendered-b"));
}

#[tokio::test]
async fn a_failed_os_change_is_cleaned_up_and_rolled_back() {
    let node = node_in_a().await;
    node.os
        .fail_next("KernelArgs", "error: Invalid kernel argument");
    let report = node.engine().update(&b(), false).await;
    match &report.outcome {
        Outcome::Degraded(r) => assert!(r.contains("changing the kernel arguments"), "{r}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(node.read(REBOOT_FILE), None);
    let cleanups = node
        .os
        .calls()
        .iter()
        .filter(|c| matches!(c, OsCall::Cleanup(_)))
        .count();
    assert!(cleanups >= 2, "{:?}", node.os.calls());
    assert_eq!(node.recorded_step(), None);
    // The retry works.
    assert_eq!(
        node.engine().update(&b(), false).await.outcome,
        Outcome::Rebooting
    );
}

#[tokio::test]
async fn a_refused_reboot_rolls_back() {
    let node = node_in_a().await;
    node.rebooter.refuse("Operation not permitted");
    let report = node.engine().update(&b(), false).await;
    match &report.outcome {
        Outcome::Degraded(r) => assert!(
            r.starts_with("reboot command failed, something is seriously wrong"),
            "{r}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(node.read(REBOOT_FILE), None);
    assert_eq!(node.recorded_step(), None);
}
