//! The daemon, `mco-agent start`, as the real unit on a booted CoreOS-like guest (the ostree
//! disk), in a cluster: the Kubernetes API test server on the host holds the Node and the
//! rendered MachineConfigs (the test plays the node controller); rpm-ostree is the stand-in on
//! the guest's system bus; systemd, logind, journald and ostree are real.
//! Run with `tests/vm/run.sh` (ignored by plain `cargo test`: each boots a VM).

use std::time::Duration;

use anyhow::{Result, ensure};
use mco_vm_tests::agent::OS_IMAGE_B;
use mco_vm_tests::cluster::GuestCluster;
use mco_vm_tests::{Disk, Vm};
use serde_json::json;

const PULL_SECRET: &str = "/var/lib/kubelet/config.json";
const WATCHDOG: Duration = Duration::from_secs(10);

/// An Ignition 3.2 config writing `files` (path, mode, data URL).
fn ignition(files: &[(&str, u32, &str)]) -> serde_json::Value {
    let files: Vec<_> = files
        .iter()
        .map(|(path, mode, source)| json!({"path": path, "mode": mode, "overwrite": true, "contents": {"source": source}}))
        .collect();
    json!({"ignition": {"version": "3.2.0"}, "storage": {"files": files}})
}

/// A guest with the agent, the rpm-ostree stand-in and the kubelet's kubeconfig, and the unit
/// started (READY); then the node's first config applied.
fn node_in_cluster(name: &str, cluster: &GuestCluster, first: &str) -> Result<Vm> {
    let mut vm = Vm::builder(name, Disk::Ostree).boot()?;
    vm.install_agent()?;
    vm.install_rpmostree_standin()?;
    cluster.install_kubeconfig(&mut vm)?;
    // A watchdog short enough to fire within the scenario if the agent stopped pinging (the
    // packaged unit's is 2 min); `watchdog_was_pinged` checks the pings at the end.
    vm.run(&format!(
        "mkdir -p /etc/systemd/system/mco-agent.service.d && \
         printf '[Service]\\nWatchdogSec={}s\\n' > /etc/systemd/system/mco-agent.service.d/50-watchdog.conf && \
         systemctl daemon-reload",
        WATCHDOG.as_secs()
    ))?;
    vm.start_agent_unit()?;
    cluster.set_desired(first)?;
    cluster.wait_for_state("Done", Some(first), Duration::from_secs(90))?;
    Ok(vm)
}

#[test]
#[ignore = "boots a qemu VM: run by tests/vm/run.sh"]
fn daemon_applies_without_a_reboot_degrades_on_drift_and_recovers_by_force_and_by_recover()
-> Result<()> {
    let cluster = GuestCluster::start()?;
    // the kubelet's pull secret: the MCD's disruption policy for it is None
    cluster.add_config(
        "rendered-worker-1",
        json!({"config": ignition(&[(PULL_SECRET, 0o600, "data:,%7B%22auths%22%3A%7B%7D%7D%0A")])}),
    )?;
    let mut vm = node_in_cluster("daemon-drift-force", &cluster, "rendered-worker-1")?;
    let boot_id = vm.run("cat /proc/sys/kernel/random/boot_id")?;
    ensure!(vm.run(&format!("cat {PULL_SECRET}"))? == "{\"auths\":{}}\n");
    let journal = vm.run("journalctl -b -u mco-agent.service -o cat")?;
    ensure!(
        journal.contains("rendered-worker-1"),
        "journalctl -u mco-agent does not show the update:\n{journal}"
    );

    // a hand edit of a managed file: Degraded with the MCD's reason, within seconds
    vm.run(&format!("echo '{{}}' > {PULL_SECRET}"))?;
    let took = cluster.wait_for_state("Degraded", None, Duration::from_secs(30))?;
    let reason = cluster.annotation("reason").unwrap_or_default();
    ensure!(
        reason == format!("content mismatch for file \"{PULL_SECRET}\""),
        "reason: {reason:?}"
    );
    eprintln!("hand edit -> Degraded in {took:?} (TCG guest)");

    // the force file re-applies the config: Done, the file restored, no reboot
    vm.run("touch /run/machine-config-daemon-force")?;
    cluster.wait_for_state("Done", Some("rendered-worker-1"), Duration::from_secs(60))?;
    ensure!(vm.run(&format!("cat {PULL_SECRET}"))? == "{\"auths\":{}}\n");
    vm.run("test ! -e /run/machine-config-daemon-force")?;
    ensure!(vm.run("cat /proc/sys/kernel/random/boot_id")? == boot_id);

    // drift again; `mco-agent recover` (the kubelet's kubeconfig, the host name as the node)
    // shows the mismatch and, confirmed, has the running agent re-apply: Done, no reboot
    vm.run(&format!("echo '{{}}' > {PULL_SECRET}"))?;
    cluster.wait_for_state("Degraded", None, Duration::from_secs(30))?;
    let out = vm.run("mco-agent recover --yes --wait 60s </dev/null 2>&1")?;
    ensure!(
        out.contains(&format!("content mismatch for file \"{PULL_SECRET}\""))
            && out.contains("Remedy: re-apply rendered-worker-1")
            && out.contains("Recovered: the node is Done in rendered-worker-1"),
        "recover:\n{out}"
    );
    ensure!(vm.run(&format!("cat {PULL_SECRET}"))? == "{\"auths\":{}}\n");
    ensure!(vm.run("cat /proc/sys/kernel/random/boot_id")? == boot_id);
    let logged = vm.run("journalctl -b -t mco-agent -o cat | grep 'mco-agent recover:' || true")?;
    ensure!(
        logged.contains("re-apply rendered-worker-1"),
        "the journal does not show recover's choice:\n{logged}"
    );
    ensure!(vm.boots().len() == 1);
    let restarts = vm.run("systemctl show -P NRestarts mco-agent.service")?;
    ensure!(
        restarts.trim() == "0",
        "the agent restarted {restarts} times"
    );
    watchdog_was_pinged(&mut vm)?;
    vm.poweroff()
}

