//! sd_notify: a fake NOTIFY_SOCKET (a unix datagram socket) receives READY, STATUS, WATCHDOG
//! and WATCHDOG_USEC from a child process started with the service-manager environment.

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
    // Reaching a step is progress: a ping; then the loop's own ping; long work stretches the
    // period and its end restores the unit's; nothing pings in between (no timer).
    assert_eq!(
        received[1..],
        [
            "STATUS=applying files READY=1\n",
            "WATCHDOG=1\n",
            "WATCHDOG=1\n",
            "WATCHDOG_USEC=60000000\nWATCHDOG=1\n",
            "WATCHDOG_USEC=100000\nWATCHDOG=1\n",
        ],
        "{received:?}"
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
    assert_eq!(
        mco_agent::notify::watchdog_period(),
        Some(Duration::from_millis(100))
    );
    mco_agent::notify::watchdog_ping();
    let work = mco_agent::notify::long_work(Duration::from_secs(60))
        .expect("WATCHDOG_USEC is set: the work is watched");
    // Time passes without a ping: nothing pings behind the work's back.
    tokio::time::sleep(Duration::from_millis(250)).await;
    drop(work);
}

#[tokio::test]
#[ignore = "child of nothing_is_sent_without_a_socket_or_for_another_pid"]
async fn child_without_watchdog() {
    child::assert_child("nothing_is_sent_without_a_socket_or_for_another_pid");
    assert!(
        mco_agent::notify::watchdog_period().is_none(),
        "no watchdog for this process"
    );
    assert!(mco_agent::notify::long_work(Duration::from_secs(60)).is_none());
    mco_agent::notify::watchdog_ping();
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        mco_agent::notify::ready();
        mco_agent::notify::status("idle");
    }
}
