//! The manager against fakes: the in-memory runtime, Node API, systemd and registry, on a
//! temporary root. The real runtime and registry: `agent/tests/pinned_images_cri.rs`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use machine_config::mco::node_conditions::{
    PINNED_IMAGE_SETS_DEGRADED, PINNED_IMAGE_SETS_PROGRESSING, Status,
};
use machine_config::mco::pinned_images::CRIO_DROP_IN;
use machine_config::{MachineConfigPool, PinnedImageSet};
use serde_json::{Value, json};

use super::*;
use crate::cluster::FakeNodeApi;
use crate::cluster::mcn::conditions;
use crate::cluster::pinned_watch::NodeView;
use crate::host::cri::FakeImageService;
use crate::host::systemd::{ActiveState, FakeSystemd, SystemdCall};

const GI: i64 = 1024 * 1024 * 1024;

fn digest(n: u8) -> String {
    format!("sha256:{}", format!("{n:02x}").repeat(32))
}

fn image(name: &str, n: u8) -> String {
    format!("quay.example.com/ns/{name}@{}", digest(n))
}

/// A registry whose images each have one layer of `size` bytes (named after the image).
#[derive(Default)]
struct FakeRegistry {
    missing: Mutex<BTreeMap<String, String>>,
    size: i64,
}

#[async_trait]
impl ImageInspector for FakeRegistry {
    async fn raw_manifest(&self, image: &str) -> Result<String, String> {
        if let Some(why) = self.missing.lock().unwrap().get(image) {
            return Err(format!(
                "failed to inspect the manifest of {image:?}: {why}"
            ));
        }
        Ok(json!({"schemaVersion": 2, "layers": [{"digest": format!("layer-of-{image}"), "size": self.size}]})
            .to_string())
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    api: Arc<FakeNodeApi>,
    cri: Arc<FakeImageService>,
    registry: Arc<FakeRegistry>,
    systemd: Arc<FakeSystemd>,
    manager: Arc<Manager>,
}

fn fixture(size: i64) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    std::fs::create_dir_all(root.join("var/lib/kubelet")).unwrap();
    std::fs::write(
        root.join("var/lib/kubelet/config.json"),
        r#"{"auths":{"quay.example.com":{"auth":"dXNlcjpwYXNz"}}}"#,
    )
    .unwrap();
    let api = Arc::new(FakeNodeApi::new("worker-0"));
    api.set_desired("rendered-a");
    let cri = Arc::new(FakeImageService::new());
    let registry = Arc::new(FakeRegistry {
        size,
        ..FakeRegistry::default()
    });
    let systemd = Arc::new(
        FakeSystemd::new()
            .with_unit("crio.service", ActiveState::Active)
            .with_reloadable("crio.service"),
    );
    let seams = Seams {
        api: api.clone(),
        gates: Gates::default(),
        root: Root::open(&root).unwrap(),
        cri: cri.clone(),
        inspector: registry.clone(),
        systemd: Some(systemd.clone()),
    };
    let timings = Timings {
        pull_waits: vec![Duration::from_millis(1); 3],
        worker_pause: Duration::ZERO,
        retry_initial: Duration::from_millis(20),
        retry_max: Duration::from_millis(100),
        ..Timings::default()
    };
    let manager = Arc::new(Manager::new("worker-0", seams, timings));
    Fixture {
        _dir: dir,
        root,
        api,
        cri,
        registry,
        systemd,
        manager,
    }
}

fn set(name: &str, generation: i64, images: &[String]) -> PinnedImageSet {
    serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "PinnedImageSet",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "generation": generation},
        "spec": {"pinnedImages": images.iter().map(|i| json!({"name": i})).collect::<Vec<_>>()},
    }))
    .unwrap()
}

fn pool(name: &str, sets: &[&str]) -> MachineConfigPool {
    MachineConfigPool::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}},
            "pinnedImageSets": sets.iter().map(|s| json!({"name": s})).collect::<Vec<_>>(),
        },
    }))
    .unwrap()
}

