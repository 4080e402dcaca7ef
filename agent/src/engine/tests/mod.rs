//! Unit tests of the engine with a fake for every seam (systemd, rpm-ostree, reboot, cluster)
//! over temp roots. A "restart" is a new [`Engine`] over the same root; a "reboot" is the fake
//! rpm-ostree booting its staged deployment plus a new boot id.

mod backups;
mod boot_rollback;
mod boot_rollback_etc;
mod hooks;
mod leave_image_mode;
mod locked;
mod mcd_os;
mod progress;
mod reboot;
mod rebootless;
mod resume;
mod stale_temps;
mod stop;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use machine_config::MachineConfig;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::json;

use super::fake::FakeCluster;
use super::{Engine, EngineOptions, Seams};
use crate::host::reboot::FakeRebooter;
use crate::host::systemd::{ActiveState, FakeSystemd};
use crate::os::{FakeInstalledPackages, FakeOsUpdater};
use crate::rootfs::Root;

pub(crate) const IMAGE: &str = "quay.io/example/os@sha256:1111";

/// A node: a temp root, a boot id, and fakes for every seam.
pub(crate) struct Node {
    pub dir: tempfile::TempDir,
    pub boot_file: PathBuf,
    pub cluster: Arc<FakeCluster>,
    pub systemd: Arc<FakeSystemd>,
    pub os: Arc<FakeOsUpdater>,
    pub rebooter: Arc<FakeRebooter>,
    /// The booted OS's RPM database (empty: no extension packages).
    pub packages: Arc<FakeInstalledPackages>,
    boots: std::cell::Cell<u32>,
}

impl Node {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        fs::create_dir_all(r.join("etc")).unwrap();
        fs::write(r.join("etc/passwd"), "root:x:0:0:root:/root:/bin/bash\n").unwrap();
        fs::write(r.join("etc/group"), "root:x:0:\n").unwrap();
        fs::write(r.join("etc/chrony.conf"), "vendor\n").unwrap();
        let boot_file = r.join("boot_id");
        fs::write(&boot_file, "boot-1\n").unwrap();
        let systemd = FakeSystemd::new()
            .with_unit("crio.service", ActiveState::Active)
            .with_reloadable("crio.service")
            .with_unit("kubelet.service", ActiveState::Active);
        Node {
            dir,
            boot_file,
            cluster: Arc::new(FakeCluster::new()),
            systemd: Arc::new(systemd),
            os: Arc::new(FakeOsUpdater::booted("rhcos", IMAGE, "root=LABEL=root rw")),
            rebooter: Arc::new(FakeRebooter::new()),
            packages: Arc::new(FakeInstalledPackages::default()),
            boots: std::cell::Cell::new(1),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn seams(&self) -> Seams {
        Seams {
            units: None,
            systemd: Some(self.systemd.clone()),
            os: Some(self.os.clone()),
            os_unavailable: String::new(),
            rebooter: Some(self.rebooter.clone()),
            no_reboot: String::new(),
            packages: Some(self.packages.clone()),
            commands: None,
        }
    }

    /// A freshly started agent.
    pub fn engine(&self) -> Engine {
        self.engine_with(self.seams())
    }

    pub fn engine_with(&self, seams: Seams) -> Engine {
        self.engine_opts(seams, super::HealthOptions::default())
    }

    /// A freshly started agent whose health checks run with `health`.
    pub fn engine_opts(&self, seams: Seams, health: super::HealthOptions) -> Engine {
        let opts = EngineOptions {
            boot_id_file: self.boot_file.clone(),
            health,
            ..EngineOptions::default()
        };
        Engine::new(
            Root::open(self.path()).unwrap(),
            seams,
            opts,
            self.cluster.clone(),
        )
        .unwrap()
    }

    /// Reboots: the staged deployment boots (unless `lose_staged`), the boot id changes.
    pub fn reboot(&self, lose_staged: bool) {
        if !lose_staged {
            self.os.reboot();
        }
        self.boots.set(self.boots.get() + 1);
        fs::write(&self.boot_file, format!("boot-{}\n", self.boots.get())).unwrap();
    }

    pub fn read(&self, path: &str) -> Option<String> {
        fs::read_to_string(self.path().join(path.trim_start_matches('/'))).ok()
    }

    pub fn write(&self, path: &str, contents: &str) {
        let p = self.path().join(path.trim_start_matches('/'));
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, contents).unwrap();
    }

    /// The name in `currentconfig`.
    pub fn current(&self) -> Option<String> {
        let json = self.read(machine_config::mco::paths::CURRENT_CONFIG)?;
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        Some(v["metadata"]["name"].as_str().unwrap().to_string())
    }

    pub fn recorded_step(&self) -> Option<String> {
        let rec = super::record::load(&Root::open(self.path()).unwrap()).unwrap()?;
        Some(rec.step.to_string())
    }

    /// Puts the node in `mc` as Ignition would at first boot: files written, `currentconfig`
    /// recorded, the OS as it is.
    pub async fn provision(&self, mc: &MachineConfig) {
        let root = Root::open(self.path()).unwrap();
        let options = crate::apply::ApplyOptions {
            field_prefix: "$.spec.config",
            write_all: false,
            first_application: true,
            skip_certificate_write: false,
        };
        let units = crate::units::OfflineUnits::new(&root);
        crate::apply::apply(
            &root,
            &machine_config::Config::empty(),
            &mc.ignition().unwrap(),
            &options,
            &units,
        )
        .await
        .unwrap();
        crate::input::write_current(&root, mc).unwrap();
    }
}

/// A file of a config: path and contents.
pub(crate) type F<'a> = (&'a str, &'a str);

/// A MachineConfig with these files (mode 0644), kernel arguments and OS image.
pub(crate) fn mc(name: &str, files: &[F<'_>], kargs: &[&str], image: &str) -> MachineConfig {
    let files: Vec<_> = files
        .iter()
        .map(|(path, contents)| {
            json!({
                "path": path,
                "mode": 420,
                "overwrite": true,
                "contents": {"source": format!("data:,{}", utf8_percent_encode(contents, NON_ALPHANUMERIC))},
            })
        })
        .collect();
    MachineConfig::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name},
        "spec": {
            "osImageURL": image,
            "kernelArguments": kargs,
            "config": {"ignition": {"version": "3.2.0"}, "storage": {"files": files}},
        },
    }))
    .unwrap()
}

/// A file whose change only reloads crio under the default policy.
pub(crate) const CRIO_POLICY: &str = "/etc/containers/policy.json";
/// A file whose change reboots under the default policy.
pub(crate) const REBOOT_FILE: &str = "/etc/mco/reboot.conf";
