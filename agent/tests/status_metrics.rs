//! `mco-agent status` on the files the agent keeps (no daemon), and `status` and the metrics
//! endpoint of a running `mco-agent start` (the companion over TLS, the rpm-ostree stand-in
//! over a real ostree sysroot on a private bus, a fake logind; see `daemon_env`).

mod common;
mod daemon_env;
mod os_env;

use std::path::Path;
use std::process::Output;

use common::{examples_dir, seed_root, text};
use daemon_env::{Node, done_in, machine_config, secs};
use machine_config::mco::NodeState;
use mco_agent::engine::Status;
use mco_agent::engine::record::{self, Step, UpdateRecord};
use mco_agent::engine::report::{LastUpdate, STATUS_FILE};
use mco_agent::input;
use mco_agent::rootfs::{Owner, Root};
use mco_test_support::sysroot::TestSysroot;
use serde_json::Value;

fn status(args: &[&str], bus: Option<&str>) -> Output {
    status_reading_with(args, bus, &common::sysroot_reader_bin())
}

/// `status` with `reader` as the sysroot reader (`mco-sysroot-status`).
fn status_reading_with(args: &[&str], bus: Option<&str>, reader: &Path) -> Output {
    let mut cmd = common::agent();
    cmd.arg("status")
        .args(args)
        .env_remove("RUST_LOG")
        .env("MCO_SYSROOT_STATUS_BIN", reader);
    match bus {
        Some(address) => cmd.env("DBUS_SYSTEM_BUS_ADDRESS", address),
        // Nothing listens there: rpm-ostree is unreachable at once.
        None => cmd.env("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/bus"),
    };
    cmd.output().unwrap()
}

fn status_json(args: &[&str], bus: Option<&str>) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    let out = status(&all, bus);
    let (stdout, stderr, code) = text(&out);
    assert_eq!(code, 0, "{stdout}{stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn human(args: &[&str]) -> String {
    let out = status(args, None);
    let (stdout, stderr, code) = text(&out);
    assert_eq!(code, 0, "{stdout}{stderr}");
    stdout
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn status_reads_the_agents_files_without_a_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let root_dir = dir.path().join("root");
    seed_root(&root_dir);
    let sysroot = TestSysroot::builder()
        .kargs(&["root=LABEL=root", "rw", "mco.test=1"])
        .build()
        .unwrap();
    let boot_file = dir.path().join("boot_id");
    std::fs::write(&boot_file, "boot-1\n").unwrap();
    let base = examples_dir().join("00-worker-base.yaml");
    let out = common::run(&[
        "once-from",
        p(&base),
        "--root",
        p(&root_dir),
        "--skip-os",
        "--skip-reboot",
    ]);
    assert!(out.status.success(), "{:?}", text(&out));
    let args = [
        "--root",
        p(&root_dir),
        "--sysroot",
        p(sysroot.path()),
        "--boot-id-file",
        p(&boot_file),
    ];

    // Nothing but currentconfig and the sysroot: the rest is said to be unknown.
    let v = status_json(&args, None);
    assert_eq!(v["state"], Value::Null);
    assert_eq!(v["current"], "00-worker-base");
    let unreadable = v["unreadable"].as_array().unwrap();
    assert_eq!(unreadable.len(), 1, "{unreadable:?}");
    assert!(
        unreadable[0]
            .as_str()
            .unwrap()
            .ends_with("run/mco-agent/status.json: absent (the agent has not run since the node booted): state, reason and last update unknown"),
        "{unreadable:?}"
    );
    let deployed = &sysroot.deployments().unwrap()[0];
    let running = &v["deployments"]["running"];
    assert_eq!(running["checksum"], deployed.checksum.as_str());
    assert_eq!(running["version"], "1.0");
    assert!(
        running["kargs"]
            .as_str()
            .unwrap()
            .starts_with("root=LABEL=root rw mco.test=1"),
        "{running}"
    );
    assert_eq!(v["deployments"]["booted"], false);
    assert_eq!(
        v["deployments"]["source"],
        format!("sysroot {}", sysroot.path().display())
    );

    // A status file and an update waiting for its reboot.
    let root = Root::open(&root_dir).unwrap();
    let current = input::read_current(&root).unwrap().unwrap().machine_config;
    let mut next = current.clone();
    next.metadata.name = Some("rendered-worker-next".into());
    next.spec.kernel_arguments.push("nosmt".into());
    let mut rec = UpdateRecord::new(current, next, Step::RebootRequested, "boot-1");
    rec.reboot = true;
    record::store(&root, &rec).unwrap();
    let file = Status {
        current: Some("00-worker-base".into()),
        desired: Some("rendered-worker-next".into()),
        current_image: None,
        desired_image: None,
        state: NodeState::Working,
        reason: String::new(),
        pending_step: Some("RebootRequested".into()),
        needs_reboot: false,
        last_update: Some(LastUpdate {
            from: "00-worker-base".into(),
            to: "rendered-worker-next".into(),
            started_ms: rec.started_ms,
            result: "Rebooting".into(),
            reboot: true,
            ..LastUpdate::default()
        }),
        updated_ms: rec.started_ms,
        strategy: None,
        ..Status::default()
    };
    root.write_atomic(
        Path::new(STATUS_FILE),
        &serde_json::to_vec(&file).unwrap(),
        0o644,
        Owner::ROOT,
    )
    .unwrap();
    let v = status_json(&args, None);
    assert_eq!(v["state"], "Working");
    assert_eq!(v["desired"], "rendered-worker-next");
    assert_eq!(v["pending"]["step"], "RebootRequested");
    assert_eq!(v["pending"]["this_boot"], true);
    assert_eq!(v["pending"]["reboot"], true);
    assert_eq!(v["last_update"]["result"], "Rebooting");
    assert_eq!(v["unreadable"], serde_json::json!([]));
    let text = human(&args);
    for want in [
        // no daemon wrote this file: what it says is not current
        "Agent:        not running (no daemon has written the status file since the boot)\n",
        "State:        Working (as last reported, ",
        "Current:      00-worker-base\n",
        "Desired:      rendered-worker-next\n",
        "Pending:      00-worker-base -> rendered-worker-next at RebootRequested: reboot requested in this boot, waiting for it\n",
        "Last update:  00-worker-base -> rendered-worker-next: Rebooting, with a reboot, ",
        "Default:      fakeos ",
        "              kernel arguments: root=LABEL=root rw mco.test=1",
        "Next boot:    none\n",
    ] {
        assert!(text.contains(want), "{want:?} not in\n{text}");
    }
    assert!(!text.contains("Not read:"), "{text}");

    // After the reboot.
    std::fs::write(&boot_file, "boot-2\n").unwrap();
    assert!(human(&args).contains(
        "at RebootRequested: rebooted since; the agent verifies the update when it starts\n"
    ));

    // A record that cannot be read is named; the rest is still shown.
    std::fs::write(
        root_dir.join(record::UPDATE_RECORD.trim_start_matches('/')),
        "{",
    )
    .unwrap();
    let v = status_json(&args, None);
    assert_eq!(v["state"], "Working");
    assert_eq!(v["pending"], Value::Null);
    let unreadable = v["unreadable"].to_string();
    assert!(
        unreadable.contains("mco-agent-update.json: unreadable update record"),
        "{unreadable}"
    );

    // Not a sysroot, no rpm-ostree: the deployments are unknown, and why.
    let v = status_json(&["--root", p(&root_dir)], None);
    assert_eq!(v["deployments"], Value::Null);
    let unreadable = v["unreadable"].to_string();
    assert!(
        unreadable.contains(&format!(
            "deployments: ostree sysroot {}",
            root_dir.display()
        )) && unreadable
            .contains("and not from rpm-ostree: connecting to rpm-ostree on the system bus"),
        "{unreadable}"
    );
}

