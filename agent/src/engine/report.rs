//! Where the engine's state goes: the cluster (Node annotations and events, through
//! [`ClusterReport`]), the status file `/run/mco-agent/status.json` (inside the root), one
//! journal line per transition with structured fields, and sd_notify `STATUS=`.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use anyhow::{Context, Result};
use async_trait::async_trait;
use machine_config::irreconcilable::IrreconcilableChange;
use machine_config::mco::NodeState;
use machine_config::mco::node_conditions::Progress;
use serde::{Deserialize, Serialize};

use super::observe::{Observation, Observer};
use super::record::now_ms;
use crate::rootfs::{Owner, Root};
use crate::strategy::StrategyStatus;

/// Where the status file goes, inside the root.
pub const STATUS_FILE: &str = "/run/mco-agent/status.json";

/// What the engine tells the cluster. With a kubeconfig this is the Node's annotations and
/// events; standalone it is [`NoCluster`].
#[async_trait]
pub trait ClusterReport: Send + Sync {
    /// Sets `state` and `reason`.
    async fn report(&self, state: NodeState, reason: &str) -> Result<()>;
    /// The MCD's `SetDone`: `currentConfig=config`, `state=Done`, `reason=""`; in an
    /// image-mode pool `currentImage=image`, else `currentImage` and `desiredImage` removed.
    async fn set_done(&self, config: &str, image: Option<&str>) -> Result<()>;
    /// Records an event on the Node with one of the MCD's reasons.
    async fn event(&self, reason: &str, message: &str) -> Result<()>;
    /// Cordons and drains the node before applying `config`.
    async fn drain(&self, config: &str) -> Result<()>;
    /// Makes the node schedulable again once it is in `config`.
    async fn uncordon(&self, config: &str) -> Result<()>;
    /// A reboot is about to happen (`post-config-action=Rebooting`), or the node came back
    /// from it (cleared).
    async fn rebooting(&self, _rebooting: bool) -> Result<()> {
        Ok(())
    }
    /// Waits (at most `timeout`) until every write queued before it has landed: before a
    /// reboot, so that the node's annotations, events and MachineConfigNode say what happened
    /// before the process goes away.
    async fn flush(&self, _timeout: std::time::Duration) -> Result<()> {
        Ok(())
    }
    /// The update reached `progress` (the MachineConfigNode's conditions). Never blocks the
    /// update: the annotations are the source of truth. A cluster report may hold the
    /// progress of a short stretch to write it in one go ([`ClusterReport::publish`]).
    async fn progress(&self, _progress: Progress) -> Result<()> {
        Ok(())
    }
    /// Writes any progress held back for merging, without waiting for it to land: the daemon
    /// calls it when an update attempt ends, however it ended.
    fn publish(&self) -> Result<()> {
        Ok(())
    }
    /// Sets one more of the node's annotations (`ostree-finalize-staged-failure`), in order
    /// with its state writes.
    async fn annotate(&self, _key: &'static str, _value: &str) -> Result<()> {
        Ok(())
    }
    /// The Node's name, when there is a cluster (for the MCD's messages that name it).
    fn node_name(&self) -> Option<&str> {
        None
    }
    /// Whether the cluster wants the node's irreconcilable differences once it is Done (the
    /// `IrreconcilableMachineConfig` feature gate).
    fn reports_irreconcilable(&self) -> bool {
        false
    }
    /// The node's irreconcilable differences (its MachineConfigNode's
    /// `status.irreconcilableChanges`; empty: none).
    async fn irreconcilable(&self, _changes: Vec<IrreconcilableChange>) -> Result<()> {
        Ok(())
    }
}

/// No cluster: nothing to annotate, nothing to drain (no pods are scheduled by anyone).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoCluster;

#[async_trait]
impl ClusterReport for NoCluster {
    async fn report(&self, _state: NodeState, _reason: &str) -> Result<()> {
        Ok(())
    }
    async fn set_done(&self, _config: &str, _image: Option<&str>) -> Result<()> {
        Ok(())
    }
    async fn event(&self, _reason: &str, _message: &str) -> Result<()> {
        Ok(())
    }
    async fn drain(&self, config: &str) -> Result<()> {
        tracing::info!(config, "no cluster: nothing to drain");
        Ok(())
    }
    async fn uncordon(&self, _config: &str) -> Result<()> {
        Ok(())
    }
}

/// The last (or running) update, in the status file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastUpdate {
    pub from: String,
    pub to: String,
    pub started_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// `Done`, `Rebooting`, `NeedsReboot`, `Degraded`, `Unreconcilable`, or empty while running.
    pub result: String,
    /// The update needs (or needed) a reboot.
    pub reboot: bool,
}

