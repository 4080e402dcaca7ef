//! A boot that fails its health checks is rolled back (previous deployment and config, one
//! reboot, Degraded, the target not applied again by itself); `mco-agent rollback` by hand.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use machine_config::mco::NodeState;

use super::*;
use crate::engine::rollback::{FAILED_TARGET, PREVIOUS_CONFIG};
use crate::engine::{HealthOptions, Outcome, Step};

const NEW_IMAGE: &str = "quay.io/example/os@sha256:2222";
/// Its changes only reload crio: an update of it alone is rebootless.
pub(super) const FILE: &str = CRIO_POLICY;

pub(super) fn a() -> MachineConfig {
    mc("rendered-worker-A", &[(FILE, "a\n")], &[], IMAGE)
}

/// A new OS image and a changed file: staged, rebooted.
pub(super) fn b() -> MachineConfig {
    mc("rendered-worker-B", &[(FILE, "b\n")], &[], NEW_IMAGE)
}

/// Health checks that give up after the first round.
pub(super) fn at_once() -> HealthOptions {
    HealthOptions {
        deadline: Duration::ZERO,
        check_timeout: Duration::from_secs(10),
        retry_interval: Duration::from_millis(10),
        kubelet: None,
    }
}

pub(super) fn failing_check(node: &Node) {
    node.write(
        "/etc/mco-agent/health.d/50-app",
        "#!/bin/sh\necho app is broken\nexit 3\n",
    );
    let p = node.path().join("etc/mco-agent/health.d/50-app");
    fs::set_permissions(p, fs::Permissions::from_mode(0o755)).unwrap();
}

pub(super) async fn node_in_a() -> Node {
    let node = Node::new();
    node.provision(&a()).await;
    node
}

pub(super) fn booted_image(node: &Node) -> Option<String> {
    node.os
        .deployments()
        .deployments
        .iter()
        .find(|d| d.booted)
        .and_then(|d| d.image_url())
}

#[tokio::test]
async fn a_boot_that_fails_a_check_is_rolled_back_with_one_reboot_and_not_retried() {
    let node = node_in_a().await;
    let r = node.engine().update(&b(), false).await;
    assert_eq!(r.outcome, Outcome::Rebooting, "{r:?}");
    node.reboot(false);
    assert_eq!(booted_image(&node).as_deref(), Some(NEW_IMAGE));
    failing_check(&node);

    let engine = node.engine_opts(node.seams(), at_once());
    let r = engine.resume().await.unwrap();
    assert_eq!(r.outcome, Outcome::Rebooting, "{r:?}");
    assert_eq!(node.recorded_step().as_deref(), Some("RebootingBack"));
    assert_eq!(node.read(FILE).as_deref(), Some("a\n"), "files back first");
    let first = &node.os.deployments().deployments[0];
    assert_eq!(first.image_url().as_deref(), Some(IMAGE), "{first:?}");
    assert!(!first.booted, "the previous deployment is the default");
    assert_eq!(node.rebooter.reasons().len(), 2, "one reboot in, one back");

    node.reboot(false);
    let r = node
        .engine_opts(node.seams(), at_once())
        .resume()
        .await
        .unwrap();
    let Outcome::Degraded(reason) = &r.outcome else {
        panic!("{r:?}")
    };
    assert_eq!(
        reason,
        "boot into rendered-worker-B failed: health check /etc/mco-agent/health.d/50-app \
         exited with 3: app is broken; rolled back to rendered-worker-A"
    );
    assert_eq!(booted_image(&node).as_deref(), Some(IMAGE));
    assert_eq!(node.current().as_deref(), Some("rendered-worker-A"));
    assert_eq!(node.recorded_step(), None);
    assert!(node.read(FAILED_TARGET).is_some());
    let (state, why) = node.cluster.last_state().unwrap();
    assert_eq!(
        (state, why.as_str()),
        (NodeState::Degraded, reason.as_str())
    );
    assert!(
        node.cluster
            .events()
            .iter()
            .any(|e| e.contains("BootRolledBack")),
        "{:?}",
        node.cluster.events()
    );

    // The same target again: refused without touching anything (no boot loop).
    let calls = node.os.calls().len();
    let r = node.engine().update(&b(), false).await;
    let Outcome::Degraded(again) = &r.outcome else {
        panic!("{r:?}")
    };
    assert!(again.starts_with(reason.as_str()), "{again}");
    assert!(again.contains("not applied again"), "{again}");
    assert_eq!(node.os.calls().len(), calls, "rpm-ostree untouched");
    assert_eq!(node.rebooter.reasons().len(), 2);
    assert_eq!(node.read(FILE).as_deref(), Some("a\n"));

    // The force file tries again (the check passes now).
    fs::remove_file(node.path().join("etc/mco-agent/health.d/50-app")).unwrap();
    let r = node.engine().update(&b(), true).await;
    assert_eq!(r.outcome, Outcome::Rebooting, "{r:?}");
    assert!(node.read(FAILED_TARGET).is_none(), "forgotten");
    node.reboot(false);
    let r = node.engine().resume().await.unwrap();
    assert_eq!(r.outcome, Outcome::Done, "{r:?}");
    assert_eq!(node.current().as_deref(), Some("rendered-worker-B"));
}

