//! The audit of authorization decisions: one event per request (who, the attributes, the
//! verdict and the binding that allowed it, the answer's status code), kept in memory for the
//! library and optionally appended to a file as JSON lines (`--audit-log`). From the events,
//! [`unused_permissions`] lists the permissions of RBAC rules no request needed, so that a test
//! can fail on a rule no code uses.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::attributes::Attributes;
use super::authz::Verdict;
use super::identity::Identity;
use super::rbac::{Grant, PolicyRule};

/// One authorized (or refused) request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    pub user: String,
    pub groups: Vec<String>,
    /// The authenticated user who impersonated `user`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impersonated_by: Option<String>,
    pub verb: String,
    pub api_group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// The path of a non-resource request (empty for resource requests).
    pub non_resource_path: String,
    pub allowed: bool,
    /// `AlwaysAllow`, `SystemMasters`, `Node`, `RBAC`, or empty when refused.
    pub authorizer: String,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<Grant>,
    /// The HTTP status of the answer.
    pub code: u16,
}

impl AuditEvent {
    pub fn new(
        who: &Identity,
        impersonated_by: Option<&Identity>,
        attrs: &Attributes,
        verdict: &Verdict,
        code: u16,
    ) -> Self {
        Self {
            user: who.user.clone(),
            groups: who.groups.clone(),
            impersonated_by: impersonated_by.map(|i| i.user.clone()),
            verb: attrs.verb.clone(),
            api_group: attrs.group.clone(),
            resource: attrs.resource.clone(),
            subresource: attrs.subresource.clone(),
            namespace: attrs.namespace.clone(),
            name: attrs.name.clone(),
            non_resource_path: if attrs.resource_request {
                String::new()
            } else {
                attrs.path.clone()
            },
            allowed: verdict.allowed,
            authorizer: verdict.authorizer.to_string(),
            reason: verdict.reason.clone(),
            grant: verdict.grant.clone(),
            code,
        }
    }

    /// The attributes the event was decided on.
    pub fn attributes(&self) -> Attributes {
        if !self.non_resource_path.is_empty() {
            return Attributes::non_resource(&self.verb, &self.non_resource_path);
        }
        let mut attrs = Attributes::resource(
            &self.verb,
            &self.api_group,
            &self.resource,
            &self.namespace,
            &self.name,
        );
        attrs.subresource = self.subresource.clone();
        attrs
    }

    /// `verb resource[/sub][.group]` or `verb /path`: the permission the request used.
    pub fn permission(&self) -> String {
        if !self.non_resource_path.is_empty() {
            return format!("{} {}", self.verb, self.non_resource_path);
        }
        let mut resource = self.resource.clone();
        if !self.subresource.is_empty() {
            resource = format!("{resource}/{}", self.subresource);
        }
        if !self.api_group.is_empty() {
            resource = format!("{resource}.{}", self.api_group);
        }
        format!("{} {resource}", self.verb)
    }
}

const KEPT: usize = 100_000;

/// The server's audit trail.
#[derive(Default)]
pub struct AuditLog {
    events: Mutex<VecDeque<AuditEvent>>,
    file: Option<Mutex<File>>,
}

impl AuditLog {
    /// An audit log that also appends JSON lines to `path` (created or truncated).
    pub fn to_file(path: &Path) -> Result<Self> {
        let file = File::create(path).with_context(|| format!("creating audit log {path:?}"))?;
        Ok(Self {
            events: Mutex::default(),
            file: Some(Mutex::new(file)),
        })
    }

    pub fn record(&self, event: AuditEvent) {
        if let Some(file) = &self.file {
            let mut line = serde_json::to_vec(&event).unwrap_or_default();
            line.push(b'\n');
            // The in-memory copy is the reference; a full disk only loses the file copy.
            let _written = file
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .write_all(&line);
        }
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        if events.len() >= KEPT {
            events.pop_front();
        }
        events.push_back(event);
    }

    pub fn events(&self) -> Vec<AuditEvent> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }
}

/// Reads an audit log file written with `--audit-log`.
pub fn read_audit_log(path: &Path) -> Result<Vec<AuditEvent>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path:?}"))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line)
                .with_context(|| format!("{path:?} line {}: not an audit event", i + 1))
        })
        .collect()
}

