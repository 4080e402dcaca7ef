//! What a served resource type is, lookups in the catalog, and the discovery documents.

use serde_json::{Value, json};

pub use super::catalog::RESOURCES;

/// One served resource type.
#[derive(Debug)]
pub struct ResourceDef {
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    /// Has a `/status` subresource: the main resource ignores status changes, `/status` only
    /// changes status.
    pub status_subresource: bool,
    /// Keeps `metadata.generation`, bumped on changes outside metadata and status.
    pub generation: bool,
    /// A custom resource: updates must carry `metadata.resourceVersion`, create drops status
    /// when the status subresource is on.
    pub custom: bool,
    /// Field selector labels accepted besides `metadata.name` and `metadata.namespace`.
    pub fields: &'static [&'static str],
    /// The verbs discovery advertises.
    pub verbs: &'static [&'static str],
    /// A PUT without `metadata.resourceVersion` is accepted (the strategy's
    /// AllowUnconditionalUpdate); custom resources and leases refuse it.
    pub unconditional_update: bool,
    /// A PUT of a missing object creates it (AllowCreateOnUpdate: events, leases, RBAC).
    pub create_on_update: bool,
    /// A create-only review answered by the authorizer and never stored.
    pub review: bool,
}

impl ResourceDef {
    /// The singular name discovery lists (the lowercase kind for every served type).
    pub fn singular(&self) -> String {
        self.kind.to_ascii_lowercase()
    }

    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// `nodes` or `machineconfigs.machineconfiguration.openshift.io`, as in error messages.
    pub fn qualified_name(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `Pod` or `MachineConfig.machineconfiguration.openshift.io`, as in validation errors.
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.to_string()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// Prefix of this resource's URLs, e.g. `/api/v1` or `/apis/policy/v1`.
    pub fn prefix(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }
}

/// Finds a resource by group, version and plural name.
pub fn find(group: &str, version: &str, plural: &str) -> Option<usize> {
    RESOURCES
        .iter()
        .position(|r| r.group == group && r.version == version && r.plural == plural)
}

/// Finds a resource by group and kind (for objects seeded from manifests).
pub fn find_kind(api_version: &str, kind: &str) -> Option<usize> {
    RESOURCES
        .iter()
        .position(|r| r.api_version() == api_version && r.kind == kind)
}

pub fn index_of(plural: &str) -> usize {
    RESOURCES
        .iter()
        .position(|r| r.plural == plural)
        .unwrap_or_else(|| panic!("resource {plural} is not registered"))
}

/// `/api/v1` or `/apis/<group>/<version>`: the APIResourceList, or None for an unknown
/// group/version.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let defs: Vec<&ResourceDef> = RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    if defs.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for r in &defs {
        resources.push(json!({
            "name": r.plural,
            "singularName": r.singular(),
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": r.verbs,
            "shortNames": r.short_names,
        }));
        if r.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if r.plural == "pods" {
            // kubectl drain looks for exactly this entry to decide to evict rather than delete.
            resources.push(json!({
                "name": "pods/eviction",
                "singularName": "",
                "namespaced": true,
                "group": "policy",
                "version": "v1",
                "kind": "Eviction",
                "verbs": ["create"],
            }));
        }
    }
    let group_version = defs[0].api_version();
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

/// `/api`: the APIVersions document.
pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn groups() -> Vec<&'static str> {
    let mut groups: Vec<&'static str> = Vec::new();
    for r in RESOURCES.iter().filter(|r| !r.group.is_empty()) {
        if !groups.contains(&r.group) {
            groups.push(r.group);
        }
    }
    groups
}

fn group_doc(group: &str) -> Value {
    let version = RESOURCES
        .iter()
        .find(|r| r.group == group)
        .map_or("v1", |r| r.version);
    let gv = json!({"groupVersion": format!("{group}/{version}"), "version": version});
    json!({
        "name": group,
        "versions": [gv.clone()],
        "preferredVersion": gv,
    })
}

/// `/apis`: the APIGroupList.
pub fn group_list() -> Value {
    json!({
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": groups().into_iter().map(group_doc).collect::<Vec<_>>(),
    })
}

/// `/apis/<group>`: the APIGroup, or None.
pub fn group(group: &str) -> Option<Value> {
    if !groups().contains(&group) {
        return None;
    }
    let mut doc = group_doc(group);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-mco-test-apiserver",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "n/a",
        "compiler": "rustc",
        "platform": "linux/amd64",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MCO: &str = "machineconfiguration.openshift.io";

    #[test]
    fn core_list_advertises_eviction_as_policy_v1() {
        let list = resource_list("", "v1").unwrap();
        let eviction = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "pods/eviction")
            .unwrap();
        assert_eq!(eviction["group"], "policy");
        assert_eq!(eviction["version"], "v1");
        assert_eq!(eviction["kind"], "Eviction");
    }

    #[test]
    fn lookups() {
        let mc = find(MCO, "v1", "machineconfigs").unwrap();
        assert_eq!(RESOURCES[mc].short_names, &["mc"]);
        assert_eq!(
            find_kind("policy/v1", "PodDisruptionBudget"),
            Some(index_of("poddisruptionbudgets"))
        );
        assert!(find("", "v1", "replicationcontrollers").is_none());
        assert!(resource_list("nope", "v1").is_none());
        assert!(group("apps").is_some());
        assert_eq!(
            RESOURCES[index_of("machineconfigpools")].qualified_name(),
            "machineconfigpools.machineconfiguration.openshift.io"
        );
    }
}