fn view(roles: &[&str], pools: Vec<MachineConfigPool>, sets: Vec<PinnedImageSet>) -> PinnedView {
    PinnedView {
        node: NodeView {
            labels: roles
                .iter()
                .map(|r| (format!("node-role.kubernetes.io/{r}"), String::new()))
                .collect(),
            ready: Some("True".into()),
            disk_pressure: Some("False".into()),
            allocatable_storage: Some(100 * GI),
        },
        pools,
        sets,
    }
}

fn mcn(f: &Fixture) -> Value {
    f.api
        .machine_config_node_object()
        .expect("a MachineConfigNode")
}

fn condition(o: &Value, kind: &str) -> (Status, String, String) {
    let c = conditions(o).into_iter().find(|c| c.kind == kind).unwrap();
    (c.status, c.reason, c.message)
}

fn drop_in(f: &Fixture) -> Option<String> {
    std::fs::read_to_string(f.root.join(CRIO_DROP_IN.trim_start_matches('/'))).ok()
}

#[tokio::test]
async fn every_pool_of_the_node_is_pulled_and_pinned_the_primary_reported() {
    let f = fixture(1000);
    let (a, b, c) = (image("a", 1), image("b", 2), image("c", 3));
    f.cri.add(&c);
    let v = view(
        &["worker", "infra"],
        vec![pool("worker", &["base"]), pool("infra", &["extra"])],
        vec![
            set("base", 1, &[a.clone(), c.clone()]),
            set("extra", 4, std::slice::from_ref(&b)),
        ],
    );
    f.manager.sync(&v).await.unwrap();
    assert!(f.cri.has(&a) && f.cri.has(&b));
    assert_eq!(f.cri.pulls_of(&c), 0, "present images are not pulled");
    let mut want = [a.clone(), b.clone(), c.clone()];
    want.sort();
    assert_eq!(
        drop_in(&f).unwrap(),
        format!(
            "[crio]\n  [crio.image]\n    pinned_images = [\"{}\", \"{}\", \"{}\"]\n",
            want[0], want[1], want[2]
        )
    );
    assert_eq!(
        f.systemd.calls(),
        [SystemdCall::Reload("crio.service".into())]
    );
    let o = mcn(&f);
    assert_eq!(o["spec"]["pool"]["name"], "infra", "the primary pool");
    assert_eq!(
        o["status"]["pinnedImageSets"],
        json!([{"name": "extra", "desiredGeneration": 4, "currentGeneration": 4}]),
        "only the primary pool's sets"
    );
    assert_eq!(
        condition(&o, PINNED_IMAGE_SETS_PROGRESSING).0,
        Status::False
    );
    assert_eq!(condition(&o, PINNED_IMAGE_SETS_DEGRADED).1, "AsExpected");
    // Pulled credentials: the kubelet's for the images' registry.
    assert!(f.cri.calls().iter().any(|c| matches!(
        c,
        crate::host::cri::ImageCall::Pull(_, Some(user)) if user == "user"
    )));

    // Again: the drop-in is current, nothing reloaded, nothing pulled.
    let pulls = f.cri.calls().len();
    f.manager.sync(&v).await.unwrap();
    assert_eq!(f.systemd.calls().len(), 1, "no second reload");
    assert!(
        !f.cri.calls()[pulls..]
            .iter()
            .any(|c| matches!(c, crate::host::cri::ImageCall::Pull(..))),
        "complete sets are not pulled again"
    );
}

