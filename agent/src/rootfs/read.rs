//! Looking inside the root without changing it: `lstat`, opening a regular file without
//! following a final symlink, reading files and symlinks, listing directories.
//!
//! Every method resolves its path with the parent walk of the module root (`parent_optional`,
//! `canonical_optional`) and then acts on one name in the parent it reached; this module only
//! adds what a read does with that name, so it stands apart from the code that changes the tree.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use cap_std_ext::cap_std::fs::Dir;
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

use super::{FileInfo, FileKind, Opened, Root, RootError, check_path, resolve};

impl Root {
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
}

/// [`Root::open_nofollow`] of `name` in the directory `parent` (`path` names it in errors).
pub(super) fn open_nofollow_in(
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
