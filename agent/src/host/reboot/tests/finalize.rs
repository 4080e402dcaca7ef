//! The rebooter with an rpm-ostree connection: a finalization-locked staged deployment is
//! released with `FinalizeDeployment` after the same checks a logind reboot gets.

use std::sync::Arc;

use crate::host::systemd::{ActiveState, FakeSystemd, SystemdCall};
use crate::os::{FakeOsUpdater, KargsChange, OsCall, OsUpdater};

use super::super::*;
use super::{Host, finalize, lock};

const IMAGE: &str = "quay.io/example/os@sha256:1111";

/// A booted node whose client stages with `lock-finalization` when `locked`, with a kernel
/// argument change staged.
async fn staged_os(locked: bool) -> Arc<FakeOsUpdater> {
    let os =
        FakeOsUpdater::booted("rhcos", IMAGE, "root=LABEL=root rw").with_lock_finalization(locked);
    os.kernel_args(None, &KargsChange::from_argv(&["--append=nosmt"]).unwrap())
        .await
        .unwrap();
    Arc::new(os)
}

fn staged_checksum(os: &FakeOsUpdater) -> String {
    os.deployments().staged().expect("staged").checksum.clone()
}

fn finalize_calls(os: &FakeOsUpdater) -> Vec<String> {
    os.calls()
        .into_iter()
        .filter_map(|c| match c {
            OsCall::FinalizeDeployment(checksum) => Some(checksum),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_locked_staged_deployment_is_released_with_finalize_deployment_after_the_checks() {
    let os = staged_os(true).await;
    let host = Host::new(finalize(ActiveState::Active), FakeLoginManager::new());
    host.rebooter()
        .with_os_updater(os.clone())
        .reboot("Node will reboot into config rendered-worker-2")
        .await
        .expect("reboot");
    // rpm-ostree reboots, not logind (directly).
    assert_eq!(finalize_calls(&os), [staged_checksum(&os)]);
    assert_eq!(os.reboots_requested(), 1);
    assert_eq!(host.login.reboots(), 0);
    assert_eq!(
        host.systemd.calls(),
        vec![SystemdCall::ActiveState(FINALIZE_STAGED_UNIT.into())]
    );
    assert_eq!(
        host.reason().as_deref(),
        Some("Node will reboot into config rendered-worker-2")
    );
    // Released: the next boot gets it.
    assert!(os.reboot());
    assert!(
        os.deployments()
            .booted()
            .unwrap()
            .kargs
            .as_deref()
            .unwrap()
            .contains("nosmt")
    );
}

#[tokio::test]
async fn a_block_lock_or_an_inactive_finalize_service_keeps_the_deployment_locked() {
    let os = staged_os(true).await;
    let login = FakeLoginManager::new().with_inhibitor(lock("shutdown", "backup-job", "block"));
    let host = Host::new(finalize(ActiveState::Active), login);
    let err = host
        .rebooter()
        .with_os_updater(os.clone())
        .reboot("x")
        .await
        .expect_err("blocked");
    assert!(matches!(err, RebootError::Blocked { .. }), "{err}");
    assert!(finalize_calls(&os).is_empty());
    assert_eq!(host.reason(), None);

    let host = Host::new(FakeSystemd::new(), FakeLoginManager::new());
    let err = host
        .rebooter()
        .with_os_updater(os.clone())
        .reboot("x")
        .await
        .expect_err("no finalize service");
    assert!(
        matches!(err, RebootError::FinalizeServiceMissing { .. }),
        "{err}"
    );
    assert!(finalize_calls(&os).is_empty());
    assert!(os.deployments().staged().unwrap().finalization_locked);
}

#[tokio::test]
async fn delay_locks_are_logged_and_the_release_goes_ahead() {
    let os = staged_os(true).await;
    let login = FakeLoginManager::new().with_inhibitor(lock("shutdown", "kubelet", "delay"));
    let host = Host::new(finalize(ActiveState::Active), login);
    host.rebooter()
        .with_os_updater(os.clone())
        .reboot("x")
        .await
        .expect("reboot");
    assert_eq!(os.reboots_requested(), 1);
}

#[tokio::test]
async fn an_unlocked_staged_deployment_reported_by_rpm_ostree_reboots_through_logind() {
    let os = staged_os(false).await;
    // No ostree marker under the root: rpm-ostree's word is enough to check the service.
    let host = Host::new(finalize(ActiveState::Active), FakeLoginManager::new());
    host.rebooter()
        .with_os_updater(os.clone())
        .reboot("x")
        .await
        .expect("reboot");
    assert_eq!(host.login.reboots(), 1);
    assert!(finalize_calls(&os).is_empty());
    assert_eq!(
        host.systemd.calls(),
        vec![SystemdCall::ActiveState(FINALIZE_STAGED_UNIT.into())]
    );
}

#[tokio::test]
async fn nothing_staged_reboots_through_logind_without_touching_systemd() {
    let os = Arc::new(FakeOsUpdater::booted("rhcos", IMAGE, "rw"));
    let host = Host::new(finalize(ActiveState::Inactive), FakeLoginManager::new());
    host.rebooter()
        .with_os_updater(os.clone())
        .reboot("x")
        .await
        .expect("reboot");
    assert_eq!(host.login.reboots(), 1);
    assert!(host.systemd.calls().is_empty());
    assert!(finalize_calls(&os).is_empty());
}

#[tokio::test]
async fn rpm_ostree_failures_refuse_the_reboot_and_say_so() {
    let os = staged_os(true).await;
    os.fail_next("Status", "Connection refused");
    let host = Host::new(finalize(ActiveState::Active), FakeLoginManager::new());
    let err = host
        .rebooter()
        .with_os_updater(os.clone())
        .reboot("x")
        .await
        .expect_err("no status");
    assert!(
        err.to_string()
            .starts_with("refusing to reboot: could not read rpm-ostree's deployments"),
        "{err}"
    );
    assert_eq!(host.login.reboots(), 0);

    os.fail_next(
        "FinalizeDeployment",
        "Expected staged base checksum x, but found y",
    );
    let err = host
        .rebooter()
        .with_os_updater(os.clone())
        .reboot("x")
        .await
        .expect_err("finalize failed");
    let checksum = staged_checksum(&os);
    assert!(
        err.to_string().starts_with(&format!(
            "releasing the staged deployment {checksum} with FinalizeDeployment failed: "
        )) && err.to_string().contains("Expected staged base checksum x"),
        "{err}"
    );
    assert_eq!(host.login.reboots(), 0, "never falls back to logind");
}

#[tokio::test]
async fn a_locked_deployment_without_rpm_ostree_is_never_rebooted_away() {
    let host = Host::new(finalize(ActiveState::Active), FakeLoginManager::new());
    host.stage_deployment();
    let locked = host.root.path().join(STAGED_LOCKED_MARKER);
    std::fs::write(&locked, b"").unwrap();
    let err = host.rebooter().reboot("x").await.expect_err("locked");
    assert!(
        matches!(err, RebootError::LockedWithoutRpmOstree { .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("staged-deployment-locked"),
        "{err}"
    );
    assert_eq!(host.login.reboots(), 0);
    assert_eq!(host.reason(), None);
}
