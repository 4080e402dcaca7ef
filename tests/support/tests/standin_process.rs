//! The stand-in as a process (what the VM suite runs), spoken to by GDBus, the library
//! rpm-ostree's own client is built on: the bus is found through `DBUS_SYSTEM_BUS_ADDRESS`, a
//! transaction runs over a peer-to-peer connection with its progress signals, a caller that is
//! not root is refused, and SIGTERM stops the daemon.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mco_test_support::dbus::PrivateBus;
use mco_test_support::sysroot::{MUTABLE_DEPLOYMENTS, TestSysroot};

const STANDIN: &str = env!("CARGO_BIN_EXE_mco-test-rpmostreed");
const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/gdbus_kargs_client.py");

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gdbus_client_runs_a_transaction_against_the_binary() {
    let bus = PrivateBus::start().unwrap();
    let sysroot = TestSysroot::builder().build().unwrap();
    let run = tempfile::tempdir().unwrap();
    let mut standin = KillOnDrop(
        Command::new(STANDIN)
            .arg("--sysroot")
            .arg(sysroot.path())
            .arg("--run-dir")
            .arg(run.path())
            .args(["--txn-delay", "300ms"])
            .env("DBUS_SYSTEM_BUS_ADDRESS", bus.address())
            .env(MUTABLE_DEPLOYMENTS.0, MUTABLE_DEPLOYMENTS.1)
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let conn = bus.connect().await.unwrap();
    let dbus = zbus::fdo::DBusProxy::new(&conn).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !dbus
        .name_has_owner("org.projectatomic.rpmostree1".try_into().unwrap())
        .await
        .unwrap()
    {
        assert!(
            standin.0.try_wait().unwrap().is_none(),
            "the stand-in exited"
        );
        assert!(
            Instant::now() < deadline,
            "the stand-in did not take its name"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Not root: refused, as rpm-ostreed refuses callers polkit does not authorise.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(bus.dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = tokio::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args([
            "/usr/bin/python3",
            CLIENT,
            bus.address(),
            "fakeos",
            "nobody=1",
        ])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("rpmostreed Sysroot operation RegisterClient not allowed for user"),
        "{stderr}"
    );

    let out = tokio::process::Command::new("/usr/bin/python3")
        .args([CLIENT, bus.address(), "fakeos", "gdbus=1"])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("started True"), "{stdout}");
    assert!(
        stdout.contains("PercentProgress ('Receiving objects', 100)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("TaskBegin ('Writing deployment',)"),
        "{stdout}"
    );
    assert!(
        stdout.trim_end().ends_with("Finished (True, '')"),
        "{stdout}"
    );
    let deps = sysroot.deployments().unwrap();
    assert_eq!(deps.len(), 2);
    assert!(deps[0].kargs().contains(&"gdbus=1"), "{:?}", deps[0]);

    rustix::process::kill_process(
        rustix::process::Pid::from_child(&standin.0),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = standin.0.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the stand-in ignored SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status}");
}
