//! The RBAC authorizer over the stored Roles, ClusterRoles and their bindings, with the
//! upstream matching rules: verbs, API groups and resources with `*`, `*/subresource`,
//! resourceNames, nonResourceURLs with a trailing `*`; ClusterRoleBindings everywhere,
//! RoleBindings (to a Role or a ClusterRole) in their namespace; subjects by user, group or
//! service account. Aggregated ClusterRoles (aggregationRule) are not modelled.

use serde_json::Value;

use super::attributes::Attributes;
use super::identity::Identity;
use super::registry::index_of;
use super::store::Store;
use super::strategy::{name_of, namespace_of, str_at};

/// One rule of a Role or ClusterRole.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    pub verbs: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    #[serde(rename = "nonResourceURLs", skip_serializing_if = "Vec::is_empty")]
    pub non_resource_urls: Vec<String>,
}

fn strings(value: &Value, key: &str) -> Vec<String> {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

impl PolicyRule {
    pub fn from_value(rule: &Value) -> Self {
        Self {
            verbs: strings(rule, "verbs"),
            api_groups: strings(rule, "apiGroups"),
            resources: strings(rule, "resources"),
            resource_names: strings(rule, "resourceNames"),
            non_resource_urls: strings(rule, "nonResourceURLs"),
        }
    }

    /// The rules of a Role or ClusterRole object.
    pub fn all_of(role: &Value) -> Vec<Self> {
        role.get("rules")
            .and_then(Value::as_array)
            .map(|rules| rules.iter().map(Self::from_value).collect())
            .unwrap_or_default()
    }

    /// Whether this rule allows the request (rbac.RuleAllows).
    pub fn allows(&self, attrs: &Attributes) -> bool {
        let any = |list: &[String], want: &str| list.iter().any(|v| v == "*" || v == want);
        if !any(&self.verbs, &attrs.verb) {
            return false;
        }
        if !attrs.resource_request {
            return self.non_resource_urls.iter().any(|url| {
                url == "*"
                    || *url == attrs.path
                    || url
                        .strip_suffix('*')
                        .is_some_and(|prefix| attrs.path.starts_with(prefix))
            });
        }
        let combined = attrs.combined_resource();
        let resource_matches = self.resources.iter().any(|r| {
            r == "*"
                || *r == combined
                || (!attrs.subresource.is_empty()
                    && r.strip_prefix("*/") == Some(attrs.subresource.as_str()))
        });
        any(&self.api_groups, &attrs.group)
            && resource_matches
            && (self.resource_names.is_empty() || self.resource_names.contains(&attrs.name))
    }
}

/// Where an allowing rule came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    pub binding_kind: String,
    pub binding: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub binding_namespace: String,
    pub role_kind: String,
    pub role: String,
}

impl Grant {
    /// The RBAC authorizer's description: `ClusterRoleBinding "b" of ClusterRole "r" to Group "g"`.
    fn describe(&self, subject: &Value) -> String {
        let kind = str_at(subject, "/kind").unwrap_or_default();
        let mut name = str_at(subject, "/name").unwrap_or_default().to_string();
        if kind == "ServiceAccount" {
            // kube's describeSubject: name, then namespace (the binding's when left out)
            let ns = str_at(subject, "/namespace")
                .filter(|ns| !ns.is_empty())
                .unwrap_or(&self.binding_namespace);
            name = format!("{name}/{ns}");
        }
        let binding = if self.binding_namespace.is_empty() {
            self.binding.clone()
        } else {
            format!("{}/{}", self.binding, self.binding_namespace)
        };
        format!(
            "{} {binding:?} of {} {:?} to {kind} {name:?}",
            self.binding_kind, self.role_kind, self.role
        )
    }
}

/// A consistent view of the stored RBAC objects for one decision.
pub struct RbacView {
    cluster_roles: Vec<Value>,
    roles: Vec<Value>,
    cluster_bindings: Vec<Value>,
    bindings: Vec<Value>,
}

/// The RBAC authorizer's answer: allowed with the grant, or not with a reason (only when role
/// references could not be resolved, as upstream).
pub struct RbacDecision {
    pub allowed: bool,
    pub reason: String,
    pub grant: Option<Grant>,
}

impl RbacView {
    pub fn from_store(store: &Store) -> Self {
        let all = |plural: &str| {
            store
                .list(
                    index_of(plural),
                    None,
                    &Default::default(),
                    &Default::default(),
                )
                .0
        };
        Self {
            cluster_roles: all("clusterroles"),
            roles: all("roles"),
            cluster_bindings: all("clusterrolebindings"),
            bindings: all("rolebindings"),
        }
    }

