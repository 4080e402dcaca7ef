//! First boot of a CoreOS-like guest (the ostree disk) provisioned by the config server: the
//! real `mco-companion serve` on the host renders the worker pool (an `osImageURL` that is the
//! disk's commit `b`, a kernel argument, a file) and serves it as Ignition; the files of the
//! served config, with the three the config server appends (node annotations, the served
//! MachineConfig, the encapsulated config), are written into the guest as Ignition writes them.
//! `mco-firstboot.service` and `mco-agent.service` are the real units, enabled by the packaged
//! preset; rpm-ostree is the stand-in on the guest's system bus; systemd, logind, journald and
//! ostree are real. The image has no kubelet: a stand-in `kubelet.service` records, when it
//! starts, whether first boot had processed the encapsulated config.
//! Run with `tests/vm/run.sh firstboot` (ignored by plain `cargo test`: it boots a VM).

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use machine_config::MachineConfig;
use mco_vm_tests::agent::OS_IMAGE_B;
use mco_vm_tests::images::workspace_dir;
use mco_vm_tests::provision::{ConfigServerForGuests, served_files};
use mco_vm_tests::vm::GUEST_SHARE;
use mco_vm_tests::{Disk, Vm};
use serde_json::{Value, json};

const ENCAPSULATED: &str = "/etc/ignition-machine-config-encapsulated.json";
const KARG: &str = "mco.vmtest.firstboot=1";
/// The spec the guest's Ignition asks for (the encapsulated config's empty Ignition config
/// has this version).
const IGNITION_SPEC: &str = "3.4.0";
/// One line per kubelet start (see `KUBELET_STANDIN_SCRIPT`); /var survives OS changes.
const KUBELET_STARTS: &str = "/var/lib/mco-vmtest/kubelet-starts";

const KUBELET_STANDIN_UNIT: &str = "\
[Unit]
Description=kubelet stand-in: records what first boot had done when kubelet started
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh /etc/mco-vmtest/kubelet-standin.sh
[Install]
WantedBy=multi-user.target
";

const KUBELET_STANDIN_SCRIPT: &str = r#"#!/bin/sh
# At kubelet's start: the boot, whether the encapsulated config and its .bak exist, and the
# state of mco-firstboot.service (active = finished: it is a oneshot with RemainAfterExit).
e=/etc/ignition-machine-config-encapsulated.json
has() { if [ -e "$1" ]; then echo present; else echo absent; fi; }
mkdir -p /var/lib/mco-vmtest
echo "boot=$(cat /proc/sys/kernel/random/boot_id) encapsulated=$(has $e) bak=$(has $e.bak)" \
  "firstboot=$(systemctl show -P ActiveState mco-firstboot.service)" >> /var/lib/mco-vmtest/kubelet-starts
"#;

/// Test only: the first-boot unit's output also goes to the serial console, kept on the host
/// (`$MCO_VM_CACHE/logs/<vm>/boot2.log`), so the boot that runs it can be checked after it
/// rebooted.
const FIRSTBOOT_CONSOLE: &str = "[Service]\nStandardOutput=journal+console\n";

/// The worker pool's MachineConfig: the OS of commit `b`, a kernel argument and a file.
fn worker_config() -> String {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {
            "name": "99-worker-vmtest-firstboot",
            "labels": {"machineconfiguration.openshift.io/role": "worker"},
        },
        "spec": {
            "osImageURL": OS_IMAGE_B,
            "kernelArguments": [KARG],
            "config": {"ignition": {"version": "3.2.0"}, "storage": {"files": [
                {"path": "/etc/mco-vmtest/provisioned.conf", "mode": 420,
                 "contents": {"source": "data:,provisioned%0A"}},
            ]}},
        },
    })
    .to_string()
}

/// `KEY=value` of a kubelet stand-in line.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

