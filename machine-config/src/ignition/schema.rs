//! Which fields each spec version knows, and the walk that checks a raw config against them.
//!
//! A field known to a later 3.x minor than the config declares is an error naming the field and
//! the version it needs. A field no version knows is reported as a warning ("unused key"), as
//! Ignition does, and dropped before typed decoding. A few *values* are version-gated too
//! ([`VALUE_GATES`]): `sha256-` hashes (3.1), `gs://` sources (3.2), filesystem format `none`
//! (3.3), `arn:` sources (3.4).
//!
//! These tables are the one source of truth for what each 3.x minor added: parsing gates a
//! config's fields and values by its declared version with them ([`gate`]), and
//! down-translation ([`crate::downtranslate`]) walks the same tables to find what an older
//! target cannot express. The field set was derived by comparing the JSON field sets of
//! Ignition's `config/v3_{0..5}/types/schema.go`; the value rules come from Ignition's
//! "Upgrading Configs" document.

use serde_json::Value;

use crate::error::Issue;

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
    /// Whether a value is one it gates.
    applies: fn(&str) -> bool,
    /// First 3.x minor that accepts the value.
    pub since: u8,
    /// One such value, for parse errors (`a sha256 hash`).
    pub one: &'static str,
    /// Such values, for down-translation problems (`sha256 hashes`).
    pub many: &'static str,
}

/// Every value gate.
pub(crate) const VALUE_GATES: &[ValueGate] = &[
    ValueGate {
        holder: |s| matches!(s, Shape::Hash),
        applies: |v| v.starts_with("sha256-"),
        since: 1,
        one: "a sha256 hash",
        many: "sha256 hashes",
    },
    ValueGate {
        holder: |s| matches!(s, Shape::Source),
        applies: |v| v.starts_with("gs://"),
        since: 2,
        one: "a gs:// source",
        many: "gs:// sources",
    },
    ValueGate {
        holder: |s| matches!(s, Shape::FsFormat),
        applies: |v| v == "none",
        since: 3,
        one: "filesystem format \"none\"",
        many: "filesystem format \"none\"",
    },
    ValueGate {
        holder: |s| matches!(s, Shape::Source),
        applies: |v| v.starts_with("arn:"),
        since: 4,
        one: "a arn: source",
        many: "S3 access point ARN sources",
    },
];

/// The gates that `value`, held by a field of `shape`, is subject to.
pub(crate) fn value_gates<'a>(
    shape: &'a Shape,
    value: &'a Value,
) -> impl Iterator<Item = &'static ValueGate> + 'a {
    let text = value.as_str();
    VALUE_GATES
        .iter()
        .filter(move |g| (g.holder)(shape) && text.is_some_and(|t| (g.applies)(t)))
}

pub(super) const fn f(name: &'static str, since: u8, shape: Shape) -> Field {
    Field { name, since, shape }
}

pub(super) const fn leaf(name: &'static str) -> Field {
    f(name, 0, Shape::Leaf)
}

use Shape::{Array, Leaf, Object};

pub(crate) use super::schema_v2::V2_2;

const HEADERS: Shape = Array(&Object(&[leaf("name"), leaf("value")]));
pub(super) const VERIFICATION: Shape = Object(&[f("hash", 0, Shape::Hash)]);

/// File contents and append fragments: `compression` since 3.0.
const FILE_RESOURCE: &[Field] = &[
    leaf("compression"),
    f("httpHeaders", 1, HEADERS),
    f("source", 0, Shape::Source),
    f("verification", 0, VERIFICATION),
];
/// Merged/replaced configs and CAs: `compression` since 3.1.
const OTHER_RESOURCE: &[Field] = &[
    f("compression", 1, Leaf),
    f("httpHeaders", 1, HEADERS),
    f("source", 0, Shape::Source),
    f("verification", 0, VERIFICATION),
];
pub(super) const OWNER: Shape = Object(&[leaf("id"), leaf("name")]);

const V3_IGNITION: &[Field] = &[
    f(
        "config",
        0,
        Object(&[
            f("merge", 0, Array(&Object(OTHER_RESOURCE))),
            f("replace", 0, Object(OTHER_RESOURCE)),
        ]),
    ),
    f(
        "proxy",
        1,
        Object(&[leaf("httpProxy"), leaf("httpsProxy"), leaf("noProxy")]),
    ),
    f(
        "security",
        0,
        Object(&[f(
            "tls",
            0,
            Object(&[f(
                "certificateAuthorities",
                0,
                Array(&Object(OTHER_RESOURCE)),
            )]),
        )]),
    ),
    f(
        "timeouts",
        0,
        Object(&[leaf("httpResponseHeaders"), leaf("httpTotal")]),
    ),
    leaf("version"),
];

