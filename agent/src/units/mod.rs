//! Unit enablement: what applying a config asks of systemd about unit files, behind a small
//! trait with an offline implementation (links in a root directory, for `--root` and tests) and a
//! live one (systemd over D-Bus, in `host`).

pub mod install;
pub mod offline;
pub mod preset;

use anyhow::Result;
use async_trait::async_trait;

pub use offline::{OfflineUnits, SYSTEM_UNIT_DIR, UnitFileState};
pub use preset::PresetPolicy;

/// Enable/disable/preset of unit files (`systemctl enable|disable|preset UNIT...`).
/// None of these reloads systemd or starts anything.
#[async_trait]
pub trait UnitEnablement: Send + Sync {
    /// Enables the units (creates their `[Install]` links).
    async fn enable(&self, units: &[String]) -> Result<()>;
    /// Disables the units (removes their `[Install]` links).
    async fn disable(&self, units: &[String]) -> Result<()>;
    /// Enables or disables each unit as the preset policy says.
    async fn preset(&self, units: &[String]) -> Result<()>;
}

/// The unit-file changes an apply asks for, in the order they must run: `disable` (which also
/// holds enabled units being rewritten, so stale links from an old `[Install]` go away), then
/// `enable`, then `preset` (units whose `enabled` is unset).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct EnablementPlan {
    /// Units to disable.
    pub disable: Vec<String>,
    /// Units to enable.
    pub enable: Vec<String>,
    /// Units to preset.
    pub preset: Vec<String>,
}

impl EnablementPlan {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.disable.is_empty() && self.enable.is_empty() && self.preset.is_empty()
    }

    /// Runs the plan. Preset failures are logged and ignored, as the MCD ignores
    /// `systemctl preset` errors; enable/disable failures are errors.
    pub async fn run(&self, systemd: &dyn UnitEnablement) -> Result<()> {
        if !self.disable.is_empty() {
            systemd.disable(&self.disable).await?;
        }
        if !self.enable.is_empty() {
            systemd.enable(&self.enable).await?;
        }
        if !self.preset.is_empty()
            && let Err(e) = systemd.preset(&self.preset).await
        {
            tracing::warn!(error = %format!("{e:#}"), "preset of units failed; ignored");
        }
        Ok(())
    }
}

#[async_trait]
impl UnitEnablement for OfflineUnits<'_> {
    async fn enable(&self, units: &[String]) -> Result<()> {
        units.iter().try_for_each(|u| self.enable_one(u))
    }

    async fn disable(&self, units: &[String]) -> Result<()> {
        units.iter().try_for_each(|u| self.disable_one(u))
    }

    async fn preset(&self, units: &[String]) -> Result<()> {
        let policy = PresetPolicy::load(self.root())?;
        units.iter().try_for_each(|u| self.preset_one(u, &policy))
    }
}

#[cfg(test)]
mod tests;
