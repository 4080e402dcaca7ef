//! The repository's `manifests/` as tests use them: the objects `kubectl apply -k manifests/`
//! creates (the kustomization's `resources`, read as `kubectl apply -f` reads them), the RBAC
//! among them loaded into the API test server, and the identities they give each binary.
//! Tests load the shipped files themselves, so a missing or superfluous rule there fails a test.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::apiserver::{AuditEvent, PolicyRule, TestApiServer, manifests, unused_permissions};

/// The companion's namespace and service account (`manifests/companion-rbac.yaml`).
pub const COMPANION_NAMESPACE: &str = "mco-companion";
pub const COMPANION_SERVICE_ACCOUNT: &str = "mco-companion";
/// The ClusterRoles of the companion and of the nodes' agents.
pub const COMPANION_ROLE: &str = "mco-companion";
pub const NODE_ROLE: &str = "mco-agent-node";

/// Kinds the API test server takes from the manifests: the RBAC objects and the namespace they
/// live in (the Deployment, Service, ServiceAccount and ConfigMap run nothing here).
const LOADED_KINDS: [&str; 5] = [
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
];

/// `manifests/` of this repository.
pub fn manifests_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../manifests")
}

/// The ClusterRole of `manifests/api-source/`: nodes read MachineConfigs, for agents that
/// follow the API server where no per-node configs exist (not part of `manifests/`'s own
/// kustomization).
pub const NODE_API_SOURCE_ROLE: &str = "mco-agent-node-api-source";

/// Every object of the kustomization's resources, in its order.
pub fn objects() -> Result<Vec<Value>> {
    objects_of(&manifests_dir())
}

/// Every object of `manifests/api-source/` (`kubectl apply -k manifests/api-source/`).
pub fn api_source_objects() -> Result<Vec<Value>> {
    objects_of(&manifests_dir().join("api-source"))
}

/// Every object of the resources of the kustomization in `dir`, in its order.
fn objects_of(dir: &std::path::Path) -> Result<Vec<Value>> {
    let dir = dir.to_path_buf();
    let path = dir.join("kustomization.yaml");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path:?}"))?;
    let kustomization = manifests::parse(&text)?;
    let resources = kustomization
        .first()
        .and_then(|k| k.get("resources"))
        .and_then(Value::as_array)
        .with_context(|| format!("{path:?} lists no resources"))?;
    let mut objects = Vec::new();
    for resource in resources {
        let name = resource
            .as_str()
            .with_context(|| format!("{path:?}: resource {resource} is not a file name"))?;
        let file = dir.join(name);
        let text = std::fs::read_to_string(&file).with_context(|| format!("reading {file:?}"))?;
        objects.extend(manifests::parse(&text).with_context(|| format!("parsing {file:?}"))?);
    }
    Ok(objects)
}

/// The shipped object of `kind` named `name`.
pub fn object(kind: &str, name: &str) -> Result<Value> {
    let found = objects()?
        .into_iter()
        .find(|o| o["kind"].as_str() == Some(kind) && o["metadata"]["name"].as_str() == Some(name));
    match found {
        Some(object) => Ok(object),
        None => bail!("manifests/ has no {kind} {name}"),
    }
}

/// The rules of the shipped ClusterRole `name` (of `manifests/` or `manifests/api-source/`).
pub fn cluster_role_rules(name: &str) -> Result<Vec<PolicyRule>> {
    let optional = api_source_objects()?.into_iter().find(|o| {
        o["kind"].as_str() == Some("ClusterRole") && o["metadata"]["name"].as_str() == Some(name)
    });
    match optional {
        Some(role) => Ok(PolicyRule::all_of(&role)),
        None => Ok(PolicyRule::all_of(&object("ClusterRole", name)?)),
    }
}

/// Creates the objects of `manifests/api-source/` in `server`; returns how many.
pub fn load_api_source_rbac(server: &TestApiServer) -> Result<usize> {
    let objects = api_source_objects()?;
    for object in &objects {
        let (kind, name) = (object["kind"].clone(), object["metadata"]["name"].clone());
        server
            .seed(object.clone())
            .with_context(|| format!("creating {kind} {name} from manifests/api-source/"))?;
    }
    Ok(objects.len())
}

/// The shipped RBAC objects and the namespace they live in, in the kustomization's order.
pub fn rbac_objects() -> Result<Vec<Value>> {
    let rbac: Vec<Value> = objects()?
        .into_iter()
        .filter(|o| LOADED_KINDS.contains(&o["kind"].as_str().unwrap_or_default()))
        .collect();
    if rbac.is_empty() {
        bail!("manifests/ holds no RBAC objects");
    }
    Ok(rbac)
}

/// The shipped RBAC objects as one multi-document file, for `mco-test-apiserver --seed`.
pub fn rbac_seed() -> Result<String> {
    let documents: Vec<String> = rbac_objects()?.iter().map(Value::to_string).collect();
    Ok(documents.join("\n---\n") + "\n")
}

/// Creates the shipped RBAC objects (and their namespace) in `server`; returns how many.
pub fn load_rbac(server: &TestApiServer) -> Result<usize> {
    let objects = rbac_objects()?;
    for object in &objects {
        let (kind, name) = (object["kind"].clone(), object["metadata"]["name"].clone());
        server
            .seed(object.clone())
            .with_context(|| format!("creating {kind} {name} from manifests/"))?;
    }
    Ok(objects.len())
}

/// Writes a kubeconfig for the companion's service account into `server`'s directory
/// (`companion.kubeconfig`) and returns its path.
pub fn companion_kubeconfig(server: &TestApiServer) -> Result<PathBuf> {
    let kubeconfig = server.dir().join("companion.kubeconfig");
    server
        .write_service_account_kubeconfig(
            &kubeconfig,
            COMPANION_NAMESPACE,
            COMPANION_SERVICE_ACCOUNT,
        )
        .context("writing the companion's kubeconfig")?;
    Ok(kubeconfig)
}

/// What one identity's requests show about the shipped ClusterRole that grants it permissions.
#[derive(Debug, Default)]
pub struct RoleUse {
    /// Every permission the identity's allowed requests used, as `verb resource[.group]`
    /// (whoever allowed them: the Node authorizer or RBAC), sorted.
    pub used: Vec<String>,
    /// Permissions of the role that none of the identity's requests needed.
    pub unused: Vec<String>,
    /// The identity's refused requests: `verb resource[.group] name: reason`.
    pub refused: Vec<String>,
}

/// Checks the audit `events` of `user` against the shipped ClusterRole `role`.
pub fn role_use(events: &[AuditEvent], user: &str, role: &str) -> Result<RoleUse> {
    let mine: Vec<AuditEvent> = events.iter().filter(|e| e.user == user).cloned().collect();
    let mut used: Vec<String> = mine
        .iter()
        .filter(|e| e.allowed)
        .map(|e| format!("{} (by {})", e.permission(), e.authorizer))
        .collect();
    used.sort();
    used.dedup();
    let refused = mine
        .iter()
        .filter(|e| !e.allowed)
        .map(|e| format!("{} {}: {}", e.permission(), e.name, e.reason))
        .collect();
    Ok(RoleUse {
        used,
        unused: unused_permissions(&cluster_role_rules(role)?, &mine),
        refused,
    })
}
