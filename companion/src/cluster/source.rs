//! The config server's source in cluster mode (the MCS's `clusterServer`): pools and
//! MachineConfigs from watch-fed caches.
//!
//! A pool serves `spec.configuration.name` once at least one of its nodes runs it
//! (`status.updatedMachineCount > 0`), else `status.configuration.name`, so a new node never
//! boots into a config no node has proven. An unknown pool, or a config not (yet) in the cache,
//! is a 500 as in the MCS (a booting node retries). A node presenting its identity gets its
//! per-node config layered on the served one, computed here the same way the controller does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use hyper::body::Bytes;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client};
use machine_config::render;
use machine_config::{MachineConfig, MachineConfigPool};
use tokio::sync::watch;

use super::cached;
use crate::served::ServeCache;
use crate::server::{ConfigSource, PoolRequest, ServeError};

/// How long to wait for the first list of pools and MachineConfigs.
const SYNC_TIMEOUT: Duration = Duration::from_secs(60);
/// Per-node renders kept.
const PER_NODE_MEMO: usize = 256;

/// Serves pools' rendered configs from the cluster.
pub struct ClusterSource {
    pools: Store<MachineConfigPool>,
    configs: Store<MachineConfig>,
    cache: ServeCache,
    per_node: Mutex<HashMap<String, Arc<MachineConfig>>>,
}

impl ClusterSource {
    /// Starts watching pools and MachineConfigs and waits for the first full lists.
    pub async fn start(client: Client, mut shutdown: watch::Receiver<bool>) -> Result<Self> {
        let (pools, pool_changes) = cached(
            Api::<MachineConfigPool>::all(client.clone()),
            "MachineConfigPools",
        );
        let (configs, mc_changes) = cached(Api::<MachineConfig>::all(client), "MachineConfigs");
        let mut changes = futures::stream::select(pool_changes.boxed(), mc_changes.boxed());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    next = changes.next() => if next.is_none() { return },
                    _ = shutdown.changed() => if *shutdown.borrow() { return },
                }
            }
        });
        let ready = async {
            pools.wait_until_ready().await?;
            configs.wait_until_ready().await
        };
        match tokio::time::timeout(SYNC_TIMEOUT, ready).await {
            Ok(result) => result.context("watching the cluster")?,
            Err(_) => bail!(
                "could not list MachineConfigPools and MachineConfigs within {}s",
                SYNC_TIMEOUT.as_secs()
            ),
        }
        Ok(ClusterSource {
            pools,
            configs,
            cache: ServeCache::default(),
            per_node: Mutex::new(HashMap::new()),
        })
    }

    /// The node's per-node config on top of `base`, or `base` when the node has none.
    fn for_node(
        &self,
        pool: &MachineConfigPool,
        base: Arc<MachineConfig>,
        node: &str,
    ) -> Result<Arc<MachineConfig>, ServeError> {
        let own: Vec<MachineConfig> = self
            .configs
            .state_filter(|mc| render::node_of(mc) == Some(node) && !super::is_rendered(mc))
            .iter()
            .map(|mc| (**mc).clone())
            .collect();
        if own.is_empty() {
            return Ok(base);
        }
        let versions: Vec<String> = own
            .iter()
            .map(|mc| {
                format!(
                    "{}@{}",
                    mc.name(),
                    mc.metadata.resource_version.clone().unwrap_or_default()
                )
            })
            .collect();
        let key = format!("{}|{node}|{}", base.name(), versions.join(","));
        let mut memo = self.per_node.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(hit) = memo.get(&key) {
            return Ok(hit.clone());
        }
        let rendered = render::render_node(pool, &base, node, &own)
            .map_err(|e| ServeError::Failed(format!("node {node}: {e}")))?
            .map(|r| Arc::new(r.config))
            .unwrap_or(base);
        if memo.len() >= PER_NODE_MEMO {
            memo.clear();
        }
        memo.insert(key, rendered.clone());
        Ok(rendered)
    }
}

impl ConfigSource for ClusterSource {
    fn config(&self, request: &PoolRequest) -> Result<Bytes, ServeError> {
        let pool = self
            .pools
            .get(&ObjectRef::new(&request.pool))
            .ok_or_else(|| {
                ServeError::Failed(format!(
                    "could not fetch pool {:?}: not found",
                    request.pool
                ))
            })?;
        let name = if pool.status.updated_machine_count > 0 {
            &pool.spec.configuration.name
        } else {
            &pool.status.configuration.name
        };
        if name.is_empty() {
            return Err(ServeError::Failed(format!(
                "pool {:?} has no rendered configuration yet",
                request.pool
            )));
        }
        let base = self
            .configs
            .get(&ObjectRef::new(name))
            .ok_or_else(|| ServeError::Failed(format!("could not fetch config {name}")))?;
        let chosen = match &request.node {
            Some(node) => self.for_node(&pool, base, node)?,
            None => base,
        };
        self.cache
            .get_or_build(&chosen, request.spec)
            .map_err(|e| ServeError::Failed(e.to_string()))
    }
}
