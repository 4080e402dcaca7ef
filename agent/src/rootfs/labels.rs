//! The seam through which new files get their security label before they appear under their
//! name: [`FileLabels`] is called on each temp file [`super::Root`] writes, before the rename,
//! so a rewritten `/etc/shadow` is never visible with its directory's type. The SELinux
//! implementation lives in `host::selinux`; a root without labels (tests, `--root DIR`, a host
//! without SELinux) leaves files with what they inherit.

use std::os::fd::BorrowedFd;
use std::path::Path;

/// Labels a file being created.
pub trait FileLabels: Send + Sync + std::fmt::Debug {
    /// Gives `file`, about to become `path` (a config path such as `/etc/shadow`), the label
    /// the policy gives that path for a file of `mode` (type bits included). An error names
    /// what failed; the write is then abandoned.
    fn label(&self, path: &Path, mode: u32, file: BorrowedFd<'_>) -> Result<(), String>;
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;
    use std::path::PathBuf;
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::rootfs::{Owner, Root};

    /// Records each call: the config path, the mode, the inode of the file it was given and
    /// whether that inode already had its final name.
    #[derive(Debug)]
    struct Recorder {
        host_root: PathBuf,
        fail: bool,
        calls: Mutex<Vec<(PathBuf, u32, u64, bool)>>,
    }

    impl FileLabels for Recorder {
        fn label(&self, path: &Path, mode: u32, file: BorrowedFd<'_>) -> Result<(), String> {
            let ino = rustix::fs::fstat(file).unwrap().st_ino;
            let host = self.host_root.join(path.strip_prefix("/").unwrap());
            let named = std::fs::metadata(&host).is_ok_and(|m| m.ino() == ino);
            self.calls
                .lock()
                .unwrap()
                .push((path.to_path_buf(), mode, ino, named));
            if self.fail {
                return Err("no label for you".into());
            }
            Ok(())
        }
    }

    fn setup(fail: bool) -> (tempfile::TempDir, Arc<Recorder>, Root) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("etc")).unwrap();
        std::fs::write(dir.path().join("etc/shadow"), "old\n").unwrap();
        let recorder = Arc::new(Recorder {
            host_root: dir.path().to_path_buf(),
            fail,
            calls: Mutex::new(Vec::new()),
        });
        let root = Root::open(dir.path())
            .unwrap()
            .with_labels(recorder.clone());
        (dir, recorder, root)
    }

    #[test]
    fn the_temp_file_is_labelled_before_it_takes_the_name() {
        let (dir, recorder, root) = setup(false);
        root.write_atomic(Path::new("/etc/shadow"), b"new\n", 0o600, Owner::ROOT)
            .unwrap();
        let calls = recorder.calls.lock().unwrap().clone();
        assert_eq!(calls.len(), 1);
        let (path, mode, ino, named) = &calls[0];
        assert_eq!(path, Path::new("/etc/shadow"));
        assert_eq!(*mode, 0o100600, "a regular file's type bits and its mode");
        assert!(!named, "labelled after the rename");
        let written = std::fs::metadata(dir.path().join("etc/shadow")).unwrap();
        assert_eq!(written.ino(), *ino, "the labelled file is the one renamed");
    }

    #[test]
    fn a_file_that_cannot_be_labelled_is_not_written() {
        let (dir, recorder, root) = setup(true);
        let err = root
            .write_atomic(Path::new("/etc/shadow"), b"new\n", 0o600, Owner::ROOT)
            .unwrap_err();
        assert!(err.to_string().contains("/etc/shadow"), "{err}");
        assert!(err.to_string().contains("no label for you"), "{err}");
        assert_eq!(recorder.calls.lock().unwrap().len(), 1);
        let etc: Vec<_> = std::fs::read_dir(dir.path().join("etc"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(etc, ["shadow"], "no temp file left");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("etc/shadow")).unwrap(),
            "old\n"
        );
    }
}
