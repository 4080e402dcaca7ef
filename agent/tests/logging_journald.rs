//! Logging under systemd: a child process, in a private mount namespace with its own
//! systemd-journald (no systemd runs as PID 1 here), logs through `logging::init`; the structured fields are
//! read back from the journal files with `journalctl -D ... -o json`.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mco_agent::logging::{self, LogSink};
use mco_test_support::{child, component};
use serde_json::Value;

const JOURNALD: &str = "/lib/systemd/systemd-journald";
const OUT_ENV: &str = "MCO_TEST_JOURNAL_OUT";

fn cannot_run() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some("not running as root".to_owned());
    }
    for tool in [JOURNALD, "/usr/bin/journalctl", "/usr/bin/unshare"] {
        if !Path::new(tool).exists() {
            return Some(format!("{tool} is missing (systemd and util-linux)"));
        }
    }
    None
}

#[test]
fn structured_fields_reach_the_journal() {
    if let Some(why) = cannot_run() {
        component::missing("journald", &format!("a private systemd-journald ({why})"));
    }
    let out = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "--"]);
    let inner = child::test_command("child_logs_to_private_journald");
    cmd.arg(inner.get_program()).args(inner.get_args());
    for (k, v) in inner.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    let status = cmd
        .env(OUT_ENV, out.path())
        .env("INVOCATION_ID", "0123456789abcdef0123456789abcdef")
        .env_remove("JOURNAL_STREAM")
        .env_remove("RUST_LOG")
        .status()
        .expect("run the child in a mount namespace");
    assert!(status.success(), "child failed: {status}");

    let json = Command::new("journalctl")
        .arg("-D")
        .arg(out.path().join("journal"))
        .args(["-o", "json", "--no-pager", "SYSLOG_IDENTIFIER=mco-agent"])
        .output()
        .expect("journalctl");
    assert!(
        json.status.success(),
        "journalctl: {}",
        String::from_utf8_lossy(&json.stderr)
    );
    let entries: Vec<Value> = String::from_utf8_lossy(&json.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("journalctl json line"))
        .collect();
    let by_message = |m: &str| {
        entries
            .iter()
            .find(|e| e["MESSAGE"] == m)
            .unwrap_or_else(|| panic!("no journal entry {m:?} in {entries:#?}"))
    };

    let done = by_message("update complete");
    for (field, want) in [
        ("MCO_CONFIG", "rendered-worker-1"),
        ("MCO_STATE", "Done"),
        ("MCO_UNIT", "crio.service"),
        ("MCO_PATH", "/etc/crio/crio.conf"),
        ("PRIORITY", "6"),
        ("SYSLOG_IDENTIFIER", "mco-agent"),
    ] {
        assert_eq!(done[field], want, "{field} in {done:#}");
    }
    assert_eq!(by_message("drain is slow")["PRIORITY"], "4");
    assert_eq!(by_message("debug detail")["PRIORITY"], "7");
    assert_eq!(
        by_message("debug detail")["MCO_CONFIG"],
        "rendered-worker-1",
        "span fields apply to every event"
    );
    assert!(
        entries.iter().all(|e| e["MESSAGE"] != "trace detail"),
        "the level filter let trace through"
    );
}

/// Starts journald in this (private) mount namespace with tmpfs over /run and the persistent
/// journal directory, so nothing reaches the host's journal.
fn private_journald() -> Child {
    for dir in ["/run", "/var/log/journal"] {
        std::fs::create_dir_all(dir).expect("mount point");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "tmpfs", dir])
            .status()
            .expect("mount");
        assert!(status.success(), "mount tmpfs on {dir}");
    }
    for dir in ["/run/systemd/journal", "/run/log/journal"] {
        std::fs::create_dir_all(dir).expect("journal dirs");
    }
    let journald = Command::new(JOURNALD)
        .stdin(Stdio::null())
        .spawn()
        .expect("start journald");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !Path::new("/run/systemd/journal/socket").exists() {
        assert!(
            Instant::now() < deadline,
            "journald did not create its socket"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    journald
}

#[test]
#[ignore = "child of structured_fields_reach_the_journal, in a private mount namespace"]
fn child_logs_to_private_journald() {
    child::assert_child("structured_fields_reach_the_journal");
    let out = std::env::var_os(OUT_ENV).expect("output directory");
    let mut journald = private_journald();

    assert_eq!(
        logging::init("mco-agent", Some("debug"), "info").expect("init"),
        LogSink::Journald
    );
    let span = tracing::info_span!("update", config = "rendered-worker-1");
    span.in_scope(|| {
        tracing::info!(
            state = "Done",
            unit = "crio.service",
            path = "/etc/crio/crio.conf",
            "update complete"
        );
        tracing::warn!(node = "worker-0", "drain is slow");
        tracing::debug!("debug detail");
        tracing::trace!("trace detail");
    });

    let synced = Command::new("journalctl")
        .arg("--sync")
        .status()
        .expect("journalctl --sync");
    assert!(synced.success(), "journalctl --sync");
    let copied = Command::new("cp")
        .args(["-r", "/run/log/journal"])
        .arg(Path::new(&out).join("journal"))
        .status()
        .expect("cp");
    assert!(copied.success(), "copy the journal out");
    journald.kill().expect("stop journald");
    journald.wait().expect("reap journald");
}
