//! The agent on a booted CoreOS-like guest (the ostree disk): real systemd, journald, ostree.
//! Run with `tests/vm/run.sh` (ignored by plain `cargo test`: each boots a VM).

use anyhow::{Result, bail, ensure};
use mco_vm_tests::agent::OS_IMAGE_B;
use mco_vm_tests::{Disk, Vm};
use std::time::{Duration, Instant};

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

/// One file under each root a config can write to that the unit's `ProtectSystem=strict` leaves
/// writable (`ReadWritePaths=`; on the ostree disk `/usr/local` is `/var/usrlocal`), and a
/// post-apply hook: path, mode, contents. core's SSH keys cover `/home`.
const SANDBOX_FILES: [(&str, u32, &str); 7] = [
    ("/etc/mco-vmtest/sandbox.conf", 0o644, "sandbox\n"),
    ("/var/lib/kubelet/config.json", 0o600, "{}\n"),
    (
        "/usr/local/bin/mco-vmtest-tool",
        0o755,
        "#!/bin/sh\necho tool\n",
    ),
    ("/root/.mco-vmtest.conf", 0o600, "root\n"),
    ("/opt/mco-vmtest/opt.conf", 0o644, "opt\n"),
    ("/srv/mco-vmtest/srv.conf", 0o644, "srv\n"),
    (SANDBOX_HOOK, 0o755, SANDBOX_HOOK_SCRIPT),
];

const SANDBOX_HOOK: &str = "/etc/mco-agent/hooks.d/post-apply/10-vmtest";
/// Runs a program of its own (the tool the config delivers) and writes under /var: a hook is a
/// child of the agent, in its sandbox.
const SANDBOX_HOOK_SCRIPT: &str = "#!/bin/sh\nset -e\nmkdir -p /var/lib/mco-vmtest\n\
    echo \"$MCO_AGENT_PHASE $(id -u) $(/usr/local/bin/mco-vmtest-tool)\" > /var/lib/mco-vmtest/hook.out\n";

