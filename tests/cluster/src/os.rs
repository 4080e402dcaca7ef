//! A node's OS, for scenarios that change it: the node's own private system bus
//! (`dbus-daemon`), a real ostree sysroot made for the node, and the rpm-ostree stand-in
//! (`mco-test-rpmostreed`) as a process serving that sysroot on that bus. The agent gets the
//! bus as its system bus, so it rebases through rpm-ostree's D-Bus API as on a node.
//!
//! The sysroot is not booted: a rebase becomes the default deployment at once, and the agent
//! (which reads the booted deployment, else the default one) finds it booted after the tier's
//! simulated reboot (a new boot id). Container images are mapped to commits the scenario
//! prepares ([`NodeOs::prepare_image`]); the stand-in refuses a pull from a registry named in
//! [`AUTH_REQUIRED`] unless `/run/ostree/auth.json` in the node's root has credentials for it,
//! so the agent must have arranged the pull secret.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use mco_test_support::dbus::PrivateBus;
use mco_test_support::rpmostreed::BUS_NAME;
use mco_test_support::sysroot::{DeploymentEntry, MUTABLE_DEPLOYMENTS, TestSysroot};

/// The registry whose pulls need credentials.
pub const AUTH_REQUIRED: &str = "registry.e2e.example";

/// The kubelet's pull secret every OS node gets in its root (credentials for
/// [`AUTH_REQUIRED`]); the agent points `/run/ostree/auth.json` at it.
pub const KUBELET_PULL_SECRET: &str = "var/lib/kubelet/config.json";
const PULL_SECRET: &str = r#"{"auths":{"registry.e2e.example":{"auth":"ZTJlOmUyZQ=="}}}"#;

pub struct NodeOs {
    // Field order is drop order: the stand-in goes before its bus and its sysroot.
    standin: Option<Child>,
    bus: PrivateBus,
    pub sysroot: TestSysroot,
    image_map: PathBuf,
    log: PathBuf,
}

impl NodeOs {
    /// A sysroot with one deployment, a bus, and the stand-in on it (waits for its name);
    /// the kubelet's pull secret written into `root`.
    pub async fn start(standin: &Path, dir: &Path, root: &Path) -> Result<NodeOs> {
        std::fs::create_dir_all(dir)?;
        let secret = root.join(KUBELET_PULL_SECRET);
        std::fs::create_dir_all(secret.parent().context("pull secret directory")?)?;
        std::fs::write(&secret, PULL_SECRET)?;
        let sysroot = TestSysroot::builder().build()?;
        let bus = PrivateBus::start()?;
        let image_map = dir.join("images");
        std::fs::write(&image_map, "")?;
        let log = dir.join("rpmostreed.log");
        let out = std::fs::File::create(&log)?;
        let child = Command::new(standin)
            .arg("--sysroot")
            .arg(sysroot.path())
            .arg("--run-dir")
            .arg(dir.join("run"))
            .arg("--image-map")
            .arg(&image_map)
            .args(["--auth-required", AUTH_REQUIRED])
            .arg("--auth-root")
            .arg(root)
            .env("DBUS_SYSTEM_BUS_ADDRESS", bus.address())
            .env(MUTABLE_DEPLOYMENTS.0, MUTABLE_DEPLOYMENTS.1)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {}", standin.display()))?;
        let mut os = NodeOs {
            standin: Some(child),
            bus,
            sysroot,
            image_map,
            log,
        };
        if let Err(e) = os
            .bus
            .wait_for_name(BUS_NAME, Duration::from_secs(20))
            .await
        {
            let exited = os
                .standin
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            bail!("the rpm-ostree stand-in ({exited:?}): {e:#}\n{}", os.logs());
        }
        Ok(os)
    }

    /// The address the agent gets as `DBUS_SYSTEM_BUS_ADDRESS`.
    pub fn bus_address(&self) -> &str {
        self.bus.address()
    }

    /// Commits a fresh OS tree of `version` to `refname` and maps `image` to it; the commit.
    pub fn prepare_image(&self, image: &str, refname: &str, version: &str) -> Result<String> {
        let commit = self.sysroot.commit(refname, version)?;
        let mut map = std::fs::read_to_string(&self.image_map)?;
        map.push_str(&format!("{image} {refname}\n"));
        std::fs::write(&self.image_map, map)?;
        Ok(commit)
    }

    /// The deployments, default first.
    pub fn deployments(&self) -> Result<Vec<DeploymentEntry>> {
        self.sysroot.deployments()
    }

    /// The stand-in's log.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for NodeOs {
    fn drop(&mut self) {
        if let Some(mut child) = self.standin.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