/// The status file: what `mco-agent status` and the first-boot binary read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    pub current: Option<String>,
    pub desired: Option<String>,
    /// The layered OS image the node is in (image-mode pools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_image: Option<String>,
    /// The layered OS image the node is asked to run (image-mode pools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_image: Option<String>,
    pub state: NodeState,
    pub reason: String,
    /// The step of the update in progress (see `engine::record::Step`).
    pub pending_step: Option<String>,
    /// An update is applied but waits for a reboot nobody requested (`--skip-reboot`).
    pub needs_reboot: bool,
    pub last_update: Option<LastUpdate>,
    pub updated_ms: u64,
    /// The update strategy, its next window, the FleetLock slot, why an update waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<StrategyStatus>,
    /// The daemon that keeps this file (none for the one-shot commands): `status` tells a
    /// running agent from a file it left behind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentProcess>,
    /// The last failure to fetch the desired config or to talk to the API server (a TLS
    /// failure lives here, not only in the log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<LastError>,
    /// When the desired config was last fetched (Unix milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_fetch_ms: Option<u64>,
}

/// The daemon process that writes the status file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentProcess {
    pub pid: u32,
    pub started_ms: u64,
}

impl AgentProcess {
    /// This process, starting now.
    pub fn this() -> Self {
        AgentProcess {
            pid: std::process::id(),
            started_ms: now_ms(),
        }
    }
}

/// A failure the daemon went on after.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastError {
    /// What failed: `fetch` (the desired config) or `api` (reporting to the API server).
    pub what: String,
    pub message: String,
    pub at_ms: u64,
}

/// Reads the status file of `root`, if any.
pub fn read_status(root: &Root) -> Result<Option<Status>> {
    let path = Path::new(STATUS_FILE);
    match root.read(path).map_err(|e| root.on_host(e))? {
        None => Ok(None),
        Some(bytes) => {
            Ok(Some(serde_json::from_slice(&bytes).with_context(|| {
                root.host_path(path).display().to_string()
            })?))
        }
    }
}

/// Fans the engine's state out: cluster, status file, journal, sd_notify, observers.
pub struct Reporter {
    cluster: Arc<dyn ClusterReport>,
    status: Mutex<Status>,
    status_file: bool,
    observers: RwLock<Vec<Arc<dyn Observer>>>,
}

impl Reporter {
    /// `status_file`: keep the status file up to date (else the status is only kept in memory).
    pub fn new(cluster: Arc<dyn ClusterReport>, status_file: bool) -> Self {
        Reporter {
            cluster,
            status: Mutex::new(Status::default()),
            status_file,
            observers: RwLock::new(Vec::new()),
        }
    }

    /// Adds an observer of everything reported from now on (e.g. the metrics).
    pub fn add_observer(&self, observer: Arc<dyn Observer>) {
        self.observers
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(observer);
    }

