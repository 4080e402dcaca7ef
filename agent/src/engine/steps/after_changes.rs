//! The step after the changes: the `PostActions` step of a rebootless update (the plan's
//! post-config actions: reloads, restarts, nothing) or the `RebootRequested` step of one that
//! needs a reboot (the hooks before it, the node's queued writes flushed, the reboot asked
//! for, or no reboot when none can be had). Together because the plan picks one of the two
//! after the same changes, and both end what runs before the node takes the update up.

use anyhow::Result;
use machine_config::mco::events::reason;
use machine_config::mco::node_conditions::Progress;

use super::{Ctx, Next, fail, reboot_under_way};
use crate::engine::record::{self, UpdateRecord};
use crate::engine::{Engine, Outcome, post_actions};
use crate::failpoints::failpoint;
use crate::hooks::Phase;

/// How long a reboot waits for the node's queued writes (annotations, events, the
/// MachineConfigNode) to land: the API server may be down, and the reboot must not wait on it.
const REBOOT_FLUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

impl Engine {
    pub(super) async fn post_actions(&self, rec: &UpdateRecord, ctx: &mut Ctx) -> Result<()> {
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

    pub(super) async fn request_reboot(&self, rec: &mut UpdateRecord, ctx: &Ctx) -> Next {
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
}
