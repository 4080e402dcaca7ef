//! Standalone mode: pools rendered from a manifests directory, re-rendered when it changes, and
//! served through the [`ServeCache`].
//!
//! A reload that fails (a broken manifest) keeps serving the previous renders and logs the
//! error: a typo in one file must not take the fleet's config server down. A pool that fails to
//! render is answered with 500 and its error is logged; other pools are unaffected.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use anyhow::Result;
use hyper::body::Bytes;
use machine_config::MachineConfig;
use machine_config::render::{self, RenderOptions};
use tokio::sync::watch;

use crate::manifests::{self, Manifests};
use crate::served::ServeCache;
use crate::server::{ConfigSource, PoolRequest, ServeError};

/// A pool's renders: the pool's own and one per node that has MachineConfigs of its own.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolRender {
    /// The rendered config, or why the pool cannot be rendered.
    pub rendered: Result<MachineConfig, String>,
    /// Per-node rendered configs by node name.
    pub nodes: BTreeMap<String, Result<MachineConfig, String>>,
}

/// Everything rendered from one state of the directory.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Renders by pool name.
    pub pools: BTreeMap<String, PoolRender>,
    fingerprint: Vec<(PathBuf, u64, Option<SystemTime>)>,
}

impl Snapshot {
    /// Renders every pool (and per-node configs) of `manifests`.
    pub fn render(manifests: &Manifests, options: &RenderOptions) -> Snapshot {
        let configs = &manifests.machine_configs;
        let nodes: BTreeSet<&str> = configs.iter().filter_map(render::node_of).collect();
        let mut pools = BTreeMap::new();
        for pool in &manifests.pools {
            let rendered = render::render_pool(pool, configs, options)
                .map(|r| r.config)
                .map_err(|e| e.to_string());
            let mut per_node = BTreeMap::new();
            if let Ok(base) = &rendered {
                for node in &nodes {
                    match render::render_node(pool, base, node, configs) {
                        Ok(Some(r)) => {
                            per_node.insert(node.to_string(), Ok(r.config));
                        }
                        Ok(None) => {}
                        Err(e) => {
                            per_node.insert(node.to_string(), Err(e.to_string()));
                        }
                    }
                }
            }
            pools.insert(
                pool.name().to_string(),
                PoolRender {
                    rendered,
                    nodes: per_node,
                },
            );
        }
        Snapshot {
            pools,
            fingerprint: Vec::new(),
        }
    }

    /// The rendered config a request gets: the one it names, if the pool (or, for the proven
    /// node, its own config in this pool) renders it now; else the proven node's own when it has
    /// one, else the pool's.
    pub fn config_for(&self, request: &PoolRequest) -> Result<&MachineConfig, ServeError> {
        let pool = &request.pool;
        let node = request.node.as_deref();
        let render = self
            .pools
            .get(pool)
            .ok_or_else(|| ServeError::NotFound(format!("no MachineConfigPool {pool:?}")))?;
        let Some(name) = &request.config else {
            let chosen = node
                .and_then(|n| render.nodes.get(n))
                .unwrap_or(&render.rendered);
            return chosen.as_ref().map_err(|e| ServeError::Failed(e.clone()));
        };
        if let Ok(mc) = &render.rendered
            && mc.name() == name
        {
            return Ok(mc);
        }
        for (owner, mc) in &render.nodes {
            if let Ok(mc) = mc
                && mc.name() == name
            {
                if node != Some(owner.as_str()) {
                    return Err(ServeError::Forbidden(format!(
                        "rendered config {name:?} of pool {pool:?} is node {owner:?}'s own: it is \
                         served only to that node, proven by its kubelet client certificate or bootstrap \
                         token"
                    )));
                }
                return Ok(mc);
            }
        }
        let other_pool = self.pools.iter().find(|(_, r)| {
            std::iter::once(&r.rendered)
                .chain(r.nodes.values())
                .any(|mc| mc.as_ref().is_ok_and(|mc| mc.name() == name))
        });
        Err(match other_pool {
            Some((other, _)) => ServeError::Forbidden(format!(
                "rendered config {name:?} belongs to pool {other:?}, not to pool {pool:?}"
            )),
            None => ServeError::NotFound(format!(
                "pool {pool:?} does not render {name:?} (the manifests render {})",
                render
                    .rendered
                    .as_ref()
                    .map_or("nothing for it", |mc| mc.name())
            )),
        })
    }

