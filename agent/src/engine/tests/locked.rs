//! Finalization-locked staging: the OS changes are released with `FinalizeDeployment` by the
//! real rebooter (over fakes of systemd, logind and rpm-ostree), and a reboot the agent did
//! not ask for drops them, after which the engine stages them again and converges without a
//! rollback or a Degraded state.

use machine_config::mco::NodeState;

use super::*;
use crate::engine::fake::ClusterCall;
use crate::engine::record::{self, Step, UpdateRecord};
use crate::engine::{Outcome, backups};
use crate::host::reboot::{FINALIZE_STAGED_UNIT, FakeLoginManager, LogindRebooter};
use crate::os::{KargsChange, OsCall, OsImage, OsUpdater};

const NEW_IMAGE: &str = "quay.io/example/os@sha256:2222";

fn a() -> MachineConfig {
    mc("rendered-a", &[(CRIO_POLICY, "{}\n")], &[], IMAGE)
}

/// A new image and a kernel argument: two transactions.
fn b() -> MachineConfig {
    mc(
        "rendered-b",
        &[(CRIO_POLICY, "[]\n"), (REBOOT_FILE, "b\n")],
        &["nosmt"],
        NEW_IMAGE,
    )
}

struct Locked {
    node: Node,
    login: Arc<FakeLoginManager>,
}

impl Locked {
    /// A node in `a`, whose rpm-ostree client stages with `lock-finalization`.
    async fn new() -> Self {
        let mut node = Node::new();
        node.os = Arc::new(
            FakeOsUpdater::booted("rhcos", IMAGE, "root=LABEL=root rw")
                .with_lock_finalization(true),
        );
        node.provision(&a()).await;
        Locked {
            node,
            login: Arc::new(FakeLoginManager::new()),
        }
    }

    /// The agent's real rebooter over fakes: the finalize service is active.
    fn engine(&self) -> Engine {
        let systemd = FakeSystemd::new().with_unit(FINALIZE_STAGED_UNIT, ActiveState::Active);
        let rebooter = LogindRebooter::new(Arc::new(systemd), self.login.clone(), self.node.path())
            .with_os_updater(self.node.os.clone());
        self.node.engine_with(Seams {
            rebooter: Some(Arc::new(rebooter)),
            ..self.node.seams()
        })
    }

    fn finalizations(&self) -> usize {
        self.node
            .os
            .calls()
            .iter()
            .filter(|c| matches!(c, OsCall::FinalizeDeployment(_)))
            .count()
    }

    fn never_degraded(&self) {
        let degraded: Vec<_> = self
            .node
            .cluster
            .calls()
            .into_iter()
            .filter(|c| matches!(c, ClusterCall::Report(NodeState::Degraded, _)))
            .collect();
        assert!(degraded.is_empty(), "{degraded:?}");
    }

    /// Records the update to `b` at `step` as a crash after the image was staged leaves it:
    /// files written, the rebase staged (locked), the kernel arguments not yet.
    async fn crashed_between_transactions(&self, step: Step, reboot_requested: bool) {
        let root = Root::open(self.node.path()).unwrap();
        let base = self.node.os.deployments().booted().unwrap().id.clone();
        let mut rec = UpdateRecord::new(a(), b(), step, "boot-1");
        backups::prepare(
            &root,
            &mut rec,
            &a().ignition().unwrap(),
            &b().ignition().unwrap(),
        )
        .unwrap();
        rec.os_staged = true;
        rec.reboot = true;
        rec.os_base = Some(base);
        rec.reboot_requested = reboot_requested;
        record::store(&root, &rec).unwrap();
        self.node.write(CRIO_POLICY, "[]\n");
        self.node.write(REBOOT_FILE, "b\n");
        self.node
            .os
            .rebase(&OsImage::Registry(NEW_IMAGE.into()))
            .await
            .unwrap();
        assert!(
            self.node
                .os
                .deployments()
                .staged()
                .unwrap()
                .finalization_locked
        );
    }

    async fn assert_done_in_b(&self) {
        let booted = self.node.os.deployments().booted().unwrap().clone();
        assert_eq!(booted.image_url().as_deref(), Some(NEW_IMAGE));
        assert!(
            booted.kargs.as_deref().unwrap().contains("nosmt"),
            "{booted:?}"
        );
        assert_eq!(self.node.current().as_deref(), Some("rendered-b"));
        assert_eq!(self.node.recorded_step(), None);
        assert_eq!(self.node.read(REBOOT_FILE).as_deref(), Some("b\n"));
    }
}

