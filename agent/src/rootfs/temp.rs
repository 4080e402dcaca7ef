//! The temp files of atomic writes and links: named `.<name>.mco-tmp-<pid>-<n>` beside the
//! final `<name>` (same directory, so the rename is atomic). A process killed between creating
//! one and renaming it (SIGKILL, a power cut) leaves it behind; [`Root::remove_stale_temp_files`]
//! removes those, and only those, when the agent starts.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::{Root, RootError, check_path, resolve};

/// What separates the final name from the writer's pid and counter in a temp name.
const MARKER: &[u8] = b".mco-tmp-";

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The temp name of our process for `name`, with counter `n`.
fn temp_name(name: &OsStr, pid: u32, n: u64) -> OsString {
    let mut tmp = OsString::from(".");
    tmp.push(name);
    tmp.push(format!(".mco-tmp-{pid}-{n}"));
    tmp
}

/// The writer's pid when `name` is one of our temp names (`.<name>.mco-tmp-<pid>-<n>`, with a
/// non-empty `<name>` and decimal `<pid>` and `<n>`); `None` for every other name.
pub fn temp_writer_pid(name: &OsStr) -> Option<u32> {
    let bytes = name.as_bytes().strip_prefix(b".")?;
    let at = bytes.windows(MARKER.len()).rposition(|w| w == MARKER)?;
    if at == 0 {
        return None;
    }
    let tail = &bytes[at + MARKER.len()..];
    let dash = tail.iter().position(|&b| b == b'-')?;
    let (pid, n) = (&tail[..dash], &tail[dash + 1..]);
    let digits = |s: &[u8]| !s.is_empty() && s.iter().all(u8::is_ascii_digit);
    if !digits(pid) || !digits(n) {
        return None;
    }
    std::str::from_utf8(pid).ok()?.parse().ok()
}

/// Runs `create` with fresh temp names beside `name` until one does not already exist.
pub(super) fn create_with_temp_name(
    path: &Path,
    name: &OsStr,
    mut create: impl FnMut(&OsStr) -> Result<(), Errno>,
) -> Result<OsString, RootError> {
    for _ in 0..100 {
        let tmp = temp_name(
            name,
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
        );
        match create(&tmp) {
            Ok(()) => return Ok(tmp),
            Err(Errno::EXIST) => continue,
            Err(e) => return Err(RootError::io("create", path, e)),
        }
    }
    Err(RootError::io("create", path, Errno::EXIST))
}

/// Where this process's descriptors can be linked from (an anonymous file gets a name so).
const PROC_SELF_FD: &str = "/proc/self/fd";

/// A temp file to write the contents of `name` into, in `parent`: anonymous (`O_TMPFILE`) where
/// the file system and `/proc` allow, so that a writer killed while writing leaves nothing
/// (name it with [`name_temp_file`] just before the rename); else created with its temp name,
/// which is returned.
pub(super) fn create_temp_file(
    parent: &OwnedFd,
    path: &Path,
    name: &OsStr,
) -> Result<(OwnedFd, Option<OsString>), RootError> {
    if Path::new(PROC_SELF_FD).is_dir() {
        let flags = OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC;
        match rustix::fs::openat(parent, ".", flags, Mode::from_raw_mode(0o600)) {
            Ok(fd) => return Ok((fd, None)),
            // Not supported by this file system or kernel: a named temp file instead.
            Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::NOENT | Errno::INVAL) => {}
            Err(e) => return Err(RootError::io("create", path, e)),
        }
    }
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut file = None;
    let tmp = create_with_temp_name(path, name, |tmp| {
        file = Some(rustix::fs::openat(
            parent,
            tmp,
            flags,
            Mode::from_raw_mode(0o600),
        )?);
        Ok(())
    })?;
    let fd = file.ok_or_else(|| RootError::io("create", path, Errno::NOENT))?;
    Ok((fd, Some(tmp)))
}

/// Links the anonymous temp file `file` into `parent` under a temp name beside `name`.
pub(super) fn name_temp_file(
    parent: &OwnedFd,
    file: &impl AsFd,
    path: &Path,
    name: &OsStr,
) -> Result<OsString, RootError> {
    let proc_path = format!("{PROC_SELF_FD}/{}", file.as_fd().as_raw_fd());
    create_with_temp_name(path, name, |tmp| {
        rustix::fs::linkat(
            rustix::fs::CWD,
            proc_path.as_str(),
            parent,
            tmp,
            AtFlags::SYMLINK_FOLLOW,
        )
    })
}

