//! The configuration fragments through the binary: `config show` says where each value comes
//! from (a fragment's file and line, the environment, the command line, the default), `start`
//! takes its settings from them, and a bad fragment stops it before it does anything.

use std::path::Path;
use std::process::{Command, Output};

const AGENT: &str = env!("CARGO_BIN_EXE_mco-agent");

fn fragment(root: &Path, dir: &str, name: &str, text: &str) {
    let dir = root.join(dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), text).unwrap();
}

fn agent(config_root: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = Command::new(AGENT);
    cmd.args(args)
        .env("MCO_AGENT_CONFIG_ROOT", config_root)
        .env_remove("MCO_AGENT_POOL")
        .env_remove("MCO_AGENT_CONFIG_SERVER")
        .env_remove("MCO_AGENT_KUBECONFIG")
        .env_remove("MCO_AGENT_CONFIG_FILE")
        .env_remove("MCO_AGENT_INSECURE_HTTP");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("running mco-agent")
}

#[test]
fn config_show_names_where_each_value_comes_from() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    fragment(
        r,
        "usr/lib/mco-agent/config.d",
        "10-dist.toml",
        "pool = \"worker\"\npoll_interval = \"10s\"\n",
    );
    fragment(
        r,
        "etc/mco-agent/config.d",
        "50-admin.toml",
        "# ours\npoll_interval = \"45s\"\nskip_reboot = true\nhook_timeout = \"5m\"\n",
    );
    let out = agent(
        r,
        &[("MCO_AGENT_POOL", "infra")],
        &["config", "show", "--drain-mode", "controller"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = String::from_utf8(out.stdout).unwrap();
    let etc = r.join("etc/mco-agent/config.d/50-admin.toml");
    for line in [
        format!("poll_interval = \"45s\"  # {}:2", etc.display()),
        format!("skip_reboot = true  # {}:3", etc.display()),
        format!("hook_timeout = \"5m\"  # {}:4", etc.display()),
        "ansible_playbook = \"ansible-playbook\"  # default".to_string(),
        "pool = \"infra\"  # environment MCO_AGENT_POOL".to_string(),
        "drain_mode = \"controller\"  # command line".to_string(),
        "root = \"/\"  # default".to_string(),
        "# kubeconfig  # not set".to_string(),
        format!(
            "# read: {}",
            r.join("usr/lib/mco-agent/config.d/10-dist.toml").display()
        ),
        format!("# read: {}", etc.display()),
    ] {
        assert!(
            shown.lines().any(|l| l == line),
            "no line {line:?} in:\n{shown}"
        );
    }
}

#[test]
fn start_takes_its_settings_from_the_fragments() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    // a setting `start` refuses at once shows that it read the fragment
    fragment(
        r,
        "etc/mco-agent/config.d",
        "50-server.toml",
        "config_server = \"http://mcs.example:22624\"\n",
    );
    let root = dir.path().join("node");
    std::fs::create_dir_all(&root).unwrap();
    let out = agent(
        r,
        &[],
        &["start", "--root", root.to_str().unwrap(), "--no-metrics"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("http://mcs.example:22624") && stderr.contains("--insecure-http"),
        "{stderr}"
    );
    // the command line wins over the same fragment
    let out = agent(
        r,
        &[],
        &[
            "config",
            "show",
            "--config-server",
            "https://cli.example:22623",
        ],
    );
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("config_server = \"https://cli.example:22623\"  # command line"),
        "{shown}"
    );
}

#[test]
fn a_bad_fragment_stops_start_before_it_does_anything() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    fragment(
        r,
        "etc/mco-agent/config.d",
        "50-typo.toml",
        "\npol_interval = \"3s\"\n",
    );
    let root = dir.path().join("node");
    std::fs::create_dir_all(&root).unwrap();
    let out = agent(r, &[], &["start", "--root", root.to_str().unwrap()]);
    // invalid input (docs/agent.md, "Exit codes")
    assert_eq!(out.status.code(), Some(65));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let file = r.join("etc/mco-agent/config.d/50-typo.toml");
    assert!(
        stderr.starts_with(&format!(
            "error: {}:2: unknown key \"pol_interval\"",
            file.display()
        )),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_dir(&root).unwrap().count(),
        0,
        "start wrote into the root"
    );
}

