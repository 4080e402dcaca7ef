//! Apply on temp roots: first application, backups and restore, removal, enablement, passwd,
//! idempotence, rollback, and bad input leaving the root untouched.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use super::*;
use crate::units::OfflineUnits;

/// A listing of everything under `dir`: path → kind, mode, owner, and contents or link target.
pub(crate) fn snapshot(dir: &Path) -> BTreeMap<String, String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let mut entries: Vec<_> = fs::read_dir(dir).unwrap().map(|e| e.unwrap()).collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            let m = fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(base).unwrap().display().to_string();
            let head = format!("{:o} {}:{}", m.permissions().mode(), m.uid(), m.gid());
            let v = if m.file_type().is_symlink() {
                format!("{head} -> {}", fs::read_link(&p).unwrap().display())
            } else if m.is_dir() {
                walk(base, &p, out);
                head
            } else if !m.is_file() {
                // a FIFO, socket or device: its type, never read (a FIFO would block)
                format!("{head} special {:o}", m.mode() & 0o170000)
            } else {
                format!(
                    "{head} {:?}",
                    String::from_utf8_lossy(&fs::read(&p).unwrap())
                )
            };
            out.insert(rel, v);
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn seed_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    fs::create_dir_all(r.join("etc")).unwrap();
    fs::write(
        r.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000:CoreOS Admin:/home/core:/bin/bash\n",
    )
    .unwrap();
    fs::write(
        r.join("etc/group"),
        "root:x:0:\nwheel:x:10:core\ncore:x:1000:\n",
    )
    .unwrap();
    fs::write(
        r.join("etc/shadow"),
        "root:*:19000:0:99999:7:::\ncore:*:19000:0:99999:7:::\n",
    )
    .unwrap();
    fs::write(r.join("etc/chrony.conf"), "pool vendor.example iburst\n").unwrap();
    dir
}

fn cfg(json: &str) -> Config {
    Config::parse(json.as_bytes()).unwrap()
}

const FIRST: &str = r#"{
  "ignition": {"version": "3.2.0"},
  "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA one", "ssh-rsa BBBB two"], "passwordHash": "$6$s$h"}]},
  "storage": {
    "files": [
      {"path": "/etc/chrony.conf", "mode": 420, "overwrite": true, "contents": {"source": "data:,pool%20cluster.example%0A"}},
      {"path": "/etc/mco/owned.conf", "mode": 384, "user": {"name": "core"}, "group": {"name": "wheel"}, "contents": {"source": "data:;base64,b3duZWQK"}},
      {"path": "/etc/mco/empty"}
    ],
    "directories": [{"path": "/var/lib/mco/d", "mode": 488}],
    "links": [{"path": "/etc/mco/link", "target": "/etc/mco/owned.conf"}, {"path": "/etc/mco/hard", "target": "/etc/mco/empty", "hard": true}]
  },
  "systemd": {"units": [
    {"name": "a.service", "enabled": true, "contents": "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
     "dropins": [{"name": "10-x.conf", "contents": "[Service]\nNice=2\n"}]},
    {"name": "b.service", "mask": true},
    {"name": "c.service", "enabled": false, "contents": "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"}
  ]}
}"#;

/// FIRST minus chrony.conf, owned.conf, c.service and the drop-in; a.service now wanted by another target.
const SECOND: &str = r#"{
  "ignition": {"version": "3.2.0"},
  "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA one"]}]},
  "storage": {"files": [{"path": "/etc/mco/empty"}],
    "directories": [{"path": "/var/lib/mco/d", "mode": 488}],
    "links": [{"path": "/etc/mco/link", "target": "/etc/mco/owned.conf"}, {"path": "/etc/mco/hard", "target": "/etc/mco/empty", "hard": true}]},
  "systemd": {"units": [
    {"name": "a.service", "enabled": true, "contents": "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=graphical.target\n"},
    {"name": "b.service", "mask": true}
  ]}
}"#;

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

