//! The OS part of an update through rpm-ostree ([`OsUpdater`]), in the MCD's order
//! (`applyOSChanges`, `applyLayeredOSChanges` in upstream `pkg/daemon/update.go`): finish a
//! transaction left running, `cleanup -p`, undo a kernel-type switch when the image or kernel
//! type changes, rebase, kernel arguments (the plan's argv), kernel type, extensions. Each
//! change stages a deployment for the next boot. On a node that follows a built image (image
//! mode) the image carries the kernel type and the extensions: nothing is layered on top of
//! it, the step ends after the kernel arguments. Also the OS half of validation: booted image
//! and kernel arguments.

use anyhow::{Context, Result};
use machine_config::mco::events::reason;
use machine_config::mco::image::{layered_image, pinned_by_digest};
use machine_config::plan::Plan;
use machine_config::{MachineConfig, extensions, kargs};

use super::os_image::{self, ImageHost};
use super::report::Reporter;

use crate::failpoints::failpoint;
use crate::os::{
    CleanupTarget, Deployment, KargsChange, OsMismatch, OsUpdater, PackageChange,
    check_kernel_args, check_os_image,
};

/// Whether the plan changes the OS.
pub(crate) fn plan_changes_os(plan: &Plan) -> bool {
    plan.os_update
        || !plan.kargs.is_empty()
        || plan.kernel_type
        || !plan.extensions.install.is_empty()
        || !plan.extensions.uninstall.is_empty()
}

/// Whether the update involves a built image: either config carries one (the MCD's
/// `oclEnabled`, from `newMachineConfigDiff`).
pub(crate) fn image_mode(old: &MachineConfig, new: &MachineConfig) -> bool {
    layered_image(old).is_some() || layered_image(new).is_some()
}

/// Whether an update from `old` to `new` leaves image mode: `old` runs a built image, `new`
/// the rendered config's base image. The built image carried the config's files in its
/// `/usr/etc`, so ostree's `/etc` merge into the base deployment drops them (they are
/// unmodified in `/etc`): after the reboot they are written again ([`crate::engine`]'s
/// `RewritingFiles` step), where the MCD's revert unit writes them.
pub(crate) fn leaves_image_mode(old: &MachineConfig, new: &MachineConfig) -> bool {
    layered_image(old).is_some() && layered_image(new).is_none()
}

/// Whether the OS step runs even though the plan may change nothing in the OS, as the MCD's
/// `applyOSChanges` decides: on every image-mode update, and on every update to a config with
/// a kernel other than the default (so its packages are re-applied with the image).
pub(crate) fn os_step_always(old: &MachineConfig, new: &MachineConfig) -> bool {
    image_mode(old, new) || new.kernel_type() != "default"
}

/// Whether the kernel type and extensions are left out because `new` is a built image that
/// carries them (the MCD's early return in `applyLayeredOSChanges` when on-cluster layering
/// is on). A node leaving image mode is not: it rebases to the rendered config's base image,
/// which needs them layered again (the MCD's revert unit does that at a second boot).
fn image_carries_packages(new: &MachineConfig) -> bool {
    layered_image(new).is_some()
}

/// The MCD's `OSUpdateStarted` message (`osChangesString`), or when nothing in the OS changes
/// (image mode, a non-default kernel) the kernel the target config runs.
pub(crate) fn started_message(plan: &Plan, new: &MachineConfig) -> String {
    let parts = [
        (plan.os_update, "Upgrading OS"),
        (plan.diff.extensions_changed, "Installing extensions"),
        (plan.kernel_type, "Changing kernel type"),
        (plan.diff.kargs_changed, "Changing kernel arguments"),
    ];
    let changes: Vec<&str> = parts.iter().filter(|(c, _)| *c).map(|(_, m)| *m).collect();
    if changes.is_empty() {
        format!(
            "Updating to a target config with {} kernel",
            new.kernel_type()
        )
    } else {
        changes.join("; ")
    }
}

