//! The in-memory object store: one global resourceVersion counter, a bounded event history
//! for watches, reads and commits. The write paths are in `writes` (create, update, patch) and
//! `lifecycle` (delete, evict, with their side effects).

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::registry::{RESOURCES, ResourceDef, index_of};
use super::selector::{FieldSelector, LabelSelector};
use super::status::ApiError;
use super::strategy::{metadata_mut, name_of, namespace_of, str_at};

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
                    &super::writes::Write::main(),
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
}

pub fn rv_of(obj: &Value) -> u64 {
    str_at(obj, "/metadata/resourceVersion")
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}
