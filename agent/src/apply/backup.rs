//! Backups of what a config replaces, so dropping the file from a later config puts the node
//! back: `orig/<path>.mcdorig` holds the file (or symlink) that was there before the config first
//! wrote the path, `noorig/<path>.mcdnoorig` is an empty stamp saying nothing was there.
//!
//! Unlike the MCD, which keeps an original only when rpm owns the file or `/usr/etc` has it (and
//! skips backups entirely where rpm is absent), every pre-existing file is kept: restoring an
//! administrator's file is safer than deleting it, and `--root` cannot ask rpm.

use std::path::{Path, PathBuf};

use machine_config::mco::paths::{NOORIG_DIR, ORIG_DIR};

use crate::rootfs::{DEFAULT_FILE_MODE, FileKind, Opened, Owner, Root, RootError};

/// Path of the backup of `path`.
pub fn orig_path(path: &Path) -> PathBuf {
    let mut p = Path::new(ORIG_DIR)
        .join(path.strip_prefix("/").unwrap_or(path))
        .into_os_string();
    p.push(".mcdorig");
    PathBuf::from(p)
}

/// Path of the "no original" stamp of `path`.
pub fn noorig_path(path: &Path) -> PathBuf {
    let mut p = Path::new(NOORIG_DIR)
        .join(path.strip_prefix("/").unwrap_or(path))
        .into_os_string();
    p.push(".mcdnoorig");
    PathBuf::from(p)
}

/// What [`record_original`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// A backup or stamp already existed (the path was managed before).
    AlreadyRecorded,
    /// The existing file or symlink was copied to `orig/`.
    BackedUp,
    /// Nothing was there: a `noorig` stamp was written.
    NoOriginal,
}

/// Before a config first writes `path`: keep what is there, or stamp that nothing was. Does
/// nothing when a backup or stamp already exists (the original is the first one seen).
/// The copy's contents are fsync'ed, its name and the stamp are not: call [`Root::sync`]
/// before replacing `path`, or before recording that the backup exists.
pub fn record_original(root: &Root, path: &Path) -> Result<Recorded, RootError> {
    let orig = orig_path(path);
    let noorig = noorig_path(path);
    if root.lstat(&noorig)?.is_some() || root.lstat(&orig)?.is_some() {
        return Ok(Recorded::AlreadyRecorded);
    }
    match root.lstat(path)? {
        None => {
            root.write_atomic_deferred(&noorig, b"", DEFAULT_FILE_MODE, Owner::ROOT)?;
            Ok(Recorded::NoOriginal)
        }
        Some(info) => {
            copy_node(root, path, &orig, info.kind, Durability::Deferred)?;
            tracing::info!(path = %path.display(), backup = %orig.display(), "kept the original file");
            Ok(Recorded::BackedUp)
        }
    }
}

/// What [`restore_or_remove`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Released {
    /// The original was put back.
    Restored,
    /// The path was removed (no original existed, or none was recorded).
    Removed,
    /// Left alone: no original and no stamp were recorded and the path is not a regular file
    /// or symlink the agent could have written (a FIFO, socket, device or directory).
    LeftAlone,
}

/// When a config stops managing `path`: put the original back, or remove the path.
pub fn restore_or_remove(root: &Root, path: &Path) -> Result<Released, RootError> {
    let orig = orig_path(path);
    let noorig = noorig_path(path);
    if root.lstat(&noorig)?.is_some() {
        root.remove_file(path)?;
        root.remove_file(&noorig)?;
        return Ok(Released::Removed);
    }
    if let Some(info) = root.lstat(&orig)? {
        copy_node(root, &orig, path, info.kind, Durability::Now)?;
        root.remove_file(&orig)?;
        return Ok(Released::Restored);
    }
    // Nothing recorded (a file an older MCD wrote without a stamp is removed, as the MCD
    // removes it): only what the agent could have written goes. A node the agent never wrote
    // (a FIFO, socket or device, which a write refuses) is never removed, so a rollback after
    // a failed write cannot delete what was there.
    match root.lstat(path)? {
        Some(info) if matches!(info.kind, FileKind::File | FileKind::Symlink) => {
            root.remove_file(path)?;
            Ok(Released::Removed)
        }
        Some(_) => {
            tracing::warn!(path = %path.display(), "left alone: no original was recorded and it is not a file the agent writes");
            Ok(Released::LeftAlone)
        }
        None => Ok(Released::Removed),
    }
}

/// Whether a copy is fsync'ed now or left to a later [`Root::sync`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Durability {
    Now,
    Deferred,
}

