//! Validation on temp roots: exact MCD messages, every mismatch, facts without contents.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use super::report::sha256_hex;
use super::*;

const CONFIG: &str = r#"{
  "ignition": {"version": "3.2.0"},
  "storage": {"files": [
    {"path": "/etc/a.conf", "mode": 420, "contents": {"source": "data:,hello%0A"}},
    {"path": "/etc/b.conf", "mode": 384, "contents": {"source": "data:;base64,c2VjcmV0Cg=="}},
    {"path": "/etc/kubernetes/kubelet-ca.crt", "contents": {"source": "data:,ca"}}
  ]},
  "systemd": {"units": [
    {"name": "x.service", "enabled": true,
     "contents": "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
     "dropins": [{"name": "10-a.conf", "contents": "[Service]\nNice=1\n"}, {"name": "20-empty.conf"}]},
    {"name": "m.service", "mask": true},
    {"name": "off.service", "enabled": false, "contents": "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"}
  ]}
}"#;

fn config() -> Config {
    Config::parse(CONFIG.as_bytes()).unwrap()
}

fn write(root: &Path, path: &str, contents: &str, mode: u32) {
    let p = root.join(path.trim_start_matches('/'));
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(&p, contents).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
}

/// A root that matches [`CONFIG`].
fn matching_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(r, "/etc/a.conf", "hello\n", 0o644);
    write(r, "/etc/b.conf", "secret\n", 0o600);
    let unit = "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n";
    write(r, "/etc/systemd/system/x.service", unit, 0o644);
    write(
        r,
        "/etc/systemd/system/x.service.d/10-a.conf",
        "[Service]\nNice=1\n",
        0o644,
    );
    write(r, "/etc/systemd/system/off.service", unit, 0o644);
    fs::create_dir_all(r.join("etc/systemd/system/multi-user.target.wants")).unwrap();
    symlink(
        "/etc/systemd/system/x.service",
        r.join("etc/systemd/system/multi-user.target.wants/x.service"),
    )
    .unwrap();
    symlink("/dev/null", r.join("etc/systemd/system/m.service")).unwrap();
    dir
}

fn run(dir: &tempfile::TempDir) -> ValidationReport {
    let root = Root::open(dir.path()).unwrap();
    validate(&root, "rendered-worker-1", &config())
}

#[test]
fn matching_root_is_ok() {
    let dir = matching_root();
    let report = run(&dir);
    assert!(report.is_ok(), "{:#?}", report.mismatches);
    assert_eq!(report.mcd_error(), None);
    assert!(report.lines().is_empty());
}

