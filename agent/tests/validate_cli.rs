//! `mco-agent validate` as a user runs it: exit codes, the MCD-compatible first line, one line per
//! mismatch, `-o json`.

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
        "validate", "--config", &config, "--root", &root, "-o", "json",
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
    // no digest of a file only root may read
    assert_eq!(
        lines[2],
        r#"content mismatch for file "/etc/b.conf" (expected: mode 0600, 7 bytes; found: mode 0600, 8 bytes)"#
    );
    assert_eq!(
        lines[3],
        r#"state validation: error while evaluation symlink for path "/etc/systemd/system/m.service": lstat /etc/systemd/system/m.service: no such file or directory (expected: symlink, -> /dev/null; found: nothing)"#
    );
    assert!(
        !stdout.contains("changed") && !stdout.contains("secret"),
        "contents leaked: {stdout}"
    );

    let (stdout, _, code) = text(&run(&[
        "validate", "--config", &config, "--root", &root, "-o", "json",
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
    // invalid input (docs/agent.md, "Exit codes")
    assert_eq!((code, stdout.as_str()), (65, ""));
    assert_eq!(
        stderr,
        format!(
            "error: {}: $.storage.files.0.path: file \"etc/x\": path not absolute\n",
            bad.display()
        )
    );
}

/// A config whose file `path` has `source` as its contents, everything else matching `setup`'s
/// root; written next to the root.
fn config_with(d: &tempfile::TempDir, name: &str, path: &str, source: &str) -> String {
    let config = d.path().join(name);
    let json = format!(
        r#"{{"ignition":{{"version":"3.2.0"}},"storage":{{"files":[{{"path":"/etc/a.conf","mode":420,"contents":{{"source":"data:,hello%0A"}}}},{{"path":"{path}","mode":420,"contents":{{"source":"{source}"}}}}]}}}}"#
    );
    fs::write(&config, json).unwrap();
    config.display().to_string()
}

/// The comparison, not the parse, decodes the files' base64 (validate's parse defers it):
/// malformed base64 is still refused with the parse's error, whatever the disk holds, for a
/// file that is compared, one that is not (owned by the certificate writer), and without a root.
#[test]
fn malformed_base64_is_the_parse_error_whether_or_not_the_file_is_compared() {
    let (d, root, _) = setup();
    let r = d.path().join("root");
    fs::create_dir_all(r.join("etc/kubernetes")).unwrap();
    fs::write(r.join("etc/kubernetes/kubelet-ca.crt"), "hello").unwrap();
    fs::write(r.join("etc/x"), "hello").unwrap();
    let missing_root = d.path().join("no-root").display().to_string();
    let cases = [
        // a short last quantum (the alphabet is right: only decoding tells)
        (
            "/etc/x",
            "data:;base64,aGVsbG8",
            "invalid padding",
            root.as_str(),
        ),
        // padding inside the data
        (
            "/etc/x",
            "data:;base64,aGVs==bG8=",
            "invalid",
            root.as_str(),
        ),
        (
            "/etc/kubernetes/kubelet-ca.crt",
            "data:;base64,aGVsbG8",
            "invalid padding",
            root.as_str(),
        ),
        (
            "/etc/x",
            "data:;base64,aGVsbG8",
            "invalid padding",
            missing_root.as_str(),
        ),
    ];
    for (i, (path, source, why, root)) in cases.into_iter().enumerate() {
        let config = config_with(&d, &format!("bad-{i}.json"), path, source);
        let (stdout, stderr, code) = text(&run(&["validate", "--config", &config, "--root", root]));
        assert_eq!((code, stdout.as_str()), (65, ""), "{path} {source}");
        let want = format!(
            "error: {config}: $.storage.files.1.contents.source: file \"{path}\": invalid data URL: bad base64 data: "
        );
        assert!(
            stderr.starts_with(&want) && stderr.contains(why) && stderr.lines().count() == 1,
            "{path} {source}: {stderr}"
        );
    }
    // the same base64, well formed, matches
    let config = config_with(&d, "good.json", "/etc/x", "data:;base64,aGVsbG8=");
    let (stdout, stderr, code) = text(&run(&["validate", "--config", &config, "--root", &root]));
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (0, "on-disk state matches good\n", "")
    );
}
