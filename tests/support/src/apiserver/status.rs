//! `meta/v1 Status` errors with the API server's codes, reasons and message formats.

use serde_json::{Value, json};

use super::registry::ResourceDef;

/// An API error, rendered as a `Status` body with the same HTTP code.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    fn object_details(def: &ResourceDef, name: &str) -> Value {
        json!({"name": name, "group": def.group, "kind": def.plural})
    }

    pub fn not_found(def: &ResourceDef, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", def.qualified_name()),
        )
        .with_details(Self::object_details(def, name))
    }

    pub fn already_exists(def: &ResourceDef, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", def.qualified_name()),
        )
        .with_details(Self::object_details(def, name))
    }

    pub fn conflict(def: &ResourceDef, name: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again",
                def.qualified_name()
            ),
        )
        .with_details(Self::object_details(def, name))
    }

    /// 422 with one field cause, like the API server's validation errors.
    pub fn invalid(def: &ResourceDef, name: &str, field: &str, detail: &str) -> Self {
        Self::invalid_kind(&def.qualified_kind(), name, field, detail)
    }

    /// 422 for a qualified kind (`Kind` or `Kind.group`) that may not be a served resource.
    pub fn invalid_kind(qualified_kind: &str, name: &str, field: &str, detail: &str) -> Self {
        let message = format!("{qualified_kind} \"{name}\" is invalid: {field}: {detail}");
        let (kind, group) = qualified_kind
            .split_once('.')
            .unwrap_or((qualified_kind, ""));
        Self::new(422, "Invalid", message).with_details(json!({
            "name": name,
            "group": group,
            "kind": kind,
            "causes": [{"reason": "FieldValueInvalid", "message": detail, "field": field}],
        }))
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/merge-patch+json, application/json-patch+json, application/strategic-merge-patch+json (got {content_type:?})"
            ),
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {}", message.into()),
        )
    }

    /// 403 as apierrors.NewForbidden: `<resource>[.<group>] ["<name>"] is forbidden: <why>`,
    /// or `forbidden: <why>` for a non-resource request.
    pub fn forbidden(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let qualified = if group.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}.{group}")
        };
        let message = match (resource.is_empty(), name.is_empty()) {
            (true, _) => format!("forbidden: {why}"),
            (false, true) => format!("{qualified} is forbidden: {why}"),
            (false, false) => format!("{qualified} {name:?} is forbidden: {why}"),
        };
        let mut details = serde_json::Map::new();
        for (key, value) in [("name", name), ("group", group), ("kind", resource)] {
            if !value.is_empty() {
                details.insert(key.into(), json!(value));
            }
        }
        Self::new(403, "Forbidden", message).with_details(Value::Object(details))
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// The eviction API's answer when a PodDisruptionBudget forbids the eviction.
    pub fn disruption_budget(pdb: &str, desired: i64, current: i64) -> Self {
        Self::new(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
        )
        .with_details(json!({
            "causes": [{
                "reason": "DisruptionBudget",
                "message": format!("The disruption budget {pdb} needs {desired} healthy pods and has {current} currently"),
            }],
        }))
    }

    /// 410 for a watch or list from a resourceVersion that is no longer kept.
    pub fn gone(requested: u64, oldest: u64) -> Self {
        Self::new(
            410,
            "Expired",
            format!("too old resource version: {requested} ({oldest})"),
        )
    }

    /// An error a test injected for a status code.
    pub fn injected(code: u16) -> Self {
        let (reason, message) = match code {
            409 => (
                "Conflict",
                "Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again",
            ),
            429 => (
                "TooManyRequests",
                "the server has received too many requests and has asked us to try again later",
            ),
            500 => ("InternalError", "Internal error occurred: injected fault"),
            503 => (
                "ServiceUnavailable",
                "the server is currently unable to handle the request",
            ),
            504 => (
                "Timeout",
                "the server was unable to return a response in the time allotted",
            ),
            _ => ("InternalError", "injected fault"),
        };
        Self::new(code, reason, message)
    }

    /// The Status body.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

/// A `Status` reporting success (eviction's answer, deleting a collection).
pub fn success(code: u16) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::registry::{RESOURCES, index_of};

    #[test]
    fn messages_match_the_api_server() {
        let nodes = &RESOURCES[index_of("nodes")];
        assert_eq!(
            ApiError::not_found(nodes, "n1").message,
            "nodes \"n1\" not found"
        );
        let mc = &RESOURCES[index_of("machineconfigs")];
        assert_eq!(
            ApiError::already_exists(mc, "a").message,
            "machineconfigs.machineconfiguration.openshift.io \"a\" already exists"
        );
        let status = ApiError::disruption_budget("web", 2, 2).to_status();
        assert_eq!(status["code"], 429);
        assert_eq!(status["details"]["causes"][0]["reason"], "DisruptionBudget");
        assert_eq!(
            status["details"]["causes"][0]["message"],
            "The disruption budget web needs 2 healthy pods and has 2 currently"
        );
    }
}
