//! Which of a node's pods a drain evicts, following kubectl's drain filters with the options
//! the MCO's drain controller uses (ignore DaemonSets, delete emptyDir data, force).

use crate::objects::Pod;

/// The annotation the kubelet puts on a static pod's mirror.
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// What a drain does with a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Evict through the Eviction API and wait until it is gone.
    Evict,
    /// Already being deleted: only wait until it is gone.
    Wait,
    /// Left alone, with the reason.
    Skip(&'static str),
}

/// Decides for one pod, as kubectl's drain filters do with the MCO's options. Unmanaged pods
/// (no controller) are evicted too (the drain runs with `Force`). Pods with emptyDir volumes are
/// evicted like any other: kubectl's `--delete-emptydir-data` only permits draining them, it
/// does not change how. Finished pods (`Succeeded`, `Failed`) are removed, DaemonSet-managed
/// ones included, as every one of kubectl's filters lets them through: the Eviction API deletes
/// them without asking their budget, and a node left with them would show them after the
/// reboot as pods that ran there.
pub fn disposition(pod: &Pod) -> Disposition {
    let meta = &pod.metadata;
    if meta
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION))
    {
        return Disposition::Skip("mirror pod");
    }
    let finished = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|phase| matches!(phase, "Succeeded" | "Failed"));
    let daemonset = meta.owner_references.as_ref().is_some_and(|refs| {
        refs.iter()
            .any(|r| r.controller == Some(true) && r.kind == "DaemonSet")
    });
    if daemonset && !finished {
        return Disposition::Skip("DaemonSet-managed");
    }
    if meta.deletion_timestamp.is_some() {
        return Disposition::Wait;
    }
    Disposition::Evict
}

/// Whether the pod has an emptyDir volume (its data is lost with the pod).
pub fn has_empty_dir(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .is_some_and(|v| v.iter().any(|v| v.empty_dir.is_some()))
}

/// `namespace/name`.
pub fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn merge(base: &mut serde_json::Value, extra: &serde_json::Value) {
        match (base, extra) {
            (serde_json::Value::Object(b), serde_json::Value::Object(e)) => {
                for (k, v) in e {
                    merge(b.entry(k.clone()).or_insert(serde_json::Value::Null), v);
                }
            }
            (b, e) => *b = e.clone(),
        }
    }

    fn pod(extra: serde_json::Value) -> Pod {
        let mut base = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": []}, "status": {"phase": "Running"}});
        merge(&mut base, &extra);
        serde_json::from_value(base).unwrap()
    }

    #[test]
    fn dispositions() {
        let cases = [
            (json!({}), Disposition::Evict),
            (
                json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u", "controller": true}]}}),
                Disposition::Skip("DaemonSet-managed"),
            ),
            (
                json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "u", "controller": true}]}}),
                Disposition::Evict,
            ),
            (
                json!({"metadata": {"annotations": {MIRROR_ANNOTATION: "x"}}}),
                Disposition::Skip("mirror pod"),
            ),
            (
                json!({"status": {"phase": "Succeeded"}}),
                Disposition::Evict,
            ),
            (json!({"status": {"phase": "Failed"}}), Disposition::Evict),
            (
                json!({"status": {"phase": "Succeeded"}, "metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u", "controller": true}]}}),
                Disposition::Evict,
            ),
            (
                json!({"status": {"phase": "Failed"}, "metadata": {"annotations": {MIRROR_ANNOTATION: "x"}}}),
                Disposition::Skip("mirror pod"),
            ),
            (
                json!({"status": {"phase": "Succeeded"}, "metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}}),
                Disposition::Wait,
            ),
            (
                json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}}),
                Disposition::Wait,
            ),
            (
                json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}}),
                Disposition::Evict,
            ),
        ];
        for (extra, want) in cases {
            assert_eq!(disposition(&pod(extra.clone())), want, "{extra}");
        }
        assert!(has_empty_dir(&pod(
            json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}})
        )));
        assert!(!has_empty_dir(&pod(json!({}))));
        assert_eq!(pod_key(&pod(json!({}))), "ns/p");
    }
}
