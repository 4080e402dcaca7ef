//! Writing units and drop-ins, masking, and releasing units a config no longer has.

use std::path::Path;

use anyhow::{Context, Result};
use machine_config::Unit;

use super::ApplyOutcome;
use super::files;
use super::prepare::{dropin_path, unit_path};
use crate::rootfs::{Owner, Root};
use crate::units::{EnablementPlan, OfflineUnits, UnitEnablement, UnitFileState};

const DEV_NULL: &str = "/dev/null";

/// Writes `units` (drop-ins first, then the mask or the unit file) and fills `plan` with their
/// enablement: `enabled: true/false` for units that have contents or a unit file, preset for
/// the others. A unit being rewritten while enabled is disabled first (its `[Install]` may have
/// changed) and enabled again if the config says so.
pub(crate) fn write_units(
    root: &Root,
    units: &[&Unit],
    plan: &mut EnablementPlan,
    out: &mut ApplyOutcome,
) -> Result<()> {
    let offline = OfflineUnits::new(root);
    for unit in units {
        for dropin in &unit.dropins {
            let path = dropin_path(&unit.name, &dropin.name);
            match dropin.contents.as_deref().filter(|c| !c.is_empty()) {
                Some(contents) => {
                    files::write_unit_file(root, Path::new(&path), contents.as_bytes(), out)?
                }
                None => {
                    if root.remove_file(Path::new(&path))? {
                        tracing::info!(path, "removed empty drop-in");
                    }
                }
            }
        }
        let path = unit_path(&unit.name);
        let path = Path::new(&path);
        let contents = unit.contents.as_deref().filter(|c| !c.is_empty());
        if unit.is_masked() {
            super::backup::record_original(root, path)?;
            if root.read_link(path).ok().flatten().as_deref() != Some(Path::new(DEV_NULL)) {
                root.symlink(path, Path::new(DEV_NULL), Owner::ROOT)?;
                tracing::info!(unit = %unit.name, "masked unit");
                out.units_written.push(path.display().to_string());
            }
        } else if let Some(contents) = contents {
            if offline.state(&unit.name)? == UnitFileState::Enabled {
                push_once(&mut plan.disable, &unit.name);
            }
            files::write_unit_file(root, path, contents.as_bytes(), out)?;
        } else if unit.mask == Some(false)
            && root.read_link(path).ok().flatten().as_deref() == Some(Path::new(DEV_NULL))
        {
            root.remove_file(path)?;
            tracing::info!(unit = %unit.name, "unmasked unit");
            out.units_written.push(path.display().to_string());
        }
        match unit.enabled {
            _ if unit.is_masked() => {
                if unit.enabled.is_some() {
                    tracing::warn!(unit = %unit.name, "unit is masked; its enabled setting is ignored");
                }
            }
            Some(enabled) => {
                if contents.is_some() || offline.state(&unit.name)? != UnitFileState::NotFound {
                    if enabled {
                        plan.enable.push(unit.name.clone());
                    } else {
                        // Already there when the unit was enabled and is being rewritten.
                        push_once(&mut plan.disable, &unit.name);
                    }
                } else {
                    tracing::info!(unit = %unit.name, "unit has no contents and no unit file; enablement skipped");
                }
            }
            None => plan.preset.push(unit.name.clone()),
        }
    }
    Ok(())
}

fn push_once(list: &mut Vec<String>, unit: &str) {
    if !list.iter().any(|u| u == unit) {
        list.push(unit.to_string());
    }
}

/// Releases units the desired config dropped: their links are removed, the unit files (or masks)
/// the config wrote are restored from their originals or deleted, and whatever unit file remains
/// goes back to its preset.
pub(crate) async fn release_units(
    root: &Root,
    stale: &[&Unit],
    systemd: &dyn UnitEnablement,
    out: &mut ApplyOutcome,
) -> Result<()> {
    if stale.is_empty() {
        return Ok(());
    }
    let offline = OfflineUnits::new(root);
    let mut with_file = Vec::new();
    for unit in stale {
        if !matches!(
            offline.state(&unit.name)?,
            UnitFileState::NotFound | UnitFileState::Masked | UnitFileState::MaskedRuntime
        ) {
            with_file.push(unit.name.clone());
        }
    }
    if !with_file.is_empty() {
        systemd
            .disable(&with_file)
            .await
            .with_context(|| format!("disabling removed units {}", with_file.join(" ")))?;
    }
    for unit in stale {
        // Only paths the config wrote are released: an enable-only unit's file is not ours.
        if unit.is_masked() || unit.contents.as_deref().is_some_and(|c| !c.is_empty()) {
            files::release_unit_file(root, Path::new(&unit_path(&unit.name)), out)?;
        }
        out.units_removed.push(unit.name.clone());
    }
    let mut remaining = Vec::new();
    for unit in stale {
        if !matches!(
            offline.state(&unit.name)?,
            UnitFileState::NotFound | UnitFileState::Masked | UnitFileState::MaskedRuntime
        ) {
            remaining.push(unit.name.clone());
        }
    }
    let preset = EnablementPlan {
        preset: remaining,
        ..EnablementPlan::default()
    };
    preset.run(systemd).await
}
