//! Per-resource create/update rules (the API server's "strategies"): metadata the server owns,
//! status handling with and without a `/status` subresource, generation, validation.

use std::time::SystemTime;

use rand::Rng;
use serde_json::{Map, Value, json};

use super::registry::ResourceDef;
use super::status::ApiError;
use super::validation;

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Main,
    Status,
}

pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

pub fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

pub fn namespace_of(obj: &Value) -> &str {
    obj.pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

pub fn str_at<'a>(obj: &'a Value, pointer: &str) -> Option<&'a str> {
    obj.pointer(pointer).and_then(Value::as_str)
}

pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = json!({});
    }
    let root = obj.as_object_mut().expect("object ensured above");
    let meta = root.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    meta.as_object_mut().expect("object ensured above")
}

fn random_suffix(len: usize) -> String {
    const CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..len)
        .map(|_| CHARS[rng.random_range(0..CHARS.len())] as char)
        .collect()
}

pub fn new_uid() -> String {
    let mut bytes = [0u8; 16];
    rand::rng().fill(&mut bytes);
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Checks kind/apiVersion of a request body against the resource.
pub fn check_type(def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    if let Some(kind) = str_at(obj, "/kind").filter(|k| !k.is_empty())
        && kind != def.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({})",
            def.kind
        )));
    }
    if let Some(av) = str_at(obj, "/apiVersion").filter(|v| !v.is_empty())
        && av != def.api_version()
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({})",
            def.api_version()
        )));
    }
    Ok(())
}

/// Fills server-owned metadata and applies create rules. `namespace` is the request's.
pub fn prepare_create(
    def: &ResourceDef,
    namespace: Option<&str>,
    mut obj: Value,
) -> Result<Value, ApiError> {
    check_type(def, &obj)?;
    obj["kind"] = json!(def.kind);
    obj["apiVersion"] = json!(def.api_version());
    let meta = metadata_mut(&mut obj);
    if meta
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .is_empty()
    {
        let generate = meta
            .get("generateName")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if generate.is_empty() {
            return Err(ApiError::invalid(
                def,
                "",
                "metadata.name",
                "Required value: name or generateName is required",
            ));
        }
        meta.insert(
            "name".into(),
            json!(format!("{generate}{}", random_suffix(5))),
        );
    }
    let name = meta["name"].as_str().unwrap_or_default().to_string();
    validation::check_name(def, &name)?;
    match (def.namespaced, namespace) {
        (true, Some(ns)) => {
            let body_ns = meta.get("namespace").and_then(Value::as_str).unwrap_or(ns);
            if body_ns != ns {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            meta.insert("namespace".into(), json!(ns));
        }
        (true, None) => {
            return Err(ApiError::bad_request(
                "a namespace is required for this resource",
            ));
        }
        (false, _) => {
            meta.remove("namespace");
        }
    }
    meta.insert("uid".into(), json!(new_uid()));
    meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
    for owned in [
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "resourceVersion",
        "managedFields",
        "selfLink",
    ] {
        meta.remove(owned);
    }
    if def.generation {
        meta.insert("generation".into(), json!(1));
    } else {
        meta.remove("generation");
    }
    let root = obj.as_object_mut().expect("checked to be an object");
    match def.plural {
        "pods" => {
            root.insert(
                "status".into(),
                json!({"phase": "Pending", "qosClass": "BestEffort"}),
            );
        }
        "namespaces" => {
            root.insert("status".into(), json!({"phase": "Active"}));
        }
        "nodes" => {}
        _ if def.status_subresource => {
            root.remove("status");
        }
        _ => {}
    }
    if def.plural == "secrets" {
        super::secret::normalize(def, &mut obj)?;
    }
    validation::validate(def, &obj)?;
    Ok(obj)
}

/// The object an update of `target` produces from `old` and the client's `new`.
pub fn prepare_update(
    def: &ResourceDef,
    old: &Value,
    mut new: Value,
    target: Target,
) -> Result<Value, ApiError> {
    check_type(def, &new)?;
    let name = name_of(old).to_string();
    if name_of(&new) != name && !name_of(&new).is_empty() {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            name_of(&new)
        )));
    }
    if target == Target::Status {
        // Only status changes through /status.
        let mut merged = old.clone();
        match new.get("status") {
            Some(status) => merged["status"] = status.clone(),
            None => {
                merged.as_object_mut().map(|m| m.remove("status"));
            }
        }
        if let Some(rv) = new.pointer("/metadata/resourceVersion") {
            metadata_mut(&mut merged).insert("resourceVersion".into(), rv.clone());
        }
        new = merged;
    } else if def.status_subresource {
        match old.get("status") {
            Some(status) => new["status"] = status.clone(),
            None => {
                new.as_object_mut().map(|m| m.remove("status"));
            }
        }
    }
    new["kind"] = json!(def.kind);
    new["apiVersion"] = json!(def.api_version());
    let old_meta = old
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let meta = metadata_mut(&mut new);
    for owned in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match old_meta.get(owned) {
            Some(v) => meta.insert(owned.into(), v.clone()),
            None => meta.remove(owned),
        };
    }
    if def.generation && spec_changed(old, &new) {
        let generation = old_meta
            .get("generation")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            + 1;
        metadata_mut(&mut new).insert("generation".into(), json!(generation));
    }
    if def.plural == "secrets" {
        super::secret::normalize(def, &mut new)?;
    }
    validation::validate(def, &new)?;
    validation::validate_update(def, old, &new)?;
    Ok(new)
}

