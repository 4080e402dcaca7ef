//! The in-memory object store: one global resourceVersion counter, a bounded event history
//! for watches, and the write paths (create, update, patch, delete, evict) with their side
//! effects (PDB status, graceful pod termination, finalizers, namespace contents).

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::patch::{self, PatchType};
use super::registry::{RESOURCES, ResourceDef, index_of};
use super::selector::{FieldSelector, LabelSelector};
use super::status::ApiError;
use super::strategy::{self, Target, has_finalizers, metadata_mut, name_of, namespace_of, str_at};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Added,
    Modified,
    Deleted,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// A change to one object; `old` is the previous state of a modification.
#[derive(Debug)]
pub struct Change {
    pub rv: u64,
    pub res: usize,
    pub kind: EventKind,
    pub object: Value,
    pub old: Option<Value>,
}

/// Options of a DELETE (query parameters or a DeleteOptions body).
#[derive(Debug, Default, Clone)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
}

pub(super) type Key = (String, String);

/// Changes to replay first, and the receiver of the changes that follow.
pub type Subscription = (Vec<Arc<Change>>, broadcast::Receiver<Arc<Change>>);

pub(super) struct Inner {
    pub(super) rv: u64,
    /// The oldest resourceVersion a watch may start from.
    pub(super) oldest_rv: u64,
    pub(super) history: VecDeque<Arc<Change>>,
    pub(super) history_limit: usize,
    pub(super) objects: Vec<BTreeMap<Key, Value>>,
    /// UIDs of pods in their graceful termination period.
    pub(super) terminating: HashSet<String>,
    pub(super) pod_termination_delay: Duration,
}

pub struct Store {
    inner: Mutex<Inner>,
    changes: broadcast::Sender<Arc<Change>>,
    pub(super) runtime: Mutex<Option<tokio::runtime::Handle>>,
}

pub(super) fn key(def: &ResourceDef, ns: Option<&str>, name: &str) -> Key {
    let ns = if def.namespaced {
        ns.unwrap_or_default()
    } else {
        ""
    };
    (ns.to_string(), name.to_string())
}

pub(super) fn obj_key(obj: &Value) -> Key {
    (namespace_of(obj).to_string(), name_of(obj).to_string())
}