/// Waits until `mco-agent status -o json` has `desired` set (the agent polled the server).
fn agent_status(vm: &mut Vm, timeout: Duration) -> Result<Value> {
    let start = Instant::now();
    loop {
        let status: Value = serde_json::from_str(&vm.run("mco-agent status -o json")?)?;
        if !status["desired"].is_null() || start.elapsed() > timeout {
            return Ok(status);
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
#[ignore = "boots a qemu VM: run by tests/vm/run.sh"]
fn firstboot_completes_from_the_encapsulated_config_before_kubelet() -> Result<()> {
    let pool = std::fs::read_to_string(workspace_dir().join("examples/pool-worker.yaml"))?;
    let server = ConfigServerForGuests::start(&[
        ("pool-worker.yaml", &pool),
        ("99-worker-vmtest-firstboot.json", &worker_config()),
    ])?;
    let served = server.served("worker", IGNITION_SPEC)?;
    let files = served_files(&served)?;
    let encapsulated = files
        .iter()
        .find(|f| f.path == ENCAPSULATED)
        .with_context(|| format!("the server did not append {ENCAPSULATED}: {served}"))?;
    let target = MachineConfig::from_slice(&encapsulated.contents)?;
    let rendered = target.name().to_string();
    ensure!(
        rendered.starts_with("rendered-worker-")
            && target.spec.os_image_url == OS_IMAGE_B
            && target.spec.kernel_arguments == [KARG]
            && target
                .spec
                .config
                .as_ref()
                .is_some_and(|c| *c == json!({"ignition": {"version": IGNITION_SPEC}})),
        "encapsulated config: {}",
        String::from_utf8_lossy(&encapsulated.contents)
    );

    // Boot 1 plays Ignition: the agent's binaries and units as packaged (enabled by the preset,
    // not started), the stand-ins, the agent's config server, and the served files.
    let mut vm = Vm::builder("firstboot-encapsulated", Disk::Ostree)
        .timeout(Duration::from_secs(420))
        .boot()?;
    vm.install_agent()?;
    vm.install_rpmostree_standin()?;
    let share = vm.share().to_path_buf();
    std::fs::write(share.join("kubelet.service"), KUBELET_STANDIN_UNIT)?;
    std::fs::write(share.join("kubelet-standin.sh"), KUBELET_STANDIN_SCRIPT)?;
    std::fs::write(share.join("firstboot-console.conf"), FIRSTBOOT_CONSOLE)?;
    std::fs::write(
        share.join("config-server.conf"),
        format!(
            "[Service]\nEnvironment=MCO_AGENT_CONFIG_SERVER={}\n\
             Environment=MCO_AGENT_CA=/etc/mco-vmtest/config-server-ca.crt\n",
            server.guest_url()
        ),
    )?;
    std::fs::copy(server.ca_file(), share.join("ca.crt"))?;
    std::fs::copy(
        workspace_dir().join("units/80-mco-agent.preset"),
        share.join("80-mco-agent.preset"),
    )?;
    vm.run(&format!(
        "set -e\n\
         install -m644 {GUEST_SHARE}/kubelet.service /etc/systemd/system/kubelet.service\n\
         install -D -m755 {GUEST_SHARE}/kubelet-standin.sh /etc/mco-vmtest/kubelet-standin.sh\n\
         install -D -m644 {GUEST_SHARE}/ca.crt /etc/mco-vmtest/config-server-ca.crt\n\
         install -D -m644 {GUEST_SHARE}/config-server.conf \
           /etc/systemd/system/mco-agent.service.d/60-config-server.conf\n\
         install -D -m644 {GUEST_SHARE}/firstboot-console.conf \
           /etc/systemd/system/mco-firstboot.service.d/60-console.conf\n\
         install -D -m644 {GUEST_SHARE}/80-mco-agent.preset \
           /etc/systemd/system-preset/80-mco-agent.preset\n\
         systemctl daemon-reload\n\
         systemctl preset mco-firstboot.service mco-agent.service\n\
         systemctl enable kubelet.service\n"
    ))?;
    vm.write_files(&files)?;
    let enabled =
        vm.run("systemctl is-enabled mco-firstboot.service mco-agent.service kubelet.service")?;
    ensure!(
        enabled.split_whitespace().eq(["enabled"; 3]),
        "is-enabled: {enabled}"
    );
    let after = vm.run("systemctl show -P After kubelet.service")?;
    ensure!(
        after
            .split_whitespace()
            .any(|u| u == "mco-firstboot.service"),
        "kubelet.service is not ordered after mco-firstboot.service: After={after}"
    );
    ensure!(vm.run("cat /usr/share/mco-os-version")?.trim() == "a");
    let commit_b = vm.run("ostree rev-parse debian/mco/b")?;

    // Boot 2 runs mco-firstboot before kubelet: it stages the rebase and the kernel argument
    // through rpm-ostree, sets the file aside and reboots through logind before the boot
    // finishes. Boot 3 is the node on its OS.
    let t0 = Instant::now();
    vm.reboot_through_a_rebooting_boot(Duration::from_secs(240))?;
    eprintln!(
        "reboot, first boot, reboot: {:.0} s (TCG)",
        t0.elapsed().as_secs_f64()
    );
    ensure!(vm.boots().len() == 3);
    let first_boot = std::fs::read_to_string(&vm.boots()[1].console_log)?;
    for want in [
        format!("staged for {rendered}: "),
        format!("rebooting into {rendered}"),
    ] {
        ensure!(
            first_boot.contains(&want),
            "boot 2's console has no {want:?}:\n{first_boot}"
        );
    }

    ensure!(vm.run("cat /usr/share/mco-os-version")?.trim() == "b");
    let status = vm.run("ostree admin status")?;
    ensure!(
        status.contains(&format!("* debian {}.", commit_b.trim())),
        "ostree admin status:\n{status}"
    );
    let cmdline = vm.run("cat /proc/cmdline")?;
    ensure!(
        cmdline.split_whitespace().any(|a| a == KARG),
        "third boot's /proc/cmdline: {cmdline}"
    );
    vm.run(&format!("test ! -e {ENCAPSULATED}"))?;
    let bak = vm.run(&format!("cat {ENCAPSULATED}.bak"))?;
    ensure!(bak.as_bytes() == encapsulated.contents, ".bak: {bak}");
    ensure!(vm.run("cat /etc/mco-vmtest/provisioned.conf")? == "provisioned\n");

    // The unit's condition keeps it from running again.
    let condition = vm.run("systemctl show -P ConditionResult mco-firstboot.service")?;
    let journal = vm.run("journalctl -b -u mco-firstboot.service -o cat")?;
    ensure!(
        condition.trim() == "no"
            && journal.contains("unmet condition check")
            && journal.contains(&format!("ConditionPathExists={ENCAPSULATED}"))
            && !journal.contains("staged for"),
        "mco-firstboot.service in boot 3 (ConditionResult={}):\n{journal}",
        condition.trim()
    );

    // kubelet never started before first boot was complete.
    let starts = vm.run(&format!("cat {KUBELET_STARTS}"))?;
    let boot_id = vm.run("cat /proc/sys/kernel/random/boot_id")?;
    ensure!(
        starts
            .lines()
            .any(|l| field(l, "boot") == Some(boot_id.trim())),
        "kubelet did not start in boot 3:\n{starts}"
    );
    for line in starts.lines() {
        ensure!(
            field(line, "encapsulated") == Some("absent")
                && field(line, "bak") == Some("present")
                && field(line, "firstboot") != Some("activating"),
            "kubelet started before first boot was complete: {line}"
        );
    }
    eprintln!("kubelet starts:\n{starts}");

    // The agent, started at boot with the config server, finds the node in the served config.
    let active = vm.run("systemctl show -P ActiveState mco-agent.service")?;
    let restarts = vm.run("systemctl show -P NRestarts mco-agent.service")?;
    ensure!(
        active.trim() == "active" && restarts.trim() == "0",
        "mco-agent.service: {} with {} restarts",
        active.trim(),
        restarts.trim()
    );
    let status = agent_status(&mut vm, Duration::from_secs(60))?;
    let journal = vm.run("journalctl -b -u mco-agent.service -o cat")?;
    ensure!(
        status["state"] == "Done"
            && status["current"] == rendered.as_str()
            && status["desired"] == rendered.as_str()
            && status["pending"].is_null(),
        "mco-agent status: {status:#}\njournal:\n{journal}"
    );
    ensure!(
        journal.contains("Validated on-disk state") && !journal.contains("Starting update"),
        "the agent updated something:\n{journal}"
    );
    vm.poweroff()
}
