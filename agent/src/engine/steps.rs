//! The transition function: one step of a recorded update at a time, and the loop that
//! persists the record before each step ([`Engine::drive`]). See the module docs of
//! [`crate::engine`] for what a restart does at each step.
//!
//! This file holds what every step shares: the update's context ([`Ctx`]), where a step leads
//! ([`Next`]), the loop, the dispatch from the recorded step to its work, and the small rules
//! between steps (a failure rolls back, a reboot rpm-ostree queued waits). The work of each
//! step is in a submodule of its own, named after the step, so that the loop reads in one
//! sitting and a step's work can be read without the others.

mod after_changes;
mod complete;
mod drain;
mod os_step;
mod rewrite;
mod undo;
mod write;

use std::time::Instant;

use anyhow::{Context, Result};
use machine_config::Config;
use machine_config::mco::node_conditions::Progress;
use machine_config::plan::{Plan, PolicyOptions};

use super::policy::ActivePolicy;
use super::record::{self, Step, UpdateRecord};
use super::{Engine, Outcome, UpdateReport, os, transitions};
use crate::hooks::Phase;

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
                    if let Err(e) = self.tune_kernel_args(ctx).await {
                        return fail(rec, format!("{e:#}"));
                    }
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
            Step::Verifying | Step::NotTaken if self.rewrites_after_image_mode(rec).await => {
                Next::Step(Step::RewritingFiles)
            }
            Step::Verifying | Step::NotTaken => self.verify(rec, ctx).await,
            Step::RewritingFiles => self.rewrite_after_image_mode(rec, ctx).await,
            Step::RollingBack => self.roll_back(rec, ctx).await,
            Step::BootFailed => self.roll_back_boot(rec, ctx).await,
            Step::RebootingBack if rec.boot_id != self.boot_id => self.rolled_back(rec, ctx).await,
            Step::RebootingBack => self.reboot_back(rec).await,
        }
    }

    /// Drops the record of an update at step `from`: it completed, was rolled back, or never
    /// started writing.
    fn clear_record(&self, from: Step) -> Result<()> {
        transitions::check(Some(from), None)?;
        record::clear(&self.root)
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

/// The files (and OS) step of `plan`: being applied, or `done`. The flags count what the MCD's
/// message counts (update.go `update`'s `updatesNeeded`): "OS" is an OS image, kernel type or
/// extensions change (kernel arguments alone are not), "SSH Keys" a change of the users.
fn applied(plan: &Plan, done: bool) -> Progress {
    let os = plan.os_update
        || plan.kernel_type
        || !plan.extensions.install.is_empty()
        || !plan.extensions.uninstall.is_empty();
    let files = plan.passwd;
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

#[cfg(test)]
mod tests {
    use machine_config::plan::{Plan, PolicyOptions};
    use machine_config::{MachineConfig, mco::node_conditions::Progress};
    use serde_json::{Value, json};

    fn config(spec: Value) -> MachineConfig {
        let mut spec = spec;
        let object = spec.as_object_mut().expect("a spec object");
        object
            .entry("osImageURL")
            .or_insert_with(|| json!("quay.io/os@sha256:aa"));
        let config = object
            .entry("config")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .expect("a config object");
        config.insert("ignition".into(), json!({"version": "3.2.0"}));
        MachineConfig::from_value(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {"name": "rendered-x"},
            "spec": spec,
        }))
        .expect("a valid MachineConfig")
    }

    /// What `AppliedFilesAndOS` says, one row per case of update.go `update`'s
    /// `updatesNeeded`: OS for `osUpdate || extensions || kernelType`, "SSH Keys" for `passwd`.
    #[test]
    fn applied_counts_what_the_mcd_counts() {
        let file = json!({"storage": {"files": [{"path": "/etc/f", "mode": 420, "contents": {"source": "data:,x"}}]}});
        let user = |key: &str| json!({"passwd": {"users": [{"name": "core", "sshAuthorizedKeys": [key]}]}});
        let cases = [
            ("a file", json!({}), json!({"config": file}), (false, false)),
            (
                "kernel arguments only",
                json!({}),
                json!({"kernelArguments": ["nosmt"]}),
                (false, false),
            ),
            (
                "the OS image",
                json!({}),
                json!({"osImageURL": "quay.io/os@sha256:bb"}),
                (true, false),
            ),
            (
                "the kernel type",
                json!({}),
                json!({"kernelType": "realtime"}),
                (true, false),
            ),
            (
                "an extension",
                json!({}),
                json!({"extensions": ["usbguard"]}),
                (true, false),
            ),
            (
                "an SSH key",
                json!({"config": user("ssh-ed25519 AAAA a")}),
                json!({"config": user("ssh-ed25519 BBBB b")}),
                (false, true),
            ),
        ];
        for (what, old, new, (os, files)) in cases {
            let plan = Plan::new(&config(old), &config(new), &PolicyOptions::default())
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(
                super::applied(&plan, false),
                Progress::ApplyingFilesAndOs { os, files },
                "{what}"
            );
            assert_eq!(
                super::applied(&plan, true),
                Progress::AppliedFilesAndOs { os, files },
                "{what}"
            );
        }
    }
}
