//! Image mode and `mco-agent pivot` on a booted CoreOS-like guest (the ostree disk): the
//! rpm-ostree stand-in on the guest's system bus rebases to the container images
//! `OS_IMAGE_A`/`OS_IMAGE_B` (commits `debian/mco/a`/`b`); systemd, logind, journald and ostree
//! are real. Run with `tests/vm/run.sh` (ignored by plain `cargo test`: each boots a VM).

use std::time::Duration;

use anyhow::{Result, ensure};
use mco_vm_tests::agent::{OS_IMAGE_A, OS_IMAGE_B};
use mco_vm_tests::cluster::GuestCluster;
use mco_vm_tests::{Disk, Vm};
use serde_json::json;

/// The kubelet's pull secret, which the agent links `/run/ostree/auth.json` to (no merged
/// secret on this node), with credentials for the OS images' registry.
const PULL_SECRET: &str = "/var/lib/kubelet/config.json";
const PULL_SECRET_JSON: &str = r#"{"auths":{"quay.io":{"auth":"bWNvOnZtdGVzdA=="}}}"#;
/// The registry of `OS_IMAGE_A`/`OS_IMAGE_B`.
const OS_REGISTRY: &str = "quay.io";
/// A file only the image-mode update's config has.
const IMAGE_FILE: &str = "/etc/mco-vmtest/image.conf";

/// A `data:` URL of `text` (everything but unreserved characters percent-encoded).
fn data_url(text: &str) -> String {
    let mut url = String::from("data:,");
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            url.push(b as char);
        } else {
            url.push_str(&format!("%{b:02X}"));
        }
    }
    url
}

/// A rendered config as the MCO renders it for a pool whose base OS image is `OS_IMAGE_A`:
/// the kubelet's pull secret and `files` (path, contents).
fn rendered(files: &[(&str, &str)]) -> serde_json::Value {
    let files: Vec<_> = [(PULL_SECRET, PULL_SECRET_JSON)]
        .iter()
        .chain(files)
        .map(|(path, text)| {
            json!({"path": path, "mode": 0o600, "overwrite": true,
                   "contents": {"source": data_url(&format!("{text}\n"))}})
        })
        .collect();
    json!({
        "osImageURL": OS_IMAGE_A,
        "config": {"ignition": {"version": "3.2.0"}, "storage": {"files": files}},
    })
}

#[test]
#[ignore = "boots a qemu VM: run by tests/vm/run.sh"]
fn image_mode_update_rebases_to_the_desired_image_and_boots_it_once() -> Result<()> {
    let cluster = GuestCluster::start()?;
    cluster.add_config("rendered-worker-1", rendered(&[]))?;
    cluster.add_config("rendered-worker-2", rendered(&[(IMAGE_FILE, "layered")]))?;
    // Two boots and the agent's start in each: 220-318 s under TCG on a loaded machine.
    let mut vm = Vm::builder("image-mode-update", Disk::Ostree)
        .timeout(Duration::from_secs(420))
        .boot()?;
    // A node installed from the pool's base image, in rendered-worker-1 (Ignition wrote its
    // file; the Node carries the config, as after provisioning).
    vm.booted_from_image(OS_IMAGE_A)?;
    vm.install_agent()?;
    vm.install_rpmostree_standin()?;
    // The registry refuses anonymous pulls: the rebase works only with the pull secret linked.
    vm.standin_requires_auth(OS_REGISTRY)?;
    cluster.install_kubeconfig(&mut vm)?;
    // A persistent journal (under /var, shared by the deployments), so the journal of the boot
    // that staged the update is still there after it.
    vm.run("mkdir -p /var/log/journal && systemd-tmpfiles --create --prefix /var/log/journal && journalctl --flush")?;
    vm.run(&format!(
        "install -D -m600 /dev/stdin {PULL_SECRET} <<'EOF'\n{PULL_SECRET_JSON}\nEOF"
    ))?;
    cluster.set_annotations(&[
        ("currentConfig", Some("rendered-worker-1")),
        ("desiredConfig", Some("rendered-worker-1")),
    ])?;
    vm.start_agent_unit()?;
    cluster.wait_for_state("Done", Some("rendered-worker-1"), Duration::from_secs(90))?;
    ensure!(vm.run("cat /usr/share/mco-os-version")?.trim() == "a");
    ensure!(cluster.annotation("currentImage").is_none());

    // The pool goes into image mode with a new config: the node controller sets both at once.
    cluster.set_annotations(&[
        ("desiredConfig", Some("rendered-worker-2")),
        ("desiredImage", Some(OS_IMAGE_B)),
    ])?;
    vm.wait_for_reboot(Duration::from_secs(240))?;
    cluster.wait_for_state("Done", Some("rendered-worker-2"), Duration::from_secs(180))?;

    ensure!(vm.run("cat /usr/share/mco-os-version")?.trim() == "b");
    let commit_b = vm.run("ostree rev-parse debian/mco/b")?;
    let status = vm.run("ostree admin status")?;
    ensure!(
        status.contains(&format!("* debian {}.", commit_b.trim())),
        "ostree admin status:\n{status}"
    );
    let origin = vm.run("cat /ostree/deploy/debian/deploy/$(ostree admin status | sed -n 's/^\\* debian \\([0-9a-f]*\\.[0-9]*\\).*/\\1/p').origin")?;
    ensure!(
        origin.contains(&format!("ostree-unverified-registry:{OS_IMAGE_B}")),
        "the booted deployment's origin:\n{origin}"
    );
    ensure!(
        cluster.annotation("currentImage").as_deref() == Some(OS_IMAGE_B),
        "currentImage: {:?}",
        cluster.annotation("currentImage")
    );
    ensure!(
        vm.run("cat /etc/machine-config-daemon/currentimage")?
            .trim()
            == OS_IMAGE_B
    );
    ensure!(vm.run(&format!("cat {IMAGE_FILE}"))? == "layered\n");
    ensure!(vm.run("readlink /run/ostree/auth.json")?.trim() == PULL_SECRET);
    ensure!(vm.boots().len() == 2, "boots: {}", vm.boots().len());
    let status = vm.run("mco-agent status")?;
    ensure!(
        status
            .lines()
            .any(|l| l.starts_with("Image:") && l.ends_with(&format!(" {OS_IMAGE_B} (image mode)")))
            && !status.contains("Image wanted:"),
        "mco-agent status:\n{status}"
    );
    // Both boots: the update staged in the first, verified in the second.
    let journal = vm.run("journalctl -u mco-agent.service -o cat")?;
    for said in [
        "desiredImage changed",
        &format!("Updating OS to layered image \"{OS_IMAGE_B}\""),
        "Linking rpm-ostree authfile to /var/lib/kubelet/config.json",
        "the update took: booted deployment, kernel arguments and files match",
        "Setting node mco-test, currentConfig rendered-worker-2 to Done",
    ] {
        ensure!(
            journal.contains(said),
            "journalctl -u mco-agent does not say {said:?}:\n{journal}"
        );
    }
    vm.poweroff()
}

