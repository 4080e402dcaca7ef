//! Ignition configs: parsing of spec 2.2 and 3.0–3.5 into one internal (3.5) form, validation.

pub mod hash;
pub(crate) mod schema;
mod schema_v2;
mod schema_v3;
mod types;
mod v2;
pub(crate) mod validate;

use std::fmt;

use serde::de::DeserializeOwned;
use serde_json::Value;

pub use types::*;
pub use validate::go_octal;
pub use validate::{deferring_contents_base64, validate};

use crate::error::{Issue, ParseError, describe_value, quoted, serde_issue};
use crate::source::SourceTable;

/// A spec version this crate reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SpecVersion {
    V2_2,
    V3_0,
    V3_1,
    V3_2,
    V3_3,
    V3_4,
    V3_5,
}

impl SpecVersion {
    /// Every version, oldest first.
    pub const ALL: [SpecVersion; 7] = [
        SpecVersion::V2_2,
        SpecVersion::V3_0,
        SpecVersion::V3_1,
        SpecVersion::V3_2,
        SpecVersion::V3_3,
        SpecVersion::V3_4,
        SpecVersion::V3_5,
    ];

    /// `(major, minor)`.
    pub fn major_minor(self) -> (u64, u64) {
        match self {
            SpecVersion::V2_2 => (2, 2),
            SpecVersion::V3_0 => (3, 0),
            SpecVersion::V3_1 => (3, 1),
            SpecVersion::V3_2 => (3, 2),
            SpecVersion::V3_3 => (3, 3),
            SpecVersion::V3_4 => (3, 4),
            SpecVersion::V3_5 => (3, 5),
        }
    }

    /// Looks up `(major, minor)`.
    pub fn from_major_minor(major: u64, minor: u64) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|v| v.major_minor() == (major, minor))
    }

    /// Reads an `ignition.version` string (`3.2.0`). Pre-releases such as `3.6.0-experimental`
    /// and unknown minors are refused.
    pub fn parse(version: &str) -> Result<Self, String> {
        let v = semver::Version::parse(version).map_err(|_| {
            format!(
                "invalid config version (couldn't parse) {}",
                quoted(version)
            )
        })?;
        match Self::from_major_minor(v.major, v.minor) {
            Some(s) if v.pre.is_empty() => Ok(s),
            _ => Err(format!(
                "unsupported config version {}; supported: 2.2.0, 3.0.0, 3.1.0, 3.2.0, 3.3.0, 3.4.0, 3.5.0",
                quoted(version)
            )),
        }
    }
}

impl fmt::Display for SpecVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (major, minor) = self.major_minor();
        write!(f, "{major}.{minor}.0")
    }
}

/// A parsed config with what parsing learned about it.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedConfig {
    /// The config in the internal form (`ignition.version` is `3.5.0`).
    pub config: Config,
    /// The version the document declared.
    pub source_version: SpecVersion,
    /// Non-fatal findings, e.g. unknown keys (`$.storage.foo: unused key foo`).
    pub warnings: Vec<Issue>,
}

impl Config {
    /// Parses bare Ignition JSON of any supported spec into the internal form and validates it.
    pub fn parse(bytes: &[u8]) -> Result<Config, ParseError> {
        ParsedConfig::parse(bytes).map(|p| p.config)
    }

    /// Like [`Config::parse`], from an already-decoded JSON value.
    pub fn from_value(value: Value) -> Result<Config, ParseError> {
        ParsedConfig::from_value(value).map(|p| p.config)
    }

    /// Validates the config (Ignition's rules plus the MCO's file-mode limit and node-side
    /// source rules), collecting every problem.
    pub fn validate(&self) -> Result<(), ParseError> {
        validate(self).map_err(ParseError::Invalid)
    }

    /// Serializes to JSON (spec 3.5).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| unreachable_json(&e))
    }
}

/// Serializing our own plain data types to JSON cannot fail (string keys, no custom
/// serializers); this keeps that assumption in one place.
pub(crate) fn unreachable_json(e: &serde_json::Error) -> String {
    panic!("serializing plain data to JSON failed: {e}")
}

