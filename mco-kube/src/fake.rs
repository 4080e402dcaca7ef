//! [`FakeNodeApi`]: an in-memory node for tests of the agent's callers.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::ConfigMap;
use machine_config::ControllerConfig;
use machine_config::feature_gates::{ClusterVersion, FeatureGate};
use machine_config::mco::NodeState;
use machine_config::mco::annotations::{
    CURRENT_CONFIG, DESIRED_CONFIG, DESIRED_DRAIN, DESIRED_IMAGE, DRAIN_VERB, LAST_APPLIED_DRAIN,
    REASON, STATE, UNCORDON_VERB,
};
use machine_config::{MachineConfig, MachineConfigPool, MachineConfiguration};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::NodeApi;
use super::annotations::{DesiredTarget, NodeAnnotations, drain_request, truncate_reason};
use super::error::ClusterError;
use super::error::DrainError;

#[derive(Default)]
struct State {
    annotations: BTreeMap<String, String>,
    events: Vec<(String, String)>,
    drains: Vec<String>,
    uncordons: Vec<String>,
    machine_configs: HashMap<String, MachineConfig>,
    drain_error: Option<String>,
    write_error: Option<String>,
    labels: BTreeMap<String, String>,
    /// The pools, or why listing them fails.
    pools: Option<Result<Vec<MachineConfigPool>, String>>,
    /// The node's MachineConfigNode, as the API server would store it.
    mcn: Option<Value>,
    /// MachineConfigNode writes fail with this message.
    mcn_error: Option<String>,
    /// MachineConfigNode writes so far: (`status` subresource, patch or created object).
    mcn_writes: Vec<(bool, Value)>,
    config_maps: BTreeMap<(String, String), ConfigMap>,
}

/// Keeps the node's annotations in memory, records events, drains and uncordons, serves
/// MachineConfigs it was given; `desired()` follows [`FakeNodeApi::set_desired`].
pub struct FakeNodeApi {
    node: String,
    state: Mutex<State>,
    desired: watch::Sender<Option<DesiredTarget>>,
    machine_configuration: watch::Sender<Option<MachineConfiguration>>,
    controller_config: watch::Sender<Option<ControllerConfig>>,
    feature_gate: watch::Sender<Option<FeatureGate>>,
    cluster_version: watch::Sender<Option<ClusterVersion>>,
}

impl FakeNodeApi {
    /// A worker node (label `node-role.kubernetes.io/worker`) in a cluster without pools.
    pub fn new(node: &str) -> Self {
        let state = State {
            labels: BTreeMap::from([("node-role.kubernetes.io/worker".into(), String::new())]),
            ..State::default()
        };
        Self {
            node: node.to_string(),
            state: Mutex::new(state),
            desired: watch::channel(None).0,
            machine_configuration: watch::channel(None).0,
            controller_config: watch::channel(None).0,
            feature_gate: watch::channel(None).0,
            cluster_version: watch::channel(None).0,
        }
    }

    /// What the cluster's `MachineConfiguration/cluster` is now (`None`: absent).
    pub fn set_machine_configuration(&self, object: Option<MachineConfiguration>) {
        self.machine_configuration.send_replace(object);
    }

    /// What the cluster's ControllerConfig `machine-config-controller` is now (`None`: absent).
    pub fn set_controller_config(&self, object: Option<ControllerConfig>) {
        self.controller_config.send_replace(object);
    }

    /// What `FeatureGate/cluster` is now (`None`: absent).
    pub fn set_feature_gate(&self, object: Option<FeatureGate>) {
        self.feature_gate.send_replace(object);
    }

    /// What `ClusterVersion/version` is now (`None`: absent).
    pub fn set_cluster_version(&self, object: Option<ClusterVersion>) {
        self.cluster_version.send_replace(object);
    }

    /// A ConfigMap the API serves (`None`: removes it).
    pub fn set_config_map(&self, namespace: &str, name: &str, object: Option<ConfigMap>) {
        let key = (namespace.to_string(), name.to_string());
        let mut state = self.lock();
        match object {
            Some(o) => state.config_maps.insert(key, o),
            None => state.config_maps.remove(&key),
        };
    }

    /// The node's labels.
    pub fn set_labels(&self, labels: &[(&str, &str)]) {
        self.lock().labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    }

