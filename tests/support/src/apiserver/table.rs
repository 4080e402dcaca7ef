//! `meta.k8s.io/v1 Table` rendering for `kubectl get` (columns as the API server or the CRDs'
//! additionalPrinterColumns define them).

use std::time::SystemTime;

use serde_json::{Value, json};

use super::registry::ResourceDef;
use super::strategy::str_at;

/// Whether an Accept header asks for a Table.
pub fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

type Cell = fn(&Value) -> Value;

fn columns(def: &ResourceDef) -> Vec<(&'static str, &'static str, Cell)> {
    let name: (&str, &str, Cell) = ("Name", "string", |o| json!(str_at(o, "/metadata/name")));
    let age: (&str, &str, Cell) = ("Age", "string", |o| json!(age(o)));
    match def.plural {
        "nodes" => vec![
            name,
            ("Status", "string", node_status),
            ("Roles", "string", node_roles),
            age,
            ("Version", "string", |o| {
                json!(str_at(o, "/status/nodeInfo/kubeletVersion").unwrap_or(""))
            }),
        ],
        "pods" => vec![
            name,
            ("Ready", "string", pod_ready),
            ("Status", "string", |o| {
                if o.pointer("/metadata/deletionTimestamp").is_some() {
                    json!("Terminating")
                } else {
                    json!(str_at(o, "/status/phase").unwrap_or("Pending"))
                }
            }),
            ("Restarts", "integer", |_| json!(0)),
            age,
        ],
        "namespaces" => vec![
            name,
            ("Status", "string", |o| {
                json!(str_at(o, "/status/phase").unwrap_or(""))
            }),
            age,
        ],
        "poddisruptionbudgets" => vec![
            name,
            ("Min Available", "string", |o| {
                text(o.pointer("/spec/minAvailable"))
            }),
            ("Max Unavailable", "string", |o| {
                text(o.pointer("/spec/maxUnavailable"))
            }),
            ("Allowed Disruptions", "integer", |o| {
                o.pointer("/status/disruptionsAllowed")
                    .cloned()
                    .unwrap_or(json!(0))
            }),
            age,
        ],
        "events" => vec![
            ("Last Seen", "string", |o| {
                json!(str_at(o, "/lastTimestamp").unwrap_or(""))
            }),
            ("Type", "string", |o| {
                json!(str_at(o, "/type").unwrap_or(""))
            }),
            ("Reason", "string", |o| {
                json!(str_at(o, "/reason").unwrap_or(""))
            }),
            ("Object", "string", |o| {
                json!(format!(
                    "{}/{}",
                    str_at(o, "/involvedObject/kind")
                        .unwrap_or("")
                        .to_lowercase(),
                    str_at(o, "/involvedObject/name").unwrap_or("")
                ))
            }),
            ("Message", "string", |o| {
                json!(str_at(o, "/message").unwrap_or(""))
            }),
        ],
        "machineconfigs" => vec![
            name,
            ("GeneratedByController", "string", |o| {
                json!(str_at(o, "/metadata/annotations/machineconfiguration.openshift.io~1generated-by-controller-version").unwrap_or(""))
            }),
            ("IgnitionVersion", "string", |o| {
                json!(str_at(o, "/spec/config/ignition/version").unwrap_or(""))
            }),
            age,
        ],
        "machineconfigpools" => vec![
            name,
            ("Config", "string", |o| {
                json!(str_at(o, "/status/configuration/name").unwrap_or(""))
            }),
            ("Updated", "string", |o| condition(o, "Updated")),
            ("Updating", "string", |o| condition(o, "Updating")),
            ("Degraded", "string", |o| condition(o, "Degraded")),
            ("MachineCount", "number", |o| count(o, "machineCount")),
            ("ReadyMachineCount", "number", |o| {
                count(o, "readyMachineCount")
            }),
            ("UpdatedMachineCount", "number", |o| {
                count(o, "updatedMachineCount")
            }),
            ("DegradedMachineCount", "number", |o| {
                count(o, "degradedMachineCount")
            }),
            age,
        ],
        _ => vec![name, age],
    }
}

fn text(v: Option<&Value>) -> Value {
    match v {
        Some(Value::String(s)) => json!(s),
        Some(Value::Number(n)) => json!(n.to_string()),
        _ => json!("N/A"),
    }
}

fn count(o: &Value, field: &str) -> Value {
    o.pointer(&format!("/status/{field}"))
        .cloned()
        .unwrap_or(Value::Null)
}

fn condition(o: &Value, kind: &str) -> Value {
    let status = o
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == kind))
        .and_then(|c| c["status"].as_str())
        .unwrap_or("");
    json!(status)
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

/// Age as kubectl shows it (`45s`, `12m`, `3h`, `5d`).
fn age(o: &Value) -> String {
    let Some(created) =
        str_at(o, "/metadata/creationTimestamp").and_then(|t| humantime::parse_rfc3339(t).ok())
    else {
        return "<unknown>".into();
    };
    let secs = SystemTime::now()
        .duration_since(created)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// A Table of `objects`; `include` is the `includeObject` parameter (None, Metadata, Object).
pub fn render(def: &ResourceDef, objects: &[Value], list_meta: Value, include: &str) -> Value {
    let cols = columns(def);
    let definitions: Vec<Value> = cols
        .iter()
        .map(|(name, kind, _)| {
            json!({
                "name": name,
                "type": kind,
                "format": if *name == "Name" { "name" } else { "" },
                "description": "",
                "priority": 0,
            })
        })
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let cells: Vec<Value> = cols.iter().map(|(_, _, cell)| cell(o)).collect();
            let object = match include {
                "None" => Value::Null,
                "Object" => o.clone(),
                _ => json!({
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": o.get("metadata").cloned().unwrap_or(json!({})),
                }),
            };
            json!({"cells": cells, "object": object})
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::registry::{RESOURCES, index_of};

    #[test]
    fn node_rows() {
        let node = json!({
            "metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/worker": ""}, "creationTimestamp": "2020-01-01T00:00:00Z"},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.33.0"}},
        });
        let table = render(
            &RESOURCES[index_of("nodes")],
            &[node],
            json!({"resourceVersion": "5"}),
            "Metadata",
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!([
                "n1",
                "Ready,SchedulingDisabled",
                "worker",
                age(&table["rows"][0]["object"]),
                "v1.33.0"
            ])
        );
        assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert!(wants_table(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        ));
        assert!(!wants_table("application/json"));
    }
}
