//! The Node authorizer (kube-apiserver `--authorization-mode=Node`, with the
//! AuthorizeNodeWithSelectors behaviour of 1.33) for `system:node:NAME` users in `system:nodes`:
//! a node reads only its own Node object and the pods bound to it (list and watch only with a
//! `spec.nodeName=NAME` field selector), writes Nodes and pod status for the NodeRestriction
//! admission plugin to narrow down, uses leases of its own name in `kube-node-lease`, and
//! everything else only as the static node rules (the `system:node` role) allow.
//!
//! The authorizer's graph (secrets, configmaps, volumes referenced by pods on the node) is
//! reduced to what this server stores: a pod is related to the node in its `spec.nodeName`, and
//! a secret or configmap to the node when a pod bound to it references the object by name (in
//! a volume, a projected volume, an environment variable, `envFrom`, or as an image pull
//! secret: [`pod_references`]); the unserved types have no objects, so a node never has a path
//! to one.

use serde_json::json;

use super::attributes::Attributes;
use super::rbac::PolicyRule;

/// The node authorizer's verdict: allowed, or no opinion with a reason (maybe empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeDecision {
    Allow,
    NoOpinion(String),
}

use NodeDecision::{Allow, NoOpinion};

fn no(reason: &str) -> NodeDecision {
    NoOpinion(reason.to_string())
}

/// The static rules every node has (bootstrappolicy.NodeRules, without feature-gated ones
/// that are off by default in 1.33).
pub fn node_rules() -> Vec<PolicyRule> {
    let rule = |verbs: &[&str], group: &str, resources: &[&str]| {
        PolicyRule::from_value(
            &json!({"verbs": verbs, "apiGroups": [group], "resources": resources}),
        )
    };
    const READ: &[&str] = &["get", "list", "watch"];
    vec![
        rule(&["create"], "authentication.k8s.io", &["tokenreviews"]),
        rule(
            &["create"],
            "authorization.k8s.io",
            &["subjectaccessreviews", "localsubjectaccessreviews"],
        ),
        rule(READ, "", &["services"]),
        rule(&["create", "get", "list", "watch"], "", &["nodes"]),
        rule(&["update", "patch"], "", &["nodes/status"]),
        rule(&["update", "patch"], "", &["nodes"]),
        rule(&["create", "update", "patch"], "", &["events"]),
        rule(READ, "", &["pods"]),
        rule(&["create", "delete"], "", &["pods"]),
        rule(&["update", "patch"], "", &["pods/status"]),
        rule(&["create"], "", &["pods/eviction"]),
        rule(READ, "", &["secrets", "configmaps"]),
        rule(
            &["get"],
            "",
            &["persistentvolumeclaims", "persistentvolumes"],
        ),
        rule(&["get"], "", &["endpoints"]),
        rule(
            &["create", "get", "list", "watch"],
            "certificates.k8s.io",
            &["certificatesigningrequests"],
        ),
        rule(
            &["get", "create", "update", "patch", "delete"],
            "coordination.k8s.io",
            &["leases"],
        ),
        rule(&["get"], "storage.k8s.io", &["volumeattachments"]),
        rule(&["create"], "", &["serviceaccounts/token"]),
        rule(
            &["get", "update", "patch"],
            "",
            &["persistentvolumeclaims/status"],
        ),
        rule(READ, "storage.k8s.io", &["csidrivers"]),
        rule(
            &["get", "create", "update", "patch", "delete"],
            "storage.k8s.io",
            &["csinodes"],
        ),
        rule(READ, "node.k8s.io", &["runtimeclasses"]),
    ]
}

/// What the authorizer's graph knows of the stored objects.
pub trait Graph {
    /// The node a stored pod is bound to.
    fn pod_node(&self, namespace: &str, name: &str) -> Option<String>;
    /// Whether a pod bound to `node` in `namespace` references the `resource` (`secrets` or
    /// `configmaps`) named `name`.
    fn referenced_by_pod_on(&self, node: &str, namespace: &str, resource: &str, name: &str)
    -> bool;
}

/// Whether `pod` references the `resource` (`secrets`, `configmaps`) named `name`, as the
/// Node authorizer's graph relates them: volumes (also projected sources), containers' `env`
/// (`secretKeyRef`, `configMapKeyRef`) and `envFrom`, image pull secrets.
pub fn pod_references(pod: &serde_json::Value, resource: &str, name: &str) -> bool {
    let spec = &pod["spec"];
    let is = |v: &serde_json::Value| v.as_str() == Some(name);
    let items = |v: &serde_json::Value| v.as_array().cloned().unwrap_or_default();
    let (volume_key, volume_name, projected_key, env_key, env_from_key) = match resource {
        "secrets" => (
            "secret",
            "secretName",
            "secret",
            "secretKeyRef",
            "secretRef",
        ),
        "configmaps" => (
            "configMap",
            "name",
            "configMap",
            "configMapKeyRef",
            "configMapRef",
        ),
        _ => return false,
    };
    let volumes = items(&spec["volumes"]).into_iter().any(|v| {
        is(&v[volume_key][volume_name])
            || items(&v["projected"]["sources"])
                .iter()
                .any(|s| is(&s[projected_key]["name"]))
    });
    let containers = ["containers", "initContainers", "ephemeralContainers"]
        .iter()
        .flat_map(|key| items(&spec[*key]))
        .any(|c| {
            items(&c["env"])
                .iter()
                .any(|e| is(&e["valueFrom"][env_key]["name"]))
                || items(&c["envFrom"])
                    .iter()
                    .any(|e| is(&e[env_from_key]["name"]))
        });
    let pull = resource == "secrets"
        && items(&spec["imagePullSecrets"])
            .iter()
            .any(|s| is(&s["name"]));
    volumes || containers || pull
}

