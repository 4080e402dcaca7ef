//! The config server's source in cluster mode (the MCS's `clusterServer`): pools and
//! MachineConfigs from watch-fed caches.
//!
//! A pool serves `spec.configuration.name` once at least one of its nodes runs it
//! (`status.updatedMachineCount > 0`), else `status.configuration.name`, so a new node never
//! boots into a config no node has proven. An unknown pool, or a config not (yet) in the cache,
//! is a 500 as in the MCS (a booting node retries). A node that proved its name (client
//! certificate or bootstrap token) gets its per-node config: the one the controller rendered for it in this pool
//! on top of the served config (the controller renders per-node configs only for the pool's
//! members, so that config is also the proof that the node belongs to the pool).
//!
//! A client naming a rendered config (`X-MCO-Config`) gets exactly that config, whatever the
//! pool's status says, if it is a rendered config of this pool (owned by it), and, when it is a
//! node's own config, only if the client proved to be that node: 404 for a name the cluster
//! does not know, 403 for another pool's config or another node's.

use std::collections::HashSet;
use std::sync::Arc;
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

/// Serves pools' rendered configs from the cluster.
pub struct ClusterSource {
    pools: Store<MachineConfigPool>,
    configs: Store<MachineConfig>,
    /// Shared with the task that drops the bodies no pool uses any more.
    cache: Arc<ServeCache>,
}

impl ClusterSource {
    /// Starts watching pools and MachineConfigs and waits for the first full lists. `configs`,
    /// when given, is a MachineConfig store something else keeps filled (the controller's, see
    /// [`super::MachineConfigCache`]): read, not watched a second time.
    pub async fn start(
        client: Client,
        configs: Option<super::MachineConfigReader>,
        mut shutdown: watch::Receiver<bool>,
    ) -> Result<Self> {
        let (pools, pool_changes) = cached(
            Api::<MachineConfigPool>::all(client.clone()),
            "MachineConfigPools",
        );
        let (configs, mc_changes) = match configs {
            Some(shared) => (shared, futures::stream::empty().boxed()),
            None => {
                let own = super::MachineConfigCache::watch(client);
                (own.reader, own.changes)
            }
        };
        let mut changes = futures::stream::select(pool_changes.boxed(), mc_changes);
        let cache = Arc::new(ServeCache::default());
        let (watched_pools, watched_configs, bodies) =
            (pools.clone(), configs.store.clone(), cache.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    next = changes.next() => match next {
                        Some(()) => forget_unused(&watched_pools, &watched_configs, &bodies),
                        None => return,
                    },
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
            configs: configs.store,
            cache,
        })
    }

    /// The per-node config the controller rendered for `node` in `pool` on top of `base`.
    fn per_node(&self, pool: &str, base: &str, node: &str) -> Option<Arc<MachineConfig>> {
        self.configs
            .state_filter(|mc| {
                super::is_rendered(mc)
                    && rendered_for_node(mc) == Some(node)
                    && owner_pool(mc) == Some(pool)
                    && base_config(mc) == Some(base)
            })
            .into_iter()
            .next()
    }

    /// The rendered config `name` of `pool`, if the client may have it.
    fn named(&self, request: &PoolRequest, name: &str) -> Result<Arc<MachineConfig>, ServeError> {
        let pool = &request.pool;
        let mc = self
            .configs
            .get(&ObjectRef::new(name))
            .filter(|mc| super::is_rendered(mc))
            .ok_or_else(|| {
                ServeError::NotFound(format!(
                    "no rendered config {name:?} in the cluster (asked for pool {pool:?})"
                ))
            })?;
        match owner_pool(&mc) {
            Some(owner) if owner == pool => {}
            Some(owner) => {
                return Err(ServeError::Forbidden(format!(
                    "rendered config {name:?} belongs to pool {owner:?}, not to pool {pool:?}"
                )));
            }
            None => {
                return Err(ServeError::Forbidden(format!(
                    "rendered config {name:?} belongs to no pool (asked for pool {pool:?})"
                )));
            }
        }
        if let Some(owner) = rendered_for_node(&mc)
            && request.node.as_deref() != Some(owner)
        {
            return Err(ServeError::Forbidden(format!(
                "rendered config {name:?} of pool {pool:?} is node {owner:?}'s own: it is served \
                 only to that node, proven by its kubelet client certificate or bootstrap token"
            )));
        }
        Ok(mc)
    }
}

