//! Starting, resuming and finishing updates: the engine's public entry points.

use std::time::{Duration, Instant};

use machine_config::mco::EMPTY_CONFIG_NAME;
use machine_config::mco::NodeState;
use machine_config::mco::events::reason;
use machine_config::mco::node_conditions::Progress;
use machine_config::plan::Plan;
use machine_config::{IgnitionJson, MachineConfig, MachineConfigSpec};
use serde_json::{Map, Value};

use super::policy::ActivePolicy;
use super::record::{self, Step, UpdateRecord, now_ms};
use super::report::LastUpdate;
use super::steps::Ctx;
use super::{Engine, Observation, Outcome, UpdateReport, backups, os, transitions, with_os_of};
use crate::apply::{self, ApplyOptions};
use crate::failpoints::failpoint;
use crate::input;
use crate::strategy::{Decision, Disruption, StrategyStatus};

impl Engine {
    /// Updates the node to `desired`. `force`: the force file was present (skip validation,
    /// rewrite every unit). An update recorded earlier is resumed when it is this same update,
    /// and rolled back first when it is another one (the desired config changed meanwhile).
    pub async fn update(&self, desired: &MachineConfig, force: bool) -> UpdateReport {
        // Nothing begins after a stop request (see `drive`).
        self.stop.checkpoint().await;
        let mut report = UpdateReport::new("", desired.name());
        let started = Instant::now();
        match self.pending() {
            Err(e) => {
                report.outcome = Outcome::Degraded(format!("{e:#}"));
                return self.finish(report, now_ms()).await;
            }
            // `mco-agent rollback` is at work in this boot: it drives its record, not us.
            Ok(Some(rec))
                if rec.step.rolls_back_boot() && rec.by_hand && rec.boot_id == self.boot_id =>
            {
                let reason = format!(
                    "{}: waiting for mco-agent rollback and its reboot",
                    rec.reason.as_deref().unwrap_or("rolling back by hand")
                );
                report.outcome = Outcome::Degraded(reason);
                return self.finish(report, now_ms()).await;
            }
            // A bad boot being rolled back is finished first, whatever is desired now: the
            // next update starts from the rolled-back node.
            Ok(Some(rec)) if rec.step.rolls_back_boot() => {
                return self.resume_record(rec).await;
            }
            Ok(Some(rec)) if !force && same_update(&rec, desired) => {
                return self.resume_record(rec).await;
            }
            Ok(Some(rec)) => {
                let why = format!(
                    "re-targeted from {} to {}",
                    rec.desired.name(),
                    desired.name()
                );
                tracing::info!(
                    update = rec.describe(),
                    "{why}: rolling the recorded update back first"
                );
                if let Err(reason) = self.roll_back_record(rec, why).await {
                    report.outcome = Outcome::Degraded(reason);
                    return self.finish(report, now_ms()).await;
                }
            }
            Ok(None) => {}
        }
        match self.refuse_failed_target(desired, force) {
            Ok(None) => {}
            Ok(Some(reason)) => {
                tracing::warn!(desired = desired.name(), "{reason}");
                report.outcome = Outcome::Degraded(reason);
                return self.finish(report, now_ms()).await;
            }
            Err(e) => {
                report.outcome = Outcome::Degraded(format!("{e:#}"));
                return self.finish(report, now_ms()).await;
            }
        }
        let started_ms = now_ms();
        match self.begin(desired, force, &mut report).await {
            Ok((rec, mut ctx)) => {
                ctx.started = started;
                let report = self.drive(rec, ctx).await;
                self.finish(report, started_ms).await
            }
            Err(outcome) => {
                if matches!(outcome, Outcome::Degraded(_)) {
                    // (a check or hook that failed while stopping may have failed because of
                    // the stop: not reported)
                    self.stop.checkpoint().await;
                }
                report.outcome = outcome;
                report.duration = started.elapsed();
                self.finish(report, started_ms).await
            }
        }
    }

    /// Resumes the recorded update, if any: after a restart (roll back or go on, per step) or a
    /// reboot (verify).
    pub async fn resume(&self) -> Option<UpdateReport> {
        match self.pending() {
            Ok(None) => None,
            Ok(Some(rec)) => Some(self.resume_record(rec).await),
            Err(e) => {
                let mut report = UpdateReport::new("", "");
                report.outcome = Outcome::Degraded(format!("{e:#}"));
                Some(self.finish(report, now_ms()).await)
            }
        }
    }

