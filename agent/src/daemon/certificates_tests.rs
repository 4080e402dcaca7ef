use std::fs;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use machine_config::controller_config::{
    API_VERSION, KIND, KUBECONFIG_DATA, KUBECONFIG_DATA_KEY, MCO_NAMESPACE, NAME, SERVICE_CA_ROTATE,
};
use machine_config::mco::paths::{BOOTSTRAP_KUBECONFIG, KUBELET_CA, KUBELET_KUBECONFIG};
use mco_test_support::tls::TestCa;
use serde_json::json;
use tokio_stream::wrappers::UnboundedReceiverStream;

use super::*;
use crate::cluster::FakeNodeApi;
use crate::host::systemd::{FakeSystemd, SystemdCall};

fn controller_config(version: &str, rotate: &str, registry: &str) -> ControllerConfig {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    ControllerConfig::from_value(json!({
        "apiVersion": API_VERSION, "kind": KIND,
        "metadata": {"name": NAME, "resourceVersion": version,
                     "annotations": {SERVICE_CA_ROTATE: rotate}},
        "spec": {
            "kubeAPIServerServingCAData": b64(&format!("ca-{version}")),
            "imageRegistryBundleData": [{"file": registry, "data": b64("reg")}],
            "internalRegistryPullSecret": b64("{\"auths\":{}}")
        }
    }))
    .unwrap()
}

struct Harness {
    dir: tempfile::TempDir,
    api: Arc<FakeNodeApi>,
    systemd: Arc<FakeSystemd>,
    events: mpsc::UnboundedSender<Option<ControllerConfig>>,
    notes: mpsc::UnboundedReceiver<CertNote>,
}

impl Harness {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let api = Arc::new(FakeNodeApi::new("node-0"));
        let systemd = Arc::new(FakeSystemd::new());
        let (events, rx) = mpsc::unbounded_channel();
        let (notes_tx, notes) = mpsc::unbounded_channel();
        let writer = CertificateWriter {
            api: api.clone(),
            root: Root::open(dir.path()).unwrap(),
            systemd: Some(systemd.clone()),
            link_pull_secret: false,
            notes: notes_tx,
            stop: StopFlag::detached(),
        };
        tokio::spawn(writer.follow(UnboundedReceiverStream::new(rx).boxed()));
        Harness {
            dir,
            api,
            systemd,
            events,
            notes,
        }
    }

    fn read(&self, path: &str) -> Option<String> {
        fs::read_to_string(self.dir.path().join(path.trim_start_matches('/'))).ok()
    }

    /// Waits until the node's `lastSyncedControllerConfigResourceVersion` is `version`.
    async fn synced(&self, version: &str) {
        for _ in 0..500 {
            if self
                .api
                .annotation(LAST_SYNCED_CONTROLLER_CONFIG_RESOURCE_VERSION)
                .as_deref()
                == Some(version)
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the node never recorded resourceVersion {version} as synced");
    }

    async fn note(&mut self) -> CertNote {
        tokio::time::timeout(Duration::from_secs(10), self.notes.recv())
            .await
            .expect("waiting for a note of the certificate writer")
            .unwrap()
    }
}

/// A new resourceVersion writes the files and records the annotations; nothing restarts.
#[tokio::test]
async fn a_new_resource_version_writes_the_files_and_the_annotations() {
    let h = Harness::start();
    h.events
        .send(Some(controller_config("10", "false", "reg..5000")))
        .unwrap();
    h.synced("10").await;
    assert_eq!(h.read(KUBELET_CA).as_deref(), Some("ca-10\n"));
    assert_eq!(
        h.read("/etc/docker/certs.d/reg:5000/ca.crt").as_deref(),
        Some("reg")
    );
    assert_eq!(
        h.api.annotation(LAST_OBSERVED_SERVER_CA).as_deref(),
        Some("false")
    );
    h.events
        .send(Some(controller_config("11", "false", "other.example")))
        .unwrap();
    h.synced("11").await;
    assert_eq!(h.read(KUBELET_CA).as_deref(), Some("ca-11\n"));
    assert!(h.read("/etc/docker/certs.d/reg:5000/ca.crt").is_none());
    // Another object, or the object going away, changes nothing.
    let mut other = controller_config("12", "false", "x");
    other.metadata.name = Some("something-else".into());
    h.events.send(Some(other)).unwrap();
    h.events.send(None).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(h.read(KUBELET_CA).as_deref(), Some("ca-11\n"));
    assert!(h.systemd.calls().is_empty(), "{:?}", h.systemd.calls());
}

