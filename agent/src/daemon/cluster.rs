//! The daemon with a cluster: the engine's [`ClusterReport`] over the Node API (annotations,
//! events, drain, uncordon), and the API server as a source of rendered configs by name.
//!
//! Writes go through two queues, each written by its own task, in order:
//! - the node's state (`state`, `reason`, `SetDone`, `post-config-action`): the annotations
//!   that are the source of truth, never behind anything else;
//! - events and MachineConfigNode writes, best effort: each waits until the state writes
//!   queued before it have landed (a MachineConfigNode write reads the annotations written
//!   before it), never the other way round.
//!
//! The Node API retries each write until it lands, and an update does not wait on an API
//! server that is down (the MCD queues its node writes the same way). Drain and uncordon are
//! steps of the update and are awaited.
//!
//! The MachineConfigNode's conditions of a short stretch of an update are written together:
//! they are held until a step that may take long starts (a drain, OS work, a reboot, an
//! uncordon) or the update ends, successfully or not (the daemon publishes what is held after
//! each attempt), then merged into one status write. So a files-only update costs a fixed
//! handful of writes whatever its files (docs/benchmarks.md, "API requests per update"), while
//! a long drain or OS update is shown as it runs.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Result, bail};
use async_trait::async_trait;
use machine_config::MachineConfig;
use machine_config::irreconcilable::IrreconcilableChange;
use machine_config::mco::NodeState;
use machine_config::mco::annotations::{
    CURRENT_CONFIG, CURRENT_IMAGE, POST_CONFIG_ACTION, POST_CONFIG_ACTION_REBOOTING, REASON, STATE,
};
use machine_config::mco::node_conditions::Progress;
use machine_config::mco::node_image_conditions::Gates;
use tokio::sync::{mpsc, oneshot, watch};

use super::source::ConfigSource;
use crate::cluster::{NodeApi, mcn};
use crate::engine::ClusterReport;

