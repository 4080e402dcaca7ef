//! Escape attempts and atomic-write behaviour of [`Root`], on temp dirs.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use super::*;

/// A temp root and a sibling "outside" directory holding a bait file.
struct Fixture {
    _tmp: tempfile::TempDir,
    root_dir: PathBuf,
    outside: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root_dir = tmp.path().join("root");
        let outside = tmp.path().join("outside");
        fs::create_dir_all(root_dir.join("etc")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("bait"), "outside\n").unwrap();
        Fixture {
            _tmp: tmp,
            root_dir,
            outside,
        }
    }

    fn root(&self) -> Root {
        Root::open(&self.root_dir).unwrap()
    }

    /// Everything under the outside dir: (relative path, contents or link target).
    fn outside_listing(&self) -> Vec<(PathBuf, String)> {
        let mut out = Vec::new();
        for e in fs::read_dir(&self.outside).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let v = if e.file_type().unwrap().is_file() {
                fs::read_to_string(&p).unwrap()
            } else {
                String::from("<not a file>")
            };
            out.push((p.strip_prefix(&self.outside).unwrap().to_path_buf(), v));
        }
        out.sort();
        out
    }

    fn assert_outside_untouched(&self) {
        assert_eq!(
            self.outside_listing(),
            vec![(PathBuf::from("bait"), "outside\n".to_string())],
            "something was written outside the root"
        );
    }

    /// `/outside` seen from inside the root: where an escaping absolute path must land.
    fn in_root_mirror(&self) -> PathBuf {
        self.root_dir.join(self.outside.strip_prefix("/").unwrap())
    }
}

fn p(s: &str) -> &Path {
    Path::new(s)
}

#[test]
fn absolute_symlink_parent_stays_inside() {
    let f = Fixture::new();
    symlink(&f.outside, f.root_dir.join("etc/evil")).unwrap();
    let root = f.root();
    root.write_atomic(p("/etc/evil/bait"), b"pwned", 0o644, Owner::ROOT)
        .unwrap();
    f.assert_outside_untouched();
    // The absolute target is read relative to the root, like a chroot would.
    assert_eq!(fs::read(f.in_root_mirror().join("bait")).unwrap(), b"pwned");
    assert_eq!(root.read(p("/etc/evil/bait")).unwrap().unwrap(), b"pwned");
}

#[test]
fn dotdot_symlink_parent_stays_inside() {
    let f = Fixture::new();
    // Enough `..` to reach the host's `/` many times over, then down into the outside dir.
    let escape =
        PathBuf::from("../../../../../../../../..").join(f.outside.strip_prefix("/").unwrap());
    symlink(&escape, f.root_dir.join("etc/up")).unwrap();
    symlink("../..", f.root_dir.join("etc/twoup")).unwrap();
    let root = f.root();
    root.write_atomic(p("/etc/up/bait"), b"pwned", 0o600, Owner::ROOT)
        .unwrap();
    root.write_atomic(p("/etc/twoup/top"), b"top", 0o600, Owner::ROOT)
        .unwrap();
    f.assert_outside_untouched();
    assert_eq!(fs::read(f.in_root_mirror().join("bait")).unwrap(), b"pwned");
    assert_eq!(fs::read(f.root_dir.join("top")).unwrap(), b"top");
    assert!(!f.root_dir.parent().unwrap().join("top").exists());
}

#[test]
fn symlinked_parent_chain_stays_inside() {
    let f = Fixture::new();
    fs::create_dir_all(f.root_dir.join("var")).unwrap();
    symlink("/var/link2", f.root_dir.join("etc/link1")).unwrap();
    symlink(&f.outside, f.root_dir.join("var/link2")).unwrap();
    let root = f.root();
    root.create_dir(p("/etc/link1/newdir"), 0o750, Owner::ROOT)
        .unwrap();
    root.write_atomic(p("/etc/link1/newdir/file"), b"x", 0o644, Owner::ROOT)
        .unwrap();
    root.symlink(p("/etc/link1/ln"), p("/etc/passwd"), Owner::ROOT)
        .unwrap();
    f.assert_outside_untouched();
    let mirror = f.in_root_mirror();
    assert_eq!(
        fs::metadata(mirror.join("newdir"))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777,
        0o750
    );
    assert_eq!(fs::read(mirror.join("newdir/file")).unwrap(), b"x");
    assert_eq!(
        fs::read_link(mirror.join("ln")).unwrap(),
        PathBuf::from("/etc/passwd")
    );
}