#[tokio::test]
async fn the_update_is_released_with_finalize_deployment_and_done_after_the_boot() {
    let l = Locked::new().await;
    let report = l.engine().update(&b(), false).await;
    assert_eq!(report.outcome, Outcome::Rebooting, "{report:?}");
    let staged = l.node.os.deployments().staged().unwrap().clone();
    assert!(!staged.finalization_locked, "released");
    assert!(
        l.node
            .os
            .calls()
            .contains(&OsCall::FinalizeDeployment(staged.checksum.clone()))
    );
    // rpm-ostree reboots; logind is not asked directly.
    assert_eq!(l.node.os.reboots_requested(), 1);
    assert_eq!(l.login.reboots(), 0);
    assert_eq!(l.node.current().as_deref(), Some("rendered-a"));

    l.node.reboot(false);
    let report = l.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:?}");
    l.assert_done_in_b().await;
    l.never_degraded();
}

#[tokio::test]
async fn a_reboot_between_transactions_drops_the_staged_os_and_the_engine_stages_it_again() {
    let l = Locked::new().await;
    l.crashed_between_transactions(Step::Os, false).await;
    // The unplanned reboot: ostree drops the locked deployment.
    l.node.reboot(false);
    assert!(l.node.os.deployments().staged().is_none());
    assert_eq!(
        l.node
            .os
            .deployments()
            .booted()
            .unwrap()
            .image_url()
            .as_deref(),
        Some(IMAGE)
    );

    let report = l.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Rebooting, "{report:?}");
    assert_eq!(l.finalizations(), 1);
    // Nothing was rolled back: the desired files stayed.
    assert_eq!(l.node.read(REBOOT_FILE).as_deref(), Some("b\n"));

    l.node.reboot(false);
    let report = l.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:?}");
    l.assert_done_in_b().await;
    l.never_degraded();
}

#[tokio::test]
async fn a_reboot_before_ours_was_requested_stages_again() {
    let l = Locked::new().await;
    l.crashed_between_transactions(Step::RebootRequested, false)
        .await;
    l.node
        .os
        .kernel_args(None, &KargsChange::from_argv(&["--append=nosmt"]).unwrap())
        .await
        .unwrap();
    l.node.reboot(false);
    let report = l.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Rebooting, "{report:?}");
    l.node.reboot(false);
    assert_eq!(l.engine().resume().await.unwrap().outcome, Outcome::Done);
    l.assert_done_in_b().await;
    l.never_degraded();
}

/// The power lost during the shutdown of the reboot the agent asked for, before the staged
/// deployment was finalized (found by the VM power-cut scenarios: the node stayed Degraded):
/// the old deployment boots, the OS changes are staged again and released once more, and the
/// update completes. A second lost reboot of the same update is not retried (no reboot loop).
#[tokio::test]
async fn a_requested_reboot_that_lost_the_deployment_stages_again_once() {
    let l = Locked::new().await;
    assert_eq!(
        l.engine().update(&b(), false).await.outcome,
        Outcome::Rebooting
    );
    l.node.reboot(true);
    let report = l.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Rebooting, "{report:?}");
    assert_eq!(l.finalizations(), 2, "released again");
    assert_eq!(
        l.node.read(REBOOT_FILE).as_deref(),
        Some("b\n"),
        "no rollback"
    );

    // Lost again: Degraded, not released a third time.
    l.node.reboot(true);
    let report = l.engine().resume().await.unwrap();
    assert!(
        matches!(&report.outcome, Outcome::Degraded(r) if r.contains("did not take after the reboot")),
        "{report:?}"
    );
    assert_eq!(l.node.recorded_step().as_deref(), Some("NotTaken"));
    assert_eq!(l.finalizations(), 2, "not released again");
    let report = l.engine().resume().await.unwrap();
    assert!(matches!(report.outcome, Outcome::Degraded(_)), "{report:?}");
    assert_eq!(l.finalizations(), 2, "no reboot loop");
}

#[tokio::test]
async fn after_a_lost_reboot_the_second_release_boots_into_the_update() {
    let l = Locked::new().await;
    assert_eq!(
        l.engine().update(&b(), false).await.outcome,
        Outcome::Rebooting
    );
    l.node.reboot(true);
    assert_eq!(
        l.engine().resume().await.unwrap().outcome,
        Outcome::Rebooting
    );
    l.node.reboot(false);
    assert_eq!(l.engine().resume().await.unwrap().outcome, Outcome::Done);
    l.assert_done_in_b().await;
    l.never_degraded();
}

#[tokio::test]
async fn a_restart_in_the_same_boot_after_the_release_reboots_through_logind() {
    let l = Locked::new().await;
    assert_eq!(
        l.engine().update(&b(), false).await.outcome,
        Outcome::Rebooting
    );
    // Killed before rpm-ostree's reboot happened: the deployment is unlocked now, so logind.
    let report = l.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Rebooting, "{report:?}");
    assert_eq!(l.finalizations(), 1);
    assert_eq!(l.login.reboots(), 1);
    l.node.reboot(false);
    assert_eq!(l.engine().resume().await.unwrap().outcome, Outcome::Done);
    l.assert_done_in_b().await;
}
