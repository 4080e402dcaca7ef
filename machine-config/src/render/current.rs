//! The render controller's check of a newly rendered config against the pool's current one
//! (`generateAndValidateRenderedMachineConfig`): a change nodes cannot apply in place is refused,
//! naming the source MachineConfig that brings it.
//!
//! When the full check fails, every source config is checked alone against the current rendered
//! config; the first whose reason appears in the full message is named:
//! `reconciliation failed between current config "<current>" and base config "<source>": <reason>`.
//! When none matches: `render reconciliation error: <full>; component errors: <first component error>`.

use crate::machineconfig::MachineConfig;
use crate::machineconfiguration::IrreconcilableValidationOverrides;
use crate::reconcile::check_configs;

/// `Err` with the MCO's message when `generated` cannot replace `current` in place.
pub fn check_against_current(
    current: &MachineConfig,
    generated: &MachineConfig,
    sources: &[&MachineConfig],
    overrides: &IrreconcilableValidationOverrides,
) -> Result<(), String> {
    let Err(full) = component_check(current, generated, overrides) else {
        return Ok(());
    };
    for source in sources {
        let Err(single) = component_check(current, source, overrides) else {
            continue;
        };
        if let Some((_, reason)) = single.split_once(": ")
            && full.contains(reason)
        {
            return Err(format!(
                "reconciliation failed between current config {:?} and base config {:?}: {reason}",
                current.name(),
                source.name()
            ));
        }
    }
    let components = sources
        .iter()
        .find_map(|s| component_check(current, s, overrides).err())
        .unwrap_or_else(|| "<nil>".to_string());
    Err(format!(
        "render reconciliation error: {full}; component errors: {components}"
    ))
}

/// The MCO's `isReconcilable` for one config against the current rendered one.
fn component_check(
    current: &MachineConfig,
    new: &MachineConfig,
    overrides: &IrreconcilableValidationOverrides,
) -> Result<(), String> {
    let old_ign = current.ignition().map_err(|e| {
        format!(
            "parsing old Ignition config from machineconfig {:?} failed: {e}",
            current.name()
        )
    })?;
    let new_ign = new.ignition().map_err(|e| {
        format!(
            "parsing new Ignition config from machineconfig {:?} failed: {e}",
            new.name()
        )
    })?;
    check_configs(
        &old_ign,
        &new_ign,
        current.spec.fips,
        new.spec.fips,
        overrides,
    )
    .map_err(|reason| {
        format!(
            "new machineconfig {:?} is not reconcilable against {:?}: {reason}",
            current.name(),
            new.name()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{RenderOptions, render_pool};
    use crate::{MachineConfigPool, render};
    use serde_json::json;

    fn mc(name: &str, config: serde_json::Value) -> MachineConfig {
        MachineConfig::from_value(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
            "metadata": {"name": name, "labels": {render::ROLE_LABEL: "worker"}},
            "spec": {"config": config}
        }))
        .unwrap()
    }

    #[test]
    fn names_the_source_that_brings_the_unreconcilable_change() {
        let pool = MachineConfigPool::from_value(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
            "metadata": {"name": "worker"},
            "spec": {"machineConfigSelector": {"matchLabels": {render::ROLE_LABEL: "worker"}}}
        }))
        .unwrap();
        let base = mc(
            "00-base",
            json!({"ignition": {"version": "3.2.0"},
            "storage": {"files": [{"path": "/etc/a", "contents": {"source": "data:,a"}}]}}),
        );
        let options = RenderOptions::default();
        let current = render_pool(&pool, std::slice::from_ref(&base), &options)
            .unwrap()
            .config;
        let overrides = IrreconcilableValidationOverrides::default();

        // a file change is fine
        let files = mc(
            "10-files",
            json!({"ignition": {"version": "3.2.0"},
            "storage": {"files": [{"path": "/etc/b", "contents": {"source": "data:,b"}}]}}),
        );
        let fleet = vec![base.clone(), files.clone()];
        let next = render_pool(&pool, &fleet, &options).unwrap();
        let sources: Vec<&MachineConfig> = fleet.iter().collect();
        assert_eq!(
            check_against_current(&current, &next.config, &sources, &overrides),
            Ok(())
        );

        // a disk change is not, and the message names the config that adds it
        let disks = mc(
            "50-disks",
            json!({"ignition": {"version": "3.2.0"},
            "storage": {"disks": [{"device": "/dev/sdb", "wipeTable": true}]}}),
        );
        let fleet = vec![base.clone(), files, disks];
        let next = render_pool(&pool, &fleet, &options).unwrap();
        let sources: Vec<&MachineConfig> = fleet.iter().collect();
        let err = check_against_current(&current, &next.config, &sources, &overrides).unwrap_err();
        assert_eq!(
            err,
            format!(
                "reconciliation failed between current config {:?} and base config \"50-disks\": ignition disks section contains changes",
                current.name()
            )
        );
    }
}
