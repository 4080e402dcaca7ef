//! The `Os` step: whether an update runs it, the deployment recorded before staging, and the
//! staging itself through rpm-ostree (the pull secret arranged, the MCD's events around it).
//! Apart from the file writes because it is the only step that needs rpm-ostree, and the
//! only one whose work the node takes up only at the next boot.

use anyhow::{Context, Result};
use machine_config::plan::Plan;

use super::Ctx;
use crate::engine::record::UpdateRecord;
use crate::engine::{Engine, os};
use crate::failpoints::failpoint;
use crate::os::arrange_pull_secret;

impl Engine {
    /// Whether the update runs the OS step: when its plan changes the OS, and, with
    /// rpm-ostree at hand, on every image-mode update and to a non-default kernel, as the
    /// MCD's `applyOSChanges` does (its events say so even when nothing is staged).
    pub(super) fn runs_os_step(&self, plan: &Plan, rec: &UpdateRecord) -> bool {
        os::plan_changes_os(plan)
            || (self.checks_os() && os::os_step_always(&rec.current, &rec.desired))
    }

    /// The host around rpm-ostree for the rebase (local container storage, the temporary
    /// signature policy), when the agent runs the host's programs.
    fn image_host(&self) -> Option<crate::engine::os_image::ImageHost<'_>> {
        Some(crate::engine::os_image::ImageHost {
            root: &self.root,
            commands: self.seams.commands.as_deref()?,
            systemd: self.seams.systemd.as_deref(),
        })
    }

    /// The id of the deployment the node runs now, recorded before staging (`None`, said in
    /// the log, when it cannot be read: an unplanned reboot while staging then rolls back).
    pub(super) async fn running_deployment_id(&self) -> Option<String> {
        let os = self.seams.os.as_ref()?;
        match os::running(os.as_ref()).await {
            Ok(d) => Some(d.id),
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "could not read the running deployment before staging");
                None
            }
        }
    }

    pub(super) async fn stage_os(&self, rec: &mut UpdateRecord, ctx: &mut Ctx) -> Result<()> {
        let os = self.seams.os.as_ref().with_context(|| {
            format!(
                "the update changes the OS, but rpm-ostree is not available: {}",
                self.seams.os_unavailable
            )
        })?;
        os::report_started(&self.reporter, &ctx.plan, &rec.current, &rec.desired).await;
        if ctx.plan.os_update && !rec.desired.spec.os_image_url.is_empty() {
            // rpm-ostree pulls the image with the cluster's credentials.
            arrange_pull_secret(&self.root).context("arranging the OS image pull secret")?;
        }
        let staged = os::stage_changes(
            os.as_ref(),
            &ctx.plan,
            &rec.current,
            &rec.desired,
            Some(&self.reporter),
            self.image_host(),
        )
        .await?;
        tracing::info!(changes = staged.done.join("; "), "Changes to OS staged");
        let rebased = staged.rebased.is_some();
        os::report_staged(
            &self.reporter,
            &ctx.plan,
            rebased,
            &rec.current,
            &rec.desired,
        )
        .await;
        if staged.done.is_empty() {
            // Nothing was staged (the node already runs the OS asked for, e.g. pivoted by
            // hand): booting the same deployment after the reboot is not a lost staged one.
            rec.os_base = None;
        }
        ctx.report.os_changes = staged.done;
        self.tune_kernel_args(ctx).await?;
        failpoint("engine::os-done")
    }

    /// The node's own kernel tuning (`/etc/pivot/kernel-args`), after the OS changes and
    /// before the config is recorded, where the MCD's `update` runs `UpdateTuningArgs`.
    pub(super) async fn tune_kernel_args(&self, ctx: &mut Ctx) -> Result<()> {
        let Some(os) = self.seams.os.as_ref().filter(|_| self.checks_os()) else {
            return Ok(());
        };
        let change = crate::os::tuning::apply(&self.root, os.as_ref()).await?;
        if !change.is_empty() {
            ctx.report
                .os_changes
                .push(crate::os::tuning::describe(&change));
        }
        Ok(())
    }
}
