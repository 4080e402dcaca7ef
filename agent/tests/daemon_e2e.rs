//! `mco-agent start` end to end without a VM (see `daemon_env`): the companion serves a pool
//! over TLS, rpm-ostree is the stand-in over a real ostree sysroot on a private bus, logind a
//! fake that records reboots; the agent runs as a process against a temp root.

mod common;
mod daemon_env;
mod os_env;

use daemon_env::{Node, done_in, machine_config, secs};
use machine_config::mco::NodeState;

const BASE_FILE: &str = "/etc/nmstate/openshift/base.yaml";
const POLICY: &str = "/etc/containers/policy.json";

fn base() -> String {
    machine_config(
        "00-base",
        &[(BASE_FILE, "base: 1\n"), (POLICY, "{}\n")],
        &[],
    )
}

/// A node that ran its first application of the base config.
async fn provisioned() -> (Node, String) {
    let mut node = Node::new(&[("00-base.yaml", &base())]).await;
    let base_name = node.rendered_name();
    node.start_agent(&[]);
    node.wait_status("the first application", secs(30), done_in(&base_name))
        .await;
    (node, base_name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_files_only_change_completes_without_a_reboot() {
    let (node, base_name) = provisioned().await;
    assert_eq!(node.read(BASE_FILE).as_deref(), Some("base: 1\n"));

    node.write_manifest(
        "00-base.yaml",
        &machine_config(
            "00-base",
            &[(BASE_FILE, "base: 2\n"), (POLICY, "{}\n")],
            &[],
        ),
    );
    let new_name = node.rendered_name();
    assert_ne!(new_name, base_name);
    let (status, took) = node
        .wait_status("the files-only update", secs(30), done_in(&new_name))
        .await;
    eprintln!("files-only update: manifest written -> Done in {took:?}");
    assert_eq!(node.read(BASE_FILE).as_deref(), Some("base: 2\n"));
    let last = status.last_update.unwrap();
    assert_eq!(
        (last.from.as_str(), last.result.as_str(), last.reboot),
        (base_name.as_str(), "Done", false)
    );
    assert_eq!(node.logind.reboots(), 0);
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kargs_change_reboots_and_is_done_after_the_reboot() {
    let (mut node, base_name) = provisioned().await;
    node.write_manifest(
        "00-base.yaml",
        &machine_config(
            "00-base",
            &[(BASE_FILE, "base: 1\n"), (POLICY, "{}\n")],
            &["mco.e2e=1"],
        ),
    );
    let new_name = node.rendered_name();
    node.wait_status("the reboot request", secs(30), |s| {
        s.pending_step.as_deref() == Some("RebootRequested")
    })
    .await;
    node.wait_reboot_requested(secs(10)).await;
    assert!(
        node.os.deployments()[0].options.contains("mco.e2e=1"),
        "{:?}",
        node.os.deployments()
    );
    // Not in the new config until the reboot is verified.
    let status = node.status().unwrap();
    assert_eq!(status.current.as_deref(), Some(base_name.as_str()));
    assert!(
        node.read("/etc/machine-config-daemon/currentconfig")
            .unwrap()
            .contains(&base_name)
    );

    node.kill_agent().await;
    node.reboot();
    node.start_agent(&[]);
    node.wait_status("Done after the reboot", secs(30), done_in(&new_name))
        .await;
    assert!(
        node.read("/etc/machine-config-daemon/currentconfig")
            .unwrap()
            .contains(&new_name)
    );
    assert_eq!(node.logind.reboots(), 1);
    node.stop().await;
}

/// Without `--root-is-host`, an alternate root never reboots the machine the agent runs on,
/// even with a logind answering on the bus: the update waits for a reboot, and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alternate_root_never_reboots_the_host() {
    let mut node = Node::new(&[("00-base.yaml", &base())]).await;
    let base_name = node.rendered_name();
    node.start_agent(&[("MCO_AGENT_ROOT_IS_HOST", "false")]);
    node.wait_status("the first application", secs(30), done_in(&base_name))
        .await;
    node.write_manifest(
        "00-base.yaml",
        &machine_config(
            "00-base",
            &[(BASE_FILE, "base: 1\n"), (POLICY, "{}\n")],
            &["mco.e2e=1"],
        ),
    );
    node.wait_status("the update waiting for a reboot", secs(30), |s| {
        s.needs_reboot
    })
    .await;
    assert_eq!(node.logind.reboots(), 0);
    let logs = node.logs();
    assert!(
        logs.contains("not rebooting the host for the alternate root"),
        "{logs}"
    );
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreconcilable_config_is_reported_and_changes_nothing() {
    let (node, _) = provisioned().await;
    node.write_manifest(
        "10-groups.yaml",
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 10-groups\n  labels: {machineconfiguration.openshift.io/role: worker}\nspec:\n  config:\n    ignition: {version: 3.2.0}\n    passwd: {groups: [{name: admins}]}\n",
    );
    let (status, _) = node
        .wait_status("Unreconcilable", secs(30), |s| {
            s.state == NodeState::Unreconcilable
        })
        .await;
    assert!(
        status
            .reason
            .ends_with("ignition Passwd Groups section contains changes"),
        "{}",
        status.reason
    );
    assert_eq!(node.read(BASE_FILE).as_deref(), Some("base: 1\n"));
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_degrades_with_the_exact_reason_and_fixing_it_makes_the_node_done() {
    let (node, base_name) = provisioned().await;
    std::fs::write(node.path(BASE_FILE), "edited by hand\n").unwrap();
    let (status, took) = node
        .wait_status("drift detected", secs(5), |s| {
            s.state == NodeState::Degraded
        })
        .await;
    eprintln!("drift: file written -> Degraded in {took:?}");
    assert_eq!(
        status.reason,
        format!("content mismatch for file \"{BASE_FILE}\"")
    );
    std::fs::write(node.path(BASE_FILE), "base: 1\n").unwrap();
    node.wait_status("Done after the fix", secs(5), done_in(&base_name))
        .await;
    assert_eq!(node.logind.reboots(), 0);
    node.stop().await;
}

/// core's SSH keys are watched like the managed files: a key appended by hand makes the node
/// Degraded, named without the key; taking it out makes the node Done again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_added_to_cores_file_degrades_and_removing_it_makes_the_node_done() {
    const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2eWatchedKey e2e";
    let with_core = format!(
        "{}    passwd:\n      users:\n      - {{name: core, sshAuthorizedKeys: [\"{KEY}\"]}}\n",
        base()
    );
    let mut node = Node::new(&[("00-base.yaml", &with_core)]).await;
    let base_name = node.rendered_name();
    for (path, text) in [
        (
            "/etc/passwd",
            "root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000:core:/home/core:/bin/bash\n",
        ),
        ("/etc/group", "root:x:0:\ncore:x:1000:\n"),
        ("/etc/shadow", "root:*:1::::::\ncore:*:1::::::\n"),
    ] {
        std::fs::create_dir_all(node.path("/etc")).unwrap();
        std::fs::write(node.path(path), text).unwrap();
    }
    std::fs::create_dir_all(node.path("/home/core")).unwrap();
    std::os::unix::fs::chown(node.path("/home/core"), Some(1000), Some(1000)).unwrap();
    node.start_agent(&[]);
    node.wait_status("the first application", secs(30), done_in(&base_name))
        .await;
    let keys = "/home/core/.ssh/authorized_keys.d/ignition";
    assert_eq!(node.read(keys), Some(format!("{KEY}\n")));

    std::fs::write(
        node.path(keys),
        format!("{KEY}\nssh-ed25519 AAAAintruder evil\n"),
    )
    .unwrap();
    let (status, took) = node
        .wait_status("drift of core's keys", secs(5), |s| {
            s.state == NodeState::Degraded
        })
        .await;
    eprintln!("core's keys: key appended -> Degraded in {took:?}");
    assert_eq!(
        status.reason,
        format!("content mismatch for SSH keys of user \"core\" in \"{keys}\"")
    );
    std::fs::write(node.path(keys), format!("{KEY}\n")).unwrap();
    node.wait_status("Done after the fix", secs(5), done_in(&base_name))
        .await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_force_file_reapplies_without_a_reboot() {
    let (node, base_name) = provisioned().await;
    std::fs::write(node.path(BASE_FILE), "edited by hand\n").unwrap();
    node.wait_status("drift detected", secs(5), |s| {
        s.state == NodeState::Degraded
    })
    .await;
    std::fs::write(node.path("/run/machine-config-daemon-force"), "").unwrap();
    node.wait_status(
        "Done after the forced re-apply",
        secs(30),
        done_in(&base_name),
    )
    .await;
    assert_eq!(node.read(BASE_FILE).as_deref(), Some("base: 1\n"));
    assert!(
        !node.path("/run/machine-config-daemon-force").exists(),
        "the force file was not consumed"
    );
    assert_eq!(node.logind.reboots(), 0);
    node.stop().await;
}

/// systemd's watchdog is pinged by the update loop itself: pings while idle, the period
/// stretched while an update runs (a drain or an image pull may take long between steps) and
/// the unit's period back when it ends. (systemd stands in as a datagram socket.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_update_loop_pings_the_watchdog_and_stretches_it_for_updates() {
    let mut node = Node::new(&[("00-base.yaml", &base())]).await;
    let base_name = node.rendered_name();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify.sock");
    let socket = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    // Read as systemd does, all along: a full socket would block the agent's sends.
    socket
        .set_read_timeout(Some(std::time::Duration::from_millis(100)))
        .unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let done = done.clone();
        std::thread::spawn(move || {
            let (mut received, mut buf) = (Vec::new(), [0u8; 4096]);
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(n) = socket.recv(&mut buf) {
                    received.push(String::from_utf8_lossy(&buf[..n]).into_owned());
                }
            }
            received
        })
    };
    node.start_agent(&[
        ("NOTIFY_SOCKET", path.to_str().unwrap()),
        ("WATCHDOG_USEC", "400000"),
    ]);
    node.wait_status("the first application", secs(30), done_in(&base_name))
        .await;
    node.write_manifest(
        "00-base.yaml",
        &machine_config(
            "00-base",
            &[(BASE_FILE, "base: 2\n"), (POLICY, "{}\n")],
            &[],
        ),
    );
    let new_name = node.rendered_name();
    node.wait_status("the files-only update", secs(30), done_in(&new_name))
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let received = reader.join().unwrap();
    let count = |m: &str| received.iter().filter(|r| *r == m).count();
    assert_eq!(
        received.first().map(String::as_str),
        Some("READY=1\n"),
        "{received:?}"
    );
    assert!(
        count("WATCHDOG=1\n") >= 2,
        "the loop does not ping: {received:?}"
    );
    // The update ran stretched: between the stretch before its first step and its Done, no
    // return to the unit's period; right after Done, the period comes back.
    let (stretch, unit_period) = (
        "WATCHDOG_USEC=3900000000\nWATCHDOG=1\n",
        "WATCHDOG_USEC=400000\nWATCHDOG=1\n",
    );
    let done_at = received
        .iter()
        .position(|m| *m == format!("STATUS=Done: {new_name}\n"))
        .unwrap_or_else(|| panic!("no Done for the update: {received:?}"));
    let started_at = received[..done_at]
        .iter()
        .rposition(|m| m == "STATUS=Working\n")
        .unwrap();
    let stretched_at = received[..started_at].iter().rposition(|m| m == stretch);
    assert!(
        stretched_at.is_some_and(|s| !received[s..done_at].iter().any(|m| m == unit_period)),
        "the update did not run stretched: {received:?}"
    );
    assert!(
        received[done_at..].iter().any(|m| m == unit_period),
        "the unit's period did not come back: {received:?}"
    );
    node.stop().await;
}