#[test]
#[ignore = "boots a qemu VM: run by tests/vm/run.sh"]
fn pivot_to_an_image_boots_the_new_commit() -> Result<()> {
    let mut vm = Vm::builder("pivot-image", Disk::Ostree).boot()?;
    vm.install_agent()?;
    vm.install_rpmostree_standin()?;
    let deployments = vm.run("ostree admin status")?;

    // --dry-run says what would change and changes nothing.
    let dry = vm.run(&format!("mco-agent pivot {OS_IMAGE_B} --dry-run 2>&1"))?;
    ensure!(
        dry.contains(&format!(
            "would rebase the OS from an OS that is not an image to {OS_IMAGE_B}\n\
             would reboot into it\n(dry run: nothing changed)"
        )),
        "mco-agent pivot --dry-run said:\n{dry}"
    );
    ensure!(vm.run("ostree admin status")? == deployments);
    vm.run("test ! -e /run/ostree/auth.json")?;

    // Outside the guest agent's session: the command reboots the guest.
    vm.run(&format!(
        "systemd-run --unit=mco-pivot --collect /bin/sh -c \
         'mco-agent pivot {OS_IMAGE_B} --reboot > /var/tmp/pivot.out 2>&1'"
    ))?;
    vm.wait_for_reboot(Duration::from_secs(240))?;
    let out = vm.run("cat /var/tmp/pivot.out")?;
    ensure!(
        out.contains(&format!(
            "staged {OS_IMAGE_B} (was an OS that is not an image)\nrebooting into it"
        )),
        "mco-agent pivot said:\n{out}"
    );
    ensure!(vm.run("cat /usr/share/mco-os-version")?.trim() == "b");
    let commit_b = vm.run("ostree rev-parse debian/mco/b")?;
    let status = vm.run("ostree admin status")?;
    ensure!(
        status.contains(&format!("* debian {}.", commit_b.trim())),
        "ostree admin status:\n{status}"
    );
    ensure!(vm.boots().len() == 2, "boots: {}", vm.boots().len());
    // The booted deployment: commit b (its short checksum), from the image.
    let shown = vm.run("mco-agent status")?;
    let lines: Vec<&str> = shown.lines().collect();
    ensure!(
        lines.windows(2).any(|w| w[0].starts_with("Booted:")
            && w[0].ends_with(&format!("debian {}", &commit_b.trim()[..12]))
            && w[1].trim() == format!("image {OS_IMAGE_B}")),
        "mco-agent status after the pivot:\n{shown}"
    );
    // Pivoting again to the image it runs does nothing.
    let again = vm.run(&format!("mco-agent pivot {OS_IMAGE_B} --dry-run 2>&1"))?;
    ensure!(
        again.contains(&format!("already running {OS_IMAGE_B}: nothing to do")),
        "mco-agent pivot again said:\n{again}"
    );
    vm.poweroff()
}
