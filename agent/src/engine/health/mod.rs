//! Health checks after the reboot into an update, before it is committed: what Zincati and
//! greenboot users expect of a node that boots a new OS. Once the booted deployment, kernel
//! arguments and files are verified (`engine::verify`), the node must also be healthy:
//!
//! - every unit the config enables is loaded and has not failed ([`Systemd`]): `active` or
//!   `inactive` passes (a oneshot that ran, a unit whose condition is not met), `failed` or
//!   `not-found` fails, and a unit still starting (`activating`, ...) is waited for;
//! - the kubelet answers its health endpoint, where it exists (its unit is loaded);
//! - every executable in `/etc/mco-agent/health.d/` (inside the root) exits 0 within
//!   [`HealthOptions::check_timeout`] ([`scripts`]).
//!
//! A round runs every check; a round with problems is run again every
//! [`HealthOptions::retry_interval`] until [`HealthOptions::deadline`], since right after a boot
//! units are still starting and the kubelet not yet up. The problems of the last round are the
//! failure: they name the check and carry its output, for the node's Degraded reason.

pub mod scripts;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use machine_config::Config;

use super::Engine;
use crate::host::systemd::{ActiveState, Systemd};

/// Where administrators put their own checks, inside the root.
pub const HEALTH_DIR: &str = "/etc/mco-agent/health.d";
/// The kubelet's unit: its health is checked only when it is loaded.
pub const KUBELET_UNIT: &str = "kubelet.service";

/// How the health checks run.
#[derive(Clone)]
pub struct HealthOptions {
    /// How long the checks may take to pass after the reboot (`--health-deadline`).
    pub deadline: Duration,
    /// How long one executable of `health.d` may run (`--health-check-timeout`).
    pub check_timeout: Duration,
    /// The pause between two rounds of checks.
    pub retry_interval: Duration,
    /// The kubelet's health endpoint; `None`: the kubelet is not checked.
    pub kubelet: Option<Arc<dyn KubeletProbe>>,
}

/// The default deadline: long enough for a node's units and kubelet to come up.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(300);
/// The default time one `health.d` executable may run.
pub const DEFAULT_CHECK_TIMEOUT: Duration = Duration::from_secs(60);

impl Default for HealthOptions {
    fn default() -> Self {
        HealthOptions {
            deadline: DEFAULT_DEADLINE,
            check_timeout: DEFAULT_CHECK_TIMEOUT,
            retry_interval: Duration::from_secs(5),
            kubelet: None,
        }
    }
}

impl std::fmt::Debug for HealthOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealthOptions")
            .field("deadline", &self.deadline)
            .field("check_timeout", &self.check_timeout)
            .field("retry_interval", &self.retry_interval)
            .field("kubelet", &self.kubelet.is_some())
            .finish()
    }
}

/// The kubelet's health endpoint (the metrics' kubelet client implements it).
#[async_trait]
pub trait KubeletProbe: Send + Sync {
    /// `Ok` when the kubelet says it is healthy; `Err` with what it said or what failed.
    async fn healthy(&self) -> Result<(), String>;
}

/// One round's problems; empty: healthy.
type Problems = Vec<String>;

impl Engine {
    /// Runs the health checks of a boot into `config` (`ign`) until they pass or the deadline
    /// passes: `Err` with the problems of the last round.
    pub(crate) async fn check_health(&self, config: &str, ign: &Config) -> Result<(), Problems> {
        let opts = &self.opts.health;
        let deadline = Instant::now() + opts.deadline;
        let mut round = 0u32;
        loop {
            round += 1;
            let problems = self.health_round(config, ign).await;
            if problems.is_empty() {
                tracing::info!(config, round, "health checks passed");
                return Ok(());
            }
            if Instant::now() + opts.retry_interval > deadline {
                tracing::error!(
                    config,
                    round,
                    problems = problems.join("; "),
                    "health checks failed"
                );
                return Err(problems);
            }
            tracing::warn!(
                config,
                round,
                problems = problems.join("; "),
                "health checks not passing yet; checking again until the deadline"
            );
            tokio::time::sleep(opts.retry_interval).await;
        }
    }

    async fn health_round(&self, config: &str, ign: &Config) -> Problems {
        let mut problems = Vec::new();
        if let Some(systemd) = &self.seams.systemd {
            problems.extend(units(systemd.as_ref(), &enabled_units(ign)).await);
            if let Some(kubelet) = &self.opts.health.kubelet
                && let Some(p) = kubelet_problem(systemd.as_ref(), kubelet.as_ref()).await
            {
                problems.push(p);
            }
        }
        problems.extend(
            scripts::run_all(&self.root, config, self.opts.health.check_timeout)
                .await
                .into_iter()
                .map(|f| f.to_string()),
        );
        problems
    }
}

/// The units a config enables (and does not mask).
pub fn enabled_units(ign: &Config) -> Vec<String> {
    ign.systemd
        .units
        .iter()
        .filter(|u| u.enabled == Some(true) && !u.is_masked())
        .map(|u| u.name.clone())
        .collect()
}

/// What is wrong with `units`: failed, not loaded, or still changing state.
pub async fn units(systemd: &dyn Systemd, units: &[String]) -> Problems {
    let mut problems = Vec::new();
    for unit in units {
        match systemd.unit_active_state(unit).await {
            Err(e) => problems.push(format!("unit {unit}: {e}")),
            Ok(s) if !s.is_found() => problems.push(format!("unit {unit} is not found")),
            Ok(s) => match s.active_state {
                ActiveState::Active | ActiveState::Reloading | ActiveState::Inactive => {}
                ActiveState::Failed => problems.push(format!("unit {unit} failed: {s}")),
                _ => problems.push(format!("unit {unit} is not up yet: {s}")),
            },
        }
    }
    problems
}

/// The kubelet's problem, if it is loaded and not healthy.
async fn kubelet_problem(systemd: &dyn Systemd, probe: &dyn KubeletProbe) -> Option<String> {
    match systemd.unit_active_state(KUBELET_UNIT).await {
        Ok(s) if !s.is_found() => None,
        Err(e) => Some(format!("kubelet: {e}")),
        Ok(_) => probe
            .healthy()
            .await
            .err()
            .map(|e| format!("kubelet is not healthy: {e}")),
    }
}

#[cfg(test)]
mod tests;
