//! The apply step's [`UnitEnablement`] on a live host: the same enable/disable/preset, done by
//! systemd's manager instead of by links written under a root.

use anyhow::{Context, Result};
use async_trait::async_trait;

use super::{DbusSystemd, Systemd};
use crate::units::UnitEnablement;

async fn enable(systemd: &dyn Systemd, units: &[String]) -> Result<()> {
    let units: Vec<&str> = units.iter().map(String::as_str).collect();
    systemd
        .enable_unit_files(&units)
        .await
        .with_context(|| format!("enabling {}", units.join(" ")))?;
    Ok(())
}

async fn disable(systemd: &dyn Systemd, units: &[String]) -> Result<()> {
    let units: Vec<&str> = units.iter().map(String::as_str).collect();
    systemd
        .disable_unit_files(&units)
        .await
        .with_context(|| format!("disabling {}", units.join(" ")))?;
    Ok(())
}

async fn preset(systemd: &dyn Systemd, units: &[String]) -> Result<()> {
    let units: Vec<&str> = units.iter().map(String::as_str).collect();
    systemd
        .preset_unit_files(&units)
        .await
        .with_context(|| format!("presetting {}", units.join(" ")))?;
    Ok(())
}

#[async_trait]
impl UnitEnablement for DbusSystemd {
    async fn enable(&self, units: &[String]) -> Result<()> {
        enable(self, units).await
    }

    async fn disable(&self, units: &[String]) -> Result<()> {
        disable(self, units).await
    }

    async fn preset(&self, units: &[String]) -> Result<()> {
        preset(self, units).await
    }
}

#[cfg(any(test, feature = "fakes"))]
#[async_trait]
impl UnitEnablement for super::FakeSystemd {
    async fn enable(&self, units: &[String]) -> Result<()> {
        enable(self, units).await
    }

    async fn disable(&self, units: &[String]) -> Result<()> {
        disable(self, units).await
    }

    async fn preset(&self, units: &[String]) -> Result<()> {
        preset(self, units).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::systemd::{FakeSystemd, SystemdCall};
    use crate::units::EnablementPlan;

    #[tokio::test]
    async fn an_enablement_plan_runs_through_systemd() {
        let systemd = FakeSystemd::new()
            .with_unit_file("old.service", "enabled")
            .with_unit_file("new.service", "disabled")
            .with_unit_file("vendor.service", "enabled")
            .with_preset("vendor.service", "disabled");
        let plan = EnablementPlan {
            disable: vec!["old.service".into()],
            enable: vec!["new.service".into()],
            preset: vec!["vendor.service".into()],
        };
        plan.run(&systemd).await.expect("plan");
        assert_eq!(
            systemd.calls(),
            vec![
                SystemdCall::Disable(vec!["old.service".into()]),
                SystemdCall::Enable(vec!["new.service".into()]),
                SystemdCall::Preset(vec!["vendor.service".into()]),
            ]
        );
        for (unit, want) in [
            ("old.service", "disabled"),
            ("new.service", "enabled"),
            ("vendor.service", "disabled"),
        ] {
            assert_eq!(
                systemd.unit_file_state(unit).await.expect("state"),
                want,
                "{unit}"
            );
        }
    }

    #[tokio::test]
    async fn enable_failures_name_the_units() {
        let systemd = FakeSystemd::new();
        let err = UnitEnablement::enable(&systemd, &["gone.service".into()])
            .await
            .expect_err("missing unit");
        let msg = format!("{err:#}");
        assert!(msg.starts_with("enabling gone.service: "), "{msg}");
        assert!(
            msg.contains("Unit file gone.service does not exist."),
            "{msg}"
        );
    }
}