#[tokio::test]
async fn failures_end_degraded_with_the_mcds_words() {
    let f = fixture(1000);
    let a = image("a", 1);
    let v = view(
        &["worker"],
        vec![pool("worker", &["s"])],
        vec![set("s", 2, std::slice::from_ref(&a))],
    );

    // a missing image: its manifest is not in the registry
    f.registry
        .missing
        .lock()
        .unwrap()
        .insert(a.clone(), "manifest unknown".into());
    let e = f.manager.sync(&v).await.unwrap_err();
    assert_eq!(
        e,
        format!("failed to inspect the manifest of {a:?}: manifest unknown")
    );
    let o = mcn(&f);
    assert_eq!(
        condition(&o, PINNED_IMAGE_SETS_DEGRADED),
        (
            Status::True,
            "PrefetchFailed".into(),
            "One or more PinnedImageSet is experiencing an error. See PinnedImageSet list for more details.".into()
        )
    );
    assert_eq!(condition(&o, PINNED_IMAGE_SETS_PROGRESSING).0, Status::True);
    assert_eq!(o["status"]["pinnedImageSets"][0]["lastFailedGeneration"], 2);
    assert_eq!(
        o["status"]["pinnedImageSets"][0]["lastFailedGenerationError"],
        e
    );
    assert!(drop_in(&f).is_none(), "nothing pinned");

    // the runtime refuses the pull (a wrong credential), every attempt
    f.registry.missing.lock().unwrap().clear();
    for _ in 0..4 {
        f.cri
            .fail_pull(&a, "failed to pull and unpack image: 401 Unauthorized");
    }
    let e = f.manager.sync(&v).await.unwrap_err();
    assert_eq!(
        e,
        format!(
            "failed to pull image {a:?} (4 tries): failed to pull and unpack image: 401 Unauthorized"
        )
    );
    // and then it works
    f.manager.sync(&v).await.unwrap();
    let o = mcn(&f);
    assert_eq!(condition(&o, PINNED_IMAGE_SETS_DEGRADED).0, Status::False);
    assert_eq!(o["status"]["pinnedImageSets"][0]["currentGeneration"], 2);
    assert!(
        o["status"]["pinnedImageSets"][0]
            .get("lastFailedGeneration")
            .is_none()
    );
}

#[tokio::test]
async fn the_storage_check() {
    let f = fixture(3 * GI);
    let a = image("a", 1);
    let mut v = view(
        &["worker"],
        vec![pool("worker", &["s"])],
        vec![set("s", 1, std::slice::from_ref(&a))],
    );
    v.node.allocatable_storage = Some(20 * GI);
    // twice 3Gi is more than the 4Gi above the 16Gi kept free
    assert_eq!(
        f.manager.sync(&v).await.unwrap_err(),
        "storage available is less than minimum required"
    );
    assert_eq!(f.cri.pulls_of(&a), 0);
    v.node.allocatable_storage = Some(10 * GI);
    assert_eq!(
        f.manager.sync(&v).await.unwrap_err(),
        format!(
            "storage available is less than minimum required capacity: {}, required: {}",
            10 * GI,
            16 * GI
        )
    );
    v.node.allocatable_storage = None;
    assert_eq!(
        f.manager.sync(&v).await.unwrap_err(),
        format!(
            "storage available is less than minimum required capacity: 0, required: {}",
            16 * GI
        ),
        "none reported is none"
    );
    v.node.disk_pressure = Some("True".into());
    assert_eq!(
        f.manager.sync(&v).await.unwrap_err(),
        "node worker-0 is reporting OutOfDisk=True"
    );
    v.node.ready = Some("Unknown".into());
    assert_eq!(
        f.manager.sync(&v).await.unwrap_err(),
        "node worker-0 is reporting NotReady=Unknown"
    );
}

