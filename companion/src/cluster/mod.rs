//! Cluster mode: the companion as the MCO's render controller and node controller
//! ([`controller`]), its pinned image set controller ([`pinned_sets`]), its drain controller
//! ([`drain`]) and the operator's node disruption policy status ([`policy_status`]), and as its config server ([`source`]), against a Kubernetes API.

pub mod controller;
pub mod drain;
mod mc_cache;
pub mod node_cache;
pub mod nodes;
pub mod pinned_sets;
pub mod policy_status;
pub mod progress;
pub mod source;
pub mod taint;

pub use mc_cache::{MachineConfigCache, MachineConfigReader, SharedMachineConfigs};

use std::path::Path;

use anyhow::{Context, Result};
use futures::{Stream, StreamExt};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use machine_config::MachineConfig;

/// A client for the cluster in `kubeconfig` (its current context).
pub async fn client(kubeconfig: &Path) -> Result<Client> {
    let config = config(kubeconfig).await?;
    Client::try_from(config).context("building the Kubernetes client")
}

/// A client for the drain controller: without kube's own retries of 429 answers, which from
/// the Eviction API are a PodDisruptionBudget's refusal the drain must see (and retry on its
/// own schedule), not throttling.
pub async fn drain_client(kubeconfig: &Path) -> Result<Client> {
    let mut config = config(kubeconfig).await?;
    config.default_retry = false;
    Client::try_from(config).context("building the Kubernetes client")
}

/// A client whose writes pass only while `fence` allows (the leader's controllers'), with or
/// without kube's retries (see [`drain_client`]).
pub async fn fenced_client(
    kubeconfig: &Path,
    fence: &crate::leader::fence::Fence,
    retry: bool,
) -> Result<Client> {
    let mut config = config(kubeconfig).await?;
    config.default_retry = retry;
    let builder =
        kube::client::ClientBuilder::try_from(config).context("building the Kubernetes client")?;
    let layer = crate::leader::fence::FenceLayer {
        fence: fence.clone(),
    };
    Ok(builder.with_layer(&layer).build())
}

async fn config(kubeconfig: &Path) -> Result<kube::Config> {
    let kc = Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading kubeconfig {}", kubeconfig.display()))?;
    kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("loading kubeconfig {}", kubeconfig.display()))
}

/// A watch-fed cache of objects, and a stream that yields whenever it changed (after the cache
/// took the change in).
pub fn cached<K>(api: Api<K>, what: &'static str) -> (Store<K>, impl Stream<Item = ()> + Send)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let changes = reflector::reflector(writer, watcher(api, watcher::Config::default()))
        .default_backoff()
        .touched_objects()
        .filter_map(move |event| async move {
            match event {
                Ok(_) => Some(()),
                Err(err) => {
                    tracing::warn!("watching {what}: {err}");
                    None
                }
            }
        });
    (store, changes)
}

/// Whether a MachineConfig is a rendered one (never an input to rendering).
pub fn is_rendered(mc: &MachineConfig) -> bool {
    mc.name()
        .starts_with(machine_config::render::hash::RENDERED_PREFIX)
}
