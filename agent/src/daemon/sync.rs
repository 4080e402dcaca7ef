//! One sync of the daemon: bring the node to the desired config, or, when it is there, make
//! sure it is Done; and the drift monitor's wake-ups.

use std::collections::BTreeSet;

use machine_config::MachineConfig;
use machine_config::mco::NodeState;
use machine_config::mco::events::reason;
use machine_config::mco::image::{embed_image, layered_image};
use machine_config::mco::node_conditions::Progress;

use super::{Daemon, Parked, drift};
use crate::engine::Outcome;
use crate::engine::backups::managed_paths;
use crate::engine::record::now_ms;
use crate::engine::report::LastError;
use crate::input::{self, LoadedConfig};
use crate::validate::{SKIPPED_FILES, core_paths};

impl Daemon {
    /// Fetches the desired config and acts on it. `retry`: a scheduled retry after a failure.
    pub(super) async fn sync(&mut self, retry: bool) {
        if self.parked == Some(Parked::Rebooting) {
            return;
        }
        // A FleetLock slot from an update that completed must go back before anything else
        // (Zincati's initialization state): other nodes of the group wait for it.
        if self.lock_release_pending && !self.release_lock().await {
            return self.retry_later();
        }
        let name = self.desired_name.clone();
        let desired = match self.source.fetch(name.as_deref()).await {
            // In an image-mode pool the node runs the pool's image: it travels in the config,
            // so an image change is an OS change of the update (the MCD's embedding).
            Ok(mc) => embed_image(&mc, self.desired_image.as_deref()),
            Err(e) => return self.fetch_failed(name.as_deref(), e).await,
        };
        self.engine
            .reporter()
            .update_status(self.engine.root(), |s| s.last_fetch_ms = Some(now_ms()));
        // What the node should be in, for `status`, also while it is in it already.
        let status = self.engine.reporter().status();
        if status.desired.as_deref() != Some(desired.name())
            || status.desired_image != self.desired_image
        {
            self.engine
                .reporter()
                .update_status(self.engine.root(), |s| {
                    s.desired = Some(desired.name().to_string());
                    s.desired_image = self.desired_image.clone();
                });
        }
        let current = match input::read_current(self.engine.root()) {
            Ok(c) => c,
            Err(e) => return self.failed(format!("{e:#}")).await,
        };
        let force = self.engine.force_file_present().unwrap_or(false);
        let pending = self.engine.pending().ok().flatten();
        if !force && !retry && self.unreconcilable.as_deref() == Some(desired.name()) {
            return;
        }
        if let Some(Parked::NeedsReboot(to)) = &self.parked {
            if to == desired.name() && !force {
                return;
            }
            self.parked = None;
        }
        let in_sync = !force
            && pending.is_none()
            && current
                .as_ref()
                .is_some_and(|c| same_config(&c.machine_config, &desired));
        let booting = std::mem::take(&mut self.booting);
        if in_sync {
            if let Some(current) = current
                && self.engine.reporter().status().state != NodeState::Done
            {
                self.revalidate(&current).await;
            }
            if self.engine.reporter().status().state == NodeState::Done {
                // The MCD's sync that finds nothing to do (written only when it changes).
                self.engine.reporter().progress(Progress::Updated).await;
            }
            return;
        }
        if booting
            && pending.is_none()
            && let (Some(c), Some(node)) = (&current, self.engine.reporter().node_name())
        {
            let message = format!(
                "Booting node {node}, currentConfig {}, desiredConfig {}",
                c.machine_config.name(),
                desired.name()
            );
            self.engine
                .reporter()
                .event(reason::BOOT_RESYNC, &message)
                .await;
        }
        if let Some(c) = &current
            && self.drift.is_some()
        {
            self.drift = None;
            // (while an update waits for its strategy the monitor is paused and resumed
            // around each new look, said once)
            if self.waiting_for.as_deref() != Some(desired.name()) {
                self.engine
                    .reporter()
                    .event(
                        reason::CONFIG_DRIFT_MONITOR_STOPPED,
                        "Config Drift Monitor stopped",
                    )
                    .await;
                tracing::info!(
                    current = c.machine_config.name(),
                    desired = desired.name(),
                    current_image = layered_image(&c.machine_config).unwrap_or(""),
                    desired_image = layered_image(&desired).unwrap_or(""),
                    "update needed"
                );
            }
        }
        let report = self.engine.update(&desired, force).await;
        let was_waiting = self.waiting_for.take();
        match report.outcome {
            Outcome::Waiting { recheck_in, .. } => {
                let announce = was_waiting.as_deref() != Some(desired.name());
                self.waiting_for = Some(desired.name().to_string());
                self.retry_at = Some(tokio::time::Instant::now() + recheck_in);
                self.start_drift_monitor(announce).await;
            }
            Outcome::Done => {
                self.engine.reporter().progress(Progress::Updated).await;
                self.backoff.reset();
                self.unreconcilable = None;
                let disrupted = report.plan.as_ref().is_some_and(|p| p.drain || p.reboot);
                if disrupted && self.engine.strategy().uses_lock() && !self.release_lock().await {
                    self.retry_later();
                }
                self.restart_drift_monitor().await;
            }
            Outcome::Rebooting => self.parked = Some(Parked::Rebooting),
            Outcome::NeedsReboot => {
                self.parked = Some(Parked::NeedsReboot(desired.name().to_string()))
            }
            Outcome::Unreconcilable(_) => {
                self.unreconcilable = Some(desired.name().to_string());
                self.restart_drift_monitor().await;
            }
            Outcome::Degraded(_) => {
                self.retry_later();
                self.restart_drift_monitor().await;
            }
        }
        // However the attempt ended, what the MachineConfigNode should show of it goes out now.
        self.engine.reporter().publish_progress();
    }