/// The kernel's unit of process times in `/proc` (`USER_HZ`, part of its ABI).
const USER_HZ: f64 = 100.0;

/// How much earlier than a file's last write its writer may seem to have started: the boot time
/// the kernel gives is whole seconds.
const START_SLACK_SECS: f64 = 2.0;

/// Whether the process that named a temp file `pid`, last written at `written` (seconds since
/// the epoch), may still be writing it: this process or a live process of ours (`mco-agent`,
/// `mco-firstboot`), started before the file was written. A pid that a dead writer left does
/// not keep the file when another process reuses it, an unrelated one or one of ours started
/// since: after a power cut, the agent of the next boot often gets the very pid of the agent
/// the cut stopped.
fn writer_may_be_running(pid: u32, written: f64) -> bool {
    let ours = pid == std::process::id()
        || std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .is_ok_and(|comm| comm.starts_with("mco-"));
    ours && process_start(pid).is_none_or(|started| started <= written + START_SLACK_SECS)
}

/// When process `pid` started, in seconds since the epoch; `None` when `/proc` does not say.
fn process_start(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command (which may hold spaces and parentheses); starttime is field 22.
    let after_comm = stat.rsplit_once(") ")?.1;
    let ticks: f64 = after_comm.split_whitespace().nth(19)?.parse().ok()?;
    let boot: f64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(boot + ticks / USER_HZ)
}

