//! The daemon's sync with fakes for every seam: a config source, the cluster, systemd,
//! rpm-ostree and the reboot.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use anyhow::{Result, anyhow};
use async_trait::async_trait;
use machine_config::MachineConfig;
use machine_config::mco::NodeState;

use super::source::ConfigSource;
use super::{Daemon, DesiredFeed, Parked};
use crate::engine::fake::ClusterCall;
use crate::engine::tests::{CRIO_POLICY, IMAGE, Node, mc};

/// Serves configs by name (or `serving` when asked for whatever it serves); can be down.
#[derive(Default)]
pub(super) struct FakeSource {
    configs: Mutex<BTreeMap<String, MachineConfig>>,
    serving: Mutex<Option<String>>,
    down: Mutex<Option<String>>,
}

impl FakeSource {
    pub(super) fn add(&self, mc: &MachineConfig) {
        self.configs
            .lock()
            .unwrap()
            .insert(mc.name().to_string(), mc.clone());
    }
    fn serve(&self, name: &str) {
        *self.serving.lock().unwrap() = Some(name.to_string());
    }
    fn down(&self, why: Option<&str>) {
        *self.down.lock().unwrap() = why.map(str::to_string);
    }
}

#[async_trait]
impl ConfigSource for FakeSource {
    async fn fetch(&self, name: Option<&str>) -> Result<MachineConfig> {
        if let Some(why) = self.down.lock().unwrap().clone() {
            return Err(anyhow!(why));
        }
        let name = match name {
            Some(n) => n.to_string(),
            None => self
                .serving
                .lock()
                .unwrap()
                .clone()
                .expect("nothing served"),
        };
        self.configs
            .lock()
            .unwrap()
            .get(&name)
            .cloned()
            .ok_or_else(|| anyhow!("machineconfig {name:?} not found"))
    }
    fn describe(&self) -> String {
        "the fake source".into()
    }
}

fn a() -> MachineConfig {
    mc("rendered-a", &[(CRIO_POLICY, "{}\n")], &[], IMAGE)
}
fn b() -> MachineConfig {
    mc("rendered-b", &[(CRIO_POLICY, "[]\n")], &[], IMAGE)
}

/// A node (fakes for every seam) with a daemon whose cluster and source are given.
pub(crate) struct DaemonHarness {
    pub node: Node,
    cluster: Arc<dyn crate::engine::ClusterReport>,
    source: Arc<dyn ConfigSource>,
}

impl DaemonHarness {
    /// A node provisioned with `current`.
    pub async fn new(
        current: &MachineConfig,
        cluster: Arc<dyn crate::engine::ClusterReport>,
        source: Arc<dyn ConfigSource>,
    ) -> Self {
        let node = Node::new();
        node.provision(current).await;
        DaemonHarness {
            node,
            cluster,
            source,
        }
    }

    /// A node provisioned with `current` in a cluster: its state reported on the fake Node API
    /// `api` (pool `worker`), its configs read from it by name.
    pub async fn over_api(current: &MachineConfig, api: &Arc<crate::cluster::FakeNodeApi>) -> Self {
        Self::new(
            current,
            Arc::new(super::cluster::NodeReport::new(api.clone(), "worker")),
            Arc::new(super::cluster::ApiSource { api: api.clone() }),
        )
        .await
    }

    /// A started daemon.
    pub async fn daemon(&self, feed: DesiredFeed) -> Daemon {
        self.daemon_with_policy(
            feed,
            Arc::new(crate::engine::FixedPolicy(
                crate::engine::ActivePolicy::defaults(),
            )),
        )
        .await
    }

    /// A started daemon whose engine plans with `policy`.
    pub async fn daemon_with_policy(
        &self,
        feed: DesiredFeed,
        policy: Arc<dyn crate::engine::PolicySource>,
    ) -> Daemon {
        let engine = crate::engine::Engine::new(
            crate::rootfs::Root::open(self.node.path()).unwrap(),
            self.node.seams(),
            crate::engine::EngineOptions {
                boot_id_file: self.node.boot_file.clone(),
                ..Default::default()
            },
            self.cluster.clone(),
        )
        .unwrap()
        .with_policy_source(policy);
        let mut d = Daemon::new(engine, self.source.clone(), feed);
        d.start().await.unwrap();
        d
    }
}

