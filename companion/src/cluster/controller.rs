//! The controller: the MCO's render controller and node controller in one level-triggered loop.
//!
//! Every pass (on any MachineConfig, pool or Node change, and every 30 s) lists pools fresh from
//! the API, reads MachineConfigs from a watch-fed cache (rendered configs are content-addressed,
//! so the cache cannot mislead) and Nodes from another, overlaid with the answers to its own
//! writes so that a pass never acts on its own stale view ([`node_cache`]).
//! Per pool it:
//! 1. renders the pool; refuses a render that nodes cannot apply in place (naming the source
//!    MachineConfig), writes the rendered config and points `spec.configuration` at it;
//! 2. renders per-node configs (nodes with MachineConfigs of their own) on top of the pool's;
//! 3. sets `desiredConfig` on the nodes the rollout step allows (`maxUnavailable`, zone, age;
//!    none in a paused pool); in an image-mode pool (a `MachineOSConfig` names it) also
//!    `desiredImage`, once the pool's rendered config has a succeeded `MachineOSBuild` that is
//!    the MachineOSConfig's current image ([`machine_config::layering::pool_image`]; until then
//!    the rollout waits), and removes `desiredImage` from the nodes of a pool that left it;
//! 4. writes the pool's status (counts and conditions, `RenderDegraded` on render failures).
//!
//! Between 1 and 2 it lists in the pool's `spec.pinnedImageSets` the PinnedImageSets its
//! selector selects ([`pinned_sets`](super::pinned_sets)).
//!
//! Each pass first brings `MachineConfiguration/cluster`'s node disruption status up to date
//! ([`policy_status`](super::policy_status)); the drain controller runs beside the loop, and so
//! does the journal of each node's progress from its MachineConfigNode
//! ([`progress`]), which the pool status also reads for why a node is
//! degraded when its `reason` annotation is empty.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use machine_config::layering::{MachineOSBuild, MachineOSConfig, PoolImage, pool_image};
use machine_config::mco::UPDATE_IN_PROGRESS_TAINT_KEY;
use machine_config::mco::annotations::{DESIRED_CONFIG, DESIRED_IMAGE};
use machine_config::mco::machine_config_node::MachineConfigNode;
use machine_config::render::{self, RenderOptions};
use machine_config::{MachineConfig, MachineConfigPool, MachineConfiguration, PinnedImageSet};
use serde_json::json;
use tokio::sync::{Notify, watch};

use super::drain::schedule::DrainTimings;
use super::node_cache::{self, NodeCache};
use super::{MachineConfigCache, is_rendered};
use super::{nodes, progress, taint};

/// Time between passes when nothing changes.
const RESYNC: Duration = Duration::from_secs(30);

/// Runs the controller until `shutdown` turns true.
pub async fn run(
    client: Client,
    options: RenderOptions,
    shutdown: watch::Receiver<bool>,
) -> Result<()> {
    let configs = MachineConfigCache::watch(client.clone());
    run_with(client, options, configs, None, shutdown).await
}