    /// Hands `what` to every observer.
    pub fn observe(&self, what: &Observation<'_>) {
        for o in self
            .observers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            o.observe(what);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Status> {
        self.status.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A copy of the status as last reported.
    pub fn status(&self) -> Status {
        self.lock().clone()
    }

    /// Keeps `message` as the last API failure (what `status` shows).
    fn api_failed(&self, root: &Root, message: String) {
        self.update_status(root, |s| {
            s.last_error = Some(LastError {
                what: "api".to_string(),
                message,
                at_ms: now_ms(),
            })
        });
    }

    /// Changes the status and rewrites the file (failures are logged: the status file is
    /// informational, the update goes on).
    pub fn update_status(&self, root: &Root, f: impl FnOnce(&mut Status)) {
        let json = {
            let mut s = self.lock();
            f(&mut s);
            s.updated_ms = now_ms();
            if !self.status_file {
                return;
            }
            serde_json::to_vec_pretty(&*s)
        };
        let written = json.map_err(anyhow::Error::from).and_then(|j| {
            root.write_atomic(Path::new(STATUS_FILE), &j, 0o644, Owner::ROOT)
                .map_err(anyhow::Error::from)
        });
        if let Err(e) = written {
            tracing::warn!(error = %format!("{e:#}"), "could not write the status file");
        }
    }

    /// Sets the node state and reason: one journal line when it changes, the status file, the
    /// cluster's annotations.
    pub async fn state(&self, root: &Root, state: NodeState, reason: &str) {
        let before = self.status();
        if before.state != state || before.reason != reason {
            let config = before
                .desired
                .clone()
                .or(before.current.clone())
                .unwrap_or_default();
            tracing::info!(
                state = state.as_str(),
                from = before.state.as_str(),
                config,
                reason,
                "Transitioned from state: {} -> {}",
                before.state,
                state
            );
        }
        self.update_status(root, |s| {
            s.state = state;
            s.reason = reason.to_string();
        });
        crate::notify::status(&match reason {
            "" => state.to_string(),
            r => format!("{state}: {r}"),
        });
        self.observe(&Observation::State {
            state,
            reason,
            config: None,
        });
        if let Err(e) = self.cluster.report(state, reason).await {
            tracing::warn!(error = %format!("{e:#}"), "could not report the state to the cluster");
            self.api_failed(root, format!("reporting the state {state}: {e:#}"));
        }
    }

    /// The boot into `config` took (deployment, kernel arguments and files verified); its
    /// health checks come next. systemd is told that the agent's start-up is over (`READY=1`)
    /// first: the checks wait for what starts after it (the kubelet is ordered after the agent,
    /// `Before=kubelet.service`) and for the rest of the boot, which would otherwise wait for
    /// the checks until their deadline and fail them, and the unit's start timeout would end
    /// the agent in the middle of them. (The daemon says `READY=1` again after its start-up:
    /// systemd takes the first.)
    pub fn checking_health(&self, config: &str) {
        tracing::info!(
            config,
            "the boot can go on (READY=1): checking its health until the deadline"
        );
        crate::notify::ready();
        crate::notify::status(&format!("checking the health of the boot into {config}"));
    }

    /// The update step now running (status file and sd_notify `STATUS=`).
    pub fn step(&self, root: &Root, step: Option<&str>, what: &str) {
        if let Some(step) = step {
            tracing::info!(step, "{what}");
            crate::notify::status(what);
        }
        self.update_status(root, |s| s.pending_step = step.map(str::to_string));
        self.observe(&Observation::Step(step));
    }

    /// The node is in `config` (and the layered `image`, in an image-mode pool): status Done,
    /// `SetDone` on the cluster.
    pub async fn done(&self, root: &Root, config: &str, image: Option<&str>) {
        let before = self.status();
        if before.state != NodeState::Done || before.current.as_deref() != Some(config) {
            tracing::info!(
                state = NodeState::Done.as_str(),
                from = before.state.as_str(),
                config,
                "Transitioned from state: {} -> Done (current config {config})",
                before.state
            );
        }
        self.update_status(root, |s| {
            s.state = NodeState::Done;
            s.reason.clear();
            s.current = Some(config.to_string());
            s.current_image = image.map(str::to_string);
            s.pending_step = None;
            s.needs_reboot = false;
        });
        crate::notify::status(&format!("Done: {config}"));
        self.observe(&Observation::State {
            state: NodeState::Done,
            reason: "",
            config: Some(config),
        });
        if let Err(e) = self.cluster.set_done(config, image).await {
            tracing::warn!(error = %format!("{e:#}"), "could not report Done to the cluster");
            self.api_failed(root, format!("reporting Done in {config}: {e:#}"));
        }
        if self.cluster.reports_irreconcilable() {
            let report = crate::input::irreconcilable::report(root, config);
            let sent = match report {
                Ok(changes) => self.cluster.irreconcilable(changes).await,
                Err(e) => Err(e),
            };
            if let Err(e) = sent {
                tracing::error!("Error updating MCN with the irreconcilable report {e:#}");
            }
        }
    }

    /// An event on the Node with one of the MCD's reasons (also logged).
    pub async fn event(&self, reason: &str, message: &str) {
        tracing::info!(event = reason, "{message}");
        self.observe(&Observation::Event { reason, message });
        if let Err(e) = self.cluster.event(reason, message).await {
            tracing::warn!(error = %format!("{e:#}"), event = reason, "could not record the event");
        }
    }

    /// The update reached `progress`: the MachineConfigNode's conditions (a failure is logged).
    pub async fn progress(&self, progress: Progress) {
        tracing::debug!(?progress, "update progress");
        if let Err(e) = self.cluster.progress(progress).await {
            tracing::warn!(error = %format!("{e:#}"), "could not report the update's progress to the cluster");
        }
    }

    /// Writes the progress the cluster report holds back (see [`ClusterReport::publish`]).
    pub fn publish_progress(&self) {
        if let Err(e) = self.cluster.publish() {
            tracing::warn!(error = %format!("{e:#}"), "could not report the update's progress to the cluster");
        }
    }

    /// "node NAME" with a cluster, for messages that name the node.
    pub fn node_name(&self) -> Option<&str> {
        self.cluster.node_name()
    }

    pub fn cluster(&self) -> &dyn ClusterReport {
        self.cluster.as_ref()
    }
}