/// A failed sync is a note naming what is wrong (no annotation); the next good object
/// recovers.
#[tokio::test]
async fn a_failure_is_handed_to_the_update_loop_and_recovers() {
    let mut h = Harness::start();
    h.events
        .send(Some(controller_config("20", "false", "../etc")))
        .unwrap();
    let CertNote::Failed(reason) = h.note().await else {
        panic!("expected a failure")
    };
    assert!(
        reason.starts_with("syncing ControllerConfig machine-config-controller (resourceVersion 20): ControllerConfig registry CA \"../etc\""),
        "{reason}"
    );
    assert!(h.read(KUBELET_CA).is_none());
    assert_eq!(
        h.api
            .annotation(LAST_SYNCED_CONTROLLER_CONFIG_RESOURCE_VERSION),
        None
    );
    h.events
        .send(Some(controller_config("21", "false", "good")))
        .unwrap();
    assert_eq!(h.note().await, CertNote::Recovered);
    h.synced("21").await;
}

fn kubeconfig(ca: &str) -> String {
    use base64::Engine as _;
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://api:6443\n    certificate-authority-data: {}\n",
        base64::engine::general_purpose::STANDARD.encode(ca)
    )
}

/// `service-ca-rotate: "true"` takes the `kubeconfig-data` bundle into both kubeconfigs and
/// restarts the kubelet once (a new signer was added); the rotation is not redone while the
/// annotation stays "true".
#[tokio::test]
async fn a_service_ca_rotation_reaches_the_kubeconfigs_and_restarts_the_kubelet_once() {
    let h = Harness::start();
    let old = TestCa::new("kube-apiserver-service-network-signer")
        .unwrap()
        .cert_pem()
        .trim()
        .to_string();
    let new = TestCa::new("kube-apiserver-to-kubelet-signer")
        .unwrap()
        .cert_pem()
        .trim()
        .to_string();
    for path in [BOOTSTRAP_KUBECONFIG, KUBELET_KUBECONFIG] {
        let p = h.dir.path().join(path.trim_start_matches('/'));
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, kubeconfig(&old)).unwrap();
    }
    let bundle = format!("{old}\n{new}\n");
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": KUBECONFIG_DATA, "namespace": MCO_NAMESPACE},
        "data": {KUBECONFIG_DATA_KEY: bundle}
    }))
    .unwrap();
    h.api
        .set_config_map(MCO_NAMESPACE, KUBECONFIG_DATA, Some(cm));
    h.events
        .send(Some(controller_config("30", "true", "r")))
        .unwrap();
    h.synced("30").await;
    assert_eq!(
        h.api.annotation(LAST_OBSERVED_SERVER_CA).as_deref(),
        Some("true")
    );
    for path in [BOOTSTRAP_KUBECONFIG, KUBELET_KUBECONFIG] {
        let text = h.read(path).unwrap();
        assert!(
            text.contains(&{
                use base64::Engine as _;
                base64::engine::general_purpose::STANDARD.encode(format!("{old}\n{new}"))
            }),
            "{path}: {text}"
        );
    }
    let restarts = || {
        h.systemd
            .calls()
            .into_iter()
            .filter(|c| *c == SystemdCall::Restart("kubelet.service".into()))
            .count()
    };
    assert_eq!(restarts(), 1);
    h.events
        .send(Some(controller_config("31", "true", "r")))
        .unwrap();
    h.synced("31").await;
    assert_eq!(restarts(), 1);
    assert!(Path::new(&h.dir.path().join("etc/kubernetes/kubeconfig")).exists());
}