/// [`run`], with the drain controller ([`drain`](super::drain)) beside it when `drains` is
/// given (its client should come from [`drain_client`](super::drain_client)).
pub async fn run_with(
    client: Client,
    options: RenderOptions,
    configs: MachineConfigCache,
    drains: Option<(Client, DrainTimings)>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<()> {
    let drains = drains.map(|(drain_client, timings)| {
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            if let Err(err) = super::drain::run(drain_client, timings, shutdown).await {
                tracing::error!("drain controller stopped: {err:#}");
            }
        })
    });
    let MachineConfigCache {
        reader: configs_reader,
        changes: mc_changes,
    } = configs;
    let configs = configs_reader.store.clone();
    let pool_changes = changes(
        Api::<MachineConfigPool>::all(client.clone()),
        "MachineConfigPools",
    );
    let (nodes, node_changes) = node_cache::watch(Api::<Node>::all(client.clone()));
    // An admin's policy edit is reflected in the status at once, not at the next resync.
    let policy_changes = changes(
        Api::<MachineConfiguration>::all(client.clone()),
        "MachineConfigurations",
    );
    // A build that finishes (or an admin naming a prebuilt image) rolls out at once.
    let image_changes = futures::stream::select(
        changes(
            Api::<MachineOSConfig>::all(client.clone()),
            "MachineOSConfigs",
        ),
        changes(
            Api::<MachineOSBuild>::all(client.clone()),
            "MachineOSBuilds",
        ),
    );
    // A set added, changed or relabelled reaches its pools' spec at once.
    let (pinned_sets, pinned_changes) = super::cached(
        Api::<PinnedImageSet>::all(client.clone()),
        "PinnedImageSets",
    );
    let mut all_changes = futures::stream::select(
        futures::stream::select(
            futures::stream::select(mc_changes.boxed(), policy_changes.boxed()),
            futures::stream::select(image_changes.boxed(), pinned_changes.boxed()),
        ),
        futures::stream::select(pool_changes.boxed(), node_changes.boxed()),
    );
    let wake = Arc::new(Notify::new());
    let waker = wake.clone();
    let pump = tokio::spawn(async move {
        while all_changes.next().await.is_some() {
            waker.notify_one();
        }
    });
    // Nodes' progress: read, never waited for (a pass does not wait for this cache either).
    let (machine_config_nodes, journal) =
        progress::watch(Api::<MachineConfigNode>::all(client.clone()));
    let journal = tokio::spawn(journal);
    tokio::select! {
        ready = async {
            configs_reader.wait_until_ready().await.context("watching MachineConfigs")?;
            nodes.wait_until_ready().await
        } => ready?,
        _ = shutdown.changed() => {
            pump.abort();
            journal.abort();
            if let Some(drains) = &drains {
                drains.abort();
            }
            return Ok(());
        }
    }
    let controller = Controller {
        client,
        options,
        configs,
        machine_config_nodes,
        nodes,
        pinned_sets,
    };
    tracing::info!("controller started");
    let mut tick = tokio::time::interval(RESYNC);
    loop {
        tokio::select! {
            _ = wake.notified() => {}
            _ = tick.tick() => {}
            _ = shutdown.changed() => {}
        }
        if *shutdown.borrow() {
            break;
        }
        // let a burst of events (a rollout touches many objects) settle into one pass
        tokio::time::sleep(Duration::from_millis(50)).await;
        if let Err(err) = controller.sync_all().await {
            tracing::warn!("controller pass failed, retrying: {err:#}");
            tokio::time::sleep(Duration::from_secs(1)).await;
            wake.notify_one();
        }
    }
    pump.abort();
    journal.abort();
    if let Some(drains) = &drains {
        drains.abort();
    }
    Ok(())
}

fn changes<K>(api: Api<K>, what: &'static str) -> impl futures::Stream<Item = ()> + Send
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    watcher(api, watcher::Config::default())
        .default_backoff()
        .touched_objects()
        .filter_map(move |event| async move {
            if let Err(err) = &event {
                tracing::warn!("watching {what}: {err}");
            }
            event.ok().map(|_| ())
        })
}

/// A pool's render step failed for a reason the pool reports (RenderDegraded), or the API failed.
enum StepError {
    Render(String),
    Api(anyhow::Error),
}

impl From<anyhow::Error> for StepError {
    fn from(err: anyhow::Error) -> Self {
        StepError::Api(err)
    }
}

struct Controller {
    client: Client,
    options: RenderOptions,
    configs: Store<MachineConfig>,
    /// Read for what they add to the annotations (why a node is degraded), never required.
    machine_config_nodes: Store<MachineConfigNode>,
    nodes: NodeCache,
    pinned_sets: Store<PinnedImageSet>,
}

impl Controller {
    async fn sync_all(&self) -> Result<()> {
        // The agents' node disruption policies; a failure here does not hold up rollouts.
        let configurations = Api::<MachineConfiguration>::all(self.client.clone());
        if let Err(err) = super::policy_status::sync(&configurations).await {
            tracing::warn!("node disruption policy status: {err:#}");
        }
        let pools = Api::<MachineConfigPool>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .context("listing MachineConfigPools")?
            .items;
        let nodes = self.nodes.nodes().await?;
        let inputs: Vec<MachineConfig> = self
            .configs
            .state()
            .iter()
            .filter(|mc| !is_rendered(mc))
            .map(|mc| (**mc).clone())
            .collect();
        let layering = self.layering().await?;
        let by_pool = nodes::nodes_by_pool(nodes.iter().map(|n| &**n), &pools);
        let mut result = Ok(());
        for pool in pools {
            let members = by_pool.get(pool.name()).cloned().unwrap_or_default();
            let name = pool.name().to_string();
            if let Err(err) = self.sync_pool(pool, &inputs, &members, &layering).await {
                tracing::warn!(pool = %name, "syncing pool failed: {err:#}");
                result = Err(err);
            }
        }
        result
    }