    /// The MachineConfigPools listed, or (`Err`) why listing them is refused.
    pub fn set_pools(&self, pools: Result<Vec<MachineConfigPool>, String>) {
        self.lock().pools = Some(pools);
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the node controller does: sets `desiredConfig` (outside image mode: no
    /// `desiredImage`).
    pub fn set_desired(&self, config: &str) {
        self.set_desired_image(config, None);
    }

    /// What the node controller does in an image-mode pool: sets `desiredConfig` and
    /// `desiredImage` together (`None`: the pool left image mode, `desiredImage` is removed).
    pub fn set_desired_image(&self, config: &str, image: Option<&str>) {
        {
            let mut state = self.lock();
            state
                .annotations
                .insert(DESIRED_CONFIG.into(), config.into());
            match image {
                Some(i) => state.annotations.insert(DESIRED_IMAGE.into(), i.into()),
                None => state.annotations.remove(DESIRED_IMAGE),
            };
        }
        self.desired.send_replace(Some(DesiredTarget {
            config: config.to_string(),
            image: image.map(str::to_string),
        }));
    }

    pub fn annotation(&self, key: &str) -> Option<String> {
        self.lock().annotations.get(key).cloned()
    }

    /// `(reason, message)` of the events recorded, in order.
    pub fn events(&self) -> Vec<(String, String)> {
        self.lock().events.clone()
    }

    /// Configs drained for, in order.
    pub fn drains(&self) -> Vec<String> {
        self.lock().drains.clone()
    }

    /// Configs uncordoned for, in order.
    pub fn uncordons(&self) -> Vec<String> {
        self.lock().uncordons.clone()
    }

    pub fn add_machine_config(&self, mc: MachineConfig) {
        self.lock()
            .machine_configs
            .insert(mc.name().to_string(), mc);
    }

    /// Later drains fail with `message` (None: succeed again).
    pub fn fail_drains(&self, message: Option<&str>) {
        self.lock().drain_error = message.map(String::from);
    }

    /// Later annotation writes fail with `message` (None: succeed again).
    pub fn fail_writes(&self, message: Option<&str>) {
        self.lock().write_error = message.map(String::from);
    }

    /// The node's MachineConfigNode as stored.
    pub fn machine_config_node_object(&self) -> Option<Value> {
        self.lock().mcn.clone()
    }

    /// The MachineConfigNode writes so far: (through the status subresource, body).
    pub fn machine_config_node_writes(&self) -> Vec<(bool, Value)> {
        self.lock().mcn_writes.clone()
    }

    /// Later MachineConfigNode writes fail with `message` (None: succeed again).
    pub fn fail_machine_config_node_writes(&self, message: Option<&str>) {
        self.lock().mcn_error = message.map(String::from);
    }

    fn mcn_refused(&self, state: &State) -> Result<(), ClusterError> {
        match &state.mcn_error {
            Some(message) => Err(ClusterError::Client {
                action: format!("writing machineconfignode {}", self.node),
                message: message.clone(),
            }),
            None => Ok(()),
        }
    }

    fn write(&self, changes: &[(&str, Option<&str>)]) -> Result<(), ClusterError> {
        let mut state = self.lock();
        if let Some(message) = &state.write_error {
            return Err(ClusterError::Client {
                action: format!("writing annotations of node {}", self.node),
                message: message.clone(),
            });
        }
        for (key, value) in changes {
            match value {
                Some(v) => state.annotations.insert(key.to_string(), v.to_string()),
                None => state.annotations.remove(*key),
            };
        }
        Ok(())
    }
}

#[async_trait]
impl NodeApi for FakeNodeApi {
    fn node_name(&self) -> &str {
        &self.node
    }

    async fn annotations(&self) -> Result<NodeAnnotations, ClusterError> {
        Ok(NodeAnnotations::new(self.lock().annotations.clone()))
    }

    async fn report(&self, state: NodeState, reason: &str) -> Result<(), ClusterError> {
        self.write(&[
            (STATE, Some(state.as_str())),
            (REASON, Some(truncate_reason(reason))),
        ])
    }

    async fn set_current(&self, config: &str) -> Result<(), ClusterError> {
        self.write(&[
            (CURRENT_CONFIG, Some(config)),
            (STATE, Some(NodeState::Done.as_str())),
            (REASON, Some("")),
        ])
    }

    async fn set_annotations(&self, changes: &[(&str, Option<&str>)]) -> Result<(), ClusterError> {
        self.write(changes)
    }

    async fn drain(&self, config: &str) -> Result<(), ClusterError> {
        let failure = self.lock().drain_error.clone();
        if let Some(message) = failure {
            return Err(DrainError::Failed {
                node: self.node.clone(),
                elapsed: Duration::ZERO,
                message,
            }
            .into());
        }
        self.lock().drains.push(config.to_string());
        let request = drain_request(DRAIN_VERB, config);
        self.write(&[
            (DESIRED_DRAIN, Some(&request)),
            (LAST_APPLIED_DRAIN, Some(&request)),
        ])
    }

    async fn uncordon(&self, config: &str) -> Result<(), ClusterError> {
        self.lock().uncordons.push(config.to_string());
        let request = drain_request(UNCORDON_VERB, config);
        self.write(&[
            (DESIRED_DRAIN, Some(&request)),
            (LAST_APPLIED_DRAIN, Some(&request)),
        ])
    }

    fn desired(&self) -> BoxStream<'static, DesiredTarget> {
        let receiver = self.desired.subscribe();
        futures::stream::unfold(
            (receiver, None::<DesiredTarget>, true),
            |(mut rx, last, first)| async move {
                loop {
                    if !first || rx.borrow().is_none() {
                        rx.changed().await.ok()?;
                    }
                    let value = rx.borrow_and_update().clone();
                    if let Some(value) = value.filter(|v| last.as_ref() != Some(v)) {
                        return Some((value.clone(), (rx, Some(value), false)));
                    }
                }
            },
        )
        .boxed()
    }

    async fn event(&self, reason: &str, message: &str) -> Result<(), ClusterError> {
        self.lock()
            .events
            .push((reason.to_string(), message.to_string()));
        Ok(())
    }

    async fn get_machine_config(&self, name: &str) -> Result<MachineConfig, ClusterError> {
        self.lock()
            .machine_configs
            .get(name)
            .cloned()
            .ok_or_else(|| ClusterError::MachineConfigNotFound(name.to_string()))
    }

    async fn labels(&self) -> Result<BTreeMap<String, String>, ClusterError> {
        Ok(self.lock().labels.clone())
    }

    async fn machine_config_pools(&self) -> Result<Vec<MachineConfigPool>, ClusterError> {
        match self.lock().pools.clone() {
            Some(Ok(pools)) => Ok(pools),
            Some(Err(message)) => Err(ClusterError::Client {
                action: "listing machineconfigpools".into(),
                message,
            }),
            None => Ok(Vec::new()),
        }
    }

    async fn node_uid(&self) -> Result<String, ClusterError> {
        Ok(format!("uid-{}", self.node))
    }

    async fn machine_config_node(&self) -> Result<Option<Value>, ClusterError> {
        Ok(self.lock().mcn.clone())
    }

    async fn create_machine_config_node(&self, object: &Value) -> Result<Value, ClusterError> {
        let mut state = self.lock();
        self.mcn_refused(&state)?;
        if state.mcn.is_some() {
            return Err(ClusterError::Api {
                action: format!("creating machineconfignode {}", self.node),
                code: 409,
                reason: "AlreadyExists".into(),
                message: "already exists".into(),
            });
        }
        let mut stored = object.clone();
        stored["metadata"]["generation"] = json!(1);
        stored["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
        if let Some(o) = stored.as_object_mut() {
            o.remove("status");
        }
        state.mcn_writes.push((false, object.clone()));
        state.mcn = Some(stored.clone());
        Ok(stored)
    }

    async fn patch_machine_config_node(
        &self,
        patch: &Value,
        status: bool,
    ) -> Result<Value, ClusterError> {
        let mut state = self.lock();
        self.mcn_refused(&state)?;
        let node = self.node.clone();
        let Some(stored) = state.mcn.as_mut() else {
            return Err(ClusterError::Api {
                action: format!("patching machineconfignode {node}"),
                code: 404,
                reason: "NotFound".into(),
                message: "not found".into(),
            });
        };
        // As the API server: the main resource ignores status, the subresource all but status;
        // a spec change moves the generation.
        let key = if status { "status" } else { "spec" };
        if let Some(part) = patch.get(key) {
            let before = stored.get(key).cloned();
            merge_patch(
                stored
                    .as_object_mut()
                    .expect("an object")
                    .entry(key)
                    .or_insert(Value::Null),
                part,
            );
            if !status && stored.get(key) != before.as_ref() {
                let generation = stored["metadata"]["generation"].as_i64().unwrap_or(1);
                stored["metadata"]["generation"] = json!(generation + 1);
            }
        }
        let stored = stored.clone();
        state.mcn_writes.push((status, patch.clone()));
        Ok(stored)
    }

    fn machine_configuration(&self) -> BoxStream<'static, Option<MachineConfiguration>> {
        follow(&self.machine_configuration)
    }

    fn controller_config(&self) -> BoxStream<'static, Option<ControllerConfig>> {
        follow(&self.controller_config)
    }

