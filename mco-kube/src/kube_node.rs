//! [`KubeNodeApi`]: the [`NodeApi`] on a real API server.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::utils::ResetTimerBackoff;
use kube::runtime::{WatchStreamExt, watcher};
use machine_config::controller_config::{self, ControllerConfig};
use machine_config::feature_gates::{
    CLUSTER_VERSION_NAME, ClusterVersion, FEATURE_GATE_NAME, FeatureGate,
};
use machine_config::machineconfiguration::CLUSTER_NAME;
use machine_config::mco::NodeState;
use machine_config::mco::annotations::{
    CURRENT_CONFIG, DESIRED_DRAIN, DRAIN_VERB, LAST_APPLIED_DRAIN, REASON, STATE, UNCORDON_VERB,
};
use machine_config::mco::events::reason;
use machine_config::{MachineConfig, MachineConfigPool, MachineConfiguration};
use tracing::{info, warn};

use super::annotations::{self, DesiredTarget, NodeAnnotations, drain_request, truncate_reason};
use super::client::client_from_kubeconfig;
use super::drain::Drainer;
use super::error::ClusterError;
use super::events::{self, EventRecorder};
use super::node_view::NodeView;
use super::objects::Node;
use super::retry::{RetryPolicy, with_retry};
use super::{ClusterOptions, DrainMode, NodeApi, handshake, named};

/// The node's side of the protocol against the API server.
pub struct KubeNodeApi {
    pub(super) node: String,
    pub(super) nodes: Api<Node>,
    pub(super) client: kube::Client,
    drainer: Drainer,
    events: EventRecorder,
    mode: DrainMode,
    pub(super) options: ClusterOptions,
    pub(super) retry: RetryPolicy,
    /// The Node as last seen through the watch or our own writes (`node_view`).
    pub(super) view: Arc<NodeView>,
    /// The MachineConfigNode as our last write returned it (`kube_mcn`).
    pub(super) mcn: std::sync::Mutex<Option<serde_json::Value>>,
}

impl KubeNodeApi {
    /// Backoff of a broken `desiredConfig` watch: the same delays as every other API call
    /// (kube's default starts at 0.8 s and grows to 30 s, too slow for a node waiting on its
    /// next config), with jitter so a fleet does not re-watch in step, and starting over once a
    /// watch has stayed healthy for a minute.
    fn watch_backoff(&self) -> ResetTimerBackoff<watcher::ExponentialBackoff> {
        ResetTimerBackoff::new(
            backon::ExponentialBuilder::default()
                .with_min_delay(self.retry.initial_delay)
                .with_max_delay(self.retry.max_delay)
                .with_factor(2.0)
                .with_jitter()
                .without_max_times()
                .into(),
            Duration::from_secs(60),
        )
    }

    /// Connects with the node's kubeconfig (and the eviction kubeconfig, if any).
    pub async fn connect(options: &ClusterOptions) -> Result<Self, ClusterError> {
        let node_client = client_from_kubeconfig(&options.kubeconfig).await?;
        let eviction_client = match &options.eviction_kubeconfig {
            Some(path) => client_from_kubeconfig(path).await?,
            None => node_client.clone(),
        };
        Ok(Self::with_clients(options, node_client, eviction_client))
    }

    pub fn with_clients(
        options: &ClusterOptions,
        node_client: kube::Client,
        eviction_client: kube::Client,
    ) -> Self {
        let node = options.node_name.clone();
        Self {
            nodes: Api::all(node_client.clone()),
            drainer: Drainer::new(
                &node,
                node_client.clone(),
                eviction_client,
                options.drain.clone(),
                options.retry.clone(),
            ),
            events: EventRecorder::new(
                node_client.clone(),
                &options.event_namespace,
                &node,
                options.retry.clone(),
            ),
            client: node_client,
            mode: options.drain_mode,
            retry: options.retry.clone(),
            options: options.clone(),
            view: Arc::default(),
            mcn: std::sync::Mutex::default(),
            node,
        }
    }

    pub fn drainer(&self) -> &Drainer {
        &self.drainer
    }

