//! The slim objects read what k8s-openapi's full types read from the same JSON.

use k8s_openapi::api::core::v1 as full;
use serde_json::{Value, json};

use super::*;

/// A pod as the API server lists it, with fields of every kind around the ones read.
fn full_pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-7d4b9c6f5-x2x9q",
            "namespace": "apps",
            "uid": "8f1c2c4e-0b7a-4d8e-9d1e-2f3a4b5c6d7e",
            "resourceVersion": "4711",
            "creationTimestamp": "2026-11-20T10:00:00Z",
            "deletionTimestamp": "2026-11-26T10:00:30Z",
            "deletionGracePeriodSeconds": 30,
            "labels": {"app": "web"},
            "annotations": {"kubernetes.io/config.mirror": "abc", "k8s.v1.cni.cncf.io/network-status": "[]"},
            "finalizers": ["example.com/keep"],
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4b9c6f5",
                "uid": "1b2c", "controller": true, "blockOwnerDeletion": true
            }],
            "managedFields": [{
                "manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                "time": "2026-11-20T10:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}
            }]
        },
        "spec": {
            "nodeName": "worker-0",
            "serviceAccountName": "default",
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 100,
                "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app": "web"}}}
            }]}},
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                "effect": "NoExecute", "tolerationSeconds": 300}],
            "containers": [{
                "name": "web", "image": "registry.example/web:1",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 5},
                "volumeMounts": [{"name": "cache", "mountPath": "/cache"}]
            }],
            "volumes": [
                {"name": "config", "configMap": {"name": "web", "defaultMode": 420}},
                {"name": "token", "projected": {"sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
                ]}},
                {"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}
            ]
        },
        "status": {
            "phase": "Running",
            "podIP": "10.128.2.17",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-20T10:00:05Z"}],
            "containerStatuses": [{
                "name": "web", "ready": true, "restartCount": 0, "image": "registry.example/web:1",
                "imageID": "registry.example/web@sha256:00", "started": true,
                "state": {"running": {"startedAt": "2026-11-20T10:00:03Z"}}
            }]
        }
    })
}

fn full_node() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "worker-0",
            "uid": "0d0e0f",
            "labels": {"node-role.kubernetes.io/worker": "", "kubernetes.io/hostname": "worker-0"},
            "annotations": {"machineconfiguration.openshift.io/desiredConfig": "rendered-worker-2"}
        },
        "spec": {
            "unschedulable": true,
            "providerID": "libvirt:///0d0e0f",
            "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule",
                "timeAdded": "2026-11-26T10:00:00Z"}]
        },
        "status": {
            "capacity": {"cpu": "4", "memory": "16Gi"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                "lastHeartbeatTime": "2026-11-26T10:00:00Z", "lastTransitionTime": "2026-11-20T10:00:00Z"}],
            "addresses": [{"type": "InternalIP", "address": "192.168.126.51"}],
            "nodeInfo": {"machineID": "m", "systemUUID": "s", "bootID": "b", "kernelVersion": "6.12",
                "osImage": "Fedora CoreOS 42", "containerRuntimeVersion": "cri-o://1.33",
                "kubeletVersion": "v1.33.1", "kubeProxyVersion": "", "operatingSystem": "linux",
                "architecture": "amd64"},
            "images": [{"names": ["registry.example/web:1"], "sizeBytes": 12345}]
        }
    })
}

/// Sets `pointer` in `value` (creating nothing: the parent must exist).
fn with(mut value: Value, pointer: &str, new: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    value.pointer_mut(parent).unwrap()[key] = new;
    value
}

fn pod_facts(value: &Value) -> (ObjectMeta, Option<String>, Option<bool>) {
    let slim: Pod = serde_json::from_value(value.clone()).unwrap();
    let empty_dir = slim
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .map(|v| v.iter().any(|v| v.empty_dir.is_some()));
    (slim.metadata, slim.status.and_then(|s| s.phase), empty_dir)
}

fn full_pod_facts(value: &Value) -> (ObjectMeta, Option<String>, Option<bool>) {
    let pod: full::Pod = serde_json::from_value(value.clone()).unwrap();
    let empty_dir = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .map(|v| v.iter().any(|v| v.empty_dir.is_some()));
    (pod.metadata, pod.status.and_then(|s| s.phase), empty_dir)
}

