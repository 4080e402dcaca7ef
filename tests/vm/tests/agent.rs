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

/// A config that touches everything the agent writes: a file under /etc, the kubelet's pull
/// secret, a systemd unit (enabled) and the core user's SSH keys.
const SANDBOX_MC: &str = r#"{
  "apiVersion": "machineconfiguration.openshift.io/v1",
  "kind": "MachineConfig",
  "metadata": {"name": "99-vmtest-sandbox", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
  "spec": {"config": {
    "ignition": {"version": "3.2.0"},
    "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHvmtest vmtest"]}]},
    "storage": {"files": [
      {"path": "/etc/mco-vmtest/sandbox.conf", "mode": 420, "contents": {"source": "data:,sandbox%0A"}},
      {"path": "/var/lib/kubelet/config.json", "mode": 384, "contents": {"source": "data:,%7B%7D%0A"}}]},
    "systemd": {"units": [{"name": "mco-vmtest.service", "enabled": true,
      "contents": "[Unit]\nDescription=vmtest\n[Service]\nType=oneshot\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"}]}}}
}"#;

/// `units/mco-agent.service` with its sandbox untouched, as a oneshot that runs `once-from`:
/// the daemon's notify/watchdog/restart settings go, every hardening line stays.
fn sandbox_check_unit(unit: &str, exec: &str) -> (String, usize) {
    let mut hardening = 0;
    let mut out = String::new();
    for line in unit.lines() {
        let key = line.split('=').next().unwrap_or_default();
        match key {
            "Type" => out.push_str("Type=oneshot\n"),
            "ExecStart" => out.push_str(&format!("ExecStart={exec}\n")),
            "NotifyAccess" | "WatchdogSec" | "Restart" | "RestartSec" | "TimeoutStartSec" => {}
            _ => {
                if key.starts_with("Protect")
                    || key.starts_with("Restrict")
                    || key.starts_with("Private")
                    || key == "CapabilityBoundingSet"
                    || key == "MemoryDenyWriteExecute"
                    || key == "SystemCallArchitectures"
                {
                    hardening += 1;
                }
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    (out, hardening)
}

#[test]
#[ignore = "boots a qemu VM: run by tests/vm/run.sh"]
fn agent_unit_sandbox_lets_it_apply_a_config() -> Result<()> {
    let unit = std::fs::read_to_string(
        mco_vm_tests::images::workspace_dir().join("units/mco-agent.service"),
    )?;
    let (check_unit, hardening) = sandbox_check_unit(
        &unit,
        "/usr/local/bin/mco-agent once-from /mnt/host/sandbox.json",
    );
    ensure!(
        hardening >= 10,
        "only {hardening} hardening settings kept:\n{check_unit}"
    );

    let mut vm = Vm::builder("agent-unit-sandbox", Disk::Ostree).boot()?;
    vm.install_agent()?;
    vm.run("useradd --create-home --user-group core")?;
    std::fs::write(vm.share().join("sandbox.json"), SANDBOX_MC)?;
    std::fs::write(
        vm.share().join("mco-agent-sandbox-check.service"),
        &check_unit,
    )?;
    vm.run(
        "cp /mnt/host/mco-agent-sandbox-check.service /etc/systemd/system/ && \
         systemctl daemon-reload",
    )?;
    let started = vm.exec("systemctl start mco-agent-sandbox-check.service")?;
    let journal = vm.run("journalctl -b -u mco-agent-sandbox-check.service -o cat")?;
    ensure!(
        started.success(),
        "once-from under the unit's sandbox failed: {started:?}\njournal:\n{journal}"
    );
    ensure!(
        journal.contains("applied 99-vmtest-sandbox"),
        "journal of the unit:\n{journal}"
    );
    ensure!(vm.run("cat /etc/mco-vmtest/sandbox.conf")? == "sandbox\n");
    ensure!(
        vm.run("stat -c '%a %U' /var/lib/kubelet/config.json")?
            .trim()
            == "600 root"
    );
    ensure!(vm.run("systemctl is-enabled mco-vmtest.service")?.trim() == "enabled");
    let keys = vm.run("stat -c %U /home/core/.ssh/authorized_keys.d/ignition && cat /home/core/.ssh/authorized_keys.d/ignition")?;
    ensure!(
        keys.starts_with("core\n") && keys.contains("AAAAC3NzaC1lZDI1NTE5AAAAIHvmtest"),
        "core's keys: {keys}"
    );
    vm.poweroff()
}

#[test]
fn the_sandbox_check_unit_keeps_the_hardening_and_drops_the_daemon_settings() {
    let unit = "[Unit]\nDescription=x\n[Service]\nType=notify\nNotifyAccess=main\n\
                ExecStart=/usr/bin/mco-agent start\nWatchdogSec=2min\nRestart=on-failure\n\
                ProtectSystem=true\nPrivateTmp=true\nCapabilityBoundingSet=CAP_CHOWN\n";
    let (out, hardening) = sandbox_check_unit(unit, "/x once-from /y");
    assert_eq!(
        out,
        "[Unit]\nDescription=x\n[Service]\nType=oneshot\nExecStart=/x once-from /y\n\
         ProtectSystem=true\nPrivateTmp=true\nCapabilityBoundingSet=CAP_CHOWN\n"
    );
    assert_eq!(hardening, 3);
}