/// The update loop makes the node Degraded with the writer's reason, and Done again (after
/// validating it) once the writer recovers.
#[tokio::test]
async fn the_update_loop_degrades_and_recovers_with_the_writer() {
    use crate::daemon::tests::DaemonHarness;
    use crate::engine::tests::{CRIO_POLICY, IMAGE, mc};
    use machine_config::mco::NodeState;

    let api = Arc::new(FakeNodeApi::new("node-0"));
    let a = mc("rendered-a", &[(CRIO_POLICY, "{}\n")], &[], IMAGE);
    api.add_machine_config(a.clone());
    api.set_desired("rendered-a");
    let h = DaemonHarness::over_api(&a, &api).await;
    let mut d = h
        .daemon(crate::daemon::DesiredFeed::Cluster(api.desired()))
        .await;
    d.desired_name = Some("rendered-a".into());
    d.sync(false).await;
    assert_eq!(d.engine().reporter().status().state, NodeState::Done);
    let reason = "syncing ControllerConfig machine-config-controller (resourceVersion 1): could not write /etc/kubernetes/kubelet-ca.crt: boom";
    d.on_certificate_note(CertNote::Failed(reason.into())).await;
    let status = d.engine().reporter().status();
    assert_eq!(
        (status.state, status.reason.as_str()),
        (NodeState::Degraded, reason)
    );
    d.on_certificate_note(CertNote::Recovered).await;
    assert_eq!(d.engine().reporter().status().state, NodeState::Done);
}

/// A change of the cluster's feature gates stops the loop between steps, for a restart, with
/// the node left as it was.
#[tokio::test]
async fn a_change_of_the_feature_gates_stops_the_loop_for_a_restart() {
    use crate::daemon::tests::DaemonHarness;
    use crate::engine::tests::{CRIO_POLICY, IMAGE, mc};
    use futures::FutureExt;
    use machine_config::mco::NodeState;

    let api = Arc::new(FakeNodeApi::new("node-0"));
    let a = mc("rendered-a", &[(CRIO_POLICY, "{}\n")], &[], IMAGE);
    api.add_machine_config(a.clone());
    api.set_desired("rendered-a");
    let h = DaemonHarness::over_api(&a, &api).await;
    let (changed, gates_changed) = tokio::sync::oneshot::channel::<String>();
    let mut d = h
        .daemon(crate::daemon::DesiredFeed::Cluster(api.desired()))
        .await
        .with_restart_on(async move { gates_changed.await.unwrap_or_default() }.boxed());
    d.start().await.unwrap();
    assert_eq!(d.restart_requested(), None);
    changed
        .send("the cluster's feature gates changed: enabled [ImageModeStatusReporting]".into())
        .unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(30), d.run())
        .await
        .expect("the loop did not stop within 30 s of the feature gates' change")
        .unwrap();
    assert_eq!(
        d.restart_requested(),
        Some("the cluster's feature gates changed: enabled [ImageModeStatusReporting]")
    );
    assert_eq!(d.engine().reporter().status().state, NodeState::Done);
}

/// After a stop request no sync begins: the writer ends and the disk and the node are left as
/// they were.
#[tokio::test]
async fn no_sync_begins_after_a_stop() {
    let dir = tempfile::tempdir().unwrap();
    let api = Arc::new(FakeNodeApi::new("node-0"));
    let (events, rx) = mpsc::unbounded_channel();
    let (notes, _notes) = mpsc::unbounded_channel();
    let stop = StopFlag::detached();
    let writer = CertificateWriter {
        api: api.clone(),
        root: Root::open(dir.path()).unwrap(),
        systemd: None,
        link_pull_secret: false,
        notes,
        stop: stop.clone(),
    };
    let task = tokio::spawn(writer.follow(UnboundedReceiverStream::new(rx).boxed()));
    stop.request();
    events
        .send(Some(controller_config("30", "false", "reg")))
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("waiting for the certificate writer to end after a stop")
        .unwrap();
    assert!(!dir.path().join(KUBELET_CA.trim_start_matches('/')).exists());
    assert_eq!(
        api.annotation(LAST_SYNCED_CONTROLLER_CONFIG_RESOURCE_VERSION),
        None
    );
}
