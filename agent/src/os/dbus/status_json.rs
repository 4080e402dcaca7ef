//! rpm-ostreed's view of the sysroot as JSON, in the shape `rpm-ostree status --json` prints
//! (`deployments`: each deployment's `a{sv}` with rpm-ostree's own keys; `transaction`: the
//! active transaction or `null`), read over the agent's D-Bus client: for support bundles
//! (`mco-agent gather`), where the raw keys matter more than the agent's parsed [`OsStatus`].
//!
//! [`OsStatus`]: crate::os::OsStatus

use std::collections::BTreeMap;

use serde_json::{Map, Value as Json};
use zbus::zvariant::Value;

use super::DbusOsUpdater;
use crate::os::error::OsError;

impl DbusOsUpdater {
    /// The `Deployments` and `ActiveTransaction` properties of the sysroot, as JSON.
    pub async fn status_json(&self) -> Result<Json, OsError> {
        let deployments = self
            .sysroot
            .deployments()
            .await
            .map_err(|e| OsError::call("Deployments", e))?;
        let transaction = self
            .sysroot
            .active_transaction()
            .await
            .map_err(|e| OsError::call("ActiveTransaction", e))?;
        let deployments = deployments
            .iter()
            .map(|d| {
                // sorted, so that two bundles of one node compare line by line
                let sorted: BTreeMap<&String, Json> =
                    d.iter().map(|(k, v)| (k, to_json(v))).collect();
                Json::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
            })
            .collect();
        let mut out = Map::new();
        out.insert("deployments".into(), Json::Array(deployments));
        out.insert("transaction".into(), transaction_json(transaction));
        Ok(Json::Object(out))
    }
}

/// `ActiveTransaction` is `("", "", "")` when none runs: `null`, as rpm-ostree prints it.
fn transaction_json((method, sender, path): (String, String, String)) -> Json {
    if method.is_empty() && path.is_empty() {
        Json::Null
    } else {
        Json::Array(vec![method.into(), sender.into(), path.into()])
    }
}

/// A D-Bus value as JSON: numbers and strings as themselves, arrays as arrays, dicts and
/// `a{sv}` as objects (keys as strings), structures as arrays, variants unwrapped.
pub(crate) fn to_json(value: &Value<'_>) -> Json {
    match value {
        Value::U8(n) => (*n).into(),
        Value::Bool(b) => (*b).into(),
        Value::I16(n) => (*n).into(),
        Value::U16(n) => (*n).into(),
        Value::I32(n) => (*n).into(),
        Value::U32(n) => (*n).into(),
        Value::I64(n) => (*n).into(),
        Value::U64(n) => (*n).into(),
        Value::F64(n) => serde_json::Number::from_f64(*n).map_or(Json::Null, Json::Number),
        Value::Str(s) => s.as_str().into(),
        Value::Signature(s) => s.to_string().into(),
        Value::ObjectPath(p) => p.as_str().into(),
        Value::Value(inner) => to_json(inner),
        Value::Array(a) => Json::Array(a.inner().iter().map(to_json).collect()),
        Value::Dict(d) => {
            let sorted: BTreeMap<String, Json> = d
                .iter()
                .map(|(k, v)| {
                    let key = match k {
                        Value::Str(s) => s.as_str().to_string(),
                        other => match to_json(other) {
                            Json::String(s) => s,
                            json => json.to_string(),
                        },
                    };
                    (key, to_json(v))
                })
                .collect();
            Json::Object(sorted.into_iter().collect())
        }
        Value::Structure(s) => Json::Array(s.fields().iter().map(to_json).collect()),
        other => format!("{other:?}").into(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde_json::json;
    use zbus::zvariant::{ObjectPath, Structure};

    use super::*;

    #[test]
    fn dbus_values_become_the_json_rpm_ostree_prints() {
        let nested: HashMap<&str, Value<'_>> = HashMap::from([("b", Value::from(2u32))]);
        let cases: Vec<(Value<'_>, Json)> = vec![
            (Value::from(true), json!(true)),
            (Value::from(7u8), json!(7)),
            (Value::from(-3i32), json!(-3)),
            (Value::from(1_700_000_000_u64), json!(1_700_000_000_u64)),
            (Value::from(0.5f64), json!(0.5)),
            (Value::from("fedora"), json!("fedora")),
            (
                Value::from(ObjectPath::try_from("/org/x").unwrap()),
                json!("/org/x"),
            ),
            (
                Value::Value(Box::new(Value::from("wrapped"))),
                json!("wrapped"),
            ),
            (Value::from(vec!["a", "b"]), json!(["a", "b"])),
            (Value::from(nested), json!({"b": 2})),
            (Value::from(Structure::from(("x", 1u32))), json!(["x", 1])),
        ];
        for (value, want) in cases {
            assert_eq!(to_json(&value), want, "{value:?}");
        }
    }

    #[test]
    fn no_active_transaction_is_null() {
        assert_eq!(transaction_json(Default::default()), Json::Null);
        assert_eq!(
            transaction_json(("Rebase".into(), ":1.5".into(), "/t".into())),
            json!(["Rebase", ":1.5", "/t"])
        );
    }
}
