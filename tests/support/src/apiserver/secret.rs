//! What the API server does to a Secret on every write: `stringData` is write-only, its entries
//! are base64-encoded into `data` (overriding entries of the same key) and it is dropped; `type`
//! defaults to `Opaque`; every `data` value must be base64.

use base64::Engine;
use serde_json::{Map, Value, json};

use super::registry::ResourceDef;
use super::status::ApiError;
use super::strategy::name_of;

/// Normalizes a Secret about to be stored (create or update).
pub fn normalize(def: &ResourceDef, obj: &mut Value) -> Result<(), ApiError> {
    let name = name_of(obj).to_string();
    let invalid = |field: &str, detail: String| ApiError::invalid(def, &name, field, &detail);
    let Some(root) = obj.as_object_mut() else {
        return Ok(());
    };
    let mut data = match root.remove("data") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map,
        Some(_) => return Err(invalid("data", "Invalid value: must be a map".into())),
    };
    let engine = base64::engine::general_purpose::STANDARD;
    for (key, value) in &data {
        let valid = value.as_str().is_some_and(|v| engine.decode(v).is_ok());
        if !valid {
            return Err(invalid(
                &format!("data[{key}]"),
                "Invalid value: must be base64-encoded bytes".into(),
            ));
        }
    }
    match root.remove("stringData") {
        None | Some(Value::Null) => {}
        Some(Value::Object(strings)) => {
            for (key, value) in strings {
                let Some(text) = value.as_str() else {
                    return Err(invalid(
                        &format!("stringData[{key}]"),
                        "Invalid value: must be a string".into(),
                    ));
                };
                data.insert(key, json!(engine.encode(text)));
            }
        }
        Some(_) => return Err(invalid("stringData", "Invalid value: must be a map".into())),
    }
    if !data.is_empty() {
        root.insert("data".into(), Value::Object(data));
    }
    let typed = root
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| !t.is_empty());
    if !typed {
        root.insert("type".into(), json!("Opaque"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::registry::{RESOURCES, index_of};

    fn secrets() -> &'static ResourceDef {
        &RESOURCES[index_of("secrets")]
    }

    #[test]
    fn string_data_is_folded_into_data() {
        let mut s = json!({"metadata": {"name": "s"}, "data": {"a": "eA==", "b": "eQ=="},
                           "stringData": {"b": "two", "c": "three"}});
        normalize(secrets(), &mut s).unwrap();
        assert_eq!(
            s["data"],
            json!({"a": "eA==", "b": "dHdv", "c": "dGhyZWU="})
        );
        assert!(s.get("stringData").is_none());
        assert_eq!(s["type"], "Opaque");
        let mut typed = json!({"metadata": {"name": "t"}, "type": "kubernetes.io/tls"});
        normalize(secrets(), &mut typed).unwrap();
        assert_eq!(typed["type"], "kubernetes.io/tls");
        assert!(typed.get("data").is_none());
    }

    #[test]
    fn data_must_be_base64() {
        let mut s = json!({"metadata": {"name": "s"}, "data": {"a": "not base64!"}});
        let err = normalize(secrets(), &mut s).unwrap_err();
        assert_eq!(err.code, 422);
        assert!(err.message.contains("data[a]"), "{}", err.message);
    }
}
