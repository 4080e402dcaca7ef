//! The `RewritingFiles` step of an update that leaves image mode. The built image carried the
//! config's files in its `/usr/etc`, so in `/etc` they were unmodified, and ostree's `/etc`
//! merge into the rendered config's base image drops them at the reboot (the MCD's
//! `finalizeRevertToNonLayering` and its revert unit exist for this). After the reboot into
//! the base image, before verifying, the desired config's files, units and users are written
//! again as the `Writing` step writes them, and one more reboot is requested so that every
//! service starts with its files; the record says so, so a restart never asks twice.

use machine_config::Config;
use machine_config::mco::image::layered_image;

use super::{Ctx, Next};
use crate::engine::record::{Step, UpdateRecord};
use crate::engine::{Engine, Outcome, os};
use crate::failpoints::failpoint;

impl Engine {
    /// Whether the update's files are to be written again before it is verified: it leaves
    /// image mode, has not written them again yet (once per update: never a reboot loop), and
    /// the node runs the desired base image (otherwise the verification says what did not
    /// take).
    pub(super) async fn rewrites_after_image_mode(&self, rec: &UpdateRecord) -> bool {
        if rec.rewrote_after_image_mode
            || !os::leaves_image_mode(&rec.current, &rec.desired)
            || !self.checks_os()
        {
            return false;
        }
        match &self.seams.os {
            Some(updater) => os::runs(updater.as_ref(), &rec.desired).await,
            None => false,
        }
    }

    /// [`Step::RewritingFiles`]: every file, unit and user of the desired config written again
    /// (over an empty config, every unit rewritten), synced, then the second reboot.
    pub(super) async fn rewrite_after_image_mode(
        &self,
        rec: &mut UpdateRecord,
        ctx: &mut Ctx,
    ) -> Next {
        tracing::info!(
            update = rec.describe(),
            left = layered_image(&rec.current).unwrap_or_default(),
            "left image mode: writing the desired config's files, units and users again (ostree's /etc merge into the base image dropped those the built image carried), then rebooting once more"
        );
        let written = self
            .apply_desired(rec, &Config::empty(), &ctx.desired_ign, true)
            .await;
        match written.and_then(|outcome| failpoint("engine::rewritten").map(|()| outcome)) {
            Ok(outcome) => {
                ctx.report.applied = Some(outcome);
                rec.rewrote_after_image_mode = true;
                Next::Step(Step::RebootRequested)
            }
            Err(e) => {
                let reason = format!(
                    "update to {} did not take after the reboot: writing again the files leaving image mode dropped: {e:#}",
                    rec.desired.name()
                );
                rec.reason = Some(reason.clone());
                Next::Park(Step::NotTaken, Outcome::Degraded(reason))
            }
        }
    }
}
