//! Root-confined file system access: every path is resolved inside a root directory as if it were
//! `/`, and no symlink (absolute, `..`, on a parent or on the final component) makes a read or a
//! write land outside it. `--root DIR` and the tests use a temp dir; on a node the root is `/`.
//!
//! Paths given to [`Root`] are the paths configs talk about: absolute, e.g. `/etc/foo`.
//! Writes are atomic (temp file in the same directory, fsync, rename, fsync of the directory);
//! the temp files have names of their own (module `temp`), so that those a killed writer leaves are
//! found and removed.
//!
//! The [`Root`] type, the facts it reports ([`FileInfo`], [`Opened`]) and how a path is resolved
//! to its parent directory live here; what a root does with a resolved path is split by whether
//! it only looks (`read`: stat, open, read, list) or changes the tree (`write`: atomic writes,
//! directories, links, removals, owner and mode).

mod dir_cache;
mod error;
mod labels;
mod read;
mod resolve;
mod temp;
mod write;

pub mod accounts;
pub mod shadow;

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

pub use dir_cache::ParentDirs;
pub use error::{RootError, go_error_text};
pub use labels::FileLabels;
pub use temp::temp_writer_pid;

/// Mode of files written without an explicit mode (Ignition's and the MCD's default).
pub const DEFAULT_FILE_MODE: u32 = 0o644;

/// Linux's limit on symlinks followed in one resolution.
const MAX_SYMLINK_HOPS: usize = 40;

/// Numeric owner of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Owner {
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
}

impl Owner {
    /// `root:root`, the default owner of everything the config writes.
    pub const ROOT: Owner = Owner { uid: 0, gid: 0 };
}

/// What kind of object a path names (without following a final symlink).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// Regular file.
    File,
    /// Directory.
    Dir,
    /// Symbolic link.
    Symlink,
    /// Device, FIFO or socket.
    Other,
}

/// The `lstat` facts the agent uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileInfo {
    /// Kind of object.
    pub kind: FileKind,
    /// Full `st_mode` (type and permission bits).
    pub mode: u32,
    /// Owner.
    pub owner: Owner,
    /// Size in bytes.
    pub size: u64,
    /// Device and inode, to tell hard links apart.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Number of hard links.
    pub nlink: u64,
}

impl FileInfo {
    /// Permission bits (including setuid/setgid/sticky).
    pub fn permissions(&self) -> u32 {
        self.mode & 0o7777
    }

    fn from_stat(st: &rustix::fs::Stat) -> Self {
        let kind = match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => FileKind::File,
            FileType::Directory => FileKind::Dir,
            FileType::Symlink => FileKind::Symlink,
            _ => FileKind::Other,
        };
        FileInfo {
            kind,
            mode: st.st_mode,
            owner: Owner {
                uid: st.st_uid,
                gid: st.st_gid,
            },
            size: u64::try_from(st.st_size).unwrap_or(0),
            dev: st.st_dev,
            ino: st.st_ino,
            #[allow(clippy::useless_conversion)]
            nlink: u64::from(st.st_nlink),
        }
    }
}

/// A regular file opened without following a final symlink, or what was found instead.
#[derive(Debug)]
pub enum Opened {
    /// A regular file, open for reading.
    File(File, FileInfo),
    /// Something other than a regular file (symlink, directory, device...), not opened.
    NotRegular(FileInfo),
}

/// A directory treated as `/` for every path operation.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
    path: PathBuf,
    /// Labels new files get before their rename (none: they keep what they inherit).
    labels: Option<std::sync::Arc<dyn FileLabels>>,
}

