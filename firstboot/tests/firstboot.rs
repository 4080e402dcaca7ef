//! `mco-firstboot` as a process against the rpm-ostree stand-in over a real ostree sysroot and
//! a fake logind, both on a private system bus, with a temp directory as the node's root.

use std::path::{Path, PathBuf};
use std::process::Output;

use machine_config::mco::paths::{ENCAPSULATED, ENCAPSULATED_BAK as BAK};
use mco_test_support::dbus::PrivateBus;
use mco_test_support::logind::FakeLogind;
use mco_test_support::rpmostreed::{Config, Daemon};
use mco_test_support::sysroot::{DeploymentEntry, TestSysroot};

const IMAGE: &str = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

/// A node: its root, and rpm-ostree and logind on a private bus.
struct Node {
    root: tempfile::TempDir,
    run_dir: tempfile::TempDir,
    bus: PrivateBus,
    sysroot: TestSysroot,
    daemon: Option<Daemon>,
    logind: FakeLogind,
    /// The checksum of the image's commit.
    image_commit: String,
}

impl Node {
    async fn new() -> Node {
        let bus = PrivateBus::start().unwrap();
        let sysroot = TestSysroot::builder()
            .kargs(&["root=LABEL=root", "rw"])
            .build()
            .unwrap();
        let image_commit = sysroot.commit("fakeos/v2", "2.0").unwrap();
        let run_dir = tempfile::tempdir().unwrap();
        let image_map = run_dir.path().join("images");
        std::fs::write(&image_map, format!("{IMAGE} fakeos/v2\n")).unwrap();
        let daemon = Daemon::start(
            Config {
                sysroot: sysroot.path().to_path_buf(),
                run_dir: run_dir.path().join("run"),
                image_map: Some(image_map),
                auth: Default::default(),
                txn_delay: std::time::Duration::ZERO,
                peer_setup_delay: std::time::Duration::ZERO,
            },
            bus.connect().await.unwrap(),
        )
        .await
        .unwrap();
        let logind = FakeLogind::start(bus.connect().await.unwrap())
            .await
            .unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("etc")).unwrap();
        std::fs::create_dir_all(root.path().join("proc/sys/crypto")).unwrap();
        std::fs::write(root.path().join("proc/sys/crypto/fips_enabled"), "0\n").unwrap();
        Node {
            root,
            run_dir,
            bus,
            sysroot,
            daemon: Some(daemon),
            logind,
            image_commit,
        }
    }

    /// `path` (absolute, as on the node) inside the node's root.
    fn path(&self, path: &str) -> PathBuf {
        self.root.path().join(path.trim_start_matches('/'))
    }

    fn write_encapsulated(&self, json: &str) {
        std::fs::write(self.path(ENCAPSULATED), json).unwrap();
    }

    /// `mco-firstboot --root ROOT ARGS...` on this node's bus.
    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco-firstboot"));
        cmd.arg("--root")
            .arg(self.root.path())
            .args(args)
            .env("DBUS_SYSTEM_BUS_ADDRESS", self.bus.address())
            .env("RUST_LOG", "info")
            .env_remove("INVOCATION_ID")
            .env_remove("JOURNAL_STREAM")
            .kill_on_drop(true);
        cmd
    }

    /// Runs `mco-firstboot --root ROOT ARGS...` on this node's bus.
    async fn run(&self, args: &[&str]) -> (String, String, i32) {
        let out: Output = self.command(args).output().await.unwrap();
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            out.status.code().unwrap_or(-1),
        )
    }

    fn transactions(&self) -> Vec<String> {
        self.daemon.as_ref().unwrap().transactions()
    }

    fn deployments(&self) -> Vec<DeploymentEntry> {
        self.sysroot.deployments().unwrap()
    }

    async fn stop(mut self) {
        if let Some(d) = self.daemon.take() {
            d.shutdown().await;
        }
        drop(self.run_dir);
    }
}

/// The encapsulated config the config server writes: the target with an empty Ignition config.
fn encapsulated(name: &str, image: &str, kargs: &[&str], fips: bool) -> String {
    serde_json::json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name},
        "spec": {
            "osImageURL": image,
            "kernelArguments": kargs,
            "fips": fips,
            "config": {"ignition": {"version": "3.4.0"}},
        },
    })
    .to_string()
}