impl Root {
    /// Removes the temp files that writers of ours killed mid-write left in the directory `dir`
    /// (followed through symlinks inside the root): regular files and symlinks named
    /// `.<name>.mco-tmp-<pid>-<n>` whose writer is no longer running. Nothing else is touched,
    /// directories included. Returns the paths removed; a missing `dir` has none.
    pub fn remove_stale_temp_files(&self, dir: &Path) -> Result<Vec<PathBuf>, RootError> {
        check_path(dir)?;
        let fd = match resolve::open_dir_in_root(self.fd.as_fd(), dir, false, dir) {
            Ok((fd, _)) => fd,
            Err(e) if e.is_not_found() => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut ours = Vec::new();
        let entries = rustix::fs::Dir::read_from(&fd).map_err(|e| RootError::io("open", dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| RootError::io("readdir", dir, e))?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes()).to_os_string();
            if let Some(pid) = temp_writer_pid(&name) {
                ours.push((name, pid));
            }
        }
        let mut removed = Vec::new();
        for (name, pid) in ours {
            let path = dir.join(&name);
            let st = match rustix::fs::statat(&fd, &name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(RootError::io("lstat", path, e)),
            };
            let kind = FileType::from_raw_mode(st.st_mode);
            if kind != FileType::RegularFile && kind != FileType::Symlink {
                continue;
            }
            let written = st.st_mtime as f64 + st.st_mtime_nsec as f64 / 1e9;
            if writer_may_be_running(pid, written) {
                continue;
            }
            match rustix::fs::unlinkat(&fd, &name, AtFlags::empty()) {
                Ok(()) => removed.push(path),
                Err(Errno::NOENT) => {}
                Err(e) => return Err(RootError::io("unlink", path, e)),
            }
        }
        if !removed.is_empty() {
            rustix::fs::fsync(&fd).map_err(|e| RootError::io("fsync", dir, e))?;
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_temp_names_and_no_other() {
        let pid = |s: &str| temp_writer_pid(OsStr::new(s));
        assert_eq!(pid(".a.yaml.mco-tmp-123-4"), Some(123));
        assert_eq!(pid(".x.mco-tmp-1.mco-tmp-9-0"), Some(9));
        assert_eq!(
            temp_writer_pid(&temp_name(OsStr::new("policy.json"), 77, 5)),
            Some(77)
        );
        for other in [
            "a.yaml.mco-tmp-1-2",
            "..mco-tmp-1-2",
            ".mco-tmp-1-2",
            ".a.mco-tmp-1",
            ".a.mco-tmp--2",
            ".a.mco-tmp-1-",
            ".a.mco-tmp-1-2x",
            ".a.mco-tmp-x-2",
            ".a.mco-tmp-1-2.bak",
            ".a.tmp123",
            ".a.yaml",
            "a.yaml",
        ] {
            assert_eq!(pid(other), None, "{other}");
        }
    }

    /// A pid above Linux's largest `pid_max` (2^22): never a running process.
    const DEAD: u32 = 999_999_999;

    fn names(dir: &Path) -> Vec<String> {
        let mut out: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        out.sort();
        out
    }

    #[test]
    fn writes_and_links_leave_only_their_final_names() {
        let tmp = tempfile::tempdir().unwrap();
        let root = Root::open(tmp.path()).unwrap();
        let owner = super::super::Owner::ROOT;
        root.write_atomic(Path::new("/etc/a"), b"a", 0o644, owner)
            .unwrap();
        root.write_atomic_deferred(Path::new("/etc/b"), b"b", 0o644, owner)
            .unwrap();
        root.symlink(Path::new("/etc/c"), Path::new("a"), owner)
            .unwrap();
        root.hard_link(Path::new("/etc/d"), Path::new("/etc/a"))
            .unwrap();
        root.hard_link(Path::new("/etc/d"), Path::new("/etc/a"))
            .unwrap();
        assert_eq!(names(&tmp.path().join("etc")), ["a", "b", "c", "d"]);
    }

    /// A power cut, then the next boot's agent with the pid of the one the cut stopped (boots
    /// are that regular): the temp file its namesake left is older than the process, so stale.
    #[test]
    fn a_temp_file_older_than_the_process_with_its_pid_is_stale() {
        let tmp = tempfile::tempdir().unwrap();
        let etc = tmp.path().join("etc");
        std::fs::create_dir(&etc).unwrap();
        let ours = std::process::id();
        let started = process_start(ours).unwrap();
        let old = etc.join(format!(".a.mco-tmp-{ours}-1"));
        std::fs::write(&old, "x").unwrap();
        let before_us = std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(started - 600.0);
        std::fs::File::options()
            .write(true)
            .open(&old)
            .unwrap()
            .set_modified(before_us)
            .unwrap();
        std::fs::write(etc.join(format!(".b.mco-tmp-{ours}-2")), "x").unwrap();
        let root = Root::open(tmp.path()).unwrap();
        let removed = root.remove_stale_temp_files(Path::new("/etc")).unwrap();
        assert_eq!(
            removed,
            [PathBuf::from(format!("/etc/.a.mco-tmp-{ours}-1"))]
        );
        assert_eq!(names(&etc), [format!(".b.mco-tmp-{ours}-2")]);
    }

    #[test]
    fn stale_temp_files_of_dead_writers_go_and_nothing_else() {
        let tmp = tempfile::tempdir().unwrap();
        let etc = tmp.path().join("etc/nmstate");
        std::fs::create_dir_all(etc.join("sub")).unwrap();
        let ours = std::process::id();
        let write = |name: &str| std::fs::write(etc.join(name), "x").unwrap();
        write(&format!(".a.yaml.mco-tmp-{DEAD}-1"));
        std::os::unix::fs::symlink("a.yaml", etc.join(format!(".l.mco-tmp-{DEAD}-2"))).unwrap();
        write(&format!(".b.yaml.mco-tmp-{ours}-3"));
        std::fs::create_dir(etc.join(format!(".d.mco-tmp-{DEAD}-4"))).unwrap();
        write(&format!("sub/.s.mco-tmp-{DEAD}-5"));
        for other in [
            "a.yaml",
            ".a.yaml.tmp123",
            ".a.yaml.mco-tmp-1-2.bak",
            "a.yaml.mco-tmp-9-9",
        ] {
            write(other);
        }
        let root = Root::open(tmp.path()).unwrap();
        let removed = root
            .remove_stale_temp_files(Path::new("/etc/nmstate"))
            .unwrap();
        let mut removed: Vec<String> = removed.iter().map(|p| p.display().to_string()).collect();
        removed.sort();
        assert_eq!(
            removed,
            [
                format!("/etc/nmstate/.a.yaml.mco-tmp-{DEAD}-1"),
                format!("/etc/nmstate/.l.mco-tmp-{DEAD}-2"),
            ]
        );
        let mut kept = vec![
            ".a.yaml.mco-tmp-1-2.bak".to_string(),
            ".a.yaml.tmp123".into(),
            format!(".b.yaml.mco-tmp-{ours}-3"),
            format!(".d.mco-tmp-{DEAD}-4"),
            "a.yaml".into(),
            "a.yaml.mco-tmp-9-9".into(),
            "sub".into(),
        ];
        kept.sort();
        assert_eq!(names(&etc), kept);
        assert_eq!(names(&etc.join("sub")), [format!(".s.mco-tmp-{DEAD}-5")]);
        assert_eq!(
            root.remove_stale_temp_files(Path::new("/etc/missing"))
                .unwrap(),
            Vec::<PathBuf>::new()
        );
    }
}
