//! The config drift monitor: inotify on the parent directories of every file, unit and drop-in
//! the current config manages. An event on one of those paths wakes the daemon, which validates
//! files and units against the current config (a plain touch changes neither contents nor mode,
//! so it does not count); drift makes the node Degraded with the MCD's message, and restoring
//! the file makes it Done again, without a reboot.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use futures::StreamExt;
use inotify::{Inotify, WatchDescriptor, WatchMask};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Events closer together than this are one wake-up.
const DEBOUNCE: Duration = Duration::from_millis(50);

/// A running monitor; stopped on drop.
pub struct DriftMonitor {
    task: JoinHandle<()>,
    /// The config it watches for.
    pub config: String,
    /// How many directories are watched.
    pub directories: usize,
}

impl Drop for DriftMonitor {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts watching `paths` (node paths of the managed files) under `root`; each burst of
/// changes to them sends the set of paths changed on `tx`.
pub fn start(
    root: &Path,
    config: &str,
    paths: &BTreeSet<String>,
    tx: mpsc::Sender<BTreeSet<String>>,
) -> Result<DriftMonitor> {
    let inotify = Inotify::init().context("initialising inotify")?;
    let mask = WatchMask::MODIFY
        | WatchMask::ATTRIB
        | WatchMask::CLOSE_WRITE
        | WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO;
    // Directory (host path) -> file names tracked in it, and their node paths.
    let mut tracked: BTreeMap<PathBuf, BTreeMap<OsString, String>> = BTreeMap::new();
    for p in paths {
        let node_path = Path::new(p);
        let (Some(dir), Some(name)) = (node_path.parent(), node_path.file_name()) else {
            continue;
        };
        let host_dir = root.join(dir.strip_prefix("/").unwrap_or(dir));
        tracked
            .entry(host_dir)
            .or_default()
            .insert(name.to_os_string(), p.clone());
    }
    let mut watches: BTreeMap<WatchDescriptor, BTreeMap<OsString, String>> = BTreeMap::new();
    let mut wd_dirs = 0;
    for (dir, names) in tracked {
        match inotify.watches().add(&dir, mask) {
            Ok(wd) => {
                wd_dirs += 1;
                watches.insert(wd, names);
            }
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot watch directory for drift")
            }
        }
    }
    let mut stream = inotify
        .into_event_stream(vec![0u8; 16 * 1024])
        .context("reading inotify events")?;
    let task = tokio::spawn(async move {
        while let Some(event) = stream.next().await {
            let Ok(event) = event else { continue };
            let Some(names) = watches.get(&event.wd) else {
                continue;
            };
            let Some(path) = event.name.as_ref().and_then(|n| names.get(n.as_os_str())) else {
                continue;
            };
            let mut changed = BTreeSet::from([path.clone()]);
            // Collapse a burst (write, chmod, rename..., of one file or several) into one
            // wake-up that names every path it touched.
            loop {
                match tokio::time::timeout(DEBOUNCE, stream.next()).await {
                    Ok(Some(Ok(e))) => {
                        if let Some(p) = watches
                            .get(&e.wd)
                            .and_then(|n| e.name.as_ref().and_then(|name| n.get(name.as_os_str())))
                        {
                            changed.insert(p.clone());
                        }
                    }
                    Ok(Some(Err(_))) => {}
                    Ok(None) | Err(_) => break,
                }
            }
            if tx.send(changed).await.is_err() {
                break;
            }
        }
    });
    tracing::info!(
        directories = wd_dirs,
        files = paths.len(),
        "Config Drift Monitor started"
    );
    Ok(DriftMonitor {
        task,
        config: config.to_string(),
        directories: wd_dirs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn changes_to_tracked_files_wake_the_daemon_and_others_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        std::fs::create_dir_all(r.join("etc/mco")).unwrap();
        std::fs::write(r.join("etc/mco/a.conf"), "a").unwrap();
        std::fs::write(r.join("etc/mco/other"), "o").unwrap();
        let (tx, mut rx) = mpsc::channel(4);
        let paths = BTreeSet::from(["/etc/mco/a.conf".to_string()]);
        let monitor = start(r, "rendered-a", &paths, tx).unwrap();
        assert_eq!(monitor.directories, 1);

        std::fs::write(r.join("etc/mco/other"), "changed").unwrap();
        assert!(
            tokio::time::timeout(Duration::from_millis(300), rx.recv())
                .await
                .is_err()
        );

        std::fs::write(r.join("etc/mco/a.conf"), "drifted").unwrap();
        let got = tokio::time::timeout(Duration::from_secs(2), rx.recv())
            .await
            .unwrap();
        assert_eq!(got, Some(BTreeSet::from(["/etc/mco/a.conf".to_string()])));
        drop(monitor);
    }

    #[tokio::test]
    async fn a_burst_over_several_files_names_each_of_them_once() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        std::fs::create_dir_all(r.join("etc/mco")).unwrap();
        std::fs::create_dir_all(r.join("etc/other")).unwrap();
        let paths = BTreeSet::from([
            "/etc/mco/a.conf".to_string(),
            "/etc/mco/b.conf".to_string(),
            "/etc/other/c.conf".to_string(),
        ]);
        for p in &paths {
            std::fs::write(r.join(p.trim_start_matches('/')), "x").unwrap();
        }
        let (tx, mut rx) = mpsc::channel(4);
        let monitor = start(r, "rendered-a", &paths, tx).unwrap();
        assert_eq!(monitor.directories, 2);
        // within one debounce window: one wake-up naming both
        std::fs::write(r.join("etc/mco/a.conf"), "drifted").unwrap();
        std::fs::write(r.join("etc/other/c.conf"), "drifted").unwrap();
        let got = tokio::time::timeout(Duration::from_secs(2), rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            got,
            BTreeSet::from([
                "/etc/mco/a.conf".to_string(),
                "/etc/other/c.conf".to_string()
            ])
        );
        drop(monitor);
    }
}
