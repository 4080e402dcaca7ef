//! `mco-agent validate` as a user runs it: exit codes, the MCD-compatible first line, one line per
//! mismatch, `--json`.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;

use common::{run, text};

const MC: &str = r#"apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: rendered-worker-abc
spec:
  config:
    ignition:
      version: 3.2.0
    storage:
      files:
      - path: /etc/a.conf
        mode: 0644
        contents:
          source: data:,hello%0A
      - path: /etc/b.conf
        mode: 0600
        contents:
          source: data:text/plain;charset=utf-8;base64,c2VjcmV0Cg==
    systemd:
      units:
      - name: m.service
        mask: true
"#;

fn setup() -> (tempfile::TempDir, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir_all(root.join("etc/systemd/system")).unwrap();
    fs::write(root.join("etc/a.conf"), "hello\n").unwrap();
    fs::set_permissions(root.join("etc/a.conf"), fs::Permissions::from_mode(0o644)).unwrap();
    fs::write(root.join("etc/b.conf"), "secret\n").unwrap();
    fs::set_permissions(root.join("etc/b.conf"), fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink("/dev/null", root.join("etc/systemd/system/m.service")).unwrap();
    let config = dir.path().join("mc.yaml");
    fs::write(&config, MC).unwrap();
    let (r, c) = (root.display().to_string(), config.display().to_string());
    (dir, r, c)
}

#[test]
fn matching_root_exits_zero() {
    let (_d, root, config) = setup();
    let (stdout, stderr, code) = text(&run(&["validate", "--config", &config, "--root", &root]));
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(stdout, "on-disk state matches rendered-worker-abc\n");
    let (stdout, _, code) = text(&run(&[
        "validate", "--config", &config, "--root", &root, "--json",
    ]));
    assert_eq!((code, stdout.trim()), (0, "[]"));
}

#[test]
fn every_mismatch_is_reported_first_line_mcd_compatible() {
    let (d, root, config) = setup();
    let r = d.path().join("root");
    fs::set_permissions(r.join("etc/a.conf"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(r.join("etc/b.conf"), "changed\n").unwrap();
    fs::remove_file(r.join("etc/systemd/system/m.service")).unwrap();
    let (stdout, _, code) = text(&run(&["validate", "--config", &config, "--root", &root]));
    assert_eq!(code, 1);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert_eq!(
        lines[0],
        r#"unexpected on-disk state validating against rendered-worker-abc: mode mismatch for file: "/etc/a.conf"; expected: -rw-r--r--/420/0644; received: -rwxr-xr-x/493/0755"#
    );
    assert!(lines[1].starts_with(r#"mode mismatch for file: "/etc/a.conf"; expected: -rw-r--r--/420/0644; received: -rwxr-xr-x/493/0755 (expected: mode 0644, 6 bytes, sha256 "#));
    assert!(lines[1].contains("; found: mode 0755, 6 bytes, sha256 "));
    assert!(lines[2].starts_with(
        r#"content mismatch for file "/etc/b.conf" (expected: mode 0600, 7 bytes, sha256 "#
    ));
    assert!(lines[2].contains("; found: mode 0600, 8 bytes, sha256 "));
    assert_eq!(
        lines[3],
        r#"state validation: error while evaluation symlink for path "/etc/systemd/system/m.service": lstat /etc/systemd/system/m.service: no such file or directory (expected: symlink, -> /dev/null; found: nothing)"#
    );
    assert!(
        !stdout.contains("changed") && !stdout.contains("secret"),
        "contents leaked: {stdout}"
    );

    let (stdout, _, code) = text(&run(&[
        "validate", "--config", &config, "--root", &root, "--json",
    ]));
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let kinds: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["mode", "content", "mask"]);
    assert_eq!(v[1]["path"], "/etc/b.conf");
    assert_eq!(v[1]["found"]["size"], 8);
    assert_eq!(v[2]["unit"], "m.service");
}

#[test]
fn bad_config_is_one_error_line() {
    let (d, root, _) = setup();
    let bad = d.path().join("bad.ign");
    fs::write(
        &bad,
        r#"{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"etc/x"}]}}"#,
    )
    .unwrap();
    let (stdout, stderr, code) = text(&run(&[
        "validate",
        "--config",
        &bad.display().to_string(),
        "--root",
        &root,
    ]));
    assert_eq!((code, stdout.as_str()), (1, ""));
    assert_eq!(
        stderr,
        format!(
            "error: {}: $.storage.files.0.path: file \"etc/x\": path not absolute\n",
            bad.display()
        )
    );
}
