//! Path resolution inside a root directory, as if the root were `/`.
//!
//! Every component is opened relative to the directory reached so far, never following a symlink
//! implicitly (`O_NOFOLLOW`). A symlink met on the way is read and its target spliced into the
//! remaining components: an absolute target restarts from the root, `..` never climbs above it.
//! So no path, however its symlinks are arranged, reaches a directory outside the root: the same
//! guarantee the kernel's `RESOLVE_IN_ROOT` gives, plus the ability to create missing directories
//! (including a dangling symlink's target, e.g. `home -> var/home` on a fresh ostree root).

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use super::RootError;

/// Linux's limit on symlinks followed in one resolution.
const MAX_SYMLINK_HOPS: usize = 40;

/// Mode of directories created on the way to a path (what Ignition and the MCD use).
pub const DEFAULT_DIR_MODE: u32 = 0o755;

/// One step of a path still to walk.
enum Step {
    Name(OsString),
    Up,
}

fn steps_of(path: &Path) -> impl Iterator<Item = Step> + '_ {
    path.components().filter_map(|c| match c {
        Component::Normal(n) => Some(Step::Name(n.to_os_string())),
        Component::ParentDir => Some(Step::Up),
        Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
    })
}

/// Opens the directory `path` (inside the root whose descriptor is `root`), resolving symlinks
/// within the root. With `create`, missing directories are made with mode 0755 (owned by the
/// caller's uid/gid, root on a node). `display` is the path named in errors.
/// Returns the directory and its canonical path inside the root (no symlinks, no `..`).
pub(crate) fn open_dir_in_root(
    root: BorrowedFd<'_>,
    path: &Path,
    create: bool,
    display: &Path,
) -> Result<(OwnedFd, PathBuf), RootError> {
    // Directories from just below the root down to the current one; empty means "at the root".
    let mut below: Vec<OwnedFd> = Vec::new();
    // Their names, in step with `below`.
    let mut names: Vec<OsString> = Vec::new();
    let mut pending: VecDeque<Step> = steps_of(path).collect();
    let mut hops = 0usize;
    while let Some(step) = pending.pop_front() {
        let name = match step {
            Step::Up => {
                below.pop();
                names.pop();
                continue;
            }
            Step::Name(name) => name,
        };
        let current = below.last().map(|fd| fd.as_fd()).unwrap_or(root);
        match open_subdir(current, &name) {
            Ok(fd) => {
                below.push(fd);
                names.push(name);
            }
            Err(Errno::NOENT) if create => {
                match rustix::fs::mkdirat(
                    current,
                    name.as_os_str(),
                    Mode::from_raw_mode(DEFAULT_DIR_MODE),
                ) {
                    // The new entry is durable before anything is written below it, so that
                    // what a later fsync makes durable there is reachable after a power cut.
                    Ok(()) => rustix::fs::fsync(current)
                        .map_err(|e| RootError::io("fsync", display, e))?,
                    // Lost a race with another creator: take what is there now.
                    Err(Errno::EXIST) => {}
                    Err(e) => return Err(RootError::io("mkdir", display, e)),
                }
                let fd =
                    open_subdir(current, &name).map_err(|e| RootError::io("open", display, e))?;
                // mkdir honours the umask; the documented mode is exact.
                rustix::fs::fchmod(&fd, Mode::from_raw_mode(DEFAULT_DIR_MODE))
                    .map_err(|e| RootError::io("chmod", display, e))?;
                below.push(fd);
                names.push(name);
            }
            Err(Errno::LOOP) | Err(Errno::NOTDIR) => {
                match rustix::fs::readlinkat(current, name.as_os_str(), Vec::new()) {
                    Ok(target) => {
                        hops += 1;
                        if hops > MAX_SYMLINK_HOPS {
                            return Err(RootError::io("open", display, Errno::LOOP));
                        }
                        let target = OsStr::from_bytes(target.as_bytes()).to_os_string();
                        let target = Path::new(&target);
                        if target.has_root() {
                            below.clear();
                            names.clear();
                        }
                        for step in steps_of(target).collect::<Vec<_>>().into_iter().rev() {
                            pending.push_front(step);
                        }
                    }
                    // Exists, is neither a directory nor a symlink.
                    Err(Errno::INVAL) => return Err(RootError::io("open", display, Errno::NOTDIR)),
                    Err(e) => return Err(RootError::io("readlink", display, e)),
                }
            }
            Err(e) => return Err(RootError::io("open", display, e)),
        }
    }
    let canonical: PathBuf = std::iter::once(OsStr::new("/"))
        .chain(names.iter().map(|n| n.as_os_str()))
        .collect();
    match below.pop() {
        Some(fd) => Ok((fd, canonical)),
        None => rustix::io::fcntl_dupfd_cloexec(root, 0)
            .map(|fd| (fd, canonical))
            .map_err(|e| RootError::io("open", display, e)),
    }
}

fn open_subdir(dir: BorrowedFd<'_>, name: &OsStr) -> Result<OwnedFd, Errno> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}