/// Drops the cached bodies of rendered configs no pool serves or rolls out any more (neither a
/// pool's `spec.configuration` nor its `status.configuration`, nor a per-node config on top of
/// one of those): once a pool finished moving to a new config, the old one's bodies would
/// otherwise stay until the cache's byte budget pushed them out, megabytes each. A client that
/// still asks for such a config by name gets it built again.
fn forget_unused(
    pools: &Store<MachineConfigPool>,
    configs: &Store<MachineConfig>,
    cache: &ServeCache,
) {
    if cache.is_empty() {
        return;
    }
    let in_use: HashSet<String> = pools
        .state()
        .iter()
        .flat_map(|pool| {
            [
                pool.spec.configuration.name.clone(),
                pool.status.configuration.name.clone(),
            ]
        })
        .filter(|name| !name.is_empty())
        .collect();
    cache.retain(|name| {
        in_use.contains(name)
            || configs.get(&ObjectRef::new(name)).is_some_and(|mc| {
                rendered_for_node(&mc).is_some()
                    && base_config(&mc).is_some_and(|base| in_use.contains(base))
            })
    });
}

/// The config a per-node rendered config was rendered on top of.
fn base_config(mc: &MachineConfig) -> Option<&str> {
    mc.metadata
        .annotations
        .as_ref()?
        .get(render::BASE_CONFIG_ANNOTATION)
        .map(String::as_str)
}

/// The node a per-node rendered config was rendered for.
fn rendered_for_node(mc: &MachineConfig) -> Option<&str> {
    mc.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(render::RENDERED_FOR_NODE_LABEL))
        .map(String::as_str)
}

/// The pool that owns a rendered config.
fn owner_pool(mc: &MachineConfig) -> Option<&str> {
    mc.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.kind == <MachineConfigPool as k8s_openapi::Resource>::KIND)
        .map(|o| o.name.as_str())
}

impl ConfigSource for ClusterSource {
    fn config(&self, request: &PoolRequest) -> Result<Bytes, ServeError> {
        if let Some(name) = &request.config {
            let chosen = self.named(request, name)?;
            return self
                .cache
                .get_or_build(&chosen, request.spec)
                .map_err(|e| ServeError::Failed(e.to_string()));
        }
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
            Some(node) => self.per_node(pool.name(), name, node).unwrap_or(base),
            None => base,
        };
        self.cache
            .get_or_build(&chosen, request.spec)
            .map_err(|e| ServeError::Failed(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;
    use machine_config::SpecVersion;
    use serde_json::{Value, json};

    use super::*;

    fn rendered(name: &str, labels: Value, annotations: Value) -> MachineConfig {
        MachineConfig::from_value(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "spec": {"config": {"ignition": {"version": "3.5.0"}}}
        }))
        .unwrap()
    }

    fn per_node(name: &str, node: &str, base: &str) -> MachineConfig {
        rendered(
            name,
            json!({render::RENDERED_FOR_NODE_LABEL: node}),
            json!({render::BASE_CONFIG_ANNOTATION: base}),
        )
    }

    #[test]
    fn bodies_of_configs_no_pool_uses_are_forgotten() {
        // pool `worker` rolling from rendered-worker-1 to rendered-worker-2
        let pool = MachineConfigPool::from_value(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
            "metadata": {"name": "worker"},
            "spec": {"configuration": {"name": "rendered-worker-2"}},
            "status": {"configuration": {"name": "rendered-worker-1"}}
        }))
        .unwrap();
        let (pools, mut pool_writer) = reflector::store::<MachineConfigPool>();
        pool_writer.apply_watcher_event(&Event::Apply(pool));
        let configs = [
            rendered("rendered-worker-0", json!({}), json!({})),
            rendered("rendered-worker-1", json!({}), json!({})),
            rendered("rendered-worker-2", json!({}), json!({})),
            per_node("rendered-worker-2-a", "a", "rendered-worker-2"),
            per_node("rendered-worker-0-a", "a", "rendered-worker-0"),
        ];
        let (store, mut writer) = reflector::store::<MachineConfig>();
        let cache = ServeCache::default();
        for mc in &configs {
            writer.apply_watcher_event(&Event::Apply(mc.clone()));
            cache.get_or_build(mc, SpecVersion::V3_5).unwrap();
        }
        cache.get_or_build(&configs[2], SpecVersion::V3_2).unwrap();
        assert_eq!(cache.len(), 6);

        forget_unused(&pools, &store, &cache);
        assert_eq!(
            cache.names(),
            [
                "rendered-worker-1",
                "rendered-worker-2",
                "rendered-worker-2-a"
            ],
            "the configs the pool serves or rolls out, and the per-node config on one of them"
        );
    }
}
