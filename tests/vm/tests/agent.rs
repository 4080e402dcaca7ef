//! The agent on a booted CoreOS-like guest (the ostree disk): real systemd, journald, ostree.
//! Run with `tests/vm/run.sh` (ignored by plain `cargo test`: each boots a VM).

use anyhow::{Result, ensure};
use mco_vm_tests::{Disk, Vm};

/// A MachineConfig whose only change is the kubelet's pull secret: the MCD's disruption policy
/// for that file is None (no drain, no reboot, no service action).
const PULL_SECRET_MC: &str = r#"{
  "apiVersion": "machineconfiguration.openshift.io/v1",
  "kind": "MachineConfig",
  "metadata": {"name": "99-vmtest-pull-secret", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
  "spec": {"config": {"ignition": {"version": "3.2.0"}, "storage": {"files": [{
    "path": "/var/lib/kubelet/config.json", "mode": 384, "overwrite": true,
    "contents": {"source": "data:,%7B%22auths%22%3A%7B%7D%7D%0A"}}]}}}
}"#;

#[test]
#[ignore = "boots a qemu VM: run by tests/vm/run.sh"]
fn agent_once_from_files_without_reboot() -> Result<()> {
    let mut vm = Vm::builder("agent-once-from-files", Disk::Ostree).boot()?;
    vm.install_agent()?;
    std::fs::write(vm.share().join("pull-secret.json"), PULL_SECRET_MC)?;
    let boot_id = vm.run("cat /proc/sys/kernel/random/boot_id")?;

    let report = vm.run("mco-agent once-from /mnt/host/pull-secret.json")?;
    ensure!(
        report.contains("applied 99-vmtest-pull-secret")
            && report.contains("post-update actions: None")
            && report.contains("no reboot needed"),
        "once-from said:\n{report}"
    );
    ensure!(vm.run("stat -c %a /var/lib/kubelet/config.json")?.trim() == "600");
    ensure!(vm.run("cat /var/lib/kubelet/config.json")? == "{\"auths\":{}}\n");
    let current = vm.run("cat /etc/machine-config-daemon/currentconfig")?;
    ensure!(
        current.contains("\"99-vmtest-pull-secret\""),
        "currentconfig: {current}"
    );
    let validated = vm.run("mco-agent validate --config /mnt/host/pull-secret.json")?;
    ensure!(validated.contains("on-disk state matches 99-vmtest-pull-secret"));

    // no reboot: none queued, the same boot, and a hand edit is caught by validate
    let jobs = vm.run("systemctl list-jobs --no-legend")?;
    ensure!(!jobs.contains("reboot"), "jobs: {jobs}");
    ensure!(vm.run("cat /proc/sys/kernel/random/boot_id")? == boot_id);
    vm.run("echo '{}' > /var/lib/kubelet/config.json")?;
    let drift = vm.exec("mco-agent validate --config /mnt/host/pull-secret.json")?;
    ensure!(
        drift.code == Some(1),
        "validate after a hand edit: {drift:?}"
    );
    ensure!(
        drift
            .stdout
            .contains("content mismatch for file \"/var/lib/kubelet/config.json\""),
        "validate after a hand edit: {drift:?}"
    );
    ensure!(vm.boots().len() == 1);
    vm.poweroff()
}
