//! A bad boot rolled back, and `mco-agent rollback` by hand, on a booted CoreOS-like guest in a
//! cluster (the Kubernetes API test server on the host; the rpm-ostree stand-in on the guest's
//! system bus; systemd, logind, journald and ostree real).
//! Run with `tests/vm/run.sh` (ignored by plain `cargo test`: each boots a VM).

use std::time::Duration;

use anyhow::{Result, ensure};
use mco_vm_tests::agent::OS_IMAGE_B;
use mco_vm_tests::cluster::GuestCluster;
use mco_vm_tests::{Disk, Vm};
use serde_json::json;

/// An administrator's check that always fails, delivered by the update itself.
const BAD_CHECK: &str = "/etc/mco-agent/health.d/50-app";
const BAD_CHECK_SOURCE: &str = "data:,%23!%2Fbin%2Fsh%0Aecho%20app%20is%20broken%0Aexit%201%0A";

fn ignition(files: &[(&str, u32, &str)]) -> serde_json::Value {
    let files: Vec<_> = files
        .iter()
        .map(|(path, mode, source)| json!({"path": path, "mode": mode, "overwrite": true, "contents": {"source": source}}))
        .collect();
    json!({"ignition": {"version": "3.2.0"}, "storage": {"files": files}})
}

/// A guest in the cluster with the agent's health deadline short (a configuration fragment),
/// in `first` (applied without a reboot). Three boots and two OS changes: more than the
/// harness's default 300 s on a loaded machine.
fn node(name: &str, cluster: &GuestCluster, first: &str) -> Result<Vm> {
    let mut vm = Vm::builder(name, Disk::Ostree)
        .timeout(Duration::from_secs(900))
        .boot()?;
    vm.install_agent()?;
    vm.install_rpmostree_standin()?;
    cluster.install_kubeconfig(&mut vm)?;
    vm.run(
        "mkdir -p /etc/mco-agent/config.d && \
         printf 'health_deadline = \"20s\"\\nhealth_check_timeout = \"10s\"\\n' \
           > /etc/mco-agent/config.d/50-health.toml",
    )?;
    vm.start_agent_unit()?;
    cluster.set_desired(first)?;
    cluster.wait_for_state("Done", Some(first), Duration::from_secs(90))?;
    Ok(vm)
}

/// Back on OS image A, without the update's kernel argument.
fn on_the_old_os(vm: &mut Vm) -> Result<()> {
    ensure!(vm.run("cat /usr/share/mco-os-version")?.trim() == "a");
    let cmdline = vm.run("cat /proc/cmdline")?;
    ensure!(
        !cmdline.split_whitespace().any(|a| a == "mco.vmtest=1"),
        "/proc/cmdline: {cmdline}"
    );
    let commit_a = vm.run("ostree rev-parse debian/mco/a")?;
    let status = vm.run("ostree admin status")?;
    ensure!(
        status.contains(&format!("* debian {}.", commit_a.trim())),
        "ostree admin status:\n{status}"
    );
    Ok(())
}

#[test]
#[ignore = "boots a qemu VM: run by tests/vm/run.sh"]
fn a_boot_that_fails_a_health_check_is_rolled_back_after_exactly_two_reboots() -> Result<()> {
    let cluster = GuestCluster::start()?;
    cluster.add_config("rendered-worker-1", json!({"config": ignition(&[])}))?;
    cluster.add_config(
        "rendered-worker-2",
        json!({
            "osImageURL": OS_IMAGE_B,
            "kernelArguments": ["mco.vmtest=1"],
            "config": ignition(&[(BAD_CHECK, 0o755, BAD_CHECK_SOURCE)]),
        }),
    )?;
    let mut vm = node("rollback-auto", &cluster, "rendered-worker-1")?;
    cluster.set_desired("rendered-worker-2")?;
    // Into the update; its check fails for the deadline; back.
    vm.wait_for_reboot(Duration::from_secs(240))?;
    ensure!(vm.run("cat /usr/share/mco-os-version")?.trim() == "b");
    vm.wait_for_reboot(Duration::from_secs(240))?;
    cluster.wait_for_state(
        "Degraded",
        Some("rendered-worker-1"),
        Duration::from_secs(180),
    )?;
    let reason = cluster.annotation("reason").unwrap_or_default();
    let want = format!(
        "boot into rendered-worker-2 failed: health check {BAD_CHECK} exited with 1: app is broken; \
         rolled back to rendered-worker-1"
    );
    ensure!(reason.starts_with(&want), "reason: {reason:?}");
    on_the_old_os(&mut vm)?;
    vm.run(&format!("test ! -e {BAD_CHECK}"))?;
    let journal = vm.run("journalctl -b -u mco-agent.service -o cat")?;
    ensure!(
        journal.contains("rolled back a bad boot"),
        "journalctl -u mco-agent:\n{journal}"
    );
    // No boot loop: the desired config is still rendered-worker-2, and nothing reboots.
    std::thread::sleep(Duration::from_secs(30));
    ensure!(vm.boots().len() == 3, "boots: {}", vm.boots().len());
    ensure!(cluster.annotation("state").as_deref() == Some("Degraded"));
    vm.poweroff()
}

