//! How an update ends well: the `Verifying` step after its reboot (the booted deployment,
//! kernel arguments, files and extensions checked, the health checks, the post-boot hooks),
//! and the commit every completed update ends with ([`Engine::complete`]: `currentconfig`,
//! the record cleared, the uncordon, Done and the status file). Apart because it is mostly
//! what the node reports, and the only place an update is committed.

use machine_config::mco::events::reason;
use machine_config::mco::image::layered_image;
use machine_config::mco::node_conditions::Progress;

use super::{Ctx, Next};
use crate::engine::record::{self, Step, UpdateRecord};
use crate::engine::report::LastUpdate;
use crate::engine::{Engine, Outcome};
use crate::failpoints::failpoint;
use crate::hooks::Phase;
use crate::input;

impl Engine {
    pub(super) async fn verify(&self, rec: &mut UpdateRecord, ctx: &mut Ctx) -> Next {
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
        if let Err(e) = crate::engine::rollback_records::record_previous(&self.root, rec) {
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
}
