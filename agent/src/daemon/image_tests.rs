//! Image mode with fakes for every seam: which desiredConfig/desiredImage changes update the
//! node, what is rebased to, that a config and an image change reboot once, and what is
//! recorded (`currentimage`, the image reported with SetDone) only once the boot into the
//! image is verified.

use std::sync::Arc;

use machine_config::MachineConfig;
use machine_config::mco::NodeState;
use machine_config::mco::events::reason;
use machine_config::mco::image::embed_image;
use machine_config::mco::paths::CURRENT_IMAGE;

use super::tests::{FakeSource, daemon};
use crate::engine::tests::{CRIO_POLICY, IMAGE, Node, mc};
use crate::os::{OsCall, OsImage};

const LAYERED: &str = "registry.example/ocl/worker@sha256:2222222222222222222222222222222222222222222222222222222222222222";
const LAYERED_2: &str = "registry.example/ocl/worker@sha256:3333333333333333333333333333333333333333333333333333333333333333";

fn a() -> MachineConfig {
    mc("rendered-a", &[(CRIO_POLICY, "{}\n")], &[], IMAGE)
}
fn b() -> MachineConfig {
    mc("rendered-b", &[(CRIO_POLICY, "[]\n")], &[], IMAGE)
}

struct Case {
    name: &'static str,
    /// The node's image now (`None`: not in image mode), booted and recorded.
    current_image: Option<&'static str>,
    desired_config: fn() -> MachineConfig,
    desired_image: Option<&'static str>,
    /// The image rebased to, if any.
    rebase: Option<&'static str>,
    reboots: usize,
}