    /// Visits every rule that applies to `who` in `namespace` (cluster bindings first, then the
    /// namespace's role bindings) until `visit` returns false; unresolvable role references
    /// are collected as errors.
    fn visit(
        &self,
        who: &Identity,
        namespace: &str,
        visit: &mut dyn FnMut(&Grant, &Value, &PolicyRule) -> bool,
        errors: &mut Vec<String>,
    ) {
        let scoped = self
            .bindings
            .iter()
            .filter(|b| !namespace.is_empty() && namespace_of(b) == namespace);
        for binding in self.cluster_bindings.iter().chain(scoped) {
            let binding_ns = namespace_of(binding);
            let Some(subject) = applicable_subject(who, binding, binding_ns) else {
                continue;
            };
            let role_kind = str_at(binding, "/roleRef/kind").unwrap_or_default();
            let role_name = str_at(binding, "/roleRef/name").unwrap_or_default();
            let role = match role_kind {
                "ClusterRole" => self.cluster_roles.iter().find(|r| name_of(r) == role_name),
                _ => self
                    .roles
                    .iter()
                    .find(|r| name_of(r) == role_name && namespace_of(r) == binding_ns),
            };
            let Some(role) = role else {
                errors.push(format!(
                    "{}.rbac.authorization.k8s.io {role_name:?} not found",
                    role_kind.to_ascii_lowercase()
                ));
                continue;
            };
            let grant = Grant {
                binding_kind: if binding_ns.is_empty() {
                    "ClusterRoleBinding".into()
                } else {
                    "RoleBinding".into()
                },
                binding: name_of(binding).to_string(),
                binding_namespace: binding_ns.to_string(),
                role_kind: role_kind.to_string(),
                role: role_name.to_string(),
            };
            for rule in PolicyRule::all_of(role) {
                if !visit(&grant, subject, &rule) {
                    return;
                }
            }
        }
    }

    pub fn authorize(&self, who: &Identity, attrs: &Attributes) -> RbacDecision {
        let mut allowed: Option<(Grant, String)> = None;
        let mut errors = Vec::new();
        self.visit(
            who,
            &attrs.namespace,
            &mut |grant, subject, rule| {
                if rule.allows(attrs) {
                    allowed = Some((grant.clone(), grant.describe(subject)));
                    return false;
                }
                true
            },
            &mut errors,
        );
        match allowed {
            Some((grant, description)) => RbacDecision {
                allowed: true,
                reason: format!("RBAC: allowed by {description}"),
                grant: Some(grant),
            },
            None => RbacDecision {
                allowed: false,
                reason: rbac_errors(&errors),
                grant: None,
            },
        }
    }

    /// Every rule `who` has in `namespace`, and the evaluation error (SelfSubjectRulesReview).
    pub fn rules_for(&self, who: &Identity, namespace: &str) -> (Vec<PolicyRule>, String) {
        let mut rules = Vec::new();
        let mut errors = Vec::new();
        self.visit(
            who,
            namespace,
            &mut |_, _, rule| {
                rules.push(rule.clone());
                true
            },
            &mut errors,
        );
        (rules, aggregate(&errors))
    }
}

/// utilerrors.NewAggregate's message: one error as is, several in brackets.
fn aggregate(errors: &[String]) -> String {
    match errors {
        [] => String::new(),
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

fn rbac_errors(errors: &[String]) -> String {
    if errors.is_empty() {
        String::new()
    } else {
        format!("RBAC: {}", aggregate(errors))
    }
}

/// The first subject of `binding` that names `who` (service accounts of a RoleBinding default
/// to its namespace).
fn applicable_subject<'a>(
    who: &Identity,
    binding: &'a Value,
    binding_ns: &str,
) -> Option<&'a Value> {
    binding
        .get("subjects")
        .and_then(Value::as_array)?
        .iter()
        .find(|subject| {
            let name = str_at(subject, "/name").unwrap_or_default();
            match str_at(subject, "/kind").unwrap_or_default() {
                "User" => who.user == name,
                "Group" => who.in_group(name),
                "ServiceAccount" => {
                    let ns = str_at(subject, "/namespace")
                        .filter(|ns| !ns.is_empty())
                        .unwrap_or(binding_ns);
                    !ns.is_empty() && who.service_account_name() == Some((ns, name))
                }
                _ => false,
            }
        })
}
