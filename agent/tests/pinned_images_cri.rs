//! Pinned image sets pulled through a REAL container runtime from a REAL registry: a private
//! containerd (its CRI plugin serves `runtime.v1.ImageService` on its socket, as CRI-O does)
//! and Debian's `docker-registry` on loopback with TLS and htpasswd authentication, serving
//! images this test builds; the manifests are read with the real `skopeo`. The manager
//! ([`mco_agent::pinned::Manager`]) makes one sync at a time; the MachineConfigNode is the
//! in-memory fake of the API, and there is no systemd (CRI-O's reload after the
//! drop-in changed is the unit tests', `agent/src/pinned/tests.rs`).
//!
//! Each failure ends in the MCD's condition and message, and the next sync succeeds once its
//! cause is gone: an image the registry does not have (then pushed), a wrong password in the
//! kubelet's pull secret (then corrected), a full disk (containerd's root on a tmpfs, then
//! grown).

use std::sync::Arc;
use std::time::Duration;

use machine_config::mco::node_conditions::{
    PINNED_IMAGE_SETS_DEGRADED, PINNED_IMAGE_SETS_PROGRESSING, Status,
};
use machine_config::mco::pinned_images::{CRIO_DROP_IN, DEGRADED_MESSAGE, KUBELET_AUTH_FILE};
use machine_config::{MachineConfigPool, PinnedImageSet};
use mco_agent::cluster::FakeNodeApi;
use mco_agent::cluster::mcn::conditions;
use mco_agent::cluster::pinned_watch::{NodeView, PinnedView};
use mco_agent::host::cri::{CriClient, ImageService};
use mco_agent::pinned::storage::Skopeo;
use mco_agent::pinned::{Manager, Seams, Timings};
use mco_agent::rootfs::Root;
use mco_test_support::containerd::{Options, TestContainerd};
use mco_test_support::registry::{PASSWORD, TestImage, TestRegistry, USER};
use serde_json::{Value, json};

const NODE: &str = "worker-0";

/// A node root with the kubelet's pull secret and the registry's CA where the node keeps it.
struct Node {
    dir: tempfile::TempDir,
    api: Arc<FakeNodeApi>,
    manager: Manager,
}