    async fn sync_pool(
        &self,
        mut pool: MachineConfigPool,
        inputs: &[MachineConfig],
        members: &[&Node],
        layering: &(Vec<MachineOSConfig>, Vec<MachineOSBuild>),
    ) -> Result<()> {
        let mut render_errors = Vec::new();
        match self.render_pool(&mut pool, inputs).await {
            Ok(()) => {}
            Err(StepError::Render(message)) => {
                tracing::error!(pool = %pool.name(), "{message}");
                render_errors.push(message);
            }
            Err(StepError::Api(err)) => return Err(err),
        }
        let pinned = super::pinned_sets::sync(&self.client, &mut pool, &self.pinned_sets).await;

        let mut targets: BTreeMap<String, String> = BTreeMap::new();
        let mut unrenderable: BTreeSet<String> = BTreeSet::new();
        if let Some(base) = self.config(&pool.spec.configuration.name) {
            for node in members {
                let node_name = nodes::name(node);
                match render::render_node(&pool, &base, node_name, inputs) {
                    Ok(Some(rendered)) => {
                        self.ensure_config(&rendered.config).await?;
                        targets.insert(node_name.to_string(), rendered.config.name().to_string());
                    }
                    Ok(None) => {}
                    Err(err) => {
                        render_errors.push(format!("node {node_name}: {err}"));
                        unrenderable.insert(node_name.to_string());
                    }
                }
            }
        }
        let pool_target = pool.spec.configuration.name.clone();
        let target = |n: &Node| {
            targets
                .get(nodes::name(n))
                .cloned()
                .unwrap_or_else(|| pool_target.clone())
        };

        let eligible: Vec<&Node> = members
            .iter()
            .copied()
            .filter(|n| !unrenderable.contains(nodes::name(n)))
            .collect();
        let pool_image_state = pool_image(&pool, &layering.0, &layering.1);
        let step = match &pool_image_state {
            PoolImage::Waiting(why) => {
                tracing::info!(pool = %pool.name(), "image mode: waiting for the image of {pool_target}: {why}");
                Vec::new()
            }
            PoolImage::NotLayered => nodes::rollout_step(&pool, &eligible, target),
            PoolImage::Image(i) => {
                nodes::rollout_step_with_image(&pool, &eligible, target, Some(i))
            }
        };
        let image = match &pool_image_state {
            PoolImage::Image(i) => Some(i.as_str()),
            _ => None,
        };
        for (node, config) in &step {
            self.set_desired(nodes::name(node), config, image).await?;
        }
        // The nodes still waiting to be targeted carry the UpdateInProgress taint. Without the
        // pool's image yet, only the config says who is targeted.
        let stepped: BTreeSet<&str> = step.iter().map(|(n, _)| nodes::name(n)).collect();
        let compare_image = !matches!(pool_image_state, PoolImage::Waiting(_));
        let targeted = |n: &Node| {
            stepped.contains(nodes::name(n))
                || (nodes::desired(n) == Some(target(n).as_str())
                    && (!compare_image || nodes::desired_image(n) == image))
        };
        for (node, wanted) in taint::changes(&pool, members, targeted) {
            let name = nodes::name(node);
            match taint::set(&Api::all(self.client.clone()), name, wanted).await {
                Ok(true) if wanted => {
                    tracing::info!(pool = %pool.name(), "node {name} waits to be targeted: {UPDATE_IN_PROGRESS_TAINT_KEY} taint set")
                }
                Ok(true) => {
                    tracing::info!(pool = %pool.name(), "node {name} targeted: {UPDATE_IN_PROGRESS_TAINT_KEY} taint removed")
                }
                Ok(false) => {}
                Err(err) => tracing::warn!(pool = %pool.name(), "{err:#}"),
            }
        }
        if !step.is_empty() {
            let names: Vec<&str> = step.iter().map(|(n, _)| nodes::name(n)).collect();
            let to = match image {
                Some(i) => format!("{pool_target} and image {i}"),
                None => pool_target.clone(),
            };
            tracing::info!(pool = %pool.name(), "targeted {} node(s) to {to}: {}", step.len(), names.join(", "));
        }

        let render_error = (!render_errors.is_empty()).then(|| render_errors.join("; "));
        let mut status = nodes::pool_status_with_image(
            &pool,
            members,
            target,
            image,
            render_error.as_deref(),
            &|node| progress::degraded_message(&self.machine_config_nodes, node),
            &now(),
        );
        super::pinned_sets::set_degraded(&mut status, &pinned, &now());
        if status != pool.status {
            Api::<MachineConfigPool>::all(self.client.clone())
                .patch_status(
                    pool.name(),
                    &PatchParams::default(),
                    &Patch::Merge(json!({ "status": status })),
                )
                .await
                .with_context(|| format!("updating the status of pool {}", pool.name()))?;
        }
        Ok(())
    }

