//! The MachineConfigs, watched once per process: in `serve --controller` one task drives the
//! cache and both the config server and the controller (while this replica leads) read the
//! same store. Rendered
//! configs carry every file's contents, so a second watch held each of them twice (half of the
//! companion's heap in the scale harness, docs/benchmarks.md "A 1,000-node pool").

use anyhow::{Result, anyhow};
use futures::StreamExt;
use kube::runtime::reflector::Store;
use kube::{Api, Client};
use machine_config::MachineConfig;
use tokio::sync::watch;

use super::cached;

/// A MachineConfig cache and the stream that keeps it filled.
pub struct MachineConfigCache {
    /// The store and its readiness, for every task that reads it.
    pub reader: MachineConfigReader,
    /// Yields after each change the store took in; the store fills only while it is polled.
    pub changes: futures::stream::BoxStream<'static, ()>,
}

impl MachineConfigCache {
    /// Starts watching the cluster's MachineConfigs (the watch runs as `changes` is polled).
    pub fn watch(client: Client) -> Self {
        let (store, changes) = cached(Api::<MachineConfig>::all(client), "MachineConfigs");
        MachineConfigCache {
            reader: MachineConfigReader::new(store),
            changes: changes.boxed(),
        }
    }
}

/// The process's one MachineConfig watch, shared by the config server (always) and the
/// controllers (each time this replica leads): the watch runs for the process's life, and each
/// [`SharedMachineConfigs::subscribe`] gets the same store with its own change stream.
#[derive(Clone)]
pub struct SharedMachineConfigs {
    /// The store and its readiness.
    pub reader: MachineConfigReader,
    changed: watch::Receiver<u64>,
}

impl SharedMachineConfigs {
    /// Starts the watch (a task polls it from now on).
    pub fn watch(client: Client) -> Self {
        let MachineConfigCache {
            reader,
            mut changes,
        } = MachineConfigCache::watch(client);
        let (tx, changed) = watch::channel(0u64);
        tokio::spawn(async move {
            while changes.next().await.is_some() {
                tx.send_modify(|n| *n = n.wrapping_add(1));
            }
        });
        SharedMachineConfigs { reader, changed }
    }

    /// The store, and a stream that yields after each change from now on.
    pub fn subscribe(&self) -> MachineConfigCache {
        let mut changed = self.changed.clone();
        changed.mark_unchanged();
        let changes = futures::stream::unfold(changed, |mut changed| async move {
            changed.changed().await.ok()?;
            Some(((), changed))
        });
        MachineConfigCache {
            reader: self.reader.clone(),
            changes: changes.boxed(),
        }
    }
}

/// A MachineConfig store that any number of tasks may wait on until it holds its first list.
///
/// kube's `Store::wait_until_ready` wakes only one of several tasks waiting at once (its
/// one-shot channel keeps the waker of the last poll): with the controller and the config server
/// both waiting on the same store, the controller sometimes never started. Here one task waits
/// on the store and tells every reader through a watch channel.
#[derive(Clone)]
pub struct MachineConfigReader {
    /// The cached MachineConfigs.
    pub store: Store<MachineConfig>,
    ready: watch::Receiver<bool>,
}

impl MachineConfigReader {
    /// Wraps `store`; needs a Tokio runtime (the one task that waits on it).
    pub fn new(store: Store<MachineConfig>) -> Self {
        let (ready_tx, ready) = watch::channel(false);
        let waited = store.clone();
        tokio::spawn(async move {
            if waited.wait_until_ready().await.is_ok() {
                let _ = ready_tx.send(true);
            }
        });
        MachineConfigReader { store, ready }
    }

    /// Waits until the store holds the first full list of MachineConfigs.
    pub async fn wait_until_ready(&self) -> Result<()> {
        let mut ready = self.ready.clone();
        ready
            .wait_for(|ready| *ready)
            .await
            .map(|_| ())
            .map_err(|_| anyhow!("the MachineConfig watch stopped before its first list"))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;

    use super::*;

    #[tokio::test]
    async fn every_reader_waiting_at_once_sees_the_store_ready() {
        let (store, mut writer) = reflector::store::<MachineConfig>();
        let reader = MachineConfigReader::new(store);
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let reader = reader.clone();
                tokio::spawn(async move { reader.wait_until_ready().await })
            })
            .collect();
        // all of them waiting before the first list ends
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(waiters.iter().all(|w| !w.is_finished()));
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitDone);
        for waiter in waiters {
            tokio::time::timeout(Duration::from_secs(10), waiter)
                .await
                .expect("a reader was never told the store is ready")
                .unwrap()
                .unwrap();
        }
    }

    #[tokio::test]
    async fn a_watch_gone_before_its_first_list_is_an_error() {
        let (store, writer) = reflector::store::<MachineConfig>();
        let reader = MachineConfigReader::new(store);
        drop(writer);
        let err = reader.wait_until_ready().await.unwrap_err();
        assert!(
            err.to_string().contains("stopped before its first list"),
            "{err}"
        );
    }
}
