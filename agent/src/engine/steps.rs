//! The transition function: one step of a recorded update at a time, and the loop that
//! persists the record before each step ([`Engine::drive`]). See the module docs of
//! [`crate::engine`] for what a restart does at each step.

use std::time::Instant;

use anyhow::{Context, Result};
use machine_config::Config;
use machine_config::mco::events::reason;
use machine_config::mco::image::layered_image;
use machine_config::mco::node_conditions::Progress;
use machine_config::plan::{Plan, PolicyOptions};

use super::policy::ActivePolicy;
use super::record::{self, Step, UpdateRecord};
use super::report::LastUpdate;
use super::{Engine, Outcome, UpdateReport, backups, os, post_actions, transitions};
use crate::apply::{ApplyOptions, apply};
use crate::failpoints::failpoint;
use crate::hooks::Phase;
use crate::input;
use crate::os::arrange_pull_secret;
use crate::units::{OfflineUnits, UnitEnablement};

/// What an update needs besides its record: recomputed from the record on every run, so a
/// resumed update works from exactly what was recorded.
pub(crate) struct Ctx {
    pub plan: Plan,
    pub current_ign: Config,
    pub desired_ign: Config,
    pub report: UpdateReport,
    pub started: Instant,
}

/// Where a transition leads.
pub(crate) enum Next {
    /// Record this step, then run it.
    Step(Step),
    /// Record this step and stop with this outcome (the update waits at the step).
    Park(Step, Outcome),
    /// Stop with this outcome (the record was cleared, or stays as it is).
    Finish(Outcome),
}

/// How long a reboot waits for the node's queued writes (annotations, events, the
/// MachineConfigNode) to land: the API server may be down, and the reboot must not wait on it.
const REBOOT_FLUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

impl Engine {
    /// The plan's inputs under `policy`.
    pub(crate) fn plan_options(&self, policy: &ActivePolicy) -> PolicyOptions {
        PolicyOptions {
            arch: self.opts.arch.clone(),
            policies: policy.policies.clone(),
            overrides: policy.overrides.clone(),
            ..PolicyOptions::default()
        }
    }

    /// The context of a recorded update.
    pub(crate) fn context(&self, rec: &UpdateRecord, report: UpdateReport) -> Result<Ctx> {
        let current_ign = if rec.first_application {
            Config::empty()
        } else {
            rec.current
                .ignition()
                .context("the recorded current config")?
        };
        let desired_ign = rec
            .desired
            .ignition()
            .context("the recorded desired config")?;
        let policy = rec.policy.clone().unwrap_or_else(ActivePolicy::defaults);
        let plan = Plan::new(&rec.current, &rec.desired, &self.plan_options(&policy))
            .context("planning the recorded update")?;
        Ok(Ctx {
            plan,
            current_ign,
            desired_ign,
            report,
            started: Instant::now(),
        })
    }

    /// Runs transitions from `rec.step`, persisting the record before each step. After a stop
    /// request ([`crate::stop`]) no step begins, and a step that failed while the stop was under
    /// way (a hook killed with the unit, health checks of units going down with a shutdown) is
    /// not taken for a failure: nothing is recorded, the next start runs the step again. Either
    /// way this waits to be dropped by the daemon.
    pub(crate) async fn drive(&self, mut rec: UpdateRecord, mut ctx: Ctx) -> UpdateReport {
        loop {
            self.stop.checkpoint().await;
            let next = self.transition(&mut rec, &mut ctx).await;
            if self.stop.requested() && failed(&next) {
                tracing::info!(update = rec.describe(), step = %rec.step, "stop requested while the step ran: its end is not recorded, the next start runs it again");
                std::future::pending::<()>().await;
            }
            let (step, outcome) = match next {
                Next::Step(step) => (step, None),
                Next::Park(step, outcome) => (step, Some(outcome)),
                Next::Finish(outcome) => {
                    ctx.report.outcome = outcome;
                    break;
                }
            };
            if let Err(e) = transitions::check(Some(rec.step), Some(step)) {
                ctx.report.outcome = Outcome::Degraded(format!("{e:#}"));
                break;
            }
            rec.step = step;
            rec.boot_id = self.boot_id.clone();
            if let Err(e) = record::store(&self.root, &rec) {
                // The previous step stays recorded; a restart resumes from it.
                ctx.report.outcome = Outcome::Degraded(format!("{e:#}"));
                break;
            }
            self.reporter.step(
                &self.root,
                Some(step.as_str()),
                &format!("update {}: {step}", rec.describe()),
            );
            if let Some(outcome) = outcome {
                ctx.report.outcome = outcome;
                break;
            }
        }
        ctx.report.duration = ctx.started.elapsed();
        ctx.report
    }

