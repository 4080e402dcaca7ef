//! What the config server sends for a rendered MachineConfig: its Ignition config in the
//! requested spec, with the files the MCS appends, and a cache of those bodies.
//!
//! Appended, in this order (all mode 420, `overwrite: true`, contents as a `data:,` URL with
//! every byte outside `A-Za-z0-9-_.!~*'()` percent-encoded, as the MCS's encoder does):
//! 1. `/etc/machine-config-daemon/node-annotations.json`: `currentConfig`, `desiredConfig`,
//!    `firstPivotConfig` (all the rendered name) and `state: Done`, keys prefixed
//!    `machineconfiguration.openshift.io/`;
//! 2. `/etc/mcs-machine-config-content.json`: the MachineConfig served, indented JSON;
//! 3. `/etc/ignition-machine-config-encapsulated.json` (last): the MachineConfig with
//!    `spec.config` replaced by an empty Ignition config of the served spec, compact JSON.
//!
//! Below spec 3.3, Ignition kernel arguments move into the MachineConfig's `kernelArguments`
//! first (so both MachineConfig files carry them), as the MCS does.
//! The MCS's kubeconfig, kubelet CA and cloud CA files come from a cluster's ControllerConfig and
//! bootstrap token, which the companion does not have; they are not appended.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use hyper::body::Bytes;
use machine_config::SpecVersion;
use machine_config::dataurl;
use machine_config::downtranslate;
use machine_config::mco::NodeState;
use machine_config::mco::annotations::{CURRENT_CONFIG, DESIRED_CONFIG, FIRST_PIVOT_CONFIG, STATE};
use machine_config::mco::paths::{ENCAPSULATED, NODE_ANNOTATIONS, SERVED_CONTENT};
use machine_config::{IgnitionJson, MachineConfig};
use serde::Serialize;
use serde_json::{Value, json};

/// Why a rendered config cannot be served in a spec.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ServeBuildError {
    /// The rendered config has no or a broken Ignition config.
    #[error("rendered config {name}: {message}")]
    Invalid {
        /// Rendered config name.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// The spec cannot express the config.
    /// (The cause is said in the text, not returned as `source()`: a chain says it once.)
    #[error("rendered config {name}: {error}")]
    Translate {
        /// Rendered config name.
        name: String,
        /// Why.
        error: downtranslate::DownTranslateError,
    },
}

/// Builds the response body for `rendered` in `spec`.
pub fn build(rendered: &MachineConfig, spec: SpecVersion) -> Result<Bytes, ServeBuildError> {
    let name = rendered.name().to_string();
    let invalid = |message: String| ServeBuildError::Invalid {
        name: name.clone(),
        message,
    };
    let mut mc = rendered.clone();
    let mut config = serde_json::to_value(mc.ignition().map_err(|e| invalid(e.to_string()))?)
        .map_err(|e| invalid(e.to_string()))?;
    downtranslate::migrate_kernel_arguments(&mut config, &mut mc.spec.kernel_arguments, spec)
        .map_err(|source| ServeBuildError::Translate {
            name: name.clone(),
            error: source,
        })?;

    let annotations = json!({
        CURRENT_CONFIG: name,
        DESIRED_CONFIG: name,
        FIRST_PIVOT_CONFIG: name,
        STATE: NodeState::Done.as_str(),
    });
    append_file(
        &mut config,
        NODE_ANNOTATIONS,
        annotations.to_string().as_bytes(),
        APPENDED_MODE,
    );
    append_file(
        &mut config,
        SERVED_CONTENT,
        &indented(&mc),
        SERVED_CONTENT_MODE,
    );
    let mut encapsulated = mc.clone();
    encapsulated.spec.config = Some(IgnitionJson::from_value(downtranslate::empty_config(spec)));
    append_file(
        &mut config,
        ENCAPSULATED,
        encapsulated.to_json().as_bytes(),
        APPENDED_MODE,
    );

    let served = downtranslate::translate_owned(config, spec).map_err(|source| {
        ServeBuildError::Translate {
            name: name.clone(),
            error: source,
        }
    })?;
    // Exactly sized: a body grown by doubling keeps up to twice its length allocated, and the
    // cache keeps every byte of that for as long as it holds the body.
    let mut body = served.to_string().into_bytes();
    body.shrink_to_fit();
    Ok(Bytes::from(body))
}

fn indented(value: &impl Serialize) -> Vec<u8> {
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    // serializing plain data into a Vec cannot fail
    let _ = value.serialize(&mut serializer);
    out
}

/// Mode of the appended files anyone on the node may read (the MCS's default, 0644).
const APPENDED_MODE: u32 = 0o644;