/// The MCD's events as the OS step starts: `InClusterUpgrade` (not for kernel arguments
/// alone), then `OSUpdateStarted`.
pub(crate) async fn report_started(
    reporter: &Reporter,
    plan: &Plan,
    old: &MachineConfig,
    new: &MachineConfig,
) {
    if plan.os_update || plan.diff.extensions_changed || plan.kernel_type || image_mode(old, new) {
        let message = format!("Updating from oscontainer {}", new.spec.os_image_url);
        reporter.event(reason::IN_CLUSTER_UPGRADE, &message).await;
    }
    reporter
        .event(reason::OS_UPDATE_STARTED, &started_message(plan, new))
        .await;
}

/// The MCD's events once the OS changes of `plan` are staged: `OSUpgradeApplied` when the
/// image changed, else `OSUpgradeSkipped` (kernel arguments, kernel type or extensions only),
/// then `OSUpdateStaged`.
pub(crate) async fn report_staged(
    reporter: &Reporter,
    plan: &Plan,
    rebased: bool,
    old: &MachineConfig,
    new: &MachineConfig,
) {
    let image = &new.spec.os_image_url;
    // (an image the node boots already, pivoted by hand, is not applied again: skipped)
    let (reason, message) = if plan.os_update && rebased {
        (
            reason::OS_UPGRADE_APPLIED,
            format!(
                "OS upgrade applied; new MachineConfig ({}) has new OS image ({image})",
                new.name()
            ),
        )
    } else {
        (
            reason::OS_UPGRADE_SKIPPED,
            format!(
                "OS upgrade skipped; new MachineConfig ({}) has same OS image ({image}) as old MachineConfig ({})",
                new.name(),
                old.name()
            ),
        )
    };
    reporter.event(reason, &message).await;
    reporter
        .event(reason::OS_UPDATE_STAGED, "Changes to OS staged")
        .await;
}

/// The OS changes of `plan`, described for messages.
pub fn describe(plan: &Plan, old: &MachineConfig, new: &MachineConfig) -> Vec<String> {
    let mut out = Vec::new();
    if plan.os_update {
        out.push(format!(
            "osImageURL {:?} -> {:?}",
            old.spec.os_image_url, new.spec.os_image_url
        ));
    }
    if !plan.kargs.is_empty() {
        out.push(format!(
            "kernel arguments: {}",
            machine_config::kargs::human_change(
                &old.spec.kernel_arguments,
                &new.spec.kernel_arguments
            )
        ));
    }
    if plan.kernel_type {
        out.push(format!(
            "kernelType {:?} -> {:?}",
            old.kernel_type(),
            new.kernel_type()
        ));
    }
    if !plan.extensions.install.is_empty() || !plan.extensions.uninstall.is_empty() {
        out.push(format!(
            "extensions: install [{}], uninstall [{}]",
            plan.extensions.install.join(" "),
            plan.extensions.uninstall.join(" ")
        ));
    }
    out
}

/// The deployment the node runs: the booted one, or on a sysroot that is not booted (a test
/// or `--root` sysroot) the default one, which is what would boot.
pub async fn running(os: &dyn OsUpdater) -> Result<Deployment> {
    let status = os.status().await.context("reading the deployments")?;
    status
        .booted_or_default()
        .cloned()
        .context("rpm-ostree reports no deployment")
}

/// What staging did.
#[derive(Debug, Default)]
pub(crate) struct Staged {
    /// Each change, described.
    pub done: Vec<String>,
    /// The image rebased to (`None`: no rebase was needed, or the plan changes no image).
    pub rebased: Option<String>,
}

/// Stages the OS changes of `plan` (from `old` to `new`); returns what was done. The caller
/// arranges the pull secret for the image, if it needs one.
pub async fn stage(
    os: &dyn OsUpdater,
    plan: &Plan,
    old: &MachineConfig,
    new: &MachineConfig,
) -> Result<Vec<String>> {
    Ok(stage_changes(os, plan, old, new, None, None).await?.done)
}

