//! The RBAC objects a new API server creates (bootstrappolicy), reduced to those that decide
//! what the test server's clients may do: `cluster-admin` bound to `system:masters`, discovery
//! and self-reviews for every authenticated user, health and version for everyone, and the
//! `system:node` role with its binding left without subjects (nodes are authorized by the Node
//! authorizer, as on a current cluster). The aggregated `admin`/`edit`/`view` roles and the
//! controllers' roles are not created.

use serde_json::{Value, json};

use super::identity::{AUTHENTICATED, MASTERS, UNAUTHENTICATED};
use super::node_authz::node_rules;

fn metadata(name: &str) -> Value {
    json!({
        "name": name,
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": metadata(name),
        "rules": rules,
    })
}

fn binding(name: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
        .collect();
    let mut binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": metadata(name),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
    });
    if !subjects.is_empty() {
        binding["subjects"] = json!(subjects);
    }
    binding
}

/// The bootstrap ClusterRoles and ClusterRoleBindings.
pub fn objects() -> Vec<Value> {
    let node_rules = serde_json::to_value(node_rules()).unwrap_or_default();
    vec![
        cluster_role(
            "cluster-admin",
            json!([
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ]),
        ),
        cluster_role(
            "system:discovery",
            json!([{"nonResourceURLs": [
                "/livez", "/readyz", "/healthz", "/version", "/version/",
                "/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*",
            ], "verbs": ["get"]}]),
        ),
        cluster_role(
            "system:basic-user",
            json!([
                {
                    "apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    "verbs": ["create"],
                },
                {
                    "apiGroups": ["authentication.k8s.io"],
                    "resources": ["selfsubjectreviews"],
                    "verbs": ["create"],
                },
            ]),
        ),
        cluster_role(
            "system:public-info-viewer",
            json!([{"nonResourceURLs": ["/livez", "/readyz", "/healthz", "/version", "/version/"], "verbs": ["get"]}]),
        ),
        cluster_role("system:node", node_rules),
        // what a delegating server needs to authenticate and authorize its own clients
        cluster_role(
            "system:auth-delegator",
            json!([
                {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
                {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
            ]),
        ),
        binding("cluster-admin", &[MASTERS]),
        binding("system:discovery", &[AUTHENTICATED]),
        binding("system:basic-user", &[AUTHENTICATED]),
        binding(
            "system:public-info-viewer",
            &[AUTHENTICATED, UNAUTHENTICATED],
        ),
        binding("system:node", &[]),
    ]
}
