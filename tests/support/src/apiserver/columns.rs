//! The columns `kubectl get` shows for each served type: the API server's printers for
//! built-in types, the CRDs' `additionalPrinterColumns` (openshift/api) for the MCO's types.
//! A CRD column whose path is missing in an object is a null cell, as the apiextensions server
//! sends it; `date` columns are ages.

use serde_json::{Value, json};

use super::registry::ResourceDef;
use super::strategy::str_at;
use super::table::age;

/// One column: its header, OpenAPI type, priority (0 = always, 1 = `-o wide`) and cell.
pub struct Column {
    pub name: &'static str,
    pub kind: &'static str,
    pub priority: u8,
    pub cell: fn(&Value) -> Value,
}

const fn col(name: &'static str, kind: &'static str, cell: fn(&Value) -> Value) -> Column {
    Column {
        name,
        kind,
        priority: 0,
        cell,
    }
}

const fn wide(name: &'static str, cell: fn(&Value) -> Value) -> Column {
    Column {
        name,
        kind: "string",
        priority: 1,
        cell,
    }
}

const NAME: Column = col("Name", "string", |o| json!(str_at(o, "/metadata/name")));
const AGE: Column = col("Age", "string", |o| json!(age(o)));
/// A CRD's `date` column on `.metadata.creationTimestamp`.
const CRD_AGE: Column = col("Age", "date", |o| json!(age(o)));

