//! Changing the tree under the root: atomic writes of files (plain, deferred, JSON), `syncfs`,
//! directories, symlinks and hard links, removals, owner and mode.
//!
//! Every change lands atomically or not at all: a file or link is made under a temp name of its
//! own (module `temp`) and renamed over the final name, and the directory is fsync'ed before the
//! call returns (`docs/power-loss.md` lists which fsync guards what). Kept apart from the reads,
//! which never create anything.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::temp::{self, create_with_temp_name};
use super::{Owner, Root, RootError};

impl Root {
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