/// `config show` runs the checks `start` runs (one function): each row's settings are refused
/// by both with the same error and exit code, and `config show` still shows the settings and
/// where they come from. Before, `config show` printed them and exited 0.
#[test]
fn config_show_refuses_what_start_refuses() {
    // (fragment, environment, exit code, error)
    type Row<'a> = (&'a str, &'a [(&'a str, &'a str)], i32, &'a str);
    let rows: &[Row] = &[
        (
            "strategy = \"periodic\"\nwindow = [\"Sat 22:00 3h\"]\ntime_zone = \"Mars/Olympus_Mons\"\n",
            &[],
            65,
            "50-x.toml:3: time_zone: invalid value 'Mars/Olympus_Mons': time zone \"Mars/Olympus_Mons\" is not in the time zone database",
        ),
        (
            "window = [\"Sat 22:00 3h\"]\n",
            &[],
            64,
            "error: --window, --time-zone and --rebootless-outside-windows are for --strategy periodic",
        ),
        (
            "strategy = \"periodic\"\n",
            &[],
            65,
            "error: --strategy periodic: the periodic strategy needs at least one window",
        ),
        (
            "strategy = \"fleet_lock\"\n",
            &[],
            64,
            "error: --strategy fleet_lock needs --fleet-lock-url",
        ),
        (
            "health_deadline = \"0s\"\n",
            &[],
            65,
            "error: --health-deadline and --health-check-timeout must be longer than 0",
        ),
        (
            "config_server = \"http://mcs.example:22624\"\n",
            &[],
            65,
            "error: --config-server http://mcs.example:22624: http://mcs.example:22624: a plain http:// config source",
        ),
        (
            "",
            &[("MCO_AGENT_CONFIG_SERVER", "https://mcs.example:22623")],
            65,
            "an https config server needs --ca",
        ),
    ];
    for (text, env, code, want) in rows {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        fragment(r, "etc/mco-agent/config.d", "50-x.toml", text);
        let root = r.join("node");
        std::fs::create_dir_all(&root).unwrap();
        let root = root.to_str().unwrap();
        let start = agent(r, env, &["start", "--root", root, "--no-metrics"]);
        let show = agent(r, env, &["config", "show", "--root", root]);
        for (what, out) in [("start", &start), ("config show", &show)] {
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(*code), "{what} {text:?}: {stderr}");
            assert!(stderr.contains(want), "{what} {text:?}: {stderr}");
        }
        assert_eq!(
            std::fs::read_dir(root).unwrap().count(),
            0,
            "start wrote into the root"
        );
        // a value its own parser refuses fails the parse; otherwise the settings are shown
        if !want.contains("invalid value") {
            let shown = String::from_utf8_lossy(&show.stdout);
            assert!(shown.contains("root = "), "{text:?}: {shown}");
        }
    }
}

/// The hidden options (test timings) are not in `config show` unless set, and then with their
/// origin.
#[test]
fn config_show_leaves_out_the_hidden_options_unless_they_are_set() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let out = agent(r, &[], &["config", "show"]);
    let shown = String::from_utf8_lossy(&out.stdout);
    for hidden in [
        "drain_attempt_timeout",
        "drain_timeout",
        "drain_retry",
        "health_retry",
        "boot_id_file",
        "fleet_lock_retry",
        "kubelet_healthz_interval",
    ] {
        assert!(!shown.contains(hidden), "{hidden} in:\n{shown}");
    }
    fragment(
        r,
        "etc/mco-agent/config.d",
        "50-x.toml",
        "drain_retry = \"1s\"\n",
    );
    let out = agent(r, &[], &["config", "show"]);
    let shown = String::from_utf8_lossy(&out.stdout);
    let file = r.join("etc/mco-agent/config.d/50-x.toml");
    assert!(
        shown
            .lines()
            .any(|l| l == format!("drain_retry = \"1s\"  # {}:1", file.display())),
        "{shown}"
    );
    assert!(!shown.contains("drain_timeout"), "{shown}");
}