/// A write of the node's state.
#[derive(Debug)]
enum StateWrite {
    Report(NodeState, String),
    SetDone(String, Option<String>),
    PostConfigAction(&'static str),
    Annotation(&'static str, String),
}

/// A best-effort write, or a flush.
#[derive(Debug)]
enum Note {
    Event(String, String),
    Progress(Vec<Progress>),
    /// The MachineConfigNode's `status.irreconcilableChanges`.
    Irreconcilable(Vec<IrreconcilableChange>),
    /// Answered once every write queued before it has been done, state writes included.
    Flush(oneshot::Sender<()>),
}

/// Whether `progress` starts a step that may take long (or ends the update): what is held is
/// written now, so the MachineConfigNode shows the step while it runs.
fn publishes_now(progress: &Progress) -> bool {
    matches!(
        progress,
        Progress::Updated
            | Progress::Degraded { error: Some(_) }
            | Progress::Unreconcilable { .. }
            | Progress::ActionsUnavailable { .. }
            | Progress::Draining { .. }
            | Progress::DrainFailed { .. }
            | Progress::ApplyingFilesAndOs { os: true, .. }
            | Progress::PullingImage { .. }
            | Progress::RebootRequired
            | Progress::UncordonFailed { .. }
    )
}

/// The queues' ends on the engine's side.
struct Queues {
    state: mpsc::UnboundedSender<StateWrite>,
    notes: mpsc::UnboundedSender<(u64, Note)>,
    /// State writes queued so far (a note waits for that many to land).
    state_queued: u64,
    /// Progress held for merging into one write.
    held: Vec<Progress>,
}

/// [`ClusterReport`] over a [`NodeApi`].
pub struct NodeReport {
    api: Arc<dyn NodeApi>,
    queues: Mutex<Queues>,
    /// The cluster has `IrreconcilableMachineConfig`: the node's irreconcilable differences are
    /// reported once it is Done.
    irreconcilable: bool,
}

impl NodeReport {
    /// Starts the writer tasks (inside a tokio runtime); the node is in `pool` (its
    /// MachineConfigNode's `spec.pool`).
    pub fn new(api: Arc<dyn NodeApi>, pool: &str) -> Self {
        Self::with_gates(api, pool, Gates::default())
    }

    /// [`NodeReport::new`] for a cluster with these feature `gates` (what its
    /// MachineConfigNode holds).
    pub fn with_gates(api: Arc<dyn NodeApi>, pool: &str, gates: Gates) -> Self {
        let (state, state_rx) = mpsc::unbounded_channel();
        let (notes, notes_rx) = mpsc::unbounded_channel();
        let (landed, landed_rx) = watch::channel(0u64);
        let queues = Mutex::new(Queues {
            state,
            notes,
            state_queued: 0,
            held: Vec::new(),
        });
        tokio::spawn(write_states(api.clone(), state_rx, landed));
        tokio::spawn(write_notes(
            api.clone(),
            pool.to_string(),
            gates,
            notes_rx,
            landed_rx,
        ));
        NodeReport {
            api,
            queues,
            irreconcilable: false,
        }
    }

    /// Reports the node's irreconcilable differences once it is Done (the cluster's
    /// `IrreconcilableMachineConfig` feature gate).
    pub fn with_irreconcilable_report(mut self, on: bool) -> Self {
        self.irreconcilable = on;
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn queue_state(&self, w: StateWrite) -> Result<()> {
        let mut q = self.lock();
        q.state
            .send(w)
            .map_err(|_| anyhow::anyhow!("the node writer stopped"))?;
        q.state_queued += 1;
        Ok(())
    }

    /// Queues `note` behind the state writes queued so far. Held progress stays held (an
    /// event does not end a stretch of progress; its merged write comes after the event).
    fn queue_note(&self, note: Note) -> Result<()> {
        send_note(&self.lock(), note)
    }

    /// Writes what progress is held, now.
    fn publish_held(&self) -> Result<()> {
        publish(&mut self.lock())
    }
}

fn send_note(q: &Queues, note: Note) -> Result<()> {
    q.notes
        .send((q.state_queued, note))
        .map_err(|_| anyhow::anyhow!("the node writer stopped"))
}

/// Queues the held progress as one write.
fn publish(q: &mut Queues) -> Result<()> {
    let held = std::mem::take(&mut q.held);
    if held.is_empty() {
        return Ok(());
    }
    send_note(q, Note::Progress(held))
}

/// The state queue's task: each write in order; `landed` counts those done.
async fn write_states(
    api: Arc<dyn NodeApi>,
    mut queue: mpsc::UnboundedReceiver<StateWrite>,
    landed: watch::Sender<u64>,
) {
    while let Some(w) = queue.recv().await {
        let result = match &w {
            StateWrite::Report(state, reason) => api.report(*state, reason).await,
            StateWrite::SetDone(config, image) => {
                api.set_annotations(&set_done(config, image.as_deref()))
                    .await
            }
            StateWrite::PostConfigAction(value) => {
                api.set_annotations(&[(POST_CONFIG_ACTION, Some(*value))])
                    .await
            }
            StateWrite::Annotation(key, value) => {
                api.set_annotations(&[(*key, Some(value.as_str()))]).await
            }
        };
        if let Err(e) = result {
            tracing::warn!(write = ?w, error = %e, "a node state write failed for good");
        }
        landed.send_modify(|n| *n += 1);
    }
}

/// The best-effort queue's task: each note once the state writes queued before it landed.
async fn write_notes(
    api: Arc<dyn NodeApi>,
    pool: String,
    gates: Gates,
    mut queue: mpsc::UnboundedReceiver<(u64, Note)>,
    mut landed: watch::Receiver<u64>,
) {
    while let Some((after, note)) = queue.recv().await {
        if landed.wait_for(|n| *n >= after).await.is_err() {
            return;
        }
        let result = match &note {
            Note::Flush(_) => Ok(()),
            Note::Event(reason, message) => api.event(reason, message).await,
            // Transient failures were retried; anything else is logged below and healed by
            // the next write (it rewrites the whole state).
            Note::Progress(batch) => mcn::report_batch(api.as_ref(), &pool, batch, gates).await,
            Note::Irreconcilable(changes) => {
                mcn::report_irreconcilable(api.as_ref(), changes).await
            }
        };
        if let Err(e) = result {
            tracing::warn!(write = ?note, error = %e, "a node write failed for good");
        }
        if let Note::Flush(done) = note {
            let _ = done.send(());
        }
    }
}

#[async_trait]
impl ClusterReport for NodeReport {
    async fn report(&self, state: NodeState, reason: &str) -> Result<()> {
        self.queue_state(StateWrite::Report(state, reason.to_string()))
    }

    async fn set_done(&self, config: &str, image: Option<&str>) -> Result<()> {
        self.queue_state(StateWrite::SetDone(
            config.to_string(),
            image.map(str::to_string),
        ))
    }

    async fn event(&self, reason: &str, message: &str) -> Result<()> {
        self.queue_note(Note::Event(reason.to_string(), message.to_string()))
    }

    async fn drain(&self, config: &str) -> Result<()> {
        self.publish_held()?;
        Ok(self.api.drain(config).await?)
    }

    async fn uncordon(&self, config: &str) -> Result<()> {
        self.publish_held()?;
        Ok(self.api.uncordon(config).await?)
    }

    async fn progress(&self, progress: Progress) -> Result<()> {
        let now = publishes_now(&progress);
        let mut q = self.lock();
        q.held.push(progress);
        if now { publish(&mut q) } else { Ok(()) }
    }

    fn publish(&self) -> Result<()> {
        self.publish_held()
    }

    async fn flush(&self, timeout: Duration) -> Result<()> {
        let (done, landed) = oneshot::channel();
        self.publish_held()?;
        self.queue_note(Note::Flush(done))?;
        match tokio::time::timeout(timeout, landed).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => bail!("the node writer stopped"),
            Err(_) => bail!("the node's writes did not land within {timeout:?}"),
        }
    }

    fn node_name(&self) -> Option<&str> {
        Some(self.api.node_name())
    }

    async fn annotate(&self, key: &'static str, value: &str) -> Result<()> {
        self.queue_state(StateWrite::Annotation(key, value.to_string()))
    }

    fn reports_irreconcilable(&self) -> bool {
        self.irreconcilable
    }

    async fn irreconcilable(&self, changes: Vec<IrreconcilableChange>) -> Result<()> {
        // The MachineConfigNode the held progress creates comes first: the MCD skips the
        // report on a node without one.
        self.publish_held()?;
        self.queue_note(Note::Irreconcilable(changes))
    }

    async fn rebooting(&self, rebooting: bool) -> Result<()> {
        if rebooting {
            self.publish_held()?;
        }
        // Cleared to "" after the boot, as the MCD does.
        self.queue_state(StateWrite::PostConfigAction(if rebooting {
            POST_CONFIG_ACTION_REBOOTING
        } else {
            ""
        }))
    }
}

/// The MCD's `SetDone` in one write: `currentConfig`, `state=Done`, `reason=""`; with a
/// layered image `currentImage` set, without one `currentImage` removed (the pool left image
/// mode, or never was in it).
///
/// `desiredImage` is never touched: the node controller owns it. The MCD removes it only when
/// the Node's own `desiredImage` is empty, never because the node is not in an image yet: a
/// Done in the current config while an update into an image is pending (the Done of start-up,
/// of a boot rolled back) must leave the target for the next attempt. An empty `desiredImage`
/// (which the MCD would remove) stays, read as absent: removing it would take a read of the
/// Node before each Done and race with the controller writing an image in between.
fn set_done<'a>(config: &'a str, image: Option<&'a str>) -> Vec<(&'static str, Option<&'a str>)> {
    vec![
        (CURRENT_CONFIG, Some(config)),
        (STATE, Some(NodeState::Done.as_str())),
        (REASON, Some("")),
        (CURRENT_IMAGE, image),
    ]
}

/// Rendered configs by name from the API server, as the MCD reads them.
pub struct ApiSource {
    pub api: Arc<dyn NodeApi>,
}

#[async_trait]
impl ConfigSource for ApiSource {
    async fn fetch(&self, name: Option<&str>) -> Result<MachineConfig> {
        let Some(name) = name else {
            bail!("the API server serves configs by name only: the node has no desiredConfig yet");
        };
        match self.api.get_machine_config(name).await {
            Ok(mc) => Ok(mc),
            // The shipped RBAC does not let nodes read MachineConfigs (a per-node config would
            // be readable by every node): say what to do instead of a bare 403.
            Err(err) if err.code() == Some(403) => Err(anyhow::Error::new(err).context(format!(
                "reading {name} from the API server was refused: nodes may not read \
                 MachineConfigs under the shipped RBAC; follow the config server \
                 (--config-server URL --ca FILE), or, where no per-node configs exist, apply \
                 manifests/api-source/"
            ))),
            Err(err) => Err(err.into()),
        }
    }

