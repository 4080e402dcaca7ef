//! Equal large sources held once per process, for a process that keeps many documents that
//! repeat each other's file contents: the companion's MachineConfig cache holds each base config
//! and every rendered config merged from it, old ones included, and each rendered config carries
//! the contents of all its bases. Without this, a 1 MiB file in one base config is held once
//! more for every rendered config of its pool the cluster keeps.
//!
//! Off unless [`enable`] was called: a source's text is hashed once more when it is read, which
//! only pays where documents stay in memory side by side (the agent reads one config at a time).
//! Only strings of at least [`MIN_BYTES`] are looked up: below that, the lookup would cost more
//! than the copy it saves. A source given back by every document that held it is forgotten (the
//! table holds weak references, pruned as it grows).

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// Strings shorter than this are never shared.
pub const MIN_BYTES: usize = 16 * 1024;

static ENABLED: AtomicBool = AtomicBool::new(false);

static TABLE: Mutex<Table> = Mutex::new(Table {
    by_hash: None,
    entries: 0,
    prune_at: PRUNE_FLOOR,
});

/// Entries kept before the first pruning of the table.
const PRUNE_FLOOR: usize = 64;

/// From now on, equal large sources read in this process share one allocation.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

struct Table {
    /// Live and dead strings by the hash of their text (equal hashes compared in full).
    by_hash: Option<HashMap<u64, Vec<Weak<str>>>>,
    /// Weak references in `by_hash`.
    entries: usize,
    /// Prune dead references when `entries` reaches this.
    prune_at: usize,
}

impl Table {
    fn find_or_insert(&mut self, text: &str) -> Arc<str> {
        let hash = {
            let mut hasher = DefaultHasher::new();
            text.hash(&mut hasher);
            hasher.finish()
        };
        let by_hash = self.by_hash.get_or_insert_with(HashMap::new);
        let bucket = by_hash.entry(hash).or_default();
        if let Some(found) = bucket
            .iter()
            .filter_map(Weak::upgrade)
            .find(|held| **held == *text)
        {
            return found;
        }
        let made: Arc<str> = Arc::from(text);
        bucket.push(Arc::downgrade(&made));
        self.entries += 1;
        if self.entries >= self.prune_at {
            self.prune();
        }
        made
    }

    /// Drops the references to strings no document holds any more.
    fn prune(&mut self) {
        let Some(by_hash) = &mut self.by_hash else {
            return;
        };
        by_hash.retain(|_, bucket| {
            bucket.retain(|held| held.strong_count() > 0);
            !bucket.is_empty()
        });
        self.entries = by_hash.values().map(Vec::len).sum();
        self.prune_at = (2 * self.entries).max(PRUNE_FLOOR);
    }
}

/// `text` as a shared string: the allocation of an equal one still held when sharing is on and
/// `text` is large, else a copy of its own.
pub(super) fn shared(text: &str) -> Arc<str> {
    if text.len() < MIN_BYTES || !ENABLED.load(Ordering::Relaxed) {
        return Arc::from(text);
    }
    TABLE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .find_or_insert(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries() -> usize {
        TABLE.lock().unwrap().entries
    }

    // One test: the switch and the table are the process's (nextest runs each test alone).
    #[test]
    fn equal_large_strings_share_one_allocation_once_enabled() {
        let big = "data:;base64,".to_string() + &"QUFB".repeat(MIN_BYTES);

        let (a, b) = (shared(&big), shared(&big));
        assert!(!Arc::ptr_eq(&a, &b), "off until enabled");

        enable();
        let (c, d) = (shared(&big), shared(&big.clone()));
        assert!(Arc::ptr_eq(&c, &d), "equal texts, one allocation");
        assert_eq!(*c, *big);

        let other = big.replace("QUFB", "QkJC");
        let e = shared(&other);
        assert!(
            !Arc::ptr_eq(&c, &e) && *e == *other,
            "a different text is its own"
        );

        let small = "data:,small";
        let (f, g) = (shared(small), shared(small));
        assert!(
            !Arc::ptr_eq(&f, &g),
            "small strings are copied, not looked up"
        );

        // Given back by every holder: a new reader of the same text gets a new allocation,
        // and the dead references go when the table is pruned.
        drop((c, d));
        let h = shared(&big);
        assert_eq!(*h, *big);
        assert_eq!(entries(), 3);
        TABLE.lock().unwrap().prune();
        assert_eq!(entries(), 2, "the dead reference to the first text is gone");
        drop((e, h));
        TABLE.lock().unwrap().prune();
        assert_eq!(entries(), 0);

        // MachineConfigs as a watch reads them (serde_json over the API's bytes): a rendered
        // config and the base config whose file it carries hold that file's contents once.
        let mc = |name: &str| {
            serde_json::json!({
                "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
                "metadata": {"name": name},
                "spec": {"config": {"ignition": {"version": "3.5.0"}, "storage": {"files": [
                    {"path": "/etc/small", "contents": {"source": "data:,a"}},
                    {"path": "/etc/big", "contents": {"source": big}}]}}}
            })
            .to_string()
        };
        let big_source = |json: &str| {
            let read: crate::MachineConfig = serde_json::from_str(json).unwrap();
            let (_, sources) = read.spec.config.unwrap().into_parts();
            let source = sources.lookup("1").unwrap();
            assert_eq!(source.text().unwrap(), *big);
            source
        };
        let base = big_source(&mc("10-worker-payload"));
        let rendered = big_source(&mc("rendered-worker-1"));
        assert_eq!(
            base.text().unwrap().as_ptr(),
            rendered.text().unwrap().as_ptr(),
            "one allocation for both"
        );
    }
}