    /// One step of the update.
    pub(crate) async fn transition(&self, rec: &mut UpdateRecord, ctx: &mut Ctx) -> Next {
        match rec.step {
            Step::Draining => match self.drain(rec).await {
                Ok(()) => Next::Step(Step::Writing),
                // A drain cut short by a stop is no failure: the record stays for the next start,
                // and this waits to be dropped (see `drive`).
                Err(_) if self.stop.requested() => std::future::pending().await,
                Err(e) => {
                    // Nothing was written: the update simply did not start.
                    let reason = format!("{e:#}");
                    if let Err(e) = self.clear_record(Step::Draining) {
                        tracing::warn!(error = %format!("{e:#}"), "clearing the update record");
                    }
                    Next::Finish(Outcome::Degraded(reason))
                }
            },
            Step::Writing => match self.write(rec, ctx).await {
                Ok(()) if self.runs_os_step(&ctx.plan, rec) => {
                    rec.os_staged = true;
                    rec.os_base = self.running_deployment_id().await;
                    Next::Step(Step::Os)
                }
                Ok(()) => {
                    self.reporter.progress(applied(&ctx.plan, true)).await;
                    Next::Step(after_changes(rec))
                }
                // Writes ended by a stop between two files: not a failure, the next start
                // resumes them from the record (see `drive`).
                Err(_) if self.stop.requested() => std::future::pending().await,
                Err(e) => fail(rec, format!("{e:#}")),
            },
            Step::Os => match self.stage_os(rec, ctx).await {
                Ok(()) => {
                    self.reporter.progress(applied(&ctx.plan, true)).await;
                    Next::Step(after_changes(rec))
                }
                Err(e) if os::reboot_queued(&e) => reboot_under_way(rec, &e),
                Err(e) => fail(rec, format!("{e:#}")),
            },
            Step::PostActions => match self.post_actions(rec, ctx).await {
                // A failed post-apply hook leaves the update at this step, not committed:
                // Degraded, and its retry runs the actions and the failed hook again.
                Ok(()) => match self.recorded_hooks(rec, &ctx.plan, Phase::PostApply).await {
                    // (the MCD verifies the extensions after a rebootless update too)
                    Ok(()) => match self.verify_extensions(&rec.desired).await {
                        Ok(()) => Next::Finish(self.complete(rec).await),
                        Err(reason) => Next::Finish(Outcome::Degraded(reason)),
                    },
                    Err(reason) => Next::Finish(Outcome::Degraded(reason)),
                },
                Err(e) => fail(rec, format!("{e:#}")),
            },
            Step::RebootRequested if rec.boot_id != self.boot_id => Next::Step(Step::Verifying),
            Step::RebootRequested => self.request_reboot(rec, ctx).await,
            Step::Verifying | Step::NotTaken => self.verify(rec, ctx).await,
            Step::RollingBack => self.roll_back(rec, ctx).await,
            Step::BootFailed => self.roll_back_boot(rec, ctx).await,
            Step::RebootingBack if rec.boot_id != self.boot_id => self.rolled_back(rec, ctx).await,
            Step::RebootingBack => self.reboot_back(rec).await,
        }
    }

