//! Rolling a bad boot back: after the reboot into an update, a health check that does not pass
//! within its deadline ([`super::health`]) sends the update to [`Step::BootFailed`]: the
//! deployment from before the update becomes the default again (rpm-ostree's `Rollback`),
//! files, units and users go back to the current config, and the node reboots once
//! ([`Step::RebootingBack`]). Once it has booted back, the node is Degraded with the failed
//! check (`boot into B failed: …; rolled back to A`) and the failed target is recorded
//! ([`FAILED_TARGET`]): the agent never applies that same config again by itself (no boot
//! loop) until the desired config changes, the force file is created, or an admin runs
//! `mco-agent rollback`.
//!
//! `mco-agent rollback` does the same by hand ([`Engine::rollback_plan`],
//! [`Engine::roll_back_by_hand`]): it returns to the config the node was in before its last
//! completed update ([`PREVIOUS_CONFIG`], written at every commit) and, when that update changed
//! the OS, to the deployment it ran then.
//!
//! Every step is recorded before it acts and is idempotent: the OS rollback is skipped when the
//! deployment to return to is already the default (a second `Rollback` would swap back), the
//! files are re-applied over whatever a kill left.

use anyhow::{Context, Result, bail};
use machine_config::MachineConfig;

use super::record::{self, Step, UpdateRecord, now_ms};
pub use super::rollback_records::{
    BOOT_ROLLED_BACK, FAILED_TARGET, FailedTarget, PREVIOUS_CONFIG, PreviousConfig, failed_target,
    previous_config,
};
use super::rollback_records::{remove, write_json};
use super::steps::{Ctx, Next};
use super::{Engine, Outcome, backups, os, transitions};
use crate::failpoints::failpoint;
use crate::input;

/// What `mco-agent rollback` will do.
#[derive(Clone, Debug)]
pub struct RollbackPlan {
    /// The config the node is in.
    pub from: MachineConfig,
    /// The config it returns to.
    pub to: MachineConfig,
    /// The deployment it reboots into (`None`: the OS stays as it is).
    pub deployment: Option<String>,
}

impl RollbackPlan {
    /// What will be done, one line each; `no_reboot`: why nothing is rebooted (`--skip-reboot`,
    /// an alternate root), when nothing is.
    pub fn describe(&self, no_reboot: Option<&str>) -> Vec<String> {
        let mut out = vec![format!(
            "files, units and users from {} back to {}",
            self.from.name(),
            self.to.name()
        )];
        match &self.deployment {
            Some(d) => out.push(format!(
                "the OS back to deployment {d} (rpm-ostree rollback)"
            )),
            None => out.push("the OS stays as it is (the last update did not change it)".into()),
        }
        out.push(match no_reboot {
            None => "one reboot; then the node is Degraded until the desired config changes".into(),
            Some(why) => format!(
                "no reboot ({why}); the rollback is finished by the agent at the next boot of the \
                 root, then the node is Degraded until the desired config changes"
            ),
        });
        out
    }
}

impl Engine {
    /// What `mco-agent rollback` would do; an error saying why it cannot.
    pub fn rollback_plan(&self) -> Result<RollbackPlan> {
        if let Some(rec) = self.pending()? {
            bail!(
                "an update is in progress ({}, at step {}): wait for it to end (the force file \
                 or a new desired config recovers an update that did not take)",
                rec.describe(),
                rec.step
            );
        }
        let current = input::read_current(&self.root)?
            .context("no current config is recorded: nothing to roll back")?;
        let previous = previous_config(&self.root)?.context(
            "no previous config is recorded: the agent records one when it completes an update",
        )?;
        if previous.updated_to != current.machine_config.name() {
            bail!(
                "the previous config recorded ({}) is from the update to {}, but the node is in {}",
                previous.config.name(),
                previous.updated_to,
                current.machine_config.name()
            );
        }
        if previous.deployment.is_some() && self.seams.os.is_none() {
            bail!(
                "the last update changed the OS, and rolling it back needs rpm-ostree: {}",
                self.seams.os_unavailable
            );
        }
        Ok(RollbackPlan {
            from: current.machine_config,
            to: previous.config,
            deployment: previous.deployment,
        })
    }