/// Mode of [`SERVED_CONTENT`]: it holds the whole MachineConfig (password hashes, every file's
/// contents, including those the config itself makes 0600), so only root reads it.
const SERVED_CONTENT_MODE: u32 = 0o600;

fn append_file(config: &mut Value, path: &str, contents: &[u8], mode: u32) {
    let entry = json!({
        "path": path,
        "overwrite": true,
        "contents": {"source": dataurl::encode_percent(contents)},
        "mode": mode,
    });
    let Some(root) = config.as_object_mut() else {
        return;
    };
    let storage = root.entry("storage").or_insert_with(|| json!({}));
    if let Some(storage) = storage.as_object_mut() {
        let files = storage.entry("files").or_insert_with(|| json!([]));
        if let Some(files) = files.as_array_mut() {
            files.push(entry);
        }
    }
}

/// Response bodies by (rendered config name, spec). Rendered names are content hashes, so an
/// entry never goes stale. The cache holds at most [`ServeCache::BUDGET_BYTES`] of bodies (and
/// always the last one built): the least recently served leave first, and
/// [`ServeCache::retain`] drops names no longer in use.
///
/// What is served at a time is a pool's current config to the machines booting into it and, in a
/// rollout, its new config to the nodes updating: a few bodies per pool, each served to many
/// clients; one that left is built again when next asked for. Keeping every body ever built (a
/// count bound let 25 of them, 2 MiB each, stay) cost the companion most of its heap at scale
/// (docs/benchmarks.md, "A 1,000-node pool").
///
/// One body is built at a time: the first requests for a new config come together (a wave of
/// nodes told to update, machines booting at once), and each build holds a few copies of the
/// config's contents for its duration, so concurrent builds of the same body would cost its
/// memory and CPU once per request instead of once.
#[derive(Debug, Default)]
pub struct ServeCache {
    inner: Mutex<CacheInner>,
    /// Held while a body is built.
    building: Mutex<()>,
}

#[derive(Debug, Default)]
struct CacheInner {
    bodies: HashMap<(String, SpecVersion), Bytes>,
    /// Keys from the least to the most recently served.
    order: VecDeque<(String, SpecVersion)>,
    /// The bodies' bytes.
    bytes: usize,
}

impl CacheInner {
    /// Marks `key` (cached) as just served.
    fn touch(&mut self, key: &(String, SpecVersion)) {
        if let Some(at) = self.order.iter().position(|k| k == key) {
            let key = self.order.remove(at).unwrap_or_else(|| key.clone());
            self.order.push_back(key);
        }
    }

    fn remove(&mut self, key: &(String, SpecVersion)) {
        if let Some(body) = self.bodies.remove(key) {
            self.bytes -= body.len();
        }
    }
}

impl ServeCache {
    /// Bytes of bodies kept at most: a few pools' configs of a few MiB each, in one or two specs.
    pub const BUDGET_BYTES: usize = 16 << 20;

    /// The cached body, or builds, stores and returns it.
    pub fn get_or_build(
        &self,
        rendered: &MachineConfig,
        spec: SpecVersion,
    ) -> Result<Bytes, ServeBuildError> {
        let key = (rendered.name().to_string(), spec);
        if let Some(body) = self.cached(&key) {
            return Ok(body);
        }
        let _building = self.building.lock().unwrap_or_else(|p| p.into_inner());
        // Built by the request this one waited for.
        if let Some(body) = self.cached(&key) {
            return Ok(body);
        }
        let body = build(rendered, spec)?;
        let mut inner = self.lock();
        inner.bytes += body.len();
        inner.bodies.insert(key.clone(), body.clone());
        inner.order.push_back(key);
        while inner.bytes > Self::BUDGET_BYTES && inner.order.len() > 1 {
            if let Some(oldest) = inner.order.pop_front() {
                inner.remove(&oldest);
            }
        }
        Ok(body)
    }

    /// The cached body for `key`, marked as just served.
    fn cached(&self, key: &(String, SpecVersion)) -> Option<Bytes> {
        let mut inner = self.lock();
        let body = inner.bodies.get(key).cloned()?;
        inner.touch(key);
        Some(body)
    }

    /// Keeps only entries whose rendered name satisfies `keep`.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        let mut inner = self.lock();
        inner.bodies.retain(|(name, _), _| keep(name));
        inner.order.retain(|(name, _)| keep(name));
        inner.bytes = inner.bodies.values().map(Bytes::len).sum();
    }

    /// The rendered names of the cached bodies, sorted, each once.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.lock().bodies.keys().map(|(n, _)| n.clone()).collect();
        names.sort();
        names.dedup();
        names
    }

    /// Bytes of the cached bodies.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// Number of cached bodies.
    pub fn len(&self) -> usize {
        self.lock().bodies.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests;
