//! A stop request ([`crate::stop`]) between and inside the steps of an update, and rpm-ostree
//! queueing a reboot while the agent works: nothing new begins, a failure the stop may have
//! caused is not recorded, and the next start (or boot) converges from the record.
//!
//! An update that waits to be dropped never ends: the tests run it under paused time, where a
//! timeout fires as soon as nothing else can happen, and check that it did not end.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use machine_config::mco::NodeState;

use super::*;
use crate::engine::{Outcome, UpdateReport};
use crate::host::reboot::{RebootError, Rebooter};
use crate::os::OsCall;
use crate::stop::StopFlag;

fn a() -> MachineConfig {
    mc("rendered-a", &[(CRIO_POLICY, "{}\n")], &[], IMAGE)
}

/// A reboot update from `a`: a file and a kernel argument.
fn b() -> MachineConfig {
    mc(
        "rendered-b",
        &[(CRIO_POLICY, "{}\n"), (REBOOT_FILE, "b\n")],
        &["mitigations=off"],
        IMAGE,
    )
}

/// Runs `update` until it ends, or until nothing more can happen (paused time): `None` when
/// it is waiting to be dropped.
async fn run_until_idle(
    update: impl std::future::Future<Output = UpdateReport>,
) -> Option<UpdateReport> {
    tokio::time::timeout(Duration::from_secs(3600), update)
        .await
        .ok()
}

#[tokio::test(start_paused = true)]
async fn no_update_begins_after_a_stop() {
    let node = Node::new();
    node.provision(&a()).await;
    let stop = StopFlag::detached();
    stop.request();
    let engine = node.engine().with_stop(stop);
    let ended = run_until_idle(engine.update(&b(), false)).await;
    assert!(ended.is_none(), "the update ran after the stop: {ended:?}");
    assert_eq!(node.recorded_step(), None, "an update was recorded");
    assert_eq!(node.read(REBOOT_FILE), None);
    assert!(node.os.calls().is_empty(), "{:?}", node.os.calls());
}

/// A rebooter that fails because the stop it requests is under way (as the FinalizeDeployment
/// of an rpm-ostree going down with a shutdown would).
struct StoppedWhileRebooting(StopFlag);

#[async_trait]
impl Rebooter for StoppedWhileRebooting {
    async fn reboot(&self, _reason: &str) -> Result<(), RebootError> {
        self.0.request();
        Err(RebootError::Blocked {
            holders: "the shutdown under way".into(),
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_step_that_fails_while_stopping_is_not_recorded_and_runs_again_at_the_next_start() {
    let node = Node::new();
    node.provision(&a()).await;
    let stop = StopFlag::detached();
    let seams = Seams {
        rebooter: Some(Arc::new(StoppedWhileRebooting(stop.clone()))),
        ..node.seams()
    };
    let engine = node.engine_with(seams).with_stop(stop);
    let ended = run_until_idle(engine.update(&b(), false)).await;
    assert!(ended.is_none(), "the update ended: {ended:?}");
    // Not rolled back: the record stays at the step the stop came in, files and OS staged.
    assert_eq!(node.recorded_step().as_deref(), Some("RebootRequested"));
    assert_eq!(node.read(REBOOT_FILE).as_deref(), Some("b\n"));
    assert!(
        node.cluster
            .last_state()
            .is_none_or(|(s, _)| s != NodeState::Degraded)
    );

    // The next start asks for the reboot again; the boot into the update is verified.
    let report = node.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Rebooting, "{report:?}");
    assert_eq!(node.rebooter.reasons().len(), 1);
    node.reboot(false);
    let report = node.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:?}");
    assert_eq!(node.current().as_deref(), Some("rendered-b"));
}

#[tokio::test]
async fn rpm_ostree_queueing_a_reboot_makes_the_update_wait_for_it_then_converge() {
    let node = Node::new();
    node.provision(&a()).await;
    // Another client's `--reboot` transaction: rpm-ostreed refuses everything new.
    node.os.queue_reboot();
    let report = node.engine().update(&b(), false).await;
    assert_eq!(report.outcome, Outcome::Rebooting, "{report:?}");
    // Neither failed nor rolled back: the files are written, the record waits at the OS step.
    assert_eq!(node.recorded_step().as_deref(), Some("Os"));
    assert_eq!(node.read(REBOOT_FILE).as_deref(), Some("b\n"));
    assert_eq!(node.rebooter.reasons().len(), 0);
    assert!(
        !node
            .os
            .calls()
            .iter()
            .any(|c| matches!(c, OsCall::Rollback)),
        "{:?}",
        node.os.calls()
    );
    assert!(
        node.cluster
            .last_state()
            .is_none_or(|(s, _)| s != NodeState::Degraded)
    );

    // That reboot boots the deployment from before: the OS changes are staged again, and the
    // agent's own reboot brings the node into the update.
    node.reboot(false);
    let report = node.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Rebooting, "{report:?}");
    assert_eq!(node.rebooter.reasons().len(), 1);
    node.reboot(false);
    let report = node.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:?}");
    assert_eq!(node.current().as_deref(), Some("rendered-b"));
}