/// Decides a request of the node `node` ("" for a member of `system:nodes` whose name is not
/// `system:node:NAME`) over what `graph` relates to it.
pub fn authorize(user: &str, node: &str, attrs: &Attributes, graph: &dyn Graph) -> NodeDecision {
    if node.is_empty() {
        return NoOpinion(format!("unknown node for user {user:?}"));
    }
    let no_relationship = || {
        NoOpinion(format!(
            "no relationship found between node '{node}' and this object"
        ))
    };
    let verb = attrs.verb.as_str();
    let sub = attrs.subresource.as_str();
    if attrs.resource_request {
        match (attrs.group.as_str(), attrs.resource.as_str()) {
            ("", "secrets" | "configmaps") => {
                return if !matches!(verb, "get" | "list" | "watch") {
                    no("can only read resources of this type")
                } else if !sub.is_empty() {
                    no("cannot read subresource")
                } else if attrs.namespace.is_empty() {
                    no("can only read namespaced object of this type")
                } else if attrs.name.is_empty() {
                    no("No Object name found")
                } else if graph.referenced_by_pod_on(
                    node,
                    &attrs.namespace,
                    &attrs.resource,
                    &attrs.name,
                ) {
                    Allow
                } else {
                    no_relationship()
                };
            }
            ("", "persistentvolumeclaims") if sub == "status" => {
                return if !matches!(verb, "update" | "patch") {
                    no("can only get/update/patch this type")
                } else {
                    no_relationship()
                };
            }
            ("", "persistentvolumeclaims" | "persistentvolumes")
            | ("resource.k8s.io", "resourceclaims")
            | ("storage.k8s.io", "volumeattachments") => {
                return if verb != "get" {
                    no("can only get individual resources of this type")
                } else if !sub.is_empty() {
                    no("cannot get subresource")
                } else if attrs.name.is_empty() {
                    no("No Object name found")
                } else {
                    no_relationship()
                };
            }
            ("", "serviceaccounts") => {
                return if verb != "create" || attrs.name.is_empty() {
                    no("can only create tokens for individual service accounts")
                } else if sub != "token" {
                    no("can only create token subresource of serviceaccount")
                } else {
                    no_relationship()
                };
            }
            ("coordination.k8s.io", "leases") => return own_object(node, attrs, "node lease"),
            ("storage.k8s.io", "csinodes") if !sub.is_empty() => {
                return no("cannot authorize CSINode subresources");
            }
            ("storage.k8s.io", "csinodes") => return own_object(node, attrs, "CSINode"),
            ("", "nodes") => return authorize_node(node, attrs),
            ("", "pods") => return authorize_pod(node, attrs, graph),
            _ => {}
        }
    }
    if node_rules().iter().any(|rule| rule.allows(attrs)) {
        Allow
    } else {
        no("")
    }
}

/// Leases and CSINodes: a node uses only the object named after itself.
fn own_object(node: &str, attrs: &Attributes, what: &str) -> NodeDecision {
    let verb = attrs.verb.as_str();
    if !matches!(verb, "get" | "create" | "update" | "patch" | "delete") {
        return NoOpinion(format!(
            "can only get, create, update, patch, or delete a {what}"
        ));
    }
    if what == "node lease" && attrs.namespace != "kube-node-lease" {
        return no("can only access leases in the \"kube-node-lease\" system namespace");
    }
    if verb != "create" && attrs.name != node {
        return NoOpinion(format!(
            "can only access {what} with the same name as the requesting node"
        ));
    }
    Allow
}

fn authorize_node(node: &str, attrs: &Attributes) -> NodeDecision {
    match (attrs.subresource.as_str(), attrs.verb.as_str()) {
        ("", "create" | "update" | "patch") => Allow,
        ("", "get" | "list" | "watch") => match attrs.name.as_str() {
            name if name == node => Allow,
            "" => NoOpinion(format!(
                "node '{node}' cannot read all nodes, only its own Node object"
            )),
            other => NoOpinion(format!(
                "node '{node}' cannot read '{other}', only its own Node object"
            )),
        },
        ("status", "update" | "patch") => Allow,
        _ => no(""),
    }
}

fn authorize_pod(node: &str, attrs: &Attributes, graph: &dyn Graph) -> NodeDecision {
    let related = || {
        if attrs.name.is_empty() {
            return no("No Object name found");
        }
        match graph.pod_node(&attrs.namespace, &attrs.name) {
            Some(bound) if bound == node => Allow,
            _ => NoOpinion(format!(
                "no relationship found between node '{node}' and this object"
            )),
        }
    };
    match (attrs.subresource.as_str(), attrs.verb.as_str()) {
        ("", "get") => related(),
        ("", "list" | "watch") => {
            if attrs.field_equal("spec.nodeName") == Some(node) {
                Allow
            } else if !attrs.name.is_empty() {
                related()
            } else {
                no("can only list/watch pods with spec.nodeName field selector")
            }
        }
        ("", "create" | "delete") => Allow,
        ("status", "update" | "patch") => Allow,
        ("eviction", "create") => Allow,
        _ => no(""),
    }
}