pub fn columns(def: &ResourceDef) -> Vec<Column> {
    match def.plural {
        "nodes" => vec![
            NAME,
            col("Status", "string", node_status),
            col("Roles", "string", node_roles),
            AGE,
            col("Version", "string", |o| {
                json!(str_at(o, "/status/nodeInfo/kubeletVersion").unwrap_or(""))
            }),
        ],
        "pods" => vec![
            NAME,
            col("Ready", "string", pod_ready),
            col("Status", "string", |o| {
                if o.pointer("/metadata/deletionTimestamp").is_some() {
                    json!("Terminating")
                } else {
                    json!(str_at(o, "/status/phase").unwrap_or("Pending"))
                }
            }),
            col("Restarts", "integer", |_| json!(0)),
            AGE,
        ],
        "namespaces" => vec![
            NAME,
            col("Status", "string", |o| {
                json!(str_at(o, "/status/phase").unwrap_or(""))
            }),
            AGE,
        ],
        "poddisruptionbudgets" => vec![
            NAME,
            col("Min Available", "string", |o| {
                text(o.pointer("/spec/minAvailable"))
            }),
            col("Max Unavailable", "string", |o| {
                text(o.pointer("/spec/maxUnavailable"))
            }),
            col("Allowed Disruptions", "integer", |o| {
                o.pointer("/status/disruptionsAllowed")
                    .cloned()
                    .unwrap_or(json!(0))
            }),
            AGE,
        ],
        "events" => vec![
            col("Last Seen", "string", |o| {
                json!(str_at(o, "/lastTimestamp").unwrap_or(""))
            }),
            col("Type", "string", |o| {
                json!(str_at(o, "/type").unwrap_or(""))
            }),
            col("Reason", "string", |o| {
                json!(str_at(o, "/reason").unwrap_or(""))
            }),
            col("Object", "string", |o| {
                json!(format!(
                    "{}/{}",
                    str_at(o, "/involvedObject/kind")
                        .unwrap_or("")
                        .to_lowercase(),
                    str_at(o, "/involvedObject/name").unwrap_or("")
                ))
            }),
            col("Message", "string", |o| {
                json!(str_at(o, "/message").unwrap_or(""))
            }),
        ],
        "secrets" => vec![
            NAME,
            col("Type", "string", |o| {
                json!(str_at(o, "/type").unwrap_or(""))
            }),
            col("Data", "integer", |o| {
                json!(
                    o.get("data")
                        .and_then(Value::as_object)
                        .map_or(0, |d| d.len())
                )
            }),
            AGE,
        ],
        "leases" => vec![
            NAME,
            col("Holder", "string", |o| {
                json!(str_at(o, "/spec/holderIdentity").unwrap_or(""))
            }),
            AGE,
        ],
        "clusterroles" | "roles" => vec![
            NAME,
            col("Created At", "date", |o| {
                json!(str_at(o, "/metadata/creationTimestamp").unwrap_or(""))
            }),
        ],
        "clusterrolebindings" | "rolebindings" => vec![
            NAME,
            col("Role", "string", |o| {
                json!(format!(
                    "{}/{}",
                    str_at(o, "/roleRef/kind").unwrap_or(""),
                    str_at(o, "/roleRef/name").unwrap_or("")
                ))
            }),
            AGE,
            wide("Users", |o| subjects(o, "User")),
            wide("Groups", |o| subjects(o, "Group")),
            wide("ServiceAccounts", |o| subjects(o, "ServiceAccount")),
        ],
        "machineconfigs" => vec![
            NAME,
            col("GeneratedByController", "string", |o| {
                path(
                    o,
                    "/metadata/annotations/machineconfiguration.openshift.io~1generated-by-controller-version",
                )
            }),
            col("IgnitionVersion", "string", |o| {
                path(o, "/spec/config/ignition/version")
            }),
            CRD_AGE,
        ],
        "machineconfigpools" => vec![
            NAME,
            col("Config", "string", |o| {
                path(o, "/status/configuration/name")
            }),
            col("Updated", "string", |o| condition(o, "Updated")),
            col("Updating", "string", |o| condition(o, "Updating")),
            col("Degraded", "string", |o| condition(o, "Degraded")),
            col("MachineCount", "number", |o| {
                path(o, "/status/machineCount")
            }),
            col("ReadyMachineCount", "number", |o| {
                path(o, "/status/readyMachineCount")
            }),
            col("UpdatedMachineCount", "number", |o| {
                path(o, "/status/updatedMachineCount")
            }),
            col("DegradedMachineCount", "number", |o| {
                path(o, "/status/degradedMachineCount")
            }),
            CRD_AGE,
        ],
        "machineconfignodes" => vec![
            NAME,
            col("PoolName", "string", |o| path(o, "/spec/pool/name")),
            col("DesiredConfig", "string", |o| {
                path(o, "/spec/configVersion/desired")
            }),
            col("CurrentConfig", "string", |o| {
                path(o, "/status/configVersion/current")
            }),
            col("Updated", "string", |o| condition(o, "Updated")),
            CRD_AGE,
            wide("UpdatePrepared", |o| condition(o, "UpdatePrepared")),
            wide("UpdateExecuted", |o| condition(o, "UpdateExecuted")),
            wide("UpdatePostActionComplete", |o| {
                condition(o, "UpdatePostActionComplete")
            }),
            wide("UpdateComplete", |o| condition(o, "UpdateComplete")),
            wide("Resumed", |o| condition(o, "Resumed")),
            wide("UpdatedFilesAndOS", |o| condition(o, "AppliedFilesAndOS")),
            wide("CordonedNode", |o| condition(o, "Cordoned")),
            wide("DrainedNode", |o| condition(o, "Drained")),
            wide("RebootedNode", |o| condition(o, "RebootedNode")),
            wide("UncordonedNode", |o| condition(o, "Uncordoned")),
        ],
        "machineosbuilds" => vec![
            NAME,
            col("Prepared", "string", |o| condition(o, "Prepared")),
            col("Building", "string", |o| condition(o, "Building")),
            col("Succeeded", "string", |o| condition(o, "Succeeded")),
            col("Interrupted", "string", |o| condition(o, "Interrupted")),
            col("Failed", "string", |o| condition(o, "Failed")),
            CRD_AGE,
        ],
        "configmaps" => vec![
            NAME,
            col("Data", "integer", |o| {
                let count =
                    |key: &str| o.get(key).and_then(Value::as_object).map_or(0, |d| d.len());
                json!(count("data") + count("binaryData"))
            }),
            AGE,
        ],
        "clusterversions" => vec![
            NAME,
            col("Version", "string", |o| {
                o.pointer("/status/history")
                    .and_then(Value::as_array)
                    .and_then(|h| h.iter().find(|e| e["state"] == "Completed"))
                    .map_or(Value::Null, |e| e["version"].clone())
            }),
            col("Available", "string", |o| condition(o, "Available")),
            col("Progressing", "string", |o| condition(o, "Progressing")),
            col("Since", "date", |o| {
                conditions_of(o)
                    .find(|c| c["type"] == "Progressing")
                    .and_then(|c| c["lastTransitionTime"].as_str())
                    .map_or(Value::Null, |t| json!(super::table::age_of(t)))
            }),
            col("Status", "string", |o| {
                conditions_of(o)
                    .find(|c| c["type"] == "Progressing")
                    .map_or(Value::Null, |c| c["message"].clone())
            }),
        ],
        // CRDs without printer columns get the apiextensions default: the age.
        _ if def.custom => vec![NAME, CRD_AGE],
        _ => vec![NAME, AGE],
    }
}

