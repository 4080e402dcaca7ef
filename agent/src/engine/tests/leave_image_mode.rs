//! An update that leaves image mode: after the reboot into the base image the `/etc` merge has
//! dropped the files the built image carried (simulated: removed from the root between the
//! reboot and the restart), so the desired config's files, units and users are written again
//! and the node reboots once more; a restart at each point of that converges, and an update
//! that does not leave image mode still reboots once.

use machine_config::mco::image::embed_image;

use super::*;
use crate::engine::Outcome;
use crate::engine::record::{self, Step};

const BUILT: &str = "registry.example/ocl/worker@sha256:4444444444444444444444444444444444444444444444444444444444444444";
const NEWER: &str = "quay.io/example/os@sha256:2222";
const ONE: &str = "/etc/nmstate/openshift/one";
const TWO: &str = "/etc/nmstate/openshift/two";
const UNIT: &str = "mco-test.service";
const UNIT_FILE: &str = "/etc/systemd/system/mco-test.service";
const UNIT_LINK: &str = "/etc/systemd/system/multi-user.target.wants/mco-test.service";

/// The pool's rendered config: two files and an enabled unit.
fn rendered(name: &str, image: &str) -> MachineConfig {
    let m = mc(name, &[(ONE, "one\n"), (TWO, "two\n")], &[], image);
    let unit = json!({
        "name": UNIT,
        "enabled": true,
        "contents": "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
    });
    let mut value = serde_json::to_value(&m).unwrap();
    value["spec"]["config"]["systemd"] = json!({"units": [unit]});
    MachineConfig::from_value(value).unwrap()
}

/// The same rendered config, run as a built image (the pool in image mode).
fn layered() -> MachineConfig {
    embed_image(&rendered("rendered-a", IMAGE), Some(BUILT))
}

/// A node whose systemd runs the config's unit too (the health checks after a reboot wait
/// for the units a config enables).
fn new_node() -> Node {
    let mut node = Node::new();
    let systemd = FakeSystemd::new()
        .with_unit("crio.service", ActiveState::Active)
        .with_reloadable("crio.service")
        .with_unit("kubelet.service", ActiveState::Active)
        .with_unit(UNIT, ActiveState::Active);
    node.systemd = Arc::new(systemd);
    node
}

/// A node in image mode: provisioned in the rendered config, then updated into its built
/// image (one reboot).
async fn node_in_image_mode() -> Node {
    let node = new_node();
    node.provision(&rendered("rendered-a", IMAGE)).await;
    let report = node.engine().update(&layered(), false).await;
    assert_eq!(report.outcome, Outcome::Rebooting, "{report:?}");
    node.reboot(false);
    let report = node.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:?}");
    assert_eq!(node.rebooter.reasons().len(), 1, "entering image mode");
    node
}

/// What ostree's `/etc` merge does to the files the built image carried in its `/usr/etc`.
fn merge_drops_the_files(node: &Node) {
    for path in [ONE, TWO, UNIT_FILE, UNIT_LINK] {
        fs::remove_file(node.path().join(path.trim_start_matches('/')))
            .unwrap_or_else(|e| panic!("{path}: {e}"));
    }
}

fn files_are_back(node: &Node, why: &str) {
    assert_eq!(node.read(ONE).as_deref(), Some("one\n"), "{why}");
    assert_eq!(node.read(TWO).as_deref(), Some("two\n"), "{why}");
    assert!(node.read(UNIT_FILE).is_some(), "{why}: {UNIT_FILE}");
    let link = node.path().join(UNIT_LINK.trim_start_matches('/'));
    assert!(link.symlink_metadata().is_ok(), "{why}: {UNIT_LINK}");
}

fn recorded(node: &Node) -> record::UpdateRecord {
    record::load(&Root::open(node.path()).unwrap())
        .unwrap()
        .expect("an update record")
}

/// The node in image mode updated to the rendered config again (the pool left image mode),
/// rebooted into the base image with its files dropped: the record at `RebootRequested` of
/// the first reboot. Returns the reboots asked for before this update.
async fn left_image_mode_and_rebooted(node: &Node) -> usize {
    let before = node.rebooter.reasons().len();
    let report = node
        .engine()
        .update(&rendered("rendered-a", IMAGE), false)
        .await;
    assert_eq!(report.outcome, Outcome::Rebooting, "{report:?}");
    assert_eq!(node.rebooter.reasons().len(), before + 1);
    node.reboot(false);
    merge_drops_the_files(node);
    before
}

