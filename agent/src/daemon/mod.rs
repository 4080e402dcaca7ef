//! The daemon (`mco-agent start`): start-up checks, then a loop that follows the desired
//! config and keeps the node in it.
//!
//! - Start-up ([`startup`]): finish an update recorded before a restart or reboot (verify,
//!   commit, uncordon, Done — or Degraded saying what did not take); seed the current config
//!   from `node-annotations.json` when none is recorded; validate the disk against the current
//!   config (Degraded with every mismatch) unless the force file is present. Then sd_notify
//!   `READY=1` (in the boot into an update, already once the boot is verified, before its
//!   health checks: they wait for units ordered after the agent, such as the kubelet).
//! - The desired config: with a cluster, the node's `desiredConfig` ([`DesiredFeed::Cluster`]),
//!   fetched by name from the source (the API server, or host-first the config server, whose
//!   served name must match); standalone, whatever the config server serves for the node's
//!   pool, polled ([`DesiredFeed::Poll`]). A source that cannot be reached never strands the
//!   node: the current config comes from disk, and fetching is retried with backoff.
//! - Sync: when desired differs from current (or the force file is present) the engine updates
//!   the node; a failure is retried with exponential backoff (1 s → 60 s, forever); an
//!   unreconcilable config is not retried until the desired config changes. When desired is
//!   current and the node is not Done (drift, a failed validation), it is validated again and
//!   made Done once it matches.
//! - The drift monitor ([`drift`]) runs against the current config between updates.
//! - SIGTERM/SIGINT stop the daemon within seconds wherever it is ([`crate::stop`]): `start`
//!   runs it under [`crate::stop::until_stopped`], which drops it at the wait it is in (the
//!   network, the API server, D-Bus, rpm-ostree, a hook), and no step of an update begins after
//!   the request; an update in progress resumes from its record at the next start. After a
//!   reboot was asked for (or rpm-ostree queued one) no new work starts: the loop parks until
//!   the shutdown stops it.

pub mod backoff;
pub mod certificates;
pub mod cluster;
pub mod config_server;
pub mod drift;
pub mod finalize_failure;
pub mod join;
pub mod policy;
pub mod source;
pub mod startup;
mod sync;

#[cfg(test)]
mod image_tests;
#[cfg(test)]
mod os_start_tests;
#[cfg(test)]
pub(crate) mod tests;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use backoff::Backoff;
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use source::ConfigSource;
use startup::Started;
use tokio::sync::mpsc;
use tokio::time::Instant;

use certificates::CertNote;
use machine_config::mco::NodeState;

use crate::cluster::DesiredTarget;
use crate::engine::Engine;

/// How often the force file is looked for.
const FORCE_CHECK_INTERVAL: Duration = Duration::from_secs(2);
/// How long the daemon is quiet (no desired config, retry, drift or forced update handled)
/// before it hands its executable's pages back to the kernel ([`crate::idle_pages`]).
const IDLE_RELEASE_AFTER: Duration = Duration::from_secs(10);

/// How long an update may go without reaching a step before systemd's watchdog restarts the
/// agent (the MCD gives a drain an hour before it reports it failed; an update resumes from its
/// record after a restart).
const STEP_BUDGET: Duration = Duration::from_secs(65 * 60);

/// Default interval between polls of the config server in standalone mode.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(30);

/// Where desired configs are announced.
pub enum DesiredFeed {
    /// Standalone: ask the source every interval.
    Poll(Duration),
    /// A cluster: the node's `desiredConfig` (with `desiredImage` in an image-mode pool), now
    /// and on every change.
    Cluster(BoxStream<'static, DesiredTarget>),
}

/// Why the loop is idle.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Parked {
    /// A reboot was requested; everything waits for it.
    Rebooting,
    /// An update to this config waits for a reboot nobody requests (`--skip-reboot`).
    NeedsReboot(String),
}