    async fn resume_record(&self, mut rec: UpdateRecord) -> UpdateReport {
        let report = UpdateReport::new(rec.current.name(), rec.desired.name());
        let mut ctx = match self.context(&rec, report) {
            Ok(ctx) => ctx,
            Err(e) => {
                let mut report = UpdateReport::new(rec.current.name(), rec.desired.name());
                report.outcome = Outcome::Degraded(format!("{e:#}"));
                return self.finish(report, rec.started_ms).await;
            }
        };
        let rebooted = rec.boot_id != self.boot_id;
        let step = match rec.step {
            Step::Writing => interrupted(&mut rec, "writing files, units and users"),
            Step::Os if rebooted => self.after_unplanned_reboot(&mut rec, None).await,
            Step::Os => interrupted(&mut rec, "staging OS changes"),
            Step::RebootRequested if rebooted && rec.os_staged && !rec.reboot_requested => {
                self.after_unplanned_reboot(&mut rec, Some(Step::Verifying))
                    .await
            }
            Step::RebootRequested
                if rebooted && rec.os_staged && !rec.restaged_after_lost_reboot =>
            {
                self.after_lost_reboot(&mut rec).await
            }
            other => other,
        };
        tracing::info!(update = rec.describe(), recorded = %rec.step, resume = %step, rebooted, "resuming the recorded update");
        if step != rec.step {
            let moved = transitions::check(Some(rec.step), Some(step));
            rec.step = step;
            if let Err(e) = moved.and_then(|()| record::store(&self.root, &rec)) {
                ctx.report.outcome = Outcome::Degraded(format!("{e:#}"));
                return self.finish(ctx.report, rec.started_ms).await;
            }
        }
        self.reporter.update_status(&self.root, |s| {
            s.current = Some(rec.current.name().to_string());
            s.desired = Some(rec.desired.name().to_string());
        });
        let started_ms = rec.started_ms;
        let report = self.drive(rec, ctx).await;
        self.finish(report, started_ms).await
    }

    /// Where an update goes after a reboot nobody asked for, while its OS changes were staged
    /// or being staged. The deployment from before the update still running means nothing
    /// staged took (a finalization-locked staged deployment is dropped by such a reboot, or
    /// nothing was staged yet): stage again, no rollback needed since the files are already
    /// the desired ones. The new OS running: verify. Anything else: `otherwise`, or roll back.
    async fn after_unplanned_reboot(
        &self,
        rec: &mut UpdateRecord,
        otherwise: Option<Step>,
    ) -> Step {
        let Some(os) = &self.seams.os else {
            return otherwise.unwrap_or_else(|| interrupted(rec, "staging OS changes"));
        };
        match (&rec.os_base, os::running(os.as_ref()).await) {
            (Some(base), Ok(running)) if *base == running.id => {
                tracing::info!(
                    update = rec.describe(),
                    deployment = base,
                    "rebooted before the OS changes were released: the deployment from before the update still runs, staging them again"
                );
                rec.reboot_requested = false;
                return Step::Os;
            }
            (_, Err(e)) => {
                tracing::warn!(error = %format!("{e:#}"), "reading the running deployment after the reboot")
            }
            _ => {}
        }
        if os::runs(os.as_ref(), &rec.desired).await {
            tracing::info!(
                update = rec.describe(),
                "the node rebooted into the staged OS changes: verifying"
            );
            return Step::Verifying;
        }
        otherwise.unwrap_or_else(|| interrupted(rec, "staging OS changes"))
    }

    /// Where an update goes after the reboot the agent asked for, when that boot runs the
    /// deployment from before the update: the staged deployment was never finalized (the power
    /// was lost during the shutdown, before `ostree-finalize-staged` wrote it out), so nothing
    /// staged took and the files are already the desired ones. The OS changes are staged again
    /// and the node rebooted once more, once per update: a second such boot is verified, and
    /// left Degraded, as a finalization that keeps failing must not become a reboot loop.
    /// Anything else booted: verify.
    async fn after_lost_reboot(&self, rec: &mut UpdateRecord) -> Step {
        let Some(os) = &self.seams.os else {
            return Step::Verifying;
        };
        match (&rec.os_base, os::running(os.as_ref()).await) {
            (Some(base), Ok(running)) if *base == running.id => {
                tracing::warn!(
                    update = rec.describe(),
                    deployment = base,
                    "the reboot asked for booted the deployment from before the update (the staged one was never finalized: power lost during the shutdown?): staging the OS changes again, once"
                );
                rec.reboot_requested = false;
                rec.restaged_after_lost_reboot = true;
                Step::Os
            }
            (_, Err(e)) => {
                tracing::warn!(error = %format!("{e:#}"), "reading the running deployment after the reboot");
                Step::Verifying
            }
            _ => Step::Verifying,
        }
    }