#[test]
#[ignore = "boots a qemu VM: run by tests/vm/run.sh"]
fn rollback_by_hand_returns_to_the_previous_deployment_and_config() -> Result<()> {
    // A file whose change needs no reboot (the MCD's disruption policy for the kubelet's pull
    // secret is None), so that the first config is applied without one, as `node` expects.
    const FILE: &str = "/var/lib/kubelet/config.json";
    const ONE: &str = "{\"auths\":{\"one.example\":{}}}\n";
    const TWO: &str = "{\"auths\":{\"two.example\":{}}}\n";
    let data_url = |text: &str| {
        let encoded: String = text
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'.' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect();
        format!("data:,{encoded}")
    };
    let cluster = GuestCluster::start()?;
    cluster.add_config(
        "rendered-worker-1",
        json!({"config": ignition(&[(FILE, 0o600, &data_url(ONE))])}),
    )?;
    cluster.add_config(
        "rendered-worker-2",
        json!({
            "osImageURL": OS_IMAGE_B,
            "kernelArguments": ["mco.vmtest=1"],
            "config": ignition(&[(FILE, 0o600, &data_url(TWO))]),
        }),
    )?;
    let mut vm = node("rollback-by-hand", &cluster, "rendered-worker-1")?;
    cluster.set_desired("rendered-worker-2")?;
    vm.wait_for_reboot(Duration::from_secs(240))?;
    cluster.wait_for_state("Done", Some("rendered-worker-2"), Duration::from_secs(180))?;
    ensure!(vm.run(&format!("cat {FILE}"))? == TWO);

    // Without --yes and without a terminal it asks for --yes and changes nothing.
    let refused = vm.exec("mco-agent rollback < /dev/null")?;
    ensure!(
        !refused.success() && refused.stderr.contains("pass --yes"),
        "{refused:?}"
    );
    // Run outside the guest agent's session: the command reboots the guest.
    vm.run(
        "systemd-run --unit=mco-rollback --collect /bin/sh -c \
         'mco-agent rollback --yes > /var/tmp/rollback.out 2>&1'",
    )?;
    vm.wait_for_reboot(Duration::from_secs(240))?;
    let out = vm.run("cat /var/tmp/rollback.out")?;
    ensure!(
        out.contains("Rolling back from rendered-worker-2 to rendered-worker-1:"),
        "mco-agent rollback said:\n{out}"
    );
    cluster.wait_for_state(
        "Degraded",
        Some("rendered-worker-1"),
        Duration::from_secs(180),
    )?;
    let reason = cluster.annotation("reason").unwrap_or_default();
    ensure!(
        reason.starts_with(
            "rolled back by hand from rendered-worker-2 (mco-agent rollback); rolled back to \
             rendered-worker-1"
        ),
        "reason: {reason:?}"
    );
    on_the_old_os(&mut vm)?;
    ensure!(vm.run(&format!("cat {FILE}"))? == ONE);
    std::thread::sleep(Duration::from_secs(20));
    ensure!(vm.boots().len() == 3, "boots: {}", vm.boots().len());
    vm.poweroff()
}