#[test]
#[ignore = "boots a qemu VM: run by tests/vm/run.sh"]
fn daemon_kargs_and_os_change_reboot_once_and_end_done() -> Result<()> {
    let cluster = GuestCluster::start()?;
    cluster.add_config("rendered-worker-1", json!({"config": ignition(&[])}))?;
    cluster.add_config(
        "rendered-worker-2",
        json!({
            "osImageURL": OS_IMAGE_B,
            "kernelArguments": ["mco.vmtest=1"],
            "config": ignition(&[]),
        }),
    )?;
    let mut vm = node_in_cluster("daemon-kargs-os", &cluster, "rendered-worker-1")?;
    ensure!(vm.run("cat /usr/share/mco-os-version")?.trim() == "a");
    let commit_b = vm.run("ostree rev-parse debian/mco/b")?;

    // the agent stages both through rpm-ostree and reboots through logind, once
    cluster.set_desired("rendered-worker-2")?;
    vm.wait_for_reboot(Duration::from_secs(240))?;
    // after the boot the unit starts again, verifies the booted deployment and commits
    cluster.wait_for_state("Done", Some("rendered-worker-2"), Duration::from_secs(180))?;

    let cmdline = vm.run("cat /proc/cmdline")?;
    ensure!(
        cmdline.split_whitespace().any(|a| a == "mco.vmtest=1"),
        "second boot's /proc/cmdline: {cmdline}"
    );
    ensure!(vm.run("cat /usr/share/mco-os-version")?.trim() == "b");
    let status = vm.run("ostree admin status")?;
    ensure!(
        status.contains(&format!("* debian {}.", commit_b.trim())),
        "ostree admin status:\n{status}"
    );
    ensure!(vm.boots().len() == 2);
    ensure!(
        cluster
            .annotation("post-config-action")
            .unwrap_or_default()
            .is_empty(),
        "post-config-action still set"
    );
    let journal = vm.run("journalctl -b -u mco-agent.service -o cat")?;
    ensure!(
        journal.contains("rendered-worker-2"),
        "journalctl -u mco-agent after the reboot:\n{journal}"
    );
    vm.poweroff()
}

/// The agent pinged systemd's watchdog: it has run for longer than the watchdog period without
/// being killed, and systemd recorded a ping after READY (the timestamp starts at READY and moves
/// with every `WATCHDOG=1`).
fn watchdog_was_pinged(vm: &mut Vm) -> Result<()> {
    let read = |vm: &mut Vm| -> Result<(String, u64, u64)> {
        let show = vm.run(
            "systemctl show -p WatchdogUSec -p ActiveEnterTimestampMonotonic \
             -p WatchdogTimestampMonotonic -p ActiveState -p NRestarts mco-agent.service; \
             cut -d' ' -f1 /proc/uptime",
        )?;
        let ready = property(&show, "ActiveEnterTimestampMonotonic").parse()?;
        let uptime_s: f64 = show.lines().last().unwrap_or_default().parse()?;
        Ok((show, ready, (uptime_s * 1e6) as u64))
    };
    let period = WATCHDOG.as_micros() as u64;
    let (mut show, ready, uptime) = read(vm)?;
    if uptime < ready + period + 1_000_000 {
        // Not a whole period since READY yet: wait for one, plus a second.
        std::thread::sleep(Duration::from_micros(ready + period + 1_000_000 - uptime));
        show = read(vm)?.0;
    }
    ensure!(
        property(&show, "WatchdogUSec") == format!("{}s", WATCHDOG.as_secs())
            && property(&show, "ActiveState") == "active"
            && property(&show, "NRestarts") == "0",
        "the agent did not live through its watchdog period:\n{show}"
    );
    let pinged: u64 = property(&show, "WatchdogTimestampMonotonic").parse()?;
    ensure!(pinged > ready, "no watchdog ping since READY:\n{show}");
    Ok(())
}

/// The value of `key` in `systemctl show` output.
fn property<'a>(show: &'a str, key: &str) -> &'a str {
    show.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_default()
}