    /// Rolls a recorded update back; `Err` with the reason when that failed.
    async fn roll_back_record(&self, mut rec: UpdateRecord, why: String) -> Result<(), String> {
        let ctx = self
            .context(
                &rec,
                UpdateReport::new(rec.current.name(), rec.desired.name()),
            )
            .map_err(|e| format!("{e:#}"))?;
        transitions::check(Some(rec.step), Some(Step::RollingBack))
            .map_err(|e| format!("{e:#}"))?;
        rec.reason = Some(why);
        rec.step = Step::RollingBack;
        record::store(&self.root, &rec).map_err(|e| format!("{e:#}"))?;
        let report = self.drive(rec, ctx).await;
        match self.pending() {
            Ok(None) => Ok(()),
            Ok(Some(_)) => Err(match report.outcome {
                Outcome::Degraded(r) => r,
                other => format!("rolling back ended with {other:?}"),
            }),
            Err(e) => Err(format!("{e:#}")),
        }
    }

    /// Checks and plans a new update and records it. `Err` is the outcome when it does not
    /// start (nothing was changed).
    async fn begin(
        &self,
        desired: &MachineConfig,
        force: bool,
        report: &mut UpdateReport,
    ) -> Result<(UpdateRecord, Ctx), Outcome> {
        let degraded = |e: anyhow::Error| Outcome::Degraded(format!("{e:#}"));
        let current = input::read_current(&self.root).map_err(degraded)?;
        let first = current.is_none();
        let (current_mc, current_ign) = match current {
            Some(c) => (c.machine_config, c.ignition),
            None => (
                first_application_baseline(desired),
                machine_config::Config::empty(),
            ),
        };
        report.from = current_mc.name().to_string();
        self.reporter.progress(Progress::NeedsUpdate).await;
        tracing::info!(
            from = current_mc.name(),
            to = desired.name(),
            force,
            "Checking Reconcilable for config {} to {}",
            current_mc.name(),
            desired.name()
        );
        let active = match self.policy_source.current().await {
            Ok(active) => active,
            Err(e) => {
                // The MCD checks reconcilability before it asks for the cluster's policies.
                let defaults = self.plan_options(&ActivePolicy::defaults());
                if let Ok(plan) = Plan::new(&current_mc, desired, &defaults)
                    && plan.reason.is_some()
                {
                    return Err(self.unreconcilable(plan, report).await);
                }
                let error = format!("{e:#}");
                self.reporter
                    .progress(Progress::ActionsUnavailable {
                        from: report.from.clone(),
                        to: report.to.clone(),
                        error: error.clone(),
                    })
                    .await;
                return Err(Outcome::Degraded(error));
            }
        };
        let mut plan =
            Plan::new(&current_mc, desired, &self.plan_options(&active)).map_err(|e| {
                Outcome::Degraded(format!("planning the update to {}: {e}", desired.name()))
            })?;
        if plan.reason.is_some() {
            return Err(self.unreconcilable(plan, report).await);
        }
        let mut desired = desired.clone();
        let os_changes = os::describe(&plan, &current_mc, &desired);
        if !os_changes.is_empty() && self.opts.skip_os {
            desired = with_os_of(&desired, &current_mc);
            plan = Plan::new(&current_mc, &desired, &self.plan_options(&active))
                .map_err(|e| Outcome::Degraded(format!("planning without OS changes: {e}")))?;
            report.left_out = os_changes;
        } else if !os_changes.is_empty() && self.seams.os.is_none() {
            return Err(Outcome::Degraded(format!(
                "config {} changes the OS ({}), which needs rpm-ostree: {}; nothing was changed",
                desired.name(),
                os_changes.join("; "),
                self.seams.os_unavailable
            )));
        }
        report.plan = Some(plan.clone());
        if force {
            tracing::info!(
                "Skipping preflight config drift check; {} present",
                machine_config::mco::paths::FORCE_FILE
            );
        } else if !first && self.opts.preflight {
            // The MCD's preflight check (`runPreflightConfigDriftCheck`): the booted image and
            // the kernel arguments, then files and units, so a node pivoted by hand goes
            // Degraded rather than being updated from a state nobody planned.
            let v = self.validate_node(&current_mc, &current_ign).await;
            if !v.is_ok() {
                let reason = v.reason();
                tracing::error!("Preflight config drift check failed: {reason}");
                self.reporter
                    .event(reason::PREFLIGHT_CONFIG_DRIFT_CHECK_FAILED, &reason)
                    .await;
                return Err(Outcome::Degraded(reason));
            }
        }
        let desired_ign = desired.ignition().map_err(|e| degraded(e.into()))?;
        let options = ApplyOptions {
            field_prefix: self.opts.field_prefix,
            write_all: force,
            first_application: first,
            skip_certificate_write: self.opts.skip_certificate_write,
        };
        apply::check(&self.root, &current_ign, &desired_ign, &options)
            .map_err(|e| Outcome::Degraded(e.to_string()))?;
        // Last before anything is recorded or changed: may it start now?
        let disruption = Disruption {
            drain: plan.drain,
            reboot: plan.reboot,
        };
        let locked = match self
            .strategy
            .before_update(desired.name(), disruption)
            .await
        {
            Decision::Go { locked } => locked,
            Decision::Wait { reason, recheck_in } => {
                return Err(Outcome::Waiting { reason, recheck_in });
            }
        };
        // The last check: the admin's veto, once everything else says the update can start
        // (after the strategy: a held-back update does not run its hooks at every recheck).
        if let Err(reason) = self.pre_apply_hooks(&current_mc, &desired, &plan).await {
            // nothing was recorded: a slot taken for this update is given back now
            if locked && let Err(e) = self.strategy.release().await {
                tracing::warn!(error = %format!("{e:#}"), "giving back the FleetLock slot after a veto failed");
            }
            return Err(Outcome::Degraded(reason));
        }
        let actions: Vec<String> = plan.actions.iter().map(describe_action).collect();
        tracing::info!(
            actions = ?actions,
            "Calculated node disruption actions: {}",
            actions.join(", ")
        );
        self.reporter
            .progress(Progress::Prepared { drain: plan.drain })
            .await;
        let step = if plan.drain {
            Step::Draining
        } else {
            self.reporter.progress(Progress::DrainNotRequired).await;
            Step::Writing
        };
        let mut rec = UpdateRecord::new(current_mc, desired, step, &self.boot_id);
        rec.first_application = first;
        rec.force = force;
        rec.reboot = plan.reboot;
        rec.lock_held = locked;
        transitions::check(None, Some(step)).map_err(degraded)?;
        tracing::info!(
            update = rec.describe(),
            policies = active.source,
            "plan for {}: {}",
            rec.describe(),
            plan.explain().join("; ")
        );
        rec.policy = Some(active);
        // Last before anything is recorded: a stop requested meanwhile begins nothing.
        self.stop.checkpoint().await;
        backups::prepare(&self.root, &mut rec, &current_ign, &desired_ign).map_err(degraded)?;
        record::store(&self.root, &rec).map_err(degraded)?;
        tracing::info!(
            update = rec.describe(),
            plan = plan.to_json(),
            "Starting update from {} to {}",
            rec.current.name(),
            rec.desired.name()
        );
        let status = self.reporter.status();
        if !matches!(
            status.state,
            NodeState::Degraded | NodeState::Unreconcilable
        ) {
            self.reporter
                .state(&self.root, NodeState::Working, "")
                .await;
        }
        self.reporter.update_status(&self.root, |s| {
            s.current = Some(rec.current.name().to_string());
            s.desired = Some(rec.desired.name().to_string());
            s.needs_reboot = false;
            if let Some(st) = s.strategy.as_mut() {
                st.waiting = None;
                st.lock_held |= locked;
            }
            s.last_update = Some(LastUpdate {
                from: rec.current.name().to_string(),
                to: rec.desired.name().to_string(),
                started_ms: rec.started_ms,
                reboot: rec.reboot,
                ..LastUpdate::default()
            });
        });
        self.reporter.step(
            &self.root,
            Some(step.as_str()),
            &format!("update {}: {step}", rec.describe()),
        );
        failpoint("engine::recorded").map_err(degraded)?;
        let ctx = Ctx {
            plan,
            current_ign,
            desired_ign,
            report: report.clone(),
            started: Instant::now(),
        };
        Ok((rec, ctx))
    }