    /// The client with the node's credentials, for the watches of other parts of the agent
    /// (the pinned image sets).
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// Patches annotations until the patch lands.
    async fn patch_annotations(
        &self,
        changes: &[(&str, Option<&str>)],
    ) -> Result<(), ClusterError> {
        let patch = Patch::Merge(annotations::merge_patch(changes));
        let params = PatchParams::default();
        let keys: Vec<&str> = changes.iter().map(|(k, _)| *k).collect();
        let action = format!("writing annotations {keys:?} of node {}", self.node);
        let node = with_retry(&self.retry, &action, || {
            self.nodes.patch(&self.node, &params, &patch)
        })
        .await?;
        self.view.saw(&node);
        Ok(())
    }

    /// The Node: from the watch when it is live (no request), else read from the API server.
    pub(super) async fn node(&self) -> Result<Node, ClusterError> {
        if let Some(node) = self.view.current() {
            return Ok(node);
        }
        self.fresh_node().await
    }

    /// The Node read from the API server.
    pub(super) async fn fresh_node(&self) -> Result<Node, ClusterError> {
        let action = format!("reading node {}", self.node);
        let node = with_retry(&self.retry, &action, || self.nodes.get(&self.node)).await?;
        self.view.saw(&node);
        Ok(node)
    }

    /// Records an event; a failure is logged, never fatal to the caller's work.
    async fn note(&self, reason: &str, message: &str) {
        events::note(self, reason, message).await
    }

    async fn agent_drain(&self, config: &str) -> Result<(), ClusterError> {
        self.note(reason::CORDON, "Cordoned node to apply update")
            .await;
        self.note(reason::DRAIN, "Draining node to update config.")
            .await;
        let pause = self.drainer.options().attempt_pause;
        let told = std::sync::atomic::AtomicBool::new(false);
        let (nodes, node, retry) = (self.nodes.clone(), self.node.clone(), self.retry.clone());
        let drained = self
            .drainer
            .drain_reporting(|failure| {
                // While the drain goes on, the node's reason names the pods left and what holds
                // them (as the companion's drain controller shows it in controller mode); the
                // MCD leaves it empty until it gives up after an hour.
                told.store(true, std::sync::atomic::Ordering::Relaxed);
                let reason = format!(
                    "{failure}; retrying in {}",
                    humantime::format_duration(pause)
                );
                let (nodes, node, retry) = (nodes.clone(), node.clone(), retry.clone());
                Box::pin(async move {
                    let patch = Patch::Merge(annotations::merge_patch(&[(
                        REASON,
                        Some(truncate_reason(&reason)),
                    )]));
                    let action =
                        format!("writing the drain failure into the reason of node {node}");
                    let params = PatchParams::default();
                    if let Err(e) =
                        with_retry(&retry, &action, || nodes.patch(&node, &params, &patch)).await
                    {
                        warn!(node = %node, error = %e, "{action}");
                    }
                })
            })
            .await;
        let told = told.into_inner();
        match drained {
            Ok(report) => {
                info!(node = %self.node, config, seconds = report.elapsed.as_secs_f64(), removed = report.removed.len(), "Successful drain");
                let request = drain_request(DRAIN_VERB, config);
                let mut changes = vec![
                    (DESIRED_DRAIN, Some(request.as_str())),
                    (LAST_APPLIED_DRAIN, Some(request.as_str())),
                ];
                if told {
                    changes.push((REASON, Some("")));
                }
                self.patch_annotations(&changes).await
            }
            Err(e) => {
                self.note(reason::FAILED_TO_DRAIN, &e.to_string()).await;
                Err(e.into())
            }
        }
    }

    async fn agent_uncordon(&self, config: &str) -> Result<(), ClusterError> {
        // A node the watch shows schedulable (an update without a drain) needs no patch.
        let cordoned = self
            .view
            .current()
            .is_none_or(|n| n.spec.and_then(|s| s.unschedulable).unwrap_or(false));
        if cordoned && let Err(e) = self.drainer.uncordon().await {
            self.note(reason::FAILED_TO_UNCORDON, &e.to_string()).await;
            return Err(e.into());
        }
        let request = drain_request(UNCORDON_VERB, config);
        self.patch_annotations(&[
            (DESIRED_DRAIN, Some(&request)),
            (LAST_APPLIED_DRAIN, Some(&request)),
        ])
        .await?;
        self.note(
            reason::UNCORDON,
            &format!("Update completed for config {config} and node has been uncordoned"),
        )
        .await;
        Ok(())
    }
}

#[async_trait]
impl NodeApi for KubeNodeApi {
    fn node_name(&self) -> &str {
        &self.node
    }

