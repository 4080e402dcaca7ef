//! Temp files that a write killed between its temp file and the rename (SIGKILL, a power cut)
//! left behind. Writes are atomic, so such a file never replaces anything, but it would stay
//! forever beside the file it was meant to become (`.<name>.mco-tmp-<pid>-<n>`, see
//! [`crate::rootfs::temp_writer_pid`]). At start-up the agent removes the ones in the directories
//! it writes in ([`managed_dirs`]); nothing of another name, and nothing elsewhere.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use machine_config::mco::paths::{CURRENT_CONFIG, NODE_ANNOTATIONS_BAK};
use machine_config::{Config, MachineConfig};

use super::backups::managed_paths;
use super::record::{self, BOOT_ROLLBACK_RECORD, UPDATE_RECORD};
use super::report::STATUS_FILE;
use crate::apply::authorized_keys_path;
use crate::apply::backup::{noorig_path, orig_path};
use crate::input;
use crate::rootfs::accounts::Accounts;
use crate::rootfs::shadow::SHADOW;
use crate::rootfs::{FileKind, Root, RootError};
use crate::units::SYSTEM_UNIT_DIR;

/// Home of `core` when the user database does not say (as apply assumes).
const CORE_HOME: &str = "/home/core";

/// Suffixes of the unit directory's subdirectories that hold enablement links.
const LINK_DIR_SUFFIXES: &[&str] = &[".wants", ".requires", ".upholds"];

/// The directories the agent writes in: those of every path that the current config, and the
/// configs of a recorded update, write (files, links, units, drop-ins) and of their `orig` and
/// `noorig` backups; the unit directory and its enablement link directories; core's SSH key
/// directory and that of the user database; the agent's own state directories. Configs that
/// cannot be read add nothing (start-up reports them elsewhere).
pub fn managed_dirs(root: &Root) -> BTreeSet<PathBuf> {
    let mut configs: Vec<Config> = Vec::new();
    if let Ok(Some(current)) = input::read_current(root) {
        configs.push(current.ignition);
    }
    if let Ok(Some(rec)) = record::load(root) {
        configs.extend(
            [&rec.current, &rec.desired]
                .into_iter()
                .filter_map(ignition_of),
        );
    }
    let mut paths: BTreeSet<PathBuf> = BTreeSet::new();
    for config in &configs {
        let links = config.storage.links.iter().map(|l| l.path.clone());
        for path in managed_paths(config).into_iter().chain(links) {
            let path = PathBuf::from(path);
            paths.insert(orig_path(&path));
            paths.insert(noorig_path(&path));
            paths.insert(path);
        }
    }
    let home = Accounts::load(root)
        .ok()
        .and_then(|a| a.user("core").map(|u| u.home.clone()))
        .filter(|h| h.starts_with('/'))
        .unwrap_or_else(|| CORE_HOME.to_string());
    paths.insert(authorized_keys_path(Path::new(&home)));
    for path in [
        SHADOW,
        CURRENT_CONFIG,
        UPDATE_RECORD,
        BOOT_ROLLBACK_RECORD,
        NODE_ANNOTATIONS_BAK,
        STATUS_FILE,
    ] {
        paths.insert(PathBuf::from(path));
    }
    let mut dirs: BTreeSet<PathBuf> = paths
        .iter()
        .filter_map(|p| p.parent().map(Path::to_path_buf))
        .collect();
    dirs.insert(PathBuf::from(SYSTEM_UNIT_DIR));
    if let Ok(Some(entries)) = root.read_dir(Path::new(SYSTEM_UNIT_DIR)) {
        for (name, kind) in entries {
            let is_link_dir = name
                .to_str()
                .is_some_and(|n| LINK_DIR_SUFFIXES.iter().any(|s| n.ends_with(s)));
            if kind == FileKind::Dir && is_link_dir {
                dirs.insert(Path::new(SYSTEM_UNIT_DIR).join(name));
            }
        }
    }
    dirs
}

fn ignition_of(mc: &MachineConfig) -> Option<Config> {
    mc.ignition().ok()
}

/// Removes the stale temp files in [`managed_dirs`], logging each; a directory that cannot be
/// read is logged and skipped (cleaning up never stops the agent). Returns the paths removed.
pub fn remove_stale_temp_files(root: &Root) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for dir in managed_dirs(root) {
        match root.remove_stale_temp_files(&dir) {
            Ok(found) => removed.extend(found),
            // Behind a link the agent does not follow it never writes either, so no temp file
            // of its own can be there; the write that needs the directory reports the link.
            Err(e @ RootError::UntrustedSymlink { .. }) => {
                tracing::debug!(dir = %dir.display(), error = %e, "not looking for stale temp files")
            }
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot look for stale temp files")
            }
        }
    }
    for path in &removed {
        let name = path.file_name().unwrap_or(OsStr::new(""));
        tracing::info!(path = %path.display(), writer_pid = ?crate::rootfs::temp_writer_pid(name), "removed a temp file left by an interrupted write");
    }
    removed
}
