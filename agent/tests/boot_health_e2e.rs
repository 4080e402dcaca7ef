//! The health checks of a boot into an update run after the agent told systemd its start-up is
//! over (`READY=1`): what they wait for starts only then (the kubelet is ordered after
//! `mco-agent.service`, and so is the rest of the boot). systemd stands in as a datagram socket
//! that, like systemd, lets the units ordered after the agent start once it has the agent's
//! READY; a health check that passes only once they started plays the kubelet. The rest is
//! `daemon_env` (the companion, the rpm-ostree stand-in, a fake logind, a temp root).

mod common;
mod daemon_env;
mod os_env;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use daemon_env::{Node, done_in, machine_config, secs};

const FILE: &str = "/etc/nmstate/openshift/a.yaml";
const CHECK: &str = "/etc/mco-agent/health.d/50-after-the-agent";

fn config(version: u32, kargs: &[&str]) -> String {
    machine_config("00-base", &[(FILE, &format!("a: {version}\n"))], kargs)
}

/// systemd for one run of the agent: its notify socket; once READY=1 arrives, `started` (the
/// units ordered after the agent) exists.
struct FakeSystemd {
    socket: PathBuf,
    stop: Arc<AtomicBool>,
    reader: JoinHandle<Vec<String>>,
}

impl FakeSystemd {
    fn start(dir: &Path, started: &Path) -> FakeSystemd {
        let socket = dir.join(format!(
            "notify-{}.sock",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        let bound = UnixDatagram::bind(&socket).unwrap();
        // Read as systemd does, all along: a full socket would block the agent's sends.
        bound
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (stop_reading, started) = (stop.clone(), started.to_path_buf());
        let reader = std::thread::spawn(move || {
            let (mut received, mut buf) = (Vec::new(), [0u8; 4096]);
            while !stop_reading.load(Ordering::Relaxed) {
                if let Ok(n) = bound.recv(&mut buf) {
                    let message = String::from_utf8_lossy(&buf[..n]).into_owned();
                    if message.lines().any(|l| l == "READY=1") {
                        std::fs::write(&started, "").unwrap();
                    }
                    received.push(message);
                }
            }
            received
        });
        FakeSystemd {
            socket,
            stop,
            reader,
        }
    }

    fn env(&self) -> (&'static str, &str) {
        ("NOTIFY_SOCKET", self.socket.to_str().unwrap())
    }

    /// What the agent sent, in order.
    fn stop(self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.reader.join().unwrap()
    }
}

/// A reboot update (a kernel argument) whose boot has a check that passes once the units
/// ordered after the agent started: READY=1 comes before the checks, which pass, and the
/// update is committed without a rollback. (With the checks inside the start-up, they failed
/// until the deadline and every such boot was rolled back.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_boot_into_an_update_is_ready_before_its_health_checks_run() {
    let mut node = Node::new(&[("00-base.yaml", &config(0, &[]))]).await;
    node.start_agent(&[]);
    let base = node.rendered_name();
    node.wait_status("provisioned", secs(30), done_in(&base))
        .await;
    node.kill_agent().await;

    let started = node.dir.path().join("units-after-the-agent-started");
    let check = node.path(CHECK);
    std::fs::create_dir_all(check.parent().unwrap()).unwrap();
    std::fs::write(
        &check,
        format!(
            "#!/bin/sh\ntest -e '{}' && exit 0\necho 'not started: the agent is not ready'\nexit 1\n",
            started.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&check, std::fs::Permissions::from_mode(0o755)).unwrap();
    node.write_manifest("00-base.yaml", &config(1, &["mco.test=1"]));
    let updated = node.rendered_name();
    let health = ("MCO_AGENT_HEALTH_DEADLINE", "30s");

    // Into the update: staged, a reboot asked for.
    let systemd = FakeSystemd::start(node.dir.path(), &started);
    node.start_agent(&[systemd.env(), health]);
    node.wait_reboot_requested(secs(60)).await;
    node.kill_agent().await;
    systemd.stop();

    // The boot into it: nothing ordered after the agent has started yet.
    std::fs::remove_file(&started).unwrap();
    node.reboot();
    let systemd = FakeSystemd::start(node.dir.path(), &started);
    node.start_agent(&[systemd.env(), health]);
    node.wait_status("the verified boot", secs(60), done_in(&updated))
        .await;
    node.kill_agent().await;
    let received = systemd.stop();

    let logs = node.logs();
    assert!(logs.contains("health checks passed"), "{logs}");
    assert!(!logs.contains("rolling the boot back"), "{logs}");
    assert_eq!(node.logind.reboots(), 1, "one reboot, none back\n{logs}");
    let at = |m: &str| received.iter().position(|r| r.as_str() == m);
    let ready = at("READY=1\n").unwrap_or_else(|| panic!("no READY=1: {received:?}"));
    let checking = at(&format!(
        "STATUS=checking the health of the boot into {updated}\n"
    ))
    .unwrap_or_else(|| panic!("no health-check status: {received:?}"));
    assert!(ready < checking, "{received:?}");
    node.stop().await;
}
