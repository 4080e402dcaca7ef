//! Parent directories resolved once for the many files a read-only check opens in them.
//!
//! Every path is resolved inside the root a component at a time (module `resolve`): opening
//! `/etc/kubernetes/manifests/x.yaml` opens and closes three directories before the file. A
//! rendered config puts hundreds of files in a handful of directories, so `validate` spent more
//! time in those `openat`/`close` calls than in reading the files (docs/benchmarks.md,
//! "validate"). [`ParentDirs`] keeps the directories it resolved, by the path they were asked
//! for, and opens the next file in one directly.
//!
//! Only for a check that changes nothing: a directory replaced, or a symlink on the way to it
//! swapped, after it was resolved is not seen, as a single resolution would not have seen it
//! a moment later either.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::read::open_nofollow_in;
use super::{Opened, Root, RootError, split};

/// At most this many directories are held open (a config's files are in a few dozen at most);
/// when full, the cache starts over.
const MAX_DIRS: usize = 64;

/// Directories resolved inside one [`Root`], by the path they were resolved from.
#[derive(Default)]
pub struct ParentDirs {
    dirs: HashMap<PathBuf, OwnedFd>,
}

impl Root {
    /// [`Root::open_nofollow`], with the parent directory from `dirs` when an earlier call
    /// resolved it (see the module docs); the same results and errors.
    pub fn open_nofollow_cached(
        &self,
        dirs: &mut ParentDirs,
        path: &Path,
    ) -> Result<Opened, RootError> {
        let (dir, name) = split(path).map_err(|e| e.with_op("lstat"))?;
        if let Some(parent) = dirs.dirs.get(dir) {
            return open_nofollow_in(parent.as_fd(), name, path);
        }
        let (parent, name) = self.parent_to_open(path)?;
        let opened = open_nofollow_in(parent.as_fd(), name, path);
        if dirs.dirs.len() >= MAX_DIRS {
            dirs.dirs.clear();
        }
        dirs.dirs.insert(dir.to_path_buf(), parent);
        opened
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(opened: Result<Opened, RootError>) -> String {
        match opened {
            Ok(Opened::File(_, info)) => format!("file {}", info.size),
            Ok(Opened::NotRegular(info)) => format!("not regular {:?}", info.kind),
            Err(e) => format!("error {e}"),
        }
    }

    #[test]
    fn a_cached_parent_opens_what_a_fresh_resolution_opens() {
        let tmp = tempfile::tempdir().unwrap();
        let host = tmp.path();
        std::fs::create_dir_all(host.join("var/real")).unwrap();
        std::fs::write(host.join("var/real/a"), "aa").unwrap();
        std::fs::write(host.join("var/real/b"), "bbb").unwrap();
        std::os::unix::fs::symlink("real", host.join("var/link")).unwrap();
        std::os::unix::fs::symlink("a", host.join("var/real/to-a")).unwrap();
        let root = Root::open(host).unwrap();
        let mut dirs = ParentDirs::default();
        // Twice each, so the second open uses the cached directory.
        for path in [
            "/var/real/a",
            "/var/link/b",
            "/var/real/to-a",
            "/var/real/none",
            "/missing/x",
            "/var/real/a/x",
            "/var/link/b",
            "/var/real/a",
        ] {
            for _ in 0..2 {
                assert_eq!(
                    kind(root.open_nofollow_cached(&mut dirs, Path::new(path))),
                    kind(root.open_nofollow(Path::new(path))),
                    "{path}"
                );
            }
        }
        assert_eq!(dirs.dirs.len(), 2, "var/real and var/link");
        assert!(matches!(
            root.open_nofollow_cached(&mut dirs, Path::new("relative")),
            Err(RootError::InvalidPath { .. })
        ));
    }

    #[test]
    fn the_cache_holds_a_bounded_number_of_directories() {
        let tmp = tempfile::tempdir().unwrap();
        for i in 0..MAX_DIRS + 5 {
            let dir = tmp.path().join(format!("d{i}"));
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("f"), "x").unwrap();
        }
        let root = Root::open(tmp.path()).unwrap();
        let mut dirs = ParentDirs::default();
        for i in 0..MAX_DIRS + 5 {
            let path = PathBuf::from(format!("/d{i}/f"));
            assert!(matches!(
                root.open_nofollow_cached(&mut dirs, &path),
                Ok(Opened::File(..))
            ));
            assert!(dirs.dirs.len() <= MAX_DIRS);
        }
    }
}