    async fn annotations(&self) -> Result<NodeAnnotations, ClusterError> {
        let node = self.node().await?;
        Ok(NodeAnnotations::new(
            node.metadata.annotations.unwrap_or_default(),
        ))
    }

    async fn report(&self, state: NodeState, reason: &str) -> Result<(), ClusterError> {
        self.patch_annotations(&[
            (STATE, Some(state.as_str())),
            (REASON, Some(truncate_reason(reason))),
        ])
        .await
    }

    async fn set_current(&self, config: &str) -> Result<(), ClusterError> {
        self.patch_annotations(&[
            (CURRENT_CONFIG, Some(config)),
            (STATE, Some(NodeState::Done.as_str())),
            (REASON, Some("")),
        ])
        .await
    }

    async fn set_annotations(&self, changes: &[(&str, Option<&str>)]) -> Result<(), ClusterError> {
        self.patch_annotations(changes).await
    }

    async fn drain(&self, config: &str) -> Result<(), ClusterError> {
        if self.annotations().await?.single_replica() {
            self.note(reason::DRAIN, "Drain not required, skipping")
                .await;
            return Ok(());
        }
        match self.mode {
            DrainMode::Agent => self.agent_drain(config).await,
            DrainMode::Controller => self.controller_drain(config).await,
        }
    }

    async fn uncordon(&self, config: &str) -> Result<(), ClusterError> {
        match self.mode {
            DrainMode::Agent => self.agent_uncordon(config).await,
            DrainMode::Controller => {
                handshake::request(self, &self.options.handshake, UNCORDON_VERB, config).await
            }
        }
    }