#[tokio::test]
async fn a_new_desired_config_forgets_the_failed_target() {
    let node = node_in_a().await;
    node.engine().update(&b(), false).await;
    node.reboot(false);
    failing_check(&node);
    node.engine_opts(node.seams(), at_once()).resume().await;
    node.reboot(false);
    node.engine_opts(node.seams(), at_once()).resume().await;
    assert!(node.read(FAILED_TARGET).is_some());
    fs::remove_file(node.path().join("etc/mco-agent/health.d/50-app")).unwrap();
    let c = mc("rendered-worker-C", &[(FILE, "c\n")], &[], IMAGE);
    let r = node.engine().update(&c, false).await;
    assert_eq!(r.outcome, Outcome::Done, "{r:?}");
    assert!(node.read(FAILED_TARGET).is_none());
    assert_eq!(node.read(FILE).as_deref(), Some("c\n"));
}

#[tokio::test]
async fn a_new_desired_config_while_rolling_back_waits_for_the_rollback() {
    let node = node_in_a().await;
    node.engine().update(&b(), false).await;
    node.reboot(false);
    failing_check(&node);
    node.engine_opts(node.seams(), at_once()).resume().await;
    assert_eq!(node.recorded_step().as_deref(), Some("RebootingBack"));
    node.reboot(false);
    let c = mc("rendered-worker-C", &[(FILE, "c\n")], &[], IMAGE);
    let r = node.engine().update(&c, false).await;
    assert!(matches!(r.outcome, Outcome::Degraded(_)), "{r:?}");
    assert_eq!(node.current().as_deref(), Some("rendered-worker-A"));
    assert_eq!(node.recorded_step(), None);
    let r = node.engine().update(&c, false).await;
    assert_eq!(r.outcome, Outcome::Done, "{r:?}");
}

#[tokio::test]
async fn a_failed_unit_the_config_enables_fails_the_boot() {
    let node = Node::new();
    let systemd: Arc<dyn crate::host::systemd::Systemd> = Arc::new(
        crate::host::systemd::FakeSystemd::new()
            .with_unit("app.service", crate::host::systemd::ActiveState::Failed),
    );
    let mut seams = node.seams();
    seams.systemd = Some(systemd);
    node.provision(&a()).await;
    let mut b = b();
    let mut v = b.spec.config.as_ref().unwrap().to_value().unwrap();
    v["systemd"] = json!({"units": [{"name": "app.service", "enabled": true,
        "contents": "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"}]});
    b.spec.config = Some(machine_config::IgnitionJson::from_value(v));
    let r = node
        .engine_opts(seams.clone(), at_once())
        .update(&b, false)
        .await;
    assert_eq!(r.outcome, Outcome::Rebooting, "{r:?}");
    node.reboot(false);
    node.engine_opts(seams.clone(), at_once()).resume().await;
    node.reboot(false);
    let r = node.engine_opts(seams, at_once()).resume().await.unwrap();
    let Outcome::Degraded(reason) = &r.outcome else {
        panic!("{r:?}")
    };
    assert!(
        reason.starts_with("boot into rendered-worker-B failed: unit app.service failed: failed"),
        "{reason}"
    );
    assert!(
        reason.ends_with("; rolled back to rendered-worker-A"),
        "{reason}"
    );
    assert!(node.read("/etc/systemd/system/app.service").is_none());
}

