//! What callers of `OsUpdater` can rely on, shown on the fake.

use std::sync::Arc;

use super::*;
use crate::os::{check_kernel_args, check_os_image};

const OLD: &str = "quay.io/ocp/rhcos@sha256:aaaa";
const NEW: &str = "quay.io/ocp/rhcos@sha256:bbbb";

fn node() -> FakeOsUpdater {
    FakeOsUpdater::booted(
        "rhcos",
        OLD,
        "root=UUID=1 rw ostree=/ostree/boot.0/rhcos/x/0",
    )
}

fn argv(a: &[&str]) -> KargsChange {
    KargsChange::from_argv(a).unwrap()
}

#[tokio::test]
async fn kargs_change_stages_a_deployment_and_keeps_the_booted_one() {
    let os = node();
    let out = os
        .kernel_args(None, &argv(&["--append=nosmt", "--append=hugepages=2"]))
        .await
        .unwrap();
    assert!(out.started_here && out.messages.is_empty());
    let s = os.status().await.unwrap();
    let staged = s.staged().unwrap();
    assert_eq!(s.pending().unwrap().id, staged.id);
    assert_eq!(
        staged.kargs.as_deref(),
        Some("root=UUID=1 rw ostree=/ostree/boot.0/rhcos/x/0 nosmt hugepages=2")
    );
    assert_eq!(staged.checksum, s.booted().unwrap().checksum);
    assert_eq!(staged.serial, 1);
    assert_eq!(
        os.kargs(KargsTarget::Booted).await.unwrap().options,
        "root=UUID=1 rw ostree=/ostree/boot.0/rhcos/x/0"
    );
    let pending = os.kargs(KargsTarget::Pending).await.unwrap();
    assert!(pending.staged);
    // A second change replaces the staged deployment, building on it.
    os.kernel_args(
        None,
        &argv(&["--delete-if-present=hugepages=2", "--append=hugepages=4"]),
    )
    .await
    .unwrap();
    let s = os.status().await.unwrap();
    assert_eq!(s.deployments.len(), 2);
    let expected = ["nosmt hugepages=4".to_string()];
    check_kernel_args(&expected, s.staged().unwrap().kargs.as_deref().unwrap()).unwrap();
    assert!(matches!(
        os.calls()[0],
        OsCall::KernelArgs { existing: None, .. }
    ));
}

#[tokio::test]
async fn kargs_no_op_unchanged_and_conflict() {
    let os = node();
    let out = os.kernel_args(None, &KargsChange::default()).await.unwrap();
    assert!(!out.started_here);
    let out = os
        .kernel_args(None, &argv(&["--append-if-missing=rw"]))
        .await
        .unwrap();
    assert_eq!(out.messages, ["No changes."]);
    assert_eq!(os.status().await.unwrap().deployments.len(), 1);
    let err = os
        .kernel_args(Some("stale"), &argv(&["--append=x"]))
        .await
        .unwrap_err();
    assert!(matches!(err, OsError::KargsConflict { .. }), "{err}");
    let err = os
        .kernel_args(None, &argv(&["--delete=absent"]))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("rpm-ostree KernelArgs transaction failed:"),
        "{err}"
    );
}

#[tokio::test]
async fn rebase_then_reboot_runs_the_new_image() {
    let os = node();
    os.kernel_args(None, &argv(&["--append=nosmt"]))
        .await
        .unwrap();
    os.rebase(&OsImage::Registry(NEW.into())).await.unwrap();
    let s = os.status().await.unwrap();
    assert_eq!(
        s.deployments.len(),
        2,
        "one staged deployment with both changes"
    );
    let staged = s.staged().unwrap();
    assert_eq!(staged.image_url().as_deref(), Some(NEW));
    assert!(staged.kargs.as_deref().unwrap().ends_with(" nosmt"));
    // Already the next image: nothing to do.
    assert!(
        !os.rebase(&OsImage::Registry(NEW.into()))
            .await
            .unwrap()
            .started_here
    );

    assert!(os.reboot());
    let s = os.status().await.unwrap();
    let booted = s.booted().unwrap();
    check_os_image(NEW, booted).unwrap();
    assert_eq!(
        s.deployments[1].image_url().as_deref(),
        Some(OLD),
        "rollback"
    );
    assert!(!os.reboot(), "nothing staged");
}

#[tokio::test]
async fn package_changes_and_rpm_ostree_refusals() {
    let os = node();
    let rt = PackageChange::kernel_type("realtime").unwrap().unwrap();
    os.update_deployment(&rt).await.unwrap();
    let err = os.update_deployment(&rt).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "rpm-ostree UpdateDeployment transaction failed: Package/capability 'kernel-rt-core' is already requested"
    );
    let s = os.status().await.unwrap();
    let revert = PackageChange::revert_kernel(s.staged().unwrap()).unwrap();
    os.update_deployment(&revert).await.unwrap();
    let s = os.status().await.unwrap();
    assert!(s.staged().unwrap().requested_packages.is_empty());
    let err = os.update_deployment(&revert).await.unwrap_err();
    assert!(
        err.to_string().ends_with("is not currently requested"),
        "{err}"
    );
    let out = os
        .update_deployment(&PackageChange::default())
        .await
        .unwrap();
    assert!(!out.started_here);
}