    fn desired(&self) -> BoxStream<'static, DesiredTarget> {
        // The watch runs in a task of its own, not when the caller polls the stream: the view
        // it feeds must stay current while the daemon is busy with an update (a drain
        // handshake reads `lastAppliedDrain` from it). It ends when the stream is dropped.
        let config = watcher::Config::default().fields(&format!("metadata.name={}", self.node));
        let (node, view) = (self.node.clone(), self.view.clone());
        let events = watcher(self.nodes.clone(), config).backoff(self.watch_backoff());
        let (targets, received) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            futures::pin_mut!(events);
            let mut last: Option<DesiredTarget> = None;
            while let Some(event) = events.next().await {
                let target = match event {
                    Ok(watcher::Event::Init) => {
                        view.set_live(false);
                        continue;
                    }
                    Ok(watcher::Event::InitDone) => {
                        view.set_live(true);
                        continue;
                    }
                    Ok(watcher::Event::InitApply(n) | watcher::Event::Apply(n)) => {
                        view.saw(&n);
                        let annotations = n.metadata.annotations.unwrap_or_default();
                        match NodeAnnotations::new(annotations).desired_target() {
                            Some(target) => target,
                            None => continue,
                        }
                    }
                    Ok(watcher::Event::Delete(_)) => {
                        view.set_live(false);
                        continue;
                    }
                    Err(e) => {
                        view.set_live(false);
                        warn!(node = %node, error = %e, "watching the node failed; the watch restarts");
                        continue;
                    }
                };
                if last.as_ref() != Some(&target) {
                    last = Some(target.clone());
                    if targets.send(target).is_err() {
                        break;
                    }
                }
            }
            view.set_live(false);
        });
        tokio_stream::wrappers::UnboundedReceiverStream::new(received).boxed()
    }

    async fn event(&self, reason: &str, message: &str) -> Result<(), ClusterError> {
        self.events
            .record(self.view.uid().as_deref(), reason, message)
            .await
    }

    async fn get_machine_config(&self, name: &str) -> Result<MachineConfig, ClusterError> {
        let gvk =
            GroupVersionKind::gvk(machine_config::machineconfig::GROUP, "v1", "MachineConfig");
        let api: Api<DynamicObject> =
            Api::all_with(self.client.clone(), &ApiResource::from_gvk(&gvk));
        let action = format!("reading machineconfig {name}");
        let found = match with_retry(&self.retry, &action, || api.get(name)).await {
            Err(e) if e.code() == Some(404) => {
                return Err(ClusterError::MachineConfigNotFound(name.to_string()));
            }
            other => other?,
        };
        let invalid = |message: String| ClusterError::InvalidMachineConfig {
            name: name.to_string(),
            message,
        };
        let value = serde_json::to_value(&found).map_err(|e| invalid(e.to_string()))?;
        MachineConfig::from_value(value).map_err(|e| invalid(e.to_string()))
    }

    async fn labels(&self) -> Result<BTreeMap<String, String>, ClusterError> {
        Ok(self.node().await?.metadata.labels.unwrap_or_default())
    }

    fn machine_configuration(&self) -> BoxStream<'static, Option<MachineConfiguration>> {
        let api: Api<MachineConfiguration> = Api::all(self.client.clone());
        let config = watcher::Config::default().fields(&format!("metadata.name={CLUSTER_NAME}"));
        watcher(api, config)
            .backoff(self.watch_backoff())
            // A (re)list that does not find the object says it is gone.
            .scan(false, |seen, event| {
                let out = match event {
                    Ok(watcher::Event::Init) => {
                        *seen = false;
                        None
                    }
                    Ok(watcher::Event::InitApply(o) | watcher::Event::Apply(o)) => {
                        *seen = true;
                        Some(Some(o))
                    }
                    Ok(watcher::Event::InitDone) => (!*seen).then_some(None),
                    Ok(watcher::Event::Delete(_)) => {
                        *seen = false;
                        Some(None)
                    }
                    Err(e) => {
                        warn!(error = %e, "watching MachineConfiguration/{CLUSTER_NAME} failed; the watch restarts");
                        None
                    }
                };
                futures::future::ready(Some(out))
            })
            .filter_map(futures::future::ready)
            .boxed()
    }

    fn controller_config(&self) -> BoxStream<'static, Option<ControllerConfig>> {
        let api = Api::all(self.client.clone());
        named::watch_named(api, controller_config::NAME, self.watch_backoff())
    }

    fn feature_gate(&self) -> BoxStream<'static, Option<FeatureGate>> {
        let api = Api::all(self.client.clone());
        named::watch_named(api, FEATURE_GATE_NAME, self.watch_backoff())
    }

    fn cluster_version(&self) -> BoxStream<'static, Option<ClusterVersion>> {
        let api = Api::all(self.client.clone());
        named::watch_named(api, CLUSTER_VERSION_NAME, self.watch_backoff())
    }

    async fn config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ConfigMap>, ClusterError> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        let action = format!("reading ConfigMap {namespace}/{name}");
        with_retry(&self.retry, &action, || api.get_opt(name)).await
    }

    async fn node_uid(&self) -> Result<String, ClusterError> {
        if let Some(uid) = self.view.uid() {
            return Ok(uid);
        }
        self.node()
            .await?
            .metadata
            .uid
            .ok_or_else(|| ClusterError::Client {
                action: format!("reading node {}", self.node),
                message: "the node has no uid".into(),
            })
    }

    async fn machine_config_node(&self) -> Result<Option<serde_json::Value>, ClusterError> {
        self.get_mcn().await
    }

    async fn create_machine_config_node(
        &self,
        object: &serde_json::Value,
    ) -> Result<serde_json::Value, ClusterError> {
        self.create_mcn(object).await
    }

    async fn patch_machine_config_node(
        &self,
        patch: &serde_json::Value,
        status: bool,
    ) -> Result<serde_json::Value, ClusterError> {
        self.patch_mcn(patch, status).await
    }

    async fn machine_config_pools(&self) -> Result<Vec<MachineConfigPool>, ClusterError> {
        let gvk = GroupVersionKind::gvk(
            machine_config::machineconfig::GROUP,
            "v1",
            "MachineConfigPool",
        );
        let api: Api<DynamicObject> =
            Api::all_with(self.client.clone(), &ApiResource::from_gvk(&gvk));
        let params = ListParams::default();
        let list = with_retry(&self.retry, "listing machineconfigpools", || {
            api.list(&params)
        })
        .await?;
        list.items
            .iter()
            .map(|pool| {
                let name = pool.metadata.name.clone().unwrap_or_default();
                let invalid = |message: String| ClusterError::Client {
                    action: format!("reading machineconfigpool {name:?}"),
                    message,
                };
                let value = serde_json::to_value(pool).map_err(|e| invalid(e.to_string()))?;
                MachineConfigPool::from_value(value).map_err(|e| invalid(e.to_string()))
            })
            .collect()
    }
}