#[test]
fn pods_read_as_the_full_type_reads_them() {
    let variants = [
        full_pod(),
        with(full_pod(), "/spec/volumes/2/emptyDir", json!({})),
        with(full_pod(), "/spec/volumes/2/emptyDir", Value::Null),
        with(full_pod(), "/spec/volumes", Value::Null),
        with(full_pod(), "/spec/volumes", json!([])),
        with(full_pod(), "/status/phase", json!("Succeeded")),
        with(full_pod(), "/status", Value::Null),
        with(full_pod(), "/metadata/deletionTimestamp", Value::Null),
        with(
            full_pod(),
            "/metadata/ownerReferences/0/kind",
            json!("DaemonSet"),
        ),
        json!({"metadata": {"name": "p", "namespace": "ns"}}),
        json!({}),
    ];
    for value in variants {
        assert_eq!(pod_facts(&value), full_pod_facts(&value), "{value}");
    }
    let (meta, phase, empty_dir) = pod_facts(&full_pod());
    assert_eq!(meta.owner_references.unwrap()[0].kind, "ReplicaSet");
    assert!(meta.deletion_timestamp.is_some());
    assert_eq!(phase.as_deref(), Some("Running"));
    assert_eq!(empty_dir, Some(true));
    let (_, _, empty_dir) = pod_facts(&with(full_pod(), "/spec/volumes/2/emptyDir", Value::Null));
    assert_eq!(empty_dir, Some(false));
}

#[test]
fn nodes_read_as_the_full_type_reads_them() {
    let variants = [
        full_node(),
        with(full_node(), "/spec/unschedulable", Value::Null),
        with(full_node(), "/spec/unschedulable", json!(false)),
        with(full_node(), "/spec", Value::Null),
        with(full_node(), "/metadata/annotations", Value::Null),
        json!({"metadata": {"name": "n"}}),
    ];
    for value in variants {
        let slim: Node = serde_json::from_value(value.clone()).unwrap();
        let node: full::Node = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(slim.metadata, node.metadata, "{value}");
        assert_eq!(
            slim.spec.and_then(|s| s.unschedulable),
            node.spec.and_then(|s| s.unschedulable),
            "{value}"
        );
    }
}

#[test]
fn budgets_read_as_the_full_type_reads_them() {
    use k8s_openapi::api::policy::v1 as policy;
    let full_budget = json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "apps", "generation": 2},
        "spec": {
            "maxUnavailable": 0,
            "unhealthyPodEvictionPolicy": "IfHealthyBudget",
            "selector": {"matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]}
        },
        "status": {
            "observedGeneration": 2, "disruptionsAllowed": 0, "currentHealthy": 3,
            "desiredHealthy": 3, "expectedPods": 3,
            "disruptedPods": {"web-1": "2026-11-26T10:00:00Z"},
            "conditions": [{"type": "DisruptionAllowed", "status": "False",
                "reason": "InsufficientPods", "message": "",
                "lastTransitionTime": "2026-11-26T10:00:00Z"}]
        }
    });
    let variants = [
        full_budget.clone(),
        with(full_budget.clone(), "/status/disruptionsAllowed", json!(2)),
        with(full_budget.clone(), "/spec/selector", Value::Null),
        with(full_budget.clone(), "/status", Value::Null),
        json!({"metadata": {"name": "b"}}),
    ];
    for value in variants {
        let slim: PodDisruptionBudget = serde_json::from_value(value.clone()).unwrap();
        let budget: policy::PodDisruptionBudget = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(slim.metadata, budget.metadata, "{value}");
        assert_eq!(
            slim.spec.and_then(|s| s.selector),
            budget.spec.and_then(|s| s.selector),
            "{value}"
        );
        let numbers = |s: &PodDisruptionBudgetStatus| {
            (s.disruptions_allowed, s.current_healthy, s.desired_healthy)
        };
        assert_eq!(
            slim.status.as_ref().map(numbers),
            budget
                .status
                .map(|s| (s.disruptions_allowed, s.current_healthy, s.desired_healthy)),
            "{value}"
        );
    }
}

#[test]
fn the_api_paths_are_those_of_the_full_types() {
    use kube::Resource;
    for (slim, full) in [
        (
            Pod::url_path(&(), Some("apps")),
            full::Pod::url_path(&(), Some("apps")),
        ),
        (Node::url_path(&(), None), full::Node::url_path(&(), None)),
        (
            PodDisruptionBudget::url_path(&(), Some("apps")),
            k8s_openapi::api::policy::v1::PodDisruptionBudget::url_path(&(), Some("apps")),
        ),
    ] {
        assert_eq!(slim, full);
    }
    assert_eq!(Pod::kind(&()), full::Pod::kind(&()));
    assert_eq!(Node::api_version(&()), full::Node::api_version(&()));
}