    /// Rolls back by hand as `plan` says: recorded at [`Step::BootFailed`], then the same steps
    /// as an automatic rollback.
    pub async fn roll_back_by_hand(&self, plan: &RollbackPlan) -> super::UpdateReport {
        let mut report = super::UpdateReport::new(plan.from.name(), plan.to.name());
        let started = record::now_ms();
        let mut rec = UpdateRecord::new(
            plan.to.clone(),
            plan.from.clone(),
            Step::BootFailed,
            &self.boot_id,
        );
        rec.reboot = true;
        rec.by_hand = true;
        rec.os_staged = plan.deployment.is_some();
        rec.os_base = plan.deployment.clone();
        rec.reason = Some(format!(
            "rolled back by hand from {} (mco-agent rollback)",
            plan.from.name()
        ));
        let prepared = (|| -> Result<Ctx> {
            let ctx = self.context(&rec, report.clone())?;
            // The apply goes from `from` to `to`: back up what `to` writes that `from` does not.
            backups::prepare(&self.root, &mut rec, &ctx.desired_ign, &ctx.current_ign)?;
            transitions::check(None, Some(Step::BootFailed))?;
            record::store(&self.root, &rec)?;
            Ok(ctx)
        })();
        let ctx = match prepared {
            Ok(ctx) => ctx,
            Err(e) => {
                report.outcome = Outcome::Degraded(format!("{e:#}"));
                return report;
            }
        };
        tracing::warn!(
            from = plan.from.name(),
            to = plan.to.name(),
            deployment = plan.deployment,
            "rolling back by hand"
        );
        self.reporter.step(
            &self.root,
            Some(Step::BootFailed.as_str()),
            &format!("rollback {}", rec.describe()),
        );
        let report = self.drive(rec, ctx).await;
        self.finish(report, started).await
    }

    /// [`Step::BootFailed`]: the previous deployment as the default, files back.
    pub(crate) async fn roll_back_boot(&self, rec: &UpdateRecord, ctx: &mut Ctx) -> Next {
        match self.undo_boot(rec, ctx).await {
            Ok(()) => Next::Step(Step::RebootingBack),
            Err(e) => Next::Finish(Outcome::Degraded(format!(
                "{}; rolling back to {} failed, will retry: {e:#}",
                rec.reason.as_deref().unwrap_or("rolling back"),
                rec.current.name()
            ))),
        }
    }

    async fn undo_boot(&self, rec: &UpdateRecord, ctx: &Ctx) -> Result<()> {
        failpoint("engine::boot-failed")?;
        if rec.os_staged {
            let base = rec.os_base.as_deref().with_context(|| {
                "the deployment from before the update was not recorded: cannot roll the OS back"
            })?;
            let os = self.seams.os.as_ref().with_context(|| {
                format!(
                    "rolling the OS back needs rpm-ostree: {}",
                    self.seams.os_unavailable
                )
            })?;
            if let Err(e) = os.resume().await {
                tracing::warn!(error = %e, "waiting for a running transaction before the rollback");
            }
            let status = os.status().await.context("reading the deployments")?;
            let default = status.deployments.iter().find(|d| !d.staged);
            if default.is_some_and(|d| d.id == base) && status.staged().is_none() {
                tracing::info!(
                    deployment = base,
                    "the previous deployment is already the default"
                );
            } else {
                if !status.deployments.iter().any(|d| d.id == base) {
                    bail!("the deployment from before the update ({base}) is gone");
                }
                os.rollback()
                    .await
                    .context("making the previous deployment the default (rpm-ostree rollback)")?;
                let status = os.status().await.context("reading the deployments")?;
                let now = status
                    .deployments
                    .iter()
                    .find(|d| !d.staged)
                    .map_or("nothing", |d| d.id.as_str());
                if now != base {
                    bail!("rpm-ostree rollback made {now} the default, not {base}");
                }
                tracing::warn!(
                    deployment = base,
                    "the previous deployment is the default again"
                );
            }
        }
        failpoint("engine::boot-os-rolled-back")?;
        self.restore_current_files(rec, ctx).await?;
        self.root
            .sync()
            .context("syncing what the rollback wrote")?;
        failpoint("engine::boot-files-rolled-back")
    }

    /// [`Step::RebootingBack`] in the boot that rolled back: reboot.
    pub(crate) async fn reboot_back(&self, rec: &mut UpdateRecord) -> Next {
        if let Err(e) = failpoint("engine::reboot-back-recorded") {
            return Next::Finish(Outcome::Degraded(format!("{e:#}")));
        }
        let Some(rebooter) = &self.seams.rebooter else {
            tracing::warn!(config = rec.current.name(), why = %self.seams.no_reboot, "the node needs a reboot to finish rolling back");
            self.reporter
                .update_status(&self.root, |s| s.needs_reboot = true);
            return Next::Finish(Outcome::NeedsReboot);
        };
        let reason = format!(
            "Node will reboot back into config {} after {}",
            rec.current.name(),
            rec.reason.as_deref().unwrap_or("a rollback")
        );
        self.reporter
            .event(machine_config::mco::events::reason::REBOOT, &reason)
            .await;
        rec.reboot_requested = true;
        if let Err(e) = record::store(&self.root, rec) {
            return Next::Finish(Outcome::Degraded(format!("{e:#}")));
        }
        match rebooter.reboot(&reason).await {
            Ok(()) => Next::Finish(Outcome::Rebooting),
            Err(e) => Next::Finish(Outcome::Degraded(format!(
                "{}; the reboot back into {} failed, will retry: {e}",
                rec.reason.as_deref().unwrap_or("rolling back"),
                rec.current.name()
            ))),
        }
    }