/// A MachineConfig named `name` with `files`, core's SSH key and an enabled unit.
fn sandbox_config(name: &str, files: &[(&str, u32, &str)]) -> String {
    let files: Vec<_> = files
        .iter()
        .map(|(path, mode, contents)| {
            serde_json::json!({"path": path, "mode": mode, "overwrite": true, "contents": {
                "source": format!("data:;base64,{}", base64::Engine::encode(
                    &base64::engine::general_purpose::STANDARD, contents))}})
        })
        .collect();
    serde_json::json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {
            "ignition": {"version": "3.2.0"},
            "passwd": {"users": [{"name": "core",
                "sshAuthorizedKeys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHvmtest vmtest"]}]},
            "storage": {"files": files},
            "systemd": {"units": [{"name": "mco-vmtest.service", "enabled": true,
                "contents": "[Unit]\nDescription=vmtest\n[Service]\nType=oneshot\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"}]}}}
    })
    .to_string()
}

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
            "NotifyAccess"
            | "WatchdogSec"
            | "Restart"
            | "RestartSec"
            | "TimeoutStartSec"
            | "SuccessExitStatus"
            | "RestartForceExitStatus" => {}
            _ => {
                if key.starts_with("Protect")
                    || key.starts_with("Restrict")
                    || key.starts_with("Private")
                    || key == "CapabilityBoundingSet"
                    || key == "MemoryDenyWriteExecute"
                    || key.starts_with("SystemCall")
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
    let mut vm = Vm::builder("agent-unit-sandbox", Disk::Ostree).boot()?;
    vm.install_agent()?;
    vm.install_rpmostree_standin()?;
    vm.run("useradd --create-home --user-group core")?;

    // Outside the writable roots: refused with the path named, the update rolled back (the file
    // under /etc written before it is gone again), nothing recorded. /usr is read-only on an
    // ostree node anyway; the deployment's own root is writable but for the sandbox.
    for (n, outside) in [
        "/usr/lib/mco-vmtest/refused.conf",
        "/mco-vmtest/refused.conf",
    ]
    .into_iter()
    .enumerate()
    {
        let name = format!("99-vmtest-outside-{n}");
        let files = [
            ("/etc/mco-vmtest/outside.conf", 0o644, "outside\n"),
            (outside, 0o644, "refused\n"),
        ];
        std::fs::write(
            vm.share().join(format!("{name}.json")),
            sandbox_config(&name, &files),
        )?;
        let (check_unit, hardening) = sandbox_check_unit(
            &unit,
            &format!("/usr/local/bin/mco-agent once-from --skip-reboot /mnt/host/{name}.json"),
        );
        ensure!(
            hardening >= 18,
            "only {hardening} hardening settings kept:\n{check_unit}"
        );
        std::fs::write(vm.share().join(format!("{name}.service")), &check_unit)?;
        vm.run(&format!(
            "cp /mnt/host/{name}.service /etc/systemd/system/ && systemctl daemon-reload"
        ))?;
        let started = vm.exec(&format!("systemctl start {name}.service"))?;
        let journal = vm.run(&format!("journalctl -b -u {name}.service -o cat"))?;
        ensure!(
            !started.success(),
            "a config writing {outside} was applied under the sandbox:\n{journal}"
        );
        ensure!(
            journal.contains(outside) && journal.to_lowercase().contains("read-only file system"),
            "the error does not name {outside} and EROFS:\n{journal}"
        );
        let left = vm.run(&format!(
            "ls -d {outside} /etc/mco-vmtest/outside.conf /etc/machine-config-daemon/currentconfig 2>/dev/null || true"
        ))?;
        ensure!(
            left.trim().is_empty(),
            "the refused update left on disk: {left}\njournal:\n{journal}"
        );
    }

    // The real unit, every setting as shipped, runs the daemon on a local config (no cluster):
    // journalctl at start-up (the previous boot's finalization errors), D-Bus to systemd and
    // the rpm-ostree stand-in, a file in every writable root, a hook.
    std::fs::write(
        vm.share().join("sandbox.json"),
        sandbox_config("99-vmtest-sandbox", &SANDBOX_FILES),
    )?;
    vm.run(
        "install -D -m600 /mnt/host/sandbox.json /etc/mco-agent/sandbox.json && \
         printf '[Service]\\nExecStart=\\nExecStart=/usr/local/bin/mco-agent start --skip-reboot \
           --config-file /etc/mco-agent/sandbox.json\\n' \
           > /etc/systemd/system/mco-agent.service.d/60-vmtest.conf && \
         systemctl daemon-reload && systemctl start mco-agent.service",
    )?;
    let journal = wait_for_agent_journal(
        &mut vm,
        "the node needs a reboot to finish the update",
        Duration::from_secs(180),
    )?;
    for (property, want) in [
        ("ActiveState", "active"),
        ("ProtectSystem", "strict"),
        ("PrivateDevices", "yes"),
        ("RestrictSUIDSGID", "yes"),
    ] {
        let got = vm.run(&format!("systemctl show -P {property} mco-agent.service"))?;
        ensure!(
            got.trim() == want,
            "the agent's unit: {property}={got}\njournal:\n{journal}"
        );
    }
    // journalctl ran: it read the journal (no previous boot: its own message) or found nothing
    ensure!(
        !journal.contains("could not read the previous boot's finalization errors")
            || journal.contains("specified boot"),
        "journalctl failed under the sandbox:\n{journal}"
    );
    for (path, mode, contents) in SANDBOX_FILES {
        let got = vm.run(&format!("stat -c %a {path} && cat {path}"))?;
        ensure!(
            got == format!("{mode:o}\n{contents}"),
            "{path}: {got:?}\njournal:\n{journal}"
        );
    }
    ensure!(
        vm.run("readlink -f /usr/local/bin/mco-vmtest-tool")?.trim()
            == "/var/usrlocal/bin/mco-vmtest-tool"
    );
    let hook = vm.run("cat /var/lib/mco-vmtest/hook.out")?;
    ensure!(hook == "post-apply 0 tool\n", "the hook wrote {hook:?}");
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
    vm.run("systemctl stop mco-agent.service")?;
    vm.poweroff()
}

