//! The OS step decided as the MCD decides it, one row per decision, each naming the MCD
//! function it follows (upstream `pkg/daemon/update.go` and `daemon.go`): what is asked of
//! rpm-ostree, the events, and the checks before an update and before Done.

use machine_config::mco::events::reason;
use machine_config::mco::image::embed_image;

use super::*;
use crate::engine::Outcome;
use crate::engine::fake::ClusterCall;
use crate::os::{CleanupTarget, OsCall, OsImage, PackageChange};

const BUILT: &str = "registry.example/ocl/worker@sha256:4444444444444444444444444444444444444444444444444444444444444444";
const NEWER: &str = "quay.io/example/os@sha256:2222";
const BASE_KERNEL: &[&str] = &[
    "kernel",
    "kernel-core",
    "kernel-modules",
    "kernel-modules-core",
    "kernel-modules-extra",
];
const RT: &[&str] = &[
    "kernel-rt-core",
    "kernel-rt-modules",
    "kernel-rt-modules-extra",
];

fn with_os(mut m: MachineConfig, kernel_type: &str, extensions: &[&str]) -> MachineConfig {
    m.spec.kernel_type = kernel_type.into();
    m.spec.extensions = extensions.iter().map(|e| e.to_string()).collect();
    m
}

/// The configs of the rows: the same files, differing in their OS fields.
fn plain(name: &str) -> MachineConfig {
    mc(name, &[(CRIO_POLICY, "{}\n")], &[], IMAGE)
}
fn rt_usbguard(name: &str) -> MachineConfig {
    with_os(plain(name), "realtime", &["usbguard"])
}

/// A node brought into `current` through the engine (so a realtime kernel and extensions are
/// layered on its booted deployment as the MCD layers them), then booted.
async fn node_in(current: &MachineConfig) -> Node {
    let node = Node::new();
    node.provision(&plain("rendered-0")).await;
    let report = node.engine().update(current, false).await;
    if report.outcome == Outcome::Rebooting {
        node.reboot(false);
        node.packages.install(&["usbguard"]);
        let report = node.engine().resume().await.unwrap();
        assert_eq!(report.outcome, Outcome::Done, "{report:?}");
    } else {
        assert_eq!(report.outcome, Outcome::Done, "{report:?}");
    }
    node
}

/// What an update asked of rpm-ostree, reads left out.
fn changes(node: &Node, since: usize) -> Vec<OsCall> {
    node.os.calls()[since..]
        .iter()
        .filter(|c| !matches!(c, OsCall::Status | OsCall::Resume | OsCall::Kargs(_)))
        .cloned()
        .collect()
}

fn events_since(node: &Node, since: usize) -> Vec<(String, String)> {
    node.cluster.calls()[since..]
        .iter()
        .filter_map(|c| match c {
            ClusterCall::Event(r, m) => Some((r.clone(), m.clone())),
            _ => None,
        })
        .collect()
}

fn update_deployment(install: &[&str], remove_base: bool) -> OsCall {
    let owned = |l: &[&str]| l.iter().map(|p| p.to_string()).collect::<Vec<_>>();
    OsCall::UpdateDeployment(PackageChange {
        install: owned(install),
        override_remove: if remove_base {
            owned(BASE_KERNEL)
        } else {
            vec![]
        },
        ..Default::default()
    })
}

