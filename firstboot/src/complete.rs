//! One attempt at completing first boot (see the crate docs for the steps and the retries).

use anyhow::{Context, Result};
use machine_config::mco::paths::ENCAPSULATED;
use machine_config::{LegacyAction, Plan, PolicyOptions, legacy_action};
use mco_agent::engine::{running_deployment, stage_os_changes};
use mco_agent::host::reboot::Rebooter;
use mco_agent::os::OsUpdater;
use mco_agent::rootfs::Root;

use crate::baseline::{self, BASELINE_NAME};
use crate::encapsulated;

/// How to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Node architecture for the reconcile check.
    pub arch: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            arch: std::env::consts::ARCH.to_string(),
        }
    }
}

/// How first boot ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completed {
    /// No encapsulated config: first boot is complete, or was never needed.
    NothingToDo,
    /// The node already runs the target's OS; the encapsulated config was removed.
    NoChange { config: String },
    /// The OS changes were staged and the file set aside; `rebooting` when the reboot into
    /// them was requested (else nobody was asked: `--skip-reboot`).
    Staged {
        config: String,
        changes: Vec<String>,
        rebooting: bool,
    },
}

/// Completes first boot of the node at `root`: OS changes through `os`, the reboot through
/// `rebooter` (`None`: not rebooted).
pub async fn complete(
    root: &Root,
    os: &dyn OsUpdater,
    rebooter: Option<&dyn Rebooter>,
    opts: &Options,
) -> Result<Completed> {
    let Some(target) = encapsulated::read(root)? else {
        tracing::info!("no {ENCAPSULATED}: first boot is complete");
        return Ok(Completed::NothingToDo);
    };
    let name = target.name().to_string();
    let booted = running_deployment(os)
        .await
        .context("reading the booted deployment from rpm-ostree")?;
    let fips = baseline::fips_enabled(root)?;
    let (old, new) = baseline::configs(&target, &booted, fips);
    let policy = PolicyOptions {
        arch: opts.arch.clone(),
        fips_enabled: Some(fips),
        ..PolicyOptions::default()
    };
    let plan =
        Plan::new(&old, &new, &policy).with_context(|| format!("planning first boot to {name}"))?;
    if let Some(reason) = &plan.reason {
        anyhow::bail!("cannot complete first boot to {name}: {reason}");
    }
    if plan.diff.is_empty() {
        tracing::info!(config = name, "No changes from {BASELINE_NAME} to {name}");
        encapsulated::remove(root)?;
        return Ok(Completed::NoChange { config: name });
    }
    let action = legacy_action(&plan.diff, false);
    tracing::info!(
        config = name,
        image = %booted.image_url().unwrap_or_default(),
        kargs = booted.kargs.as_deref().unwrap_or_default(),
        plan = plan.to_json(),
        action = action.as_str(),
        "first boot: the booted OS differs from {name}"
    );
    if plan.os_update && !new.spec.os_image_url.is_empty() {
        // The image is pulled with the cluster's pull secret (the kubelet's at first boot).
        mco_agent::os::arrange_pull_secret(root).context("arranging the OS image pull secret")?;
    }
    let changes = stage_os_changes(os, &plan, &old, &new)
        .await
        .with_context(|| format!("staging the OS changes of {name}"))?;
    encapsulated::set_aside(root)?;
    // Only OS fields can differ, and every OS change reboots (the legacy action says so too).
    debug_assert_eq!(action, LegacyAction::Reboot);
    let Some(rebooter) = rebooter else {
        return Ok(Completed::Staged {
            config: name,
            changes,
            rebooting: false,
        });
    };
    let reason = format!("Completing firstboot provisioning to {name}");
    if let Err(e) = rebooter.reboot(&reason).await {
        // Staged but not rebooted: the next attempt stages again and asks again.
        encapsulated::put_back(root)?;
        return Err(anyhow::anyhow!(e).context(format!("rebooting into {name}")));
    }
    Ok(Completed::Staged {
        config: name,
        changes,
        rebooting: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mco_agent::host::reboot::FakeRebooter;
    use mco_agent::os::{FakeOsUpdater, OsCall, PackageChange};

    const IMAGE: &str = "quay.io/example/os@sha256:1111";
    const NEW: &str = "quay.io/example/os@sha256:2222";

    fn node(encapsulated: serde_json::Value) -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        std::fs::write(
            dir.path().join(ENCAPSULATED.trim_start_matches('/')),
            encapsulated.to_string(),
        )
        .unwrap();
        let root = Root::open(dir.path()).unwrap();
        (dir, root)
    }

    fn target(spec: serde_json::Value) -> serde_json::Value {
        let mut spec = spec;
        spec["config"] = serde_json::json!({"ignition": {"version": "3.2.0"}});
        serde_json::json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {"name": "rendered-worker-1"},
            "spec": spec,
        })
    }

    fn changes(os: &FakeOsUpdater) -> Vec<OsCall> {
        os.calls()
            .into_iter()
            .filter(|c| !matches!(c, OsCall::Status | OsCall::Resume))
            .collect()
    }

    #[tokio::test]
    async fn a_refused_reboot_puts_the_file_back_for_the_next_attempt() {
        let (dir, root) = node(target(serde_json::json!({"osImageURL": NEW})));
        let os = FakeOsUpdater::booted("rhcos", IMAGE, "root=LABEL=root rw");
        let rebooter = FakeRebooter::new();
        rebooter.refuse("Operation not permitted");
        let e = complete(&root, &os, Some(&rebooter), &Options::default())
            .await
            .unwrap_err();
        assert_eq!(
            format!("{e:#}"),
            "rebooting into rendered-worker-1: reboot through logind failed: logind Reboot failed: Operation not permitted"
        );
        assert!(
            dir.path()
                .join(ENCAPSULATED.trim_start_matches('/'))
                .exists()
        );
        // The retry stages again from scratch and reboots.
        let fine = FakeRebooter::new();
        let done = complete(&root, &os, Some(&fine), &Options::default())
            .await
            .unwrap();
        assert!(
            matches!(
                done,
                Completed::Staged {
                    rebooting: true,
                    ..
                }
            ),
            "{done:?}"
        );
        assert_eq!(
            fine.reasons(),
            ["Completing firstboot provisioning to rendered-worker-1"]
        );
        let rebases = changes(&os)
            .iter()
            .filter(|c| matches!(c, OsCall::Rebase(_)))
            .count();
        assert_eq!(rebases, 2);
    }

    #[tokio::test]
    async fn kernel_type_and_extensions_are_staged_and_not_again_after_the_reboot() {
        let spec = serde_json::json!({
            "osImageURL": IMAGE,
            "kernelType": "realtime",
            "extensions": ["usbguard"],
        });
        let (_dir, root) = node(target(spec.clone()));
        let os = FakeOsUpdater::booted("rhcos", IMAGE, "root=LABEL=root rw");
        let done = complete(&root, &os, None, &Options::default())
            .await
            .unwrap();
        let Completed::Staged {
            rebooting: false, ..
        } = done
        else {
            panic!("{done:?}")
        };
        let staged: Vec<OsCall> = changes(&os)
            .into_iter()
            .filter(|c| matches!(c, OsCall::UpdateDeployment(_)))
            .collect();
        assert_eq!(
            staged,
            [
                OsCall::UpdateDeployment(PackageChange::kernel_type("realtime").unwrap().unwrap()),
                OsCall::UpdateDeployment(PackageChange::extensions(&["usbguard".into()], &[])),
            ]
        );
        // Booted into it, the same config again needs nothing.
        assert!(os.reboot());
        let (_dir2, root2) = node(target(spec));
        let before = os.calls().len();
        let done = complete(&root2, &os, None, &Options::default())
            .await
            .unwrap();
        assert!(matches!(done, Completed::NoChange { .. }), "{done:?}");
        assert!(
            os.calls()[before..]
                .iter()
                .all(|c| matches!(c, OsCall::Status | OsCall::Resume)),
            "{:?}",
            &os.calls()[before..]
        );
    }
}