impl Node {
    fn new(registry: &TestRegistry, containerd: &TestContainerd) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let node = |p: &str| dir.path().join(p.trim_start_matches('/'));
        std::fs::create_dir_all(node("/var/lib/kubelet")).unwrap();
        registry.write_ca_to(&node("/etc/docker/certs.d")).unwrap();
        let api = Arc::new(FakeNodeApi::new(NODE));
        api.set_desired("rendered-worker-1");
        let seams = Seams {
            api: api.clone(),
            gates: Default::default(),
            root: Root::open(dir.path()).unwrap(),
            cri: Arc::new(CriClient::new(containerd.socket())),
            inspector: Arc::new(Skopeo {
                program: "skopeo".into(),
                auth_file: node(KUBELET_AUTH_FILE),
                test_root: Some(dir.path().to_path_buf()),
            }),
            systemd: None,
        };
        let timings = Timings {
            pull_waits: vec![Duration::from_millis(50); 3],
            worker_pause: Duration::ZERO,
            ..Timings::default()
        };
        let node = Node {
            manager: Manager::new(NODE, seams, timings),
            dir,
            api,
        };
        node.write_pull_secret(&registry.pull_secret(USER, PASSWORD));
        node
    }

    fn write_pull_secret(&self, secret: &str) {
        let path = self
            .dir
            .path()
            .join(KUBELET_AUTH_FILE.trim_start_matches('/'));
        std::fs::write(path, secret).unwrap();
    }

    fn drop_in_path(&self) -> std::path::PathBuf {
        self.dir.path().join(CRIO_DROP_IN.trim_start_matches('/'))
    }

    fn drop_in(&self) -> Option<String> {
        std::fs::read_to_string(self.drop_in_path()).ok()
    }

    /// The drop-in's inode: a write (atomic, a new file) changes it.
    fn drop_in_inode(&self) -> u64 {
        use std::os::unix::fs::MetadataExt as _;
        std::fs::metadata(self.drop_in_path()).unwrap().ino()
    }

    fn mcn(&self) -> Value {
        self.api
            .machine_config_node_object()
            .expect("the MachineConfigNode was written")
    }

    fn condition(&self, kind: &str) -> (Status, String, String) {
        let c = conditions(&self.mcn())
            .into_iter()
            .find(|c| c.kind == kind)
            .unwrap_or_else(|| panic!("no {kind} in {}", self.mcn()));
        (c.status, c.reason, c.message)
    }

    /// Asserts the MCD's failure: Degraded with its reason and message, still progressing, and
    /// the set's entry holding the error, which contains `why`.
    fn assert_failed(&self, error: &str, why: &str) {
        assert!(
            error.contains(why),
            "the sync's error {error:?} says {why:?}"
        );
        assert_eq!(
            self.condition(PINNED_IMAGE_SETS_DEGRADED),
            (
                Status::True,
                "PrefetchFailed".into(),
                DEGRADED_MESSAGE.into()
            )
        );
        assert_eq!(
            self.condition(PINNED_IMAGE_SETS_PROGRESSING).0,
            Status::True
        );
        let entry = &self.mcn()["status"]["pinnedImageSets"][0];
        assert_eq!(entry["lastFailedGeneration"], 1, "{entry}");
        let recorded = entry["lastFailedGenerationError"]
            .as_str()
            .unwrap_or_default();
        assert!(
            recorded.contains(why),
            "lastFailedGenerationError {recorded:?} says {why:?}"
        );
        assert!(entry.get("currentGeneration").is_none(), "{entry}");
    }

    fn assert_complete(&self, images: &[&str]) {
        assert_eq!(
            self.condition(PINNED_IMAGE_SETS_PROGRESSING),
            (
                Status::False,
                "AsExpected".into(),
                "All pinned image sets complete".into()
            )
        );
        assert_eq!(
            self.condition(PINNED_IMAGE_SETS_DEGRADED),
            (Status::False, "AsExpected".into(), "All is good".into())
        );
        assert_eq!(
            self.mcn()["status"]["pinnedImageSets"][0]["currentGeneration"],
            1
        );
        let mut sorted: Vec<String> = images.iter().map(|i| format!("{i:?}")).collect();
        sorted.sort();
        assert_eq!(
            self.drop_in().as_deref(),
            Some(
                format!(
                    "[crio]\n  [crio.image]\n    pinned_images = [{}]\n",
                    sorted.join(", ")
                )
                .as_str()
            )
        );
    }
}

/// The view of a worker with 100Gi allocatable storage whose pool lists set `s` (generation 1)
/// of `images`.
fn view(images: &[&str]) -> PinnedView {
    let pool: MachineConfigPool = serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": "worker"},
        "spec": {
            "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": "worker"}},
            "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}},
            "pinnedImageSets": [{"name": "s"}],
        }
    }))
    .unwrap();
    let set: PinnedImageSet = serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "PinnedImageSet",
        "metadata": {"name": "s", "uid": "uid-s", "generation": 1,
                     "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"pinnedImages": images.iter().map(|i| json!({"name": i})).collect::<Vec<_>>()},
    }))
    .unwrap();
    PinnedView {
        node: NodeView {
            labels: [("node-role.kubernetes.io/worker".to_string(), String::new())].into(),
            ready: Some("True".into()),
            disk_pressure: Some("False".into()),
            allocatable_storage: Some(100 * 1024 * 1024 * 1024),
        },
        pools: vec![pool],
        sets: vec![set],
    }
}

fn start(disk_bytes: Option<u64>) -> (TestRegistry, TestContainerd) {
    let registry = TestRegistry::start().expect("the registry starts");
    let containerd = TestContainerd::start(&Options {
        registries: vec![(registry.host.clone(), registry.ca_pem().to_string())],
        disk_bytes,
    })
    .expect("containerd starts");
    (registry, containerd)
}

async fn has(containerd: &TestContainerd, image: &str) -> bool {
    CriClient::new(containerd.socket())
        .image_present(image)
        .await
        .unwrap_or_else(|e| panic!("ImageStatus {image}: {e}\n{}", containerd.log()))
}

