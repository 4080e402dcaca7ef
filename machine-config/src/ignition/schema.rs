//! Which fields each spec version knows, and the walk that checks a raw config against them.
//!
//! A field known to a later 3.x minor than the config declares is an error naming the field and
//! the version it needs. A field no version knows is reported as a warning ("unused key"), as
//! Ignition does, and dropped before typed decoding. A few *values* are version-gated too
//! ([`VALUE_GATES`]): `sha256-` hashes (3.1), `gs://` sources (3.2), filesystem format `none`
//! (3.3), `arn:` sources (3.4); and, for down-translation only, setuid/setgid/sticky bits in a
//! `mode` (3.4: ign-converter's 3.4 → 3.3 translator refuses them, although every 3.x parser
//! accepts them with a warning).
//!
//! These tables (`schema_v2.rs`, `schema_v3.rs`) are the one source of truth for what each 3.x minor added: parsing gates a
//! config's fields and values by its declared version with them ([`gate`]), and
//! down-translation ([`crate::downtranslate`]) walks the same tables to find what an older
//! target cannot express. The field set was derived by comparing the JSON field sets of
//! Ignition's `config/v3_{0..5}/types/schema.go`; the value rules come from Ignition's
//! "Upgrading Configs" document.

use serde_json::Value;

use crate::error::Issue;
use crate::ignition::SpecVersion;
use crate::source::SourceTable;

/// What a field holds.
pub(crate) enum Shape {
    /// Any scalar or list of scalars; typed decoding checks it.
    Leaf,
    /// A `verification.hash` string.
    Hash,
    /// A resource `source` URL.
    Source,
    /// `storage.filesystems[].format`.
    FsFormat,
    /// A file's or directory's `mode`.
    Mode,
    Object(&'static [Field]),
    Array(&'static Shape),
}

pub(crate) struct Field {
    name: &'static str,
    /// First 3.x minor that knows the field (0 for spec 2.2 tables).
    since: u8,
    shape: Shape,
}

impl Field {
    /// First 3.x minor that knows the field.
    pub(crate) fn since(&self) -> u8 {
        self.since
    }

    /// What the field holds.
    pub(crate) fn shape(&self) -> &Shape {
        &self.shape
    }
}

impl Shape {
    /// The field `name` of an object shape; `None` for an unknown key or another shape.
    pub(crate) fn field(&self, name: &str) -> Option<&Field> {
        match self {
            Shape::Object(fields) => fields.iter().find(|f| f.name == name),
            _ => None,
        }
    }
}

/// Values (not fields) that a 3.x minor made legal.
pub(crate) struct ValueGate {
    /// The shape of the fields whose values it gates.
    holder: fn(&Shape) -> bool,
    /// Whether a value is one it gates, given its text (empty for a non-string) and itself.
    applies: fn(&str, &Value) -> bool,
    /// First 3.x minor that accepts the value.
    pub since: u8,
    /// Whether parsing gates it too (else only down-translation does).
    pub parse: bool,
    /// One such value, for parse errors (`a sha256 hash`).
    pub one: &'static str,
    /// Such values, for down-translation problems (`sha256 hashes`).
    pub many: &'static str,
}

/// Every value gate.
pub(crate) const VALUE_GATES: &[ValueGate] = &[
    ValueGate {
        holder: |s| matches!(s, Shape::Hash),
        applies: |text, _| text.starts_with("sha256-"),
        since: 1,
        parse: true,
        one: "a sha256 hash",
        many: "sha256 hashes",
    },
    ValueGate {
        holder: |s| matches!(s, Shape::Source),
        applies: |text, _| text.starts_with("gs://"),
        since: 2,
        parse: true,
        one: "a gs:// source",
        many: "gs:// sources",
    },
    ValueGate {
        holder: |s| matches!(s, Shape::FsFormat),
        applies: |text, _| text == "none",
        since: 3,
        parse: true,
        one: "filesystem format \"none\"",
        many: "filesystem format \"none\"",
    },
    ValueGate {
        holder: |s| matches!(s, Shape::Source),
        applies: |text, _| text.starts_with("arn:"),
        since: 4,
        parse: true,
        one: "a arn: source",
        many: "S3 access point ARN sources",
    },
    ValueGate {
        holder: |s| matches!(s, Shape::Mode),
        applies: |_, v| v.as_i64().is_some_and(|m| m & 0o7000 != 0),
        since: 4,
        parse: false,
        one: "a mode with setuid/setgid/sticky bits",
        many: "setuid/setgid/sticky mode bits",
    },
];

/// The gates that `value`, held by a field of `shape`, is subject to. `text` is the string the
/// value stands for (a source's, when the value is its index in a [`SourceTable`]).
pub(crate) fn value_gates<'a>(
    shape: &'a Shape,
    text: &'a str,
    value: &'a Value,
) -> impl Iterator<Item = &'static ValueGate> + 'a {
    VALUE_GATES
        .iter()
        .filter(move |g| (g.holder)(shape) && (g.applies)(text, value))
}

pub(super) const fn f(name: &'static str, since: u8, shape: Shape) -> Field {
    Field { name, since, shape }
}

pub(super) const fn leaf(name: &'static str) -> Field {
    f(name, 0, Shape::Leaf)
}

pub(crate) use super::schema_v2::V2_2;
pub(crate) use super::schema_v3::V3;

/// Findings of a schema walk.
#[derive(Debug, Default)]
pub(crate) struct GateReport {
    pub errors: Vec<Issue>,
    pub warnings: Vec<Issue>,
}

/// Checks `value` against `shape` for a config declaring `declared`, removing unknown keys.
/// Spec 2.2 tables gate no field; 2.2 takes the values 3.0 takes (only `sha512-` hashes, no
/// `gs://` or `arn:` sources). With `sources`, the value's sources are indexes into it.
pub(crate) fn gate(
    value: &mut Value,
    shape: &Shape,
    declared: SpecVersion,
    sources: Option<&SourceTable>,
    report: &mut GateReport,
) {
    let minor = match declared {
        SpecVersion::V2_2 => 0,
        v => u8::try_from(v.major_minor().1).unwrap_or(u8::MAX),
    };
    let gate = Gate {
        declared,
        minor,
        sources,
    };
    walk(value, shape, &gate, "$", report);
}

struct Gate<'a> {
    sources: Option<&'a SourceTable>,
    declared: SpecVersion,
    /// The 3.x minor whose fields and values the declared version accepts.
    minor: u8,
}

