//! The walk that removes or refuses, for an older target, what newer 3.x minors added. What each
//! minor added comes from the parser's schema tables ([`crate::ignition::schema`]), the one
//! source of truth for both.

use serde_json::{Map, Value};

use crate::ignition::schema::{self, Shape};

/// Removes from `config` every field newer than `minor` whose value is a no-op default, and
/// records a problem for every other use of a newer field or value.
pub(super) fn strip_newer(config: &mut Value, minor: u8, problems: &mut Vec<String>) {
    walk(config, &schema::V3, "$", minor, problems);
}

fn walk(value: &mut Value, shape: &Shape, path: &str, minor: u8, problems: &mut Vec<String>) {
    match (shape, value) {
        (Shape::Object(_), Value::Object(map)) => walk_object(map, shape, path, minor, problems),
        (Shape::Array(item), Value::Array(items)) => {
            for (index, child) in items.iter_mut().enumerate() {
                walk(child, item, &format!("{path}.{index}"), minor, problems);
            }
        }
        (shape, value) => {
            for gate in schema::value_gates(shape, value).filter(|g| g.since > minor) {
                problems.push(format!(
                    "{path}: {} are not supported before spec 3.{}.0",
                    gate.many, gate.since
                ));
            }
        }
    }
}

/// Keys the schema does not know are left as they are (nothing under them is gated).
fn walk_object(
    map: &mut Map<String, Value>,
    shape: &Shape,
    path: &str,
    minor: u8,
    problems: &mut Vec<String>,
) {
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        let Some(field) = shape.field(&key) else {
            continue;
        };
        let child_path = format!("{path}.{key}");
        if field.since() > minor {
            if is_noop_default(&key, &map[&key]) {
                map.remove(&key);
            } else {
                problems.push(format!(
                    "{child_path}: not supported before spec 3.{}.0",
                    field.since()
                ));
            }
            continue;
        }
        if let Some(child) = map.get_mut(&key) {
            walk(child, field.shape(), &child_path, minor, problems);
        }
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
