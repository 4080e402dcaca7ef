//! Path resolution inside a root directory, as if the root were `/`.
//!
//! Every component is opened relative to the directory reached so far, never following a symlink
//! implicitly (`O_NOFOLLOW`). A symlink met on the way is read and its target spliced into the
//! remaining components: an absolute target restarts from the root, `..` never climbs above it.
//! So no path, however its symlinks are arranged, reaches a directory outside the root: the same
//! guarantee the kernel's `RESOLVE_IN_ROOT` gives, plus the ability to create missing directories
//! (including a dangling symlink's target, e.g. `home -> var/home` on a fresh ostree root).
//!
//! A symlink is followed only where nobody but root could have put it (see [`follow_allowed`]):
//! a symlink in core's home is core's to swap at any moment, and following it as root would
//! write wherever core points it. The walk holds each directory open while it looks at the next
//! component and reads a symlink through a descriptor of the link itself, so what is checked is
//! what is followed: there is no window between the check and the use. (The alternative,
//! switching to the user's file-system identity for writes in their home, needs `setfsuid` on
//! every thread that touches the file system and `CAP_SETUID`, and still follows the user's
//! links to wherever the user may write; refusing is simpler and confines more.)

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags, Stat};
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
                let link = || in_root_path(&names, &name);
                match read_link_to_follow(current, &name, link, display)? {
                    Some(target) => {
                        hops += 1;
                        if hops > MAX_SYMLINK_HOPS {
                            return Err(RootError::io("open", display, Errno::LOOP));
                        }
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
                    None => return Err(RootError::io("open", display, Errno::NOTDIR)),
                }
            }
            Err(e) => return Err(RootError::io("open", display, e)),
        }
    }
    let canonical = in_root_path(&names, OsStr::new(""));
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

/// `/` followed by `names` and `last` (when not empty): a path inside the root.
fn in_root_path(names: &[OsString], last: &OsStr) -> PathBuf {
    std::iter::once(OsStr::new("/"))
        .chain(names.iter().map(|n| n.as_os_str()))
        .chain((!last.is_empty()).then_some(last))
        .collect()
}

/// The target of the symlink `name` in `dir`, if [`follow_allowed`] lets it be followed;
/// `None` when `name` is not a symlink. `link` names the symlink (a path inside the root) and
/// `display` the path being resolved, for errors. The link is opened (`O_PATH`, not followed)
/// and both its owner and its target are read through that descriptor: a link swapped in the
/// meantime is not the one checked, nor the one followed.
pub(crate) fn read_link_to_follow(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    link: impl FnOnce() -> PathBuf,
    display: &Path,
) -> Result<Option<OsString>, RootError> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| RootError::io("open", display, e))?;
    let link_stat = rustix::fs::fstat(&fd).map_err(|e| RootError::io("lstat", display, e))?;
    if FileType::from_raw_mode(link_stat.st_mode) != FileType::Symlink {
        return Ok(None);
    }
    let dir_stat = rustix::fs::fstat(dir).map_err(|e| RootError::io("stat", display, e))?;
    if let Err(why) = follow_allowed(&dir_stat, &link_stat) {
        return Err(RootError::UntrustedSymlink {
            link: link(),
            path: display.to_path_buf(),
            why,
        });
    }
    // An empty path reads the link the O_PATH descriptor refers to.
    let target = rustix::fs::readlinkat(&fd, "", Vec::new())
        .map_err(|e| RootError::io("readlink", display, e))?;
    Ok(Some(OsStr::from_bytes(target.as_bytes()).to_os_string()))
}

/// Whether a symlink may be followed, from the facts of the directory holding it and of the
/// link itself. Only someone who can write the directory can put or swap a link there, so:
/// - a directory owned by root (or by the agent's own user, for unprivileged test runs) that
///   neither its group nor others can write: any link is followed;
/// - such a directory writable by others but sticky (`/tmp`): only links owned by root (or the
///   agent's user), which the sticky bit keeps others from replacing (the kernel's
///   `fs.protected_symlinks` rule, made unconditional);
/// - anything else, in particular a directory a user owns (core's home): never.
///
/// The error says why, in words for a message.
pub(crate) fn follow_allowed(dir: &Stat, link: &Stat) -> Result<(), String> {
    let trusted = |uid: u32| uid == 0 || uid == rustix::process::geteuid().as_raw();
    if !trusted(dir.st_uid) {
        return Err(format!(
            "it is in a directory owned by uid {}, not root",
            dir.st_uid
        ));
    }
    let writable_by_others = dir.st_mode & 0o022 != 0;
    let sticky = dir.st_mode & 0o1000 != 0;
    match (writable_by_others, sticky) {
        (false, _) => Ok(()),
        (true, true) if trusted(link.st_uid) => Ok(()),
        (true, true) => Err(format!(
            "it is owned by uid {} in a directory others can write (sticky)",
            link.st_uid
        )),
        (true, false) => Err(format!(
            "it is in a directory its group or others can write (mode {:04o})",
            dir.st_mode & 0o7777
        )),
    }
}
