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
    let (stdout, stderr, code) = text(&run(&["validate", "--config", &config, "--root", &root]));
    assert_eq!(code, 1);
    // no hint: recover acts on a node the agent applied a config to (no currentconfig here)
    assert_eq!(stderr, "");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{stdout}");
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
    // the line under a content mismatch: sizes, and no hash of a file only root may read
    assert_eq!(
        lines[3],
        "  expected 7 bytes, on disk 8 bytes (no hash of a file others may not read)"
    );
    assert_eq!(
        lines[4],
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

/// A config of files (path, mode, contents) and a unit with contents, as an Ignition config
/// named `shown`, next to a root holding `on_disk` (path, mode, contents) and the unit's file.
fn contents_case(
    expected: &[(&str, u32, &[u8])],
    on_disk: &[(&str, u32, &[u8])],
) -> (tempfile::TempDir, String, String) {
    use base64::Engine as _;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    for (path, mode, bytes) in on_disk {
        let at = root.join(path.trim_start_matches('/'));
        fs::create_dir_all(at.parent().unwrap()).unwrap();
        fs::write(&at, bytes).unwrap();
        fs::set_permissions(&at, fs::Permissions::from_mode(*mode)).unwrap();
    }
    let files: Vec<serde_json::Value> = expected
        .iter()
        .map(|(path, mode, bytes)| {
            let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
            serde_json::json!({"path": path, "mode": mode,
                "contents": {"source": format!("data:;base64,{b64}")}})
        })
        .collect();
    let config = dir.path().join("shown.json");
    let ign = serde_json::json!({"ignition": {"version": "3.2.0"}, "storage": {"files": files}});
    fs::write(&config, ign.to_string()).unwrap();
    let (r, c) = (root.display().to_string(), config.display().to_string());
    (dir, r, c)
}

/// `--show-contents`: a changed plain file shows a unified diff (3 lines of context) under its
/// mismatch and hash lines; a file others may not read, a file under /etc/kubernetes and a
/// binary file show their sizes and none of their bytes, on stdout or stderr.
#[test]
fn show_contents_diffs_plain_files_and_never_shows_secrets() {
    let plain_want = b"one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n";
    let plain_disk = b"one\ntwo\nthree\nfour\nFIVE by hand\nsix\nseven\neight\n";
    let (_d, root, config) = contents_case(
        &[
            ("/etc/plain.conf", 0o644, plain_want),
            ("/etc/private.conf", 0o600, b"password=WANTED-PRIVATE\n"),
            (
                "/etc/kubernetes/kubelet.conf",
                0o644,
                b"token: WANTED-KUBE-TOKEN\n",
            ),
            ("/etc/blob.bin", 0o644, b"\xffWANTED-BINARY\x00"),
        ],
        &[
            ("/etc/plain.conf", 0o644, plain_disk),
            ("/etc/private.conf", 0o600, b"password=DISK-PRIVATE!\n"),
            (
                "/etc/kubernetes/kubelet.conf",
                0o644,
                b"token: DISK-KUBE-TOKEN\n",
            ),
            ("/etc/blob.bin", 0o644, b"\xfeDISK-BINARY\x00\x01"),
        ],
    );
    let (stdout, stderr, code) = text(&run(&[
        "validate",
        "--config",
        &config,
        "--root",
        &root,
        "--show-contents",
    ]));
    assert_eq!(code, 1, "{stdout}{stderr}");
    let want = [
        r#"content mismatch for file "/etc/plain.conf" (expected: mode 0644, 40 bytes, sha256 "#,
        "  expected sha256:",
        "  --- expected /etc/plain.conf",
        "  +++ on disk /etc/plain.conf",
        "  @@ -2,7 +2,7 @@",
        "   two",
        "   three",
        "   four",
        "  -five",
        "  +FIVE by hand",
        "   six",
        "   seven",
        "   eight",
        r#"content mismatch for file "/etc/private.conf" (expected: mode 0600, 24 bytes; found: mode 0600, 23 bytes)"#,
        "  expected 24 bytes, on disk 23 bytes (no hash of a file others may not read)",
        "  contents not shown (secret: mode 0600, not world-readable; 24 bytes expected, 23 on disk)",
        r#"content mismatch for file "/etc/kubernetes/kubelet.conf" (expected: mode 0644, 25 bytes, sha256 "#,
        "  expected sha256:",
        "  contents not shown (secret: under /etc/kubernetes (cluster credentials); 25 bytes expected, 23 on disk)",
        r#"content mismatch for file "/etc/blob.bin" (expected: mode 0644, 15 bytes, sha256 "#,
        "  expected sha256:",
        "  binary contents differ (15 bytes expected, 14 on disk)",
    ];
    // the MCD's line first, then each mismatch and what is under it
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("unexpected on-disk state validating against shown: content mismatch for file \"/etc/plain.conf\""),
        "{stdout}"
    );
    assert_eq!(lines.len(), want.len() + 1, "{stdout}");
    for (got, want) in lines[1..].iter().zip(want) {
        assert!(
            got.starts_with(want),
            "{got:?} does not start with {want:?}:\n{stdout}"
        );
    }
    // the hash line: 12 hex digits of each side's sha256, and the sizes
    let sha = |b: &[u8]| {
        use sha2::Digest as _;
        hex::encode(sha2::Sha256::digest(b))[..12].to_string()
    };
    assert_eq!(
        lines[2],
        format!(
            "  expected sha256:{} (40 bytes), on disk sha256:{} (48 bytes)",
            sha(plain_want),
            sha(plain_disk)
        )
    );
    for secret in [
        "WANTED-PRIVATE",
        "DISK-PRIVATE",
        "WANTED-KUBE-TOKEN",
        "DISK-KUBE-TOKEN",
        "WANTED-BINARY",
        "DISK-BINARY",
    ] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{secret} shown:\n{stdout}{stderr}"
        );
    }

    // without the option: the hash lines, no contents
    let (stdout, _, code) = text(&run(&["validate", "--config", &config, "--root", &root]));
    assert_eq!(code, 1);
    assert_eq!(stdout.lines().count(), 1 + 4 * 2, "{stdout}");
    assert!(
        !stdout.contains("FIVE") && !stdout.contains("---"),
        "{stdout}"
    );

    // the lines are for people: -o json keeps its shape, and the two do not go together
    let (stdout, stderr, code) = text(&run(&[
        "validate",
        "--config",
        &config,
        "--root",
        &root,
        "--show-contents",
        "-o",
        "json",
    ]));
    assert_eq!((code, stdout.as_str()), (64, ""), "{stderr}");
}

