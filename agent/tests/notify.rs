//! sd_notify: a fake NOTIFY_SOCKET (a unix datagram socket) receives READY, STATUS and
//! WATCHDOG from a child process started with the service-manager environment.

use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use mco_test_support::child;

/// Runs the child test `name` with `envs` and returns what it sent to `socket`.
fn datagrams_from_child(name: &str, socket: &UnixDatagram, envs: &[(&str, &str)]) -> Vec<String> {
    let mut cmd = child::test_command(name);
    cmd.env_remove("NOTIFY_SOCKET")
        .env_remove("WATCHDOG_USEC")
        .env_remove("WATCHDOG_PID");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run the child test");
    assert!(
        out.status.success(),
        "child {name} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    socket.set_nonblocking(true).expect("nonblocking");
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = socket.recv(&mut buf) {
        received.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    received
}

#[test]
fn ready_status_and_watchdog_reach_the_notify_socket() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&path).expect("bind the notify socket");
    let received = datagrams_from_child(
        "child_notifies",
        &socket,
        &[
            ("NOTIFY_SOCKET", path.to_str().expect("utf-8 path")),
            ("WATCHDOG_USEC", "100000"),
        ],
    );
    assert_eq!(
        received.first().map(String::as_str),
        Some("READY=1\n"),
        "{received:?}"
    );
    assert_eq!(
        received.get(1).map(String::as_str),
        Some("STATUS=applying files READY=1\n"),
        "{received:?}"
    );
    let pings = received.iter().filter(|m| *m == "WATCHDOG=1\n").count();
    assert!(pings >= 2, "expected repeated watchdog pings: {received:?}");
    assert_eq!(
        received.len(),
        2 + pings,
        "unexpected messages: {received:?}"
    );
}

#[test]
fn nothing_is_sent_without_a_socket_or_for_another_pid() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&path).expect("bind the notify socket");
    // No NOTIFY_SOCKET: everything is a no-op.
    let received = datagrams_from_child(
        "child_without_watchdog",
        &socket,
        &[("WATCHDOG_USEC", "100000")],
    );
    assert!(received.is_empty(), "{received:?}");
    // A watchdog meant for another process (WATCHDOG_PID) is not ours to ping.
    let received = datagrams_from_child(
        "child_without_watchdog",
        &socket,
        &[
            ("NOTIFY_SOCKET", path.to_str().expect("utf-8 path")),
            ("WATCHDOG_USEC", "100000"),
            ("WATCHDOG_PID", "1"),
        ],
    );
    assert!(received.iter().all(|m| m != "WATCHDOG=1\n"), "{received:?}");
}

#[tokio::test]
#[ignore = "child of ready_status_and_watchdog_reach_the_notify_socket"]
async fn child_notifies() {
    child::assert_child("ready_status_and_watchdog_reach_the_notify_socket");
    mco_agent::notify::ready();
    mco_agent::notify::status("applying files\nREADY=1");
    let watchdog =
        mco_agent::notify::spawn_watchdog().expect("WATCHDOG_USEC is set: the watchdog runs");
    tokio::time::sleep(Duration::from_millis(180)).await;
    watchdog.abort();
}

#[tokio::test]
#[ignore = "child of nothing_is_sent_without_a_socket_or_for_another_pid"]
async fn child_without_watchdog() {
    child::assert_child("nothing_is_sent_without_a_socket_or_for_another_pid");
    assert!(
        mco_agent::notify::spawn_watchdog().is_none(),
        "no watchdog for this process"
    );
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        mco_agent::notify::ready();
        mco_agent::notify::status("idle");
    }
}
