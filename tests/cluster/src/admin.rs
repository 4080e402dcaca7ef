//! What the administrator does to the cluster beside MachineConfigs: the cluster's node
//! disruption policy (`MachineConfiguration/cluster`), workloads (pods bound to nodes, as a
//! scheduler would leave them) and their PodDisruptionBudgets. Pods are API objects without a
//! kubelet: the API test server deletes a pod its eviction removes.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use machine_config::MachineConfiguration;
use machine_config::feature_gates::{
    CLUSTER_VERSION_NAME, ClusterVersion, FEATURE_GATE_NAME, FeatureGate,
};
use machine_config::machineconfiguration::CLUSTER_NAME;
use machine_config::mco::annotations::REASON;
use mco_test_support::apiserver::fixtures;
use serde_json::{Value, json};

use crate::Cluster;
use crate::manifests;

/// The OpenShift version the cluster's objects name.
pub const CLUSTER_VERSION: &str = "4.18.0";

/// Creates `ClusterVersion/version` (at [`CLUSTER_VERSION`]) and `FeatureGate/cluster` with
/// `enabled` enabled at that version, as the cluster-version and API operators publish them
/// (both kinds keep what the test reads in their status subresource).
pub(crate) async fn publish_feature_gates(client: &kube::Client, enabled: &[String]) -> Result<()> {
    let versions = Api::<ClusterVersion>::all(client.clone());
    let gates = Api::<FeatureGate>::all(client.clone());
    let mut version = ClusterVersion::default();
    version.metadata.name = Some(CLUSTER_VERSION_NAME.into());
    versions
        .create(&PostParams::default(), &version)
        .await
        .context("creating ClusterVersion/version")?;
    versions
        .patch_status(
            CLUSTER_VERSION_NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "desired": {"version": CLUSTER_VERSION},
                "history": [{"version": CLUSTER_VERSION}],
            }})),
        )
        .await
        .context("setting ClusterVersion/version's status")?;
    let mut gate = FeatureGate::default();
    gate.metadata.name = Some(FEATURE_GATE_NAME.into());
    gates
        .create(&PostParams::default(), &gate)
        .await
        .context("creating FeatureGate/cluster")?;
    let enabled: Vec<Value> = enabled.iter().map(|g| json!({"name": g})).collect();
    gates
        .patch_status(
            FEATURE_GATE_NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"featureGates": [
                {"version": CLUSTER_VERSION, "enabled": enabled, "disabled": []},
            ]}})),
        )
        .await
        .context("setting FeatureGate/cluster's status")?;
    Ok(())
}

impl Cluster {
    /// Creates or replaces a files-only MachineConfig `name` for the workers; waits until the
    /// pool renders it and returns the new rendered config's name.
    pub async fn apply_files_config(&self, name: &str, files: &[(&str, &str)]) -> Result<String> {
        let before = self.pool().await?.spec.configuration.name;
        self.apply_machine_config(manifests::files_config(name, files))
            .await?;
        self.wait_rendered(&before, Duration::from_secs(30)).await
    }

    /// Sets `spec.nodeDisruptionPolicy` of `MachineConfiguration/cluster` (which the companion
    /// creates) and waits until its status, computed by the companion, has caught up, so that
    /// the next rollout is planned with it.
    pub async fn set_cluster_policy(&self, policy: Value) -> Result<()> {
        let api = Api::<MachineConfiguration>::all(self.client.clone());
        let deadline = Instant::now() + Duration::from_secs(30);
        while api.get_opt(CLUSTER_NAME).await?.is_none() {
            if Instant::now() > deadline {
                bail!("the companion never created MachineConfiguration/{CLUSTER_NAME}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let patch = json!({"spec": {"nodeDisruptionPolicy": policy}});
        let patched = api
            .patch(CLUSTER_NAME, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .context("setting the cluster's node disruption policy")?;
        let generation = patched.metadata.generation;
        loop {
            let current = api.get(CLUSTER_NAME).await?;
            let observed = serde_json::to_value(&current.status)?["observedGeneration"].as_i64();
            if generation.is_some() && observed == generation {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "the companion did not compute the policy status of generation {generation:?} \
                     (observed {observed:?})"
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Creates a namespace.
    pub async fn create_namespace(&self, name: &str) -> Result<()> {
        let namespace: Namespace = serde_json::from_value(fixtures::namespace(name))?;
        Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .with_context(|| format!("creating namespace {name}"))?;
        Ok(())
    }

    /// A running, ready pod of a ReplicaSet, bound to `node`.
    pub async fn create_ready_pod(
        &self,
        namespace: &str,
        name: &str,
        node: &str,
        labels: &[(&str, &str)],
    ) -> Result<()> {
        let object = fixtures::pod(namespace, name, node, labels);
        let status = json!({"status": object["status"].clone()});
        let pod: Pod = serde_json::from_value(object)?;
        let api = Api::<Pod>::namespaced(self.client.clone(), namespace);
        api.create(&PostParams::default(), &pod)
            .await
            .with_context(|| format!("creating pod {namespace}/{name}"))?;
        // a created pod's status is the kubelet's to write: here, the administrator's
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(status))
            .await
            .with_context(|| format!("marking pod {namespace}/{name} ready"))?;
        Ok(())
    }

    /// Creates or changes the PodDisruptionBudget `name` over the pods labelled `labels`;
    /// `budget` holds `minAvailable` or `maxUnavailable`.
    pub async fn set_budget(
        &self,
        namespace: &str,
        name: &str,
        labels: &[(&str, &str)],
        budget: Value,
    ) -> Result<()> {
        let api = Api::<PodDisruptionBudget>::namespaced(self.client.clone(), namespace);
        if api.get_opt(name).await?.is_some() {
            api.patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": budget})),
            )
            .await
            .with_context(|| format!("changing budget {namespace}/{name}"))?;
            return Ok(());
        }
        let pdb: PodDisruptionBudget =
            serde_json::from_value(fixtures::pdb(namespace, name, labels, budget))?;
        api.create(&PostParams::default(), &pdb)
            .await
            .with_context(|| format!("creating budget {namespace}/{name}"))?;
        Ok(())
    }

    /// Waits until `node`'s reason contains `text`; the reason.
    pub async fn wait_reason(&self, node: &str, text: &str, timeout: Duration) -> Result<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let reason = self
                .annotations(node)
                .await?
                .get(REASON)
                .cloned()
                .unwrap_or_default();
            if reason.contains(text) {
                return Ok(reason);
            }
            if Instant::now() > deadline {
                bail!(
                    "{node}'s reason never contained {text:?} in {timeout:?} (it is {reason:?})\n{}",
                    self.diagnostics().await
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
