//! One files-only rollout through a pool of the harness, measured: the time from the
//! MachineConfig change to the pool Done, what the companion, the API test server and the real
//! agents spent in CPU meanwhile, the API requests of the companion and of the agents (the API
//! test server's audit), and the most nodes of the pool unavailable at once.

use std::time::{Duration, Instant};

use anyhow::Result;
use kube::Api;
use kube::api::{Patch, PatchParams};
use machine_config::MachineConfig;
use serde_json::json;

use super::procstat::{self, Usage};
use super::tally::{self, Tally};
use super::{PoolSpec, ScaleCluster};
use crate::cluster::BASE_FILE;
use crate::manifests;

/// How long requests are still counted after the pool is Done (the controller's last status
/// write, the agents' last events).
const SETTLE: Duration = Duration::from_secs(2);

/// What one rollout cost.
#[derive(Debug, Clone)]
pub struct RollReport {
    pub pool: PoolSpec,
    pub rendered: String,
    /// From the MachineConfig change to the pool Done.
    pub took: Duration,
    pub companion: Usage,
    pub companion_cpu: Duration,
    pub apiserver: Usage,
    pub apiserver_cpu: Duration,
    /// The CPU time of the rolled pool's agents during the rollout.
    pub agents_cpu: Duration,
    pub requests: Tally,
    pub max_unavailable: usize,
    pub load: String,
}

impl ScaleCluster {
    /// Changes the base file of `pool`'s base MachineConfig to `contents` and waits for the
    /// pool to be Done on the new rendered config.
    pub async fn roll(&self, pool: &PoolSpec, contents: &str) -> Result<RollReport> {
        let companion_pid = self.companion.pid().unwrap_or(0);
        let api_pid = self.api.pid();
        let audit_before = self.api.audit()?.len();
        let companion_before = procstat::usage(companion_pid)?;
        let api_before = procstat::usage(api_pid)?;
        let agents_before = procstat::total_cpu(&self.agent_pids(Some(pool)));
        let previous = self.rendered(&pool.name).await?;
        self.fleet.reset_max_unavailable();
        let start = Instant::now();
        let config =
            manifests::role_files_config(&pool.name, &pool.base_config(), &[(BASE_FILE, contents)]);
        Api::<MachineConfig>::all(self.client.clone())
            .patch(
                &pool.base_config(),
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": config["spec"]})),
            )
            .await?;
        let rendered = self.wait_rendered(&pool.name, &previous).await?;
        self.wait_done(pool, &rendered, Duration::from_secs(1800))
            .await?;
        let took = start.elapsed();
        let max_unavailable = self.fleet.max_unavailable(&pool.name);
        tokio::time::sleep(SETTLE).await;
        let companion = procstat::usage(companion_pid)?;
        let apiserver = procstat::usage(api_pid)?;
        let agents_cpu =
            procstat::total_cpu(&self.agent_pids(Some(pool))).saturating_sub(agents_before);
        let audit = self.api.audit()?;
        Ok(RollReport {
            pool: pool.clone(),
            rendered,
            took,
            companion_cpu: companion.cpu.saturating_sub(companion_before.cpu),
            companion,
            apiserver_cpu: apiserver.cpu.saturating_sub(api_before.cpu),
            apiserver,
            agents_cpu,
            requests: tally::tally(
                &audit[audit_before.min(audit.len())..],
                &pool.node_names().into_iter().collect(),
            ),
            max_unavailable,
            load: std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .trim()
                .to_string(),
        })
    }
}
