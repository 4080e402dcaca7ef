//! Admission: the NodeRestriction plugin, which narrows what a node identity may write after
//! the authorizer let it through (even when RBAC grants more): its own Node object only (no
//! taints, no labels outside the kubelet's set), mirror pods bound to itself, status and
//! evictions of its own pods, and leases named after itself in `kube-node-lease`.
//!
//! Also here, for the same identities: the rule of the ValidatingAdmissionPolicy that
//! `manifests/node-mcn-policy.yaml` ships (no CEL runs here; `tests/kubectl_shipped_rbac.rs`
//! checks that the shipped expressions are the ones modelled): a node creates and updates
//! only the MachineConfigNode named like itself.
//!
//! Not modelled: the node UID check of mirror pods' owner references, and the plugin's rules
//! for types this server does not serve (PVC status, service account tokens, CSINodes,
//! ResourceSlices, CSRs).

use serde_json::Value;

use super::identity::Identity;
use super::registry::ResourceDef;
use super::status::ApiError;
use super::strategy::{name_of, str_at};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

/// One write as admission sees it.
pub struct AdmissionRequest<'a> {
    pub operation: Operation,
    pub def: &'a ResourceDef,
    /// `""`, `status`, `eviction`.
    pub subresource: &'a str,
    pub namespace: &'a str,
    /// The object before the write (updates, deletes; the pod of an eviction).
    pub old: Option<&'a Value>,
    /// The object the write produces (creates, updates; the Eviction of an eviction).
    pub new: Option<&'a Value>,
}

impl AdmissionRequest<'_> {
    fn name(&self) -> &str {
        self.old.or(self.new).map(name_of).unwrap_or_default()
    }

    /// admission.NewForbidden: `<resource> "<name>" is forbidden: <why>`.
    fn forbidden(&self, why: String) -> ApiError {
        ApiError::forbidden(self.def.group, self.def.plural, self.name(), &why)
    }
}

/// An admission check run under the store's lock, before a write is committed.
pub type Admit<'a> = dyn Fn(&AdmissionRequest) -> Result<(), ApiError> + Send + Sync + 'a;

/// Admits everything (test set-up, requests from the library).
pub fn admit_all(_: &AdmissionRequest) -> Result<(), ApiError> {
    Ok(())
}

