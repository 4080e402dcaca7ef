//! Standalone: the semaphores in a state file, so that a restart of the companion does not
//! forget who holds a slot (a node rebooting meanwhile still gives its slot back after).
//! Every change is written (temp file, fsync, rename, fsync of the directory) before it is
//! answered; a failed write answers 500 and changes nothing.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use super::semaphore;
use super::{LockError, LockStore};

/// The state file's contents.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// Group → the ids holding its slots, in the order they took them.
    pub groups: BTreeMap<String, Vec<String>>,
}

/// Semaphores kept in a file.
pub struct FileStore {
    path: PathBuf,
    state: Mutex<State>,
}

impl FileStore {
    /// Opens (or, when missing, starts) the state file at `path`; its directory must exist.
    pub fn open(path: &Path) -> Result<Self> {
        let state = match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .with_context(|| format!("{}: not a FleetLock state file", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => State::default(),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let dir = parent(path);
        anyhow::ensure!(
            dir.is_dir(),
            "the FleetLock state file's directory {} does not exist",
            dir.display()
        );
        Ok(FileStore {
            path: path.to_path_buf(),
            state: Mutex::new(state),
        })
    }

    /// What is held now.
    pub async fn state(&self) -> State {
        self.state.lock().await.clone()
    }

    /// Applies `change` to `group`'s holders; writes the file when they changed.
    async fn change<T>(
        &self,
        group: &str,
        change: impl FnOnce(&mut Vec<String>) -> Result<(bool, T), LockError>,
    ) -> Result<T, LockError> {
        let mut state = self.state.lock().await;
        let mut next = state.clone();
        let holders = next.groups.entry(group.to_string()).or_default();
        let (changed, out) = change(holders)?;
        if holders.is_empty() {
            next.groups.remove(group);
        }
        if changed {
            write_atomically(&self.path, &next)
                .map_err(|e| LockError::Backend(format!("{e:#}")))?;
            *state = next;
        }
        Ok(out)
    }
}

#[async_trait]
impl LockStore for FileStore {
    async fn lock(&self, group: &str, id: &str, slots: u32) -> Result<(), LockError> {
        self.change(group, |holders| {
            semaphore::lock(holders, id, slots)
                .map(|changed| (changed, ()))
                .map_err(LockError::Full)
        })
        .await
    }

    async fn unlock(&self, group: &str, id: &str) -> Result<(), LockError> {
        self.change(group, |holders| Ok((semaphore::unlock(holders, id), ())))
            .await
    }

    fn describe(&self) -> String {
        format!("state file {}", self.path.display())
    }
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn write_atomically(path: &Path, state: &State) -> Result<()> {
    let dir = parent(path);
    let tmp = dir.join(format!(
        ".{}.tmp",
        path.file_name().unwrap_or_default().to_string_lossy()
    ));
    let mut file =
        std::fs::File::create(&tmp).with_context(|| format!("writing {}", tmp.display()))?;
    let mut bytes = serde_json::to_vec_pretty(state)?;
    bytes.push(b'\n');
    file.write_all(&bytes)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("replacing {}", path.display()))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing {}", dir.display()))?;
    Ok(())
}
