//! Killed at every failpoint of an update that leaves image mode, the agent converges.
//!
//! A node in a cluster runs a built image (its Node's `desiredImage`); the pool then stops
//! following it: `desiredConfig` names a new rendered config (so the files change and the
//! write steps meet their failpoints) and `desiredImage` goes, in one write. The agent rebases
//! to the rendered config's base image and reboots; after that reboot ostree's `/etc` merge
//! has dropped the files the built image carried, so the agent writes them again
//! (`RewritingFiles`, failpoint `engine::rewritten`) and reboots once more. Killed at each
//! failpoint of the three stretches (before the first reboot, between the two, after the
//! second), started again, it ends Done in the new config with its files, the base image
//! booted, no image annotation left, and no reboot asked for but the two (and the one a kill
//! right after a request makes it ask again).
//!
//! The stand-in runs in the booted simulation (rebases are staged and boot at a reboot). The
//! agent's root is a directory apart from the simulated deployments, so the `/etc` merge's
//! drop is done by the test at the reboot into the base image ([`merge_drops_the_files`]).

use crate::daemon_env::NODE;
use machine_config::mco::annotations::{CURRENT_IMAGE, DESIRED_CONFIG, DESIRED_IMAGE};
use mco_test_support::apiserver::Target;
use serde_json::json;

use super::*;

/// The pool's built image, mapped by the stand-in to a commit of its own.
const BUILT: &str = "registry.example/ocl/worker@sha256:4444444444444444444444444444444444444444444444444444444444444444";

/// Where in the update a point is killed at.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Stretch {
    /// Before the first reboot (the rebase to the base image).
    BeforeTheFirstReboot,
    /// After it, while the files are written again and the second reboot is asked for.
    BetweenTheReboots,
    /// After the second reboot (verification, commit).
    AfterTheSecondReboot,
}

/// The failpoints met between the two reboots: the rewrite meets the apply's own points too
/// (the temp file of a managed file, the middle of the writes).
const BETWEEN_THE_REBOOTS: &[&str] = &[
    TEMP_WRITTEN,
    "engine::apply-midway",
    "engine::rewritten",
    "engine::reboot-recorded",
    "engine::reboot-requested",
];

const AFTER_THE_SECOND_REBOOT: &[&str] = &["engine::verifying", "engine::committed"];

/// The config of `version` on the base image `base`.
fn config_on(version: u32, base: &str) -> String {
    config(version, &[]).replacen("spec:\n", &format!("spec:\n  osImageURL: {base}\n"), 1)
}

