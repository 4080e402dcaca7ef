//! The agent under SELinux: Debian's reference policy with the project's `mco_agent` module,
//! booted permissive (Debian's guest cannot boot enforcing with the reference policy alone, and
//! permissive logs every denial an enforcing boot would make). The real unit runs the agent,
//! which must end in its own domain, write every file with the label the policy's file contexts
//! give its path (what `matchpathcon` says: its role, type and range; the SELinux user stays the
//! one the file was created with, as `restorecon` without `-F` leaves it), and cause no denial.
//! Run with `tests/vm/run.sh selinux` (ignored by plain `cargo test`: it boots a VM).

use anyhow::{Context, Result, bail, ensure};
use mco_vm_tests::agent::binary_dir;
use mco_vm_tests::images::workspace_dir;
use mco_vm_tests::{Disk, Vm};
use std::time::{Duration, Instant};

/// Files, a unit with a drop-in, core's password hash and SSH key, an executable in
/// /usr/local/bin and a post-apply hook that runs it: each kind of path the agent writes on a node.
const CONFIG: &str = r#"{
  "apiVersion": "machineconfiguration.openshift.io/v1",
  "kind": "MachineConfig",
  "metadata": {"name": "99-vmtest-selinux", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
  "spec": {"config": {
    "ignition": {"version": "3.2.0"},
    "passwd": {"users": [{"name": "core",
      "passwordHash": "$6$vmtest$2/8Rq5bW7hVnOcVp1fPa0n3yU0h3cH3U5n2dF0cJvH3rK4t1Qm6Qn2o0bU1dQwN9y7kV6n1WcYxQ1uZr8aYh0.",
      "sshAuthorizedKeys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHvmtestSELinux vmtest"]}]},
    "storage": {"files": [
      {"path": "/etc/mco-vmtest/selinux.conf", "mode": 420, "contents": {"source": "data:,labelled%0A"}},
      {"path": "/etc/ssl/certs/mco-vmtest.pem", "mode": 420, "contents": {"source": "data:,not-a-real-cert%0A"}},
      {"path": "/var/lib/kubelet/config.json", "mode": 384, "contents": {"source": "data:,%7B%7D%0A"}},
      {"path": "/usr/local/bin/mco-vmtest-tool", "mode": 493, "contents": {"source": "data:,%23%21%2Fbin%2Fsh%0Aecho%20%22tool%20ran%20as%20%24%28id%20-Z%29%22%0A"}},
      {"path": "/etc/mco-agent/hooks.d/post-apply/10-vmtest", "mode": 493, "contents": {"source": "data:,%23%21%2Fbin%2Fsh%0Aset%20-e%0Amkdir%20-p%20%2Fvar%2Flib%2Fmco-vmtest%0A%2Fusr%2Flocal%2Fbin%2Fmco-vmtest-tool%20%3E%20%2Fvar%2Flib%2Fmco-vmtest%2Fhook.out%0A"}}]},
    "systemd": {"units": [{"name": "mco-vmtest.service", "enabled": true,
      "contents": "[Unit]\nDescription=vmtest\n[Service]\nType=oneshot\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
      "dropins": [{"name": "10-vmtest.conf", "contents": "[Service]\nEnvironment=VMTEST=1\n"}]}]}}}
}"#;

/// Every path the update writes (or creates on the way), checked against `matchpathcon`.
const WRITTEN: [&str; 13] = [
    "/etc/mco-vmtest",
    "/etc/mco-vmtest/selinux.conf",
    "/etc/ssl/certs/mco-vmtest.pem",
    "/var/lib/kubelet/config.json",
    "/etc/shadow",
    "/home/core/.ssh",
    "/home/core/.ssh/authorized_keys.d/ignition",
    "/etc/systemd/system/mco-vmtest.service",
    "/etc/systemd/system/mco-vmtest.service.d/10-vmtest.conf",
    "/etc/systemd/system/multi-user.target.wants/mco-vmtest.service",
    "/etc/machine-config-daemon",
    "/usr/local/bin/mco-vmtest-tool",
    "/etc/mco-agent/hooks.d/post-apply/10-vmtest",
];