#[tokio::test]
async fn missing_sets_and_lost_images() {
    let f = fixture(1000);
    let a = image("a", 1);
    let gone = view(&["worker"], vec![pool("worker", &["s"])], vec![]);
    assert_eq!(
        f.manager.sync(&gone).await.unwrap_err(),
        "failed to get PinnedImageSet \"s\": pinnedimageset.machineconfiguration.openshift.io \"s\" not found"
    );
    let v = view(
        &["worker"],
        vec![pool("worker", &["s"])],
        vec![set("s", 1, std::slice::from_ref(&a))],
    );
    f.manager.sync(&v).await.unwrap();
    // The runtime loses the image: the next sync says so and forgets what it knew ...
    f.cri.remove(&a);
    assert_eq!(
        f.manager.sync(&v).await.unwrap_err(),
        format!("failed to pull image: image removed during sync: {a}")
    );
    // ... so that the one after pulls it again.
    f.manager.sync(&v).await.unwrap();
    assert!(f.cri.has(&a));
    // No set left: the drop-in goes, the runtime is reloaded.
    let none = view(&["worker"], vec![pool("worker", &[])], vec![]);
    f.manager.sync(&none).await.unwrap();
    assert!(drop_in(&f).is_none());
    assert_eq!(
        f.systemd.calls(),
        [
            SystemdCall::Reload("crio.service".into()),
            SystemdCall::Reload("crio.service".into())
        ]
    );
}

#[tokio::test]
async fn a_failed_reload_fails_the_sync() {
    let f = fixture(1000);
    f.systemd.fail_call(
        "ReloadUnit",
        "crio.service",
        "Unit crio.service not loaded.",
    );
    let v = view(
        &["worker"],
        vec![pool("worker", &["s"])],
        vec![set("s", 1, &[image("a", 1)])],
    );
    let e = f.manager.sync(&v).await.unwrap_err();
    assert!(
        e.starts_with("could not apply update: reloading crio configuration failed. Error: "),
        "{e}"
    );
    assert!(e.contains("Unit crio.service not loaded."), "{e}");
}

#[tokio::test]
async fn the_loop_syncs_on_changes_and_retries_failures() {
    let f = fixture(1000);
    let a = image("a", 1);
    let (tx, rx) = futures::channel::mpsc::unbounded();
    let run = tokio::spawn(f.manager.clone().run(rx.boxed()));
    f.registry
        .missing
        .lock()
        .unwrap()
        .insert(a.clone(), "manifest unknown".into());
    let v = view(
        &["worker"],
        vec![pool("worker", &["s"])],
        vec![set("s", 1, std::slice::from_ref(&a))],
    );
    tx.unbounded_send(v.clone()).unwrap();
    // it fails, and is retried until the image is there
    wait_for("a failed sync", || {
        f.api
            .machine_config_node_object()
            .is_some_and(|o| condition(&o, PINNED_IMAGE_SETS_DEGRADED).0 == Status::True)
    })
    .await;
    f.registry.missing.lock().unwrap().clear();
    wait_for("the retry to pin the image", || drop_in(&f).is_some()).await;
    assert!(f.cri.has(&a));
    // the same plan again starts nothing; a new generation does
    let writes = f.api.machine_config_node_writes().len();
    tx.unbounded_send(v.clone()).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(f.api.machine_config_node_writes().len(), writes);
    let b = image("b", 2);
    let v2 = view(
        &["worker"],
        vec![pool("worker", &["s"])],
        vec![set("s", 2, &[a.clone(), b.clone()])],
    );
    tx.unbounded_send(v2).unwrap();
    wait_for("the new generation", || {
        drop_in(&f).is_some_and(|d| d.contains(&b))
    })
    .await;
    run.abort();
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[test]
fn a_plan_changes_with_what_the_node_must_hold_only() {
    let a = image("a", 1);
    let v = view(
        &["worker"],
        vec![pool("worker", &["s"])],
        vec![set("s", 1, std::slice::from_ref(&a))],
    );
    let plan = Plan::of("worker-0", &v);
    let mut other = v.clone();
    other.node.ready = Some("False".into());
    other.sets.push(set("unrelated", 9, &[]));
    assert_eq!(
        Plan::of("worker-0", &other),
        plan,
        "conditions and other sets do not count"
    );
    let mut next = v.clone();
    next.sets[0].metadata.generation = Some(2);
    assert_ne!(Plan::of("worker-0", &next), plan);
    let mut moved = v;
    moved.node.labels.clear();
    assert_ne!(Plan::of("worker-0", &moved), plan);
    let _ = Path::new("/");
}
