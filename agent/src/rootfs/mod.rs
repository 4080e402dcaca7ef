//! Root-confined file system access: every path is resolved inside a root directory as if it were
//! `/`, and no symlink (absolute, `..`, on a parent or on the final component) makes a read or a
//! write land outside it. `--root DIR` and the tests use a temp dir; on a node the root is `/`.
//!
//! Paths given to [`Root`] are the paths configs talk about: absolute, e.g. `/etc/foo`.
//! Writes are atomic (temp file in the same directory, fsync, rename, fsync of the directory);
//! the temp files have names of their own (module `temp`), so that those a killed writer leaves are
//! found and removed.

mod dir_cache;
mod error;
mod labels;
mod resolve;
mod temp;

pub mod accounts;
pub mod shadow;

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use cap_std_ext::cap_std::fs::Dir;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

pub use dir_cache::ParentDirs;
pub use error::{RootError, go_error_text};
pub use labels::FileLabels;
use temp::create_with_temp_name;
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

    /// Opens the directory `path`, following symlinks inside the root. `None` if it is missing.
    pub fn open_dir(&self, path: &Path) -> Result<Option<Dir>, RootError> {
        check_path(path)?;
        match resolve::open_dir_in_root(self.fd.as_fd(), path, false, path) {
            Ok((fd, _)) => Ok(Some(Dir::from_std_file(File::from(fd)))),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `lstat` of `path` (a final symlink is not followed). `None` if it does not exist.
    pub fn lstat(&self, path: &Path) -> Result<Option<FileInfo>, RootError> {
        let Some((parent, name)) = self.parent_optional(path).map_err(|e| e.with_op("lstat"))?
        else {
            return Ok(None);
        };
        match rustix::fs::statat(&parent, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(FileInfo::from_stat(&st))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(RootError::io("lstat", path, e)),
        }
    }

    /// Opens `path` for reading if it is a regular file; a final symlink is not followed (it is
    /// reported as [`Opened::NotRegular`]). Errors carry Go-style `lstat`/`open` texts.
    pub fn open_nofollow(&self, path: &Path) -> Result<Opened, RootError> {
        let (parent, name) = self.parent_to_open(path)?;
        open_nofollow_in(parent.as_fd(), name, path)
    }

    /// The parent of `path` for [`Self::open_nofollow`]: failing to reach it is what `lstat`
    /// of the full path would report.
    fn parent_to_open<'p>(&self, path: &'p Path) -> Result<(OwnedFd, &'p OsStr), RootError> {
        self.parent_optional(path)
            .map_err(|e| e.with_op("lstat"))?
            .ok_or_else(|| RootError::io("lstat", path, Errno::NOENT))
    }

    /// Reads the regular file `path`, following symlinks (also a final one) inside the root.
    /// `None` if it does not exist (or is a dangling symlink).
    pub fn read(&self, path: &Path) -> Result<Option<Vec<u8>>, RootError> {
        let Some(target) = self.canonical_optional(path)? else {
            return Ok(None);
        };
        match self.open_nofollow(&target) {
            Ok(Opened::File(mut f, _)) => {
                // No buffer sized from st_size: a sparse file claims any size it likes.
                let mut buf = Vec::new();
                f.read_to_end(&mut buf)
                    .map_err(|e| RootError::io("read", path, e))?;
                Ok(Some(buf))
            }
            Ok(Opened::NotRegular(_)) => Err(RootError::io("read", path, Errno::ISDIR)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Opens the regular file `path` for reading (`None` if it does not exist), as
    /// [`Self::read`] finds it.
    pub fn open_file(&self, path: &Path) -> Result<Option<File>, RootError> {
        let Some(target) = self.canonical_optional(path)? else {
            return Ok(None);
        };
        match self.open_nofollow(&target) {
            Ok(Opened::File(f, _)) => Ok(Some(f)),
            Ok(Opened::NotRegular(_)) => Err(RootError::io("read", path, Errno::ISDIR)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Reads the regular file `path` as UTF-8 (lossy), following symlinks inside the root.
    pub fn read_to_string(&self, path: &Path) -> Result<Option<String>, RootError> {
        Ok(self.read(path)?.map(|b| {
            String::from_utf8(b)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
        }))
    }

    /// The path `path` resolves to inside the root, following every symlink (like `realpath`
    /// with the root as `/`). `None` if some component is missing.
    pub fn canonicalize(&self, path: &Path) -> Result<Option<PathBuf>, RootError> {
        self.canonical_optional(path)
    }

    /// The target of the symlink `path`; `None` if `path` does not exist, an error if it is not
    /// a symlink.
    pub fn read_link(&self, path: &Path) -> Result<Option<PathBuf>, RootError> {
        let Some((parent, name)) = self.parent_optional(path)? else {
            return Ok(None);
        };
        match rustix::fs::readlinkat(&parent, name, Vec::new()) {
            Ok(t) => Ok(Some(PathBuf::from(OsStr::from_bytes(t.as_bytes())))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(RootError::io("readlink", path, e)),
        }
    }

    /// Lists the directory `path` (following symlinks inside the root): names and kinds,
    /// sorted by name. `None` if it does not exist.
    pub fn read_dir(&self, path: &Path) -> Result<Option<Vec<(OsString, FileKind)>>, RootError> {
        let Some(dir) = self.open_dir(path)? else {
            return Ok(None);
        };
        let mut out = Vec::new();
        for entry in dir
            .entries()
            .map_err(|e| RootError::io("readdir", path, e))?
        {
            let entry = entry.map_err(|e| RootError::io("readdir", path, e))?;
            let ft = entry
                .file_type()
                .map_err(|e| RootError::io("readdir", path, e))?;
            let kind = if ft.is_symlink() {
                FileKind::Symlink
            } else if ft.is_dir() {
                FileKind::Dir
            } else if ft.is_file() {
                FileKind::File
            } else {
                FileKind::Other
            };
            out.push((entry.file_name(), kind));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Some(out))
    }

    /// Writes `contents` to `path` atomically with exactly `mode` and `owner`: a temp file in the
    /// same directory, fsync, rename over `path` (replacing whatever was there, a symlink
    /// included, never following it), fsync of the directory. Missing parents are created 0755.
    pub fn write_atomic(
        &self,
        path: &Path,
        contents: &[u8],
        mode: u32,
        owner: Owner,
    ) -> Result<(), RootError> {
        let mut bytes = |file: &mut File| file.write_all(contents).map(|()| !contents.is_empty());
        self.write_through_temp(path, &mut bytes, mode, owner, true)
    }

    /// Like [`Self::write_atomic`], but the directory is not fsync'ed: for bookkeeping files
    /// written in bulk, whose names are made durable together by one [`Self::sync`] before
    /// anything depends on them. The contents are fsync'ed before the rename all the same: a
    /// name that reaches the disk (a journal commit of the file system, another file's fsync)
    /// before that sync must never point at contents that did not (a power cut would leave an
    /// empty or short file under the final name).
    pub fn write_atomic_deferred(
        &self,
        path: &Path,
        contents: &[u8],
        mode: u32,
        owner: Owner,
    ) -> Result<(), RootError> {
        let mut bytes = |file: &mut File| file.write_all(contents).map(|()| !contents.is_empty());
        self.write_through_temp(path, &mut bytes, mode, owner, false)
    }

    /// Like [`Self::write_atomic`], the contents being `value` as compact JSON, serialized
    /// straight into the temp file: a large record (a MachineConfig) is never held a second
    /// time as one string.
    pub fn write_atomic_json<T: serde::Serialize + ?Sized>(
        &self,
        path: &Path,
        value: &T,
        mode: u32,
        owner: Owner,
    ) -> Result<(), RootError> {
        let mut json = |file: &mut File| -> std::io::Result<bool> {
            let mut out = std::io::BufWriter::with_capacity(64 * 1024, file);
            serde_json::to_writer(&mut out, value)?;
            out.flush()?;
            Ok(true)
        };
        self.write_through_temp(path, &mut json, mode, owner, true)
    }

    /// The contents go to an anonymous temp file where possible ([`temp::create_temp_file`]),
    /// which gets its temp name only to be renamed: a writer killed while writing leaves
    /// nothing. Failpoint `engine::temp-written` sits between the named temp file and the rename.
    fn write_through_temp(
        &self,
        path: &Path,
        contents: &mut dyn FnMut(&mut File) -> std::io::Result<bool>,
        mode: u32,
        owner: Owner,
        sync_dir: bool,
    ) -> Result<(), RootError> {
        let (parent, name) = self.parent(path, true)?;
        let (fd, mut tmp) = temp::create_temp_file(&parent, path, name)?;
        let mut file = File::from(fd);
        let mut write = || -> Result<(), RootError> {
            let io = |e: std::io::Error| RootError::io("write", path, e);
            rustix::fs::fchown(&file, Some(uid(owner.uid)), Some(gid(owner.gid)))
                .map_err(|e| io(e.into()))?;
            rustix::fs::fchmod(&file, Mode::from_raw_mode(mode)).map_err(|e| io(e.into()))?;
            if let Some(labels) = &self.labels {
                let mode = rustix::fs::FileType::RegularFile.as_raw_mode() | mode;
                labels.label(path, mode, file.as_fd()).map_err(|message| {
                    RootError::io("label", path, std::io::Error::other(message))
                })?;
            }
            let written = contents(&mut file).map_err(io)?;
            // An empty file has no data to lose: its inode goes with the directory entry.
            if sync_dir || written {
                file.sync_all().map_err(io)?;
            }
            let named = match &tmp {
                Some(named) => named.clone(),
                None => tmp
                    .insert(temp::name_temp_file(&parent, &file, path, name)?)
                    .clone(),
            };
            crate::failpoints::failpoint_at("engine::temp-written", path)
                .map_err(|e| io(std::io::Error::other(format!("{e:#}"))))?;
            rustix::fs::renameat(&parent, &named, &parent, name).map_err(|e| io(e.into()))?;
            if sync_dir {
                rustix::fs::fsync(&parent).map_err(|e| io(e.into()))?;
            }
            Ok(())
        };
        let result = write();
        if let (Err(_), Some(named)) = (&result, &tmp) {
            let _ = rustix::fs::unlinkat(&parent, named, AtFlags::empty());
        }
        result
    }

    /// Flushes everything written to the root's file system (`syncfs`).
    pub fn sync(&self) -> Result<(), RootError> {
        rustix::fs::syncfs(&self.fd).map_err(|e| RootError::io("syncfs", &self.path, e))
    }

    /// Creates the directory `path` (and missing parents, 0755) and sets its exact `mode` and
    /// `owner`. An existing directory gets `mode` and `owner` too; anything else there is an error.
    pub fn create_dir(&self, path: &Path, mode: u32, owner: Owner) -> Result<(), RootError> {
        let (parent, name) = self.parent(path, true)?;
        match rustix::fs::mkdirat(&parent, name, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(RootError::io("mkdir", path, e)),
        }
        let fd = rustix::fs::openat(
            &parent,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| RootError::io("open", path, e))?;
        rustix::fs::fchown(&fd, Some(uid(owner.uid)), Some(gid(owner.gid)))
            .map_err(|e| RootError::io("chown", path, e))?;
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))
            .map_err(|e| RootError::io("chmod", path, e))?;
        rustix::fs::fsync(&parent).map_err(|e| RootError::io("fsync", path, e))
    }

    /// Makes `path` a symlink to `target` (kept verbatim), atomically replacing whatever file or
    /// link was there, and sets the link's owner.
    pub fn symlink(&self, path: &Path, target: &Path, owner: Owner) -> Result<(), RootError> {
        let (parent, name) = self.parent(path, true)?;
        let tmp = create_with_temp_name(path, name, |tmp| {
            rustix::fs::symlinkat(target, &parent, tmp)
        })?;
        rustix::fs::chownat(
            &parent,
            &tmp,
            Some(uid(owner.uid)),
            Some(gid(owner.gid)),
            AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(|e| RootError::io("lchown", path, e))
        .and_then(|()| rename_into_place(&parent, &tmp, name, path))
        .inspect_err(|_| {
            let _ = rustix::fs::unlinkat(&parent, &tmp, AtFlags::empty());
        })
    }

    /// Makes `path` a hard link to the existing file `target` (a path inside the root; a final
    /// symlink in `target` is not followed), atomically replacing what was at `path`.
    pub fn hard_link(&self, path: &Path, target: &Path) -> Result<(), RootError> {
        let (tparent, tname) = self
            .parent_optional(target)?
            .ok_or_else(|| RootError::io("link", target, Errno::NOENT))?;
        let (parent, name) = self.parent(path, true)?;
        let tmp = create_with_temp_name(path, name, |tmp| {
            rustix::fs::linkat(&tparent, tname, &parent, tmp, AtFlags::empty())
        })?;
        rename_into_place(&parent, &tmp, name, path).inspect_err(|_| {
            let _ = rustix::fs::unlinkat(&parent, &tmp, AtFlags::empty());
        })?;
        // rename(2) of two links to the same inode does nothing and leaves the temp name.
        match rustix::fs::unlinkat(&parent, &tmp, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(RootError::io("unlink", path, e)),
        }
    }

    /// Removes the file or symlink `path` (never a directory). `false` if it did not exist.
    pub fn remove_file(&self, path: &Path) -> Result<bool, RootError> {
        let Some((parent, name)) = self.parent_optional(path)? else {
            return Ok(false);
        };
        match rustix::fs::unlinkat(&parent, name, AtFlags::empty()) {
            Ok(()) => {
                rustix::fs::fsync(&parent).map_err(|e| RootError::io("fsync", path, e))?;
                Ok(true)
            }
            Err(Errno::NOENT) => Ok(false),
            Err(e) => Err(RootError::io("unlink", path, e)),
        }
    }

    /// Removes the directory `path` if it is empty (the kernel decides: no race with a writer).
    /// `false` if it did not exist or was not empty.
    pub fn remove_empty_dir(&self, path: &Path) -> Result<bool, RootError> {
        let Some((parent, name)) = self.parent_optional(path)? else {
            return Ok(false);
        };
        match rustix::fs::unlinkat(&parent, name, AtFlags::REMOVEDIR) {
            Ok(()) => {
                rustix::fs::fsync(&parent).map_err(|e| RootError::io("fsync", path, e))?;
                Ok(true)
            }
            Err(Errno::NOENT | Errno::NOTEMPTY | Errno::EXIST) => Ok(false),
            Err(e) => Err(RootError::io("rmdir", path, e)),
        }
    }

    /// Sets the owner of `path` (not following a final symlink).
    pub fn set_owner(&self, path: &Path, owner: Owner) -> Result<(), RootError> {
        let (parent, name) = self.parent(path, false)?;
        rustix::fs::chownat(
            &parent,
            name,
            Some(uid(owner.uid)),
            Some(gid(owner.gid)),
            AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(|e| RootError::io("chown", path, e))
    }

    /// Sets the permission bits of `path` (which must not be a symlink).
    pub fn set_mode(&self, path: &Path, mode: u32) -> Result<(), RootError> {
        let (parent, name) = self.parent(path, false)?;
        let fd = rustix::fs::openat(
            &parent,
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| RootError::io("open", path, e))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| RootError::io("stat", path, e))?;
        if FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
            return Err(RootError::io("chmod", path, Errno::LOOP));
        }
        // O_PATH descriptors cannot fchmod; the name is re-resolved without following links.
        rustix::fs::chmodat(&parent, name, Mode::from_raw_mode(mode), AtFlags::empty())
            .map_err(|e| RootError::io("chmod", path, e))
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

/// [`Root::open_nofollow`] of `name` in the directory `parent` (`path` names it in errors).
fn open_nofollow_in(
    parent: std::os::fd::BorrowedFd<'_>,
    name: &OsStr,
    path: &Path,
) -> Result<Opened, RootError> {
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    match rustix::fs::openat(parent, name, flags, Mode::empty()) {
        Ok(fd) => {
            let st = rustix::fs::fstat(&fd).map_err(|e| RootError::io("lstat", path, e))?;
            let info = FileInfo::from_stat(&st);
            if info.kind == FileKind::File {
                Ok(Opened::File(File::from(fd), info))
            } else {
                Ok(Opened::NotRegular(info))
            }
        }
        Err(Errno::LOOP) => {
            let st = rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|e| RootError::io("lstat", path, e))?;
            Ok(Opened::NotRegular(FileInfo::from_stat(&st)))
        }
        Err(Errno::NOENT) => Err(RootError::io("lstat", path, Errno::NOENT)),
        Err(e) => Err(RootError::io("open", path, e)),
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

fn rename_into_place(
    parent: &OwnedFd,
    tmp: &OsStr,
    name: &OsStr,
    path: &Path,
) -> Result<(), RootError> {
    rustix::fs::renameat(parent, tmp, parent, name)
        .map_err(|e| RootError::io("rename", path, e))?;
    rustix::fs::fsync(parent).map_err(|e| RootError::io("fsync", path, e))
}

fn uid(id: u32) -> rustix::fs::Uid {
    rustix::fs::Uid::from_raw(id)
}

fn gid(id: u32) -> rustix::fs::Gid {
    rustix::fs::Gid::from_raw(id)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod symlink_trust_tests;
