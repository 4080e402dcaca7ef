//! `mco-agent diff` on the examples: exit codes, the exact `-o json` shape, user policies.

mod common;

use std::fs;

use common::{examples_dir, run, text};

fn example(name: &str) -> String {
    examples_dir().join(name).display().to_string()
}

fn diff_json(old: &str, new: &str, extra: &[&str]) -> (serde_json::Value, i32) {
    let mut args = vec!["diff", old, new, "-o", "json"];
    args.extend_from_slice(extra);
    let (stdout, stderr, code) = text(&run(&args));
    // Exactly one JSON object on stdout.
    let mut stream = serde_json::Deserializer::from_str(&stdout).into_iter::<serde_json::Value>();
    let value = stream
        .next()
        .expect("a JSON object")
        .unwrap_or_else(|e| panic!("{e}: {stdout}{stderr}"));
    assert!(
        stream.next().is_none(),
        "more than one JSON value: {stdout}"
    );
    assert!(value.is_object());
    (value, code)
}

#[test]
fn json_has_exactly_the_documented_shape() {
    let (v, code) = diff_json(
        &example("00-worker-base.yaml"),
        &example("01-worker-files-only.yaml"),
        &[],
    );
    assert_eq!(code, 0);
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "reconcilable",
            "reason",
            "files",
            "units",
            "passwd",
            "os_update",
            "kernel_type",
            "extensions",
            "fips",
            "kargs",
            "actions",
            "decisions",
            "drain",
            "reboot"
        ]
    );
    assert_eq!(
        v,
        serde_json::json!({
            "reconcilable": true, "reason": null,
            "files": {"added": [], "changed": ["/etc/containers/policy.json", "/etc/containers/registries.conf"], "removed": []},
            "units": {"added": [], "changed": [], "removed": []},
            "passwd": true, "os_update": false, "kernel_type": false,
            "extensions": {"install": [], "uninstall": []}, "fips": false, "kargs": [],
            "actions": [{"type": "Reload", "unit": "crio.service"}, {"type": "Special"}],
            "decisions": [
                {"subject": {"kind": "file", "name": "/etc/containers/policy.json"},
                 "actions": [{"type": "Reload", "unit": "crio.service"}],
                 "rule": {"by": "policy", "origin": "default", "entry": "/etc/containers/policy.json"}},
                {"subject": {"kind": "file", "name": "/etc/containers/registries.conf"},
                 "actions": [{"type": "Special"}],
                 "rule": {"by": "policy", "origin": "default", "entry": "/etc/containers/registries.conf"}},
                {"subject": {"kind": "ssh_keys"},
                 "actions": [{"type": "None"}],
                 "rule": {"by": "policy", "origin": "default", "entry": "sshkey"}}
            ],
            "drain": false, "reboot": false
        })
    );
}

#[test]
fn kargs_change_reboots_with_the_rpm_ostree_argv() {
    let (v, code) = diff_json(
        &example("00-worker-base.yaml"),
        &example("02-worker-kargs.yaml"),
        &[],
    );
    assert_eq!(code, 0);
    assert_eq!(
        v["kargs"],
        serde_json::json!([
            "--delete-if-present=systemd.unified_cgroup_hierarchy=1",
            "--append=systemd.unified_cgroup_hierarchy=1",
            "--append=nosmt",
            "--append=mitigations=auto,nosmt"
        ])
    );
    assert_eq!(v["actions"], serde_json::json!([{"type": "Reboot"}]));
    assert_eq!(
        (v["drain"].as_bool(), v["reboot"].as_bool()),
        (Some(true), Some(true))
    );
}

#[test]
fn user_policy_replaces_the_reboot() {
    let (old, new) = (
        example("00-worker-base.yaml"),
        example("03-worker-chrony.yaml"),
    );
    let (v, _) = diff_json(&old, &new, &[]);
    assert_eq!(v["actions"], serde_json::json!([{"type": "Reboot"}]));
    let (v, code) = diff_json(&old, &new, &["--policy", &example("policy.yaml")]);
    assert_eq!(code, 0);
    assert_eq!(
        v["actions"],
        serde_json::json!([{"type": "Restart", "unit": "chronyd.service"}])
    );
    assert_eq!(
        (v["drain"].as_bool(), v["reboot"].as_bool()),
        (Some(false), Some(false))
    );
}

