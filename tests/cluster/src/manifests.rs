//! The objects a scenario creates: the worker pool, MachineConfigs of files, a node's Node
//! object as its kubelet registers it, and a node's bootstrap-token Secret.

use serde_json::{Value, json};

/// The role label of the tier's pool (its `nodeSelector`).
pub const WORKER_ROLE_LABEL: &str = "node-role.kubernetes.io/worker";
/// The label that puts a MachineConfig into the worker pool.
pub const ROLE: &str = "machineconfiguration.openshift.io/role";

/// The `worker` MachineConfigPool, as the MCO installs it, with `maxUnavailable`.
pub fn worker_pool(max_unavailable: i64) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        "metadata": {"name": "worker"},
        "spec": {
            "machineConfigSelector": {"matchLabels": {ROLE: "worker"}},
            "nodeSelector": {"matchLabels": {WORKER_ROLE_LABEL: ""}},
            "maxUnavailable": max_unavailable,
        }
    })
}

/// A MachineConfig of the worker pool writing `files` (path, contents), mode 0644.
pub fn files_config(name: &str, files: &[(&str, &str)]) -> Value {
    let files: Vec<Value> = files
        .iter()
        .map(|(path, contents)| {
            json!({
                "path": path,
                "mode": 420,
                "overwrite": true,
                "contents": {"source": format!("data:,{}", percent_encoding::utf8_percent_encode(
                    contents, percent_encoding::NON_ALPHANUMERIC))},
            })
        })
        .collect();
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {ROLE: "worker"}},
        "spec": {"config": {"ignition": {"version": "3.2.0"}, "storage": {"files": files}}},
    })
}

/// The Node a kubelet registers: Ready, created now (no role label: a kubelet may not set one).
pub fn registered_node(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    })
}