    /// The desired config could not be fetched: the node stays in its current config; with a
    /// known `desiredConfig` that differs from it, the node is Degraded saying why.
    async fn fetch_failed(&mut self, name: Option<&str>, e: anyhow::Error) {
        let reason = match name {
            Some(n) => format!(
                "cannot get the desired config {n} from {}: {e:#}",
                self.source.describe()
            ),
            None => format!(
                "cannot get the desired config from {}: {e:#}",
                self.source.describe()
            ),
        };
        tracing::warn!(reason, "fetching the desired config failed");
        self.engine
            .reporter()
            .update_status(self.engine.root(), |s| {
                s.last_error = Some(LastError {
                    what: "fetch".to_string(),
                    message: reason.clone(),
                    at_ms: now_ms(),
                })
            });
        // What the node is told to be in, for `status` and `recover`, even when it cannot be had.
        if let Some(n) = name
            && self.engine.reporter().status().desired.as_deref() != Some(n)
        {
            self.engine
                .reporter()
                .update_status(self.engine.root(), |s| s.desired = Some(n.to_string()));
        }
        let current = input::read_current(self.engine.root())
            .ok()
            .flatten()
            .map(|c| c.machine_config.name().to_string());
        if name.is_some() && name != current.as_deref() {
            self.engine
                .reporter()
                .state(self.engine.root(), NodeState::Degraded, &reason)
                .await;
        }
        self.retry_later();
    }

    async fn failed(&mut self, reason: String) {
        self.engine
            .reporter()
            .state(self.engine.root(), NodeState::Degraded, &reason)
            .await;
        self.retry_later();
    }

    /// The node is in its desired config but not Done: validate; Done (and uncordoned) once
    /// it matches, else Degraded with every mismatch and a retry.
    async fn revalidate(&mut self, current: &LoadedConfig) {
        let name = current.machine_config.name();
        let v = self
            .engine
            .validate_node(&current.machine_config, &current.ignition)
            .await;
        if !v.is_ok() {
            return self.failed(v.reason()).await;
        }
        if let Err(reason) = self.engine.verify_extensions(&current.machine_config).await {
            return self.failed(reason).await;
        }
        if let Err(e) = self.engine.reporter().cluster().uncordon(name).await {
            return self.failed(format!("failed to uncordon node: {e:#}")).await;
        }
        let image = layered_image(&current.machine_config);
        self.engine
            .reporter()
            .done(self.engine.root(), name, image)
            .await;
        self.backoff.reset();
        if self.drift.is_none() {
            self.restart_drift_monitor().await;
        }
    }