    async fn drain(&self, rec: &UpdateRecord) -> Result<()> {
        let config = rec.desired.name().to_string();
        self.reporter
            .event(reason::DRAIN, "Draining node to update config.")
            .await;
        let draining = Progress::Draining {
            config: config.clone(),
        };
        self.reporter.progress(draining).await;
        let drained = self.reporter.cluster().drain(&config).await;
        if let Err(e) = &drained {
            let error = format!("{e:#}");
            let failed = Progress::DrainFailed { config, error };
            self.reporter.progress(failed).await;
        } else {
            // The drain cordons first; both are done once it returns.
            self.reporter.progress(Progress::Cordoned).await;
            self.reporter.progress(Progress::Drained { config }).await;
        }
        drained.context("failed to drain node")?;
        failpoint("engine::drained")
    }

    pub(crate) fn with_units<'a>(
        &'a self,
        offline: &'a OfflineUnits<'a>,
    ) -> &'a dyn UnitEnablement {
        match &self.seams.units {
            Some(u) => u.as_ref(),
            None => offline,
        }
    }

    async fn write(&self, rec: &UpdateRecord, ctx: &mut Ctx) -> Result<()> {
        self.reporter.progress(applied(&ctx.plan, false)).await;
        failpoint("engine::writing")?;
        backups::restore_stamps(&self.root, rec)?;
        let options = ApplyOptions {
            field_prefix: self.opts.field_prefix,
            write_all: rec.force,
            first_application: rec.first_application,
            skip_certificate_write: self.opts.skip_certificate_write,
        };
        let offline = OfflineUnits::new(&self.root);
        let outcome = apply(
            &self.root,
            &ctx.current_ign,
            &ctx.desired_ign,
            &options,
            self.with_units(&offline),
        )
        .await
        .with_context(|| format!("applying {}", rec.desired.name()))?;
        ctx.report.applied = Some(outcome);
        // The next record says the writes are done: everything they made must be on disk first,
        // also what the agent's own fsyncs do not cover (the links systemd makes for unit
        // enablement on a live node).
        self.root.sync().context("syncing what the update wrote")?;
        failpoint("engine::written")
    }

    /// Whether the update runs the OS step: when its plan changes the OS, and, with
    /// rpm-ostree at hand, on every image-mode update and to a non-default kernel, as the
    /// MCD's `applyOSChanges` does (its events say so even when nothing is staged).
    fn runs_os_step(&self, plan: &Plan, rec: &UpdateRecord) -> bool {
        os::plan_changes_os(plan)
            || (self.checks_os() && os::os_step_always(&rec.current, &rec.desired))
    }

    /// The id of the deployment the node runs now, recorded before staging (`None`, said in
    /// the log, when it cannot be read: an unplanned reboot while staging then rolls back).
    async fn running_deployment_id(&self) -> Option<String> {
        let os = self.seams.os.as_ref()?;
        match os::running(os.as_ref()).await {
            Ok(d) => Some(d.id),
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "could not read the running deployment before staging");
                None
            }
        }
    }

    async fn stage_os(&self, rec: &mut UpdateRecord, ctx: &mut Ctx) -> Result<()> {
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
        failpoint("engine::os-done")
    }

    async fn post_actions(&self, rec: &UpdateRecord, ctx: &mut Ctx) -> Result<()> {
        failpoint("engine::post-actions")?;
        let run = post_actions::run(
            &ctx.plan.actions,
            self.seams.systemd.as_deref(),
            &self.reporter,
            rec.desired.name(),
        )
        .await?;
        ctx.report.actions = run.run;
        ctx.report.skipped_actions = run.skipped;
        Ok(())
    }

    async fn request_reboot(&self, rec: &mut UpdateRecord, ctx: &Ctx) -> Next {
        if let Err(e) = failpoint("engine::reboot-recorded") {
            return fail(rec, format!("{e:#}"));
        }
        if let Err(reason) = self.recorded_hooks(rec, &ctx.plan, Phase::PostApply).await {
            return Next::Finish(Outcome::Degraded(reason));
        }
        let Some(rebooter) = &self.seams.rebooter else {
            // Whoever reboots the node (an admin after `--skip-reboot`) finds what the node
            // says about this update landed.
            if let Err(e) = self.reporter.cluster().flush(REBOOT_FLUSH_TIMEOUT).await {
                tracing::warn!(error = %format!("{e:#}"), "node writes still queued");
            }
            tracing::info!(config = rec.desired.name(), why = %self.seams.no_reboot, "the node needs a reboot to finish the update");
            if !self.opts.verify_after_reboot {
                // No boot of this root can be observed: the update is complete as written.
                return Next::Finish(match self.complete(rec).await {
                    Outcome::Done => Outcome::NeedsReboot,
                    other => other,
                });
            }
            self.reporter
                .update_status(&self.root, |s| s.needs_reboot = true);
            return Next::Finish(Outcome::NeedsReboot);
        };
        if let Err(reason) = self.recorded_hooks(rec, &ctx.plan, Phase::PreReboot).await {
            let stopped = format!("update to {} stopped: {reason}", rec.desired.name());
            return fail(rec, stopped);
        }
        let reason = format!("Node will reboot into config {}", rec.desired.name());
        self.reporter.progress(Progress::RebootRequired).await;
        self.reporter.event(reason::REBOOT, &reason).await;
        if let Err(e) = self.reporter.cluster().rebooting(true).await {
            tracing::warn!(error = %format!("{e:#}"), "could not record the reboot on the node");
        }
        if rec.force
            && let Err(e) = self.consume_force_file()
        {
            tracing::warn!(error = %format!("{e:#}"), "could not remove the force file");
        }
        // Recorded before asking: a reboot that comes while this is unset was not ours.
        rec.reboot_requested = true;
        if let Err(e) = record::store(&self.root, rec) {
            return fail(rec, format!("{e:#}"));
        }
        // What the node says about this update lands before the process goes away (the
        // writes are queued; a reboot would lose those still in the queue).
        if let Err(e) = self.reporter.cluster().flush(REBOOT_FLUSH_TIMEOUT).await {
            tracing::warn!(error = %format!("{e:#}"), "rebooting with node writes still queued");
        }
        match rebooter.reboot(&reason).await {
            Ok(()) => match failpoint("engine::reboot-requested") {
                Ok(()) => Next::Finish(Outcome::Rebooting),
                Err(e) => fail(rec, format!("{e:#}")),
            },
            Err(e) if e.reboot_queued() => reboot_under_way(rec, &anyhow::Error::new(e)),
            Err(e) => fail(
                rec,
                format!("reboot command failed, something is seriously wrong: {e}"),
            ),
        }
    }

    async fn verify(&self, rec: &mut UpdateRecord, ctx: &mut Ctx) -> Next {
        if let Err(e) = failpoint("engine::verifying") {
            return Next::Park(Step::NotTaken, Outcome::Degraded(format!("{e:#}")));
        }
        let v = self.validate_node(&rec.desired, &ctx.desired_ign).await;
        if v.is_ok() {
            tracing::info!(
                config = rec.desired.name(),
                "the update took: booted deployment, kernel arguments and files match"
            );
            // The MCD's last check before Done: the extensions' packages are installed.
            if let Err(reason) = self.verify_extensions(&rec.desired).await {
                rec.reason = Some(reason.clone());
                return Next::Park(Step::NotTaken, Outcome::Degraded(reason));
            }
            // a bad boot is rolled back first; then the admin's post-boot hooks
            self.reporter.checking_health(rec.desired.name());
            if let Err(problems) = self
                .check_health(rec.desired.name(), &ctx.desired_ign)
                .await
            {
                let reason = format!(
                    "boot into {} failed: {}",
                    rec.desired.name(),
                    problems.join("; ")
                );
                tracing::error!(update = rec.describe(), reason, "rolling the boot back");
                rec.reason = Some(reason);
                return Next::Step(Step::BootFailed);
            }
            if let Err(reason) = self.recorded_hooks(rec, &ctx.plan, Phase::PostBoot).await {
                rec.reason = Some(reason.clone());
                return Next::Park(Step::NotTaken, Outcome::Degraded(reason));
            }
            let outcome = self.complete(rec).await;
            ctx.report.verified = matches!(outcome, Outcome::Done);
            return Next::Finish(outcome);
        }
        let reason = format!(
            "update to {} did not take after the reboot: {}",
            rec.desired.name(),
            v.messages().join("; ")
        );
        rec.reason = Some(reason.clone());
        Next::Park(Step::NotTaken, Outcome::Degraded(reason))
    }

    /// The update is complete: commit `currentconfig`, clear the record, uncordon, Done.
    pub(crate) async fn complete(&self, rec: &UpdateRecord) -> Outcome {
        let name = rec.desired.name();
        if let Err(e) = input::write_current(&self.root, &rec.desired) {
            return Outcome::Degraded(format!("recording the current config {name}: {e:#}"));
        }
        if let Err(e) = super::rollback_records::record_previous(&self.root, rec) {
            return Outcome::Degraded(format!("recording the config before {name}: {e:#}"));
        }
        if let Err(e) = failpoint("engine::committed") {
            return Outcome::Degraded(format!("{e:#}"));
        }
        if rec.force
            && let Err(e) = self.consume_force_file()
        {
            tracing::warn!(error = %format!("{e:#}"), "could not remove the force file");
        }
        if rec.reboot {
            self.reporter.progress(Progress::Rebooted).await;
            if let Err(e) = self.reporter.cluster().rebooting(false).await {
                tracing::warn!(error = %format!("{e:#}"), "could not clear the reboot on the node");
            }
        }
        let resumed = Progress::Resumed {
            config: name.to_string(),
            applying: true,
        };
        self.reporter.progress(resumed).await;
        // The uncordon waits on the API server: the record stays until it has answered, so an
        // agent stopped (or killed) while it waits finds the update at its next start,
        // verifies it again and uncordons then.
        let uncordoned = self.reporter.cluster().uncordon(name).await;
        if let Err(e) = self.clear_record(rec.step) {
            return Outcome::Degraded(format!("{e:#}"));
        }
        self.reporter.step(&self.root, None, "");
        if let Err(e) = uncordoned {
            let error = format!("{e:#}");
            self.reporter
                .progress(Progress::UncordonFailed {
                    error: error.clone(),
                })
                .await;
            let reason = format!("failed to uncordon node: {error}");
            self.reporter
                .event(reason::FAILED_TO_UNCORDON, &reason)
                .await;
            self.reporter
                .update_status(&self.root, |s| s.current = Some(name.to_string()));
            return Outcome::Degraded(reason);
        }
        self.reporter.progress(Progress::Uncordoned).await;
        let node = self
            .reporter
            .node_name()
            .unwrap_or("(no cluster)")
            .to_string();
        self.reporter
            .event(
                reason::NODE_DONE,
                &format!("Setting node {node}, currentConfig {name} to Done"),
            )
            .await;
        // How the update ended is in the status file before Done is: a reader that sees Done
        // in the new config also sees the update's end.
        let ended = record::now_ms();
        self.reporter.update_status(&self.root, |s| {
            let last = s.last_update.get_or_insert_with(LastUpdate::default);
            last.from = rec.current.name().to_string();
            last.to = name.to_string();
            last.started_ms = rec.started_ms;
            last.reboot = rec.reboot;
            last.result = "Done".to_string();
            last.ended_ms = Some(ended);
            last.duration_ms = Some(ended.saturating_sub(rec.started_ms));
        });
        self.reporter
            .done(&self.root, name, layered_image(&rec.desired))
            .await;
        Outcome::Done
    }

    async fn roll_back(&self, rec: &UpdateRecord, ctx: &mut Ctx) -> Next {
        let reason = rec
            .reason
            .clone()
            .unwrap_or_else(|| "the update was interrupted".to_string());
        match self.undo(rec, ctx).await {
            Err(e) if os::reboot_queued(&e) => reboot_under_way(rec, &e),
            Ok(()) => {
                tracing::warn!(
                    update = rec.describe(),
                    reason,
                    "rolled back to the current config"
                );
                if let Err(e) = self.clear_record(Step::RollingBack) {
                    return Next::Finish(Outcome::Degraded(format!("{reason}; {e:#}")));
                }
                self.reporter.step(&self.root, None, "");
                Next::Finish(Outcome::Degraded(reason))
            }
            Err(e) => Next::Finish(Outcome::Degraded(format!(
                "{reason}; rolling back to {} failed too, will retry: {e:#}",
                rec.current.name()
            ))),
        }
    }

    /// Drops the record of an update at step `from`: it completed, was rolled back, or never
    /// started writing.
    fn clear_record(&self, from: Step) -> Result<()> {
        transitions::check(Some(from), None)?;
        record::clear(&self.root)
    }

    /// Removes staged OS changes and re-applies the current config over the desired one.
    async fn undo(&self, rec: &UpdateRecord, ctx: &Ctx) -> Result<()> {
        failpoint("engine::rolling-back")?;
        if rec.os_staged {
            let os = self.seams.os.as_ref().with_context(|| {
                format!(
                    "OS changes may be staged but rpm-ostree is not available to remove them: {}",
                    self.seams.os_unavailable
                )
            })?;
            os::unstage(os.as_ref()).await?;
        }
        self.restore_current_files(rec, ctx).await?;
        // Clearing the record next says the current config is back in place.
        self.root
            .sync()
            .context("syncing what the rollback wrote")?;
        failpoint("engine::rolled-back-files")
    }

    /// Puts the current config's files, units and users back over the desired one's (every
    /// path's backup first, every unit rewritten): a rollback of the files, before its sync.
    pub(super) async fn restore_current_files(&self, rec: &UpdateRecord, ctx: &Ctx) -> Result<()> {
        backups::restore_stamps(&self.root, rec)?;
        let options = ApplyOptions {
            field_prefix: self.opts.field_prefix,
            write_all: true,
            first_application: false,
            skip_certificate_write: self.opts.skip_certificate_write,
        };
        let offline = OfflineUnits::new(&self.root);
        apply(
            &self.root,
            &ctx.desired_ign,
            &ctx.current_ign,
            &options,
            self.with_units(&offline),
        )
        .await
        .with_context(|| format!("re-applying {}", rec.current.name()))?;
        Ok(())
    }
}