impl Root {
    /// Opens the root directory (a host path).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, RootError> {
        let path = path.as_ref();
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| RootError::io("open", path, e))?;
        Ok(Root {
            fd,
            path: path.to_path_buf(),
            labels: None,
        })
    }

    /// Another handle on the same root (the directory descriptor duplicated), with the same
    /// labels: for a task that writes beside the engine (the certificate writer).
    pub fn try_clone(&self) -> Result<Self, RootError> {
        let fd = rustix::io::fcntl_dupfd_cloexec(&self.fd, 0)
            .map_err(|e| RootError::io("dup", &self.path, e))?;
        Ok(Root {
            fd,
            path: self.path.clone(),
            labels: self.labels.clone(),
        })
    }

    /// Every file this root writes from now on is labelled by `labels` before its rename.
    pub fn with_labels(mut self, labels: std::sync::Arc<dyn FileLabels>) -> Self {
        self.labels = Some(labels);
        self
    }

    /// The host path of the root, as given to [`Root::open`].
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The host path of `path` inside the root, for messages only (never opened).
    pub fn host_path(&self, path: &Path) -> PathBuf {
        self.path.join(path.strip_prefix("/").unwrap_or(path))
    }

    /// `error` (from this root) naming host paths: see [`RootError::under`].
    pub fn on_host(&self, error: RootError) -> RootError {
        error.under(&self.path)
    }

    /// The parent directory of `path` (opened inside the root) and the final name.
    fn parent<'p>(&self, path: &'p Path, create: bool) -> Result<(OwnedFd, &'p OsStr), RootError> {
        let (dir, name) = split(path)?;
        let (fd, _) = resolve::open_dir_in_root(self.fd.as_fd(), dir, create, path)?;
        Ok((fd, name))
    }

    /// Like [`Self::parent`] without creating; `None` when a parent is missing.
    fn parent_optional<'p>(
        &self,
        path: &'p Path,
    ) -> Result<Option<(OwnedFd, &'p OsStr)>, RootError> {
        match self.parent(path, false) {
            Ok(p) => Ok(Some(p)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The parent of `path` for [`Self::open_nofollow`]: failing to reach it is what `lstat`
    /// of the full path would report.
    fn parent_to_open<'p>(&self, path: &'p Path) -> Result<(OwnedFd, &'p OsStr), RootError> {
        self.parent_optional(path)
            .map_err(|e| e.with_op("lstat"))?
            .ok_or_else(|| RootError::io("lstat", path, Errno::NOENT))
    }

    /// Resolves every symlink of `path`, the final one included, inside the root.
    fn canonical_optional(&self, path: &Path) -> Result<Option<PathBuf>, RootError> {
        let mut current = path.to_path_buf();
        for _ in 0..=MAX_SYMLINK_HOPS {
            let (dir, name) = split(&current)?;
            let (parent, parent_path) =
                match resolve::open_dir_in_root(self.fd.as_fd(), dir, false, path) {
                    Ok(found) => found,
                    Err(e) if e.is_not_found() => return Ok(None),
                    Err(e) => return Err(e),
                };
            let name = name.to_os_string();
            let link = || parent_path.join(&name);
            match resolve::read_link_to_follow(parent.as_fd(), &name, link, path) {
                Ok(Some(target)) => current = normalize(&parent_path.join(target)),
                Ok(None) => return Ok(Some(parent_path.join(name))),
                Err(e) if e.is_not_found() => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        Err(RootError::io("open", path, Errno::LOOP))
    }
}

/// Lexically normalizes an absolute path (`..` stops at `/`).
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// Checks that `path` is absolute and has no `..`.
fn check_path(path: &Path) -> Result<(), RootError> {
    if !path.has_root() {
        return Err(RootError::InvalidPath {
            path: path.to_path_buf(),
            reason: "not absolute",
        });
    }
    if path.components().any(|c| c == Component::ParentDir) {
        return Err(RootError::InvalidPath {
            path: path.to_path_buf(),
            reason: "contains ..",
        });
    }
    Ok(())
}

/// Splits an absolute path into its parent and final name.
fn split(path: &Path) -> Result<(&Path, &OsStr), RootError> {
    check_path(path)?;
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => Ok((parent, name)),
        _ => Err(RootError::InvalidPath {
            path: path.to_path_buf(),
            reason: "names no file",
        }),
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod symlink_trust_tests;