/// The NodeRestriction plugin for the request's `identity`.
pub fn node_restriction(identity: &Identity, req: &AdmissionRequest) -> Result<(), ApiError> {
    let Some(node) = identity.node_name() else {
        return Ok(());
    };
    if node.is_empty() {
        return Err(req.forbidden(format!(
            "could not determine node from user {:?}",
            identity.user
        )));
    }
    match (req.def.group, req.def.plural) {
        ("", "pods") => admit_pod(node, req),
        ("", "nodes") => admit_node(node, req),
        ("machineconfiguration.openshift.io", "machineconfignodes") => {
            admit_machine_config_node(node, req)
        }
        ("coordination.k8s.io", "leases") => {
            if req.namespace != "kube-node-lease" {
                return Err(req.forbidden(
                    "can only access leases in the \"kube-node-lease\" system namespace".into(),
                ));
            }
            if req.name() != node {
                return Err(req.forbidden(
                    "can only access node lease with the same name as the requesting node".into(),
                ));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The shipped policy and its binding, named in a denial as kube-apiserver names them.
pub const MCN_POLICY: &str = "mco-agent-machineconfignode-owner";
pub const MCN_POLICY_BINDING: &str = "mco-agent-machineconfignode-owner";

/// The shipped policy's validation: `request.userInfo.username == 'system:node:' +
/// object.metadata.name` on CREATE and UPDATE (a patch is an UPDATE), denied with its
/// `messageExpression`.
fn admit_machine_config_node(node: &str, req: &AdmissionRequest) -> Result<(), ApiError> {
    let name = req.new.map(name_of).unwrap_or_default();
    if req.operation == Operation::Delete || name == node {
        return Ok(());
    }
    Err(req.forbidden(format!(
        "ValidatingAdmissionPolicy '{MCN_POLICY}' with binding '{MCN_POLICY_BINDING}' denied request: \
         updates to MCN {name} can only be done from the MCN's owner node"
    )))
}

fn bound_node(pod: Option<&Value>) -> &str {
    pod.and_then(|p| str_at(p, "/spec/nodeName"))
        .unwrap_or_default()
}

fn admit_pod(node: &str, req: &AdmissionRequest) -> Result<(), ApiError> {
    let refuse = |why: String| Err(req.forbidden(why));
    match (req.subresource, req.operation) {
        ("", Operation::Create) => admit_mirror_pod(node, req),
        ("", Operation::Delete) if bound_node(req.old) != node => refuse(format!(
            "node {node:?} can only delete pods with spec.nodeName set to itself"
        )),
        ("", Operation::Delete) => Ok(()),
        ("", Operation::Update) => refuse(format!(
            "unexpected operation \"UPDATE\", node {node:?} can only create and delete mirror pods"
        )),
        ("status", Operation::Update) => {
            if bound_node(req.old) != node {
                return refuse(format!(
                    "node {node:?} can only update pod status for pods with spec.nodeName set to itself"
                ));
            }
            let labels = |o: Option<&Value>| o.and_then(|o| o.pointer("/metadata/labels")).cloned();
            if labels(req.old) != labels(req.new) {
                return refuse(format!(
                    "node {node:?} cannot update labels through pod status"
                ));
            }
            Ok(())
        }
        ("eviction", Operation::Create) if bound_node(req.old) != node => refuse(format!(
            "node {node} can only evict pods with spec.nodeName set to itself"
        )),
        ("eviction", Operation::Create) => Ok(()),
        (sub, _) if !matches!(sub, "" | "status" | "eviction") => refuse(format!(
            "unexpected pod subresource {sub:?}, only 'status' and 'eviction' are allowed"
        )),
        (_, op) => refuse(format!("unexpected operation {:?}", op_name(op))),
    }
}

fn op_name(op: Operation) -> &'static str {
    match op {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
    }
}

fn admit_mirror_pod(node: &str, req: &AdmissionRequest) -> Result<(), ApiError> {
    let pod = req.new.unwrap_or(&Value::Null);
    let refuse = |why: String| Err(req.forbidden(why));
    if pod
        .pointer("/metadata/annotations/kubernetes.io~1config.mirror")
        .is_none()
    {
        return refuse(format!(
            "pod does not have \"kubernetes.io/config.mirror\" annotation, node {node:?} can only create mirror pods"
        ));
    }
    if bound_node(Some(pod)) != node {
        return refuse(format!(
            "node {node:?} can only create pods with spec.nodeName set to itself"
        ));
    }
    let owners = pod
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    match owners.as_slice() {
        [] => refuse(format!(
            "node {node:?} can only create pods with an owner reference set to itself"
        )),
        [owner] => {
            if owner["apiVersion"] != "v1" || owner["kind"] != "Node" || owner["name"] != node {
                return refuse(format!(
                    "node {node:?} can only create pods with an owner reference set to itself"
                ));
            }
            if owner["controller"] != true {
                return refuse(format!(
                    "node {node:?} can only create pods with a controller owner reference set to itself"
                ));
            }
            if owner["blockOwnerDeletion"] == true {
                return refuse(format!(
                    "node {node:?} must not set blockOwnerDeletion on an owner reference"
                ));
            }
            if str_at(pod, "/spec/serviceAccountName").is_some_and(|sa| !sa.is_empty()) {
                return refuse(format!(
                    "node {node:?} can not create pods that reference a service account"
                ));
            }
            Ok(())
        }
        _ => refuse(format!(
            "node {node:?} can only create pods with a single owner reference set to itself"
        )),
    }
}

fn admit_node(node: &str, req: &AdmissionRequest) -> Result<(), ApiError> {
    let requested = req.name();
    if requested != node {
        return Err(req.forbidden(format!(
            "node {node:?} is not allowed to modify node {requested:?}"
        )));
    }
    let new = req.new.unwrap_or(&Value::Null);
    let labels = |o: Option<&Value>| -> Vec<(String, String)> {
        o.and_then(|o| o.pointer("/metadata/labels"))
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default()
    };
    match req.operation {
        Operation::Create => {
            if new
                .pointer("/spec/configSource")
                .is_some_and(|c| !c.is_null())
            {
                return Err(req.forbidden(format!(
                    "node {node:?} is not allowed to create pods with a non-nil configSource"
                )));
            }
            let forbidden = forbidden_labels(&modified_labels(&labels(req.new), &[]));
            if !forbidden.is_empty() {
                return Err(req.forbidden(format!(
                    "node {node:?} is not allowed to set the following labels: {}",
                    forbidden.join(", ")
                )));
            }
        }
        Operation::Update => {
            let old = req.old.unwrap_or(&Value::Null);
            let source = |o: &Value| o.pointer("/spec/configSource").cloned();
            if source(new).is_some_and(|s| !s.is_null()) && source(new) != source(old) {
                return Err(req.forbidden(format!(
                    "node {node:?} is not allowed to update configSource to a new non-nil configSource"
                )));
            }
            let taints = |o: &Value| {
                o.pointer("/spec/taints")
                    .filter(|t| t.as_array().is_some_and(|t| !t.is_empty()))
                    .cloned()
            };
            if taints(new) != taints(old) {
                return Err(req.forbidden(format!("node {node:?} is not allowed to modify taints")));
            }
            let forbidden = forbidden_labels(&modified_labels(&labels(req.new), &labels(req.old)));
            if !forbidden.is_empty() {
                return Err(req.forbidden(format!(
                    "is not allowed to modify labels: {}",
                    forbidden.join(", ")
                )));
            }
        }
        Operation::Delete => {}
    }
    Ok(())
}

/// Keys whose value differs between `a` and `b` (added, removed or changed), sorted.
fn modified_labels(a: &[(String, String)], b: &[(String, String)]) -> Vec<String> {
    let mut keys: Vec<String> = a
        .iter()
        .filter(|kv| !b.contains(kv))
        .chain(b.iter().filter(|kv| !a.contains(kv)))
        .map(|(k, _)| k.clone())
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

fn label_namespace(key: &str) -> &str {
    key.split_once('/').map_or("", |(ns, _)| ns)
}

fn in_namespace(namespace: &str, domain: &str) -> bool {
    namespace == domain || namespace.ends_with(&format!(".{domain}"))
}

/// The labels a kubelet sets itself (k8s.io/kubelet's well-known labels and namespaces).
fn is_kubelet_label(key: &str) -> bool {
    const KUBELET_LABELS: &[&str] = &[
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
    ];
    let ns = label_namespace(key);
    KUBELET_LABELS.contains(&key)
        || in_namespace(ns, "kubelet.kubernetes.io")
        || in_namespace(ns, "node.kubernetes.io")
}

/// Of the modified labels, those a node may not add, remove or change.
fn forbidden_labels(modified: &[String]) -> Vec<String> {
    modified
        .iter()
        .filter(|key| {
            let ns = label_namespace(key);
            let kubernetes = in_namespace(ns, "kubernetes.io") || in_namespace(ns, "k8s.io");
            in_namespace(ns, "node-restriction.kubernetes.io")
                || (kubernetes && !is_kubelet_label(key))
        })
        .cloned()
        .collect()
}