fn run(dir: &Path, old: &Config, new: &Config, first: bool) -> Result<ApplyOutcome, ApplyError> {
    let root = Root::open(dir).unwrap();
    let units = OfflineUnits::new(&root);
    let opts = ApplyOptions {
        first_application: first,
        ..ApplyOptions::default()
    };
    block_on(apply(&root, old, new, &opts, &units))
}

fn mode_owner(p: &Path) -> (u32, u32, u32) {
    let m = fs::symlink_metadata(p).unwrap();
    (m.permissions().mode() & 0o7777, m.uid(), m.gid())
}

#[test]
fn first_application_writes_everything() {
    let dir = seed_root();
    let r = dir.path();
    let out = run(r, &Config::empty(), &cfg(FIRST), true).unwrap();
    assert_eq!(
        fs::read_to_string(r.join("etc/chrony.conf")).unwrap(),
        "pool cluster.example\n"
    );
    assert_eq!(
        fs::read_to_string(r.join("etc/mco/owned.conf")).unwrap(),
        "owned\n"
    );
    assert_eq!(mode_owner(&r.join("etc/mco/owned.conf")), (0o600, 1000, 10));
    assert_eq!(mode_owner(&r.join("etc/mco/empty")), (0o644, 0, 0));
    assert_eq!(mode_owner(&r.join("etc/mco")), (0o755, 0, 0));
    assert_eq!(mode_owner(&r.join("var/lib/mco/d")), (0o750, 0, 0));
    assert_eq!(
        fs::read_link(r.join("etc/mco/link")).unwrap(),
        Path::new("/etc/mco/owned.conf")
    );
    assert_eq!(
        fs::metadata(r.join("etc/mco/hard")).unwrap().ino(),
        fs::metadata(r.join("etc/mco/empty")).unwrap().ino()
    );
    let sd = r.join("etc/systemd/system");
    assert_eq!(
        fs::read_link(sd.join("b.service")).unwrap(),
        Path::new("/dev/null")
    );
    assert_eq!(
        fs::read_to_string(sd.join("a.service.d/10-x.conf")).unwrap(),
        "[Service]\nNice=2\n"
    );
    assert_eq!(
        fs::read_link(sd.join("multi-user.target.wants/a.service")).unwrap(),
        Path::new("/etc/systemd/system/a.service")
    );
    assert!(!sd.join("multi-user.target.wants/c.service").exists());
    let keys = r.join("home/core/.ssh/authorized_keys.d/ignition");
    assert_eq!(
        fs::read_to_string(&keys).unwrap(),
        "ssh-ed25519 AAAA one\nssh-rsa BBBB two\n"
    );
    assert_eq!(mode_owner(&keys), (0o600, 1000, 1000));
    assert_eq!(mode_owner(&r.join("home/core/.ssh")), (0o700, 1000, 1000));
    assert_eq!(
        mode_owner(&r.join("home/core/.ssh/authorized_keys.d")),
        (0o700, 1000, 1000)
    );
    assert!(
        fs::read_to_string(r.join("etc/shadow"))
            .unwrap()
            .contains("core:$6$s$h:")
    );
    assert_eq!(
        fs::read_to_string(r.join("etc/machine-config-daemon/orig/etc/chrony.conf.mcdorig"))
            .unwrap(),
        "pool vendor.example iburst\n"
    );
    assert!(
        r.join("etc/machine-config-daemon/noorig/etc/mco/owned.conf.mcdnoorig")
            .exists()
    );
    assert_eq!(out.enablement.enable, ["a.service"]);
    assert_eq!(out.enablement.disable, ["c.service"]);
    assert!(out.ssh_keys_written && out.password_changed && out.skipped.is_empty());
}

#[test]
fn reapplying_the_same_config_changes_nothing() {
    let dir = seed_root();
    let first = cfg(FIRST);
    run(dir.path(), &Config::empty(), &first, true).unwrap();
    let before = snapshot(dir.path());
    let out = run(dir.path(), &first, &first, false).unwrap();
    assert_eq!(snapshot(dir.path()), before);
    assert!(
        out.files_written.is_empty() && out.units_written.is_empty(),
        "{out:#?}"
    );
    assert_eq!(out.files_unchanged, 3);
}