pub(super) async fn daemon(node: &Node, source: Arc<FakeSource>) -> Daemon {
    let (_tx, rx) = futures::channel::mpsc::unbounded::<crate::cluster::DesiredTarget>();
    let mut d = Daemon::new(node.engine(), source, DesiredFeed::Cluster(Box::pin(rx)));
    d.start().await.unwrap();
    d
}

#[tokio::test]
async fn a_new_desired_config_is_fetched_by_name_and_applied() {
    let node = Node::new();
    node.provision(&a()).await;
    let source = Arc::new(FakeSource::default());
    source.add(&a());
    source.add(&b());
    let mut d = daemon(&node, source).await;
    assert_eq!(
        node.cluster.last_state(),
        Some((NodeState::Done, String::new()))
    );
    d.desired_name = Some("rendered-b".into());
    d.sync(false).await;
    assert_eq!(node.current().as_deref(), Some("rendered-b"));
    assert!(
        node.cluster
            .calls()
            .contains(&ClusterCall::SetDone("rendered-b".into()))
    );
    assert_eq!(
        node.cluster.last_state(),
        Some((NodeState::Done, String::new()))
    );
    assert!(d.drift.is_some());
}

#[tokio::test]
async fn a_missing_rendered_config_degrades_and_is_retried_but_never_strands_the_node() {
    let node = Node::new();
    node.provision(&a()).await;
    let source = Arc::new(FakeSource::default());
    source.add(&a());
    let mut d = daemon(&node, source.clone()).await;
    d.desired_name = Some("rendered-b".into());
    d.sync(false).await;
    let (state, reason) = node.cluster.last_state().unwrap();
    assert_eq!(state, NodeState::Degraded);
    assert_eq!(
        reason,
        "cannot get the desired config rendered-b from the fake source: machineconfig \"rendered-b\" not found"
    );
    assert!(d.retry_at.is_some());
    assert_eq!(node.current().as_deref(), Some("rendered-a"));
    // The drift monitor still watches the current config from disk.
    assert!(d.drift.is_some());
    source.down(Some("connection refused"));
    d.sync(true).await;
    assert_eq!(
        node.cluster.last_state().unwrap().1,
        "cannot get the desired config rendered-b from the fake source: connection refused"
    );
    source.down(None);
    source.add(&b());
    d.sync(true).await;
    assert_eq!(node.current().as_deref(), Some("rendered-b"));
}

#[tokio::test]
async fn desired_back_to_current_after_a_failure_retargets() {
    let node = Node::new();
    node.provision(&a()).await;
    let mut broken = b();
    broken.spec.kernel_arguments = vec!["nosmt".into()];
    node.os.fail_next("KernelArgs", "error: boom");
    let source = Arc::new(FakeSource::default());
    source.add(&a());
    source.add(&broken);
    let mut d = daemon(&node, source).await;
    d.desired_name = Some("rendered-b".into());
    d.sync(false).await;
    assert!(
        matches!(node.cluster.last_state(), Some((NodeState::Degraded, r)) if r.contains("boom"))
    );
    d.desired_name = Some("rendered-a".into());
    d.sync(false).await;
    assert_eq!(
        node.cluster.last_state(),
        Some((NodeState::Done, String::new()))
    );
    assert_eq!(node.current().as_deref(), Some("rendered-a"));
}

#[tokio::test]
async fn an_unreconcilable_config_is_not_retried_until_desired_changes() {
    let node = Node::new();
    node.provision(&a()).await;
    let mut bad = b();
    let mut config = bad.spec.config.take().unwrap().to_value().unwrap();
    config["passwd"] = serde_json::json!({"groups": [{"name": "x"}]});
    bad.spec.config = Some(machine_config::IgnitionJson::from_value(config));
    let source = Arc::new(FakeSource::default());
    source.add(&a());
    source.add(&bad);
    source.serve("rendered-b");
    let mut d = Daemon::new(
        node.engine(),
        source.clone(),
        DesiredFeed::Poll(std::time::Duration::from_secs(30)),
    );
    d.start().await.unwrap();
    d.sync(false).await;
    assert_eq!(
        node.cluster.last_state().unwrap().0,
        NodeState::Unreconcilable
    );
    let calls = node.cluster.calls().len();
    d.sync(false).await;
    assert_eq!(
        node.cluster.calls().len(),
        calls,
        "retried an unreconcilable config"
    );
    // A new desired config is acted on.
    let c = mc("rendered-c", &[(CRIO_POLICY, "[1]\n")], &[], IMAGE);
    source.add(&c);
    source.serve("rendered-c");
    d.sync(false).await;
    assert_eq!(node.current().as_deref(), Some("rendered-c"));
}

