//! A boot rolled back on ostree: rpm-ostree's Rollback boots the previous deployment with its
//! own `/etc` (simulated by putting back a copy of `/etc` taken at the reboot into the update).

use super::boot_rollback::{FILE, at_once, b, booted_image, failing_check, node_in_a};
use super::*;
use crate::engine::Outcome;
use crate::engine::fake::ClusterCall;
use crate::engine::rollback::FAILED_TARGET;

/// `cp -a` of directory `from` to `to` (which must not exist).
fn copy_tree(from: &Path, to: &Path) {
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "cp -a {} {}",
        from.display(),
        to.display()
    );
}

/// On ostree, rpm-ostree's Rollback boots the previous deployment with its own `/etc`, as the
/// node left it at the reboot into the update: the update's record at `RebootRequested` and
/// the update's files, none of what the rollback wrote in the bad boot. The boot back still
/// ends rolled back (the record's copy in `/var`): the previous config's files, Degraded, the
/// failed target, and no third reboot (not the update staged again as a lost reboot).
#[tokio::test]
async fn the_boot_back_with_the_previous_deployments_own_etc_ends_rolled_back() {
    let node = node_in_a().await;
    let r = node.engine().update(&b(), false).await;
    assert_eq!(r.outcome, Outcome::Rebooting, "{r:?}");
    let etc = node.path().join("etc");
    let saved = tempfile::tempdir().unwrap();
    let etc_of_a = saved.path().join("etc");
    copy_tree(&etc, &etc_of_a);
    node.reboot(false);
    failing_check(&node);
    let r = node
        .engine_opts(node.seams(), at_once())
        .resume()
        .await
        .unwrap();
    assert_eq!(r.outcome, Outcome::Rebooting, "{r:?}");

    node.reboot(false);
    fs::remove_dir_all(&etc).unwrap();
    copy_tree(&etc_of_a, &etc);
    assert_eq!(node.read(FILE).as_deref(), Some("b\n"), "the update's file");
    let r = node
        .engine_opts(node.seams(), at_once())
        .resume()
        .await
        .unwrap();
    let Outcome::Degraded(reason) = &r.outcome else {
        panic!("{r:?}")
    };
    assert!(
        reason.starts_with("boot into rendered-worker-B failed: health check")
            && reason.ends_with("; rolled back to rendered-worker-A"),
        "{reason}"
    );
    assert_eq!(node.read(FILE).as_deref(), Some("a\n"));
    assert_eq!(booted_image(&node).as_deref(), Some(IMAGE));
    assert_eq!(node.current().as_deref(), Some("rendered-worker-A"));
    assert_eq!(node.recorded_step(), None);
    assert_eq!(node.read(crate::engine::record::BOOT_ROLLBACK_RECORD), None);
    assert!(node.read(FAILED_TARGET).is_some());
    assert_eq!(node.rebooter.reasons().len(), 2, "one reboot in, one back");
}

/// The same by hand: back in the previous deployment's own `/etc` (its `currentconfig` already
/// says A), the Node is still told it is in A (`SetDone`), then Degraded.
#[tokio::test]
async fn rollback_by_hand_into_the_previous_deployments_own_etc_reports_the_config() {
    let node = node_in_a().await;
    node.engine().update(&b(), false).await;
    let etc = node.path().join("etc");
    let saved = tempfile::tempdir().unwrap();
    let etc_of_a = saved.path().join("etc");
    copy_tree(&etc, &etc_of_a);
    node.reboot(false);
    assert_eq!(node.engine().resume().await.unwrap().outcome, Outcome::Done);
    let engine = node.engine();
    let plan = engine.rollback_plan().unwrap();
    let r = engine.roll_back_by_hand(&plan).await;
    assert_eq!(r.outcome, Outcome::Rebooting, "{r:?}");

    node.reboot(false);
    fs::remove_dir_all(&etc).unwrap();
    copy_tree(&etc_of_a, &etc);
    let calls = node.cluster.calls().len();
    let r = node.engine().resume().await.unwrap();
    assert!(
        matches!(&r.outcome, Outcome::Degraded(m) if m.starts_with("rolled back by hand")),
        "{r:?}"
    );
    assert_eq!(node.read(FILE).as_deref(), Some("a\n"));
    assert_eq!(node.current().as_deref(), Some("rendered-worker-A"));
    assert!(
        node.cluster.calls()[calls..].contains(&ClusterCall::SetDone("rendered-worker-A".into())),
        "{:?}",
        node.cluster.calls()
    );
    assert_eq!(node.rebooter.reasons().len(), 2);
}
