//! Prometheus metrics: the MCD's names where it has them, ours beside them, served as text on
//! `127.0.0.1:8797/metrics` ([`server`]), fed by the engine's observer seam ([`observer`]) and
//! the kubelet health check ([`kubelet`]).
//!
//! | metric | type | what |
//! |---|---|---|
//! | `mcd_state{state,reason}` | gauge | Unix time the state was last reported; one series, reset on every report |
//! | `mcd_update_state{config,err}` | gauge | Unix time the last update ended: `config="MachineConfig: <name>"`, `err` its failure (empty when it completed); one series |
//! | `mcd_config_drift` | gauge | Unix time config drift was last detected (0: never) |
//! | `mcd_reboots_failed_total` | counter | reboot requests that failed |
//! | `mcd_pivot_errors_total` | gauge | OS changes (rebase, kernel arguments, kernel type, extensions) that failed since the last one that succeeded or was not needed (the MCD's gauge) |
//! | `mcd_kubelet_state` | gauge | consecutive failed kubelet health checks |
//! | `mcc_drain_err{node}` | gauge | 1 when the node's last drain failed, 0 once one succeeded (the MCO's controller metric: here the agent drains its own node) |
//! | `mcd_host_os_and_version{os,version}` | gauge | 1, labelled with the host's OS (`RHCOS`, `FCOS`, `SCOS`, else its os-release `ID` upper-cased) and `VERSION_ID` |
//! | `mco_agent_updates_total{result}` | counter | update runs that ended, by outcome: `Done`, `Rebooting`, `NeedsReboot`, `Degraded`, `Unreconcilable` (a reboot update counts `Rebooting` in the boot that started it and `Done` in the boot that verified it) |
//! | `mco_agent_update_duration_seconds{result}` | histogram | start to end of updates that ended (`Done`, `Degraded`, `Unreconcilable`), across the reboot of a reboot update |
//! | `mco_agent_drain_duration_seconds{result}` | histogram | drains, `success` or `failure` |
//! | `mco_agent_boot_rollbacks_total` | counter | boots rolled back (a failed health check, or `mco-agent rollback`) |
//!
//! The text is the OpenMetrics exposition (`# EOF` last), which Prometheus scrapes as is.

pub use crate::os::host_os;
pub mod kubelet;
pub mod observer;
pub mod secure;
pub mod server;

#[cfg(test)]
mod alert_rules;
#[cfg(test)]
mod secure_tests;
#[cfg(test)]
mod tests;

use std::sync::atomic::AtomicU64;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use machine_config::mco::NodeState;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

pub use observer::MetricsObserver;
pub use server::{MetricsArgs, start};

/// Label pairs of one series.
type Labels = Vec<(String, String)>;
/// A gauge holding seconds since the epoch, or any other float.
type FloatGauge = Gauge<f64, AtomicU64>;
type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// Duration buckets from 0.1 s to about 3 h (update and drain times vary from sub-second
/// rebootless updates to hour-long drains).
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.1, 2.0, 17))
}

/// The agent's metrics.
pub struct Metrics {
    registry: Registry,
    state: Family<Labels, FloatGauge>,
    update_state: Family<Labels, FloatGauge>,
    config_drift: FloatGauge,
    reboots_failed: Counter,
    boot_rollbacks: Counter,
    pivot_errors: Gauge,
    kubelet_state: Gauge,
    drain_err: Family<Labels, Gauge>,
    /// The node's name, the `node` label of `mcc_drain_err`.
    node: std::sync::Mutex<String>,
    host_os: Family<Labels, Gauge>,
    updates: Family<Labels, Counter>,
    update_duration: HistogramFamily,
    drain_duration: HistogramFamily,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every metric registered, at zero.
    pub fn new() -> Self {
        let mut m = Metrics {
            registry: Registry::default(),
            state: Family::default(),
            update_state: Family::default(),
            config_drift: FloatGauge::default(),
            reboots_failed: Counter::default(),
            boot_rollbacks: Counter::default(),
            pivot_errors: Gauge::default(),
            kubelet_state: Gauge::default(),
            drain_err: Family::default(),
            node: std::sync::Mutex::new(String::new()),
            host_os: Family::default(),
            updates: Family::default(),
            update_duration: Family::new_with_constructor(duration_histogram),
            drain_duration: Family::new_with_constructor(duration_histogram),
        };
        let r = &mut m.registry;
        r.register(
            "mcd_state",
            "state of daemon on specified node",
            m.state.clone(),
        );
        r.register(
            "mcd_update_state",
            "completed update config or error",
            m.update_state.clone(),
        );
        r.register(
            "mcd_config_drift",
            "timestamp for config drift",
            m.config_drift.clone(),
        );
        // OpenMetrics counters get their `_total` suffix when encoded.
        r.register(
            "mcd_reboots_failed",
            "Total number of reboots that failed",
            m.reboots_failed.clone(),
        );
        r.register(
            "mco_agent_boot_rollbacks",
            "Boots rolled back to the previous deployment and config",
            m.boot_rollbacks.clone(),
        );
        r.register(
            "mcd_pivot_errors_total",
            "Total number of errors encountered during pivot",
            m.pivot_errors.clone(),
        );
        r.register(
            "mcd_kubelet_state",
            "state of kubelet health monitor",
            m.kubelet_state.clone(),
        );
        r.register(
            "mcc_drain_err",
            "errors from failed drain",
            m.drain_err.clone(),
        );
        r.register(
            "mcd_host_os_and_version",
            "os that MCD is running on and version if RHCOS",
            m.host_os.clone(),
        );
        r.register(
            "mco_agent_updates",
            "Update runs that ended, by outcome",
            m.updates.clone(),
        );
        r.register_with_unit(
            "mco_agent_update_duration",
            "Time from the start to the end of an update (across its reboot)",
            Unit::Seconds,
            m.update_duration.clone(),
        );
        r.register_with_unit(
            "mco_agent_drain_duration",
            "Time a drain took",
            Unit::Seconds,
            m.drain_duration.clone(),
        );
        m
    }