#[tokio::test]
async fn images_are_pulled_with_the_pull_secret_and_pinned() {
    let (registry, containerd) = start(None);
    let a = registry
        .push(&TestImage::with_file("a", 4096, b'a'), "pinned/a", "v1")
        .unwrap();
    let b = registry
        .push(&TestImage::with_file("b", 4096, b'b'), "pinned/b", "v1")
        .unwrap();
    let node = Node::new(&registry, &containerd);
    let images = [a.as_str(), b.as_str()];
    node.manager
        .sync(&view(&images))
        .await
        .unwrap_or_else(|e| panic!("{e}\ncontainerd: {}", containerd.log()));
    for image in images {
        assert!(has(&containerd, image).await, "{image} is in containerd");
    }
    node.assert_complete(&images);
    // A sync with nothing new: the drop-in is not written again.
    let written = node.drop_in_inode();
    node.manager.sync(&view(&images)).await.unwrap();
    assert_eq!(node.drop_in_inode(), written, "the drop-in was rewritten");
    // The node's pools drop the set: the drop-in goes, the images stay.
    let mut none = view(&images);
    none.pools[0].spec.pinned_image_sets.clear();
    node.manager.sync(&none).await.unwrap();
    assert_eq!(node.drop_in(), None);
    assert!(has(&containerd, &a).await, "images are never removed");
}

#[tokio::test]
async fn a_missing_image_fails_until_the_registry_has_it() {
    let (registry, containerd) = start(None);
    let image = TestImage::with_file("late", 4096, b'l');
    let reference = format!("{}/pinned/late@{}", registry.host, image.digest());
    let node = Node::new(&registry, &containerd);
    let error = node.manager.sync(&view(&[&reference])).await.unwrap_err();
    node.assert_failed(&error, "manifest unknown");
    assert_eq!(node.drop_in(), None, "nothing pinned");

    let pushed = registry.push(&image, "pinned/late", "v1").unwrap();
    assert_eq!(pushed, reference);
    node.manager
        .sync(&view(&[&reference]))
        .await
        .unwrap_or_else(|e| panic!("{e}\ncontainerd: {}", containerd.log()));
    node.assert_complete(&[&reference]);
    assert!(has(&containerd, &reference).await);
}

#[tokio::test]
async fn a_wrong_password_fails_until_the_pull_secret_is_right() {
    let (registry, containerd) = start(None);
    let reference = registry
        .push(
            &TestImage::with_file("auth", 4096, b'x'),
            "pinned/auth",
            "v1",
        )
        .unwrap();
    let node = Node::new(&registry, &containerd);
    node.write_pull_secret(&registry.pull_secret(USER, "not-the-password"));
    let error = node.manager.sync(&view(&[&reference])).await.unwrap_err();
    node.assert_failed(&error, "unauthorized");
    assert!(!has(&containerd, &reference).await);

    node.write_pull_secret(&registry.pull_secret(USER, PASSWORD));
    node.manager.sync(&view(&[&reference])).await.unwrap();
    node.assert_complete(&[&reference]);
    assert!(has(&containerd, &reference).await);
}

#[tokio::test]
async fn a_full_disk_fails_at_once_until_there_is_room() {
    const MIB: u64 = 1024 * 1024;
    // containerd's root on a 4 MiB tmpfs: a 6 MiB layer cannot be stored.
    let (registry, containerd) = start(Some(4 * MIB));
    let reference = registry
        .push(
            &TestImage::with_file("big", 6 * MIB as usize, b'b'),
            "pinned/big",
            "v1",
        )
        .unwrap();
    let node = Node::new(&registry, &containerd);
    let error = node.manager.sync(&view(&[&reference])).await.unwrap_err();
    node.assert_failed(&error, "no space left on device");
    assert!(
        error.contains("(1 tries)"),
        "a full disk is not retried: {error}"
    );

    containerd.resize_disk(64 * MIB).unwrap();
    node.manager
        .sync(&view(&[&reference]))
        .await
        .unwrap_or_else(|e| panic!("{e}\ncontainerd: {}", containerd.log()));
    node.assert_complete(&[&reference]);
    assert!(has(&containerd, &reference).await);
}
