//! Unit files and presets as offline enablement reads them: a unit's `[Install]` section, unit
//! names (templates, instances) and the preset policy with its shell globs. The input is three
//! NUL-separated parts: a unit file, a preset file, and unit names (one per line); every name,
//! and every unit the `[Install]` section names, is looked up in the policy.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mco_agent::units::install::{InstallInfo, UnitName};
use mco_agent::units::preset::{PresetPolicy, glob_match};
use mco_fuzz::text_parts;

fuzz_target!(|data: &[u8]| {
    let Some(parts) = text_parts(data, 3) else {
        return;
    };
    let info = InstallInfo::parse(parts[0]);
    let policy = PresetPolicy::from_text(parts[1]);
    let named = info
        .wanted_by
        .iter()
        .chain(&info.required_by)
        .chain(&info.upheld_by)
        .chain(&info.alias)
        .chain(&info.also)
        .map(String::as_str);
    for name in parts[2].lines().chain(named) {
        let _ = policy.action_for(name);
        assert!(glob_match(name.as_bytes(), name.as_bytes()) || has_glob_syntax(name));
        if let Some(unit) = UnitName::parse(name) {
            let _ = unit.template();
            if unit.is_template()
                && let Some(instance) = &info.default_instance
            {
                let _ = UnitName::parse(&unit.with_instance(instance));
            }
        }
    }
});

/// A name without glob characters matches itself as a pattern.
fn has_glob_syntax(name: &str) -> bool {
    name.contains(['*', '?', '['])
}