    fn names(&self) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for render in self.pools.values() {
            for mc in std::iter::once(&render.rendered)
                .chain(render.nodes.values())
                .flatten()
            {
                names.insert(mc.name().to_string());
            }
        }
        names
    }
}

/// The standalone config source.
#[derive(Debug)]
pub struct Standalone {
    dir: PathBuf,
    options: RenderOptions,
    snapshot: RwLock<Arc<Snapshot>>,
    cache: ServeCache,
}

impl Standalone {
    /// Loads and renders `dir`; fails when the directory cannot be read or parsed.
    pub fn open(dir: &Path, options: RenderOptions) -> Result<Self> {
        let source = Standalone {
            dir: dir.to_path_buf(),
            options,
            snapshot: RwLock::new(Arc::new(Snapshot::default())),
            cache: ServeCache::default(),
        };
        source.reload()?;
        Ok(source)
    }

    /// The current renders.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Re-reads and re-renders the directory. On error the previous renders stay in place.
    pub fn reload(&self) -> Result<()> {
        let fingerprint = manifests::fingerprint(&self.dir);
        let manifests = manifests::load(&self.dir)?;
        let mut snapshot = Snapshot::render(&manifests, &self.options);
        snapshot.fingerprint = fingerprint;
        for (pool, render) in &snapshot.pools {
            match &render.rendered {
                Ok(mc) => tracing::info!(pool = %pool, rendered = %mc.name(), "rendered pool"),
                Err(e) => tracing::error!(pool = %pool, "cannot render pool: {e}"),
            }
        }
        let names = snapshot.names();
        *self.snapshot.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(snapshot);
        self.cache.retain(|name| names.contains(name));
        Ok(())
    }

    /// Reloads when the directory's files changed since the last successful or failed look.
    /// Returns whether a reload happened.
    pub fn reload_if_changed(
        &self,
        last_seen: &mut Vec<(PathBuf, u64, Option<SystemTime>)>,
    ) -> bool {
        let now = manifests::fingerprint(&self.dir);
        if now == *last_seen {
            return false;
        }
        *last_seen = now;
        if let Err(err) = self.reload() {
            tracing::error!(
                dir = %self.dir.display(),
                "keeping the previous configs, reloading the manifests failed: {err:#}"
            );
        }
        true
    }

    /// Watches the directory (inotify, with a polling fallback every `poll`) and reloads on
    /// changes until `shutdown` turns true.
    pub async fn watch(self: Arc<Self>, poll: Duration, mut shutdown: watch::Receiver<bool>) {
        let mut last_seen = self.snapshot().fingerprint.clone();
        let mut events = match inotify_stream(&self.dir) {
            Ok(stream) => Some(stream),
            Err(err) => {
                tracing::warn!(dir = %self.dir.display(), "inotify unavailable, polling only: {err}");
                None
            }
        };
        let mut ticker = tokio::time::interval(poll);
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                event = next_event(&mut events) => {
                    if event.is_none() {
                        events = None;
                    }
                    // let a burst of writes (editor save, cp of many files) settle
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                _ = shutdown.changed() => return,
            }
            if *shutdown.borrow() {
                return;
            }
            self.reload_if_changed(&mut last_seen);
        }
    }
}

type EventStream = inotify::EventStream<Vec<u8>>;

fn inotify_stream(dir: &Path) -> std::io::Result<EventStream> {
    use inotify::{Inotify, WatchMask};
    let inotify = Inotify::init()?;
    inotify.watches().add(
        dir,
        WatchMask::CLOSE_WRITE
            | WatchMask::MOVED_TO
            | WatchMask::MOVED_FROM
            | WatchMask::CREATE
            | WatchMask::DELETE
            | WatchMask::MODIFY,
    )?;
    inotify.into_event_stream(vec![0u8; 4096])
}

/// The next inotify event; pending forever when there is no stream.
async fn next_event(events: &mut Option<EventStream>) -> Option<()> {
    use futures::StreamExt;
    match events {
        Some(stream) => stream.next().await.and_then(|r| r.ok()).map(|_| ()),
        None => std::future::pending().await,
    }
}

impl ConfigSource for Standalone {
    fn config(&self, request: &PoolRequest) -> Result<Bytes, ServeError> {
        let snapshot = self.snapshot();
        let rendered = snapshot.config_for(request)?;
        self.cache
            .get_or_build(rendered, request.spec)
            .map_err(|e| ServeError::Failed(e.to_string()))
    }
}

#[cfg(test)]
mod tests;