fn exists(p: &Path) -> bool {
    p.exists()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_image_and_kargs_are_one_rebase_one_kargs_transaction_and_one_reboot() {
    let node = Node::new().await;
    node.write_encapsulated(&encapsulated(
        "rendered-worker-1",
        IMAGE,
        &["nosmt", "mco.first=1 mco.second=\"a b\""],
        false,
    ));
    let (stdout, stderr, code) = node.run(&[]).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(
        stdout,
        format!(
            "staged for rendered-worker-1: rebased to {IMAGE}\n\
             staged for rendered-worker-1: kernel arguments: +nosmt +mco.first=1 +mco.second=\"a b\"\n\
             rebooting into rendered-worker-1\n"
        )
    );
    assert_eq!(node.transactions(), ["Cleanup", "Rebase", "KernelArgs"]);
    assert_eq!(node.logind.reboots(), 1);
    assert!(!exists(&node.path(ENCAPSULATED)) && exists(&node.path(BAK)));
    let next = &node.deployments()[0];
    assert_eq!(next.checksum, node.image_commit);
    assert_eq!(
        next.origin_value("origin", "container-image-reference"),
        Some(format!("ostree-unverified-registry:{IMAGE}"))
    );
    let kargs: Vec<&str> = next
        .kargs()
        .into_iter()
        .filter(|a| !a.starts_with("ostree="))
        .collect();
    assert_eq!(
        kargs.join(" "),
        "root=LABEL=root rw nosmt mco.first=1 mco.second=\"a b\""
    );
    assert!(
        stderr.contains("first boot: the booted OS differs from rendered-worker-1"),
        "{stderr}"
    );

    // The reboot happened (the stand-in's sysroot is not booted: the new default deployment
    // is what runs). The unit's condition no longer holds; run anyway, nothing happens.
    let (stdout, stderr, code) = node.run(&[]).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(
        stdout,
        format!(
            "first boot is complete: no {}\n",
            node.path(ENCAPSULATED).display()
        )
    );
    // Even with the file put back, the node already runs the target's OS.
    std::fs::copy(node.path(BAK), node.path(ENCAPSULATED)).unwrap();
    let (stdout, stderr, code) = node.run(&[]).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.starts_with(
            "first boot is complete: the node runs the OS of rendered-worker-1; removed "
        ),
        "{stdout}"
    );
    assert!(!exists(&node.path(ENCAPSULATED)));
    assert_eq!(node.transactions(), ["Cleanup", "Rebase", "KernelArgs"]);
    assert_eq!(node.logind.reboots(), 1);
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_change_removes_the_file_without_a_transaction_or_a_reboot() {
    let node = Node::new().await;
    let before = node.deployments();
    // No image to manage; the only requested argument is already there.
    node.write_encapsulated(&encapsulated("rendered-worker-0", "", &["rw"], false));
    let (stdout, stderr, code) = node.run(&[]).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("the node runs the OS of rendered-worker-0; removed"),
        "{stdout}"
    );
    assert!(!exists(&node.path(ENCAPSULATED)) && !exists(&node.path(BAK)));
    assert_eq!(node.transactions(), Vec::<String>::new());
    assert_eq!(node.logind.reboots(), 0);
    assert_eq!(node.deployments(), before);
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_clear_error_and_changes_nothing() {
    let node = Node::new().await;
    let before = node.deployments();
    let fips = encapsulated("rendered-worker-1", IMAGE, &[], true);
    for (contents, want) in [
        (
            "{\"apiVersion\": ",
            &["ignition-machine-config-encapsulated.json: "][..],
        ),
        (
            &fips,
            &[
                "cannot complete first boot to rendered-worker-1: ",
                "detected change to FIPS flag; refusing to modify FIPS on a running cluster",
            ],
        ),
        (
            r#"{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfig","metadata":{"name":"x"},"spec":{"kernelType":"turbo","config":{"ignition":{"version":"3.2.0"}}}}"#,
            &["cannot complete first boot to x: ", "turbo"],
        ),
    ] {
        node.write_encapsulated(contents);
        let (stdout, stderr, code) = node.run(&[]).await;
        assert_eq!(code, 1, "{contents}: {stdout}{stderr}");
        let last = stderr.lines().last().unwrap_or_default();
        assert!(last.starts_with("error: "), "{contents}: {stderr}");
        for w in want {
            assert!(last.contains(w), "{w:?} not in {last}");
        }
        assert_eq!(
            std::fs::read_to_string(node.path(ENCAPSULATED)).unwrap(),
            contents
        );
    }
    assert_eq!(node.transactions(), Vec::<String>::new());
    assert_eq!(node.logind.reboots(), 0);
    assert_eq!(node.deployments(), before);
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_reboot_stages_and_sets_the_file_aside_without_rebooting() {
    let node = Node::new().await;
    node.write_encapsulated(&encapsulated("rendered-worker-1", "", &["nosmt"], false));
    let (stdout, stderr, code) = node.run(&["--skip-reboot"]).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(
        stdout,
        "staged for rendered-worker-1: kernel arguments: +nosmt\n\
         reboot needed into rendered-worker-1: not rebooting (--skip-reboot)\n"
    );
    assert_eq!(node.transactions(), ["Cleanup", "KernelArgs"]);
    assert_eq!(node.logind.reboots(), 0);
    assert!(exists(&node.path(BAK)));
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_retry_every_a_failed_attempt_is_retried_until_one_succeeds() {
    let node = Node::new().await;
    node.write_encapsulated("{ not json");
    let child = node
        .command(&["--retry-every", "200ms", "--skip-reboot"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    node.write_encapsulated(&encapsulated("rendered-worker-1", "", &["nosmt"], false));
    let out = tokio::time::timeout(std::time::Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("mco-firstboot retried for 30 s")
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stderr.contains("error: attempt 1 failed: ") && stderr.contains("; retrying in 200ms"),
        "{stderr}"
    );
    assert!(
        stdout.ends_with("not rebooting (--skip-reboot)\n"),
        "{stdout}"
    );
    assert_eq!(node.transactions(), ["Cleanup", "KernelArgs"]);
    node.stop().await;
}