/// The permissions of `rules` (each verb × API group × resource × resource name, or verb ×
/// non-resource URL; wildcards kept as one permission) that none of `events` used: an event
/// uses a permission when it was allowed by RBAC or with authorization off (a request the
/// Node authorizer or `system:masters` allowed needs no RBAC rule) and the permission alone
/// allows it. Each is reported as `verb resource[.group] [name]` or `verb /url`.
pub fn unused_permissions(rules: &[PolicyRule], events: &[AuditEvent]) -> Vec<String> {
    let used: Vec<Attributes> = events
        .iter()
        .filter(|e| e.allowed && matches!(e.authorizer.as_str(), "RBAC" | "AlwaysAllow"))
        .map(AuditEvent::attributes)
        .collect();
    let mut unused = Vec::new();
    for rule in rules {
        for single in split(rule) {
            if !used.iter().any(|attrs| single.allows(attrs)) {
                unused.push(describe(&single));
            }
        }
    }
    unused.dedup();
    unused
}

fn split(rule: &PolicyRule) -> Vec<PolicyRule> {
    let one = |v: &String| vec![v.clone()];
    let mut out = Vec::new();
    for verb in &rule.verbs {
        for url in &rule.non_resource_urls {
            out.push(PolicyRule {
                verbs: one(verb),
                non_resource_urls: one(url),
                ..Default::default()
            });
        }
        for group in &rule.api_groups {
            for resource in &rule.resources {
                let names: Vec<Vec<String>> = if rule.resource_names.is_empty() {
                    vec![vec![]]
                } else {
                    rule.resource_names.iter().map(one).collect()
                };
                for resource_names in names {
                    out.push(PolicyRule {
                        verbs: one(verb),
                        api_groups: one(group),
                        resources: one(resource),
                        resource_names,
                        non_resource_urls: vec![],
                    });
                }
            }
        }
    }
    out
}

fn describe(single: &PolicyRule) -> String {
    let verb = &single.verbs[0];
    if let Some(url) = single.non_resource_urls.first() {
        return format!("{verb} {url}");
    }
    let group = &single.api_groups[0];
    let mut what = single.resources[0].clone();
    if !group.is_empty() {
        what = format!("{what}.{group}");
    }
    match single.resource_names.first() {
        Some(name) => format!("{verb} {what} {name}"),
        None => format!("{verb} {what}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(verb: &str, group: &str, resource: &str, name: &str, authorizer: &str) -> AuditEvent {
        let attrs = Attributes::resource(verb, group, resource, "", name);
        let verdict = Verdict {
            allowed: true,
            reason: String::new(),
            authorizer: match authorizer {
                "Node" => "Node",
                _ => "RBAC",
            },
            grant: None,
        };
        AuditEvent::new(&Identity::node("n1"), None, &attrs, &verdict, 200)
    }

    #[test]
    fn rules_no_request_needed_are_reported() {
        let rules: Vec<PolicyRule> = [
            json!({"apiGroups": ["machineconfiguration.openshift.io"], "resources": ["machineconfigs"], "verbs": ["get", "list", "watch"]}),
            json!({"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}),
            json!({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a", "b"], "verbs": ["get"]}),
            json!({"nonResourceURLs": ["/healthz"], "verbs": ["get"]}),
        ]
        .iter()
        .map(PolicyRule::from_value)
        .collect();
        let events = [
            event(
                "get",
                "machineconfiguration.openshift.io",
                "machineconfigs",
                "m",
                "RBAC",
            ),
            event(
                "watch",
                "machineconfiguration.openshift.io",
                "machineconfigs",
                "",
                "RBAC",
            ),
            // The Node authorizer allowed this one: the RBAC rule for it is not needed.
            event("get", "", "nodes", "n1", "Node"),
            event("get", "", "configmaps", "a", "RBAC"),
        ];
        assert_eq!(
            unused_permissions(&rules, &events),
            [
                "list machineconfigs.machineconfiguration.openshift.io",
                "get nodes",
                "get configmaps b",
                "get /healthz",
            ]
        );
        assert_eq!(
            events[0].permission(),
            "get machineconfigs.machineconfiguration.openshift.io"
        );
    }
}