    fn feature_gate(&self) -> BoxStream<'static, Option<FeatureGate>> {
        follow(&self.feature_gate)
    }

    fn cluster_version(&self) -> BoxStream<'static, Option<ClusterVersion>> {
        follow(&self.cluster_version)
    }

    async fn config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ConfigMap>, ClusterError> {
        Ok(self
            .lock()
            .config_maps
            .get(&(namespace.to_string(), name.to_string()))
            .cloned())
    }
}

/// The value in `sender` now and at each change.
fn follow<T: Clone + Send + Sync + 'static>(
    sender: &watch::Sender<Option<T>>,
) -> BoxStream<'static, Option<T>> {
    let receiver = sender.subscribe();
    futures::stream::unfold((receiver, true), |(mut rx, first)| async move {
        if !first {
            rx.changed().await.ok()?;
        }
        let value = rx.borrow_and_update().clone();
        Some((value, (rx, false)))
    })
    .boxed()
}

/// A JSON merge patch (RFC 7396) of `patch` into `target`.
fn merge_patch(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn protocol_in_memory() {
        let fake = FakeNodeApi::new("n1");
        let mut desired = fake.desired();
        fake.set_desired("rendered-worker-1");
        assert_eq!(
            desired.next().await,
            Some(DesiredTarget::config("rendered-worker-1"))
        );
        fake.set_desired("rendered-worker-1");
        fake.set_desired("rendered-worker-2");
        assert_eq!(
            desired.next().await,
            Some(DesiredTarget::config("rendered-worker-2"))
        );
        // An image alone is a new target.
        fake.set_desired_image("rendered-worker-2", Some("registry.example/os@sha256:1"));
        assert_eq!(
            desired.next().await.and_then(|t| t.image).as_deref(),
            Some("registry.example/os@sha256:1")
        );
        fake.set_desired("rendered-worker-2");
        assert_eq!(
            desired.next().await,
            Some(DesiredTarget::config("rendered-worker-2"))
        );
        assert_eq!(fake.annotation(DESIRED_IMAGE), None);

        fake.report(NodeState::Working, "").await.unwrap();
        fake.drain("rendered-worker-2").await.unwrap();
        assert_eq!(
            fake.annotation(LAST_APPLIED_DRAIN).as_deref(),
            Some("drain-rendered-worker-2")
        );
        fake.set_current("rendered-worker-2").await.unwrap();
        let a = fake.annotations().await.unwrap();
        assert_eq!(
            (a.current_config(), a.state(), a.reason()),
            (Some("rendered-worker-2"), Ok(NodeState::Done), "")
        );
        fake.report(NodeState::Degraded, &"é".repeat(3000))
            .await
            .unwrap();
        assert_eq!(fake.annotation(REASON).unwrap().chars().count(), 2000);

        fake.fail_drains(Some("pod x blocked"));
        assert!(
            fake.drain("rendered-worker-3")
                .await
                .unwrap_err()
                .to_string()
                .contains("pod x blocked")
        );
        fake.fail_writes(Some("API down"));
        assert!(fake.report(NodeState::Done, "").await.is_err());
        assert!(matches!(
            fake.get_machine_config("nope").await,
            Err(ClusterError::MachineConfigNotFound(_))
        ));
        fake.event("NodeDone", "done").await.unwrap();
        assert_eq!(
            fake.events(),
            [("NodeDone".to_string(), "done".to_string())]
        );
    }
}
