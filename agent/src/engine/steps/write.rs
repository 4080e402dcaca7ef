//! The `Writing` step: the desired config's files, units and users written over the current
//! one's (`apply`), then synced before the next step is recorded. Apart from the OS step
//! because it needs no rpm-ostree and every update runs it; the rollback (`undo`) writes
//! through the same unit enablement ([`Engine::with_units`]).

use anyhow::{Context, Result};

use super::{Ctx, applied};
use machine_config::Config;

use crate::apply::{ApplyOptions, ApplyOutcome, apply};
use crate::engine::record::UpdateRecord;
use crate::engine::{Engine, backups};
use crate::failpoints::failpoint;
use crate::units::{OfflineUnits, UnitEnablement};

impl Engine {
    pub(crate) fn with_units<'a>(
        &'a self,
        offline: &'a OfflineUnits<'a>,
    ) -> &'a dyn UnitEnablement {
        match &self.seams.units {
            Some(u) => u.as_ref(),
            None => offline,
        }
    }

    pub(super) async fn write(&self, rec: &UpdateRecord, ctx: &mut Ctx) -> Result<()> {
        self.reporter.progress(applied(&ctx.plan, false)).await;
        failpoint("engine::writing")?;
        crate::os::tuning::read(&self.root)?; // (a malformed file fails before any change)
        backups::restore_stamps(&self.root, rec)?;
        let outcome = self
            .apply_desired(rec, &ctx.current_ign, &ctx.desired_ign, rec.force)
            .await?;
        ctx.report.applied = Some(outcome);
        failpoint("engine::written")
    }

    /// Writes `desired` over `current` (files, units, users) as the update's writes do, then
    /// syncs: the next record says the writes are done, so everything they made must be on
    /// disk first, also what the agent's own fsyncs do not cover (the links systemd makes for
    /// unit enablement on a live node). `write_all`: every unit and the users rewritten.
    pub(super) async fn apply_desired(
        &self,
        rec: &UpdateRecord,
        current: &Config,
        desired: &Config,
        write_all: bool,
    ) -> Result<ApplyOutcome> {
        let options = ApplyOptions {
            field_prefix: self.opts.field_prefix,
            write_all,
            first_application: rec.first_application,
            skip_certificate_write: self.opts.skip_certificate_write,
        };
        let offline = OfflineUnits::new(&self.root);
        let outcome = apply(
            &self.root,
            current,
            desired,
            &options,
            self.with_units(&offline),
        )
        .await
        .with_context(|| format!("applying {}", rec.desired.name()))?;
        self.root.sync().context("syncing what the update wrote")?;
        Ok(outcome)
    }
}
