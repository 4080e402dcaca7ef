//! Symlinks where someone other than root could have put them are never followed: hostile
//! layouts of a user's home in temp roots, and a race that swaps a directory for a symlink
//! while the agent writes through it. (Run as root, like the agent: the tests chown.)

use std::fs;
use std::os::unix::fs::{PermissionsExt, chown, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::*;

const CORE: u32 = 1000;

/// A root with `/home/core` owned by core (0755), `/root/.ssh` holding root's keys, and
/// `/etc/shadow`: what a symlink in core's home would point at.
struct Home {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
}

impl Home {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("root");
        for d in ["etc", "root/.ssh", "home/core"] {
            fs::create_dir_all(dir.join(d)).unwrap();
        }
        fs::write(dir.join("root/.ssh/authorized_keys"), "root's key\n").unwrap();
        fs::write(dir.join("etc/shadow"), "root:*:1::::::\n").unwrap();
        chown(dir.join("home/core"), Some(CORE), Some(CORE)).unwrap();
        Home { _tmp: tmp, dir }
    }

    fn root(&self) -> Root {
        Root::open(&self.dir).unwrap()
    }

    /// A symlink at `at` (inside the root) to `target`, owned by `uid`.
    fn link(&self, at: &str, target: &str, uid: u32) {
        let host = self.dir.join(at.trim_start_matches('/'));
        symlink(target, &host).unwrap();
        std::os::unix::fs::lchown(&host, Some(uid), Some(uid)).unwrap();
    }

    fn dir_owned(&self, at: &str, uid: u32, mode: u32) {
        let host = self.dir.join(at.trim_start_matches('/'));
        fs::create_dir_all(&host).unwrap();
        chown(&host, Some(uid), Some(uid)).unwrap();
        fs::set_permissions(&host, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn bait_untouched(&self) {
        let root_ssh: Vec<_> = fs::read_dir(self.dir.join("root/.ssh"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(root_ssh, ["authorized_keys"], "a file landed in /root/.ssh");
        assert_eq!(
            fs::read_to_string(self.dir.join("root/.ssh/authorized_keys")).unwrap(),
            "root's key\n"
        );
    }
}

fn p(s: &str) -> &Path {
    Path::new(s)
}

const KEYS: &str = "/home/core/.ssh/authorized_keys.d/ignition";

#[test]
fn a_symlink_in_a_users_home_is_not_followed_for_writes() {
    let h = Home::new();
    h.link("/home/core/.ssh", "/root/.ssh", CORE);
    let root = h.root();
    let err = root
        .write_atomic(p(KEYS), b"k\n", 0o600, Owner::ROOT)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "refusing to follow the symlink /home/core/.ssh on the way to \
         /home/core/.ssh/authorized_keys.d/ignition: it is in a directory owned by uid 1000, not root"
    );
    // Not even a lookup goes through it (a link owned by root there is no better).
    h.link("/home/core/dotfiles", "/root/.ssh", 0);
    assert!(matches!(
        root.lstat(p("/home/core/dotfiles/authorized_keys")),
        Err(RootError::UntrustedSymlink { .. })
    ));
    assert!(matches!(
        root.create_dir(p("/home/core/dotfiles/x"), 0o700, Owner::ROOT),
        Err(RootError::UntrustedSymlink { .. })
    ));
    h.bait_untouched();
}

#[test]
fn a_final_symlink_in_a_users_directory_is_not_read_through() {
    let h = Home::new();
    h.dir_owned("/home/core/.ssh/authorized_keys.d", CORE, 0o700);
    h.link(KEYS, "/etc/shadow", CORE);
    let root = h.root();
    let err = root.read(p(KEYS)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "refusing to follow the symlink /home/core/.ssh/authorized_keys.d/ignition on the way \
         to /home/core/.ssh/authorized_keys.d/ignition: it is in a directory owned by uid 1000, \
         not root"
    );
    // Replacing it (rename over the link) is fine: the link is not followed.
    root.write_atomic(
        p(KEYS),
        b"k\n",
        0o600,
        Owner {
            uid: CORE,
            gid: CORE,
        },
    )
    .unwrap();
    assert_eq!(root.read(p(KEYS)).unwrap().unwrap(), b"k\n");
    assert_eq!(
        fs::read_to_string(h.dir.join("etc/shadow")).unwrap(),
        "root:*:1::::::\n"
    );
}

#[test]
fn writable_directories_follow_only_what_others_cannot_swap() {
    let h = Home::new();
    // Group- or world-writable without the sticky bit: anyone there could swap any link.
    h.dir_owned("/srv/shared", 0, 0o777);
    h.link("/srv/shared/conf", "/root/.ssh", 0);
    let root = h.root();
    let err = root
        .write_atomic(p("/srv/shared/conf/x"), b"", 0o644, Owner::ROOT)
        .unwrap_err();
    assert!(
        err.to_string()
            .ends_with("it is in a directory its group or others can write (mode 0777)"),
        "{err}"
    );
    // Sticky (/tmp): root's own links are followed, a user's are not.
    h.dir_owned("/tmp", 0, 0o1777);
    fs::create_dir_all(h.dir.join("var/conf")).unwrap();
    h.link("/tmp/roots", "/var/conf", 0);
    h.link("/tmp/users", "/root/.ssh", CORE);
    root.write_atomic(p("/tmp/roots/x"), b"x", 0o644, Owner::ROOT)
        .unwrap();
    assert_eq!(fs::read(h.dir.join("var/conf/x")).unwrap(), b"x");
    let err = root
        .write_atomic(p("/tmp/users/x"), b"", 0o644, Owner::ROOT)
        .unwrap_err();
    assert!(
        err.to_string()
            .ends_with("it is owned by uid 1000 in a directory others can write (sticky)"),
        "{err}"
    );
    // A link owned by a user in a directory only root can write is root's choice: followed.
    h.link("/etc/users-link", "/var/conf", CORE);
    root.write_atomic(p("/etc/users-link/y"), b"y", 0o644, Owner::ROOT)
        .unwrap();
    assert_eq!(fs::read(h.dir.join("var/conf/y")).unwrap(), b"y");
    h.bait_untouched();
}

/// core swaps `.ssh` between its own directory and a symlink to `/root/.ssh` as fast as it can
/// while the agent writes the keys file through it: every write either lands in core's own
/// directory or is refused, and nothing ever reaches `/root/.ssh`.
#[test]
fn swapping_a_directory_for_a_symlink_mid_write_never_redirects_it() {
    let h = Home::new();
    let home = h.dir.join("home/core");
    let (real, parked) = (home.join(".ssh"), home.join(".ssh-real"));
    h.dir_owned("/home/core/.ssh/authorized_keys.d", CORE, 0o700);
    let (link_tmp, link) = (home.join(".ssh-link"), home.join(".ssh-link2"));
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        let (real, parked, link_tmp, link) = (real.clone(), parked, link_tmp, link);
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // .ssh -> parked directory, a symlink takes its name, then the directory again.
                let _ = fs::rename(&real, &parked);
                let _ = symlink("/root/.ssh", &link_tmp);
                let _ = fs::rename(&link_tmp, &real);
                let _ = fs::rename(&real, &link);
                let _ = fs::remove_file(&link);
                let _ = fs::rename(&parked, &real);
                swaps += 1;
            }
            swaps
        })
    };
    let root = h.root();
    let (mut written, mut refused) = (0, 0);
    for _ in 0..2000 {
        match root.write_atomic(p(KEYS), b"k\n", 0o600, Owner::ROOT) {
            Ok(()) => written += 1,
            Err(_) => refused += 1,
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    h.bait_untouched();
    assert!(swaps > 0, "the swapper never ran");
    eprintln!("{written} writes landed in core's directory, {refused} refused, {swaps} swaps");
    assert_eq!(written + refused, 2000);
}
