//! The walk that removes or refuses, for an older target, what newer 3.x minors added. What each
//! minor added comes from the parser's schema tables ([`crate::ignition::schema`]), the one
//! source of truth for both.

use serde_json::{Map, Value};

use crate::error::entry_subject;
use crate::ignition::schema::{self, Shape};

/// Removes from `config` every field newer than `minor` whose value is a no-op default, and
/// records a problem for every other use of a newer field or value.
pub(super) fn strip_newer(config: &mut Value, minor: u8, problems: &mut Vec<String>) {
    let at = At {
        path: "$".to_string(),
        subject: None,
    };
    walk(config, &schema::V3, &at, minor, problems);
}

/// Where the walk is: the JSON path, and the file, unit or user it is inside, which every
/// problem names (`file "/etc/x": ...`).
struct At {
    path: String,
    subject: Option<String>,
}

impl At {
    fn child(&self, key: &str) -> At {
        At {
            path: format!("{}.{key}", self.path),
            subject: self.subject.clone(),
        }
    }

    fn problem(&self, path: &str, why: String) -> String {
        match &self.subject {
            Some(s) => format!("{path}: {s}: {why}"),
            None => format!("{path}: {why}"),
        }
    }
}

fn walk(value: &mut Value, shape: &Shape, at: &At, minor: u8, problems: &mut Vec<String>) {
    match (shape, value) {
        (Shape::Object(_), Value::Object(map)) => walk_object(map, shape, at, minor, problems),
        (Shape::Array(item), Value::Array(items)) => {
            let list = at.path.rsplit('.').next().unwrap_or_default();
            for (index, child) in items.iter_mut().enumerate() {
                let outer = at.subject.as_deref();
                let subject = entry_subject(list, child, outer).or_else(|| at.subject.clone());
                let child_at = At {
                    path: format!("{}.{index}", at.path),
                    subject,
                };
                walk(child, item, &child_at, minor, problems);
            }
        }
        (shape, value) => {
            let text = value.as_str().unwrap_or_default();
            for gate in schema::value_gates(shape, text, value).filter(|g| g.since > minor) {
                let why = format!(
                    "{} are not supported before spec 3.{}.0",
                    gate.many, gate.since
                );
                problems.push(at.problem(&at.path, why));
            }
        }
    }
}

/// Keys the schema does not know are left as they are (nothing under them is gated).
fn walk_object(
    map: &mut Map<String, Value>,
    shape: &Shape,
    at: &At,
    minor: u8,
    problems: &mut Vec<String>,
) {
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        let Some(field) = shape.field(&key) else {
            continue;
        };
        let child_at = at.child(&key);
        if field.since() > minor {
            if is_noop_default(&key, &map[&key]) {
                map.remove(&key);
            } else {
                let why = format!("not supported before spec 3.{}.0", field.since());
                problems.push(at.problem(&child_at.path, why));
            }
            continue;
        }
        if let Some(child) = map.get_mut(&key) {
            walk(child, field.shape(), &child_at, minor, problems);
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
