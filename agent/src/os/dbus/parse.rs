//! rpm-ostree's dictionaries into our types.

use std::collections::HashMap;

use zbus::zvariant::{OwnedValue, Value};

use crate::os::error::OsError;
use crate::os::types::{BootConfig, Deployment};

type Dict = HashMap<String, OwnedValue>;

fn value<'a>(d: &'a Dict, key: &str) -> Option<&'a Value<'static>> {
    d.get(key).map(|v| &**v)
}

fn bad(what: &str, key: &str, want: &str, got: &Value<'_>) -> OsError {
    OsError::Protocol {
        what: what.to_string(),
        message: format!(
            "key {key:?} has type '{}', expected '{want}'",
            got.value_signature()
        ),
    }
}

fn opt_str(d: &Dict, what: &str, key: &str) -> Result<Option<String>, OsError> {
    match value(d, key) {
        None => Ok(None),
        Some(Value::Str(s)) => Ok(Some(s.to_string())),
        Some(v) => Err(bad(what, key, "s", v)),
    }
}

fn req_str(d: &Dict, what: &str, key: &str) -> Result<String, OsError> {
    opt_str(d, what, key)?.ok_or_else(|| missing(what, key))
}

fn missing(what: &str, key: &str) -> OsError {
    OsError::Protocol {
        what: what.to_string(),
        message: format!("key {key:?} is missing"),
    }
}

fn opt_bool(d: &Dict, what: &str, key: &str) -> Result<bool, OsError> {
    match value(d, key) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(bad(what, key, "b", v)),
    }
}

fn strv(d: &Dict, what: &str, key: &str) -> Result<Vec<String>, OsError> {
    match value(d, key) {
        None => Ok(Vec::new()),
        Some(Value::Array(a)) if a.element_signature() == "s" => Ok(a
            .iter()
            .filter_map(|e| match e {
                Value::Str(s) => Some(s.to_string()),
                _ => None,
            })
            .collect()),
        Some(v) => Err(bad(what, key, "as", v)),
    }
}

/// One entry of `Deployments`.
pub fn deployment(d: &Dict) -> Result<Deployment, OsError> {
    const WHAT: &str = "Deployments";
    let serial = match value(d, "serial") {
        Some(Value::I32(i)) => *i,
        Some(v) => return Err(bad(WHAT, "serial", "i", v)),
        None => return Err(missing(WHAT, "serial")),
    };
    let timestamp = match value(d, "timestamp") {
        None => None,
        Some(Value::U64(t)) => Some(*t),
        Some(v) => return Err(bad(WHAT, "timestamp", "t", v)),
    };
    let custom_origin = match value(d, "custom-origin") {
        None => None,
        Some(v @ Value::Structure(s)) => match s.fields() {
            [Value::Str(a), Value::Str(b)] => Some((a.to_string(), b.to_string())),
            _ => return Err(bad(WHAT, "custom-origin", "(ss)", v)),
        },
        Some(v) => return Err(bad(WHAT, "custom-origin", "(ss)", v)),
    };
    Ok(Deployment {
        id: req_str(d, WHAT, "id")?,
        osname: req_str(d, WHAT, "osname")?,
        checksum: req_str(d, WHAT, "checksum")?,
        base_checksum: opt_str(d, WHAT, "base-checksum")?,
        serial,
        version: opt_str(d, WHAT, "version")?,
        timestamp,
        origin: opt_str(d, WHAT, "origin")?,
        container_image_reference: opt_str(d, WHAT, "container-image-reference")?,
        custom_origin,
        booted: opt_bool(d, WHAT, "booted")?,
        staged: opt_bool(d, WHAT, "staged")?,
        pinned: opt_bool(d, WHAT, "pinned")?,
        finalization_locked: opt_bool(d, WHAT, "finalization-locked")?,
        requested_packages: strv(d, WHAT, "requested-packages")?,
        requested_base_removals: strv(d, WHAT, "requested-base-removals")?,
        kargs: None,
    })
}

/// The reply of `GetDeploymentBootConfig`.
pub fn boot_config(d: &Dict) -> Result<BootConfig, OsError> {
    const WHAT: &str = "GetDeploymentBootConfig";
    Ok(BootConfig {
        options: req_str(d, WHAT, "options")?,
        staged: opt_bool(d, WHAT, "staged")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dict(entries: Vec<(&str, Value<'static>)>) -> Dict {
        entries
            .into_iter()
            .map(|(k, v)| (k.to_string(), OwnedValue::try_from(v).unwrap()))
            .collect()
    }

    #[test]
    fn reads_a_container_deployment() {
        let d = dict(vec![
            ("id", Value::from("rhcos-abc.0")),
            ("osname", Value::from("rhcos")),
            ("checksum", Value::from("abc")),
            ("serial", Value::I32(0)),
            ("booted", Value::Bool(true)),
            ("staged", Value::Bool(false)),
            ("version", Value::from("418.94")),
            ("timestamp", Value::U64(1700000000)),
            (
                "container-image-reference",
                Value::from("ostree-unverified-registry:quay.io/x@sha256:1"),
            ),
            ("requested-packages", Value::from(vec!["usbguard"])),
            ("requested-base-removals", Value::from(Vec::<String>::new())),
            ("custom-origin", Value::from(("pivot://quay.io/x", "MCO"))),
            ("unlocked", Value::from("none")),
        ]);
        let dep = deployment(&d).unwrap();
        assert_eq!(dep.osname, "rhcos");
        assert!(dep.booted && !dep.staged && !dep.finalization_locked);
        assert_eq!(dep.timestamp, Some(1700000000));
        assert_eq!(dep.image_url().as_deref(), Some("quay.io/x@sha256:1"));
        assert_eq!(dep.requested_packages, ["usbguard"]);
        assert_eq!(dep.finalize_checksum(), "abc");
        assert_eq!(dep.custom_origin.unwrap().1, "MCO");
    }

    #[test]
    fn a_layered_deployment_is_finalized_by_its_base_commit() {
        let d = dict(vec![
            ("id", Value::from("rhcos-layered.1")),
            ("osname", Value::from("rhcos")),
            ("checksum", Value::from("layered")),
            ("base-checksum", Value::from("base")),
            ("serial", Value::I32(1)),
            ("staged", Value::Bool(true)),
            ("finalization-locked", Value::Bool(true)),
        ]);
        let dep = deployment(&d).unwrap();
        assert!(dep.staged && dep.finalization_locked);
        assert_eq!(dep.finalize_checksum(), "base");
    }

    #[test]
    fn wrong_or_missing_keys_are_named() {
        let d = dict(vec![("id", Value::from("x")), ("serial", Value::from("0"))]);
        let e = deployment(&d).unwrap_err().to_string();
        assert!(e.contains("\"serial\"") && e.contains("'i'"), "{e}");
        let d = dict(vec![("serial", Value::I32(0))]);
        let e = deployment(&d).unwrap_err().to_string();
        assert!(e.contains("\"id\" is missing"), "{e}");
        let e = boot_config(&dict(vec![("staged", Value::Bool(true))]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("GetDeploymentBootConfig") && e.contains("\"options\""),
            "{e}"
        );
    }
}
