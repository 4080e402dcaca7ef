//! The validation rules of the served types that clients run into: object names (RFC 1123
//! subdomains, or path segments for RBAC objects), labels and annotations, PodDisruptionBudget
//! budgets, Lease durations, RBAC role references and subjects, and the MachineConfigNode CRD's
//! rules (openshift/api). Messages follow the API server's field errors.

use serde_json::Value;

use super::registry::ResourceDef;
use super::status::ApiError;
use super::strategy::{name_of, str_at};

/// Checks an object's name as the type's strategy does.
pub fn check_name(def: &ResourceDef, name: &str) -> Result<(), ApiError> {
    let problem = if def.group == "rbac.authorization.k8s.io" {
        path_segment_problem(name)
    } else if subdomain(name) {
        None
    } else {
        Some("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character".to_string())
    };
    match problem {
        None => Ok(()),
        Some(detail) => Err(ApiError::invalid(
            def,
            name,
            "metadata.name",
            &format!("Invalid value: {name:?}: {detail}"),
        )),
    }
}

/// A lowercase RFC 1123 subdomain, as most object names must be.
fn subdomain(name: &str) -> bool {
    let bytes = name.as_bytes();
    !name.is_empty()
        && name.len() <= 253
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
}

/// RBAC names only need to be usable as a path segment (`system:node` is a valid name).
fn path_segment_problem(name: &str) -> Option<String> {
    if name == "." || name == ".." {
        return Some(format!("may not be '{name}'"));
    }
    ["/", "%"]
        .iter()
        .find(|bad| name.contains(**bad))
        .map(|bad| format!("may not contain '{bad}'"))
}

/// The rules every create and update must pass.
pub fn validate(def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
    let name = name_of(obj);
    let invalid = |field: &str, detail: String| Err(ApiError::invalid(def, name, field, &detail));
    for (field, pointer) in [
        ("metadata.labels", "/metadata/labels"),
        ("metadata.annotations", "/metadata/annotations"),
    ] {
        if let Some(map) = obj.pointer(pointer)
            && !map
                .as_object()
                .is_some_and(|m| m.values().all(Value::is_string))
        {
            let what = field.trim_start_matches("metadata.");
            return invalid(
                field,
                format!("Invalid value: {what} must be a map of strings"),
            );
        }
    }
    match def.plural {
        "poddisruptionbudgets" => {
            let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
            if spec.get("minAvailable").is_some() && spec.get("maxUnavailable").is_some() {
                return invalid(
                    "spec",
                    "Invalid value: minAvailable and maxUnavailable cannot be both set".into(),
                );
            }
            for field in ["minAvailable", "maxUnavailable"] {
                if let Some(v) = spec.get(field)
                    && super::disruption::int_or_percent(v).is_none()
                {
                    return invalid(
                        &format!("spec.{field}"),
                        format!("Invalid value: {v}: must be an integer or percentage (e.g '5%')"),
                    );
                }
            }
        }
        "leases" => {
            if let Some(d) = obj.pointer("/spec/leaseDurationSeconds")
                && d.as_i64().is_none_or(|d| d <= 0)
            {
                return invalid(
                    "spec.leaseDurationSeconds",
                    format!("Invalid value: {d}: must be greater than 0"),
                );
            }
            if let Some(t) = obj.pointer("/spec/leaseTransitions")
                && t.as_i64().is_none_or(|t| t < 0)
            {
                return invalid(
                    "spec.leaseTransitions",
                    format!("Invalid value: {t}: must be greater than or equal to 0"),
                );
            }
        }
        "clusterrolebindings" | "rolebindings" => validate_binding(def, obj)?,
        "machineconfignodes" => {
            for (field, pointer) in [
                ("spec.node.name", "/spec/node/name"),
                ("spec.pool.name", "/spec/pool/name"),
                ("spec.configVersion.desired", "/spec/configVersion/desired"),
            ] {
                if str_at(obj, pointer).is_none() {
                    return invalid(field, "Required value".into());
                }
            }
            if str_at(obj, "/spec/node/name") != Some(name) {
                return invalid(
                    "<nil>",
                    "Invalid value: \"object\": spec.node.name should match metadata.name".into(),
                );
            }
            for (field, pointer) in [
                (
                    "spec.configImage.desiredImage",
                    "/spec/configImage/desiredImage",
                ),
                (
                    "status.configImage.currentImage",
                    "/status/configImage/currentImage",
                ),
                (
                    "status.configImage.desiredImage",
                    "/status/configImage/desiredImage",
                ),
            ] {
                if let Some(image) = obj.pointer(pointer)
                    && let Some(problem) = image_digest_problem(field, image)
                {
                    return invalid(field, problem);
                }
            }
        }
        "pinnedimagesets" => validate_pinned_images(def, obj)?,
        _ => {}
    }
    Ok(())
}