    /// An unreconcilable update: the event, and the outcome (nothing was changed).
    async fn unreconcilable(&self, plan: Plan, report: &mut UpdateReport) -> Outcome {
        let reason = plan.reason.clone().unwrap_or_default();
        self.reporter
            .event(reason::FAILED_TO_RECONCILE, &reason)
            .await;
        self.reporter
            .progress(Progress::Unreconcilable {
                from: report.from.clone(),
                to: report.to.clone(),
                error: reason.clone(),
            })
            .await;
        report.plan = Some(plan);
        Outcome::Unreconcilable(reason)
    }

    /// Reports the outcome (state, reason, last update) and returns the report.
    pub(crate) async fn finish(&self, report: UpdateReport, started_ms: u64) -> UpdateReport {
        let (result, state) = match &report.outcome {
            Outcome::Done => ("Done", None),
            Outcome::Rebooting => ("Rebooting", None),
            Outcome::NeedsReboot => ("NeedsReboot", None),
            Outcome::Unreconcilable(r) => ("Unreconcilable", Some((NodeState::Unreconcilable, r))),
            Outcome::Degraded(r) => ("Degraded", Some((NodeState::Degraded, r))),
            Outcome::Waiting { reason, recheck_in } => {
                tracing::info!(
                    from = report.from,
                    to = report.to,
                    strategy = self.strategy.name(),
                    recheck_in = %humantime::format_duration(*recheck_in),
                    "{reason}"
                );
                let status = self.strategy.status();
                self.reporter.update_status(&self.root, |s| {
                    let st = s.strategy.get_or_insert_with(StrategyStatus::default);
                    st.name = status.name;
                    st.detail = status.detail;
                    st.window = status.window;
                    st.waiting = Some(reason.clone());
                });
                return report;
            }
        };
        if let Some((state, reason)) = state {
            self.reporter.state(&self.root, state, reason).await;
        }
        // The MCD reports how its update() ended on NodeDegraded (an unreconcilable config
        // included); Updated is the daemon's, once a sync finds the node in its config.
        let error = match &report.outcome {
            Outcome::Degraded(r) | Outcome::Unreconcilable(r) => Some(Some(r.clone())),
            Outcome::Done => Some(None),
            _ => None,
        };
        if let Some(error) = error {
            self.reporter.progress(Progress::Degraded { error }).await;
        }
        let ended = now_ms();
        let ends_update = matches!(
            report.outcome,
            Outcome::Done | Outcome::Degraded(_) | Outcome::Unreconcilable(_)
        );
        self.reporter.observe(&Observation::Finished {
            from: &report.from,
            to: &report.to,
            outcome: &report.outcome,
            duration: ends_update.then(|| Duration::from_millis(ended.saturating_sub(started_ms))),
        });
        let pending = self.pending().ok().flatten();
        self.reporter.update_status(&self.root, |s| {
            s.pending_step = pending.as_ref().map(|r| r.step.as_str().to_string());
            let last = s.last_update.get_or_insert_with(LastUpdate::default);
            last.from = report.from.clone();
            last.to = report.to.clone();
            last.started_ms = started_ms;
            last.result = result.to_string();
            if ends_update {
                last.ended_ms = Some(ended);
                last.duration_ms = Some(ended.saturating_sub(started_ms));
            }
        });
        report
    }
}

