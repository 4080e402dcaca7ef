//! What an intruder would change besides modes and bytes: owners, core's keys, core's hash.
//! Temp roots with a user database; the tests chown (run as root, like the agent).

use std::fs;
use std::os::unix::fs::{PermissionsExt, chown};
use std::path::Path;

use super::*;

const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKeyOfCore core@example";
const HASH: &str = "$6$salt$configuredhash";

fn config() -> Config {
    let text = format!(
        r#"{{"ignition": {{"version": "3.2.0"}},
  "storage": {{"files": [
    {{"path": "/etc/a.conf", "mode": 420, "contents": {{"source": "data:,a"}}}},
    {{"path": "/etc/core.conf", "mode": 420, "user": {{"name": "core"}}, "group": {{"id": 1000}},
      "contents": {{"source": "data:,c"}}}}
  ]}},
  "passwd": {{"users": [{{"name": "core", "sshAuthorizedKeys": ["{KEY}"], "passwordHash": "{HASH}"}}]}}
}}"#
    );
    Config::parse(text.as_bytes()).unwrap()
}

fn write(root: &Path, path: &str, contents: &str, mode: u32, owner: u32) {
    let p = root.join(path.trim_start_matches('/'));
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(&p, contents).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
    chown(&p, Some(owner), Some(owner)).unwrap();
}

/// A root that matches [`config`].
fn matching_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(
        r,
        "/etc/passwd",
        "root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000:core:/home/core:/bin/bash\n",
        0o644,
        0,
    );
    write(r, "/etc/group", "root:x:0:\ncore:x:1000:\n", 0o644, 0);
    write(
        r,
        "/etc/shadow",
        &format!("root:*:1::::::\ncore:{HASH}:1::::::\n"),
        0o600,
        0,
    );
    write(r, "/etc/a.conf", "a", 0o644, 0);
    write(r, "/etc/core.conf", "c", 0o644, 1000);
    write(
        r,
        "/home/core/.ssh/authorized_keys.d/ignition",
        &format!("{KEY}\n"),
        0o600,
        1000,
    );
    for d in [
        "home/core",
        "home/core/.ssh",
        "home/core/.ssh/authorized_keys.d",
    ] {
        chown(r.join(d), Some(1000), Some(1000)).unwrap();
    }
    dir
}

fn messages(dir: &tempfile::TempDir) -> Vec<String> {
    let root = Root::open(dir.path()).unwrap();
    validate(&root, "rendered-worker-1", &config())
        .mismatches
        .into_iter()
        .map(|m| m.message)
        .collect()
}

#[test]
fn a_matching_root_passes() {
    assert_eq!(messages(&matching_root()), Vec::<String>::new());
}

#[test]
fn a_chowned_managed_file_is_an_owner_mismatch() {
    let dir = matching_root();
    chown(dir.path().join("etc/a.conf"), Some(1000), Some(1000)).unwrap();
    chown(dir.path().join("etc/core.conf"), Some(0), Some(1000)).unwrap();
    assert_eq!(
        messages(&dir),
        [
            "owner mismatch for file: \"/etc/a.conf\"; expected: 0:0 (root:root); received: 1000:1000 (core:core)",
            "owner mismatch for file: \"/etc/core.conf\"; expected: 1000:1000 (core:core); received: 0:1000 (root:core)",
        ]
    );
}