/// The PinnedImageSet CRD's rules on `spec.pinnedImages`: required, 1 to 500 entries, a list
/// map keyed by `name`, each name a reference by digest.
fn validate_pinned_images(def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
    let invalid =
        |field: &str, detail: String| Err(ApiError::invalid(def, name_of(obj), field, &detail));
    let Some(images) = obj.pointer("/spec/pinnedImages").and_then(Value::as_array) else {
        return invalid("spec.pinnedImages", "Required value".into());
    };
    if images.is_empty() {
        return invalid(
            "spec.pinnedImages",
            "Invalid value: 0: spec.pinnedImages in body should have at least 1 items".into(),
        );
    }
    if images.len() > 500 {
        return invalid(
            "spec.pinnedImages",
            format!("Too many: {}: must have at most 500 items", images.len()),
        );
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, image) in images.iter().enumerate() {
        let field = format!("spec.pinnedImages[{i}].name");
        let Some(name) = image.get("name") else {
            return invalid(&field, "Required value".into());
        };
        if let Some(problem) = image_digest_problem(&field, name) {
            return invalid(&field, problem);
        }
        if !seen.insert(name.to_string()) {
            return invalid(
                &format!("spec.pinnedImages[{i}]"),
                format!("Duplicate value: map[string]interface {{}}{{\"name\":{name}}}"),
            );
        }
    }
    Ok(())
}