#[tokio::test]
async fn a_reboot_parks_the_daemon_and_a_restart_after_it_completes_the_update() {
    let node = Node::new();
    node.provision(&a()).await;
    let mut k = b();
    k.spec.kernel_arguments = vec!["nosmt".into()];
    let source = Arc::new(FakeSource::default());
    source.add(&a());
    source.add(&k);
    let mut d = daemon(&node, source.clone()).await;
    d.desired_name = Some("rendered-b".into());
    d.sync(false).await;
    assert_eq!(d.parked, Some(Parked::Rebooting));
    assert_eq!(node.rebooter.reasons().len(), 1);
    d.sync(false).await;
    assert_eq!(
        node.rebooter.reasons().len(),
        1,
        "synced while a reboot was pending"
    );
    node.reboot(false);
    let d = daemon(&node, source).await;
    assert_eq!(d.parked, None);
    assert_eq!(node.current().as_deref(), Some("rendered-b"));
    assert_eq!(
        node.cluster.last_state(),
        Some((NodeState::Done, String::new()))
    );
}

#[tokio::test]
async fn start_up_validation_reports_every_mismatch() {
    let node = Node::new();
    node.provision(&mc(
        "rendered-a",
        &[(CRIO_POLICY, "{}\n"), ("/etc/nmstate/openshift/x", "x")],
        &[],
        IMAGE,
    ))
    .await;
    node.write(CRIO_POLICY, "edited\n");
    node.write("/etc/nmstate/openshift/x", "edited\n");
    let source = Arc::new(FakeSource::default());
    let _d = daemon(&node, source).await;
    let (state, reason) = node.cluster.last_state().unwrap();
    assert_eq!(state, NodeState::Degraded);
    assert_eq!(
        reason,
        "unexpected on-disk state validating against rendered-a: content mismatch for file \
         \"/etc/containers/policy.json\"; content mismatch for file \"/etc/nmstate/openshift/x\""
    );
    assert!(
        node.cluster
            .events()
            .contains(&"OnDiskStateValidationFailed".to_string())
    );
}

#[tokio::test]
async fn a_node_without_currentconfig_is_seeded_from_node_annotations() {
    let node = Node::new();
    let a = a();
    // What the config server's Ignition wrote at provisioning.
    node.write(
        machine_config::mco::paths::NODE_ANNOTATIONS,
        r#"{"machineconfiguration.openshift.io/currentConfig":"rendered-a","machineconfiguration.openshift.io/desiredConfig":"rendered-a","machineconfiguration.openshift.io/state":"Done"}"#,
    );
    node.write(
        machine_config::mco::paths::SERVED_CONTENT,
        &a.to_json_pretty(),
    );
    node.write(CRIO_POLICY, "{}\n");
    let source = Arc::new(FakeSource::default());
    let _d = daemon(&node, source).await;
    assert_eq!(node.current().as_deref(), Some("rendered-a"));
    assert!(
        node.read(machine_config::mco::paths::NODE_ANNOTATIONS)
            .is_none()
    );
    assert!(
        node.read(machine_config::mco::paths::NODE_ANNOTATIONS_BAK)
            .unwrap()
            .contains("rendered-a")
    );
    assert_eq!(
        node.cluster.last_state(),
        Some((NodeState::Done, String::new()))
    );
}

#[tokio::test]
async fn a_node_without_any_record_is_seeded_from_its_annotation_by_name() {
    let node = Node::new();
    node.write(CRIO_POLICY, "[]\n");
    let source = Arc::new(FakeSource::default());
    source.add(&b());
    let engine = node.engine();
    let mut d = Daemon::new(
        engine,
        source,
        DesiredFeed::Poll(std::time::Duration::from_secs(30)),
    )
    .with_annotated_current(Some("rendered-b".into()));
    d.start().await.unwrap();
    assert_eq!(node.current().as_deref(), Some("rendered-b"));
    assert_eq!(
        node.cluster.last_state(),
        Some((NodeState::Done, String::new()))
    );
}