#[tokio::test]
async fn leaving_image_mode_writes_the_dropped_files_again_and_reboots_once_more() {
    let node = node_in_image_mode().await;
    let before = left_image_mode_and_rebooted(&node).await;
    let report = node.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Rebooting, "{report:?}");
    files_are_back(&node, "after the rewrite");
    assert_eq!(node.rebooter.reasons().len(), before + 2, "one more reboot");
    let rec = recorded(&node);
    assert_eq!(rec.step, Step::RebootRequested);
    assert!(rec.rewrote_after_image_mode);
    assert_eq!(node.current().as_deref(), Some("rendered-a"));
    node.reboot(false);
    let report = node.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:?}");
    assert!(report.verified);
    assert_eq!(node.rebooter.reasons().len(), before + 2, "no third reboot");
    assert_eq!(node.recorded_step(), None);
    files_are_back(&node, "Done");
    let current = node
        .read(machine_config::mco::paths::CURRENT_CONFIG)
        .unwrap();
    assert!(
        !current.contains(BUILT),
        "the current config is the rendered one"
    );
}

/// Where a kill or a power cut left an update leaving image mode, after its first reboot.
#[derive(Clone, Copy, Debug)]
enum Cut {
    /// Killed at `RewritingFiles`, one file written again.
    KilledRewriting,
    /// The power lost at `RewritingFiles`: the next boot finds it there.
    PowerLostRewriting,
    /// Killed once the second reboot was requested, before it came.
    KilledAfterTheRequest,
    /// The power lost with the rewrite recorded, before the second reboot was requested.
    PowerLostBeforeTheRequest,
}

/// Puts the node where `cut` left it.
async fn cut_at(node: &Node, cut: Cut) {
    let root = Root::open(node.path()).unwrap();
    let mut rec = recorded(node);
    rec.boot_id = "boot-3".into();
    match cut {
        Cut::KilledRewriting | Cut::PowerLostRewriting => {
            rec.step = Step::RewritingFiles;
            record::store(&root, &rec).unwrap();
            node.write(ONE, "one\n");
            if matches!(cut, Cut::PowerLostRewriting) {
                node.reboot(false);
            }
        }
        Cut::KilledAfterTheRequest => {
            let report = node.engine().resume().await.unwrap();
            assert_eq!(report.outcome, Outcome::Rebooting, "{report:?}");
        }
        Cut::PowerLostBeforeTheRequest => {
            // the files written again and synced, the record stored, then the power lost
            let ign = rendered("rendered-a", IMAGE).ignition().unwrap();
            let options = crate::apply::ApplyOptions {
                field_prefix: "$.spec.config",
                write_all: true,
                ..Default::default()
            };
            let units = crate::units::OfflineUnits::new(&root);
            crate::apply::apply(
                &root,
                &machine_config::Config::empty(),
                &ign,
                &options,
                &units,
            )
            .await
            .unwrap();
            rec.step = Step::RebootRequested;
            rec.rewrote_after_image_mode = true;
            record::store(&root, &rec).unwrap();
            node.reboot(false);
        }
    }
}

#[tokio::test]
async fn a_kill_or_power_cut_at_each_point_of_the_rewrite_converges() {
    // (the cut, the reboots asked for after the first one in all)
    let cases = [
        (Cut::KilledRewriting, 1),
        (Cut::PowerLostRewriting, 1),
        (Cut::KilledAfterTheRequest, 2),
        (Cut::PowerLostBeforeTheRequest, 0),
    ];
    for (cut, reboots) in cases {
        let node = node_in_image_mode().await;
        let before = left_image_mode_and_rebooted(&node).await + 1;
        cut_at(&node, cut).await;
        let asked = node.rebooter.reasons().len() - before;
        let report = node.engine().resume().await.unwrap();
        if reboots > asked {
            assert_eq!(report.outcome, Outcome::Rebooting, "{cut:?}: {report:?}");
            files_are_back(&node, &format!("{cut:?}"));
            let rec = recorded(&node);
            assert!(rec.rewrote_after_image_mode, "{cut:?}");
            assert_eq!(rec.step, Step::RebootRequested, "{cut:?}");
            node.reboot(false);
            let report = node.engine().resume().await.unwrap();
            assert_eq!(report.outcome, Outcome::Done, "{cut:?}: {report:?}");
        } else {
            assert_eq!(report.outcome, Outcome::Done, "{cut:?}: {report:?}");
        }
        files_are_back(&node, &format!("{cut:?}"));
        assert_eq!(node.recorded_step(), None, "{cut:?}");
        assert_eq!(
            node.rebooter.reasons().len() - before,
            reboots,
            "{cut:?}: reboots asked for after the first"
        );
    }
}