    /// The exposition text.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }

    /// `mcd_state`: the node's state, now.
    pub fn set_state(&self, state: NodeState, reason: &str) {
        set_only(&self.state, [("state", state.as_str()), ("reason", reason)]);
    }

    /// `mcd_update_state` after an update completed in `config`.
    pub fn update_completed(&self, config: &str) {
        set_only(
            &self.update_state,
            [("config", &config_label(config)), ("err", "")],
        );
    }

    /// `mcd_update_state` after an update to `config` failed with `err`.
    pub fn update_failed(&self, config: &str, err: &str) {
        set_only(
            &self.update_state,
            [("config", &config_label(config)), ("err", err)],
        );
    }

    /// `mcd_config_drift`: drift was detected now.
    pub fn config_drift(&self) {
        self.config_drift.set(unix_now());
    }

    /// A boot was rolled back (`mco_agent_boot_rollbacks_total` + 1).
    pub fn boot_rolled_back(&self) {
        self.boot_rollbacks.inc();
    }

    pub fn reboot_failed(&self) {
        self.reboots_failed.inc();
    }

    /// An OS change failed (`mcd_pivot_errors_total` + 1).
    pub fn pivot_failed(&self) {
        self.pivot_errors.inc();
    }

    /// The OS step succeeded or was not needed (`mcd_pivot_errors_total` = 0, as the MCD).
    pub fn pivot_ok(&self) {
        self.pivot_errors.set(0);
    }

    /// `mcd_kubelet_state`: consecutive failed health checks.
    pub fn set_kubelet_failures(&self, failures: u32) {
        self.kubelet_state.set(i64::from(failures));
    }

    /// `mcd_host_os_and_version`.
    pub fn set_host_os(&self, os: &str, version: &str) {
        self.host_os.clear();
        self.host_os
            .get_or_create(&vec![
                ("os".to_string(), os.to_string()),
                ("version".to_string(), version.to_string()),
            ])
            .set(1);
    }

    /// An update run ended with `result`; `duration` when the update ended with it.
    pub fn update_ended(&self, result: &str, duration: Option<Duration>) {
        let labels = vec![("result".to_string(), result.to_string())];
        self.updates.get_or_create(&labels).inc();
        if let Some(d) = duration {
            self.update_duration
                .get_or_create(&labels)
                .observe(d.as_secs_f64());
        }
    }

    /// The node's name, which labels `mcc_drain_err` (as the MCO's controller labels it).
    pub fn set_node(&self, name: &str) {
        *self.node.lock().unwrap_or_else(|p| p.into_inner()) = name.to_string();
    }

    /// A drain ended: `mco_agent_drain_duration_seconds`, and `mcc_drain_err` 1 after a
    /// failure, 0 after a success (the MCO's controller resets it when a drain succeeds).
    pub fn drain_ended(&self, success: bool, duration: Duration) {
        let result = if success { "success" } else { "failure" };
        let node = self.node.lock().unwrap_or_else(|p| p.into_inner()).clone();
        self.drain_err
            .get_or_create(&vec![("node".to_string(), node)])
            .set(i64::from(!success));
        self.drain_duration
            .get_or_create(&vec![("result".to_string(), result.to_string())])
            .observe(duration.as_secs_f64());
    }
}

/// The MCD's `config` label value.
fn config_label(config: &str) -> String {
    if config.is_empty() {
        String::new()
    } else {
        format!("MachineConfig: {config}")
    }
}

/// Replaces every series of a timestamp gauge with one, labelled `labels` and set to now (the
/// MCD's `UpdateStateMetric`: one series per metric, so a state change does not leave the old
/// one behind).
fn set_only(family: &Family<Labels, FloatGauge>, labels: [(&str, &str); 2]) {
    let labels: Labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    family.clear();
    family.get_or_create(&labels).set(unix_now());
}

/// Seconds since the Unix epoch, as a float.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}
