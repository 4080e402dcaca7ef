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

/// A fleet in the middle of a rollout, for `kubectl mco` and the companion's status page: pools
/// `master` (updated) and `worker` (moving from `rendered-worker-1` to `rendered-worker-2`):
/// `worker-0` updated, `worker-1` draining and held by PodDisruptionBudget `db` on pod
/// `app/db-0` (its MachineConfigNode at `Drained`), `worker-2` Degraded; an MCD event.
pub fn rollout_in_progress() -> Vec<Value> {
    const A: &str = "machineconfiguration.openshift.io/";
    let pool = |name: &str, current: &str, target: &str, counts: [i64; 4], conditions: Value| {
        json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfigPool",
            "metadata": {"name": name},
            "spec": {
                "configuration": {"name": target},
                "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}},
                "paused": false,
            },
            "status": {
                "configuration": {"name": current},
                "machineCount": counts[0], "readyMachineCount": counts[1],
                "updatedMachineCount": counts[2], "degradedMachineCount": counts[3],
                "unavailableMachineCount": counts[0] - counts[1],
                "conditions": conditions,
            },
        })
    };
    let node = |name: &str, role: &str, annotations: Value| {
        let mut node = self::node(name);
        node["metadata"]["labels"] = json!({
            "kubernetes.io/hostname": name,
            format!("node-role.kubernetes.io/{role}"): "",
        });
        node["metadata"]["annotations"] = annotations;
        node
    };
    let drain = "failed to drain node worker-1 after 10m0s: pod app/db-0: eviction refused by PodDisruptionBudget \"db\" (Cannot evict pod as it would violate the pod's disruption budget.)";
    vec![
        pool(
            "master",
            "rendered-master-1",
            "rendered-master-1",
            [1, 1, 1, 0],
            json!([{"type": "Updated", "status": "True"}, {"type": "Updating", "status": "False"}]),
        ),
        pool(
            "worker",
            "rendered-worker-1",
            "rendered-worker-2",
            [3, 1, 1, 1],
            json!([
                {"type": "Updated", "status": "False"},
                {"type": "Updating", "status": "True"},
                {"type": "NodeDegraded", "status": "True", "reason": "1 nodes are reporting degraded status on sync", "message": "Node worker-2 is reporting: \"unexpected on-disk state validating against rendered-worker-2: content mismatch for file \\\"/etc/chrony.conf\\\"\""},
            ]),
        ),
        node(
            "master-0",
            "master",
            json!({format!("{A}currentConfig"): "rendered-master-1", format!("{A}desiredConfig"): "rendered-master-1", format!("{A}state"): "Done"}),
        ),
        node(
            "worker-0",
            "worker",
            json!({format!("{A}currentConfig"): "rendered-worker-2", format!("{A}desiredConfig"): "rendered-worker-2", format!("{A}state"): "Done"}),
        ),
        node(
            "worker-1",
            "worker",
            json!({format!("{A}currentConfig"): "rendered-worker-1", format!("{A}desiredConfig"): "rendered-worker-2", format!("{A}state"): "Working"}),
        ),
        node(
            "worker-2",
            "worker",
            json!({format!("{A}currentConfig"): "rendered-worker-1", format!("{A}desiredConfig"): "rendered-worker-2", format!("{A}state"): "Degraded",
                   format!("{A}reason"): "unexpected on-disk state validating against rendered-worker-2: content mismatch for file \"/etc/chrony.conf\""}),
        ),
        json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfigNode",
            "metadata": {"name": "worker-1"},
            "spec": {"node": {"name": "worker-1"}, "pool": {"name": "worker"}, "configVersion": {"desired": "rendered-worker-2"}},
            "status": {
                "configVersion": {"current": "rendered-worker-1", "desired": "rendered-worker-2"},
                "conditions": [
                    {"type": "UpdatePrepared", "status": "True", "reason": "UpdatePrepared", "message": "", "lastTransitionTime": "2026-01-01T10:00:00Z"},
                    {"type": "Cordoned", "status": "True", "reason": "UpdateExecutedCordoned", "message": "Cordoned node", "lastTransitionTime": "2026-01-01T10:00:01Z"},
                    {"type": "Drained", "status": "Unknown", "reason": "UpdateExecutedDrained", "message": drain, "lastTransitionTime": "2026-01-01T10:00:02Z"},
                ],
            },
        }),
        json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "worker-1.drain", "namespace": "default"},
            "involvedObject": {"kind": "Node", "name": "worker-1"},
            "reason": "Drain",
            "message": "Draining node to update config.",
            "type": "Normal",
            "source": {"component": "machineconfigdaemon", "host": "worker-1"},
            "firstTimestamp": "2026-01-01T10:00:02Z",
            "lastTimestamp": "2026-01-01T10:00:02Z",
            "count": 1,
        }),
    ]
}
