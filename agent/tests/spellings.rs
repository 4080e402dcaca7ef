//! One spelling per concept (docs/agent.md, "Spellings"): `--node-name`, `--skip-reboot`,
//! `-o json|yaml`, durations, switches that need no value. The first spellings still work as
//! hidden aliases and give the same result; `--help` shows only the canonical ones.

mod common;

use std::fs;

use common::{examples_dir, run, seed_root, text};

fn example(name: &str) -> String {
    examples_dir().join(name).display().to_string()
}

/// A root the examples apply to, with 00-worker-base applied.
fn applied_root() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    seed_root(dir.path());
    let root = dir.path().display().to_string();
    let (out, err, code) = text(&run(&[
        "once-from",
        &example("00-worker-base.yaml"),
        "--root",
        &root,
        "--skip-os",
        "--skip-reboot",
    ]));
    assert_eq!(code, 0, "{out}{err}");
    (dir, root)
}

#[test]
fn old_spellings_are_aliases_with_the_same_result() {
    let (_dir, root) = applied_root();
    let base = example("00-worker-base.yaml");
    let files = example("01-worker-files-only.yaml");
    // (the first spelling, the canonical one)
    let rows: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec!["status", "--root", &root, "--json"],
            vec!["status", "--root", &root, "-o", "json"],
        ),
        (
            vec!["validate", "--config", &base, "--root", &root, "--json"],
            vec![
                "validate", "--config", &base, "--root", &root, "--output", "json",
            ],
        ),
        (
            vec!["diff", &base, &files, "--json"],
            vec!["diff", &base, &files, "-o", "json"],
        ),
        (
            vec![
                "config",
                "show",
                "--root",
                &root,
                "--kubelet-healthz-enabled",
                "false",
            ],
            vec![
                "config",
                "show",
                "--root",
                &root,
                "--kubelet-healthz-enabled=false",
            ],
        ),
    ];
    for (old, new) in rows {
        let (old_out, old_err, old_code) = text(&run(&old));
        let (new_out, new_err, new_code) = text(&run(&new));
        assert_eq!(old_code, new_code, "{old:?}: {old_err}\n{new:?}: {new_err}");
        // the status's report ages move between the two runs
        let stable = |s: &str| {
            s.lines()
                .filter(|l| !l.contains("_ms\""))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(stable(&old_out), stable(&new_out), "{old:?} vs {new:?}");
        assert!(!new_out.is_empty(), "{new:?} printed nothing: {new_err}");
    }
}

#[test]
fn the_node_name_and_skip_reboot_are_spelled_once() {
    // the old spelling parses (it gets as far as the kubeconfig, which does not exist)
    for flag in ["--node", "--node-name"] {
        for command in ["drain", "uncordon"] {
            let (out, err, code) = text(&run(&[
                command,
                flag,
                "worker-0",
                "--kubeconfig",
                "/nonexistent/kubeconfig",
            ]));
            assert_eq!(code, 65, "{command} {flag}: {out}{err}");
            assert!(err.contains("/nonexistent/kubeconfig"), "{err}");
        }
    }
    for (command, canonical, old) in [
        ("drain", "--node-name", "--node "),
        ("uncordon", "--node-name", "--node "),
        ("pivot", "--skip-reboot", "--no-reboot"),
        ("pivot", "--node-name", "--node "),
        ("status", "--output", "--json"),
        ("validate", "--output", "--json"),
        ("diff", "--output", "--json"),
    ] {
        let (help, err, code) = text(&run(&[command, "--help"]));
        assert_eq!(code, 0, "{err}");
        assert!(
            help.contains(canonical),
            "{command} --help lacks {canonical}:\n{help}"
        );
        assert!(!help.contains(old), "{command} --help shows {old}:\n{help}");
    }
}