/// The daemon.
pub struct Daemon {
    engine: Engine,
    source: Arc<dyn ConfigSource>,
    feed: DesiredFeed,
    drift: Option<drift::DriftMonitor>,
    drift_tx: mpsc::Sender<BTreeSet<String>>,
    drift_rx: mpsc::Receiver<BTreeSet<String>>,
    backoff: Backoff,
    retry_at: Option<Instant>,
    /// The last `desiredConfig` announced (cluster mode).
    desired_name: Option<String>,
    /// The last `desiredImage` announced with it (image-mode pools; cluster mode).
    desired_image: Option<String>,
    /// A desired config found unreconcilable: not retried until the desired config changes.
    unreconcilable: Option<String>,
    parked: Option<Parked>,
    /// The node's `currentConfig` annotation at start (cluster mode), for seeding.
    annotated_current: Option<String>,
    /// No sync has run since start-up (the MCD's `booting`: its first update is a boot resync).
    booting: bool,
    /// The desired config whose update the strategy holds back (windows, FleetLock).
    waiting_for: Option<String>,
    /// A FleetLock slot may be held and must be given back before the next update.
    lock_release_pending: bool,
    /// What the certificate writer reports (cluster mode).
    cert_notes: Option<mpsc::UnboundedReceiver<CertNote>>,
    /// The reason the certificate writer's last failure made the node Degraded with.
    cert_reason: Option<String>,
    /// Resolves when the agent must restart (the cluster's feature gates changed).
    restart: Option<BoxFuture<'static, String>>,
    /// Why the loop stopped for a restart, if it did.
    restart_requested: Option<String>,
    /// The Node has the `ostree-finalize-staged-failure` annotation (cluster mode, at start).
    finalize_failure_annotated: bool,
}

impl Daemon {
    pub fn new(engine: Engine, source: Arc<dyn ConfigSource>, feed: DesiredFeed) -> Self {
        let (drift_tx, drift_rx) = mpsc::channel(16);
        // Polling, the next poll is a retry too: a failure is retried no later than it.
        let backoff = match &feed {
            DesiredFeed::Poll(every) => Backoff::up_to(*every),
            DesiredFeed::Cluster(_) => Backoff::new(),
        };
        Daemon {
            engine,
            source,
            feed,
            drift: None,
            drift_tx,
            drift_rx,
            backoff,
            retry_at: None,
            desired_name: None,
            desired_image: None,
            unreconcilable: None,
            parked: None,
            annotated_current: None,
            booting: true,
            waiting_for: None,
            lock_release_pending: false,
            cert_notes: None,
            cert_reason: None,
            restart: None,
            restart_requested: None,
            finalize_failure_annotated: false,
        }
    }

    /// With a cluster: whether the Node had the `ostree-finalize-staged-failure` annotation at
    /// start (it is cleared to `""` when the previous boot logged no finalization error).
    pub fn with_finalize_failure_annotated(mut self, annotated: bool) -> Self {
        self.finalize_failure_annotated = annotated;
        self
    }

    /// With a cluster: the certificate writer's failures and recoveries
    /// ([`certificates::CertificateWriter`]).
    pub fn with_certificate_notes(mut self, notes: mpsc::UnboundedReceiver<CertNote>) -> Self {
        self.cert_notes = Some(notes);
        self
    }

    /// Stops the loop between steps, for a restart, once `restart` resolves (with the reason).
    pub fn with_restart_on(mut self, restart: BoxFuture<'static, String>) -> Self {
        self.restart = Some(restart);
        self
    }

    /// Why the loop stopped for a restart (`None`: it stopped for a signal, or the feed ended).
    pub fn restart_requested(&self) -> Option<&str> {
        self.restart_requested.as_deref()
    }