#[test]
fn final_component_symlink_is_replaced_not_followed() {
    let f = Fixture::new();
    symlink(f.outside.join("bait"), f.root_dir.join("etc/target")).unwrap();
    let root = f.root();
    // Reads never follow it out of the root: the in-root target does not exist.
    assert!(root.read(p("/etc/target")).unwrap().is_none());
    match root.open_nofollow(p("/etc/target")).unwrap() {
        Opened::NotRegular(info) => assert_eq!(info.kind, FileKind::Symlink),
        Opened::File(..) => panic!("a final symlink must not be opened"),
    }
    root.write_atomic(p("/etc/target"), b"replaced", 0o644, Owner::ROOT)
        .unwrap();
    f.assert_outside_untouched();
    let meta = fs::symlink_metadata(f.root_dir.join("etc/target")).unwrap();
    assert!(meta.is_file());
    assert_eq!(
        fs::read(f.root_dir.join("etc/target")).unwrap(),
        b"replaced"
    );
}

#[test]
fn removal_and_links_through_escaping_symlinks_stay_inside() {
    let f = Fixture::new();
    symlink(&f.outside, f.root_dir.join("etc/evil")).unwrap();
    let root = f.root();
    assert!(!root.remove_file(p("/etc/evil/bait")).unwrap());
    let err = root
        .hard_link(p("/etc/hl"), p("/etc/evil/bait"))
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
    assert!(
        root.set_owner(p("/etc/evil/bait"), Owner { uid: 1, gid: 1 })
            .is_err()
    );
    assert!(root.lstat(p("/etc/evil/bait")).unwrap().is_none());
    f.assert_outside_untouched();
    assert_eq!(
        fs::metadata(f.outside.join("bait")).unwrap().uid(),
        rustix::process::getuid().as_raw()
    );
}

#[test]
fn symlink_loops_are_errors() {
    let f = Fixture::new();
    symlink("b", f.root_dir.join("etc/a")).unwrap();
    symlink("a", f.root_dir.join("etc/b")).unwrap();
    let root = f.root();
    let err = root
        .write_atomic(p("/etc/a/x"), b"", 0o644, Owner::ROOT)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "open /etc/a/x: too many levels of symbolic links"
    );
    assert!(root.read(p("/etc/a")).is_err());
}

#[test]
fn dangling_relative_symlink_parent_is_created_inside() {
    // Fresh ostree root: /home -> var/home before var/home exists.
    let f = Fixture::new();
    symlink("var/home", f.root_dir.join("home")).unwrap();
    let root = f.root();
    root.write_atomic(p("/home/core/.ssh/x"), b"k", 0o600, Owner::ROOT)
        .unwrap();
    assert_eq!(
        fs::read(f.root_dir.join("var/home/core/.ssh/x")).unwrap(),
        b"k"
    );
    assert_eq!(
        root.canonicalize(p("/home/core/.ssh/x")).unwrap().unwrap(),
        p("/var/home/core/.ssh/x")
    );
}

#[test]
fn atomic_write_sets_exact_mode_owner_and_parents() {
    let f = Fixture::new();
    let root = f.root();
    let old_umask = rustix::process::umask(Mode::from_raw_mode(0o077));
    let owner = Owner {
        uid: 1234,
        gid: 5678,
    };
    let result = root.write_atomic(p("/etc/a/b/c.conf"), b"hello", 0o640, owner);
    rustix::process::umask(old_umask);
    result.unwrap();
    let file = f.root_dir.join("etc/a/b/c.conf");
    let meta = fs::metadata(&file).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o640);
    assert_eq!((meta.uid(), meta.gid()), (1234, 5678));
    for dir in ["etc/a", "etc/a/b"] {
        let m = fs::metadata(f.root_dir.join(dir)).unwrap();
        assert_eq!(m.permissions().mode() & 0o7777, 0o755, "{dir}");
        assert_eq!((m.uid(), m.gid()), (0, 0), "{dir}");
    }
    // Replacing keeps no temp file behind and swaps the inode (rename, not in-place write).
    let ino = meta.ino();
    root.write_atomic(p("/etc/a/b/c.conf"), b"bye", 0o600, Owner::ROOT)
        .unwrap();
    let meta = fs::metadata(&file).unwrap();
    assert_ne!(meta.ino(), ino);
    assert_eq!(fs::read(&file).unwrap(), b"bye");
    assert_eq!(fs::read_dir(f.root_dir.join("etc/a/b")).unwrap().count(), 1);
}