#[test]
fn a_key_added_to_cores_file_is_named_without_showing_it() {
    let dir = matching_root();
    let keys = dir.path().join("home/core/.ssh/authorized_keys.d/ignition");
    fs::write(&keys, format!("{KEY}\nssh-ed25519 AAAAintruder evil\n")).unwrap();
    let root = Root::open(dir.path()).unwrap();
    let report = validate(&root, "rendered-worker-1", &config());
    let lines = report.lines().join("\n");
    assert_eq!(
        report.mismatches[0].message,
        "content mismatch for SSH keys of user \"core\" in \"/home/core/.ssh/authorized_keys.d/ignition\""
    );
    assert_eq!(report.mismatches.len(), 1, "{lines}");
    assert!(!lines.contains("AAAA"), "a key is shown: {lines}");
    // Gone, or given away, is a mismatch too.
    fs::set_permissions(&keys, fs::Permissions::from_mode(0o644)).unwrap();
    fs::write(&keys, format!("{KEY}\n")).unwrap();
    chown(&keys, Some(0), Some(0)).unwrap();
    assert_eq!(
        messages(&dir),
        [
            "mode mismatch for SSH keys of user \"core\" in \"/home/core/.ssh/authorized_keys.d/ignition\"; expected: 0600; received: 0644",
            "owner mismatch for file: \"/home/core/.ssh/authorized_keys.d/ignition\"; expected: 1000:1000 (core:core); received: 0:0 (root:root)",
        ]
    );
    fs::remove_file(&keys).unwrap();
    assert_eq!(
        messages(&dir),
        [
            "missing SSH keys of user \"core\": \"/home/core/.ssh/authorized_keys.d/ignition\" does not exist"
        ]
    );
}

#[test]
fn a_changed_password_hash_is_named_without_showing_it() {
    let dir = matching_root();
    let other = "$6$other$intruderhash";
    write(
        dir.path(),
        "/etc/shadow",
        &format!("root:*:1::::::\ncore:{other}:1::::::\n"),
        0o600,
        0,
    );
    let root = Root::open(dir.path()).unwrap();
    let report = validate(&root, "rendered-worker-1", &config());
    assert_eq!(
        report
            .mismatches
            .iter()
            .map(|m| m.message.as_str())
            .collect::<Vec<_>>(),
        ["password hash mismatch for user \"core\""]
    );
    let json = serde_json::to_string(&report.mismatches).unwrap();
    let lines = report.lines().join("\n");
    for shown in [json, lines] {
        assert!(
            !shown.contains(other) && !shown.contains(HASH),
            "a hash is shown: {shown}"
        );
    }
}

/// The drift monitor's check of the paths that changed: only what the config says about them
/// (another drifted file is not this event's business), core's keys and hash when their files
/// are among them; and the paths it watches for core.
#[test]
fn only_the_changed_paths_are_checked() {
    let dir = matching_root();
    chown(dir.path().join("etc/a.conf"), Some(1000), Some(1000)).unwrap();
    fs::write(dir.path().join("etc/core.conf"), "drifted").unwrap();
    let keys = "/home/core/.ssh/authorized_keys.d/ignition";
    fs::write(
        dir.path().join(keys.trim_start_matches('/')),
        format!("{KEY}\nssh-ed25519 AAAAintruder evil\n"),
    )
    .unwrap();
    let root = Root::open(dir.path()).unwrap();
    assert_eq!(
        core_paths(&root, &config()),
        [keys.to_string(), "/etc/shadow".to_string()]
    );
    let rows: &[(&[&str], &[&str])] = &[
        (&[], &[]),
        (&["/etc/unmanaged"], &[]),
        (
            &["/etc/core.conf"],
            &["content mismatch for file \"/etc/core.conf\""],
        ),
        (
            &["/etc/a.conf"],
            &[
                "owner mismatch for file: \"/etc/a.conf\"; expected: 0:0 (root:root); received: 1000:1000 (core:core)",
            ],
        ),
        (
            &[keys],
            &[
                "content mismatch for SSH keys of user \"core\" in \"/home/core/.ssh/authorized_keys.d/ignition\"",
            ],
        ),
        (
            &["/etc/shadow"],
            &[
                "content mismatch for SSH keys of user \"core\" in \"/home/core/.ssh/authorized_keys.d/ignition\"",
            ],
        ),
    ];
    for (changed, want) in rows {
        let changed: BTreeSet<String> = changed.iter().map(|p| p.to_string()).collect();
        let got: Vec<String> = validate_paths(&root, "rendered-worker-1", &config(), &changed)
            .mismatches
            .into_iter()
            .map(|m| m.message)
            .collect();
        assert_eq!(got, *want, "changed: {changed:?}");
    }
    // without core in the config, nothing of core's is watched
    let mut without_core = config();
    without_core.passwd.users.clear();
    assert_eq!(core_paths(&root, &without_core), Vec::<String>::new());
}