#[test]
fn unreconcilable_exits_2_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("dirs.ign");
    fs::write(
        &bad,
        r#"{"ignition":{"version":"3.2.0"},"storage":{"directories":[{"path":"/var/lib/x"}]}}"#,
    )
    .unwrap();
    let bad = bad.display().to_string();
    let old = example("00-worker-base.yaml");
    let (stdout, stderr, code) = text(&run(&["diff", &old, &bad]));
    assert_eq!(code, 2);
    // the short version for people: the section and what in it, one line each
    insta::assert_snapshot!("unreconcilable_directories", stdout);
    // what to do: the force file does not help, no override exists for directories
    assert_eq!(
        stderr,
        format!(
            "hint: a running node refuses this change, even with the force file: fix or revert it in {bad}\n"
        )
    );
    // the MCD's words where its users grep for them
    let (v, code) = diff_json(&old, &bad, &[]);
    assert_eq!(code, 2);
    assert_eq!(v["reconcilable"], false);
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .ends_with("ignition directories section contains changes")
    );
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .starts_with("can't reconcile config 00-worker-base with dirs: ")
    );
}

#[test]
fn kernel_arguments_read_as_added_and_removed() {
    let (stdout, stderr, code) = text(&run(&[
        "diff",
        &example("00-worker-base.yaml"),
        &example("02-worker-kargs.yaml"),
    ]));
    assert_eq!(code, 0, "{stderr}");
    insta::assert_snapshot!("kargs_plan", stdout);
    let (stdout, _, code) = text(&run(&[
        "diff",
        &example("02-worker-kargs.yaml"),
        &example("00-worker-base.yaml"),
    ]));
    assert_eq!(code, 0);
    assert!(
        stdout.contains("\nkernel arguments: -nosmt -mitigations=auto,nosmt\n"),
        "{stdout}"
    );
}

#[test]
fn bad_policy_is_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    fs::write(&policy, "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nspec:\n  nodeDisruptionPolicy:\n    files:\n    - path: /etc/x\n      actions:\n      - type: Explode\n").unwrap();
    let (stdout, stderr, code) = text(&run(&[
        "diff",
        &example("00-worker-base.yaml"),
        &example("01-worker-files-only.yaml"),
        "--policy",
        &policy.display().to_string(),
    ]));
    // invalid input (docs/agent.md, "Exit codes")
    assert_eq!((code, stdout.as_str()), (65, ""));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "error: {}: $.spec.nodeDisruptionPolicy.files.0.actions.0",
            policy.display()
        )),
        "{stderr}"
    );
}

/// The plan names the policy entry that chose each change's actions: the default table's, or
/// the policy file's (merged over it as the MCO merges the cluster's).
#[test]
fn the_plan_names_the_policy_behind_each_action() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    fs::write(&policy, "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: cluster}\nspec:\n  nodeDisruptionPolicy:\n    files:\n    - path: /etc/containers/registries.conf\n      actions:\n      - type: Restart\n        restart: {serviceName: crio.service}\n").unwrap();
    let (stdout, stderr, code) = text(&run(&[
        "diff",
        &example("00-worker-base.yaml"),
        &example("01-worker-files-only.yaml"),
        "--policy",
        &policy.display().to_string(),
    ]));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(
            "actions: Reload crio.service, Restart crio.service\n  \
             /etc/containers/policy.json: Reload crio.service (default policy)\n  \
             /etc/containers/registries.conf: Restart crio.service (cluster policy /etc/containers/registries.conf)\n  \
             SSH keys: None (default policy)\n\
             drain: no\nreboot: no\n"
        ),
        "{stdout}"
    );
}

/// An unknown key (a typo) is named with its file, its path as written in the MachineConfig
/// and the closest known key; `--strict` refuses it (invalid input) and prints no plan.
#[test]
fn unknown_key_names_file_and_path_and_strict_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("typo.yaml");
    let text_in = fs::read_to_string(examples_dir().join("01-worker-files-only.yaml")).unwrap();
    assert!(text_in.contains("        overwrite: true\n"));
    fs::write(
        &typo,
        text_in.replacen("        overwrite: true\n", "        overwrte: true\n", 1),
    )
    .unwrap();
    let base = example("00-worker-base.yaml");
    let typo = typo.display().to_string();
    let expected = format!(
        "{typo}: $.spec.config.storage.files.0.overwrte: unused key overwrte (did you mean overwrite?)"
    );

    let (stdout, stderr, code) = text(&run(&["diff", &base, &typo]));
    assert_eq!(code, 0, "{stderr}");
    assert!(!stdout.is_empty());
    assert!(
        stderr
            .lines()
            .any(|l| l == format!("warning: {expected}; ignored")),
        "{stderr}"
    );

    let (stdout, stderr, code) = text(&run(&["diff", &base, &typo, "--strict"]));
    // invalid input (docs/agent.md, "Exit codes")
    assert_eq!((code, stdout.as_str()), (65, ""), "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l == format!("error: {expected} (refused by --strict)")),
        "{stderr}"
    );
    // Without a typo, --strict changes nothing.
    let (_, stderr, code) = text(&run(&[
        "diff",
        &base,
        &example("01-worker-files-only.yaml"),
        "--strict",
    ]));
    assert_eq!(code, 0, "{stderr}");
}