#[tokio::test]
async fn os_step_decisions_follow_the_mcd() {
    struct Case {
        name: &'static str,
        current: fn() -> MachineConfig,
        desired: fn() -> MachineConfig,
        /// What is asked of rpm-ostree.
        calls: fn() -> Vec<OsCall>,
        /// Event reason and message pairs that must be among the update's events.
        events: &'static [(&'static str, &'static str)],
        outcome: Outcome,
    }
    let cases = [
        Case {
            name: "applyLayeredOSChanges (on-cluster layering returns after the kernel \
                   arguments): a pool with extensions and a realtime kernel moving to a built \
                   image rebases, nothing is installed or overridden",
            current: || rt_usbguard("rendered-a"),
            desired: || embed_image(&rt_usbguard("rendered-a"), Some(BUILT)),
            calls: || {
                vec![
                    OsCall::Cleanup(vec![CleanupTarget::Pending]),
                    OsCall::Rebase(OsImage::Registry(BUILT.into())),
                ]
            },
            events: &[
                (
                    reason::IN_CLUSTER_UPGRADE,
                    "Updating from oscontainer registry.example/ocl/worker@sha256:4444444444444444444444444444444444444444444444444444444444444444",
                ),
                (reason::OS_UPDATE_STARTED, "Upgrading OS"),
                (reason::OS_UPDATE_STAGED, "Changes to OS staged"),
            ],
            outcome: Outcome::Rebooting,
        },
        Case {
            name: "applyOSChanges (runs whenever on-cluster layering is on): a file change in \
                   image mode runs the OS step and says so, nothing is staged, no reboot",
            current: || embed_image(&plain("rendered-a"), Some(BUILT)),
            desired: || {
                let b = mc("rendered-b", &[(CRIO_POLICY, "[]\n")], &[], IMAGE);
                embed_image(&b, Some(BUILT))
            },
            calls: || vec![OsCall::Cleanup(vec![CleanupTarget::Pending])],
            events: &[
                (
                    reason::OS_UPDATE_STARTED,
                    "Updating to a target config with default kernel",
                ),
                (
                    reason::OS_UPGRADE_SKIPPED,
                    "OS upgrade skipped; new MachineConfig (rendered-b) has same OS image \
                     (registry.example/ocl/worker@sha256:4444444444444444444444444444444444444444444444444444444444444444) \
                     as old MachineConfig (rendered-a)",
                ),
                (reason::OS_UPDATE_STAGED, "Changes to OS staged"),
            ],
            outcome: Outcome::Done,
        },
        Case {
            name: "applyLayeredOSChanges without layering (queueRevertKernelSwap, rebase, \
                   switchKernel, applyExtensions): a new base image on a realtime node with \
                   extensions undoes the switch, rebases, switches again; the extensions are \
                   still requested, so none is installed",
            current: || rt_usbguard("rendered-a"),
            desired: || {
                let mut b = rt_usbguard("rendered-b");
                b.spec.os_image_url = NEWER.into();
                b
            },
            calls: || {
                let owned = |l: &[&str]| l.iter().map(|p| p.to_string()).collect::<Vec<_>>();
                vec![
                    OsCall::Cleanup(vec![CleanupTarget::Pending]),
                    OsCall::UpdateDeployment(PackageChange {
                        uninstall: owned(RT),
                        override_reset: owned(BASE_KERNEL),
                        ..Default::default()
                    }),
                    OsCall::Rebase(OsImage::Registry(NEWER.into())),
                    update_deployment(RT, true),
                ]
            },
            events: &[(reason::OS_UPDATE_STARTED, "Upgrading OS")],
            outcome: Outcome::Rebooting,
        },
        Case {
            name: "switchKernel and applyExtensions (generateExtensionsArgs against the \
                   booted deployment): a pool gaining both switches the kernel and installs",
            current: || plain("rendered-a"),
            desired: || rt_usbguard("rendered-b"),
            calls: || {
                vec![
                    OsCall::Cleanup(vec![CleanupTarget::Pending]),
                    update_deployment(RT, true),
                    update_deployment(&["usbguard"], false),
                ]
            },
            events: &[(
                reason::OS_UPDATE_STARTED,
                "Installing extensions; Changing kernel type",
            )],
            outcome: Outcome::Rebooting,
        },
        Case {
            name: "deliberate difference (the MCD's revert unit does this at a second boot): \
                   a pool leaving image mode rebases to its base image and layers its kernel \
                   type and extensions in the same step",
            current: || embed_image(&rt_usbguard("rendered-a"), Some(BUILT)),
            desired: || rt_usbguard("rendered-a"),
            calls: || {
                vec![
                    OsCall::Cleanup(vec![CleanupTarget::Pending]),
                    OsCall::Rebase(OsImage::Registry(IMAGE.into())),
                    update_deployment(RT, true),
                    update_deployment(&["usbguard"], false),
                ]
            },
            events: &[(reason::OS_UPDATE_STARTED, "Upgrading OS")],
            outcome: Outcome::Rebooting,
        },
        Case {
            name: "applyOSChanges (runs on a non-default kernel): a file change on a realtime \
                   node runs the OS step, nothing is staged",
            current: || rt_usbguard("rendered-a"),
            desired: || {
                let b = mc("rendered-b", &[(CRIO_POLICY, "[]\n")], &[], IMAGE);
                with_os(b, "realtime", &["usbguard"])
            },
            calls: || vec![OsCall::Cleanup(vec![CleanupTarget::Pending])],
            events: &[(
                reason::OS_UPDATE_STARTED,
                "Updating to a target config with realtime kernel",
            )],
            outcome: Outcome::Done,
        },
    ];
    for c in cases {
        let node = node_in(&(c.current)()).await;
        let (os_before, cluster_before) = (node.os.calls().len(), node.cluster.calls().len());
        let report = node.engine().update(&(c.desired)(), false).await;
        assert_eq!(report.outcome, c.outcome, "{}: {report:?}", c.name);
        assert_eq!(changes(&node, os_before), (c.calls)(), "{}", c.name);
        let events = events_since(&node, cluster_before);
        for (r, m) in c.events {
            assert!(
                events.iter().any(|(er, em)| er == r && em == m),
                "{}: no event {r} {m:?} in {events:?}",
                c.name
            );
        }
    }
}

