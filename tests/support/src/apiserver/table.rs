//! `meta.k8s.io/v1 Table` rendering for `kubectl get` (the columns are in `columns`).

use std::time::SystemTime;

use serde_json::{Value, json};

use super::columns::columns;
use super::registry::ResourceDef;
use super::strategy::str_at;

/// Whether an Accept header asks for a Table.
pub fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

/// Age as kubectl shows it (`45s`, `12m`, `3h`, `5d`).
pub fn age(o: &Value) -> String {
    age_of(str_at(o, "/metadata/creationTimestamp").unwrap_or_default())
}

/// The age of an RFC 3339 timestamp, as kubectl prints it (`<unknown>` when it is not one).
pub fn age_of(timestamp: &str) -> String {
    let Ok(created) = humantime::parse_rfc3339(timestamp) else {
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
        .map(|c| {
            json!({
                "name": c.name,
                "type": c.kind,
                "format": if c.name == "Name" { "name" } else { "" },
                "description": "",
                "priority": c.priority,
            })
        })
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let cells: Vec<Value> = cols.iter().map(|c| (c.cell)(o)).collect();
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
