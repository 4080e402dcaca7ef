//! The two configs first boot plans between: the node as booted ("old", the MCD's
//! `mco-empty-mc` with the booted OS), and the encapsulated target ("new"), both with the same
//! empty Ignition config so that only the OS can differ.

use std::path::Path;

use anyhow::{Context, Result};
use machine_config::{IgnitionJson, MachineConfig, MachineConfigSpec, extensions, kargs};
use mco_agent::os::Deployment;
use mco_agent::rootfs::Root;
use serde_json::json;

/// The old config's name (the MCD's).
pub const BASELINE_NAME: &str = machine_config::mco::EMPTY_CONFIG_NAME;
/// Where the kernel says whether FIPS mode is on (inside the root).
pub const FIPS_FILE: &str = "/proc/sys/crypto/fips_enabled";

/// The Ignition spec of an empty config when the target names none (the MCD's default).
const DEFAULT_SPEC: &str = "3.5.0";

/// `(old, new)`: the booted node and the target, with `target`'s Ignition spec and no content.
pub fn configs(
    target: &MachineConfig,
    booted: &Deployment,
    fips: bool,
) -> (MachineConfig, MachineConfig) {
    let version = target
        .spec
        .config
        .as_ref()
        .and_then(|c| c.version())
        .unwrap_or(DEFAULT_SPEC)
        .to_string();
    let empty = json!({ "ignition": { "version": version } });
    let mut new = target.clone();
    if new.spec.config.as_ref().is_some_and(|c| *c != empty) {
        tracing::warn!(
            config = target.name(),
            "the encapsulated config has Ignition content: not applied (Ignition applied the served config at first boot)"
        );
    }
    new.spec.config = Some(IgnitionJson::from_value(empty.clone()));
    // One argument per entry, so that an entry with several compares argument by argument.
    new.spec.kernel_arguments = kargs::split_all(&target.spec.kernel_arguments);
    let t = &new.spec;
    let old = MachineConfig::new(
        BASELINE_NAME,
        MachineConfigSpec {
            // A target without an image does not manage it: nothing to compare.
            os_image_url: if t.os_image_url.is_empty() {
                String::new()
            } else {
                booted.image_url().unwrap_or_default()
            },
            config: Some(IgnitionJson::from_value(empty)),
            kernel_arguments: running_kargs(
                &t.kernel_arguments,
                booted.kargs.as_deref().unwrap_or_default(),
            ),
            kernel_type: booted_kernel_type(booted).to_string(),
            extensions: t
                .extensions
                .iter()
                .filter(|e| layered(e, booted))
                .cloned()
                .collect(),
            fips,
            ..MachineConfigSpec::default()
        },
    );
    (old, new)
}

/// The arguments of `running` (a kernel command line) that are among `requested`, in the
/// running order with repeats (the MCD's `setRunningKargs`).
pub fn running_kargs(requested: &[String], running: &str) -> Vec<String> {
    kargs::split(running)
        .into_iter()
        .filter(|a| requested.contains(a))
        .collect()
}

/// The kernel type the deployment has layered (`realtime`, `64k-pages`), else `""`.
fn booted_kernel_type(d: &Deployment) -> &'static str {
    let has = |p: &str| d.requested_packages.iter().any(|r| r == p);
    if has("kernel-rt-core") {
        "realtime"
    } else if has("kernel-64k-core") {
        "64k-pages"
    } else {
        ""
    }
}

/// Whether every package of `extension` is layered on the deployment.
fn layered(extension: &str, d: &Deployment) -> bool {
    extensions::packages(extension).is_some_and(|pkgs| {
        pkgs.iter()
            .all(|p| d.requested_packages.iter().any(|r| r == p))
    })
}