#[test]
fn links_replace_atomically_and_hard_link_is_idempotent() {
    let f = Fixture::new();
    let root = f.root();
    root.write_atomic(p("/etc/hello"), b"hi", 0o644, Owner::ROOT)
        .unwrap();
    root.write_atomic(p("/etc/ln"), b"file first", 0o644, Owner::ROOT)
        .unwrap();
    root.symlink(p("/etc/ln"), p("/etc/hello"), Owner { uid: 7, gid: 8 })
        .unwrap();
    assert_eq!(
        root.read_link(p("/etc/ln")).unwrap().unwrap(),
        p("/etc/hello")
    );
    let meta = fs::symlink_metadata(f.root_dir.join("etc/ln")).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (7, 8));
    assert_eq!(root.read(p("/etc/ln")).unwrap().unwrap(), b"hi");
    root.hard_link(p("/etc/hard"), p("/etc/hello")).unwrap();
    root.hard_link(p("/etc/hard"), p("/etc/hello")).unwrap();
    let a = root.lstat(p("/etc/hello")).unwrap().unwrap();
    let b = root.lstat(p("/etc/hard")).unwrap().unwrap();
    assert_eq!((a.dev, a.ino, a.nlink), (b.dev, b.ino, 2));
    assert_eq!(fs::read_dir(f.root_dir.join("etc")).unwrap().count(), 3);
    assert!(root.remove_file(p("/etc/ln")).unwrap());
    assert!(!root.remove_file(p("/etc/ln")).unwrap());
}

#[test]
fn relative_and_dotdot_paths_are_refused() {
    let f = Fixture::new();
    let root = f.root();
    for bad in ["etc/x", "/etc/../x", "/"] {
        let err = root
            .write_atomic(p(bad), b"", 0o644, Owner::ROOT)
            .unwrap_err();
        assert!(matches!(err, RootError::InvalidPath { .. }), "{bad}: {err}");
    }
}

#[test]
fn set_mode_refuses_symlinks() {
    let f = Fixture::new();
    symlink(f.outside.join("bait"), f.root_dir.join("etc/s")).unwrap();
    let root = f.root();
    assert!(root.set_mode(p("/etc/s"), 0o777).is_err());
    assert_eq!(
        fs::metadata(f.outside.join("bait"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o644
    );
}

#[test]
fn deferred_write_is_atomic_without_fsync_and_sync_flushes() {
    let f = Fixture::new();
    symlink(f.outside.join("bait"), f.root_dir.join("etc/stamp")).unwrap();
    let root = f.root();
    let owner = Owner {
        uid: 4321,
        gid: 8765,
    };
    root.write_atomic_deferred(p("/etc/x/stamp"), b"", 0o644, owner)
        .unwrap();
    root.write_atomic_deferred(p("/etc/stamp"), b"copy", 0o600, Owner::ROOT)
        .unwrap();
    root.sync().unwrap();
    let meta = fs::metadata(f.root_dir.join("etc/x/stamp")).unwrap();
    assert_eq!(
        (
            meta.permissions().mode() & 0o7777,
            meta.uid(),
            meta.gid(),
            meta.len()
        ),
        (0o644, 4321, 8765, 0)
    );
    // A final symlink is replaced, not followed.
    assert!(
        fs::symlink_metadata(f.root_dir.join("etc/stamp"))
            .unwrap()
            .is_file()
    );
    assert_eq!(fs::read(f.root_dir.join("etc/stamp")).unwrap(), b"copy");
    f.assert_outside_untouched();
    assert_eq!(fs::read_dir(f.root_dir.join("etc/x")).unwrap().count(), 1);
}