    /// With a cluster: the node's `currentConfig` annotation, used when nothing is recorded
    /// on disk (on-disk `currentconfig` wins over it).
    pub fn with_annotated_current(mut self, name: Option<String>) -> Self {
        self.annotated_current = name;
        self
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Start-up: stale temp files removed, checks; then sd_notify `READY=1` (the engine says
    /// it earlier in the boot into an update, before the health checks).
    pub async fn start(&mut self) -> Result<()> {
        // who keeps the status file, for `status` (a file left behind names a dead pid)
        self.engine
            .reporter()
            .update_status(self.engine.root(), |s| {
                s.agent = Some(crate::engine::report::AgentProcess::this())
            });
        self.engine.remove_stale_temp_files();
        startup::link_pull_secret(&self.engine);
        startup::remove_policy_patch(&self.engine).await;
        finalize_failure::sync(&self.engine, self.finalize_failure_annotated).await;
        match startup::resume(&self.engine).await {
            Started::Ready => {}
            Started::Rebooting => self.parked = Some(Parked::Rebooting),
            Started::NeedsReboot => {
                let to = self.engine.pending()?.map(|r| r.desired.name().to_string());
                self.parked = Some(Parked::NeedsReboot(to.unwrap_or_default()));
            }
        }
        match self.engine.pending()? {
            // held for the update in progress (taken before it was recorded)
            Some(rec) if rec.lock_held => {
                self.engine
                    .reporter()
                    .update_status(self.engine.root(), |s| {
                        if let Some(st) = s.strategy.as_mut() {
                            st.lock_held = true;
                        }
                    })
            }
            Some(_) => {}
            // No update in progress (none, or the recorded one committed after its verified
            // boot): a slot this node may hold from before a crash or the reboot goes back.
            None if self.engine.strategy().uses_lock() => {
                self.lock_release_pending = true;
                self.release_lock().await;
            }
            None => {}
        }
        if self.parked.is_none() && self.engine.pending()?.is_none() {
            startup::remove_rollback(&self.engine).await?;
            if let Err(e) = startup::seed_current(
                &self.engine,
                self.source.as_ref(),
                self.annotated_current.as_deref(),
            )
            .await
            {
                tracing::warn!(error = %format!("{e:#}"), "could not seed the current config");
            }
            startup::validate_current(&self.engine).await?;
            self.restart_drift_monitor().await;
        }
        crate::notify::ready();
        Ok(())
    }

    /// Runs until the cluster's desired feed ends; a stop (SIGTERM, SIGINT) drops it from
    /// outside ([`crate::stop::until_stopped`]).
    pub async fn run(&mut self) -> Result<()> {
        // The loop pings the watchdog each time round (an arm below wakes it at half the period
        // when nothing else does); work an arm starts pings as it reaches its steps.
        let mut watchdog = crate::notify::watchdog_period().map(|period| {
            tracing::debug!(
                ?period,
                "systemd watchdog enabled: the update loop pings it"
            );
            tokio::time::interval((period / 2).max(Duration::from_millis(1)))
        });
        // The force file acts without waiting for the next desired config or poll.
        let mut force_check = tokio::time::interval(FORCE_CHECK_INTERVAL);
        let mut poll = match &self.feed {
            DesiredFeed::Poll(every) => Some(tokio::time::interval(*every)),
            DesiredFeed::Cluster(_) => None,
        };
        // Start-up itself was work: release once it has been quiet for a while.
        let mut release_at = Some(Instant::now() + IDLE_RELEASE_AFTER);
        loop {
            crate::notify::watchdog_ping();
            let retry_at = self.retry_at;
            let mut worked = true;
            tokio::select! {
                _ = async { watchdog.as_mut().expect("watchdog interval").tick().await }, if watchdog.is_some() => {
                    worked = false;
                }
                _ = sleep_until(release_at), if release_at.is_some() => {
                    worked = false;
                    release_at = None;
                    release_idle_pages();
                }
                why = restart_due(&mut self.restart), if self.restart.is_some() => {
                    tracing::info!("restarting: {why}");
                    self.restart_requested = Some(why);
                    break;
                }
                Some(note) = next_note(&mut self.cert_notes), if self.cert_notes.is_some() => {
                    self.on_certificate_note(note).await;
                }
                _ = async { poll.as_mut().expect("poll interval").tick().await }, if poll.is_some() => {
                    // A scheduled retry (due within one interval, see `Daemon::new`) is the
                    // next attempt: the log said when, and a poll between would move it.
                    if self.retry_at.is_none() {
                        self.watched_sync(false).await;
                    } else {
                        worked = false;
                    }
                }
                target = next_desired(&mut self.feed) => {
                    let Some(DesiredTarget { config: name, image }) = target else { break };
                    if self.desired_name.as_deref() != Some(name.as_str()) {
                        tracing::info!(desired = name, "desiredConfig changed");
                        self.backoff.reset();
                    }
                    if self.desired_image != image {
                        tracing::info!(desired_image = image.as_deref().unwrap_or(""), "desiredImage changed");
                        self.backoff.reset();
                    }
                    self.desired_name = Some(name);
                    self.desired_image = image;
                    self.watched_sync(false).await;
                }
                _ = sleep_until(retry_at), if retry_at.is_some() => {
                    self.retry_at = None;
                    self.watched_sync(true).await;
                }
                Some(paths) = self.drift_rx.recv() => {
                    let _work = crate::notify::long_work(STEP_BUDGET);
                    self.on_drift(&paths).await
                }
                _ = force_check.tick() => {
                    // (A failed forced update waits for its backoff like any other.)
                    worked = self.retry_at.is_none()
                        && self.parked != Some(Parked::Rebooting)
                        && self.engine.force_file_present().unwrap_or(false);
                    if worked {
                        tracing::info!("{} present: re-applying", machine_config::mco::paths::FORCE_FILE);
                        self.watched_sync(true).await;
                    }
                }
            }
            if worked {
                release_at = Some(Instant::now() + IDLE_RELEASE_AFTER);
            }
        }
        tracing::info!("the desired config feed ended: stopping");
        Ok(())
    }

    /// [`Self::sync`] as long work (see [`crate::notify`]): a drain or an image pull may take
    /// up to [`STEP_BUDGET`] between steps before systemd restarts a hung agent.
    async fn watched_sync(&mut self, retry: bool) {
        let _work = crate::notify::long_work(STEP_BUDGET);
        self.sync(retry).await;
    }

    /// The certificate writer failed (the node is Degraded with its reason) or recovered (a
    /// node still Degraded with that reason is validated again and made Done).
    async fn on_certificate_note(&mut self, note: CertNote) {
        match note {
            CertNote::Failed(reason) => {
                self.engine
                    .reporter()
                    .state(self.engine.root(), NodeState::Degraded, &reason)
                    .await;
                self.cert_reason = Some(reason);
            }
            CertNote::Recovered => {
                let status = self.engine.reporter().status();
                if let Some(reason) = self.cert_reason.take()
                    && status.state == NodeState::Degraded
                    && status.reason == reason
                    && self.retry_at.is_none()
                {
                    self.watched_sync(true).await;
                }
            }
        }
    }

    /// Schedules a retry after the next backoff delay.
    fn retry_later(&mut self) {
        let delay = self.backoff.next_delay();
        tracing::info!(retry_in = ?delay, "will retry");
        self.retry_at = Some(Instant::now() + delay);
    }
}

/// See [`crate::idle_pages`]; a failure costs only memory, so it is logged and the daemon goes on.
fn release_idle_pages() {
    match crate::idle_pages::release_executable_pages() {
        Ok(released) => tracing::debug!(
            mappings = released.mappings,
            bytes = released.bytes,
            "idle: executable pages handed back to the kernel"
        ),
        Err(e) => tracing::debug!(error = %e, "idle: could not hand the executable's pages back"),
    }
}

async fn next_desired(feed: &mut DesiredFeed) -> Option<DesiredTarget> {
    match feed {
        DesiredFeed::Cluster(stream) => stream.next().await,
        DesiredFeed::Poll(_) => std::future::pending().await,
    }
}

async fn restart_due(restart: &mut Option<BoxFuture<'static, String>>) -> String {
    match restart {
        Some(r) => r.await,
        None => std::future::pending().await,
    }
}

async fn next_note(notes: &mut Option<mpsc::UnboundedReceiver<CertNote>>) -> Option<CertNote> {
    match notes {
        Some(n) => n.recv().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