    /// The render controller's step; updates `pool.spec.configuration` locally and in the API.
    async fn render_pool(
        &self,
        pool: &mut MachineConfigPool,
        inputs: &[MachineConfig],
    ) -> Result<(), StepError> {
        let sources =
            render::pool_sources(pool, inputs).map_err(|e| StepError::Render(e.to_string()))?;
        let rendered = render::render_pool(pool, inputs, &self.options).map_err(|e| {
            StepError::Render(format!("could not generate rendered MachineConfig: {e}"))
        })?;
        let current_name = pool.spec.configuration.name.clone();
        if !current_name.is_empty()
            && current_name != rendered.config.name()
            && let Some(current) = self.config(&current_name)
        {
            render::check_against_current(
                &current,
                &rendered.config,
                &sources,
                &Default::default(),
            )
            .map_err(|m| {
                StepError::Render(format!("could not generate rendered MachineConfig: {m}"))
            })?;
        }
        self.ensure_config(&rendered.config).await?;
        let configuration = &pool.spec.configuration;
        if configuration.name != rendered.config.name() || configuration.source != rendered.sources
        {
            let name = rendered.config.name().to_string();
            Api::<MachineConfigPool>::all(self.client.clone())
                .patch(
                    pool.name(),
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"configuration": {"name": name, "source": rendered.sources}}})),
                )
                .await
                .with_context(|| format!("pointing pool {} at {name}", pool.name()))?;
            if configuration.name != name {
                tracing::info!(pool = %pool.name(), "Pool {}: now targeting: {name}", pool.name());
            }
            pool.spec.configuration.name = name;
            pool.spec.configuration.source = rendered.sources;
        }
        Ok(())
    }

    fn config(&self, name: &str) -> Option<Arc<MachineConfig>> {
        if name.is_empty() {
            return None;
        }
        self.configs.get(&ObjectRef::new(name))
    }

    /// Creates a rendered config unless it exists (its name is its content hash).
    async fn ensure_config(&self, mc: &MachineConfig) -> Result<()> {
        if self.config(mc.name()).is_some() {
            return Ok(());
        }
        match Api::<MachineConfig>::all(self.client.clone())
            .create(&PostParams::default(), mc)
            .await
        {
            Ok(_) => {
                tracing::info!("Generated machineconfig {}", mc.name());
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(err) => Err(err).with_context(|| format!("creating MachineConfig {}", mc.name())),
        }
    }

    /// The MachineOSConfigs and MachineOSBuilds, listed fresh; none when the API does not
    /// serve the types (404: every pool is out of image mode). Any other failure fails the
    /// pass: taking a layered pool for a plain one would send its nodes off their image.
    async fn layering(&self) -> Result<(Vec<MachineOSConfig>, Vec<MachineOSBuild>)> {
        let params = ListParams::default();
        let not_served = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 404);
        let configs = match Api::<MachineOSConfig>::all(self.client.clone())
            .list(&params)
            .await
        {
            Ok(list) => list.items,
            Err(e) if not_served(&e) => return Ok((Vec::new(), Vec::new())),
            Err(e) => return Err(e).context("listing MachineOSConfigs"),
        };
        let builds = Api::<MachineOSBuild>::all(self.client.clone())
            .list(&params)
            .await
            .context("listing MachineOSBuilds")?
            .items;
        Ok((configs, builds))
    }

    /// Sets `desiredConfig`, and `desiredImage` (removed when `None`), in one write.
    async fn set_desired(&self, node: &str, config: &str, image: Option<&str>) -> Result<()> {
        let patch =
            json!({"metadata": {"annotations": {DESIRED_CONFIG: config, DESIRED_IMAGE: image}}});
        let written = Api::<Node>::all(self.client.clone())
            .patch(node, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .with_context(|| format!("setting desiredConfig {config} on node {node}"))?;
        self.nodes.record(written, &[DESIRED_CONFIG, DESIRED_IMAGE]);
        Ok(())
    }
}

/// Kubernetes' timestamp format, now.
fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}
