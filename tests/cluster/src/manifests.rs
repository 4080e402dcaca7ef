//! The objects a scenario creates: the worker pool, MachineConfigs of files, a node's Node
//! object as its kubelet registers it, and a node's bootstrap-token Secret.

use serde_json::{Value, json};

/// The role label of the tier's pool (its `nodeSelector`).
pub const WORKER_ROLE_LABEL: &str = "node-role.kubernetes.io/worker";
/// The label that puts a MachineConfig into the worker pool.
pub const ROLE: &str = "machineconfiguration.openshift.io/role";

/// The `worker` MachineConfigPool, as the MCO installs it, with `maxUnavailable`.
pub fn worker_pool(max_unavailable: i64) -> Value {
    pool(
        "worker",
        WORKER_ROLE_LABEL,
        "worker",
        json!(max_unavailable),
    )
}

/// A MachineConfigPool `name` of the nodes labelled `node_label` and the MachineConfigs whose
/// role is `role`; `max_unavailable` a count or a percentage (`"10%"`).
pub fn pool(name: &str, node_label: &str, role: &str, max_unavailable: Value) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        "metadata": {"name": name},
        "spec": {
            "machineConfigSelector": {"matchLabels": {ROLE: role}},
            "nodeSelector": {"matchLabels": {node_label: ""}},
            "maxUnavailable": max_unavailable,
        }
    })
}

/// A MachineConfig of the worker pool writing `files` (path, contents), mode 0644.
pub fn files_config(name: &str, files: &[(&str, &str)]) -> Value {
    role_files_config("worker", name, files)
}

/// A MachineConfig of the pools of `role` writing `files` (path, contents), mode 0644.
pub fn role_files_config(role: &str, name: &str, files: &[(&str, &str)]) -> Value {
    let files: Vec<(&str, String)> = files
        .iter()
        .map(|(path, contents)| {
            let encoded =
                percent_encoding::utf8_percent_encode(contents, percent_encoding::NON_ALPHANUMERIC);
            (*path, format!("data:,{encoded}"))
        })
        .collect();
    machine_config(role, name, &files)
}

/// A MachineConfig of the pools of `role` writing `bytes` to `path` (a base64 data URL).
pub fn role_binary_config(role: &str, name: &str, path: &str, bytes: &[u8]) -> Value {
    use base64::Engine;
    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
    machine_config(role, name, &[(path, format!("data:;base64,{data}"))])
}

/// A MachineConfig of `role` writing each (path, data URL), mode 0644.
fn machine_config(role: &str, name: &str, files: &[(&str, String)]) -> Value {
    let files: Vec<Value> = files
        .iter()
        .map(|(path, source)| {
            json!({"path": path, "mode": 420, "overwrite": true, "contents": {"source": source}})
        })
        .collect();
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {ROLE: role}},
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
