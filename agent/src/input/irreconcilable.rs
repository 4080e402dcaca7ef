//! The node's irreconcilable differences for its MachineConfigNode (the MCD's
//! `irreconcilable_diff_reporter.go`, under the `IrreconcilableMachineConfig` feature gate): the
//! storage sections of the config the node runs against those of the config it was installed
//! with, the served `/etc/mcs-machine-config-content.json` first boot left
//! ([`machine_config::irreconcilable`] compares them).

use std::path::Path;

use anyhow::{Context, Result, bail};
use machine_config::MachineConfig;
use machine_config::irreconcilable::{IrreconcilableChange, differences};
use machine_config::mco::paths::SERVED_CONTENT;

use crate::rootfs::Root;

/// The differences between the install-time config and the current config named `config`;
/// the MCD's error when there is no install-time config to compare with.
pub fn report(root: &Root, config: &str) -> Result<Vec<IrreconcilableChange>> {
    let Some(bytes) = root.read(Path::new(SERVED_CONTENT))? else {
        bail!("cannot locate and read the install-time configuration ({SERVED_CONTENT})");
    };
    let installed = MachineConfig::from_slice(&bytes)
        .and_then(|mc| mc.ignition())
        .with_context(|| {
            format!("failed to get the install-time configuration {SERVED_CONTENT}")
        })?;
    let current = super::read_current(root)?
        .filter(|c| c.machine_config.name() == config)
        .with_context(|| format!("the current config on disk is not {config}"))?;
    Ok(differences(&installed.storage, &current.ignition.storage))
}

#[cfg(test)]
mod tests {
    use machine_config::mco::paths::CURRENT_CONFIG;
    use serde_json::json;

    use super::*;

    fn machine_config(name: &str, disk: &str) -> String {
        json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {"name": name},
            "spec": {"config": {
                "ignition": {"version": "3.4.0"},
                "storage": {
                    "disks": [{"device": disk, "wipeTable": true}],
                    "files": [{"path": "/etc/reconcilable", "contents": {"source": format!("data:,{name}")}}],
                },
            }},
        })
        .to_string()
    }

    fn write(dir: &Path, path: &str, text: &str) {
        let host = dir.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(host.parent().unwrap()).unwrap();
        std::fs::write(host, text).unwrap();
    }

    #[test]
    fn the_current_config_against_the_install_time_one() {
        let tmp = tempfile::tempdir().unwrap();
        let root = Root::open(tmp.path()).unwrap();
        let missing = report(&root, "rendered-b").unwrap_err().to_string();
        assert!(
            missing.contains("cannot locate and read the install-time configuration"),
            "{missing}"
        );

        write(
            tmp.path(),
            SERVED_CONTENT,
            &machine_config("rendered-a", "/dev/sda"),
        );
        write(
            tmp.path(),
            CURRENT_CONFIG,
            &machine_config("rendered-b", "/dev/sdb"),
        );
        let changes = report(&root, "rendered-b").unwrap();
        let paths: Vec<&str> = changes.iter().map(|c| c.field_path.as_str()).collect();
        assert_eq!(paths, ["spec.config.storage.disks[0].device"]);
        assert_eq!(changes[0].diff, "- \"/dev/sda\"\n+ \"/dev/sdb\"");

        // the same storage: nothing to report (files differ, and are reconcilable)
        write(
            tmp.path(),
            CURRENT_CONFIG,
            &machine_config("rendered-c", "/dev/sda"),
        );
        assert!(report(&root, "rendered-c").unwrap().is_empty());
        // a current config that is not the one Done names is not compared
        let other = report(&root, "rendered-d").unwrap_err().to_string();
        assert!(other.contains("not rendered-d"), "{other}");
    }
}