impl Gate<'_> {
    fn needs(&self, path: &str, what: &str, since: u8) -> Issue {
        let message = if self.declared == SpecVersion::V2_2 {
            format!("{what} is not supported by spec 2.2.0 (it needs spec 3.{since}.0 or later)")
        } else {
            format!(
                "{what} requires spec version 3.{since}.0 or later, but the config declares {}",
                self.declared
            )
        };
        Issue::new(path, message)
    }
}

/// The field of `fields` closest to `key` when it is close enough to be a typo
/// ([`crate::closest`]): `overwrte` → `overwrite`, nothing for `colour`.
fn closest_field(key: &str, fields: &[Field]) -> Option<&'static str> {
    crate::closest::closest(key, fields.iter().map(|f| f.name))
}

fn walk(value: &mut Value, shape: &Shape, gate: &Gate, path: &str, report: &mut GateReport) {
    match (shape, value) {
        (Shape::Object(fields), Value::Object(map)) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let child_path = format!("{path}.{key}");
                let Some(field) = fields.iter().find(|f| f.name == key) else {
                    let message = match closest_field(&key, fields) {
                        Some(known) => format!("unused key {key} (did you mean {known}?)"),
                        None => format!("unused key {key}"),
                    };
                    report.warnings.push(Issue::new(child_path, message));
                    map.remove(&key);
                    continue;
                };
                if field.since > gate.minor {
                    let what = format!("field {key:?}");
                    report
                        .errors
                        .push(gate.needs(&child_path, &what, field.since));
                    continue;
                }
                if let Some(child) = map.get_mut(&key) {
                    walk(child, &field.shape, gate, &child_path, report);
                }
            }
        }
        (Shape::Array(item), Value::Array(items)) => {
            for (i, child) in items.iter_mut().enumerate() {
                walk(child, item, gate, &format!("{path}.{i}"), report);
            }
        }
        (shape, value) => {
            // A source's gates look at its scheme only (its first bytes are read, not the
            // whole source). One that cannot be read gates nothing here: the resource's
            // validation reports why it cannot be read.
            let text = match (shape, value.as_str(), gate.sources) {
                (Shape::Source, Some(index), Some(sources)) => {
                    sources.prefix(index, SOURCE_PREFIX).unwrap_or_default()
                }
                (_, text, _) => std::borrow::Cow::Borrowed(text.unwrap_or_default()),
            };
            for g in value_gates(shape, &text, value).filter(|g| g.parse && g.since > gate.minor) {
                report.errors.push(gate.needs(path, g.one, g.since));
            }
        }
    }
}

/// How much of a source the value gates read: enough for every scheme they look for.
const SOURCE_PREFIX: usize = 16;

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
