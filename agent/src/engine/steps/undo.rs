//! The `RollingBack` step: staged OS changes removed and the current config's files, units
//! and users put back, then the record cleared and the node Degraded with why. Apart because
//! it undoes what the writing and OS steps did; the rollback of a bad boot
//! (`engine::rollback`) reuses its file restore ([`Engine::restore_current_files`]).

use anyhow::{Context, Result};

use super::{Ctx, Next, reboot_under_way};
use crate::apply::{ApplyOptions, apply};
use crate::engine::record::{Step, UpdateRecord};
use crate::engine::{Engine, Outcome, backups, os};
use crate::failpoints::failpoint;
use crate::units::OfflineUnits;

impl Engine {
    pub(super) async fn roll_back(&self, rec: &UpdateRecord, ctx: &mut Ctx) -> Next {
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
    pub(in crate::engine) async fn restore_current_files(
        &self,
        rec: &UpdateRecord,
        ctx: &Ctx,
    ) -> Result<()> {
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