/// An Ignition config of `files` (path, mode, contents) written as `NAME.json` in `dir`.
fn files_config(dir: &std::path::Path, name: &str, files: &[(&str, u32, &[u8])]) -> String {
    use base64::Engine as _;
    let files: Vec<serde_json::Value> = files
        .iter()
        .map(|(path, mode, bytes)| {
            let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
            serde_json::json!({"path": path, "mode": mode,
                "contents": {"source": format!("data:;base64,{b64}")}})
        })
        .collect();
    let path = dir.join(format!("{name}.json"));
    let ign = serde_json::json!({"ignition": {"version": "3.2.0"}, "storage": {"files": files}});
    fs::write(&path, ign.to_string()).unwrap();
    path.display().to_string()
}

/// Each changed file gets its short hashes; `--show-contents` adds how a plain file changes
/// (a unified diff, OLD's name against NEW's) and shows none of the bytes of a file others may
/// not read, of one under /etc/kubernetes or of a binary file.
#[test]
fn changed_files_show_hashes_and_with_show_contents_how_they_change() {
    let dir = tempfile::tempdir().unwrap();
    let old = files_config(
        dir.path(),
        "rendered-old",
        &[
            (
                "/etc/plain.conf",
                0o644,
                b"one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n",
            ),
            ("/etc/private.conf", 0o600, b"password=OLD-PRIVATE\n"),
            (
                "/etc/kubernetes/kubelet.conf",
                0o644,
                b"token: OLD-KUBE-TOKEN\n",
            ),
            ("/etc/blob.bin", 0o644, b"\xffOLD-BINARY\x00"),
            ("/etc/mode.conf", 0o644, b"same\n"),
        ],
    );
    let new = files_config(
        dir.path(),
        "rendered-new",
        &[
            (
                "/etc/plain.conf",
                0o644,
                b"one\ntwo\nthree\nfour\nfive, changed\nsix\nseven\neight\n",
            ),
            ("/etc/private.conf", 0o600, b"password=NEW-PRIVATE!\n"),
            (
                "/etc/kubernetes/kubelet.conf",
                0o644,
                b"token: NEW-KUBE-TOKEN\n",
            ),
            ("/etc/blob.bin", 0o644, b"\xfeNEW-BINARY\x00\x01"),
            ("/etc/mode.conf", 0o755, b"same\n"),
        ],
    );
    let secrets = [
        "OLD-PRIVATE",
        "NEW-PRIVATE",
        "OLD-KUBE-TOKEN",
        "NEW-KUBE-TOKEN",
        "OLD-BINARY",
        "NEW-BINARY",
    ];
    let (stdout, stderr, code) = text(&run(&["diff", &old, &new, "--show-contents"]));
    assert_eq!(code, 0, "{stderr}");
    insta::assert_snapshot!("show_contents", stdout);
    for secret in secrets {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{secret} shown:\n{stdout}{stderr}"
        );
    }

    // without the option: each changed file's hash line only
    let (plain, stderr, code) = text(&run(&["diff", &old, &new]));
    assert_eq!(code, 0, "{stderr}");
    let kept: Vec<&str> = stdout
        .lines()
        .filter(|l| !l.starts_with("  ") || l.starts_with("  rendered-old "))
        .collect();
    let plain_lines: Vec<&str> = plain
        .lines()
        .filter(|l| !l.starts_with("  ") || l.starts_with("  rendered-old "))
        .collect();
    assert_eq!(plain_lines, kept, "{plain}");
    assert!(
        plain.contains(
            "files changed: /etc/private.conf\n  rendered-old 21 bytes, rendered-new 22 bytes (no hash of a file others may not read)\n"
        ),
        "{plain}"
    );
    assert!(!plain.contains("---") && !plain.contains("@@"), "{plain}");

    // -o json keeps its shape: the two do not go together
    let (stdout, _, code) = text(&run(&["diff", &old, &new, "--show-contents", "-o", "json"]));
    assert_eq!((code, stdout.as_str()), (64, ""));
}
