//! The three patch types: JSON merge patch (RFC 7396), JSON patch (RFC 6902) and the
//! strategic merge patch of built-in types (merge keys for the lists kubectl and controllers
//! patch, `$patch`, `$retainKeys`, `$setElementOrder` and `$deleteFromPrimitiveList` directives).

use serde_json::{Map, Value};

/// The patch types, from the request's Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Json,
    Strategic,
    Apply,
}

impl PatchType {
    pub fn from_content_type(content_type: &str) -> Option<Self> {
        let essence = content_type.split(';').next().unwrap_or("").trim();
        match essence {
            "application/merge-patch+json" => Some(Self::Merge),
            "application/json-patch+json" => Some(Self::Json),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// Applies `patch` (a parsed request body) to `target`.
pub fn apply(patch_type: PatchType, target: &mut Value, patch: &Value) -> Result<(), String> {
    match patch_type {
        PatchType::Merge => {
            if !patch.is_object() {
                return Err("a merge patch must be a JSON object".into());
            }
            json_patch::merge(target, patch);
            Ok(())
        }
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| format!("invalid JSON patch: {e}"))?;
            json_patch::patch(target, &ops).map_err(|e| format!("the JSON patch failed: {e}"))
        }
        PatchType::Strategic => {
            let Value::Object(patch) = patch else {
                return Err("a strategic merge patch must be a JSON object".into());
            };
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            if let Value::Object(target) = target {
                merge_map(target, patch)?;
            }
            Ok(())
        }
        PatchType::Apply => Err("server-side apply is not supported by this test server".into()),
    }
}

/// The merge key of a list field of a built-in type, by field name.
fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "readinessGates" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "ports" => "containerPort",
        "conditions" | "addresses" => "type",
        "taints" => "key",
        "ownerReferences" => "uid",
        "hostAliases" => "ip",
        _ => return None,
    })
}

/// List fields whose primitive items are merged as a set rather than replaced.
fn primitive_merge(field: &str) -> bool {
    matches!(field, "finalizers")
}

fn merge_map(target: &mut Map<String, Value>, patch: &Map<String, Value>) -> Result<(), String> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            *target = strip_directives(patch);
            return Ok(());
        }
        Some("delete") => {
            target.clear();
            return Ok(());
        }
        Some(other) => return Err(format!("unknown patch directive {other:?}")),
        None => {}
    }
    for (key, value) in patch {
        if key.starts_with("$setElementOrder/") || key == "$retainKeys" || key == "$patch" {
            continue;
        }
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            let remove = value.as_array().cloned().unwrap_or_default();
            if let Some(Value::Array(items)) = target.get_mut(field) {
                items.retain(|item| !remove.contains(item));
            }
            continue;
        }
        match value {
            Value::Null => {
                target.remove(key);
            }
            Value::Object(sub) => {
                if sub.get("$patch").and_then(Value::as_str) == Some("delete") {
                    target.remove(key);
                    continue;
                }
                match target.get_mut(key) {
                    Some(Value::Object(existing)) => merge_map(existing, sub)?,
                    _ => {
                        target.insert(key.clone(), Value::Object(strip_directives(sub)));
                    }
                }
            }
            Value::Array(items) => {
                let merged = merge_list(key, target.remove(key), items)?;
                target.insert(key.clone(), merged);
            }
            other => {
                target.insert(key.clone(), other.clone());
            }
        }
    }
    if let Some(Value::Array(retain)) = patch.get("$retainKeys") {
        let keep: Vec<&str> = retain.iter().filter_map(Value::as_str).collect();
        target.retain(|k, _| keep.contains(&k.as_str()));
    }
    Ok(())
}

fn merge_list(field: &str, existing: Option<Value>, patch: &[Value]) -> Result<Value, String> {
    let mut current = match existing {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    };
    if let Some(key) = merge_key(field) {
        if patch
            .iter()
            .any(|p| p.get("$patch").and_then(Value::as_str) == Some("replace"))
        {
            let items = patch
                .iter()
                .filter(|p| p.get("$patch").is_none())
                .map(strip_value)
                .collect();
            return Ok(Value::Array(items));
        }
        for item in patch {
            let Value::Object(item) = item else {
                return Err(format!(
                    "list {field} merges by {key}: items must be objects"
                ));
            };
            let id = item.get(key);
            let position = current
                .iter()
                .position(|c| c.get(key) == id && id.is_some());
            let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
            match (position, delete) {
                (Some(i), true) => {
                    current.remove(i);
                }
                (None, true) => {}
                (Some(i), false) => {
                    if let Value::Object(target) = &mut current[i] {
                        merge_map(target, item)?;
                    }
                }
                (None, false) => current.push(Value::Object(strip_directives(item))),
            }
        }
        return Ok(Value::Array(current));
    }
    if primitive_merge(field) {
        for item in patch {
            if !current.contains(item) {
                current.push(item.clone());
            }
        }
        return Ok(Value::Array(current));
    }
    Ok(Value::Array(patch.iter().map(strip_value).collect()))
}

