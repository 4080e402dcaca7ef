//! Which fields and values each Ignition 3.x minor added, and the walk that removes or refuses
//! them for an older target.
//!
//! The field table was derived by comparing the JSON field sets of Ignition's
//! `config/v3_{0..5}/types/schema.go`; the value rules come from Ignition's "Upgrading Configs"
//! document (sha256 hashes in 3.1, `gs://` in 3.2, filesystem format `none` in 3.3, S3 access
//! point ARNs in 3.4).

use serde_json::{Map, Value};

/// `(field pattern, minor that added it)`. Patterns are dotted JSON keys with `*` standing for a
/// list index.
pub const NEWER_FIELDS: &[(&str, u64)] = &[
    ("ignition.config.merge.*.compression", 1),
    ("ignition.config.merge.*.httpHeaders", 1),
    ("ignition.config.replace.compression", 1),
    ("ignition.config.replace.httpHeaders", 1),
    ("ignition.proxy", 1),
    (
        "ignition.security.tls.certificateAuthorities.*.compression",
        1,
    ),
    (
        "ignition.security.tls.certificateAuthorities.*.httpHeaders",
        1,
    ),
    ("storage.files.*.append.*.httpHeaders", 1),
    ("storage.files.*.contents.httpHeaders", 1),
    ("storage.filesystems.*.mountOptions", 1),
    ("passwd.groups.*.shouldExist", 2),
    ("passwd.users.*.shouldExist", 2),
    ("storage.disks.*.partitions.*.resize", 2),
    ("storage.luks", 2),
    ("kernelArguments", 3),
    ("storage.luks.*.clevis.tang.*.advertisement", 4),
    ("storage.luks.*.discard", 4),
    ("storage.luks.*.openOptions", 4),
    ("storage.luks.*.cex", 5),
];

/// Removes from `config` every field newer than `minor` whose value is a no-op default, and
/// records a problem for every other use of a newer field or value.
pub(super) fn strip_newer(config: &mut Value, minor: u64, problems: &mut Vec<String>) {
    if let Value::Object(map) = config {
        walk_object(map, "", "$", minor, problems);
    }
}

fn walk_object(
    map: &mut Map<String, Value>,
    pattern: &str,
    path: &str,
    minor: u64,
    problems: &mut Vec<String>,
) {
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        let child_pattern = if pattern.is_empty() {
            key.clone()
        } else {
            format!("{pattern}.{key}")
        };
        let child_path = format!("{path}.{key}");
        if let Some(since) = added_in(&child_pattern)
            && since > minor
        {
            if is_noop_default(&key, &map[&key]) {
                map.remove(&key);
            } else {
                problems.push(format!(
                    "{child_path}: not supported before spec 3.{since}.0"
                ));
            }
            continue;
        }
        if let Some(value) = map.get_mut(&key) {
            check_value(&key, value, &child_pattern, &child_path, minor, problems);
            walk_value(value, &child_pattern, &child_path, minor, problems);
        }
    }
}

fn walk_value(
    value: &mut Value,
    pattern: &str,
    path: &str,
    minor: u64,
    problems: &mut Vec<String>,
) {
    match value {
        Value::Object(map) => walk_object(map, pattern, path, minor, problems),
        Value::Array(items) => {
            let item_pattern = format!("{pattern}.*");
            for (index, item) in items.iter_mut().enumerate() {
                walk_value(
                    item,
                    &item_pattern,
                    &format!("{path}.{index}"),
                    minor,
                    problems,
                );
            }
        }
        _ => {}
    }
}

fn added_in(pattern: &str) -> Option<u64> {
    NEWER_FIELDS
        .iter()
        .find(|(field, _)| *field == pattern)
        .map(|(_, since)| *since)
}

/// Values (not fields) that a minor made legal.
fn check_value(
    key: &str,
    value: &Value,
    pattern: &str,
    path: &str,
    minor: u64,
    problems: &mut Vec<String>,
) {
    let Some(text) = value.as_str() else {
        return;
    };
    let needs = match key {
        "hash" if text.starts_with("sha256-") => Some((1, "sha256 hashes")),
        "source" if text.starts_with("gs://") => Some((2, "gs:// sources")),
        "source" if text.starts_with("arn:") => Some((4, "S3 access point ARN sources")),
        "format" if text == "none" && pattern == "storage.filesystems.*.format" => {
            Some((3, "filesystem format \"none\""))
        }
        _ => None,
    };
    if let Some((since, what)) = needs
        && since > minor
    {
        problems.push(format!(
            "{path}: {what} are not supported before spec 3.{since}.0"
        ));
    }
}

/// A newer field whose value means "do what the older spec does anyway".
fn is_noop_default(key: &str, value: &Value) -> bool {
    match (key, value) {
        (_, Value::Null) => true,
        (_, Value::Array(items)) => items.is_empty(),
        (_, Value::Object(map)) => map.iter().all(|(k, v)| is_noop_default(k, v)),
        ("shouldExist", Value::Bool(b)) => *b,
        ("resize" | "discard" | "enabled", Value::Bool(b)) => !*b,
        ("compression", Value::String(s)) => s.is_empty(),
        _ => false,
    }
}
