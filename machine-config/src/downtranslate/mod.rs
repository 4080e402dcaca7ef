//! Down-translation of the internal form (Ignition spec 3.5) to the spec a client asked for.
//!
//! The config server renders one config per pool in the internal form and serves it in any spec
//! from 2.2.0 and 3.0.0 to 3.5.0, as the machine-config-server does. A config that uses something
//! the older spec cannot express is refused with an error naming every offending JSON path, with
//! two deliberate leniencies that match Ignition's own down-converters: a newer field whose value
//! is its default (`shouldExist: true`, `resize: false`, an empty list...) is dropped silently,
//! because dropping it does not change what Ignition does.
//!
//! Kernel arguments are special: below 3.3 the MCS moves Ignition's `kernelArguments.shouldExist`
//! into the MachineConfig's `spec.kernelArguments` and refuses `shouldNotExist`; see
//! [`migrate_kernel_arguments`].
//!
//! The functions work on JSON values (`serde_json::Value`) so that they depend only on Ignition's
//! wire format, not on how the crate's Rust types model it.

mod gates;
mod v2_2;

use serde_json::Value;

pub use crate::ignition::SpecVersion;

/// The newest spec, the internal form.
pub const NEWEST: SpecVersion = SpecVersion::V3_5;

/// The 3.x minor whose field set a target's checks use (2.2 is checked as 3.0, then more).
fn gate_minor(target: SpecVersion) -> u8 {
    match target {
        SpecVersion::V2_2 => 0,
        other => u8::try_from(other.major_minor().1).unwrap_or(u8::MAX),
    }
}

/// Why a config cannot be served in the requested spec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DownTranslateError {
    /// The config uses fields or values the target spec cannot express; one entry per use.
    #[error("cannot translate the config to Ignition spec {target}: {}", .problems.join("; "))]
    Unsupported {
        /// The requested spec.
        target: SpecVersion,
        /// `<JSON path>: <why>`, e.g. `$.storage.luks.0.discard: not supported before spec 3.4.0`.
        problems: Vec<String>,
    },
    /// Ignition `kernelArguments.shouldNotExist` has no MachineConfig equivalent below 3.3.
    #[error(
        "can't serve version {target} with ignition kernelArguments.shouldNotExist populated ({args:?})"
    )]
    KernelArgumentsShouldNotExist {
        /// The requested spec.
        target: SpecVersion,
        /// The arguments that should not exist.
        args: Vec<String>,
    },
    /// The input is not a spec 3.x config object.
    #[error("cannot translate the config to Ignition spec {target}: {reason}")]
    Malformed {
        /// The requested spec.
        target: SpecVersion,
        /// What is wrong with the input.
        reason: String,
    },
}

/// Translates an internal-form (3.5) Ignition config, as JSON, to `target`.
///
/// Returns the config for `target` with `ignition.version` set to its version. The input may
/// carry any 3.x version string; only its fields matter.
pub fn translate(config: &Value, target: SpecVersion) -> Result<Value, DownTranslateError> {
    translate_owned(config.clone(), target)
}

/// [`translate`], consuming the config: for a config whose file contents run to megabytes, one
/// copy of them less (the config server builds every body this way).
pub fn translate_owned(config: Value, target: SpecVersion) -> Result<Value, DownTranslateError> {
    let Value::Object(_) = config else {
        return Err(DownTranslateError::Malformed {
            target,
            reason: "the config is not a JSON object".to_string(),
        });
    };
    let mut out = config;
    let mut problems = Vec::new();
    gates::strip_newer(&mut out, gate_minor(target), &mut problems);
    if target == SpecVersion::V2_2 {
        v2_2::check(&out, &mut problems);
    }
    if !problems.is_empty() {
        return Err(DownTranslateError::Unsupported { target, problems });
    }
    if target == SpecVersion::V2_2 {
        return v2_2::convert(&out)
            .map_err(|reason| DownTranslateError::Malformed { target, reason });
    }
    set_version(&mut out, &target.to_string());
    Ok(out)
}

/// Moves Ignition `kernelArguments.shouldExist` into the MachineConfig's kernel arguments when
/// `target` predates spec 3.3, as the MCS does, and removes the section from `config`.
///
/// Fails when `kernelArguments.shouldNotExist` is populated: a MachineConfig cannot express it.
/// Does nothing for 3.3 and newer.
pub fn migrate_kernel_arguments(
    config: &mut Value,
    mc_kernel_arguments: &mut Vec<String>,
    target: SpecVersion,
) -> Result<(), DownTranslateError> {
    if target >= SpecVersion::V3_3 {
        return Ok(());
    }
    let Some(section) = config
        .as_object_mut()
        .and_then(|o| o.remove("kernelArguments"))
    else {
        return Ok(());
    };
    let strings = |key: &str| -> Vec<String> {
        section
            .get(key)
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let should_not_exist = strings("shouldNotExist");
    if !should_not_exist.is_empty() {
        return Err(DownTranslateError::KernelArgumentsShouldNotExist {
            target,
            args: should_not_exist,
        });
    }
    mc_kernel_arguments.extend(strings("shouldExist"));
    Ok(())
}

/// An empty Ignition config of `target` (what the MCS embeds in the encapsulated MachineConfig).
pub fn empty_config(target: SpecVersion) -> Value {
    serde_json::json!({ "ignition": { "version": target.to_string() } })
}

fn set_version(config: &mut Value, version: &str) {
    if let Some(obj) = config.as_object_mut() {
        let ignition = obj
            .entry("ignition")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(ignition) = ignition.as_object_mut() {
            ignition.insert("version".to_string(), Value::String(version.to_string()));
        }
    }
}

#[cfg(test)]
mod tests;
