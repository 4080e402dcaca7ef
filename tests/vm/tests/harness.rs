//! Harness self-tests: what the agent scenarios rely on works on a real booted guest.
//! Run with `tests/vm/run.sh` (they are ignored by plain `cargo test`: each boots a VM).

use std::io::Write;
use std::net::TcpListener;

use anyhow::{Context, Result, ensure};
use mco_test_support::apiserver::fixtures;
use mco_vm_tests::cluster::api_server_for_guests;
use mco_vm_tests::vm::HOST_FROM_GUEST;
use mco_vm_tests::{Disk, Vm};

/// The checksum of the deployment marked booted (`* debian <csum>.<serial>`) in
/// `ostree admin status`.
fn booted_checksum(status: &str) -> Option<String> {
    status.lines().find_map(|line| {
        let rest = line.trim_start().strip_prefix("* ")?;
        let deployment = rest.split_whitespace().nth(1)?;
        Some(deployment.split('.').next()?.to_string())
    })
}

#[test]
#[ignore = "boots a qemu VM: run by tests/vm/run.sh"]
fn selftest_boots_to_multi_user() -> Result<()> {
    // a host server on loopback, reached from the guest through qemu's user network
    let server = TcpListener::bind("127.0.0.1:0")?;
    let port = server.local_addr()?.port();
    let serving = std::thread::spawn(move || -> Result<()> {
        let (mut conn, _) = server.accept()?;
        conn.write_all(b"hello from the host\n")?;
        Ok(())
    });
    let blob_dir = tempfile::tempdir()?;
    let blob = blob_dir.path().join("blob");
    std::fs::write(&blob, "fw_cfg payload")?;

    let mut vm = Vm::builder("selftest-multi-user", Disk::Plain)
        .fw_cfg("opt/org.mco/test", &blob)
        .boot()?;
    let failed = vm.run("systemctl --failed --no-legend")?;
    ensure!(
        vm.current_boot().system_state == "running",
        "system {}; failed units:\n{failed}",
        vm.current_boot().system_state
    );
    ensure!(vm.run("readlink /proc/1/exe")?.trim() == "/usr/lib/systemd/systemd");
    let active = vm.run("systemctl is-active systemd-journald systemd-logind dbus")?;
    ensure!(
        active.split_whitespace().eq(["active"; 3]),
        "journald, logind, dbus: {active}"
    );
    let seats = vm.run("loginctl list-seats --no-legend")?;
    ensure!(seats.contains("seat0"), "logind over D-Bus: {seats}");
    vm.run("echo journal-round-trip | systemd-cat -t mco-vmtest")?;
    let journal = vm.run("journalctl --sync; journalctl -b -t mco-vmtest -o cat")?;
    ensure!(journal.trim() == "journal-round-trip", "journal: {journal}");

    std::fs::write(vm.share().join("to-guest"), "from host")?;
    ensure!(vm.run("cat /mnt/host/to-guest")? == "from host");
    vm.run("echo from guest > /mnt/host/to-host")?;
    ensure!(std::fs::read_to_string(vm.share().join("to-host"))? == "from guest\n");
    let fw = vm.run("cat /sys/firmware/qemu_fw_cfg/by_name/opt/org.mco/test/raw")?;
    ensure!(fw == "fw_cfg payload", "fw_cfg: {fw:?}");
    let fetched = vm.run(&format!(
        "timeout 20 bash -c 'exec 3<>/dev/tcp/{HOST_FROM_GUEST}/{port}; cat <&3'"
    ))?;
    ensure!(
        fetched == "hello from the host\n",
        "host server: {fetched:?}"
    );
    serving.join().expect("server thread")?;

    // the Kubernetes API test server over TLS, as the agent will reach it (kubectl: a static
    // binary from the host)
    let api = api_server_for_guests()?;
    api.seed(fixtures::node("vm-node"))?;
    api.write_kubeconfig(&vm.share().join("kubeconfig"), "system:node:vm-node")?;
    let kubectl = which_kubectl()?;
    std::fs::copy(&kubectl, vm.share().join("kubectl"))
        .with_context(|| format!("copying {}", kubectl.display()))?;
    let node = vm.run(
        "/mnt/host/kubectl --kubeconfig /mnt/host/kubeconfig get node vm-node \
         -o jsonpath='{.metadata.name}'",
    )?;
    ensure!(node == "vm-node", "kubectl in the guest: {node:?}");
    ensure!(
        api.requests()
            .iter()
            .any(|r| r.path == "/api/v1/nodes/vm-node" && r.status == 200),
        "the API server saw no GET of the node"
    );

    vm.poweroff()
}