/// openshift/api's `ImageDigestFormat` (`host[:port][/namespace]/name@sha256:<digest>`): its
/// length and its digest rule, with the CRD's messages (the name's pattern is not checked).
fn image_digest_problem(field: &str, image: &Value) -> Option<String> {
    let Some(image) = image.as_str() else {
        return Some(format!("Invalid value: {image}: must be of type string"));
    };
    let len = image.chars().count();
    if len < 1 {
        return Some(format!(
            "Invalid value: {image:?}: {field} in body should be at least 1 chars long"
        ));
    }
    if len > 447 {
        return Some("Too long: may not be more than 447 bytes".into());
    }
    let parts: Vec<&str> = image.split('@').collect();
    let digest_ok = parts.len() == 2
        && parts[1].strip_prefix("sha256:").is_some_and(|hex| {
            hex.len() == 64
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
    (!digest_ok).then(|| {
        "Invalid value: \"string\": the OCI Image reference must end with a valid '@sha256:<digest>' suffix, where '<digest>' is 64 characters long".to_string()
    })
}

fn validate_binding(def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
    let name = name_of(obj);
    let invalid = |field: &str, detail: String| Err(ApiError::invalid(def, name, field, &detail));
    let kinds: &[&str] = if def.plural == "rolebindings" {
        &["ClusterRole", "Role"]
    } else {
        &["ClusterRole"]
    };
    let kind = str_at(obj, "/roleRef/kind").unwrap_or_default();
    if !kinds.contains(&kind) {
        let supported: Vec<String> = kinds.iter().map(|k| format!("{k:?}")).collect();
        return invalid(
            "roleRef.kind",
            format!(
                "Unsupported value: {kind:?}: supported values: {}",
                supported.join(", ")
            ),
        );
    }
    if str_at(obj, "/roleRef/apiGroup") != Some("rbac.authorization.k8s.io") {
        return invalid(
            "roleRef.apiGroup",
            "Unsupported value: supported values: \"rbac.authorization.k8s.io\"".into(),
        );
    }
    if str_at(obj, "/roleRef/name").unwrap_or_default().is_empty() {
        return invalid("roleRef.name", "Required value".into());
    }
    let subjects = obj.get("subjects").and_then(Value::as_array);
    for (i, subject) in subjects.into_iter().flatten().enumerate() {
        let kind = str_at(subject, "/kind").unwrap_or_default();
        if !["User", "Group", "ServiceAccount"].contains(&kind) {
            return invalid(
                &format!("subjects[{i}].kind"),
                format!(
                    "Unsupported value: {kind:?}: supported values: \"ServiceAccount\", \"User\", \"Group\""
                ),
            );
        }
        if str_at(subject, "/name").unwrap_or_default().is_empty() {
            return invalid(&format!("subjects[{i}].name"), "Required value".into());
        }
        if kind == "ServiceAccount"
            && def.plural == "clusterrolebindings"
            && str_at(subject, "/namespace").unwrap_or_default().is_empty()
        {
            return invalid(&format!("subjects[{i}].namespace"), "Required value".into());
        }
    }
    Ok(())
}

/// The rules an update must pass besides [`validate`]: immutable fields and monotonic ones.
pub fn validate_update(def: &ResourceDef, old: &Value, new: &Value) -> Result<(), ApiError> {
    let name = name_of(old);
    if matches!(def.plural, "clusterrolebindings" | "rolebindings")
        && old.get("roleRef") != new.get("roleRef")
    {
        return Err(ApiError::invalid(
            def,
            name,
            "roleRef",
            &format!(
                "Invalid value: {}: cannot change roleRef",
                new.get("roleRef").unwrap_or(&Value::Null)
            ),
        ));
    }
    if matches!(def.plural, "machineconfignodes" | "machineosconfigs") {
        let generation = |o: &Value| {
            o.pointer("/status/observedGeneration")
                .and_then(Value::as_i64)
        };
        if let (Some(before), Some(after)) = (generation(old), generation(new))
            && after < before
        {
            let message = if def.plural == "machineconfignodes" {
                "observedGeneration must not decrease"
            } else {
                "observedGeneration must not move backwards"
            };
            return Err(ApiError::invalid(
                def,
                name,
                "status.observedGeneration",
                &format!("Invalid value: \"integer\": {message}"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::registry::{RESOURCES, index_of};
    use serde_json::json;

    fn def(plural: &str) -> &'static ResourceDef {
        &RESOURCES[index_of(plural)]
    }

    #[test]
    fn names_by_type() {
        assert!(check_name(def("clusterroles"), "system:node").is_ok());
        assert!(check_name(def("clusterroles"), "a/b").is_err());
        let err = check_name(def("nodes"), "Bad_Name").unwrap_err();
        assert_eq!(err.code, 422);
        assert!(
            err.message
                .starts_with("Node \"Bad_Name\" is invalid: metadata.name")
        );
    }

    #[test]
    fn machine_config_node_rules() {
        let mcn = |node: &str| json!({"metadata": {"name": "n1"}, "spec": {"node": {"name": node}, "pool": {"name": "worker"}, "configVersion": {"desired": "r"}}});
        assert!(validate(def("machineconfignodes"), &mcn("n1")).is_ok());
        let err = validate(def("machineconfignodes"), &mcn("n2")).unwrap_err();
        assert_eq!(
            err.message,
            "MachineConfigNode.machineconfiguration.openshift.io \"n1\" is invalid: <nil>: Invalid value: \"object\": spec.node.name should match metadata.name"
        );
        // configImage: images by digest only.
        let digest = format!("registry.example/os@sha256:{}", "a".repeat(64));
        let mut with_image = mcn("n1");
        with_image["spec"]["configImage"] = json!({"desiredImage": digest});
        with_image["status"] =
            json!({"configImage": {"currentImage": digest, "desiredImage": digest}});
        assert!(validate(def("machineconfignodes"), &with_image).is_ok());
        with_image["status"]["configImage"]["currentImage"] = json!("registry.example/os:latest");
        let err = validate(def("machineconfignodes"), &with_image).unwrap_err();
        assert_eq!(err.code, 422);
        assert!(
            err.message.contains("status.configImage.currentImage: Invalid value: \"string\": the OCI Image reference must end with a valid '@sha256:<digest>' suffix"),
            "{}",
            err.message
        );
        with_image["status"]["configImage"]["currentImage"] = json!(digest);
        with_image["spec"]["configImage"]["desiredImage"] = json!("registry.example/os@sha256:ABC");
        let err = validate(def("machineconfignodes"), &with_image).unwrap_err();
        assert!(
            err.message.contains("spec.configImage.desiredImage"),
            "{}",
            err.message
        );
        let mut old = mcn("n1");
        old["status"] = json!({"observedGeneration": 3});
        let mut new = old.clone();
        new["status"]["observedGeneration"] = json!(2);
        assert!(validate_update(def("machineconfignodes"), &old, &new).is_err());
    }

    #[test]
    fn binding_rules() {
        let crb = json!({
            "metadata": {"name": "b"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
        });
        let err = validate(def("clusterrolebindings"), &crb).unwrap_err();
        assert!(
            err.message
                .contains("roleRef.kind: Unsupported value: \"Role\""),
            "{}",
            err.message
        );
        assert!(validate(def("rolebindings"), &crb).is_ok());
        let mut changed = crb.clone();
        changed["roleRef"]["name"] = json!("other");
        let err = validate_update(def("rolebindings"), &crb, &changed).unwrap_err();
        assert!(
            err.message.ends_with("cannot change roleRef"),
            "{}",
            err.message
        );
        let sa = json!({
            "metadata": {"name": "b"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa"}],
        });
        assert!(validate(def("clusterrolebindings"), &sa).is_err());
        assert!(validate(def("rolebindings"), &sa).is_ok());
    }
}