/// A post-config action as the MCD logs it ("Restart crio.service").
fn describe_action(action: &machine_config::Action) -> String {
    match action.unit() {
        Some(unit) => format!("{} {unit}", action.type_name()),
        None => action.type_name().to_string(),
    }
}

/// Whether `rec` is the update to `desired` (as recorded: OS fields may have been left out).
fn same_update(rec: &UpdateRecord, desired: &MachineConfig) -> bool {
    rec.desired == *desired || rec.desired == with_os_of(desired, &rec.current)
}

/// A step interrupted by a crash: roll back.
fn interrupted(rec: &mut UpdateRecord, what: &str) -> Step {
    rec.reason = Some(format!(
        "the update to {} was interrupted while {what}; rolled back, will retry",
        rec.desired.name()
    ));
    Step::RollingBack
}

/// The config a fresh root is taken to be in: empty, except for the desired config's
/// directories and links: what Ignition would do at first boot writes them too, and the MCD's
/// rules refuse any change to them on a running node, of which there is none on a fresh one.
fn first_application_baseline(desired: &MachineConfig) -> MachineConfig {
    let mut config = Map::new();
    if let Some(cfg) = &desired.spec.config {
        // These sections hold no `source` (only a source read from a file can fail).
        if let Ok(Some(version)) = cfg.section(&["ignition", "version"]) {
            config.insert("ignition".into(), serde_json::json!({ "version": version }));
        }
        let mut storage = Map::new();
        for key in ["directories", "links"] {
            if let Ok(Some(v)) = cfg.section(&["storage", key]) {
                storage.insert(key.into(), v);
            }
        }
        if !storage.is_empty() {
            config.insert("storage".into(), Value::Object(storage));
        }
    }
    MachineConfig::new(
        EMPTY_CONFIG_NAME,
        MachineConfigSpec {
            config: (!config.is_empty()).then(|| IgnitionJson::from_value(Value::Object(config))),
            ..MachineConfigSpec::default()
        },
    )
}