#[test]
#[ignore = "boots a qemu VM: run by tests/vm/run.sh"]
fn selftest_ostree_staged_pivot_with_karg() -> Result<()> {
    let mut vm = Vm::builder("selftest-ostree-pivot", Disk::Ostree).boot()?;
    ensure!(vm.current_boot().system_state == "running");
    vm.run("test -e /run/ostree-booted")?;
    ensure!(vm.run("cat /usr/share/mco-os-version")?.trim() == "a");
    let commit_a = vm.run("ostree rev-parse debian/mco/a")?;
    let commit_b = vm.run("ostree rev-parse debian/mco/b")?;
    let status = vm.run("ostree admin status")?;
    ensure!(
        booted_checksum(&status).as_deref() == Some(commit_a.trim()),
        "{status}"
    );
    vm.run("mkdir -p /var/lib/mco-vmtest && echo kept > /var/lib/mco-vmtest/var && echo kept > /etc/mco-vmtest")?;

    // what rpm-ostree does for a kargs change + rebase: a staged deployment, finalized at shutdown
    vm.run(
        "ostree admin deploy --stage --os=debian debian/mco/b \
         --karg-proc-cmdline --karg-append=mco.pivot=b",
    )?;
    vm.reboot()?;

    let boot = vm.current_boot().clone();
    let entry = boot.entry.context("the ostree disk boots a BLS entry")?;
    ensure!(vm.boots().len() == 2);
    ensure!(
        entry.version == "2",
        "booted entry {} version {}",
        entry.file,
        entry.version
    );
    let cmdline = vm.run("cat /proc/cmdline")?;
    ensure!(
        cmdline.split_whitespace().any(|a| a == "mco.pivot=b"),
        "{cmdline}"
    );
    ensure!(vm.run("cat /usr/share/mco-os-version")?.trim() == "b");
    let status = vm.run("ostree admin status")?;
    ensure!(
        booted_checksum(&status).as_deref() == Some(commit_b.trim()),
        "{status}"
    );
    ensure!(vm.run("cat /var/lib/mco-vmtest/var /etc/mco-vmtest")? == "kept\nkept\n");
    ensure!(
        vm.current_boot().system_state == "running",
        "{}",
        vm.run("systemctl --failed --no-legend")?
    );
    vm.poweroff()
}

#[test]
#[ignore = "boots a qemu VM: run by tests/vm/run.sh"]
fn selftest_a_failed_boot_is_reported_at_once() -> Result<()> {
    let started = std::time::Instant::now();
    // the initramfs cannot mount a disk that is not there: it powers off
    let err = match Vm::builder("selftest-failed-boot", Disk::Plain)
        .karg("root=/dev/vdz")
        .boot()
    {
        Ok(_) => anyhow::bail!("a boot without its root disk succeeded"),
        Err(e) => format!("{e:#}"),
    };
    ensure!(err.contains("qemu exited during boot"), "{err}");
    ensure!(
        err.contains("initrd: cannot mount /dev/vdz"),
        "the console tail is not in the error: {err}"
    );
    ensure!(
        started.elapsed() < std::time::Duration::from_secs(120),
        "took {:?}",
        started.elapsed()
    );
    Ok(())
}

/// kubectl on the host's PATH (tests/setup.sh installs one).
fn which_kubectl() -> Result<std::path::PathBuf> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("kubectl"))
        .find(|p| p.is_file())
        .context("kubectl is not on PATH (tests/setup.sh installs it)")
}

#[test]
fn booted_checksum_reads_ostree_admin_status() {
    let status = "  debian 1111.0 (staged)\n* debian 2222.1\n    origin refspec: debian/mco/b\n  debian 3333.0 (rollback)\n";
    assert_eq!(booted_checksum(status).as_deref(), Some("2222"));
    assert_eq!(booted_checksum("  debian 1111.0\n"), None);
}

#[test]
#[ignore = "boots a qemu VM: run by tests/vm/run.sh"]
fn selftest_rpmostree_standin_serves_the_booted_sysroot() -> Result<()> {
    let mut vm = Vm::builder("selftest-rpmostree-standin", Disk::Ostree).boot()?;
    vm.install_rpmostree_standin()?;
    ensure!(vm.run("systemctl is-active rpm-ostreed.service")?.trim() == "active");
    let sysroot = "org.projectatomic.rpmostree1 /org/projectatomic/rpmostree1/Sysroot \
                   org.projectatomic.rpmostree1.Sysroot";
    let booted = vm.run(&format!("busctl get-property {sysroot} Booted"))?;
    ensure!(
        booted.trim() == "o \"/org/projectatomic/rpmostree1/debian\"",
        "Booted: {booted}"
    );
    let commit_a = vm.run("ostree rev-parse debian/mco/a")?;
    let deployments = vm.run(&format!(
        "busctl get-property --json=short {sysroot} Deployments"
    ))?;
    ensure!(
        deployments.contains(commit_a.trim()),
        "the booted commit {} is not among the deployments: {deployments}",
        commit_a.trim()
    );
    vm.poweroff()
}
