//! Keeping `orig`/`noorig` backups right across interrupted and repeated applies.
//!
//! `apply` keeps the original of a path the first time a config writes it, and a release (the
//! config drops the path) puts the original back and deletes the backup. A release leaves no
//! trace, so running the same apply again after a crash would see a path without a backup and
//! delete it, original included; and a rollback after an apply that failed part way would
//! delete originals of paths the apply never reached. Two rules prevent both:
//!
//! 1. When an update starts, every path of the desired config that the current config does
//!    not manage gets its backup recorded *before* anything is written (the path still holds
//!    the original, or nothing). Those paths, and every path of either config that already had
//!    a backup, are listed in the update record ([`UpdateRecord::stamped`]).
//! 2. Before every apply of that update (the first, a rollback, a repeated rollback), each
//!    listed path gets `record_original` again. A backup that is still there is left alone; a
//!    backup that a release consumed is re-created from what the release put back (the
//!    original, or nothing), which is exactly what it held. A path is only ever written after
//!    its backup exists, so a backup is never taken from the config's own contents.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{Context, Result};
use machine_config::Config;

use super::record::UpdateRecord;
use crate::apply::backup::{noorig_path, orig_path, record_original};
use crate::rootfs::{FileKind, Root};
use crate::units::SYSTEM_UNIT_DIR;

/// Paths a config writes: files, unit files (with contents, or masked) and drop-ins with
/// contents.
pub fn managed_paths(config: &Config) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = config
        .storage
        .files
        .iter()
        .map(|f| f.path.clone())
        .collect();
    for unit in &config.systemd.units {
        if unit.is_masked() || unit.contents.as_deref().is_some_and(|c| !c.is_empty()) {
            out.insert(format!("{SYSTEM_UNIT_DIR}/{}", unit.name));
        }
        for dropin in &unit.dropins {
            if dropin.contents.as_deref().is_some_and(|c| !c.is_empty()) {
                out.insert(format!("{SYSTEM_UNIT_DIR}/{}.d/{}", unit.name, dropin.name));
            }
        }
    }
    out
}

fn has_backup(root: &Root, path: &Path) -> Result<bool> {
    Ok(root.lstat(&orig_path(path))?.is_some() || root.lstat(&noorig_path(path))?.is_some())
}

/// Whether a backup can be taken of what is at `path` (nothing, a file or a symlink); anything
/// else is refused by apply itself with a clearer message.
fn backup_possible(root: &Root, path: &Path) -> Result<bool> {
    Ok(match root.lstat(path) {
        Ok(None) => true,
        Ok(Some(info)) => matches!(info.kind, FileKind::File | FileKind::Symlink),
        // A parent that is not a directory: apply refuses the path.
        Err(_) => false,
    })
}

/// Rule 1: records the backups of the desired-only paths and fills `record.stamped`.
pub fn prepare(
    root: &Root,
    record: &mut UpdateRecord,
    current: &Config,
    desired: &Config,
) -> Result<()> {
    let current_paths = managed_paths(current);
    let desired_paths = managed_paths(desired);
    let mut stamped = BTreeSet::new();
    for p in current_paths.union(&desired_paths) {
        let path = Path::new(p);
        if has_backup(root, path)? {
            stamped.insert(p.clone());
        } else if !current_paths.contains(p) && backup_possible(root, path)? {
            record_original(root, path).with_context(|| format!("keeping the original of {p}"))?;
            stamped.insert(p.clone());
        }
    }
    record.stamped = stamped.into_iter().collect();
    // The record about to be stored says these backups exist: they must be on disk first.
    root.sync().context("syncing the backups")?;
    Ok(())
}

/// Rule 2: re-establishes the backup of every listed path before an apply.
pub fn restore_stamps(root: &Root, record: &UpdateRecord) -> Result<()> {
    for p in &record.stamped {
        let path = Path::new(p);
        if backup_possible(root, path)? {
            record_original(root, path)
                .with_context(|| format!("re-establishing the backup of {p}"))?;
        }
    }
    Ok(())
}