const V3_FILE: &[Field] = &[
    f("group", 0, OWNER),
    leaf("overwrite"),
    leaf("path"),
    f("user", 0, OWNER),
    f("append", 0, Array(&Object(FILE_RESOURCE))),
    f("contents", 0, Object(FILE_RESOURCE)),
    leaf("mode"),
];
const V3_DIRECTORY: &[Field] = &[
    f("group", 0, OWNER),
    leaf("overwrite"),
    leaf("path"),
    f("user", 0, OWNER),
    leaf("mode"),
];
const V3_LINK: &[Field] = &[
    f("group", 0, OWNER),
    leaf("overwrite"),
    leaf("path"),
    f("user", 0, OWNER),
    leaf("hard"),
    leaf("target"),
];
const V3_PARTITION: &[Field] = &[
    leaf("guid"),
    leaf("label"),
    leaf("number"),
    f("resize", 2, Leaf),
    leaf("shouldExist"),
    leaf("sizeMiB"),
    leaf("startMiB"),
    leaf("typeGuid"),
    leaf("wipePartitionEntry"),
];
const V3_LUKS: &[Field] = &[
    f("cex", 5, Object(&[leaf("enabled")])),
    f(
        "clevis",
        2,
        Object(&[
            f(
                "custom",
                2,
                Object(&[leaf("config"), leaf("needsNetwork"), leaf("pin")]),
            ),
            f(
                "tang",
                2,
                Array(&Object(&[
                    f("advertisement", 4, Leaf),
                    leaf("thumbprint"),
                    leaf("url"),
                ])),
            ),
            leaf("threshold"),
            leaf("tpm2"),
        ]),
    ),
    leaf("device"),
    f("discard", 4, Leaf),
    f("keyFile", 2, Object(OTHER_RESOURCE)),
    leaf("label"),
    leaf("name"),
    f("openOptions", 4, Leaf),
    leaf("options"),
    leaf("uuid"),
    leaf("wipeVolume"),
];
const V3_STORAGE: &[Field] = &[
    f("directories", 0, Array(&Object(V3_DIRECTORY))),
    f(
        "disks",
        0,
        Array(&Object(&[
            leaf("device"),
            f("partitions", 0, Array(&Object(V3_PARTITION))),
            leaf("wipeTable"),
        ])),
    ),
    f("files", 0, Array(&Object(V3_FILE))),
    f(
        "filesystems",
        0,
        Array(&Object(&[
            leaf("device"),
            f("format", 0, Shape::FsFormat),
            leaf("label"),
            f("mountOptions", 1, Leaf),
            leaf("options"),
            leaf("path"),
            leaf("uuid"),
            leaf("wipeFilesystem"),
        ])),
    ),
    f("links", 0, Array(&Object(V3_LINK))),
    f("luks", 2, Array(&Object(V3_LUKS))),
    f(
        "raid",
        0,
        Array(&Object(&[
            leaf("devices"),
            leaf("level"),
            leaf("name"),
            leaf("options"),
            leaf("spares"),
        ])),
    ),
];
const V3_USER: &[Field] = &[
    leaf("gecos"),
    leaf("groups"),
    leaf("homeDir"),
    leaf("name"),
    leaf("noCreateHome"),
    leaf("noLogInit"),
    leaf("noUserGroup"),
    leaf("passwordHash"),
    leaf("primaryGroup"),
    leaf("shell"),
    f("shouldExist", 2, Leaf),
    leaf("sshAuthorizedKeys"),
    leaf("system"),
    leaf("uid"),
];
const V3_GROUP: &[Field] = &[
    leaf("gid"),
    leaf("name"),
    leaf("passwordHash"),
    f("shouldExist", 2, Leaf),
    leaf("system"),
];
pub(super) const DROPINS: Shape = Array(&Object(&[leaf("contents"), leaf("name")]));

/// Spec 3.0–3.5.
pub(crate) const V3: Shape = Object(&[
    f("ignition", 0, Object(V3_IGNITION)),
    f(
        "kernelArguments",
        3,
        Object(&[leaf("shouldExist"), leaf("shouldNotExist")]),
    ),
    f(
        "passwd",
        0,
        Object(&[
            f("groups", 0, Array(&Object(V3_GROUP))),
            f("users", 0, Array(&Object(V3_USER))),
        ]),
    ),
    f("storage", 0, Object(V3_STORAGE)),
    f(
        "systemd",
        0,
        Object(&[f(
            "units",
            0,
            Array(&Object(&[
                leaf("contents"),
                f("dropins", 0, DROPINS),
                leaf("enabled"),
                leaf("mask"),
                leaf("name"),
            ])),
        )]),
    ),
]);

/// Findings of a schema walk.
#[derive(Debug, Default)]
pub(crate) struct GateReport {
    pub errors: Vec<Issue>,
    pub warnings: Vec<Issue>,
}

/// Checks `value` against `shape` for a config declaring 3.`minor` (pass `u8::MAX` for 2.2 tables,
/// which gate nothing), removing unknown keys.
pub(crate) fn gate(value: &mut Value, shape: &Shape, minor: u8, report: &mut GateReport) {
    walk(value, shape, minor, "$", report);
}

fn needs(path: &str, what: &str, since: u8, minor: u8) -> Issue {
    Issue::new(
        path,
        format!(
            "{what} requires spec version 3.{since}.0 or later, but the config declares 3.{minor}.0"
        ),
    )
}

fn walk(value: &mut Value, shape: &Shape, minor: u8, path: &str, report: &mut GateReport) {
    match (shape, value) {
        (Shape::Object(fields), Value::Object(map)) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let child_path = format!("{path}.{key}");
                let Some(field) = fields.iter().find(|f| f.name == key) else {
                    report
                        .warnings
                        .push(Issue::new(child_path, format!("unused key {key}")));
                    map.remove(&key);
                    continue;
                };
                if field.since > minor {
                    report.errors.push(needs(
                        &child_path,
                        &format!("field {key:?}"),
                        field.since,
                        minor,
                    ));
                    continue;
                }
                if let Some(child) = map.get_mut(&key) {
                    walk(child, &field.shape, minor, &child_path, report);
                }
            }
        }
        (Shape::Array(item), Value::Array(items)) => {
            for (i, child) in items.iter_mut().enumerate() {
                walk(child, item, minor, &format!("{path}.{i}"), report);
            }
        }
        (shape, value) => {
            for gate in value_gates(shape, value).filter(|g| g.since > minor) {
                report.errors.push(needs(path, gate.one, gate.since, minor));
            }
        }
    }
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
