//! Ignition configs of any spec (2.2, 3.0–3.5), bare or inside a MachineConfig, YAML or JSON:
//! parsing with up-translation to the internal 3.5 form, validation, the JSON round trip the
//! agent's `currentconfig` relies on, and down-translation to every spec the config server
//! serves, whose output must parse back as that spec and mean the same config.
#![no_main]

use libfuzzer_sys::fuzz_target;
use machine_config::document::parse_value;
use machine_config::downtranslate::{self, DownTranslateError};
use machine_config::{Config, MachineConfig, ParsedConfig, SpecVersion};

fuzz_target!(|data: &[u8]| {
    // A MachineConfig is told from a bare Ignition config as the agent's input does it.
    let Ok(value) = parse_value(data) else { return };
    let is_mc = value.get("kind").is_some() || value.get("apiVersion").is_some();
    let parsed = if is_mc {
        match MachineConfig::from_value_parsed(value) {
            Ok((_, parsed)) => parsed,
            Err(_) => return,
        }
    } else {
        match ParsedConfig::from_value(value) {
            Ok(parsed) => parsed,
            Err(_) => return,
        }
    };
    let config = parsed.config;
    let _ = config.validate();

    // What the agent records is what it reads back.
    let json = config.to_json();
    let reparsed = Config::parse(json.as_bytes())
        .unwrap_or_else(|e| panic!("the internal form does not parse back: {e}\n{json}"));
    assert_eq!(reparsed, config, "the JSON round trip changed the config");

    let value: serde_json::Value = serde_json::from_str(&json).expect("our own JSON");
    for spec in SpecVersion::ALL {
        match downtranslate::translate(&value, spec) {
            Ok(served) => {
                let back = match ParsedConfig::from_value(served.clone()) {
                    Ok(back) => back,
                    // Reading 2.2 back is the MCO's 2→3 translation, stricter than the Ignition
                    // 0.x a 2.2 config is served to (only "root" filesystems, only core): a
                    // refusal there is not a wrong translation, but a reading must agree.
                    Err(_) if spec == SpecVersion::V2_2 => continue,
                    Err(e) => panic!("the config served as {spec} does not parse: {e}\n{served}"),
                };
                assert_eq!(back.source_version, spec, "served with the wrong version");
                if spec == SpecVersion::V2_2 {
                    // 2.2 spells out what 3.x leaves unset (`overwrite`, an empty `source`):
                    // compare what a node ends up with.
                    assert_eq!(
                        on_disk(&back.config),
                        on_disk(&config),
                        "the config served as {spec} writes something else:\n{served}"
                    );
                } else {
                    assert_eq!(
                        back.config, config,
                        "the config served as {spec} means something else:\n{served}"
                    );
                }
            }
            Err(DownTranslateError::Unsupported { problems, .. }) => {
                assert!(!problems.is_empty(), "refused for {spec} without a reason");
            }
            Err(e) => panic!("down-translation to {spec} of a parsed config failed: {e}"),
        }
    }
});

/// What a config writes: each file's path, overwrite flag (unset is false), mode and decoded
/// contents; each unit's name, contents and drop-ins.
#[allow(clippy::type_complexity)]
fn on_disk(
    config: &Config,
) -> (
    Vec<(String, bool, Option<i64>, Option<Vec<u8>>)>,
    Vec<String>,
) {
    let files = config
        .storage
        .files
        .iter()
        .map(|f| {
            let contents = f.decoded_contents().ok();
            (
                f.path.clone(),
                f.overwrite.unwrap_or(false),
                f.mode,
                contents,
            )
        })
        .collect();
    let units = config
        .systemd
        .units
        .iter()
        .map(|u| format!("{u:?}"))
        .collect();
    (files, units)
}