impl ParsedConfig {
    /// Parses bare Ignition JSON.
    pub fn parse(bytes: &[u8]) -> Result<ParsedConfig, ParseError> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| ParseError::Syntax {
            format: "JSON",
            message: e.to_string(),
        })?;
        Self::from_value(value)
    }

    /// Parses a config already decoded to a JSON value (e.g. `spec.config` of a MachineConfig).
    pub fn from_value(value: Value) -> Result<ParsedConfig, ParseError> {
        Self::parse_value(value, None)
    }

    /// Parses a value whose `source` strings are indexes into `sources` (an
    /// [`IgnitionJson`](crate::IgnitionJson)'s): the config's sources are those, shared.
    pub(crate) fn from_value_sharing(
        value: Value,
        sources: &SourceTable,
    ) -> Result<ParsedConfig, ParseError> {
        Self::parse_value(value, Some(sources))
    }

    fn parse_value(
        mut value: Value,
        sources: Option<&SourceTable>,
    ) -> Result<ParsedConfig, ParseError> {
        if !value.is_object() {
            return Err(ParseError::Invalid(vec![Issue::new(
                "$",
                "an Ignition config must be a JSON object",
            )]));
        }
        let version = declared_version(&value)?;
        let mut report = schema::GateReport::default();
        let config = match version {
            SpecVersion::V2_2 => {
                schema::gate(&mut value, &schema::V2_2, version, sources, &mut report);
                if !report.errors.is_empty() {
                    return Err(ParseError::Invalid(report.errors));
                }
                let v2: v2::Config = typed_sharing(value, sources)?;
                let translated = v2::translate(v2).map_err(ParseError::Invalid)?;
                report.warnings.extend(translated.warnings);
                translated.config
            }
            v => {
                schema::gate(&mut value, &schema::V3, v, sources, &mut report);
                if !report.errors.is_empty() {
                    return Err(ParseError::Invalid(report.errors));
                }
                let mut c: Config = typed_sharing(value, sources)?;
                c.ignition.version = INTERNAL_VERSION.to_string();
                c
            }
        };
        if let Err(mut issues) = validate(&config) {
            if version == SpecVersion::V2_2 {
                for i in &mut issues {
                    i.message.push_str(" (in the config translated to spec 3)");
                }
            }
            return Err(ParseError::Invalid(issues));
        }
        report.warnings.extend(ignored_mode_bits(&config));
        Ok(ParsedConfig {
            config,
            source_version: version,
            warnings: report.warnings,
        })
    }
}

/// Ignition (before spec 3.6.0) ignores a directory's setuid, setgid and sticky bits, and warns
/// about them; so does this crate (files with them are refused: the MCO's rule).
fn ignored_mode_bits(config: &Config) -> Vec<Issue> {
    let dirs = config.storage.directories.iter().enumerate();
    dirs.filter(|(_, d)| d.mode.is_some_and(|m| m & 0o7000 != 0))
        .map(|(i, d)| {
            Issue::new(
                format!("$.storage.directories.{i}.mode"),
                format!(
                    "directory {}: setuid/setgid/sticky bits are ignored before spec 3.6.0 (mode {} is applied as {})",
                    validate::named(&d.path),
                    go_octal(d.mode.unwrap_or_default()),
                    go_octal(i64::from(d.mode_or_default()))
                ),
            )
        })
        .collect()
}

fn declared_version(value: &Value) -> Result<SpecVersion, ParseError> {
    let path = "$.ignition.version".to_string();
    let version = value.get("ignition").and_then(|i| i.get("version"));
    match version {
        None => Err(ParseError::Version {
            path,
            message: "missing config version".to_string(),
        }),
        Some(Value::String(s)) => {
            SpecVersion::parse(s).map_err(|message| ParseError::Version { path, message })
        }
        Some(other) => Err(ParseError::Version {
            path,
            message: format!(
                "config version must be a string, got {}",
                describe_value(other)
            ),
        }),
    }
}

/// Decodes a JSON value into a typed struct, naming the offending field on error (without
/// quoting a value that may be a secret: see [`serde_issue`]).
pub(crate) fn typed<T: DeserializeOwned>(value: Value) -> Result<T, ParseError> {
    crate::tracked::deserialize(&value)
        .map_err(|e| ParseError::Invalid(vec![serde_issue(e, &value)]))
}

/// [`typed`], reading `source` strings as indexes into `sources` when given.
fn typed_sharing<T: DeserializeOwned>(
    value: Value,
    sources: Option<&SourceTable>,
) -> Result<T, ParseError> {
    match sources {
        Some(sources) => sources.resolving(|| typed(value)),
        None => typed(value),
    }
}

/// Lexically cleans an absolute path like Go's `path.Clean` (`/a/./b/../c` → `/a/c`).
pub(crate) fn clean_path(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    format!("/{}", parts.join("/"))
}