    /// [`Step::RebootingBack`] in a later boot: the files again, check, record the failed
    /// target, Degraded.
    pub(crate) async fn rolled_back(&self, rec: &UpdateRecord, ctx: &Ctx) -> Next {
        let mut reason = format!(
            "{}; rolled back to {}",
            rec.reason.as_deref().unwrap_or("rolled back"),
            rec.current.name()
        );
        // The previous deployment booted with its own /etc, where the update's files still are
        // (they were written before the reboot into it) and the rollback's are not: put the
        // current config's back again (where /etc is one, this rewrites what is there).
        let restored = self
            .restore_current_files(rec, ctx)
            .await
            .and_then(|()| self.root.sync().context("syncing what the rollback wrote"));
        if let Err(e) = restored {
            return Next::Finish(Outcome::Degraded(format!(
                "{reason}; putting the files of {} back in the boot back failed, will retry: {e:#}",
                rec.current.name()
            )));
        }
        if rec.os_staged
            && let (Some(base), Some(os)) = (&rec.os_base, &self.seams.os)
        {
            match os::running(os.as_ref()).await {
                Ok(d) if d.id == *base => {}
                Ok(d) => reason.push_str(&format!(
                    "; but the node booted {} instead of the previous deployment {base}",
                    d.id
                )),
                Err(e) => reason.push_str(&format!("; the booted deployment is unknown: {e:#}")),
            }
        }
        // By hand, the Node's `currentConfig` said the config rolled back from (whatever the
        // `currentconfig` of the deployment booted back into says: it is that deployment's
        // /etc); automatically it never stopped saying the one rolled back to.
        let was_current = input::read_current(&self.root)
            .ok()
            .flatten()
            .map(|c| c.machine_config.name().to_string())
            .filter(|_| !rec.by_hand);
        let failed = FailedTarget {
            config: rec.desired.clone(),
            reason: reason.clone(),
            at_ms: now_ms(),
        };
        let done = input::write_current(&self.root, &rec.current)
            .and_then(|()| write_json(&self.root, FAILED_TARGET, &failed))
            .and_then(|()| remove(&self.root, PREVIOUS_CONFIG))
            .and_then(|()| failpoint("engine::rolled-back-boot"))
            .and_then(|()| transitions::check(Some(Step::RebootingBack), None))
            .and_then(|()| record::clear(&self.root));
        if let Err(e) = done {
            return Next::Finish(Outcome::Degraded(format!("{reason}; {e:#}")));
        }
        self.reporter.step(&self.root, None, "");
        if was_current.as_deref() != Some(rec.current.name()) {
            // The MCD's SetDone is the only report of `currentConfig`; Degraded follows.
            let image = machine_config::mco::image::layered_image(&rec.current);
            self.reporter
                .done(&self.root, rec.current.name(), image)
                .await;
        }
        if let Err(e) = self.reporter.cluster().rebooting(false).await {
            tracing::warn!(error = %format!("{e:#}"), "could not clear the reboot on the node");
        }
        tracing::error!(
            failed = rec.desired.name(),
            current = rec.current.name(),
            reason,
            "rolled back a bad boot; the failed config is not applied again until the desired config changes, the force file is created or an admin asks"
        );
        self.reporter.event(BOOT_ROLLED_BACK, &reason).await;
        self.reporter.update_status(&self.root, |s| {
            s.current = Some(rec.current.name().to_string());
            s.needs_reboot = false;
        });
        Next::Finish(Outcome::Degraded(reason))
    }

    /// The guard against boot loops: `Some(reason)` when `desired` is the target a bad boot was
    /// rolled back from and nothing says to try it again. A changed desired config or the force
    /// file (`force`) forgets the failed target.
    pub(crate) fn refuse_failed_target(
        &self,
        desired: &MachineConfig,
        force: bool,
    ) -> Result<Option<String>> {
        let Some(failed) = failed_target(&self.root)? else {
            return Ok(None);
        };
        // Name and spec: the object's metadata (resourceVersion, annotations) may change without
        // the config changing.
        if !force && failed.config.name() == desired.name() && failed.config.spec == desired.spec {
            return Ok(Some(format!(
                "{} (not applied again until the desired config changes or the force file is created)",
                failed.reason
            )));
        }
        tracing::info!(
            failed = failed.config.name(),
            desired = desired.name(),
            force,
            "forgetting the failed target: {}",
            if force {
                "the force file is present"
            } else {
                "the desired config changed"
            }
        );
        remove(&self.root, FAILED_TARGET)?;
        Ok(None)
    }
}
