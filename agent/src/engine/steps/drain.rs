//! The `Draining` step: the node is cordoned and drained (with the MCD's event and the
//! MachineConfigNode's progress) before anything of the update is written. Apart because it
//! is the update's only step that waits on the cluster rather than changing the node.

use anyhow::{Context, Result};
use machine_config::mco::events::reason;
use machine_config::mco::node_conditions::Progress;

use crate::engine::Engine;
use crate::engine::record::UpdateRecord;
use crate::failpoints::failpoint;

impl Engine {
    pub(super) async fn drain(&self, rec: &UpdateRecord) -> Result<()> {
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
}
