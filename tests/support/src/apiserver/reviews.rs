//! SelfSubjectAccessReview and SelfSubjectRulesReview (`authorization.k8s.io/v1`), which
//! `kubectl auth can-i` and `kubectl auth can-i --list` create, and SelfSubjectReview
//! (`authentication.k8s.io/v1`, `kubectl auth whoami`): answered for the requester, never
//! stored.

use serde_json::{Value, json};

use super::attributes::Attributes;
use super::authz::{self, AuthorizationMode};
use super::identity::Identity;
use super::registry::ResourceDef;
use super::status::ApiError;
use super::store::Store;
use super::strategy::{check_type, str_at};

/// Answers a review of kind `def` posted by `who`: the review with its status filled in.
pub fn answer(
    def: &ResourceDef,
    mode: AuthorizationMode,
    store: &Store,
    who: &Identity,
    body: Value,
) -> Result<Value, ApiError> {
    check_type(def, &body)?;
    let mut review = body;
    review["kind"] = json!(def.kind);
    review["apiVersion"] = json!(def.api_version());
    review["metadata"] = json!({"creationTimestamp": null});
    review["status"] = match def.plural {
        "selfsubjectaccessreviews" => access(mode, store, who, &review)?,
        "selfsubjectrulesreviews" => rules(mode, store, who, &review)?,
        _ => json!({"userInfo": {"username": who.user, "groups": who.groups}}),
    };
    Ok(review)
}

fn access(
    mode: AuthorizationMode,
    store: &Store,
    who: &Identity,
    review: &Value,
) -> Result<Value, ApiError> {
    let spec = review.get("spec").cloned().unwrap_or(Value::Null);
    let text = |v: &Value, key: &str| {
        str_at(v, &format!("/{key}"))
            .unwrap_or_default()
            .to_string()
    };
    let attrs = match (
        spec.get("resourceAttributes"),
        spec.get("nonResourceAttributes"),
    ) {
        (Some(r), None) => {
            let mut attrs = Attributes::resource(
                &text(r, "verb"),
                &text(r, "group"),
                &text(r, "resource"),
                &text(r, "namespace"),
                &text(r, "name"),
            );
            attrs.subresource = text(r, "subresource");
            attrs.version = text(r, "version");
            attrs
        }
        (None, Some(n)) => Attributes::non_resource(&text(n, "verb"), &text(n, "path")),
        _ => {
            return Err(ApiError::invalid_kind(
                "SelfSubjectAccessReview.authorization.k8s.io",
                "",
                "spec.resourceAttributes",
                "Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ));
        }
    };
    let verdict = authz::authorize(mode, store, who, &attrs);
    let mut status = json!({"allowed": verdict.allowed});
    if !verdict.reason.is_empty() {
        status["reason"] = json!(verdict.reason);
    }
    Ok(status)
}

fn rules(
    mode: AuthorizationMode,
    store: &Store,
    who: &Identity,
    review: &Value,
) -> Result<Value, ApiError> {
    let namespace = str_at(review, "/spec/namespace").unwrap_or_default();
    if namespace.is_empty() {
        return Err(ApiError::bad_request("no namespace on request"));
    }
    let (resource, non_resource, incomplete, error) = authz::rules_for(mode, store, who, namespace);
    let mut status = json!({
        "resourceRules": resource,
        "nonResourceRules": non_resource,
        "incomplete": incomplete,
    });
    if !error.is_empty() {
        status["evaluationError"] = json!(error);
    }
    Ok(status)
}