#[tokio::test]
async fn cleanup_pending_drops_the_staged_deployment() {
    let os = node();
    os.rebase(&OsImage::Registry(NEW.into())).await.unwrap();
    os.cleanup(&[CleanupTarget::Pending]).await.unwrap();
    let s = os.status().await.unwrap();
    assert_eq!(s.deployments.len(), 1);
    assert!(s.staged().is_none());
    let out = os.cleanup(&[CleanupTarget::Rollback]).await.unwrap();
    assert_eq!(out.messages, ["Deployments unchanged."]);
}

#[tokio::test]
async fn injected_failures_and_resume() {
    let os: Arc<dyn OsUpdater> = Arc::new(node());
    let fake = node();
    fake.fail_next("Rebase", "manifest unknown");
    let err = fake
        .rebase(&OsImage::Registry(NEW.into()))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "rpm-ostree Rebase transaction failed: manifest unknown"
    );
    fake.rebase(&OsImage::Registry(NEW.into())).await.unwrap();
    assert_eq!(
        fake.calls(),
        [
            OsCall::Rebase(OsImage::Registry(NEW.into())),
            OsCall::Rebase(OsImage::Registry(NEW.into()))
        ]
    );

    assert_eq!(os.resume().await.unwrap(), None);
    fake.set_active_transaction(Ok(TransactionOutcome {
        method: "KernelArgs".into(),
        ..Default::default()
    }));
    assert_eq!(fake.resume().await.unwrap().unwrap().method, "KernelArgs");
    assert_eq!(fake.resume().await.unwrap(), None);
    fake.set_active_transaction(Err("interrupted".into()));
    assert!(fake.resume().await.is_err());
}

#[tokio::test]
async fn locked_finalization_needs_finalize_deployment() {
    let os = node().with_lock_finalization(true);
    os.rebase(&OsImage::Registry(NEW.into())).await.unwrap();
    let staged = os.status().await.unwrap().staged().unwrap().clone();
    assert!(staged.finalization_locked);
    // A plain reboot loses a locked staged deployment, as ostree does.
    assert!(!os.reboot());
    assert!(os.status().await.unwrap().staged().is_none());

    os.rebase(&OsImage::Registry(NEW.into())).await.unwrap();
    let err = os.finalize_deployment("wrong").await.unwrap_err();
    assert!(
        err.to_string()
            .contains("Expected staged base checksum wrong"),
        "{err}"
    );
    let out = os.finalize_deployment(&staged.checksum).await.unwrap();
    assert_eq!(out.messages.len(), 1);
    assert_eq!(os.reboots_requested(), 1);
    assert!(os.reboot());
    check_os_image(NEW, os.status().await.unwrap().booted().unwrap()).unwrap();
    let err = os.finalize_deployment(&staged.checksum).await.unwrap_err();
    assert!(
        err.to_string()
            .ends_with("No pending staged deployment found"),
        "{err}"
    );
}

#[tokio::test]
async fn rollback_makes_the_previous_deployment_the_default_and_reboots_into_it() {
    let os = node();
    let err = os.rollback().await.unwrap_err();
    assert!(
        err.to_string().contains("No rollback deployment found"),
        "{err}"
    );
    os.rebase(&OsImage::Registry(NEW.into())).await.unwrap();
    assert!(os.reboot());
    let s = os.status().await.unwrap();
    let (new, old) = (s.deployments[0].clone(), s.deployments[1].clone());
    assert!(new.booted && new.image_url().as_deref() == Some(NEW));
    os.rollback().await.unwrap();
    let s = os.status().await.unwrap();
    assert_eq!(
        s.deployments[0].id, old.id,
        "the previous one is the default"
    );
    assert!(s.deployments[1].booted);
    assert!(os.reboot(), "the default boots");
    let s = os.status().await.unwrap();
    assert!(s.deployments[0].booted && s.deployments[0].id == old.id);
    assert!(!os.reboot(), "nothing new to boot");
    assert!(os.calls().contains(&OsCall::Rollback));
}

#[tokio::test]
async fn rollback_with_a_pending_deployment_puts_the_booted_one_back_on_top() {
    let os = node();
    os.rebase(&OsImage::Registry(NEW.into())).await.unwrap();
    assert!(os.reboot());
    os.rollback().await.unwrap();
    // Now the old one is pending in front of the booted new one: rolling back again undoes it.
    os.rollback().await.unwrap();
    let s = os.status().await.unwrap();
    assert!(s.deployments[0].booted);
    assert_eq!(s.deployments[0].image_url().as_deref(), Some(NEW));
}