#[test]
fn output_yaml_is_the_same_object_as_json() {
    let (_dir, root) = applied_root();
    let base = example("00-worker-base.yaml");
    let files = example("01-worker-files-only.yaml");
    for args in [
        vec!["diff", &base, &files],
        vec!["validate", "--config", &base, "--root", &root],
    ] {
        let json = text(&run(&[&args[..], &["-o", "json"]].concat())).0;
        let yaml = text(&run(&[&args[..], &["-o", "yaml"]].concat())).0;
        let from_json: serde_json::Value = serde_json::from_str(&json).unwrap();
        let from_yaml: serde_json::Value = serde_saphyr::from_str(&yaml)
            .unwrap_or_else(|e| panic!("{args:?} -o yaml: {e}\n{yaml}"));
        assert_eq!(from_json, from_yaml, "{args:?}");
    }
    // both spellings at once is a usage error
    let (_, err, code) = text(&run(&["status", "--root", &root, "--json", "-o", "yaml"]));
    assert_eq!(code, 64, "{err}");
}

#[test]
fn a_switch_needs_no_value() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().display().to_string();
    for (args, want) in [
        (
            vec!["--kubelet-healthz-enabled"],
            "kubelet_healthz_enabled = true",
        ),
        (
            vec!["--kubelet-healthz-enabled=false"],
            "kubelet_healthz_enabled = false",
        ),
        (
            vec!["--kubelet-healthz-enabled", "false"],
            "kubelet_healthz_enabled = false",
        ),
    ] {
        let (out, err, code) = text(&run(
            &[&["config", "show", "--root", &root][..], &args[..]].concat()
        ));
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(out.contains(want), "{args:?}: {out}");
    }
}

#[test]
fn validate_without_config_checks_the_config_the_node_is_in() {
    let (dir, root) = applied_root();
    let (out, err, code) = text(&run(&["validate", "--root", &root]));
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    assert!(out.starts_with("on-disk state matches "), "{out}");
    fs::write(dir.path().join("etc/chrony.conf"), "edited by hand\n").unwrap();
    let (out, _, code) = text(&run(&["validate", "--root", &root]));
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("content mismatch for file \"/etc/chrony.conf\""),
        "{out}"
    );

    let empty = tempfile::tempdir().unwrap();
    let (out, err, code) = text(&run(&[
        "validate",
        "--root",
        empty.path().to_str().unwrap(),
    ]));
    assert_eq!(code, 65, "{out}{err}");
    assert_eq!(
        err,
        format!(
            "error: no --config given, and {}/etc/machine-config-daemon/currentconfig does not exist \
             (no config was applied to this root yet): pass --config FILE\n",
            empty.path().display()
        )
    );
}

/// One `MCO_AGENT_` variable per option: a bad value names its variable and what is accepted,
/// an unknown one is warned about with the closest name, the first name of the metrics
/// variable still counts.
#[test]
fn environment_variables_are_named_in_errors_and_typos_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().display().to_string();
    let show = |vars: &[(&str, &str)]| {
        let mut command = common::agent();
        command.args(["config", "show", "--root", &root]);
        for (k, v) in vars {
            command.env(k, v);
        }
        text(&command.env_remove("RUST_LOG").output().unwrap())
    };
    let (_, err, code) = show(&[("MCO_AGENT_DRAIN_MODE", "sideways")]);
    assert_eq!(code, 65, "{err}");
    assert_eq!(
        err,
        "error: MCO_AGENT_DRAIN_MODE=\"sideways\": not a valid value for --drain-mode \
         (accepted: agent, controller)\n"
    );
    let (_, err, code) = show(&[("MCO_AGENT_POLL_INTERVAL", "5")]);
    assert_eq!(code, 65, "{err}");
    assert!(
        err.starts_with(
            "error: MCO_AGENT_POLL_INTERVAL=\"5\": not a valid value for --poll-interval: "
        ),
        "{err}"
    );
    let (out, err, code) = show(&[("MCO_AGENT_SKIP_REBOT", "true")]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(
            "warning: unknown environment variable MCO_AGENT_SKIP_REBOT, ignored (did you mean MCO_AGENT_SKIP_REBOOT?)"
        ),
        "{err}"
    );
    assert!(out.contains("skip_reboot = false"), "{out}");
    let (out, err, code) = show(&[
        ("MCO_AGENT_SKIP_REBOOT", "true"),
        ("MCO_AGENT_POLL_INTERVAL", "5m"),
        ("MCO_METRICS_LISTEN", "127.0.0.1:9999"),
    ]);
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    for want in [
        "skip_reboot = true",
        "poll_interval = \"5m\"",
        "metrics_listen = \"127.0.0.1:9999\"",
    ] {
        assert!(out.contains(want), "{want} not in {out}");
    }
}
