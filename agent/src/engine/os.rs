//! The OS part of an update through rpm-ostree ([`OsUpdater`]), in the MCD's order: finish a
//! transaction left running, `cleanup -p`, undo a kernel-type switch when the image or kernel
//! type changes, rebase, kernel arguments (the plan's argv), kernel type, extensions. Each
//! change stages a deployment for the next boot. Also the OS half of validation: booted image
//! and kernel arguments.

use anyhow::{Context, Result};
use machine_config::mco::events::reason;
use machine_config::mco::image::{layered_image, pinned_by_digest};
use machine_config::mco::node_conditions::Progress;
use machine_config::plan::Plan;
use machine_config::{MachineConfig, kargs};

use super::report::Reporter;

use crate::failpoints::failpoint;
use crate::os::{
    CleanupTarget, Deployment, KargsChange, OsImage, OsMismatch, OsUpdater, PackageChange,
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
            "kernel arguments: rpm-ostree kargs {}",
            plan.kargs.join(" ")
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
    Ok(stage_changes(os, plan, old, new, None).await?.done)
}

/// [`stage`], saying whether the image was rebased; the image pull is reported to `pulls`'
/// MachineConfigNode (`ImagePulledFromRegistry`, with the gate) as the MCD reports it.
pub(crate) async fn stage_changes(
    os: &dyn OsUpdater,
    plan: &Plan,
    old: &MachineConfig,
    new: &MachineConfig,
    pulls: Option<&Reporter>,
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
    if (plan.os_update || plan.kernel_type)
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
            if layered_image(new).is_some() {
                tracing::info!(image = %image, "Updating OS to layered image {image:?}");
            }
            if !pinned_by_digest(image) {
                tracing::warn!(image = %image, "OS image {image} is not pinned by digest: what it names may change");
            }
            let progress = |p: Progress| async move {
                if let Some(r) = pulls {
                    r.progress(p).await;
                }
            };
            progress(Progress::PullingImage {
                image: image.clone(),
            })
            .await;
            let pulled = os.rebase(&OsImage::Registry(image.clone())).await;
            if let Err(e) = &pulled {
                let failed = Progress::ImagePullFailed {
                    image: image.clone(),
                    error: e.to_string(),
                };
                progress(failed).await;
            }
            pulled.with_context(|| format!("rebasing to {image}"))?;
            progress(Progress::ImagePulled {
                image: image.clone(),
            })
            .await;
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
        done.push(format!("kernel arguments: {}", plan.kargs.join(" ")));
    }
    failpoint("engine::os-kargs")?;
    if (plan.os_update || plan.kernel_type)
        && let Some(change) = PackageChange::kernel_type(new.kernel_type())?
    {
        os.update_deployment(&change)
            .await
            .with_context(|| format!("switching to the {} kernel", new.kernel_type()))?;
        done.push(format!("kernel type {}", new.kernel_type()));
    }
    let ext = &plan.extensions;
    if !ext.install.is_empty() || !ext.uninstall.is_empty() {
        let change = PackageChange::extensions(&ext.install, &ext.uninstall);
        os.update_deployment(&change)
            .await
            .context("changing the extensions")?;
        done.push(format!(
            "extensions: install [{}], uninstall [{}]",
            ext.install.join(" "),
            ext.uninstall.join(" ")
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