/// [`stage`], saying whether the image was rebased; the image pull is reported to `pulls`'
/// MachineConfigNode (`ImagePulledFromRegistry`, with the gate) as the MCD reports it. With
/// the `host`'s programs the image comes from local container storage when podman has it
/// ([`super::os_image`]).
pub(crate) async fn stage_changes(
    os: &dyn OsUpdater,
    plan: &Plan,
    old: &MachineConfig,
    new: &MachineConfig,
    pulls: Option<&Reporter>,
    host: Option<ImageHost<'_>>,
) -> Result<Staged> {
    let mut done = Vec::new();
    let mut rebased = None;
    if let Some(t) = os
        .resume()
        .await
        .context("waiting for a running rpm-ostree transaction")?
    {
        tracing::info!(method = t.method, "a transaction left running finished");
    }
    os.cleanup(&[CleanupTarget::Pending])
        .await
        .context("removing pending deployments (cleanup -p)")?;
    failpoint("engine::os-cleaned")?;
    let booted = running(os).await?;
    let layering = !image_carries_packages(new);
    if layering
        && (plan.os_update || plan.kernel_type)
        && let Some(revert) = PackageChange::revert_kernel(&booted)
    {
        os.update_deployment(&revert)
            .await
            .context("undoing the kernel-type switch")?;
        done.push("undid the kernel-type switch".to_string());
    }
    let image = &new.spec.os_image_url;
    if plan.os_update && !image.is_empty() {
        if booted.image_url().as_deref() == Some(image.as_str()) {
            tracing::info!(image = %image, "Already in desired image {image}");
        } else {
            tracing::info!(image = %image, "Updating OS to layered image {image:?}");
            if !pinned_by_digest(image) {
                tracing::warn!(image = %image, "OS image {image} is not pinned by digest: what it names may change");
            }
            os_image::rebase(os, image, pulls, host).await?;
            done.push(format!("rebased to {image}"));
            rebased = Some(image.clone());
        }
    }
    failpoint("engine::os-rebased")?;
    if !plan.kargs.is_empty() {
        let change = KargsChange::from_argv(&plan.kargs).context("the plan's kernel arguments")?;
        os.kernel_args(None, &change)
            .await
            .context("changing the kernel arguments")?;
        done.push(format!(
            "kernel arguments: {}",
            machine_config::kargs::human_change(
                &old.spec.kernel_arguments,
                &new.spec.kernel_arguments
            )
        ));
    }
    failpoint("engine::os-kargs")?;
    if !layering {
        tracing::info!(
            image = %image,
            "the image carries the kernel type and the extensions: nothing is layered on it"
        );
        return Ok(Staged { done, rebased });
    }
    if (plan.os_update || plan.kernel_type)
        && let Some(change) = PackageChange::kernel_type(new.kernel_type())?
    {
        if old.kernel_type() == new.kernel_type() {
            tracing::info!("Re-applying kernel type {}", new.kernel_type());
        } else {
            tracing::info!("Initiating switch to kernel {}", new.kernel_type());
        }
        os.update_deployment(&change)
            .await
            .with_context(|| format!("switching to the {} kernel", new.kernel_type()))?;
        done.push(format!("kernel type {}", new.kernel_type()));
    }
    if let Some(change) = extension_change(&booted, old, new) {
        tracing::info!(
            install = ?change.install,
            uninstall = ?change.uninstall,
            "Applying extensions"
        );
        os.update_deployment(&change)
            .await
            .context("changing the extensions")?;
        check_staged_extensions(os, new).await?;
        done.push(format!(
            "extensions: install [{}], uninstall [{}]",
            change.install.join(" "),
            change.uninstall.join(" ")
        ));
    }
    tracing::info!(
        old = old.name(),
        new = new.name(),
        changes = done.join("; "),
        "OS changes staged"
    );
    Ok(Staged { done, rebased })
}