/// The sysroot reader missing or failing: said, with what rpm-ostree said (nothing listens on
/// the bus here); the rest of the status is still shown. The same reader with rpm-ostree on the
/// bus is in `status_and_metrics_of_a_running_daemon`.
#[test]
fn a_missing_or_failing_sysroot_reader_is_said_and_rpm_ostree_asked() {
    let dir = tempfile::tempdir().unwrap();
    let root_dir = dir.path().join("root");
    seed_root(&root_dir);
    let sysroot = TestSysroot::builder().build().unwrap();
    let args = [
        "--root",
        p(&root_dir),
        "--sysroot",
        p(sysroot.path()),
        "-o",
        "json",
    ];
    let missing = dir.path().join("libexec/mco-sysroot-status");
    for (reader, why) in [
        (
            missing.as_path(),
            format!(
                "running the sysroot reader {}: no such file or directory",
                missing.display()
            ),
        ),
        (
            Path::new("/bin/false"),
            "the sysroot reader /bin/false failed (exit status: 1)".to_string(),
        ),
    ] {
        let out = status_reading_with(&args, None, reader);
        let (stdout, stderr, code) = text(&out);
        assert_eq!(code, 0, "{stdout}{stderr}");
        let v: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(v["deployments"], Value::Null, "{v}");
        assert_eq!(v["current"], Value::Null);
        let unreadable: Vec<&str> = v["unreadable"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u.as_str().unwrap())
            .collect();
        let deployments = unreadable
            .iter()
            .find(|u| u.starts_with("deployments: "))
            .unwrap_or_else(|| panic!("{unreadable:?}"));
        let expected = format!(
            "deployments: ostree sysroot {}: {why}; and not from rpm-ostree: connecting to rpm-ostree on the system bus",
            sysroot.path().display()
        );
        assert!(deployments.starts_with(&expected), "{deployments}");
        // The other files are still read and reported.
        assert!(
            unreadable
                .iter()
                .any(|u| u.ends_with("machine-config-daemon/currentconfig: absent (no config was applied to this root yet)")),
            "{unreadable:?}"
        );
    }
}