fn text(v: Option<&Value>) -> Value {
    match v {
        Some(Value::String(s)) => json!(s),
        Some(Value::Number(n)) => json!(n.to_string()),
        _ => json!("N/A"),
    }
}

/// A CRD column's value: the field, or null when it is missing.
fn path(o: &Value, pointer: &str) -> Value {
    o.pointer(pointer).cloned().unwrap_or(Value::Null)
}

/// `.status.conditions[?(@.type=="KIND")].status`, null when there is no such condition.
/// `.status.conditions[*]`.
fn conditions_of(o: &Value) -> impl Iterator<Item = &Value> {
    o.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn condition(o: &Value, kind: &str) -> Value {
    o.pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == kind))
        .and_then(|c| c.get("status").cloned())
        .unwrap_or(Value::Null)
}

/// A binding's subjects of one kind, comma-separated (service accounts as `NS/NAME`).
fn subjects(o: &Value, kind: &str) -> Value {
    let names: Vec<String> = o
        .get("subjects")
        .and_then(Value::as_array)
        .map(|subjects| {
            subjects
                .iter()
                .filter(|s| s["kind"] == kind)
                .map(|s| {
                    let name = s["name"].as_str().unwrap_or_default();
                    match s["namespace"].as_str() {
                        Some(ns) if kind == "ServiceAccount" => format!("{ns}/{name}"),
                        _ => name.to_string(),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    json!(names.join(", "))
}

fn node_status(o: &Value) -> Value {
    let ready = o
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .map(|c| c["status"] == "True");
    let mut status = match ready {
        Some(true) => "Ready".to_string(),
        Some(false) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if o.pointer("/spec/unschedulable") == Some(&json!(true)) {
        status.push_str(",SchedulingDisabled");
    }
    json!(status)
}

fn node_roles(o: &Value) -> Value {
    let roles: Vec<&str> = o
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|l| {
            l.keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                .collect()
        })
        .unwrap_or_default();
    json!(if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.join(",")
    })
}

fn pod_ready(o: &Value) -> Value {
    let statuses = o
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let total = o
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let ready = statuses.iter().filter(|s| s["ready"] == true).count();
    json!(format!("{ready}/{total}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::registry::{RESOURCES, index_of};

    fn cells(plural: &str, obj: &Value) -> Vec<(&'static str, Value)> {
        columns(&RESOURCES[index_of(plural)])
            .iter()
            .map(|c| (c.name, (c.cell)(obj)))
            .collect()
    }

    #[test]
    fn machine_config_node_columns_follow_the_crd() {
        let mcn = json!({
            "metadata": {"name": "n1"},
            "spec": {"node": {"name": "n1"}, "pool": {"name": "worker"}, "configVersion": {"desired": "rendered-worker-b"}},
            "status": {"configVersion": {"desired": "rendered-worker-b"}, "conditions": [
                {"type": "Updated", "status": "False"}, {"type": "Drained", "status": "True"},
            ]},
        });
        let got = cells("machineconfignodes", &mcn);
        let names: Vec<_> = got.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            &names[..6],
            [
                "Name",
                "PoolName",
                "DesiredConfig",
                "CurrentConfig",
                "Updated",
                "Age"
            ]
        );
        assert_eq!(got[1].1, "worker");
        assert_eq!(got[2].1, "rendered-worker-b");
        assert_eq!(got[3].1, Value::Null, "no current config yet");
        assert_eq!(got[4].1, "False");
        let drained = got.iter().find(|(n, _)| *n == "DrainedNode").unwrap();
        assert_eq!(drained.1, "True");
    }

    #[test]
    fn binding_columns() {
        let crb = json!({
            "metadata": {"name": "b"},
            "roleRef": {"kind": "ClusterRole", "name": "system:node"},
            "subjects": [
                {"kind": "Group", "name": "system:nodes"},
                {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"},
            ],
        });
        let got = cells("clusterrolebindings", &crb);
        assert_eq!(got[1].1, "ClusterRole/system:node");
        assert_eq!(got[4].1, "system:nodes");
        assert_eq!(got[5].1, "ns/sa");
        let lease = json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "n1"}});
        assert_eq!(cells("leases", &lease)[1].1, "n1");
        let mc = json!({"metadata": {"name": "m"}});
        assert_eq!(
            cells("machineconfigurations", &mc)
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>(),
            ["Name", "Age"]
        );
    }
}