#[tokio::test]
async fn killed_at_each_step_of_the_boot_rollback_it_converges() {
    // A restart at BootFailed after the OS rollback must not swap the deployments back.
    let node = node_in_a().await;
    node.engine().update(&b(), false).await;
    node.reboot(false);
    failing_check(&node);
    let root = crate::rootfs::Root::open(node.path()).unwrap();
    let mut rec = crate::engine::record::load(&root).unwrap().unwrap();
    // As if the agent was killed right after the OS rollback, before the files.
    use crate::os::OsUpdater;
    node.os.rollback().await.unwrap();
    rec.step = Step::BootFailed;
    rec.reason = Some("boot into rendered-worker-B failed: killed".into());
    crate::engine::record::store(&root, &rec).unwrap();
    let r = node.engine().resume().await.unwrap();
    assert_eq!(r.outcome, Outcome::Rebooting, "{r:?}");
    let first = &node.os.deployments().deployments[0];
    assert_eq!(
        first.image_url().as_deref(),
        Some(IMAGE),
        "not swapped back"
    );
    // Killed at RebootingBack in the same boot: the reboot is asked for again.
    let r = node.engine().resume().await.unwrap();
    assert_eq!(r.outcome, Outcome::Rebooting, "{r:?}");
    node.reboot(false);
    let r = node.engine().resume().await.unwrap();
    assert!(matches!(r.outcome, Outcome::Degraded(_)), "{r:?}");
    assert_eq!(booted_image(&node).as_deref(), Some(IMAGE));
    assert_eq!(node.read(FILE).as_deref(), Some("a\n"));
}

#[tokio::test]
async fn rollback_by_hand_returns_to_the_previous_config_and_deployment() {
    let node = node_in_a().await;
    let engine = node.engine();
    assert!(format!("{:#}", engine.rollback_plan().unwrap_err()).contains("no previous config"),);
    engine.update(&b(), false).await;
    node.reboot(false);
    assert_eq!(node.engine().resume().await.unwrap().outcome, Outcome::Done);
    assert!(node.read(PREVIOUS_CONFIG).is_some());

    let engine = node.engine();
    let plan = engine.rollback_plan().unwrap();
    assert_eq!(plan.from.name(), "rendered-worker-B");
    assert_eq!(plan.to.name(), "rendered-worker-A");
    assert!(plan.deployment.is_some());
    assert_eq!(plan.describe(None).len(), 3);
    let r = engine.roll_back_by_hand(&plan).await;
    assert_eq!(r.outcome, Outcome::Rebooting, "{r:?}");
    assert_eq!(node.read(FILE).as_deref(), Some("a\n"));
    node.reboot(false);
    let r = node.engine().resume().await.unwrap();
    let Outcome::Degraded(reason) = &r.outcome else {
        panic!("{r:?}")
    };
    assert_eq!(
        reason,
        "rolled back by hand from rendered-worker-B (mco-agent rollback); rolled back to rendered-worker-A"
    );
    assert_eq!(booted_image(&node).as_deref(), Some(IMAGE));
    assert_eq!(node.current().as_deref(), Some("rendered-worker-A"));
    assert!(node.read(PREVIOUS_CONFIG).is_none());
    // The desired config still says B: not applied again by itself.
    let r = node.engine().update(&b(), false).await;
    assert!(matches!(r.outcome, Outcome::Degraded(_)), "{r:?}");
    assert_eq!(node.read(FILE).as_deref(), Some("a\n"));
}

#[tokio::test]
async fn rollback_by_hand_of_a_rebootless_update_leaves_the_os() {
    let node = node_in_a().await;
    let c = mc("rendered-worker-C", &[(FILE, "c\n")], &[], IMAGE);
    assert_eq!(node.engine().update(&c, false).await.outcome, Outcome::Done);
    let engine = node.engine();
    let plan = engine.rollback_plan().unwrap();
    assert_eq!(plan.deployment, None);
    let calls = node.os.calls().len();
    let r = engine.roll_back_by_hand(&plan).await;
    assert_eq!(r.outcome, Outcome::Rebooting, "{r:?}");
    assert!(
        !node.os.calls()[calls..].contains(&crate::os::OsCall::Rollback),
        "the OS is not rolled back"
    );
    assert_eq!(node.read(FILE).as_deref(), Some("a\n"));
    // The daemon leaves a rollback by hand of this boot to the command.
    let reboots = node.rebooter.reasons().len();
    let r = node.engine().update(&c, false).await;
    let Outcome::Degraded(reason) = &r.outcome else {
        panic!("{r:?}")
    };
    assert!(
        reason.ends_with("waiting for mco-agent rollback and its reboot"),
        "{reason}"
    );
    assert_eq!(node.rebooter.reasons().len(), reboots);
    assert_eq!(node.recorded_step().as_deref(), Some("RebootingBack"));
    // An update in progress refuses a rollback by hand.
    let err = format!("{:#}", node.engine().rollback_plan().unwrap_err());
    assert!(err.contains("an update is in progress"), "{err}");
}
