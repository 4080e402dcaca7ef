//! Authorization as kube-apiserver chains it with `--authorization-mode=Node,RBAC`: members of
//! `system:masters` are allowed everything, then the Node authorizer decides for node
//! identities, then RBAC; a request no authorizer allows is forbidden with the reasons they
//! gave, one per line. With authorization off (the default) everything is allowed.

use super::attributes::Attributes;
use super::identity::{Identity, MASTERS};
use super::node_authz::{self, NodeDecision};
use super::rbac::{Grant, PolicyRule, RbacView};
use super::registry::index_of;
use super::status::ApiError;
use super::store::Store;
use super::strategy::str_at;

/// Which authorizers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthorizationMode {
    /// Every authenticated request is allowed (the server's behaviour before RBAC existed).
    AlwaysAllow,
    /// `system:masters`, then Node, then RBAC; NodeRestriction admission on writes.
    NodeRbac,
}

/// The outcome of authorizing one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    /// The allowing or denying reasons, as the API server reports them.
    pub reason: String,
    /// `AlwaysAllow`, `SystemMasters`, `Node` or `RBAC` when allowed; empty when not.
    pub authorizer: &'static str,
    /// The binding and role that allowed it (RBAC only).
    pub grant: Option<Grant>,
}

fn allowed(authorizer: &'static str, reason: String, grant: Option<Grant>) -> Verdict {
    Verdict {
        allowed: true,
        reason,
        authorizer,
        grant,
    }
}

/// The Node authorizer's graph over the stored pods.
struct StoreGraph<'a>(&'a Store);

impl node_authz::Graph for StoreGraph<'_> {
    fn pod_node(&self, namespace: &str, name: &str) -> Option<String> {
        self.0
            .get(index_of("pods"), Some(namespace), name)
            .ok()
            .and_then(|pod| str_at(&pod, "/spec/nodeName").map(String::from))
    }

    fn referenced_by_pod_on(
        &self,
        node: &str,
        namespace: &str,
        resource: &str,
        name: &str,
    ) -> bool {
        let (pods, _) = self.0.list(
            index_of("pods"),
            Some(namespace),
            &Default::default(),
            &Default::default(),
        );
        pods.iter().any(|pod| {
            str_at(pod, "/spec/nodeName") == Some(node)
                && node_authz::pod_references(pod, resource, name)
        })
    }
}

pub fn authorize(
    mode: AuthorizationMode,
    store: &Store,
    who: &Identity,
    attrs: &Attributes,
) -> Verdict {
    if mode == AuthorizationMode::AlwaysAllow {
        return allowed("AlwaysAllow", String::new(), None);
    }
    if who.in_group(MASTERS) {
        return allowed("SystemMasters", String::new(), None);
    }
    let mut reasons = Vec::new();
    if let Some(node) = who.node_name() {
        match node_authz::authorize(&who.user, node, attrs, &StoreGraph(store)) {
            NodeDecision::Allow => return allowed("Node", String::new(), None),
            NodeDecision::NoOpinion(reason) if !reason.is_empty() => reasons.push(reason),
            NodeDecision::NoOpinion(_) => {}
        }
    }
    let rbac = RbacView::from_store(store).authorize(who, attrs);
    if rbac.allowed {
        return allowed("RBAC", rbac.reason, rbac.grant);
    }
    if !rbac.reason.is_empty() {
        reasons.push(rbac.reason);
    }
    Verdict {
        allowed: false,
        reason: reasons.join("\n"),
        authorizer: "",
        grant: None,
    }
}

/// Everything `who` may do in `namespace`, as a SelfSubjectRulesReview reports it: resource
/// rules, non-resource rules, whether the list is incomplete, and the evaluation error.
pub fn rules_for(
    mode: AuthorizationMode,
    store: &Store,
    who: &Identity,
    namespace: &str,
) -> (Vec<PolicyRule>, Vec<PolicyRule>, bool, String) {
    let everything = |resource: bool| PolicyRule {
        verbs: vec!["*".into()],
        api_groups: if resource { vec!["*".into()] } else { vec![] },
        resources: if resource { vec!["*".into()] } else { vec![] },
        resource_names: vec![],
        non_resource_urls: if resource { vec![] } else { vec!["*".into()] },
    };
    if mode == AuthorizationMode::AlwaysAllow {
        return (
            vec![everything(true)],
            vec![everything(false)],
            false,
            String::new(),
        );
    }
    let mut errors = Vec::new();
    let mut incomplete = false;
    if who.node_name().is_some() {
        incomplete = true;
        errors.push("node authorizer does not support user rule resolution".to_string());
    }
    let (rules, rbac_error) = RbacView::from_store(store).rules_for(who, namespace);
    if !rbac_error.is_empty() {
        errors.push(rbac_error);
    }
    let (resource, non_resource) = rules.into_iter().fold(
        (Vec::new(), Vec::new()),
        |(mut resource, mut non_resource), rule| {
            if !rule.resources.is_empty() {
                resource.push(PolicyRule {
                    non_resource_urls: vec![],
                    ..rule.clone()
                });
            }
            if !rule.non_resource_urls.is_empty() {
                non_resource.push(PolicyRule {
                    verbs: rule.verbs,
                    non_resource_urls: rule.non_resource_urls,
                    ..Default::default()
                });
            }
            (resource, non_resource)
        },
    );
    let error = match errors.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    (resource, non_resource, incomplete, error)
}

/// The 403 for a request no authorizer allowed, with the API server's message:
/// `nodes "n2" is forbidden: User "u" cannot get resource "nodes" in API group "" at the
/// cluster scope[: reasons]`.
pub fn forbidden(who: &Identity, attrs: &Attributes, reason: &str) -> ApiError {
    let user = &who.user;
    let verb = &attrs.verb;
    let what = if !attrs.resource_request {
        format!("User {user:?} cannot {verb} path {:?}", attrs.path)
    } else {
        let resource = attrs.combined_resource();
        let group = &attrs.group;
        if attrs.namespace.is_empty() {
            format!(
                "User {user:?} cannot {verb} resource {resource:?} in API group {group:?} at the cluster scope"
            )
        } else {
            format!(
                "User {user:?} cannot {verb} resource {resource:?} in API group {group:?} in the namespace {:?}",
                attrs.namespace
            )
        }
    };
    let why = if reason.is_empty() {
        what
    } else {
        format!("{what}: {reason}")
    };
    if attrs.resource_request {
        ApiError::forbidden(&attrs.group, &attrs.resource, &attrs.name, &why)
    } else {
        ApiError::forbidden("", "", "", &why)
    }
}