/// After mismatches on a node the agent applied a config to, the next step: `recover`, with
/// the root when it is not `/`, and saying it re-applies the node's own config when another
/// was validated.
#[test]
fn mismatches_end_with_the_recover_hint() {
    let (d, root, config) = setup();
    let current = d
        .path()
        .join("root/etc/machine-config-daemon/currentconfig");
    fs::create_dir_all(current.parent().unwrap()).unwrap();
    fs::write(&current, MC).unwrap();
    fs::write(d.path().join("root/etc/a.conf"), "by hand\n").unwrap();
    let hint = format!(
        "hint: `mco-agent recover --root {root}` proposes a remedy and, confirmed, has the running agent re-apply the node's desired config over what differs"
    );
    let (stdout, stderr, code) = text(&run(&["validate", "--root", &root]));
    assert_eq!(code, 1, "{stdout}");
    assert_eq!(stderr, format!("{hint}\n"));
    let (_, stderr, code) = text(&run(&["validate", "--config", &config, "--root", &root]));
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        format!("{hint} (the node's config, not {config})\n")
    );
    // in -o json too (stdout keeps its shape)
    let (stdout, stderr, code) = text(&run(&["validate", "--root", &root, "-o", "json"]));
    assert_eq!(code, 1);
    assert!(serde_json::from_str::<serde_json::Value>(&stdout).is_ok());
    assert_eq!(stderr, format!("{hint}\n"));
    // and none when the disk matches
    fs::write(d.path().join("root/etc/a.conf"), "hello\n").unwrap();
    let (_, stderr, code) = text(&run(&["validate", "--root", &root]));
    assert_eq!((code, stderr.as_str()), (0, ""));
}