#[test]
fn second_config_applies_the_diff() {
    let dir = seed_root();
    let r = dir.path();
    run(r, &Config::empty(), &cfg(FIRST), true).unwrap();
    let out = run(r, &cfg(FIRST), &cfg(SECOND), false).unwrap();
    // Restored from the original, deleted when there was none.
    assert_eq!(
        fs::read_to_string(r.join("etc/chrony.conf")).unwrap(),
        "pool vendor.example iburst\n"
    );
    assert!(!r.join("etc/mco/owned.conf").exists());
    assert!(
        !r.join("etc/machine-config-daemon/orig/etc/chrony.conf.mcdorig")
            .exists()
    );
    assert!(
        !r.join("etc/machine-config-daemon/noorig/etc/mco/owned.conf.mcdnoorig")
            .exists()
    );
    assert_eq!(out.files_restored, ["/etc/chrony.conf"]);
    assert_eq!(out.files_removed, ["/etc/mco/owned.conf"]);
    for released in [
        "/etc/systemd/system/a.service.d/10-x.conf",
        "/etc/systemd/system/c.service",
    ] {
        assert!(
            out.units_written.iter().any(|u| u == released),
            "{released}"
        );
    }
    let sd = r.join("etc/systemd/system");
    assert!(!sd.join("c.service").exists());
    assert!(!sd.join("a.service.d/10-x.conf").exists());
    // a.service was disabled before its rewrite: the old link is gone, the new one is there.
    assert!(fs::symlink_metadata(sd.join("multi-user.target.wants")).is_err());
    assert_eq!(
        fs::read_link(sd.join("graphical.target.wants/a.service")).unwrap(),
        Path::new("/etc/systemd/system/a.service")
    );
    assert_eq!(out.units_removed, ["c.service"]);
    assert_eq!(
        fs::read_to_string(r.join("home/core/.ssh/authorized_keys.d/ignition")).unwrap(),
        "ssh-ed25519 AAAA one\n"
    );
    assert!(
        fs::read_to_string(r.join("etc/shadow"))
            .unwrap()
            .contains("core:*:")
    );
}

/// Ignition writes no keys file for a user without keys; the MCD's `updateSSHKeys` writes the
/// (possibly empty) file whenever an update changes `passwd`.
#[test]
fn keys_file_follows_ignition_at_first_application_and_the_mcd_after() {
    let dir = seed_root();
    let r = dir.path();
    let keys = r.join("home/core/.ssh/authorized_keys.d/ignition");
    let password = |keys: &str| {
        cfg(&format!(
            r#"{{"ignition": {{"version": "3.2.0"}}, "passwd": {{"users": [{{"name": "core", "passwordHash": "$6$s$h", "sshAuthorizedKeys": [{keys}]}}]}}}}"#
        ))
    };
    let empty = cfg(r#"{"ignition": {"version": "3.2.0"}}"#);
    let out = run(r, &empty, &password(""), true).unwrap();
    assert!(!out.ssh_keys_written && out.password_changed, "{out:?}");
    assert!(fs::symlink_metadata(r.join("home/core/.ssh")).is_err());
    assert!(
        fs::read_to_string(r.join("etc/shadow"))
            .unwrap()
            .contains("core:$6$s$h:")
    );

    run(
        r,
        &password(""),
        &password(r#""ssh-ed25519 AAAA one""#),
        false,
    )
    .unwrap();
    assert_eq!(fs::read_to_string(&keys).unwrap(), "ssh-ed25519 AAAA one\n");
    let out = run(
        r,
        &password(r#""ssh-ed25519 AAAA one""#),
        &password(""),
        false,
    )
    .unwrap();
    assert!(out.ssh_keys_written, "{out:?}");
    assert_eq!(fs::read_to_string(&keys).unwrap(), "");
}

/// `enabled: true` → `false` on a unit that is rewritten: disabled once (not once for the rewrite
/// and once for `enabled: false`), and the `.wants` directory it emptied is gone.
#[test]
fn disabling_a_rewritten_unit_once() {
    let dir = seed_root();
    let r = dir.path();
    let unit = |enabled: bool| {
        cfg(&format!(
            r#"{{"ignition": {{"version": "3.2.0"}}, "systemd": {{"units": [{{"name": "a.service", "enabled": {enabled},
                "contents": "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"}}]}}}}"#
        ))
    };
    run(r, &Config::empty(), &unit(true), true).unwrap();
    let wants = r.join("etc/systemd/system/multi-user.target.wants");
    assert!(wants.join("a.service").is_symlink());
    let out = run(r, &unit(true), &unit(false), false).unwrap();
    assert_eq!(out.enablement.disable, ["a.service"]);
    assert!(out.enablement.enable.is_empty());
    assert!(fs::symlink_metadata(&wants).is_err());
}