impl Store {
    pub fn new() -> Arc<Self> {
        let (changes, _) = broadcast::channel(4096);
        let store = Arc::new(Self {
            inner: Mutex::new(Inner {
                rv: 1,
                oldest_rv: 1,
                history: VecDeque::new(),
                history_limit: 10_000,
                objects: RESOURCES.iter().map(|_| BTreeMap::new()).collect(),
                terminating: HashSet::new(),
                pod_termination_delay: Duration::ZERO,
            }),
            changes,
            runtime: Mutex::new(None),
        });
        for ns in [
            "default",
            "kube-system",
            "kube-public",
            "kube-node-lease",
            "openshift-machine-config-operator",
        ] {
            store
                .create(
                    index_of("namespaces"),
                    None,
                    json!({"metadata": {"name": ns}}),
                    false,
                )
                .expect("built-in namespace");
        }
        store
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set_runtime(&self, handle: tokio::runtime::Handle) {
        *self.runtime.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
    }

    pub fn set_pod_termination_delay(&self, delay: Duration) {
        self.lock().pod_termination_delay = delay;
    }

    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// Forgets the watch history: watches from any earlier resourceVersion get 410 Gone.
    pub fn compact(&self) {
        let mut inner = self.lock();
        inner.history.clear();
        inner.oldest_rv = inner.rv;
    }

    pub fn get(&self, res: usize, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        let def = &RESOURCES[res];
        self.lock().objects[res]
            .get(&key(def, ns, name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(def, name))
    }

    /// Objects matching the selectors, ordered by namespace and name, and the list's
    /// resourceVersion.
    pub fn list(
        &self,
        res: usize,
        ns: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
    ) -> (Vec<Value>, u64) {
        let inner = self.lock();
        let items = inner.objects[res]
            .iter()
            .filter(|((k_ns, _), _)| ns.is_none_or(|ns| ns == k_ns))
            .map(|(_, v)| v)
            .filter(|v| labels.matches_object(v) && fields.matches(v))
            .cloned()
            .collect();
        (items, inner.rv)
    }

    /// Subscribes to changes of `res`. `from: None` starts now and returns the current objects
    /// as synthetic ADDED changes; `Some(rv)` replays the kept changes after `rv`.
    pub fn subscribe(&self, res: usize, from: Option<u64>) -> Result<Subscription, ApiError> {
        let inner = self.lock();
        let receiver = self.changes.subscribe();
        let replay = match from {
            None => inner.objects[res]
                .values()
                .map(|obj| {
                    Arc::new(Change {
                        rv: rv_of(obj),
                        res,
                        kind: EventKind::Added,
                        object: obj.clone(),
                        old: None,
                    })
                })
                .collect(),
            Some(rv) if rv < inner.oldest_rv => return Err(ApiError::gone(rv, inner.oldest_rv)),
            Some(rv) => inner
                .history
                .iter()
                .filter(|c| c.res == res && c.rv > rv)
                .cloned()
                .collect(),
        };
        Ok((replay, receiver))
    }

    /// Takes the changes already queued for `receiver` and the resourceVersion they reach, under
    /// the store lock, so a bookmark at that version skips nothing.
    pub fn drain_pending(
        &self,
        receiver: &mut broadcast::Receiver<Arc<Change>>,
    ) -> Result<(Vec<Arc<Change>>, u64), ()> {
        let inner = self.lock();
        let mut pending = Vec::new();
        loop {
            match receiver.try_recv() {
                Ok(change) => pending.push(change),
                Err(broadcast::error::TryRecvError::Empty) => break,
                Err(_) => return Err(()),
            }
        }
        Ok((pending, inner.rv))
    }

    /// Records a change: bumps the resourceVersion, stores or removes the object, keeps history
    /// and notifies watches. Returns the stored object.
    pub(super) fn commit(
        &self,
        inner: &mut Inner,
        res: usize,
        kind: EventKind,
        mut obj: Value,
        old: Option<Value>,
    ) -> Value {
        inner.rv += 1;
        let rv = inner.rv;
        metadata_mut(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
        let k = obj_key(&obj);
        match kind {
            EventKind::Deleted => {
                inner.objects[res].remove(&k);
            }
            _ => {
                inner.objects[res].insert(k, obj.clone());
            }
        }
        let change = Arc::new(Change {
            rv,
            res,
            kind,
            object: obj.clone(),
            old,
        });
        inner.history.push_back(change.clone());
        while inner.history.len() > inner.history_limit {
            if let Some(dropped) = inner.history.pop_front() {
                inner.oldest_rv = dropped.rv;
            }
        }
        // No receivers is fine: nobody is watching.
        let _receivers = self.changes.send(change);
        obj
    }

    /// Inserts an object as given (status included), bypassing create rules: for seeding tests.
    pub fn seed(&self, mut obj: Value) -> Result<Value, ApiError> {
        let api_version = str_at(&obj, "/apiVersion").unwrap_or_default().to_string();
        let kind = str_at(&obj, "/kind").unwrap_or_default().to_string();
        let res = super::registry::find_kind(&api_version, &kind).ok_or_else(|| {
            ApiError::bad_request(format!(
                "no resource for apiVersion {api_version:?} kind {kind:?}"
            ))
        })?;
        let def = &RESOURCES[res];
        let ns = namespace_of(&obj).to_string();
        let status = obj.get("status").cloned();
        let ns_opt = def.namespaced.then_some(if ns.is_empty() {
            "default"
        } else {
            ns.as_str()
        });
        let mut prepared = strategy::prepare_create(def, ns_opt, obj.take())?;
        if let Some(status) = status {
            prepared["status"] = status;
        }
        let mut inner = self.lock();
        self.insert_new(&mut inner, res, prepared)
    }

    pub fn create(
        &self,
        res: usize,
        ns: Option<&str>,
        obj: Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let def = &RESOURCES[res];
        let prepared = strategy::prepare_create(def, ns, obj)?;
        let mut inner = self.lock();
        if def.namespaced {
            let ns = namespace_of(&prepared).to_string();
            if !inner.objects[index_of("namespaces")].contains_key(&(String::new(), ns.clone())) {
                return Err(ApiError::not_found(&RESOURCES[index_of("namespaces")], &ns));
            }
        }
        if dry_run {
            if inner.objects[res].contains_key(&obj_key(&prepared)) {
                return Err(ApiError::already_exists(def, name_of(&prepared)));
            }
            return Ok(prepared);
        }
        self.insert_new(&mut inner, res, prepared)
    }

    fn insert_new(&self, inner: &mut Inner, res: usize, obj: Value) -> Result<Value, ApiError> {
        let def = &RESOURCES[res];
        if inner.objects[res].contains_key(&obj_key(&obj)) {
            return Err(ApiError::already_exists(def, name_of(&obj)));
        }
        let ns = namespace_of(&obj).to_string();
        let mut stored = self.commit(inner, res, EventKind::Added, obj, None);
        if matches!(def.plural, "pods" | "poddisruptionbudgets") {
            self.refresh_budgets(inner, &ns);
            stored = inner.objects[res]
                .get(&obj_key(&stored))
                .cloned()
                .unwrap_or(stored);
        }
        Ok(stored)
    }

    /// PUT: replaces the object (or its status) if `metadata.resourceVersion` is current or
    /// absent (absent is refused for custom resources).
    pub fn replace(
        self: &Arc<Self>,
        res: usize,
        ns: Option<&str>,
        name: &str,
        obj: Value,
        target: Target,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let def = &RESOURCES[res];
        let mut inner = self.lock();
        let old = inner.objects[res]
            .get(&key(def, ns, name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(def, name))?;
        let requested_rv = str_at(&obj, "/metadata/resourceVersion")
            .unwrap_or_default()
            .to_string();
        if requested_rv.is_empty() && def.custom {
            return Err(ApiError::invalid(
                def,
                name,
                "metadata.resourceVersion",
                "Invalid value: 0x0: must be specified for an update",
            ));
        }
        self.update_locked(&mut inner, res, old, obj, &requested_rv, target, dry_run)
    }

    /// PATCH: applies the patch to the current object, then updates (a resourceVersion the
    /// patch sets is a precondition).
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        self: &Arc<Self>,
        res: usize,
        ns: Option<&str>,
        name: &str,
        patch_type: PatchType,
        patch_body: &Value,
        target: Target,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let def = &RESOURCES[res];
        if patch_type == PatchType::Strategic && def.custom {
            return Err(ApiError::unsupported_media_type(
                "application/strategic-merge-patch+json (not supported for custom resources)",
            ));
        }
        let mut inner = self.lock();
        let old = inner.objects[res]
            .get(&key(def, ns, name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(def, name))?;
        let mut patched = old.clone();
        patch::apply(patch_type, &mut patched, patch_body).map_err(|msg| {
            if patch_type == PatchType::Apply {
                ApiError::unsupported_media_type("application/apply-patch+yaml")
            } else {
                ApiError::new(422, "Invalid", msg)
            }
        })?;
        let requested_rv = str_at(&patched, "/metadata/resourceVersion")
            .unwrap_or_default()
            .to_string();
        self.update_locked(
            &mut inner,
            res,
            old,
            patched,
            &requested_rv,
            target,
            dry_run,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn update_locked(
        self: &Arc<Self>,
        inner: &mut Inner,
        res: usize,
        old: Value,
        new: Value,
        requested_rv: &str,
        target: Target,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let def = &RESOURCES[res];
        let name = name_of(&old).to_string();
        let current_rv = str_at(&old, "/metadata/resourceVersion").unwrap_or_default();
        if !requested_rv.is_empty() && requested_rv != current_rv {
            return Err(ApiError::conflict(def, &name));
        }
        let mut updated = strategy::prepare_update(def, &old, new, target)?;
        metadata_mut(&mut updated).insert("resourceVersion".into(), json!(current_rv));
        if dry_run || updated == old {
            return Ok(updated);
        }
        let uid = str_at(&old, "/metadata/uid")
            .unwrap_or_default()
            .to_string();
        let finish_delete = updated.pointer("/metadata/deletionTimestamp").is_some()
            && !has_finalizers(&updated)
            && !inner.terminating.contains(&uid);
        let ns = namespace_of(&old).to_string();
        let stored = if finish_delete {
            self.commit(inner, res, EventKind::Deleted, updated, Some(old))
        } else {
            self.commit(inner, res, EventKind::Modified, updated, Some(old))
        };
        if def.plural == "pods" {
            self.refresh_budgets(inner, &ns);
        }
        Ok(stored)
    }
}

pub fn rv_of(obj: &Value) -> u64 {
    str_at(obj, "/metadata/resourceVersion")
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}
