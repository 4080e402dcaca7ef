//! What a scenario reads of the cluster and waits for: the pool, a node's annotations and
//! taint, which nodes the companion targeted, a new rendered config, a rollout completing (with
//! or without reboots), and the pool's availability sampled throughout.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::Node as KubeNode;
use kube::Api;
use kube::api::{Patch, PatchParams};
use machine_config::MachineConfigPool;
use machine_config::mco::annotations::{CURRENT_CONFIG, DESIRED_CONFIG, STATE};
use machine_config::mco::{
    NodeState, UPDATE_IN_PROGRESS_TAINT_EFFECT, UPDATE_IN_PROGRESS_TAINT_KEY,
};
use serde_json::json;

use super::Cluster;

impl Cluster {
    /// The worker pool.
    pub async fn pool(&self) -> Result<MachineConfigPool> {
        Ok(Api::<MachineConfigPool>::all(self.client.clone())
            .get("worker")
            .await?)
    }

    /// Pauses or unpauses the worker pool.
    pub async fn set_paused(&self, paused: bool) -> Result<()> {
        Api::<MachineConfigPool>::all(self.client.clone())
            .patch(
                "worker",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"paused": paused}})),
            )
            .await?;
        Ok(())
    }

    /// A node's annotations.
    pub async fn annotations(&self, node: &str) -> Result<BTreeMap<String, String>> {
        let node = Api::<KubeNode>::all(self.client.clone()).get(node).await?;
        Ok(node.metadata.annotations.unwrap_or_default())
    }

    /// The names of the pool's nodes that carry the MCC's `UpdateInProgress:PreferNoSchedule`
    /// taint, sorted.
    pub async fn tainted_update_in_progress(&self) -> Result<Vec<String>> {
        let mut tainted = Vec::new();
        for name in self.node_names() {
            let node = Api::<KubeNode>::all(self.client.clone()).get(&name).await?;
            let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
            if taints.iter().any(|t| {
                t.key == UPDATE_IN_PROGRESS_TAINT_KEY && t.effect == UPDATE_IN_PROGRESS_TAINT_EFFECT
            }) {
                tainted.push(name);
            }
        }
        tainted.sort();
        Ok(tainted)
    }

    /// Waits until exactly `expected` (sorted) carry the `UpdateInProgress` taint.
    pub async fn wait_tainted(&self, expected: &[String], timeout: Duration) -> Result<()> {
        let start = Instant::now();
        loop {
            let tainted = self.tainted_update_in_progress().await?;
            if tainted == expected {
                return Ok(());
            }
            if start.elapsed() > timeout {
                bail!(
                    "the UpdateInProgress taint is on {tainted:?}, not on {expected:?}, after {timeout:?}\n{}",
                    self.diagnostics().await
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sets a node's `desiredConfig`, as an administrator would.
    pub async fn set_desired(&self, node: &str, config: &str) -> Result<()> {
        let patch = json!({"metadata": {"annotations": {DESIRED_CONFIG: config}}});
        Api::<KubeNode>::all(self.client.clone())
            .patch(node, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        Ok(())
    }

    /// The nodes whose `desiredConfig` is `config`.
    pub async fn targeted(&self, config: &str) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for name in self.nodes.keys() {
            if self
                .annotations(name)
                .await?
                .get(DESIRED_CONFIG)
                .map(String::as_str)
                == Some(config)
            {
                out.push(name.clone());
            }
        }
        Ok(out)
    }

    /// Waits until at least one node is targeted at `config`; the targeted nodes.
    pub async fn wait_targeted(&self, config: &str, timeout: Duration) -> Result<Vec<String>> {
        let deadline = Instant::now() + timeout;
        loop {
            let targeted = self.targeted(config).await?;
            if !targeted.is_empty() {
                return Ok(targeted);
            }
            if Instant::now() > deadline {
                bail!(
                    "no node was targeted at {config} in {timeout:?}\n{}",
                    self.diagnostics().await
                );
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Waits until the pool renders a config other than `previous`; its name.
    pub async fn wait_rendered(&self, previous: &str, timeout: Duration) -> Result<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let name = self.pool().await?.spec.configuration.name;
            if !name.is_empty() && name != previous {
                return Ok(name);
            }
            if Instant::now() > deadline {
                bail!(
                    "the pool never rendered past {previous:?}\n{}",
                    self.diagnostics().await
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until every node of the pool is Done on `config` and the pool says so
    /// (`updatedMachineCount` = `machineCount` = the nodes); how long it took.
    pub async fn wait_pool_done(&self, config: &str, timeout: Duration) -> Result<Duration> {
        let start = Instant::now();
        loop {
            if self.pool_done(config).await? {
                return Ok(start.elapsed());
            }
            if start.elapsed() > timeout {
                bail!(
                    "the pool did not finish rolling out {config} in {timeout:?}\n{}",
                    self.diagnostics().await
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// [`Cluster::wait_pool_done`] for an update that needs a reboot: each node whose agent
    /// waits for one is rebooted (its agent stopped, a new boot id, the agent started again,
    /// as a reboot through logind would), once per boot.
    pub async fn wait_pool_done_rebooting(
        &mut self,
        config: &str,
        timeout: Duration,
    ) -> Result<Duration> {
        let start = Instant::now();
        loop {
            if self.pool_done(config).await? {
                return Ok(start.elapsed());
            }
            let waiting: Vec<String> = self
                .nodes
                .iter()
                .filter(|(_, n)| n.awaits_reboot())
                .map(|(name, _)| name.clone())
                .collect();
            for name in waiting {
                let wiring = self.wiring(&name);
                self.node(&name).reboot(&wiring)?;
            }
            if start.elapsed() > timeout {
                bail!(
                    "the pool did not finish rolling out {config} in {timeout:?}\n{}",
                    self.diagnostics().await
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// How many times each node has booted.
    pub fn boots(&self) -> BTreeMap<String, u32> {
        self.nodes
            .iter()
            .map(|(name, n)| (name.clone(), n.boots()))
            .collect()
    }

    pub(crate) async fn pool_done(&self, config: &str) -> Result<bool> {
        let pool = self.pool().await?;
        let count = i64::try_from(self.nodes.len())?;
        if pool.status.machine_count != count || pool.status.updated_machine_count != count {
            return Ok(false);
        }
        for name in self.nodes.keys() {
            let a = self.annotations(name).await?;
            let is = |key: &str, value: &str| a.get(key).map(String::as_str) == Some(value);
            let done = is(CURRENT_CONFIG, config)
                && is(DESIRED_CONFIG, config)
                && is(STATE, NodeState::Done.as_str());
            if !done {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Asserts that no sample saw more than `maxUnavailable` unavailable nodes; returns the
    /// number of samples and the most seen at once.
    pub fn check_availability(&self) -> Result<(usize, usize)> {
        let (samples, max_seen, violations) = self.sampler.summary();
        if !violations.is_empty() {
            bail!(
                "{} of {samples} samples saw more than maxUnavailable={} nodes unavailable, first: {:?}",
                violations.len(),
                self.max_unavailable,
                violations[0]
            );
        }
        if samples == 0 {
            bail!("the availability sampler took no sample");
        }
        Ok((samples, max_seen))
    }

    /// Starts counting the most unavailable nodes seen at once afresh (for a phase that must
    /// make none unavailable); violations of `maxUnavailable` are kept.
    pub fn restart_availability_count(&self) {
        self.sampler.restart_max_seen();
    }
}