#[test]
fn rolling_back_is_applying_desired_to_current() {
    let dir = seed_root();
    let r = dir.path();
    run(r, &Config::empty(), &cfg(FIRST), true).unwrap();
    let after_first = snapshot(r);
    run(r, &cfg(FIRST), &cfg(SECOND), false).unwrap();
    run(r, &cfg(SECOND), &cfg(FIRST), false).unwrap();
    // No trace of SECOND: the dependency directory its enablement link emptied went with it,
    // as `systemctl disable` removes it.
    assert_eq!(snapshot(r), after_first);
}

#[test]
fn bad_input_changes_nothing() {
    let cases: &[(&str, &str)] = &[
        (
            r#"{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/ok","contents":{"source":"data:,ok"}},{"path":"/etc/x","user":{"name":"nobody"},"contents":{"source":"data:,x"}}]}}"#,
            r#"$.storage.files.1.user.name: no user "nobody" in the root's /etc/passwd"#,
        ),
        (
            r#"{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/ok","contents":{"source":"data:,ok"}},{"path":"/etc/x","group":{"name":"nogroup"}}]}}"#,
            r#"$.storage.files.1.group.name: no group "nogroup" in the root's /etc/group"#,
        ),
        (
            r#"{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/ok","contents":{"source":"data:,ok"}},{"path":"/etc","contents":{"source":"data:,x"}}]}}"#,
            r#"$.storage.files.1.path: "/etc" is a directory in the root; refusing to replace it"#,
        ),
        (
            r#"{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/ok","contents":{"source":"data:,ok"}},{"path":"/etc/chrony.conf/x","contents":{"source":"data:,x"}}]}}"#,
            r#"$.storage.files.1.path: cannot write "/etc/chrony.conf/x": lstat /etc/chrony.conf/x: not a directory"#,
        ),
        (
            r#"{"ignition":{"version":"3.2.0"},"storage":{"links":[{"path":"/etc/h","target":"/etc/none","hard":true}]}}"#,
            r#"$.storage.links.0.target: hard link target "/etc/none" is not a file in the config or in the root"#,
        ),
    ];
    for (json, want) in cases {
        let dir = seed_root();
        let before = snapshot(dir.path());
        let err = run(dir.path(), &Config::empty(), &cfg(json), true).unwrap_err();
        assert_eq!(err.to_string(), *want);
        assert!(!err.disk_changed());
        assert_eq!(snapshot(dir.path()), before, "{want}");
    }
}