/// Whether anything outside metadata and status differs.
fn spec_changed(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.as_object_mut() {
            m.remove("metadata");
            m.remove("status");
        }
        v
    };
    strip(old) != strip(new)
}

/// `metadata.finalizers` is non-empty.
pub fn has_finalizers(obj: &Value) -> bool {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::registry::{RESOURCES, index_of};

    #[test]
    fn create_fills_metadata_and_resets_status() {
        let pods = &RESOURCES[index_of("pods")];
        let pod = prepare_create(
            pods,
            Some("ns"),
            json!({"metadata": {"generateName": "web-"}, "status": {"phase": "Running"}}),
        )
        .unwrap();
        assert!(name_of(&pod).starts_with("web-") && name_of(&pod).len() == 9);
        assert_eq!(namespace_of(&pod), "ns");
        assert_eq!(pod["status"]["phase"], "Pending");
        assert_eq!(pod["kind"], "Pod");
        assert_eq!(new_uid().len(), 36);
        let err = prepare_create(pods, Some("ns"), json!({"metadata": {"name": "Bad_Name"}}))
            .unwrap_err();
        assert_eq!(err.code, 422);
        let err = prepare_create(
            pods,
            Some("ns"),
            json!({"metadata": {"name": "p", "namespace": "other"}}),
        )
        .unwrap_err();
        assert_eq!(err.code, 400);
        let err = prepare_create(
            pods,
            Some("ns"),
            json!({"kind": "Node", "metadata": {"name": "p"}}),
        )
        .unwrap_err();
        assert_eq!(err.code, 400);
    }

    #[test]
    fn status_subresource_separates_writes() {
        let mcp = &RESOURCES[index_of("machineconfigpools")];
        let created = prepare_create(
            mcp,
            None,
            json!({"metadata": {"name": "worker"}, "spec": {"paused": false}, "status": {"x": 1}}),
        )
        .unwrap();
        assert!(
            created.get("status").is_none(),
            "create drops status of a custom resource"
        );
        let mut old = created.clone();
        old["status"] = json!({"machineCount": 1});
        let mut main = old.clone();
        main["spec"]["paused"] = json!(true);
        main["status"] = json!({"machineCount": 9});
        let updated = prepare_update(mcp, &old, main, Target::Main).unwrap();
        assert_eq!(updated["status"]["machineCount"], 1);
        assert_eq!(updated["spec"]["paused"], true);
        assert_eq!(updated["metadata"]["generation"], 2);
        let mut status = old.clone();
        status["spec"]["paused"] = json!(true);
        status["status"] = json!({"machineCount": 3});
        let updated = prepare_update(mcp, &old, status, Target::Status).unwrap();
        assert_eq!(updated["status"]["machineCount"], 3);
        assert_eq!(updated["spec"]["paused"], false);
        assert_eq!(updated["metadata"]["generation"], 1);
    }

    #[test]
    fn pdb_validation() {
        let pdbs = &RESOURCES[index_of("poddisruptionbudgets")];
        let both =
            json!({"metadata": {"name": "p"}, "spec": {"minAvailable": 1, "maxUnavailable": 1}});
        assert_eq!(
            prepare_create(pdbs, Some("ns"), both).unwrap_err().code,
            422
        );
        let bad = json!({"metadata": {"name": "p"}, "spec": {"minAvailable": "x"}});
        assert_eq!(prepare_create(pdbs, Some("ns"), bad).unwrap_err().code, 422);
    }
}