/// At most one extra reboot per update: files still missing after the second reboot leave
/// the node Degraded with the usual message, however often it is verified again.
#[tokio::test]
async fn files_still_missing_after_the_second_reboot_degrade_without_a_loop() {
    let node = node_in_image_mode().await;
    let before = left_image_mode_and_rebooted(&node).await;
    let report = node.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Rebooting, "{report:?}");
    node.reboot(false);
    fs::remove_file(node.path().join(ONE.trim_start_matches('/'))).unwrap();
    for attempt in ["verified", "verified again"] {
        let report = node.engine().resume().await.unwrap();
        match &report.outcome {
            Outcome::Degraded(reason) => assert!(
                reason.starts_with("update to rendered-a did not take after the reboot: ")
                    && reason.contains(ONE),
                "{attempt}: {reason}"
            ),
            other => panic!("{attempt}: {other:?}"),
        }
        assert_eq!(node.recorded_step().as_deref(), Some("NotTaken"));
        assert_eq!(node.rebooter.reasons().len(), before + 2, "{attempt}");
    }
}

/// Writing the files again fails (a file where a directory must be): Degraded, nothing
/// rebooted; the next try writes them again and reboots once.
#[tokio::test]
async fn a_failed_rewrite_is_degraded_and_tried_again() {
    let node = node_in_image_mode().await;
    let before = left_image_mode_and_rebooted(&node).await;
    let dir = node.path().join("etc/nmstate/openshift");
    fs::remove_dir(&dir).unwrap();
    fs::write(&dir, "in the way\n").unwrap();
    let report = node.engine().resume().await.unwrap();
    match &report.outcome {
        Outcome::Degraded(reason) => assert!(
            reason.starts_with(
                "update to rendered-a did not take after the reboot: writing again the files leaving image mode dropped: "
            ),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(node.recorded_step().as_deref(), Some("NotTaken"));
    assert_eq!(node.rebooter.reasons().len(), before + 1);
    fs::remove_file(&dir).unwrap();
    let report = node.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Rebooting, "{report:?}");
    files_are_back(&node, "tried again");
    assert_eq!(node.rebooter.reasons().len(), before + 2);
    node.reboot(false);
    let report = node.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:?}");
}

/// A config of a case.
type ConfigFn = fn() -> MachineConfig;

/// Updates that do not leave image mode reboot once, as before.
#[tokio::test]
async fn other_reboot_updates_reboot_once() {
    let cases: [(&str, ConfigFn, ConfigFn); 3] = [
        (
            "a new base image",
            || rendered("rendered-a", IMAGE),
            || rendered("rendered-b", NEWER),
        ),
        (
            "entering image mode",
            || rendered("rendered-a", IMAGE),
            layered,
        ),
        ("a new built image", layered, || {
            let newer = BUILT.replace('4', "5");
            embed_image(&rendered("rendered-a", IMAGE), Some(&newer))
        }),
    ];
    for (name, current, desired) in cases {
        let node = if current() == layered() {
            node_in_image_mode().await
        } else {
            let node = new_node();
            node.provision(&current()).await;
            node
        };
        let before = node.rebooter.reasons().len();
        let report = node.engine().update(&desired(), false).await;
        assert_eq!(report.outcome, Outcome::Rebooting, "{name}: {report:?}");
        node.reboot(false);
        let report = node.engine().resume().await.unwrap();
        assert_eq!(report.outcome, Outcome::Done, "{name}: {report:?}");
        assert_eq!(node.rebooter.reasons().len(), before + 1, "{name}");
    }
}