/// An address nothing listens on (yet).
fn free_port() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// The sample lines of the exposition at `url` (comments dropped).
async fn scrape(url: &str) -> Vec<String> {
    mco_test_support::tls::install_ring_provider();
    let body = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(body.ends_with("# EOF\n"), "{body}");
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// The value of the sample whose series (name and labels) is exactly `series`.
fn sample(lines: &[String], series: &str) -> Option<f64> {
    lines.iter().find_map(|l| {
        let (s, v) = l.rsplit_once(' ')?;
        (s == series).then(|| v.parse().unwrap())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_metrics_of_a_running_daemon() {
    const FILE: &str = "/etc/nmstate/openshift/base.yaml";
    let mut node = Node::new(&[(
        "00-base.yaml",
        &machine_config("00-base", &[(FILE, "base: 1\n")], &[]),
    )])
    .await;
    let first = node.rendered_name();
    let listen = free_port();
    node.start_agent(&[("MCO_METRICS_LISTEN", listen.as_str())]);
    node.wait_status("the first application", secs(30), done_in(&first))
        .await;
    let url = format!("http://{listen}/metrics");
    let m = scrape(&url).await;
    assert_eq!(
        sample(&m, "mcd_state{state=\"Done\",reason=\"\"}").map(|v| v > 0.0),
        Some(true),
        "{m:?}"
    );
    assert_eq!(
        sample(&m, "mco_agent_updates_total{result=\"Done\"}"),
        Some(1.0),
        "{m:?}"
    );
    assert_eq!(
        sample(
            &m,
            &format!("mcd_update_state{{config=\"MachineConfig: {first}\",err=\"\"}}")
        )
        .map(|v| v > 0.0),
        Some(true),
        "{m:?}"
    );

    node.write_manifest(
        "00-base.yaml",
        &machine_config("00-base", &[(FILE, "base: 2\n")], &[]),
    );
    let second = node.rendered_name();
    node.wait_status("the files-only update", secs(30), done_in(&second))
        .await;
    let m = scrape(&url).await;
    assert_eq!(
        sample(&m, "mco_agent_updates_total{result=\"Done\"}"),
        Some(2.0),
        "{m:?}"
    );
    assert_eq!(
        sample(
            &m,
            "mco_agent_update_duration_seconds_count{result=\"Done\"}"
        ),
        Some(2.0),
        "{m:?}"
    );

    let root = p(&node.root).to_string();
    let sysroot = p(node.os.sysroot.path()).to_string();
    let v = status_json(&["--root", &root, "--sysroot", &sysroot], None);
    assert_eq!(v["state"], "Done");
    assert_eq!(v["current"], second.as_str());
    assert_eq!(v["desired"], second.as_str());
    assert_eq!(v["pending"], Value::Null);
    assert_eq!(v["last_update"]["from"], first.as_str());
    assert_eq!(v["last_update"]["result"], "Done");
    assert_eq!(v["last_update"]["reboot"], false);
    assert!(v["last_update"]["duration_ms"].as_u64().is_some(), "{v}");
    assert_eq!(v["unreadable"], serde_json::json!([]));
    assert_eq!(v["agent"]["running"], true, "{v}");
    assert_eq!(v["agent"]["pid"], node.last_agent_pid().unwrap(), "{v}");
    // times read as RFC 3339, as kubectl prints them
    for time in [
        &v["last_fetch"],
        &v["status_updated"],
        &v["agent"]["started"],
        &v["last_update"]["started"],
        &v["last_update"]["ended"],
    ] {
        let text = time.as_str().unwrap_or_default();
        assert!(
            text.ends_with('Z') && humantime::parse_rfc3339(text).is_ok(),
            "{time} in {v}"
        );
    }
    assert_eq!(v["last_error"], Value::Null, "{v}");
    // Without a sysroot to read, the deployments come from rpm-ostree on the bus.
    let v = status_json(&["--root", &root], Some(node.os.bus.address()));
    assert_eq!(v["deployments"]["source"], "rpm-ostree", "{v}");
    assert_eq!(
        v["deployments"]["running"]["checksum"],
        node.os.deployments()[0].checksum.as_str()
    );
    // So do they when the sysroot reader fails: the same answer, nothing said unreadable.
    let out = status_reading_with(
        &["--root", &root, "--sysroot", &sysroot, "-o", "json"],
        Some(node.os.bus.address()),
        Path::new("/bin/false"),
    );
    let (stdout, stderr, code) = text(&out);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let w: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(w["deployments"], v["deployments"], "{w}");
    assert_eq!(w["unreadable"], serde_json::json!([]));
    node.stop().await;
}