fn strip_directives(map: &Map<String, Value>) -> Map<String, Value> {
    map.iter()
        .filter(|(k, _)| !k.starts_with('$'))
        .map(|(k, v)| (k.clone(), strip_value(v)))
        .collect()
}

fn strip_value(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(strip_directives(map)),
        Value::Array(items) => Value::Array(items.iter().map(strip_value).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_types() {
        assert_eq!(
            PatchType::from_content_type("application/strategic-merge-patch+json; charset=utf-8"),
            Some(PatchType::Strategic)
        );
        assert_eq!(PatchType::from_content_type("application/json"), None);
    }

    #[test]
    fn merge_patch_sets_and_deletes() {
        let mut node = json!({"metadata": {"annotations": {"a": "1", "b": "2"}}, "spec": {}});
        let patch = json!({"metadata": {"annotations": {"a": null, "c": "3"}}, "spec": {"unschedulable": true}});
        apply(PatchType::Merge, &mut node, &patch).unwrap();
        assert_eq!(
            node,
            json!({"metadata": {"annotations": {"b": "2", "c": "3"}}, "spec": {"unschedulable": true}})
        );
    }

    #[test]
    fn json_patch_ops_and_failed_test() {
        let mut obj = json!({"metadata": {"labels": {"a": "1"}}});
        let ops = json!([
            {"op": "add", "path": "/metadata/labels/b", "value": "2"},
            {"op": "remove", "path": "/metadata/labels/a"},
        ]);
        apply(PatchType::Json, &mut obj, &ops).unwrap();
        assert_eq!(obj, json!({"metadata": {"labels": {"b": "2"}}}));
        let failing = json!([{"op": "test", "path": "/metadata/labels/b", "value": "x"}]);
        assert!(apply(PatchType::Json, &mut obj, &failing).is_err());
    }

    #[test]
    fn strategic_merges_lists_by_key() {
        let mut node = json!({
            "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "False"}]},
            "metadata": {"finalizers": ["x"]},
        });
        let patch = json!({
            "spec": {"taints": [{"key": "b", "effect": "NoExecute"}, {"key": "a", "$patch": "delete"}]},
            "status": {
                "$setElementOrder/conditions": [{"type": "Ready"}, {"type": "DiskPressure"}],
                "conditions": [{"type": "Ready", "status": "False"}],
            },
            "metadata": {"finalizers": ["y", "x"]},
        });
        apply(PatchType::Strategic, &mut node, &patch).unwrap();
        assert_eq!(
            node["spec"]["taints"],
            json!([{"key": "b", "effect": "NoExecute"}])
        );
        assert_eq!(
            node["status"]["conditions"],
            json!([{"type": "Ready", "status": "False"}, {"type": "DiskPressure", "status": "False"}])
        );
        assert_eq!(node["metadata"]["finalizers"], json!(["x", "y"]));
    }

    #[test]
    fn strategic_directives() {
        let mut obj = json!({"spec": {"a": 1, "b": {"c": 2}}, "list": [1, 2]});
        let patch = json!({
            "spec": {"$retainKeys": ["b"], "b": {"$patch": "replace", "d": 3}},
            "list": [3],
            "$deleteFromPrimitiveList/other": [1],
        });
        apply(PatchType::Strategic, &mut obj, &patch).unwrap();
        assert_eq!(obj, json!({"spec": {"b": {"d": 3}}, "list": [3]}));
        let mut obj = json!({"spec": {"unschedulable": true}});
        apply(
            PatchType::Strategic,
            &mut obj,
            &json!({"spec": {"unschedulable": null}}),
        )
        .unwrap();
        assert_eq!(obj, json!({"spec": {}}));
    }
}