/// The agent unit's journal once it holds `text`; fails after `within` naming what it waited for.
fn wait_for_agent_journal(vm: &mut Vm, text: &str, within: Duration) -> Result<String> {
    let t0 = Instant::now();
    loop {
        let journal = vm.run("journalctl -b -u mco-agent -o cat --no-pager")?;
        if journal.contains(text) {
            return Ok(journal);
        }
        if t0.elapsed() > within {
            bail!("no {text:?} in the agent's journal after {within:?}:\n{journal}");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
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

/// A kernel argument and a file: the plan stages the argument through rpm-ostree and reboots.
const KARGS_MC: &str = r#"{
  "apiVersion": "machineconfiguration.openshift.io/v1",
  "kind": "MachineConfig",
  "metadata": {"name": "99-vmtest-kargs", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
  "spec": {
    "kernelArguments": ["mco.vmtest=1"],
    "config": {"ignition": {"version": "3.2.0"}, "storage": {"files": [
      {"path": "/etc/mco-vmtest/kargs.conf", "mode": 420, "contents": {"source": "data:,kargs%0A"}}]}}}
}"#;

/// Runs `mco-agent once-from /mnt/host/FILE` as a transient unit (the reboot it asks logind for
/// must not cut the guest agent's command short), follows the reboot, and returns what it
/// printed before.
fn once_from_through_a_reboot(vm: &mut Vm, file: &str) -> Result<String> {
    vm.run(&format!(
        "systemd-run --unit=mco-once-from --collect \
         sh -c 'mco-agent once-from /mnt/host/{file} > /mnt/host/{file}.out 2>&1'"
    ))?;
    vm.wait_for_reboot(std::time::Duration::from_secs(180))?;
    Ok(std::fs::read_to_string(
        vm.share().join(format!("{file}.out")),
    )?)
}

/// After the reboot: the update is recorded as in progress (currentconfig not yet `config`), and
/// the next run finds it booted, commits currentconfig and clears the record, writing nothing.
fn finish_update(vm: &mut Vm, file: &str, config: &str) -> Result<()> {
    let record = "/etc/machine-config-daemon/mco-agent-update.json";
    let current = "/etc/machine-config-daemon/currentconfig";
    vm.run(&format!("test -s {record}"))?;
    let quoted = format!("\"{config}\"");
    ensure!(
        !vm.run(&format!("cat {current} 2>/dev/null || true"))?
            .contains(&quoted)
    );
    let finished = vm.run(&format!("mco-agent once-from /mnt/host/{file}"))?;
    ensure!(
        finished.starts_with(&format!(
            "completed the update of / to {config} after the reboot: verified"
        )) && finished.contains("no reboot needed")
            && !finished.contains("files:"),
        "once-from after the reboot (nothing left to write):\n{finished}"
    );
    ensure!(vm.run(&format!("cat {current}"))?.contains(&quoted));
    vm.run(&format!("test ! -e {record}"))?;
    Ok(())
}

#[test]
#[ignore = "boots a qemu VM: run by tests/vm/run.sh"]
fn agent_once_from_kargs_reboots_into_the_new_arguments() -> Result<()> {
    let mut vm = Vm::builder("agent-once-from-kargs", Disk::Ostree).boot()?;
    vm.install_agent()?;
    vm.install_rpmostree_standin()?;
    std::fs::write(vm.share().join("kargs.json"), KARGS_MC)?;
    ensure!(!vm.run("cat /proc/cmdline")?.contains("mco.vmtest=1"));

    // the agent stages the argument through rpm-ostree (the stand-in, on the system bus) and
    // reboots the node through logind
    let before = once_from_through_a_reboot(&mut vm, "kargs.json")?;
    ensure!(
        before.contains("OS change staged: kernel arguments: +mco.vmtest=1")
            && before.contains("reboot needed: rebooting into 99-vmtest-kargs"),
        "once-from before the reboot:\n{before}"
    );
    let entry = vm.current_boot().entry.clone();
    let cmdline = vm.run("cat /proc/cmdline")?;
    ensure!(
        cmdline.split_whitespace().any(|a| a == "mco.vmtest=1"),
        "second boot's /proc/cmdline: {cmdline}"
    );
    ensure!(
        entry.as_ref().is_some_and(|e| e.version == "2"),
        "booted entry: {entry:?}"
    );
    ensure!(vm.run("cat /etc/mco-vmtest/kargs.conf")? == "kargs\n");
    finish_update(&mut vm, "kargs.json", "99-vmtest-kargs")?;
    ensure!(vm.boots().len() == 2);
    vm.poweroff()
}

#[test]
#[ignore = "boots a qemu VM: run by tests/vm/run.sh"]
fn agent_once_from_os_pivot_boots_the_new_commit() -> Result<()> {
    let mut vm = Vm::builder("agent-once-from-pivot", Disk::Ostree).boot()?;
    vm.install_agent()?;
    vm.install_rpmostree_standin()?;
    let config = format!(
        r#"{{"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
  "metadata": {{"name": "99-vmtest-os-b"}},
  "spec": {{"osImageURL": "{OS_IMAGE_B}", "config": {{"ignition": {{"version": "3.2.0"}},
    "storage": {{"files": [{{"path": "/etc/mco-vmtest/pivot.conf", "mode": 420,
      "contents": {{"source": "data:,pivot%0A"}}}}]}}}}}}}}"#
    );
    std::fs::write(vm.share().join("os-b.json"), config)?;
    ensure!(vm.run("cat /usr/share/mco-os-version")?.trim() == "a");
    let commit_b = vm.run("ostree rev-parse debian/mco/b")?;

    let before = once_from_through_a_reboot(&mut vm, "os-b.json")?;
    ensure!(
        before.contains("reboot needed: rebooting into 99-vmtest-os-b"),
        "once-from before the reboot:\n{before}"
    );
    ensure!(
        vm.run("cat /usr/share/mco-os-version")?.trim() == "b",
        "not booted into commit b"
    );
    let status = vm.run("ostree admin status")?;
    ensure!(
        status.contains(&format!("* debian {}.", commit_b.trim())),
        "ostree admin status:\n{status}"
    );
    ensure!(vm.run("cat /etc/mco-vmtest/pivot.conf")? == "pivot\n");
    finish_update(&mut vm, "os-b.json", "99-vmtest-os-b")?;
    vm.poweroff()
}