    fn describe(&self) -> String {
        format!("the API server (node {})", self.api.node_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::FakeNodeApi;
    use crate::daemon::tests::DaemonHarness;
    use crate::engine::tests::{CRIO_POLICY, IMAGE, mc};

    /// SetDone in image mode writes currentImage; out of it, removes currentImage. It never
    /// removes the controller's desiredImage: not in an image yet, the node is still asked for
    /// one.
    #[tokio::test]
    async fn set_done_writes_or_removes_current_image_only() {
        use machine_config::mco::annotations::{CURRENT_IMAGE, DESIRED_IMAGE};
        let api = FakeNodeApi::new("node-0");
        let image = "registry.example/os@sha256:2";
        api.set_desired_image("rendered-a", Some(image));
        api.set_annotations(&set_done("rendered-a", Some(image)))
            .await
            .unwrap();
        assert_eq!(api.annotation(CURRENT_IMAGE).as_deref(), Some(image));
        assert_eq!(api.annotation(DESIRED_IMAGE).as_deref(), Some(image));
        assert_eq!(api.annotation(STATE).as_deref(), Some("Done"));
        api.set_annotations(&set_done("rendered-a", None))
            .await
            .unwrap();
        assert_eq!(api.annotation(CURRENT_IMAGE), None);
        assert_eq!(api.annotation(DESIRED_IMAGE).as_deref(), Some(image));
        assert_eq!(
            api.annotation(CURRENT_CONFIG).as_deref(),
            Some("rendered-a")
        );
    }

    /// The daemon over the fake Node API: configs by name from the API, state on the Node.
    #[tokio::test]
    async fn the_daemon_follows_desired_config_through_the_node_api() {
        let api = Arc::new(FakeNodeApi::new("node-0"));
        let a = mc("rendered-a", &[(CRIO_POLICY, "{}\n")], &[], IMAGE);
        let b = mc("rendered-b", &[(CRIO_POLICY, "[]\n")], &[], IMAGE);
        api.add_machine_config(a.clone());
        api.add_machine_config(b.clone());
        let h = DaemonHarness::over_api(&a, &api).await;
        let mut d = h
            .daemon(crate::daemon::DesiredFeed::Cluster(api.desired()))
            .await;
        api.set_desired("rendered-b");
        d.desired_name = Some("rendered-b".into());
        d.sync(false).await;
        assert_eq!(h.node.current().as_deref(), Some("rendered-b"));
        // The writer task lands the writes in order.
        for _ in 0..100 {
            if api.annotation(CURRENT_CONFIG).as_deref() == Some("rendered-b") {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(
            api.annotation(CURRENT_CONFIG).as_deref(),
            Some("rendered-b")
        );
        assert_eq!(api.annotation(STATE).as_deref(), Some("Done"));
        assert_eq!(api.annotation(REASON).as_deref(), Some(""));
        assert_eq!(api.uncordons(), vec!["rendered-b".to_string()]);
        assert!(api.events().iter().any(|(r, _)| r == "NodeDone"));
        let events = api.events();
        for (reason, message) in [
            (
                "BootResync",
                "Booting node node-0, currentConfig rendered-a, desiredConfig rendered-b",
            ),
            (
                "NodeDone",
                "Setting node node-0, currentConfig rendered-b to Done",
            ),
        ] {
            assert!(
                events.contains(&(reason.to_string(), message.to_string())),
                "{events:?}"
            );
        }
        // The MachineConfigNode went through the update and ends Updated in it.
        let mcn = updated_mcn(&api, "rendered-b").await;
        assert_eq!(mcn["spec"]["configVersion"]["desired"], "rendered-b");
        let message = |kind: &str| {
            crate::cluster::mcn::conditions(&mcn)
                .into_iter()
                .find(|c| c.kind == kind)
                .map(|c| (c.status, c.message))
                .unwrap()
        };
        use machine_config::mco::node_conditions::Status;
        assert_eq!(
            message("UpdateExecuted"),
            (
                Status::False,
                "Action during update to rendered-b: Updated the Files and OS on disk as a part of the in progress phase".into()
            )
        );
        assert_eq!(
            message("Drained"),
            (
                Status::False,
                "Node Drain Not required for this update.".into()
            )
        );
        assert_eq!(message("NodeDegraded").0, Status::False);

        let err = ApiSource { api: api.clone() }
            .fetch(Some("rendered-gone"))
            .await
            .unwrap_err();
        assert!(format!("{err:#}").contains("rendered-gone"), "{err:#}");
        let err = ApiSource { api }.fetch(None).await.unwrap_err();
        assert!(format!("{err:#}").contains("by name only"), "{err:#}");
    }

    /// The node's MachineConfigNode once the writer task has marked it Updated in `config`.
    async fn updated_mcn(api: &FakeNodeApi, config: &str) -> serde_json::Value {
        for _ in 0..200 {
            if let Some(o) = api.machine_config_node_object()
                && o["status"]["configVersion"]["current"] == config
                && crate::cluster::mcn::conditions(&o)
                    .iter()
                    .any(|c| c.kind == "Updated" && c.message.ends_with("Updated"))
            {
                return o;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!(
            "no Updated MachineConfigNode: {:?}",
            api.machine_config_node_object()
        );
    }

    /// MachineConfigNode writes refused by the API server do not stop an update.
    #[tokio::test]
    async fn a_refused_machine_config_node_never_blocks_an_update() {
        let api = Arc::new(FakeNodeApi::new("node-0"));
        api.fail_machine_config_node_writes(Some("forbidden by policy"));
        let a = mc("rendered-a", &[(CRIO_POLICY, "{}\n")], &[], IMAGE);
        let b = mc("rendered-b", &[(CRIO_POLICY, "[]\n")], &[], IMAGE);
        api.add_machine_config(a.clone());
        api.add_machine_config(b.clone());
        let h = DaemonHarness::over_api(&a, &api).await;
        let mut d = h
            .daemon(crate::daemon::DesiredFeed::Cluster(api.desired()))
            .await;
        api.set_desired("rendered-b");
        d.desired_name = Some("rendered-b".into());
        d.sync(false).await;
        assert_eq!(h.node.current().as_deref(), Some("rendered-b"));
        assert!(api.machine_config_node_object().is_none());
        // Allowed again: the next step's write carries the whole state.
        api.fail_machine_config_node_writes(None);
        d.sync(false).await;
        updated_mcn(&api, "rendered-b").await;
    }
}