#[tokio::test]
async fn checks_before_an_update_and_before_done_follow_the_mcd() {
    struct Case {
        name: &'static str,
        current: fn() -> MachineConfig,
        /// Done to the node between its current config and the update.
        tamper: fn(&Node),
        desired: fn() -> MachineConfig,
        /// Installed in the RPM database before the boot into `desired`.
        installed: &'static [&'static str],
        /// The update's outcome (after the boot when it reboots).
        outcome: Outcome,
        /// The event that says so, if any.
        event: Option<&'static str>,
    }
    let cases = [
        Case {
            name: "runPreflightConfigDriftCheck → validateOnDiskStateImpl (checkOS): a node \
                   pivoted by hand is Degraded, not updated",
            current: || plain("rendered-a"),
            tamper: |node| node.os.boot_image(NEWER),
            desired: || mc("rendered-b", &[(CRIO_POLICY, "[]\n")], &[], IMAGE),
            installed: &[],
            outcome: Outcome::Degraded(
                "unexpected on-disk state validating against rendered-a: expected target \
                 osImageURL \"quay.io/example/os@sha256:1111\", have \
                 \"quay.io/example/os@sha256:2222\""
                    .into(),
            ),
            event: Some(reason::PREFLIGHT_CONFIG_DRIFT_CHECK_FAILED),
        },
        Case {
            name: "validateOnDiskStateOrImage: in image mode the check names the image",
            current: || embed_image(&plain("rendered-a"), Some(BUILT)),
            tamper: |node| node.os.boot_image(NEWER),
            desired: || {
                let b = mc("rendered-b", &[(CRIO_POLICY, "[]\n")], &[], IMAGE);
                embed_image(&b, Some(BUILT))
            },
            installed: &[],
            outcome: Outcome::Degraded(format!(
                "unexpected on-disk state validating against {BUILT}: expected target \
                 osImageURL \"{BUILT}\", have \"{NEWER}\""
            )),
            event: Some(reason::PREFLIGHT_CONFIG_DRIFT_CHECK_FAILED),
        },
        Case {
            name: "updateConfigAndState → verifyExtensionPackages: an extension whose package \
                   is not installed after the reboot keeps the node from Done",
            current: || plain("rendered-a"),
            tamper: |_| {},
            desired: || with_os(plain("rendered-b"), "", &["usbguard"]),
            installed: &[],
            outcome: Outcome::Degraded(
                "extension package verification failed: extension \"usbguard\" verification \
                 failed: no valid package set is fully installed. Tried 1 package set(s), \
                 missing packages per set: [[usbguard]]"
                    .into(),
            ),
            event: None,
        },
        Case {
            name: "updateConfigAndState → verifyExtensionPackages: installed, the node is Done",
            current: || plain("rendered-a"),
            tamper: |_| {},
            desired: || with_os(plain("rendered-b"), "", &["usbguard"]),
            installed: &["usbguard"],
            outcome: Outcome::Done,
            event: Some(reason::NODE_DONE),
        },
    ];
    for c in cases {
        let node = node_in(&(c.current)()).await;
        (c.tamper)(&node);
        let (os_before, cluster_before) = (node.os.calls().len(), node.cluster.calls().len());
        let mut report = node.engine().update(&(c.desired)(), false).await;
        if report.outcome == Outcome::Rebooting {
            node.reboot(false);
            node.packages.install(c.installed);
            report = node.engine().resume().await.unwrap();
        } else {
            assert_eq!(
                changes(&node, os_before),
                vec![],
                "{}: nothing is asked of rpm-ostree",
                c.name
            );
        }
        assert_eq!(report.outcome, c.outcome, "{}", c.name);
        if let Some(r) = c.event {
            let events = events_since(&node, cluster_before);
            assert!(
                events.iter().any(|(er, _)| er == r),
                "{}: no {r} event in {events:?}",
                c.name
            );
        }
        if let Outcome::Degraded(reason) = &c.outcome {
            assert_eq!(
                node.cluster.last_state(),
                Some((machine_config::mco::NodeState::Degraded, reason.clone())),
                "{}",
                c.name
            );
            assert_eq!(node.current().as_deref(), Some("rendered-a"), "{}", c.name);
        }
    }
}