/// Whether FIPS mode is on: `1` in [`FIPS_FILE`]; a kernel without the file has it off.
pub fn fips_enabled(root: &Root) -> Result<bool> {
    let path = Path::new(FIPS_FILE);
    let shown = root.host_path(path).display().to_string();
    match root
        .read(path)
        .with_context(|| format!("reading {shown}"))?
    {
        None => {
            tracing::info!("no {shown}: FIPS is off");
            Ok(false)
        }
        Some(bytes) => match String::from_utf8_lossy(&bytes).trim() {
            "1" => Ok(true),
            "0" => Ok(false),
            other => anyhow::bail!("{shown}: expected 0 or 1, found {other:?}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(kargs: &[&str], image: &str) -> MachineConfig {
        MachineConfig::from_value(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {"name": "rendered-worker-1"},
            "spec": {
                "osImageURL": image,
                "kernelArguments": kargs,
                "extensions": ["usbguard", "kerberos"],
                "kernelType": "realtime",
                "config": {"ignition": {"version": "3.2.0"}},
            },
        }))
        .unwrap()
    }

    fn booted(kargs: &str, image: Option<&str>, packages: &[&str]) -> Deployment {
        Deployment {
            container_image_reference: image.map(|i| format!("ostree-unverified-registry:{i}")),
            kargs: Some(kargs.to_string()),
            requested_packages: packages.iter().map(|s| s.to_string()).collect(),
            ..Deployment::default()
        }
    }

    #[test]
    fn the_old_config_is_what_the_node_booted() {
        let t = target(
            &["nosmt a=1", "b=2", "quoted=\"x y\""],
            "quay.io/new@sha256:2",
        );
        let d = booted(
            "root=LABEL=root rw b=2 nosmt b=2 c=3 quoted=\"x y\"",
            Some("quay.io/old@sha256:1"),
            &["usbguard", "kernel-rt-core", "kernel-rt-modules"],
        );
        let (old, new) = configs(&t, &d, true);
        assert_eq!(old.name(), "mco-empty-mc");
        assert_eq!(old.spec.os_image_url, "quay.io/old@sha256:1");
        assert_eq!(
            old.spec.kernel_arguments,
            ["b=2", "nosmt", "b=2", "quoted=\"x y\""]
        );
        assert_eq!(
            new.spec.kernel_arguments,
            ["nosmt", "a=1", "b=2", "quoted=\"x y\""]
        );
        assert_eq!(old.spec.kernel_type, "realtime");
        assert_eq!(old.spec.extensions, ["usbguard"]);
        assert!(old.spec.fips);
        let empty = json!({"ignition": {"version": "3.2.0"}});
        assert_eq!(
            old.spec.config.as_ref().map(|c| c.to_value().unwrap()),
            Some(empty.clone())
        );
        assert_eq!(
            new.spec.config.as_ref().map(|c| c.to_value().unwrap()),
            Some(empty)
        );
        assert_eq!(new.name(), "rendered-worker-1");
    }

    #[test]
    fn a_target_without_an_image_leaves_the_image_alone() {
        let (old, new) = configs(
            &target(&[], ""),
            &booted("rw", Some("quay.io/x@sha256:1"), &[]),
            false,
        );
        assert_eq!(
            (
                old.spec.os_image_url.as_str(),
                new.spec.os_image_url.as_str()
            ),
            ("", "")
        );
        let (old, _) = configs(
            &target(&[], "quay.io/x@sha256:1"),
            &booted("rw", None, &[]),
            false,
        );
        assert_eq!(old.spec.os_image_url, "");
    }

    #[test]
    fn fips_comes_from_the_kernel() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        assert!(!fips_enabled(&root).unwrap());
        let file = dir.path().join(FIPS_FILE.trim_start_matches('/'));
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "1\n").unwrap();
        assert!(fips_enabled(&root).unwrap());
        std::fs::write(&file, "0\n").unwrap();
        assert!(!fips_enabled(&root).unwrap());
        std::fs::write(&file, "on\n").unwrap();
        let e = fips_enabled(&root).unwrap_err().to_string();
        assert!(
            e.ends_with("fips_enabled: expected 0 or 1, found \"on\""),
            "{e}"
        );
    }
}