/// After files (and OS changes): reboot, or post-config actions.
fn after_changes(rec: &UpdateRecord) -> Step {
    if rec.reboot {
        Step::RebootRequested
    } else {
        Step::PostActions
    }
}

/// The files (and OS) step of `plan`: being applied, or `done`. "SSH Keys" in the MCD's
/// message stands for files and users alike.
fn applied(plan: &Plan, done: bool) -> Progress {
    let os = super::os::plan_changes_os(plan);
    let files = !plan.files.is_empty() || !plan.units.is_empty() || plan.passwd;
    if done {
        Progress::AppliedFilesAndOs { os, files }
    } else {
        Progress::ApplyingFilesAndOs { os, files }
    }
}

/// rpm-ostree refused the step's work because it has queued a reboot (`e`): the update waits
/// for that reboot at the step it is at, starting nothing more (the record is left as it is,
/// and the next boot resumes from it).
pub(crate) fn reboot_under_way(rec: &UpdateRecord, e: &anyhow::Error) -> Next {
    tracing::info!(update = rec.describe(), step = %rec.step, error = %format!("{e:#}"), "rpm-ostree has queued a reboot: nothing more starts before it, the update resumes from its record after it");
    Next::Finish(Outcome::Rebooting)
}

/// Whether a transition is a failure (a rollback, a bad boot, Degraded): not recorded when a
/// stop came while its step ran, since the stop may have caused it.
fn failed(next: &Next) -> bool {
    match next {
        Next::Step(step) => matches!(step, Step::RollingBack | Step::BootFailed),
        Next::Park(_, outcome) | Next::Finish(outcome) => {
            matches!(outcome, Outcome::Degraded(_))
        }
    }
}

/// A failed step: roll back, remembering why.
fn fail(rec: &mut UpdateRecord, reason: String) -> Next {
    tracing::warn!(update = rec.describe(), step = %rec.step, reason, "update step failed; rolling back");
    rec.reason = Some(reason);
    Next::Step(Step::RollingBack)
}