/// Copies a regular file (contents, mode, owner) or a symlink (target, owner) atomically.
fn copy_node(
    root: &Root,
    from: &Path,
    to: &Path,
    kind: FileKind,
    durability: Durability,
) -> Result<(), RootError> {
    match kind {
        FileKind::Symlink => {
            let target = root
                .read_link(from)?
                .ok_or_else(|| RootError::io("readlink", from, rustix::io::Errno::NOENT))?;
            let owner = root.lstat(from)?.map(|i| i.owner).unwrap_or(Owner::ROOT);
            root.symlink(to, &target, owner)
        }
        FileKind::File => match root.open_nofollow(from)? {
            Opened::File(mut f, info) => {
                // No buffer sized from st_size: a sparse file claims any size it likes.
                let mut buf = Vec::new();
                std::io::Read::read_to_end(&mut f, &mut buf)
                    .map_err(|e| RootError::io("read", from, e))?;
                match durability {
                    Durability::Now => root.write_atomic(to, &buf, info.permissions(), info.owner),
                    Durability::Deferred => {
                        root.write_atomic_deferred(to, &buf, info.permissions(), info.owner)
                    }
                }
            }
            Opened::NotRegular(_) => Err(RootError::io("copy", from, rustix::io::Errno::INVAL)),
        },
        FileKind::Dir => Err(RootError::io("copy", from, rustix::io::Errno::ISDIR)),
        FileKind::Other => Err(RootError::io("copy", from, rustix::io::Errno::INVAL)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};

    #[test]
    fn names() {
        assert_eq!(
            orig_path(Path::new("/etc/chrony.conf")),
            Path::new("/etc/machine-config-daemon/orig/etc/chrony.conf.mcdorig")
        );
        assert_eq!(
            noorig_path(Path::new("/etc/x")),
            Path::new("/etc/machine-config-daemon/noorig/etc/x.mcdnoorig")
        );
    }

    #[test]
    fn backup_then_restore_round_trips_file_and_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        fs::create_dir_all(r.join("etc")).unwrap();
        fs::write(r.join("etc/chrony.conf"), "vendor\n").unwrap();
        fs::set_permissions(r.join("etc/chrony.conf"), fs::Permissions::from_mode(0o640)).unwrap();
        std::os::unix::fs::chown(r.join("etc/chrony.conf"), Some(12), Some(34)).unwrap();
        symlink("/usr/share/zoneinfo/UTC", r.join("etc/localtime")).unwrap();
        let root = Root::open(r).unwrap();
        for p in ["/etc/chrony.conf", "/etc/localtime", "/etc/new.conf"] {
            let want = if p == "/etc/new.conf" {
                Recorded::NoOriginal
            } else {
                Recorded::BackedUp
            };
            assert_eq!(record_original(&root, Path::new(p)).unwrap(), want, "{p}");
            // The first original wins: recording again changes nothing.
            assert_eq!(
                record_original(&root, Path::new(p)).unwrap(),
                Recorded::AlreadyRecorded
            );
            root.write_atomic(Path::new(p), b"managed", 0o644, Owner::ROOT)
                .unwrap();
        }
        assert_eq!(
            fs::read(r.join("etc/machine-config-daemon/orig/etc/chrony.conf.mcdorig")).unwrap(),
            b"vendor\n"
        );
        assert!(
            r.join("etc/machine-config-daemon/noorig/etc/new.conf.mcdnoorig")
                .exists()
        );

        assert_eq!(
            restore_or_remove(&root, Path::new("/etc/chrony.conf")).unwrap(),
            Released::Restored
        );
        assert_eq!(
            restore_or_remove(&root, Path::new("/etc/localtime")).unwrap(),
            Released::Restored
        );
        assert_eq!(
            restore_or_remove(&root, Path::new("/etc/new.conf")).unwrap(),
            Released::Removed
        );
        let meta = fs::metadata(r.join("etc/chrony.conf")).unwrap();
        assert_eq!(fs::read(r.join("etc/chrony.conf")).unwrap(), b"vendor\n");
        assert_eq!(
            (meta.permissions().mode() & 0o7777, meta.uid(), meta.gid()),
            (0o640, 12, 34)
        );
        assert_eq!(
            fs::read_link(r.join("etc/localtime")).unwrap(),
            Path::new("/usr/share/zoneinfo/UTC")
        );
        assert!(!r.join("etc/new.conf").exists());
        assert!(
            !r.join("etc/machine-config-daemon/orig/etc/chrony.conf.mcdorig")
                .exists()
        );
        assert!(
            !r.join("etc/machine-config-daemon/noorig/etc/new.conf.mcdnoorig")
                .exists()
        );
        // A path never recorded is simply removed (a file Ignition wrote at first boot).
        fs::write(r.join("etc/unrecorded"), "x").unwrap();
        assert_eq!(
            restore_or_remove(&root, Path::new("/etc/unrecorded")).unwrap(),
            Released::Removed
        );
        assert!(!r.join("etc/unrecorded").exists());
    }
}
