//! Objects tests commonly seed: Ready nodes, running pods (plain, DaemonSet-owned, mirror,
//! with emptyDir), PodDisruptionBudgets, DaemonSets. Plain JSON, so tests can adjust them.

use serde_json::{Map, Value, json};

/// A Ready worker node.
pub fn node(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "node-role.kubernetes.io/worker": "",
            },
            "annotations": {},
        },
        "spec": {},
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}],
            "nodeInfo": {"kubeletVersion": "v1.33.0", "osImage": "test OS"},
        },
    })
}

fn labels(pairs: &[(&str, &str)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect()
}

/// A running, Ready pod on `node`, owned by a ReplicaSet named after the pod (so that drains
/// do not need `--force`).
pub fn pod(namespace: &str, name: &str, node: &str, pod_labels: &[(&str, &str)]) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels(pod_labels),
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{name}-rs"),
                "uid": format!("00000000-0000-4000-8000-{:012x}", name.len()), "controller": true,
            }],
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "main", "image": "registry.example/app:1"}],
            "terminationGracePeriodSeconds": 30,
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "main", "ready": true, "restartCount": 0, "image": "registry.example/app:1", "imageID": "", "started": true}],
        },
    })
}

/// A running pod owned by the DaemonSet `daemonset` (see [`daemonset`]).
pub fn daemonset_pod(namespace: &str, name: &str, node: &str, daemonset: &str) -> Value {
    let mut p = pod(namespace, name, node, &[("app", daemonset)]);
    p["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "apps/v1", "kind": "DaemonSet", "name": daemonset,
        "uid": "00000000-0000-4000-8000-0000000000d5", "controller": true,
    }]);
    p
}

/// A static pod's mirror on `node`.
pub fn mirror_pod(namespace: &str, name: &str, node: &str) -> Value {
    let mut p = pod(namespace, name, node, &[]);
    p["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "0123456789abcdef"});
    p["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "v1", "kind": "Node", "name": node, "uid": "00000000-0000-4000-8000-00000000000e", "controller": true,
    }]);
    p
}

/// A running pod with an emptyDir volume.
pub fn emptydir_pod(namespace: &str, name: &str, node: &str, pod_labels: &[(&str, &str)]) -> Value {
    let mut p = pod(namespace, name, node, pod_labels);
    p["spec"]["volumes"] = json!([{"name": "scratch", "emptyDir": {}}]);
    p["spec"]["containers"][0]["volumeMounts"] =
        json!([{"name": "scratch", "mountPath": "/scratch"}]);
    p
}

/// A DaemonSet (kubectl drain looks the owner of DaemonSet pods up).
pub fn daemonset(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "main", "image": "registry.example/ds:1"}]}},
        },
    })
}

/// A PodDisruptionBudget selecting `match_labels`; `budget` is e.g.
/// `json!({"minAvailable": 1})` or `json!({"maxUnavailable": "50%"})`.
pub fn pdb(namespace: &str, name: &str, match_labels: &[(&str, &str)], budget: Value) -> Value {
    let mut spec = budget;
    spec["selector"] = json!({"matchLabels": labels(match_labels)});
    json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    })
}

/// A namespace.
pub fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}