/// A FIFO, socket or device at a path the config writes (a file, a unit) is refused before
/// anything is written: its original cannot be kept, and a rollback of a failed write would
/// find none. It is still there afterwards.
#[test]
fn a_fifo_socket_or_device_at_a_managed_path_is_refused_up_front() {
    let cases = [
        (
            "etc/pipe",
            r#"{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/ok","contents":{"source":"data:,ok"}},{"path":"/etc/pipe","contents":{"source":"data:,x"}}]}}"#,
            r#"$.storage.files.1.path: "/etc/pipe" is a FIFO, socket or device in the root, not a regular file; refusing to replace it"#,
        ),
        (
            "etc/systemd/system/sock.service",
            r#"{"ignition":{"version":"3.2.0"},"systemd":{"units":[{"name":"sock.service","contents":"[Service]\nExecStart=/bin/true\n"}]}}"#,
            r#"$.systemd.units.0.path: "/etc/systemd/system/sock.service" is a FIFO, socket or device in the root, not a regular file; refusing to replace it"#,
        ),
    ];
    for (special, json, want) in cases {
        let dir = seed_root();
        let path = dir.path().join(special);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let _listener = if special.ends_with(".service") {
            Some(std::os::unix::net::UnixListener::bind(&path).unwrap())
        } else {
            rustix::fs::mknodat(
                rustix::fs::CWD,
                &path,
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o600),
                0,
            )
            .unwrap();
            None
        };
        let before = snapshot(dir.path());
        let err = run(dir.path(), &Config::empty(), &cfg(json), true).unwrap_err();
        assert_eq!(err.to_string(), want);
        assert!(!err.disk_changed());
        assert_eq!(snapshot(dir.path()), before, "{want}");
    }
}

/// A path the config drops with no original and no stamp recorded is removed only when it is a
/// file or symlink the agent could have written: a FIFO there (put after the write, or an
/// older rollback's leftover) is left alone.
#[test]
fn releasing_never_removes_an_unrecorded_special_file() {
    let dir = seed_root();
    let fifo = dir.path().join("etc/fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let root = Root::open(dir.path()).unwrap();
    assert_eq!(
        super::backup::restore_or_remove(&root, Path::new("/etc/fifo")).unwrap(),
        super::backup::Released::LeftAlone
    );
    assert!(fs::symlink_metadata(&fifo).is_ok(), "the FIFO was removed");
}

#[test]
fn root_without_core_skips_passwd_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &Config::empty(), &cfg(FIRST), true).unwrap_err();
    // Owners by name need the user database too.
    assert_eq!(
        out.to_string(),
        r#"$.storage.files.1.user.name: no user "core" in the root's /etc/passwd"#
    );
    let json = r#"{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["k"]}]}}"#;
    let out = run(dir.path(), &Config::empty(), &cfg(json), true).unwrap();
    assert_eq!(
        out.skipped,
        ["SSH keys and password hash of core: the root has no user core in /etc/passwd"]
    );
    assert!(!dir.path().join("home").exists());
}

/// With the certificate writer at work, a config's copy of the kubelet CA is not written (the
/// MCD's `skipCertificateWrite`); the config's other files are.
#[test]
fn the_kubelet_ca_is_left_to_the_certificate_writer() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("etc/kubernetes/kubelet-ca.crt");
    std::fs::create_dir_all(ca.parent().unwrap()).unwrap();
    std::fs::write(&ca, "from the ControllerConfig\n").unwrap();
    let new = cfg(r#"{"ignition":{"version":"3.2.0"},"storage":{"files":[
        {"path":"/etc/kubernetes/kubelet-ca.crt","contents":{"source":"data:,rendered"}},
        {"path":"/etc/other","contents":{"source":"data:,x"}}]}}"#);
    let old = cfg(r#"{"ignition":{"version":"3.2.0"}}"#);
    let root = Root::open(dir.path()).unwrap();
    let units = OfflineUnits::new(&root);
    for (skip, expected) in [(true, "from the ControllerConfig\n"), (false, "rendered")] {
        let opts = ApplyOptions {
            skip_certificate_write: skip,
            ..ApplyOptions::default()
        };
        block_on(apply(&root, &old, &new, &opts, &units)).unwrap();
        assert_eq!(
            std::fs::read_to_string(&ca).unwrap(),
            expected,
            "skip {skip}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("etc/other")).unwrap(),
            "x"
        );
    }
}
