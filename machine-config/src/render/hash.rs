//! Rendered config names: `rendered-<pool>-<md5 hex>`, the md5 taken over a fixed salt and a
//! canonical serialization of the rendered `spec`.
//!
//! The MCO hashes Go's YAML encoding of the spec with its own 80-byte salt; we hash canonical
//! JSON (object keys sorted, no insignificant whitespace) with our own salt instead, so names
//! are stable for the same inputs and change with any change of the spec, but are **not**
//! byte-identical to the names the MCO would give the same spec.

use md5::{Digest, Md5};
use serde_json::Value;
use std::fmt::Write as _;

/// Prefix of every rendered config name.
pub const RENDERED_PREFIX: &str = "rendered-";

/// Fixed salt mixed into every rendered-name hash. Never change it: names would all change.
const SALT: &[u8] = b"mco-companion rendered MachineConfig spec, canonical JSON, v1\n";

/// `rendered-<pool>-<hash>` for a rendered spec (the MachineConfig's `spec` as JSON).
pub fn rendered_name(pool: &str, spec: &Value) -> String {
    format!("{RENDERED_PREFIX}{pool}-{}", spec_hash(spec))
}

/// The lowercase hex md5 of salt + canonical JSON of `spec`.
pub fn spec_hash(spec: &Value) -> String {
    let mut hasher = Md5::new();
    hasher.update(SALT);
    hasher.update(canonical_json(spec).as_bytes());
    hex::encode(hasher.finalize())
}

/// JSON with object keys sorted at every level and no whitespace.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::String(s) => write_string(s, out),
        scalar => {
            let _ = write!(out, "{scalar}");
        }
    }
}

fn write_string(s: &str, out: &mut String) {
    // serde_json's string escaping is canonical (shortest escapes, UTF-8 kept)
    out.push_str(&Value::String(s.to_string()).to_string());
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stable_under_key_order_and_sensitive_to_any_change() {
        let a = json!({"osImageURL": "q/os@sha256:1", "config": {"ignition": {"version": "3.5.0"}, "storage": {"files": [{"path": "/a", "mode": 420}]}}, "fips": false});
        let b = json!({"fips": false, "config": {"storage": {"files": [{"mode": 420, "path": "/a"}]}, "ignition": {"version": "3.5.0"}}, "osImageURL": "q/os@sha256:1"});
        assert_eq!(spec_hash(&a), spec_hash(&b));
        let name = rendered_name("worker", &a);
        assert!(name.starts_with("rendered-worker-"));
        assert_eq!(name.len(), "rendered-worker-".len() + 32);
        for changed in [
            json!({"osImageURL": "q/os@sha256:2", "config": a["config"], "fips": false}),
            json!({"osImageURL": "q/os@sha256:1", "config": a["config"], "fips": true}),
            json!({"osImageURL": "q/os@sha256:1", "config": {"ignition": {"version": "3.5.0"}, "storage": {"files": [{"path": "/a", "mode": 384}]}}, "fips": false}),
        ] {
            assert_ne!(spec_hash(&changed), spec_hash(&a));
        }
        assert_ne!(rendered_name("infra", &a), name);
        assert_eq!(
            canonical_json(&json!({"b": [1, "x\"y"], "a": null})),
            r#"{"a":null,"b":[1,"x\"y"]}"#
        );
    }
}
