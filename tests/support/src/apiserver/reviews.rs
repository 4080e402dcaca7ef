//! SelfSubjectAccessReview and SelfSubjectRulesReview (`authorization.k8s.io/v1`), which
//! `kubectl auth can-i` and `kubectl auth can-i --list` create, and SelfSubjectReview
//! (`authentication.k8s.io/v1`, `kubectl auth whoami`): answered for the requester. TokenReview
//! (`authentication.k8s.io/v1`) and SubjectAccessReview (`authorization.k8s.io/v1`), which a
//! delegating server (kube-rbac-proxy, a kubelet, the agent's metrics listener) creates to ask
//! who a bearer token is and what a user may do: answered for the token or user in the spec,
//! as kube-apiserver's registries answer them. None is stored.

use serde_json::{Value, json};

use super::attributes::Attributes;
use super::authn::Authenticator;
use super::authz::{self, AuthorizationMode};
use super::identity::Identity;
use super::registry::ResourceDef;
use super::status::ApiError;
use super::store::Store;
use super::strategy::{check_type, str_at};

/// The audiences kube-apiserver accepts by default (`--api-audiences`, from the service
/// account issuer): a TokenReview without audiences is checked against them.
pub const API_AUDIENCES: &[&str] = &["https://kubernetes.default.svc"];

/// What a review is answered with: the server's authorizers and credentials.
pub struct Reviewer<'a> {
    pub mode: AuthorizationMode,
    pub store: &'a Store,
    pub authn: &'a Authenticator,
}

/// Answers a review of kind `def` posted by `who`: the review with its status filled in.
pub fn answer(
    def: &ResourceDef,
    reviewer: &Reviewer<'_>,
    who: &Identity,
    body: Value,
) -> Result<Value, ApiError> {
    check_type(def, &body)?;
    let mut review = body;
    review["kind"] = json!(def.kind);
    review["apiVersion"] = json!(def.api_version());
    let namespace = str_at(&review, "/metadata/namespace").unwrap_or_default();
    if !namespace.is_empty() {
        // Reviews are cluster-scoped: the registries refuse a namespace.
        return Err(ApiError::bad_request(
            "namespace is not allowed on this type",
        ));
    }
    review["metadata"] = json!({"creationTimestamp": null});
    let (mode, store) = (reviewer.mode, reviewer.store);
    review["status"] = match def.plural {
        "selfsubjectaccessreviews" => access(mode, store, who, &review, def.kind)?,
        "selfsubjectrulesreviews" => rules(mode, store, who, &review)?,
        "subjectaccessreviews" => {
            let subject = subject(&review)?;
            access(mode, store, &subject, &review, def.kind)?
        }
        "tokenreviews" => token(reviewer.authn, &mut review)?,
        _ => json!({"userInfo": {"username": who.user, "groups": who.groups}}),
    };
    Ok(review)
}

/// The user a SubjectAccessReview asks about: `spec.user` and `spec.groups`, exactly as given
/// (no `system:authenticated` added: the reviewer says who the subject is).
fn subject(review: &Value) -> Result<Identity, ApiError> {
    let user = str_at(review, "/spec/user").unwrap_or_default();
    let groups: Vec<&str> = review
        .pointer("/spec/groups")
        .and_then(Value::as_array)
        .map(|g| g.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if user.is_empty() && groups.is_empty() {
        return Err(ApiError::invalid_kind(
            "SubjectAccessReview.authorization.k8s.io",
            "",
            "spec.user",
            "Invalid value: \"\": at least one of user or group must be specified",
        ));
    }
    Ok(Identity::new(user, &groups))
}

/// A TokenReview's status: the token's user when it is one the server issued (with
/// `system:authenticated`, as every authenticated user), `authenticated` left out (false) and
/// an error otherwise. The test server's tokens are not bound to audiences (as static tokens),
/// so the audiences asked for, or the server's own, are those the token is valid for.
fn token(authn: &Authenticator, review: &mut Value) -> Result<Value, ApiError> {
    let token = str_at(review, "/spec/token")
        .unwrap_or_default()
        .to_string();
    if token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let audiences = match review.pointer("/spec/audiences").and_then(Value::as_array) {
        Some(a) if !a.is_empty() => json!(a),
        _ => json!(API_AUDIENCES),
    };
    Ok(match authn.identity_of_token(&token) {
        Some(id) => json!({
            "authenticated": true,
            "user": {"username": id.user, "groups": id.groups},
            "audiences": audiences,
        }),
        None => json!({"user": {}, "error": "invalid bearer token"}),
    })
}

fn access(
    mode: AuthorizationMode,
    store: &Store,
    who: &Identity,
    review: &Value,
    kind: &str,
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
                &format!("{kind}.authorization.k8s.io"),
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