/// The MCD's `applyExtensions` (`generateExtensionsArgs`): nothing when neither config has
/// extensions, or both have the same ones on the same image; else the packages `new`'s
/// extensions need that the booted deployment does not request, and the extension packages it
/// requests that they no longer need (only packages of an extension are ever removed). `None`
/// when there is nothing to change ("No extension updates required").
fn extension_change(
    booted: &Deployment,
    old: &MachineConfig,
    new: &MachineConfig,
) -> Option<PackageChange> {
    let (o, n) = (&old.spec, &new.spec);
    if (o.extensions.is_empty() && n.extensions.is_empty())
        || (o.extensions == n.extensions && o.os_image_url == n.os_image_url)
    {
        return None;
    }
    let required = extensions::package_set(&n.extensions);
    let requested: std::collections::BTreeSet<String> =
        booted.requested_packages.iter().cloned().collect();
    // (an extension the MCO does not list is its own package, as on Fedora CoreOS)
    let mut managed = extensions::package_set(&o.extensions);
    managed.extend(
        extensions::SUPPORTED
            .iter()
            .flat_map(|(_, pkgs)| pkgs.iter().map(|p| p.to_string())),
    );
    let install: Vec<String> = required.difference(&requested).cloned().collect();
    let uninstall: Vec<String> = requested
        .iter()
        .filter(|p| managed.contains(*p) && !required.contains(*p))
        .cloned()
        .collect();
    if install.is_empty() && uninstall.is_empty() {
        tracing::info!("No extension updates required");
        return None;
    }
    Some(PackageChange::extensions(&install, &uninstall))
}

/// The MCD's `verifyExtensionsStaged`: every package of `new`'s extensions is requested by
/// the deployment that boots next.
async fn check_staged_extensions(os: &dyn OsUpdater, new: &MachineConfig) -> Result<()> {
    let status = os.status().await.context("reading the staged deployment")?;
    let next = match status.booted() {
        Some(_) => status.staged().or_else(|| status.pending()),
        None => status.default_deployment(),
    };
    let next = next.context("no staged deployment found after applying extensions")?;
    let missing: Vec<String> = extensions::package_set(&new.spec.extensions)
        .into_iter()
        .filter(|p| !next.requested_packages.contains(p))
        .collect();
    anyhow::ensure!(
        missing.is_empty(),
        "the following extension packages are missing from the staged deployment: [{}]",
        missing.join(" ")
    );
    Ok(())
}

/// Whether `e` is rpm-ostreed refusing work because it has queued a reboot (anywhere in the
/// chain): the reboot is under way, so the step is neither failed nor retried before it.
pub(crate) fn reboot_queued(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<crate::os::OsError>()
            .is_some_and(crate::os::OsError::is_rebooting)
    })
}

/// Removes staged/pending deployments (the rollback of [`stage`]).
pub(crate) async fn unstage(os: &dyn OsUpdater) -> Result<()> {
    if let Err(e) = os.resume().await {
        tracing::warn!(error = %e, "waiting for a running transaction before cleanup failed");
    }
    os.cleanup(&[CleanupTarget::Pending])
        .await
        .context("removing staged OS changes (cleanup -p)")?;
    Ok(())
}

/// The MCD's OS checks of `config` against the running deployment: the image (only when the
/// config names one) and the kernel arguments.
pub(crate) async fn check(os: &dyn OsUpdater, config: &MachineConfig) -> Result<Vec<OsMismatch>> {
    let deployment = running(os).await?;
    let mut out = Vec::new();
    if !config.spec.os_image_url.is_empty()
        && let Err(m) = check_os_image(&config.spec.os_image_url, &deployment)
    {
        out.push(m);
    }
    let expected = kargs::split_all(&config.spec.kernel_arguments);
    if let Err(m) = check_kernel_args(&expected, deployment.kargs.as_deref().unwrap_or_default()) {
        out.push(m);
    }
    Ok(out)
}

/// Whether the running deployment already has `config`'s OS (image and kernel arguments).
pub(crate) async fn runs(os: &dyn OsUpdater, config: &MachineConfig) -> bool {
    matches!(check(os, config).await, Ok(m) if m.is_empty())
}