/// Each case breaks the matching root one way and expects exactly these MCD messages.
#[test]
fn each_drift_gives_the_mcd_message() {
    type Breaker = fn(&Path);
    let cases: &[(&str, Breaker, &[&str])] = &[
        (
            "missing file",
            |r| fs::remove_file(r.join("etc/a.conf")).unwrap(),
            &[r#"could not stat file "/etc/a.conf": lstat /etc/a.conf: no such file or directory"#],
        ),
        (
            "mode",
            |r| {
                fs::set_permissions(r.join("etc/a.conf"), fs::Permissions::from_mode(0o755))
                    .unwrap()
            },
            &[
                r#"mode mismatch for file: "/etc/a.conf"; expected: -rw-r--r--/420/0644; received: -rwxr-xr-x/493/0755"#,
            ],
        ),
        (
            "content",
            |r| fs::write(r.join("etc/b.conf"), "public\n").unwrap(),
            &[r#"content mismatch for file "/etc/b.conf""#],
        ),
        (
            "mode and content",
            |r| {
                fs::write(r.join("etc/a.conf"), "x").unwrap();
                fs::set_permissions(r.join("etc/a.conf"), fs::Permissions::from_mode(0o600))
                    .unwrap();
            },
            &[
                r#"mode mismatch for file: "/etc/a.conf"; expected: -rw-r--r--/420/0644; received: -rw-------/384/0600"#,
                r#"content mismatch for file "/etc/a.conf""#,
            ],
        ),
        (
            "symlink instead of file",
            |r| {
                fs::remove_file(r.join("etc/a.conf")).unwrap();
                symlink("/etc/b.conf", r.join("etc/a.conf")).unwrap();
            },
            &[
                r#"mode mismatch for file: "/etc/a.conf"; expected: -rw-r--r--/420/0644; received: Lrwxrwxrwx/134218239/01000000777"#,
            ],
        ),
        (
            "parent is a file",
            |r| {
                fs::remove_dir_all(r.join("etc/systemd/system/x.service.d")).unwrap();
                fs::write(r.join("etc/systemd/system/x.service.d"), "").unwrap();
            },
            &[
                r#"could not stat file "/etc/systemd/system/x.service.d/10-a.conf": lstat /etc/systemd/system/x.service.d/10-a.conf: not a directory"#,
                r#"stat /etc/systemd/system/x.service.d/20-empty.conf: not a directory"#,
            ],
        ),
        (
            "dropin content",
            |r| fs::write(r.join("etc/systemd/system/x.service.d/10-a.conf"), "").unwrap(),
            &[r#"content mismatch for file "/etc/systemd/system/x.service.d/10-a.conf""#],
        ),
        (
            "empty dropin present with content",
            |r| {
                fs::write(r.join("etc/systemd/system/x.service.d/20-empty.conf"), "x").unwrap();
            },
            &[r#"content mismatch for file "/etc/systemd/system/x.service.d/20-empty.conf""#],
        ),
        (
            "unit disabled",
            |r| {
                fs::remove_file(r.join("etc/systemd/system/multi-user.target.wants/x.service"))
                    .unwrap()
            },
            &[r#"unit "x.service" expected enabled=true, but systemd reports "disabled""#],
        ),
        (
            "unit enabled",
            |r| {
                symlink(
                    "/etc/systemd/system/off.service",
                    r.join("etc/systemd/system/multi-user.target.wants/off.service"),
                )
                .unwrap()
            },
            &[r#"unit "off.service" expected enabled=false, but systemd reports "enabled""#],
        ),
        (
            "mask is a file",
            |r| {
                fs::remove_file(r.join("etc/systemd/system/m.service")).unwrap();
                fs::write(r.join("etc/systemd/system/m.service"), "").unwrap();
            },
            &[
                r#"state validation: invalid unit masked setting. path: "/etc/systemd/system/m.service"; expected: /dev/null; received: /etc/systemd/system/m.service"#,
            ],
        ),
        (
            "mask missing",
            |r| fs::remove_file(r.join("etc/systemd/system/m.service")).unwrap(),
            &[
                r#"state validation: error while evaluation symlink for path "/etc/systemd/system/m.service": lstat /etc/systemd/system/m.service: no such file or directory"#,
            ],
        ),
        (
            "mask via relative chain",
            |r| {
                fs::remove_file(r.join("etc/systemd/system/m.service")).unwrap();
                symlink("../../../dev/null", r.join("etc/systemd/system/m.service")).unwrap();
            },
            &[],
        ),
        (
            "skipped file may drift",
            |r| write(r, "/etc/kubernetes/kubelet-ca.crt", "other", 0o600),
            &[],
        ),
    ];
    for (name, breaker, want) in cases {
        let dir = matching_root();
        breaker(dir.path());
        let report = run(&dir);
        let got: Vec<&str> = report
            .mismatches
            .iter()
            .map(|m| m.message.as_str())
            .collect();
        assert_eq!(&got, want, "case {name}");
    }
}

#[test]
fn report_lists_every_mismatch_with_facts_and_no_contents() {
    let dir = matching_root();
    fs::write(dir.path().join("etc/b.conf"), "leaked-secret-value\n").unwrap();
    fs::remove_file(dir.path().join("etc/a.conf")).unwrap();
    let report = run(&dir);
    let lines = report.lines();
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert_eq!(
        lines[0],
        r#"unexpected on-disk state validating against rendered-worker-1: could not stat file "/etc/a.conf": lstat /etc/a.conf: no such file or directory"#
    );
    assert_eq!(
        lines[1],
        format!(
            r#"could not stat file "/etc/a.conf": lstat /etc/a.conf: no such file or directory (expected: mode 0644, 6 bytes, sha256 {}; found: nothing)"#,
            sha256_hex(b"hello\n")
        )
    );
    assert_eq!(
        lines[2],
        // a file others may not read: no digest of it (an unsalted hash of a short secret
        // is the secret to whoever can guess it)
        r#"content mismatch for file "/etc/b.conf" (expected: mode 0600, 7 bytes; found: mode 0600, 20 bytes)"#
    );
    let json = serde_json::to_string(&report.mismatches).unwrap();
    assert!(
        !json.contains("secret\\n") && !json.contains("leaked"),
        "{json}"
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v[1]["kind"], "content");
    assert_eq!(v[1]["found"]["size"], 20);
    assert_eq!(v[0]["found"], serde_json::Value::Null);
}

#[test]
fn many_files_are_checked_in_parallel_and_reported_in_the_config_order() {
    use base64::Engine as _;
    let dir = tempfile::tempdir().unwrap();
    // Enough bytes of sources for every core to take a part.
    let count = 203;
    let per_file = 4 * BYTES_PER_THREAD / count;
    let files: Vec<serde_json::Value> = (0..count)
        .map(|i| {
            let path = format!("/etc/many/f{i:03}");
            let same = format!("{i:03}").repeat(per_file / 3);
            // Every seventh file drifted (same size, other bytes), every eleventh was cut short.
            let on_disk = match (i % 7, i % 11) {
                (0, _) => format!("x{}", &same[1..]),
                (_, 0) => same[1..].to_string(),
                _ => same.clone(),
            };
            write(dir.path(), &path, &on_disk, 0o644);
            let b64 = base64::engine::general_purpose::STANDARD.encode(&same);
            serde_json::json!({"path": path, "mode": 420, "contents": {"source": format!("data:;base64,{b64}")}})
        })
        .collect();
    let config = Config::parse(
        serde_json::json!({"ignition": {"version": "3.2.0"}, "storage": {"files": files}})
            .to_string()
            .as_bytes(),
    )
    .unwrap();
    let root = Root::open(dir.path()).unwrap();
    let report = validate(&root, "rendered-worker-1", &config);
    let drifted: Vec<String> = (0..count)
        .filter(|i| i % 7 == 0 || i % 11 == 0)
        .map(|i| format!("/etc/many/f{i:03}"))
        .collect();
    let found: Vec<&str> = report.mismatches.iter().map(|m| m.path.as_str()).collect();
    assert_eq!(found, drifted);
    assert!(
        report
            .mismatches
            .iter()
            .all(|m| m.kind == MismatchKind::Content)
    );
}

#[test]
fn contents_that_do_not_decode_are_reported_even_when_the_file_holds_their_bytes() {
    use base64::Engine as _;
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let text = "kubelet config\n".repeat(5000);
    let b64 = |b: &[u8]| {
        format!(
            "data:;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(b)
        )
    };
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(text.as_bytes()).unwrap();
    let gz = gz.finish().unwrap();
    let good_hash = format!("sha256-{}", sha256_hex(text.as_bytes()));
    let bad_hash = format!("sha256-{}", "0".repeat(64));
    for path in ["/etc/plain", "/etc/gzip", "/etc/hashed", "/etc/bad-hash"] {
        write(dir.path(), path, &text, 0o644);
    }
    let config = serde_json::json!({"ignition": {"version": "3.2.0"}, "storage": {"files": [
        {"path": "/etc/plain", "mode": 420, "contents": {"source": b64(text.as_bytes())}},
        {"path": "/etc/gzip", "mode": 420, "contents": {"source": b64(&gz), "compression": "gzip"}},
        {"path": "/etc/hashed", "mode": 420, "contents": {"source": b64(&gz), "compression": "gzip",
            "verification": {"hash": good_hash}}},
        {"path": "/etc/bad-hash", "mode": 420, "contents": {"source": b64(text.as_bytes()),
            "verification": {"hash": bad_hash}}},
    ]}});
    let config = Config::parse(config.to_string().as_bytes()).unwrap();
    let root = Root::open(dir.path()).unwrap();
    let report = validate(&root, "rendered-worker-1", &config);
    let found: Vec<(&str, MismatchKind)> = report
        .mismatches
        .iter()
        .map(|m| (m.path.as_str(), m.kind))
        .collect();
    assert_eq!(found, [("/etc/bad-hash", MismatchKind::Decode)]);
    assert!(
        report.mismatches[0]
            .message
            .starts_with("couldn't decode file \"/etc/bad-hash\": hash verification failed"),
        "{}",
        report.mismatches[0].message
    );
}

/// The unit rules of the spec a config was written in, as the MCD's `validateOnDiskStateImpl`
/// picks them: one row per decision, naming the MCD function.
#[test]
fn units_are_checked_with_the_rules_of_their_spec() {
    type Breaker = fn(&Path);
    let disabled: &[&str] =
        &[r#"unit "x.service" expected enabled=true, but systemd reports "disabled""#];
    let empty_present: Breaker = |r| {
        write(
            r,
            "/etc/systemd/system/x.service.d/20-empty.conf",
            "",
            0o644,
        )
    };
    let disable: Breaker = |r| {
        fs::remove_file(r.join("etc/systemd/system/multi-user.target.wants/x.service")).unwrap()
    };
    let rows: &[(&str, SpecRules, Option<Breaker>, &[&str])] = &[
        (
            "checkV3Dropin: an empty drop-in may be missing",
            SpecRules::V3,
            None,
            &[],
        ),
        (
            "checkV3Dropin: or present and empty",
            SpecRules::V3,
            Some(empty_present),
            &[],
        ),
        // Deliberate difference: `checkV2Unit` requires the empty drop-in the writer removed.
        (
            "checkV2Unit (deliberately not): an empty drop-in may be missing",
            SpecRules::V2,
            None,
            &[],
        ),
        (
            "checkV2Unit: an empty one too, empty",
            SpecRules::V2,
            Some(empty_present),
            &[],
        ),
        (
            "checkV3Unit: checkUnitEnabled",
            SpecRules::V3,
            Some(disable),
            disabled,
        ),
        (
            "checkV2Unit: enablement not checked",
            SpecRules::V2,
            Some(|r| {
                write(
                    r,
                    "/etc/systemd/system/x.service.d/20-empty.conf",
                    "",
                    0o644,
                );
                fs::remove_file(r.join("etc/systemd/system/multi-user.target.wants/x.service"))
                    .unwrap()
            }),
            &[],
        ),
    ];
    for (mcd, rules, breaker, want) in rows {
        let dir = matching_root();
        if let Some(b) = breaker {
            b(dir.path());
        }
        let root = Root::open(dir.path()).unwrap();
        let report = validate_as(&root, "rendered-worker-1", &config(), *rules);
        let got: Vec<&str> = report
            .mismatches
            .iter()
            .map(|m| m.message.as_str())
            .collect();
        assert_eq!(&got, want, "{mcd}");
    }
    // The rules follow the version the MachineConfig's config declares.
    for (version, want) in [
        ("2.2.0", SpecRules::V2),
        ("3.2.0", SpecRules::V3),
        ("3.5.0", SpecRules::V3),
    ] {
        let mc = MachineConfig::from_value(serde_json::json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {"name": "rendered-worker-1"},
            "spec": {"config": {"ignition": {"version": version}}},
        }))
        .unwrap();
        assert_eq!(SpecRules::of(&mc), want, "{version}");
    }
}
