//! Pinned image sets (the MCD's `PinnedImageSetManager`): the images of the PinnedImageSets
//! the node's pools list are pulled through the container runtime's image service ahead of
//! time and pinned in CRI-O's `pinned_images` (so the kubelet's garbage collection keeps them),
//! and the node's MachineConfigNode tells how far it got.
//!
//! - [`Manager::run`] follows the cluster ([`crate::cluster::pinned_watch`]) and syncs when
//!   what the node must hold changes ([`Plan`]): a pool's sets, a set's generation, the node's
//!   pools; once at start. A failed sync is retried with backoff, forever.
//! - A sync (`sync`): the storage check ([`storage`]) and the pulls ([`pull`]) pool by pool,
//!   every image checked again, then the drop-in and the runtime's reload.
//! - `cache`: what is known between syncs.
//!
//! The MCD's settings ([`machine_config::mco::pinned_images`]) are kept: 5 image workers (1 on
//! the control plane), a 1 s pause after each image, 4 attempts per image, 5 minutes for the
//! checks of a sync, 16Gi kept free. Where this differs from the MCD, and why:
//! `docs/mcd-compatibility.md` ("Pinned image sets").

mod cache;
pub mod pull;
pub mod storage;
mod sync;
#[cfg(test)]
mod tests;

use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::stream::{BoxStream, StreamExt};
use machine_config::mco::node_image_conditions::Gates;
use machine_config::mco::pinned_images::{
    CONTROL_PLANE_LABEL, CONTROL_PLANE_WORKERS, Outcome, PREFETCH_TIMEOUT, PULL_WAITS, Platform,
    SetState, WORKER_PAUSE, WORKERS,
};
use machine_config::pool::pools_for_node;
use tokio::task::JoinHandle;
use tokio::time::Sleep;

use self::cache::Cache;
use self::pull::{PullTimings, Puller};
use self::storage::ImageInspector;
use crate::cluster::pinned_watch::PinnedView;
use crate::cluster::{NodeApi, mcn_pinned};
use crate::host::cri::ImageService;
use crate::host::systemd::Systemd;
use crate::rootfs::Root;

/// The manager's timings (the MCD's by default; tests shorten them).
#[derive(Debug, Clone)]
pub struct Timings {
    /// How long the checks of a sync may take (not the pulls: they take what they take).
    pub prefetch_timeout: Duration,
    pub pull_waits: Vec<Duration>,
    pub worker_pause: Duration,
    /// The first retry of a failed sync, doubled after each failure up to `retry_max`.
    pub retry_initial: Duration,
    pub retry_max: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            prefetch_timeout: PREFETCH_TIMEOUT,
            pull_waits: PULL_WAITS.to_vec(),
            worker_pause: WORKER_PAUSE,
            retry_initial: Duration::from_secs(1),
            retry_max: Duration::from_secs(60),
        }
    }
}

/// What the manager works with.
pub struct Seams {
    pub api: Arc<dyn NodeApi>,
    pub gates: Gates,
    /// The node's root (the drop-in, the pull secret, registries.conf).
    pub root: Root,
    pub cri: Arc<dyn ImageService>,
    pub inspector: Arc<dyn ImageInspector>,
    /// Live systemd, to reload the runtime; `None` on a test root (the reload is skipped).
    pub systemd: Option<Arc<dyn Systemd>>,
}

pub struct Manager {
    node: String,
    api: Arc<dyn NodeApi>,
    gates: Gates,
    root: Root,
    cri: Arc<dyn ImageService>,
    inspector: Arc<dyn ImageInspector>,
    systemd: Option<Arc<dyn Systemd>>,
    timings: Timings,
    platform: Platform,
    cache: Cache,
    /// Made at the first sync: the worker count depends on the node's role.
    puller: OnceLock<Puller>,
}

/// What the node must hold: its pools (primary first) with the sets each lists, and the
/// identity and generation of each of those sets (`None`: it does not exist). A sync runs when
/// this changes; nothing else in the cluster starts one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pools: Result<Vec<(String, Vec<String>)>, String>,
    sets: Vec<(String, Option<(String, i64)>)>,
}

impl Plan {
    pub fn of(node: &str, view: &PinnedView) -> Plan {
        let pools = pools_for_node(node, &view.node.labels, &view.pools).map(|pools| {
            pools
                .iter()
                .map(|p| {
                    let sets = p.spec.pinned_image_sets.iter().map(|r| r.name.clone());
                    (p.name().to_string(), sets.collect())
                })
                .collect::<Vec<_>>()
        });
        let mut names: Vec<&String> = pools.iter().flatten().flat_map(|(_, sets)| sets).collect();
        names.sort();
        names.dedup();
        let sets = names
            .into_iter()
            .map(|n| {
                let found = view.set(n).map(|s| (s.uid().to_string(), s.generation()));
                (n.clone(), found)
            })
            .collect();
        Plan { pools, sets }
    }
}

impl Manager {
    pub fn new(node: &str, seams: Seams, timings: Timings) -> Manager {
        Manager {
            node: node.to_string(),
            api: seams.api,
            gates: seams.gates,
            root: seams.root,
            cri: seams.cri,
            inspector: seams.inspector,
            systemd: seams.systemd,
            timings,
            platform: Platform::host(),
            cache: Cache::default(),
            puller: OnceLock::new(),
        }
    }