#[test]
#[ignore = "boots a qemu VM: run by tests/vm/run.sh"]
fn selinux_the_agent_runs_confined_labels_what_it_writes_and_is_denied_nothing() -> Result<()> {
    let mut vm = Vm::builder("selinux-labels", Disk::SELinux).boot()?;
    let state = vm.run("sestatus")?;
    ensure!(
        state.contains("SELinux status:                 enabled")
            && state.contains("Current mode:                   permissive"),
        "the guest did not boot with SELinux on, permissive:\n{state}"
    );
    let modules = vm.run("semodule -l")?;
    ensure!(
        modules
            .lines()
            .any(|l| l.split_whitespace().next() == Some("mco_agent")),
        "the mco_agent module is not loaded:\n{modules}"
    );

    // laid out as the RPM lays it out: the binary and unit where the module's file contexts
    // name them, labelled by restorecon from those contexts
    let share = vm.share().to_path_buf();
    std::fs::copy(binary_dir().join("mco-agent"), share.join("mco-agent"))
        .context("copying mco-agent (tests/vm/run.sh builds it)")?;
    for name in ["mco-agent.service", "mco-agent.conf"] {
        std::fs::copy(workspace_dir().join("units").join(name), share.join(name))?;
    }
    std::fs::write(share.join("vmtest.json"), CONFIG)?;
    vm.run(
        "set -e\n\
         install -m755 /mnt/host/mco-agent /usr/bin/mco-agent\n\
         install -m644 /mnt/host/mco-agent.service /usr/lib/systemd/system/mco-agent.service\n\
         install -m644 /mnt/host/mco-agent.conf /usr/lib/tmpfiles.d/mco-agent.conf\n\
         restorecon /usr/bin/mco-agent /usr/lib/systemd/system/mco-agent.service\n\
         systemd-tmpfiles --create /usr/lib/tmpfiles.d/mco-agent.conf\n\
         install -D -m600 /mnt/host/vmtest.json /etc/mco-agent/vmtest.json\n\
         restorecon -R /etc/mco-agent\n\
         mkdir -p /etc/systemd/system/mco-agent.service.d\n\
         printf '[Service]\\nExecStart=\\nExecStart=/usr/bin/mco-agent start --skip-reboot \
           --config-file /etc/mco-agent/vmtest.json\\n' \
           > /etc/systemd/system/mco-agent.service.d/50-vmtest.conf\n\
         useradd --create-home --user-group core\n\
         restorecon -R /home/core\n\
         systemctl daemon-reload\n",
    )?;
    for (path, want) in [
        ("/usr/bin/mco-agent", "mco_agent_exec_t"),
        (
            "/usr/lib/systemd/system/mco-agent.service",
            "mco_agent_unit_file_t",
        ),
    ] {
        let label = vm.run(&format!("stat -c %C {path}"))?;
        ensure!(label.contains(want), "{path} is {label}, not {want}");
    }

    vm.run("systemctl start mco-agent.service")?;
    let domain = vm.run("ps -o label= -C mco-agent")?;
    ensure!(
        domain.contains(":mco_agent_t:"),
        "the agent does not run in its domain: {domain:?}"
    );
    wait_for_journal(
        &mut vm,
        "the node needs a reboot to finish the update",
        Duration::from_secs(120),
    )?;

    // the SELinux user is kept as the file got it, as restorecon without -F keeps it (the
    // policy's is a home directory's owner's, e.g. unconfined_u): role, type and range count
    let without_user = |context: &str| {
        context
            .trim()
            .split_once(':')
            .map(|(_, rest)| rest.to_string())
    };
    let mut wrong = Vec::new();
    for path in WRITTEN {
        let label = vm.run(&format!("stat -c %C {path}"))?;
        let want = vm.run(&format!("matchpathcon -n {path}"))?;
        if without_user(&label).is_none() || without_user(&label) != without_user(&want) {
            wrong.push(format!(
                "{path}: {} (policy: {})",
                label.trim(),
                want.trim()
            ));
        }
    }
    // the hook ran, in the agent's domain, and ran the executable the config delivered
    let hook = vm.run("cat /var/lib/mco-vmtest/hook.out")?;
    ensure!(
        hook.starts_with("tool ran as ") && hook.contains(":mco_agent_t:"),
        "the post-apply hook: {hook:?}"
    );
    for (path, want) in [
        (
            "/etc/mco-agent/hooks.d/post-apply/10-vmtest",
            "mco_agent_hook_exec_t",
        ),
        ("/usr/local/bin/mco-vmtest-tool", "bin_t"),
    ] {
        let label = vm.run(&format!("stat -c %C {path}"))?;
        ensure!(label.contains(want), "{path} is {label}, not {want}");
    }
    // the agent listens on its metrics port: the policy lets it bind only
    // mco_agent_metrics_port_t (mco_agent_port.cil labels 8797), so no denial below means the
    // port has that type (127.0.0.1:8797 is 0100007F:225D in /proc/net/tcp, 0A: listening)
    let listening = vm.run("grep -c '0100007F:225D 00000000:0000 0A' /proc/net/tcp || true")?;
    ensure!(
        listening.trim() == "1",
        "the agent does not listen on 127.0.0.1:8797:\n{}",
        vm.run("cat /proc/net/tcp")?
    );
    let denials = vm.run(
        "journalctl -b -k -o cat --no-pager | grep 'avc:  denied' | grep 'scontext=system_u:system_r:mco_agent_t' || true",
    )?;
    vm.run("systemctl stop mco-agent.service")?;
    ensure!(
        wrong.is_empty(),
        "labels that differ from the policy's file contexts:\n{}",
        wrong.join("\n")
    );
    ensure!(
        denials.trim().is_empty(),
        "denials of the agent's domain (permissive: allowed, but an enforcing node would refuse them):\n{denials}"
    );
    Ok(())
}

fn wait_for_journal(vm: &mut Vm, text: &str, within: Duration) -> Result<()> {
    let t0 = Instant::now();
    loop {
        let journal = vm.run("journalctl -b -u mco-agent -o cat --no-pager")?;
        if journal.contains(text) {
            return Ok(());
        }
        if t0.elapsed() > within {
            bail!("no {text:?} in the agent's journal after {within:?}:\n{journal}");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}