#[tokio::test]
async fn image_decisions() {
    let cases = [
        Case {
            name: "same config, no image: nothing to do",
            current_image: None,
            desired_config: a,
            desired_image: None,
            rebase: None,
            reboots: 0,
        },
        Case {
            name: "a pool enters image mode: rebase to the image, one reboot",
            current_image: None,
            desired_config: a,
            desired_image: Some(LAYERED),
            rebase: Some(LAYERED),
            reboots: 1,
        },
        Case {
            name: "same config, same image: nothing to do",
            current_image: Some(LAYERED),
            desired_config: a,
            desired_image: Some(LAYERED),
            rebase: None,
            reboots: 0,
        },
        Case {
            name: "a new image alone: rebase, one reboot",
            current_image: Some(LAYERED),
            desired_config: a,
            desired_image: Some(LAYERED_2),
            rebase: Some(LAYERED_2),
            reboots: 1,
        },
        Case {
            name: "a config and an image change: one update, one reboot",
            current_image: Some(LAYERED),
            desired_config: b,
            desired_image: Some(LAYERED_2),
            rebase: Some(LAYERED_2),
            reboots: 1,
        },
        Case {
            name: "a config change in image mode keeps the image: no rebase, no reboot",
            current_image: Some(LAYERED),
            desired_config: b,
            desired_image: Some(LAYERED),
            rebase: None,
            reboots: 0,
        },
        Case {
            name: "the pool leaves image mode: back to the rendered osImageURL",
            current_image: Some(LAYERED),
            desired_config: a,
            desired_image: None,
            rebase: Some(IMAGE),
            reboots: 1,
        },
    ];
    for c in cases {
        let node = Node::new();
        // Provisioned (and booted) in the current image.
        let current = embed_image(&a(), c.current_image);
        node.provision(&current).await;
        if let Some(image) = c.current_image {
            node.os.boot_image(image);
        }
        let source = Arc::new(FakeSource::default());
        source.add(&a());
        source.add(&b());
        let mut d = daemon(&node, source.clone()).await;
        let calls_before = node.os.calls().len();
        d.desired_name = Some((c.desired_config)().name().to_string());
        d.desired_image = c.desired_image.map(str::to_string);
        d.sync(false).await;
        let rebases: Vec<_> = node.os.calls()[calls_before..]
            .iter()
            .filter_map(|call| match call {
                OsCall::Rebase(OsImage::Registry(i)) => Some(i.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(
            rebases,
            c.rebase.map(str::to_string).into_iter().collect::<Vec<_>>(),
            "{}",
            c.name
        );
        assert_eq!(node.rebooter.reasons().len(), c.reboots, "{}", c.name);
        let desired_name = (c.desired_config)().name().to_string();
        if c.reboots > 0 {
            // Nothing is recorded before the boot into the image is verified.
            assert_eq!(node.current().as_deref(), Some("rendered-a"), "{}", c.name);
            assert_eq!(
                node.read(CURRENT_IMAGE)
                    .filter(|i| !i.is_empty())
                    .as_deref(),
                c.current_image,
                "{}",
                c.name
            );
            node.reboot(false);
            daemon(&node, source.clone()).await;
            if c.current_image.is_some() && c.desired_image.is_none() {
                // Leaving image mode: the files written again, one more reboot.
                assert_eq!(node.rebooter.reasons().len(), 2, "{}", c.name);
                node.reboot(false);
                daemon(&node, source.clone()).await;
            }
            assert_eq!(
                node.rebooter.reasons().len(),
                c.reboots + usize::from(c.current_image.is_some() && c.desired_image.is_none()),
                "{}",
                c.name
            );
        }
        assert_eq!(node.current(), Some(desired_name), "{}", c.name);
        assert_eq!(
            node.read(CURRENT_IMAGE).unwrap_or_default(),
            c.desired_image.unwrap_or(""),
            "{}",
            c.name
        );
        assert_eq!(
            node.cluster.last_state(),
            Some((NodeState::Done, String::new())),
            "{}",
            c.name
        );
        assert_eq!(
            node.cluster
                .done_images()
                .last()
                .cloned()
                .flatten()
                .as_deref(),
            c.desired_image,
            "{}: the image reported with SetDone",
            c.name
        );
        if c.rebase.is_some() {
            assert!(
                node.cluster
                    .events()
                    .contains(&reason::OS_UPGRADE_APPLIED.to_string()),
                "{}: {:?}",
                c.name,
                node.cluster.events()
            );
        }
        // In sync now: another sync changes nothing.
        let mut d = daemon(&node, source).await;
        d.desired_name = Some((c.desired_config)().name().to_string());
        d.desired_image = c.desired_image.map(str::to_string);
        let calls = node.os.calls().len();
        d.sync(false).await;
        assert!(
            !node.os.calls()[calls..]
                .iter()
                .any(|call| matches!(call, OsCall::Rebase(_))),
            "{}: rebased again",
            c.name
        );
    }
}

/// The node already boots the desired image, pivoted by hand with the force file (the MCO's
/// "forcing a pivot" recipe): no rebase, the MCD's OSUpgradeSkipped, and the update completes
/// in the image.
#[tokio::test]
async fn an_image_already_booted_is_not_rebased_again() {
    let node = Node::new();
    node.provision(&a()).await;
    node.os.boot_image(LAYERED);
    node.write(machine_config::mco::paths::FORCE_FILE, "");
    let source = Arc::new(FakeSource::default());
    source.add(&a());
    let mut d = daemon(&node, source.clone()).await;
    d.desired_name = Some("rendered-a".into());
    d.desired_image = Some(LAYERED.into());
    d.sync(false).await;
    assert!(
        !node
            .os
            .calls()
            .iter()
            .any(|call| matches!(call, OsCall::Rebase(_)))
    );
    assert!(
        node.cluster
            .events()
            .contains(&reason::OS_UPGRADE_SKIPPED.to_string()),
        "{:?}",
        node.cluster.events()
    );
    if !node.rebooter.reasons().is_empty() {
        node.reboot(false);
        daemon(&node, source).await;
    }
    assert_eq!(
        node.read(CURRENT_IMAGE).as_deref(),
        Some(LAYERED),
        "{:?}",
        node.cluster.calls()
    );
    assert_eq!(
        node.cluster
            .done_images()
            .last()
            .cloned()
            .flatten()
            .as_deref(),
        Some(LAYERED)
    );
}

/// `/run/ostree/auth.json` is linked at start-up, as the MCD's rpm-ostree client does when it
/// initializes: `/run` is empty after a boot, and pulls outside an update need the secret too.
#[tokio::test]
async fn start_up_links_the_pull_secret_for_rpm_ostree() {
    use machine_config::mco::paths::{KUBELET_PULL_SECRET, OSTREE_AUTH};
    let node = Node::new();
    node.provision(&a()).await;
    node.write(KUBELET_PULL_SECRET, "{\"auths\":{}}\n");
    let link = node.path().join(OSTREE_AUTH.trim_start_matches('/'));
    let source = Arc::new(FakeSource::default());
    source.add(&a());
    for boot in ["first start", "after a boot emptied /run"] {
        assert!(std::fs::symlink_metadata(&link).is_err(), "{boot}");
        daemon(&node, source.clone()).await;
        assert_eq!(
            std::fs::read_link(&link).ok().as_deref(),
            Some(std::path::Path::new(KUBELET_PULL_SECRET)),
            "{boot}"
        );
        std::fs::remove_file(&link).unwrap();
    }
}

/// An update into an image whose pull fails (every attempt of the MCD's retry) leaves the node
/// Degraded with rpm-ostree's reason in its current config, and the Node's `desiredImage` as the
/// controller wrote it: the Done of start-up, in the current config and no image yet, once
/// removed it, and the daemon then took the node as Done in its old config. A retry once the
/// image can be pulled completes in the image.
#[tokio::test(start_paused = true)]
async fn a_failed_pull_keeps_desired_image_and_a_retry_completes() {
    use super::tests::DaemonHarness;
    use crate::cluster::{FakeNodeApi, NodeApi};
    use crate::daemon::DesiredFeed;
    use machine_config::mco::annotations::{
        CURRENT_CONFIG, CURRENT_IMAGE as CURRENT_IMAGE_KEY, DESIRED_IMAGE, REASON, STATE,
    };
    for desired_config in [a as fn() -> MachineConfig, b] {
        let name = desired_config().name().to_string();
        let api = Arc::new(FakeNodeApi::new("node-0"));
        api.add_machine_config(a());
        api.add_machine_config(b());
        api.set_desired_image(&name, Some(LAYERED));
        let h = DaemonHarness::over_api(&a(), &api).await;
        for _ in 0..=crate::engine::os_image::REMOTE_RETRY_WAITS.len() {
            h.node.os.fail_next("Rebase", "manifest unknown");
        }
        let mut d = h.daemon(DesiredFeed::Cluster(api.desired())).await;
        d.desired_name = Some(name.clone());
        d.desired_image = Some(LAYERED.to_string());
        d.sync(false).await;
        landed(&d).await;
        assert_eq!(api.annotation(STATE).as_deref(), Some("Degraded"), "{name}");
        let reason = api.annotation(REASON).unwrap_or_default();
        assert!(reason.contains("manifest unknown"), "{name}: {reason}");
        assert_eq!(
            api.annotation(DESIRED_IMAGE).as_deref(),
            Some(LAYERED),
            "{name}: the controller's desiredImage"
        );
        assert_eq!(api.annotation(CURRENT_IMAGE_KEY), None, "{name}");
        assert_eq!(
            api.annotation(CURRENT_CONFIG).as_deref(),
            Some("rendered-a")
        );
        assert_eq!(h.node.current().as_deref(), Some("rendered-a"), "{name}");
        assert!(h.node.rebooter.reasons().is_empty(), "{name}");
        // The image can be pulled now: the retry rebases, and the boot into it completes.
        d.sync(true).await;
        assert_eq!(h.node.rebooter.reasons().len(), 1, "{name}");
        landed(&d).await;
        drop(d);
        h.node.reboot(false);
        let d = h.daemon(DesiredFeed::Cluster(api.desired())).await;
        landed(&d).await;
        assert_eq!(h.node.current(), Some(name.clone()));
        assert_eq!(
            h.node.read(CURRENT_IMAGE).as_deref(),
            Some(LAYERED),
            "{name}"
        );
        for (key, value) in [
            (CURRENT_CONFIG, name.as_str()),
            (STATE, "Done"),
            (REASON, ""),
            (CURRENT_IMAGE_KEY, LAYERED),
            (DESIRED_IMAGE, LAYERED),
        ] {
            assert_eq!(api.annotation(key).as_deref(), Some(value), "{name}: {key}");
        }
    }
}

/// Waits until the node writes `d` queued have landed on the Node API.
async fn landed(d: &super::Daemon) {
    d.engine
        .reporter()
        .cluster()
        .flush(std::time::Duration::from_secs(10))
        .await
        .expect("the node's writes landed");
}