    fn puller(&self) -> &Puller {
        self.puller.get_or_init(|| {
            Puller::new(
                self.cri.clone(),
                PullTimings {
                    workers: WORKERS,
                    waits: self.timings.pull_waits.clone(),
                    pause: self.timings.worker_pause,
                },
            )
        })
    }

    /// The image workers of a node with these labels (the MCD's count).
    fn workers_for(view: &PinnedView) -> usize {
        if view.node.labels.contains_key(CONTROL_PLANE_LABEL) {
            CONTROL_PLANE_WORKERS
        } else {
            WORKERS
        }
    }

    /// One sync of `view`, reported in the MachineConfigNode. `Ok` when everything is pinned
    /// (or the node is in no pool).
    pub async fn sync(&self, view: &PinnedView) -> Result<(), String> {
        if self.puller.get().is_none() {
            let workers = Self::workers_for(view);
            let _ = self.puller.set(Puller::new(
                self.cri.clone(),
                PullTimings {
                    workers,
                    waits: self.timings.pull_waits.clone(),
                    pause: self.timings.worker_pause,
                },
            ));
        }
        let pools = pools_for_node(&self.node, &view.node.labels, &view.pools)?;
        let Some(primary) = pools.first() else {
            tracing::debug!("the node is in no pool: no pinned image sets");
            return Ok(());
        };
        let states = |view: &PinnedView| -> Vec<SetState> {
            primary
                .spec
                .pinned_image_sets
                .iter()
                .filter_map(|r| view.set(&r.name))
                .map(|s| SetState {
                    name: s.name().to_string(),
                    generation: s.generation(),
                    complete: self.cache.complete(s.uid(), s.generation()),
                })
                .collect()
        };
        if pools.iter().all(|p| p.spec.pinned_image_sets.is_empty()) {
            // Nothing to pull: a stale drop-in goes, and the MachineConfigNode is written only
            // if it still tells of sets (a fleet without pinned images costs no write).
            let result = self.prefetch(view, &pools).await;
            match &result {
                Ok(()) => self.report_idle(primary.name()).await,
                Err(e) => {
                    self.report(primary.name(), &Outcome::Failed(e.clone()), &[])
                        .await
                }
            }
            return result;
        }
        self.report(primary.name(), &Outcome::Started, &states(view))
            .await;
        let result = self.prefetch(view, &pools).await;
        match &result {
            Ok(()) => {
                tracing::info!("all pinned image sets complete");
                self.report(primary.name(), &Outcome::Complete, &states(view))
                    .await;
            }
            Err(e) => {
                tracing::error!(error = %e, "pinned image sets: the sync failed");
                self.report(primary.name(), &Outcome::Failed(e.clone()), &states(view))
                    .await;
            }
        }
        result
    }

    async fn report(&self, pool: &str, outcome: &Outcome, sets: &[SetState]) {
        if let Err(e) = mcn_pinned::report(self.api.as_ref(), pool, outcome, sets, self.gates).await
        {
            tracing::warn!(error = %e, "the pinned image sets could not be written to the MachineConfigNode");
        }
    }

    async fn report_idle(&self, pool: &str) {
        if let Err(e) = mcn_pinned::report_idle(self.api.as_ref(), pool, self.gates).await {
            tracing::warn!(error = %e, "the pinned image sets could not be written to the MachineConfigNode");
        }
    }

    /// Follows `views` until it ends (a cluster's never does), syncing as the module docs say.
    pub async fn run(self: Arc<Self>, mut views: BoxStream<'static, PinnedView>) {
        let mut latest: Option<PinnedView> = None;
        // The plan of the sync running or last run, and whether that one succeeded.
        let mut attempted: Option<Plan> = None;
        let mut running: Option<JoinHandle<Result<(), String>>> = None;
        let mut failures = 0u32;
        let mut retry: Option<Pin<Box<Sleep>>> = None;
        loop {
            let start = tokio::select! {
                view = views.next() => {
                    let Some(view) = view else { return };
                    let plan = Plan::of(&self.node, &view);
                    latest = Some(view);
                    if attempted.as_ref() == Some(&plan) {
                        None
                    } else {
                        if let Some(task) = running.take() {
                            task.abort();
                            tracing::info!("the pinned image sets changed: the sync starts over (pulls in flight go on)");
                        }
                        failures = 0;
                        retry = None;
                        attempted = Some(plan);
                        latest.clone()
                    }
                }
                joined = async { running.as_mut().expect("guarded").await }, if running.is_some() => {
                    running = None;
                    match joined {
                        Ok(Ok(())) => failures = 0,
                        Ok(Err(_)) | Err(_) => {
                            failures += 1;
                            let wait = self.retry_wait(failures);
                            tracing::info!(retry_in = ?wait, failures, "the pinned image sets sync is retried");
                            retry = Some(Box::pin(tokio::time::sleep(wait)));
                        }
                    }
                    None
                }
                () = async { retry.as_mut().expect("guarded").await }, if retry.is_some() => {
                    retry = None;
                    latest.clone()
                }
            };
            if let Some(view) = start {
                let manager = self.clone();
                running = Some(tokio::spawn(async move { manager.sync(&view).await }));
            }
        }
    }

    fn retry_wait(&self, failures: u32) -> Duration {
        let factor = 2u32.saturating_pow(failures.saturating_sub(1).min(16));
        self.timings
            .retry_initial
            .saturating_mul(factor)
            .min(self.timings.retry_max)
    }
}