    /// Managed paths changed: validate what the current config says about them alone (the
    /// common case, a change that matches or a plain touch, costs one file's check, not the
    /// config's); on a mismatch, everything, so the reason names every drifted file.
    pub(super) async fn on_drift(&mut self, paths: &BTreeSet<String>) {
        let Ok(Some(current)) = input::read_current(self.engine.root()) else {
            return;
        };
        let changed = self
            .engine
            .validate_paths(&current.machine_config, &current.ignition, paths);
        if changed.is_ok() {
            tracing::info!(?paths, "managed files changed but match the current config");
            if self.engine.reporter().status().state == NodeState::Degraded {
                self.sync(true).await;
            }
            return;
        }
        self.check_drift(&current).await;
    }

    /// Validates files and units against `current`; on drift the node is Degraded with the
    /// MCD's messages (event `ConfigDriftDetected`). Returns whether they matched.
    async fn check_drift(&mut self, current: &LoadedConfig) -> bool {
        let report = self
            .engine
            .validate_files(&current.machine_config, &current.ignition);
        if report.is_ok() {
            return true;
        }
        let status = self.engine.reporter().status();
        let reason = report
            .mismatches
            .iter()
            .map(|m| m.message.clone())
            .collect::<Vec<_>>()
            .join("; ");
        // Already reported (also in the wrapped form of a failed validation)?
        if status.state != NodeState::Degraded || !status.reason.ends_with(&reason) {
            self.engine
                .reporter()
                .event(reason::CONFIG_DRIFT_DETECTED, &reason)
                .await;
            self.engine
                .reporter()
                .state(self.engine.root(), NodeState::Degraded, &reason)
                .await;
        }
        false
    }

    /// (Re)starts the drift monitor against the current config.
    pub(super) async fn restart_drift_monitor(&mut self) {
        self.start_drift_monitor(true).await
    }

    /// Gives back this node's FleetLock slot (`steady-state`); on failure it is tried again
    /// before the next sync. Whether it was given back.
    pub(super) async fn release_lock(&mut self) -> bool {
        match self.engine.strategy().release().await {
            Ok(()) => {
                self.lock_release_pending = false;
                self.engine
                    .reporter()
                    .update_status(self.engine.root(), |s| {
                        if let Some(st) = s.strategy.as_mut() {
                            st.lock_held = false;
                        }
                    });
                true
            }
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "the FleetLock reboot slot could not be released: trying again");
                self.lock_release_pending = true;
                false
            }
        }
    }

    /// (Re)starts the drift monitor; `announce`: with its event.
    pub(super) async fn start_drift_monitor(&mut self, announce: bool) {
        self.drift = None;
        let Ok(Some(current)) = input::read_current(self.engine.root()) else {
            return;
        };
        let mut paths: BTreeSet<String> = managed_paths(&current.ignition)
            .into_iter()
            .filter(|p| !SKIPPED_FILES.contains(&p.as_str()))
            .collect();
        // core's keys and password hash are validated like files: watched like them
        paths.extend(core_paths(self.engine.root(), &current.ignition));
        let name = current.machine_config.name();
        match drift::start(
            self.engine.root().path(),
            name,
            &paths,
            self.drift_tx.clone(),
        ) {
            Ok(m) => {
                self.drift = Some(m);
                // A change made before the watches were in place is caught here.
                self.check_drift(&current).await;
                if !announce {
                    return;
                }
                self.engine
                    .reporter()
                    .event(
                        reason::CONFIG_DRIFT_MONITOR_STARTED,
                        &format!("Config Drift Monitor started, watching against {name}"),
                    )
                    .await;
            }
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "could not start the drift monitor")
            }
        }
    }
}

/// Whether two configs are the same rendered config with the same layered image (the MCD's
/// "no update needed": desiredConfig is currentConfig and desiredImage is currentImage).
fn same_config(a: &MachineConfig, b: &MachineConfig) -> bool {
    a.name() == b.name() && a.spec == b.spec && layered_image(a) == layered_image(b)
}