/// What ostree's `/etc` merge does at the boot into the base image: the managed files came
/// with the built image's `/usr/etc`, unmodified in `/etc`, so they are gone.
fn merge_drops_the_files(node: &Node) {
    for path in [FILE_A, FILE_B] {
        std::fs::remove_file(node.path(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    }
}

/// Every managed file absent (dropped by the merge, not written again yet) or whole at
/// `version`: never a fragment.
fn assert_absent_or_whole(node: &Node, version: u32, point: &str) {
    let whole = [
        (FILE_A, format!("a: {version}\n")),
        (FILE_B, format!("{{\"v\": {version}}}\n")),
    ];
    for (path, text) in whole {
        let found = node.read(path);
        assert!(
            found.is_none() || found.as_deref() == Some(text.as_str()),
            "{point}: {path} is {found:?}\n{}",
            node.logs()
        );
    }
}

/// Waits until the Node says Done with `image` as its current image (`None`: no image).
async fn wait_image(node: &Node, what: &str, image: Option<&str>) {
    let deadline = std::time::Instant::now() + secs(60);
    while node.annotation(STATE).as_deref() != Some("Done")
        || node.annotation(CURRENT_IMAGE).as_deref() != image
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: the node never said Done in image {image:?}: state {:?} reason {:?} image {:?}\n{}",
            node.annotation(STATE),
            node.annotation(REASON),
            node.annotation(CURRENT_IMAGE),
            node.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How often the agents so far wrote the files again after leaving image mode.
fn rewrites(node: &Node) -> usize {
    node.logs()
        .matches("left image mode: writing the desired config's files")
        .count()
}

/// The booted deployment's container image reference.
fn booted_reference(node: &Node) -> Option<String> {
    node.os.deployments()[0].origin_value("origin", "container-image-reference")
}

/// A node in a cluster, Done in config 1 on the base image (one reboot to rebase to it), the
/// built image known to the stand-in. Returns the base image.
async fn node_on_the_base_image(node: &mut Node) -> String {
    node.os.sysroot.commit("fakeos/built", "built.0").unwrap();
    node.os.map_image(BUILT, "fakeos/built");
    node.start_agent(&[]);
    let first = node.target_rendered().await;
    node.wait_status("provisioned", secs(60), done_in(&first))
        .await;
    node.wait_annotations("provisioned", secs(30), "Done", Some(&first))
        .await;
    node.kill_agent().await;
    let base = os_image(node, 1);
    node.write_manifest("00-base.yaml", &config_on(1, &base));
    let name = node.target_rendered().await;
    until_rebooted(node, "the base image").await;
    node.start_agent(&[]);
    node.wait_status("on the base image", secs(60), done_in(&name))
        .await;
    node.wait_annotations("on the base image", secs(30), "Done", Some(&name))
        .await;
    node.kill_agent().await;
    base
}

/// The pool follows its built image: `desiredImage` set, the config unchanged; one reboot.
async fn enter_image_mode(node: &mut Node) {
    node.api()
        .patch(
            "nodes",
            None,
            NODE,
            &json!({"metadata": {"annotations": {DESIRED_IMAGE: BUILT}}}),
            Target::Main,
        )
        .unwrap();
    until_rebooted(node, "entering image mode").await;
    node.start_agent(&[]);
    wait_image(node, "entering image mode", Some(BUILT)).await;
    node.kill_agent().await;
    let reference = format!("ostree-unverified-registry:{BUILT}");
    assert_eq!(booted_reference(node).as_deref(), Some(reference.as_str()));
}

/// The pool leaves image mode with config `version` on `base`: `desiredConfig` set and
/// `desiredImage` removed in one write, as the node controller does. Returns the config's name.
async fn leave_image_mode(node: &Node, version: u32, base: &str) -> String {
    node.write_manifest("00-base.yaml", &config_on(version, base));
    let name = node.rendered_name();
    node.wait_served(&name).await;
    let annotations = json!({DESIRED_CONFIG: name, DESIRED_IMAGE: null});
    node.api()
        .patch(
            "nodes",
            None,
            NODE,
            &json!({"metadata": {"annotations": annotations}}),
            Target::Main,
        )
        .unwrap();
    name
}

/// Leaves image mode once for each of `points`, killed at the point in `stretch`.
async fn killed_while_leaving_image_mode(stretch: Stretch, points: &[&str]) {
    let mut node = Node::new_booted(&[("00-base.yaml", &config(0, &[]))], BOOTED_STANDIN)
        .await
        .with_cluster();
    let base = node_on_the_base_image(&mut node).await;
    for (i, point) in points.iter().enumerate() {
        let version = i as u32 + 2;
        enter_image_mode(&mut node).await;
        let before = node.logind.reboots();
        let rewrites_before = rewrites(&node);
        let name = leave_image_mode(&node, version, &base).await;
        match stretch {
            Stretch::BeforeTheFirstReboot => {
                crash_at(&mut node, point).await;
                assert_whole(&node, &[version - 1, version], point);
                until_rebooted(&mut node, point).await;
                merge_drops_the_files(&node);
                until_rebooted(&mut node, point).await;
            }
            Stretch::BetweenTheReboots => {
                until_rebooted(&mut node, point).await;
                merge_drops_the_files(&node);
                crash_at(&mut node, point).await;
                assert_absent_or_whole(&node, version, point);
                until_rebooted(&mut node, point).await;
            }
            Stretch::AfterTheSecondReboot => {
                until_rebooted(&mut node, point).await;
                merge_drops_the_files(&node);
                until_rebooted(&mut node, point).await;
                crash_at(&mut node, point).await;
            }
        }
        node.start_agent(&[]);
        node.wait_status(point, secs(60), done_in(&name)).await;
        wait_image(&node, point, None).await;
        node.kill_agent().await;
        assert_converged(&node, &name, version, point);
        let reference = format!("ostree-unverified-registry:{base}");
        assert_eq!(
            booted_reference(&node).as_deref(),
            Some(reference.as_str()),
            "{point}: the base image is booted"
        );
        // Two reboots; a kill right after a request makes the restarted agent, which cannot
        // know whether that reboot is coming, ask once more.
        let asked_again = u32::from(*point == "engine::reboot-requested");
        assert_eq!(
            node.logind.reboots() - before,
            2 + asked_again,
            "{point}: reboots asked for\n{}",
            node.logs()
        );
        assert!(
            rewrites(&node) > rewrites_before,
            "{point}: the files were not written again\n{}",
            node.logs()
        );
    }
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_before_the_first_reboot_of_leaving_image_mode_it_converges() {
    killed_while_leaving_image_mode(Stretch::BeforeTheFirstReboot, REBOOT_POINTS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_between_the_reboots_of_leaving_image_mode_it_converges() {
    killed_while_leaving_image_mode(Stretch::BetweenTheReboots, BETWEEN_THE_REBOOTS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_second_reboot_of_leaving_image_mode_it_converges() {
    killed_while_leaving_image_mode(Stretch::AfterTheSecondReboot, AFTER_THE_SECOND_REBOOT).await;
}
