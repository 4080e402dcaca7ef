//! PodDisruptionBudget arithmetic (what the disruption controller writes into PDB status) and the
//! eviction decision the `pods/eviction` subresource makes from it.
//!
//! Stand-in simplification: the expected pod count is the number of pods the selector matches
//! (the real controller asks the pods' controllers for their scale when the budget is a
//! percentage or `maxUnavailable`).

use serde_json::{Value, json};

use super::selector::labels_of;
use super::strategy::{name_of, str_at};

/// An IntOrString budget value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum IntOrPercent {
    Int(i64),
    Percent(i64),
}

pub fn int_or_percent(value: &Value) -> Option<IntOrPercent> {
    match value {
        Value::Number(n) => n.as_i64().filter(|v| *v >= 0).map(IntOrPercent::Int),
        Value::String(s) => match s.strip_suffix('%') {
            Some(p) => p
                .parse()
                .ok()
                .filter(|v| *v >= 0)
                .map(IntOrPercent::Percent),
            None => s.parse().ok().filter(|v| *v >= 0).map(IntOrPercent::Int),
        },
        _ => None,
    }
}

/// The value scaled against `total`, rounding up as the API machinery does for budgets.
fn scaled(value: IntOrPercent, total: i64) -> i64 {
    match value {
        IntOrPercent::Int(v) => v,
        IntOrPercent::Percent(p) => (p * total + 99) / 100,
    }
}

/// Whether a structured `LabelSelector` (matchLabels, matchExpressions) matches the object's
/// labels. `null` matches nothing; `{}` matches everything (policy/v1 semantics).
pub fn selector_matches(selector: Option<&Value>, obj: &Value) -> bool {
    let Some(selector) = selector.filter(|s| !s.is_null()) else {
        return false;
    };
    let labels = labels_of(obj);
    let match_labels = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| {
            m.iter()
                .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str())
        });
    let expressions = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    match_labels
        && expressions.iter().all(|e| {
            let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
            let values: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|v| v.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let found = labels.get(key).map(String::as_str);
            match e.get("operator").and_then(Value::as_str) {
                Some("In") => found.is_some_and(|v| values.contains(&v)),
                Some("NotIn") => found.is_none_or(|v| !values.contains(&v)),
                Some("Exists") => found.is_some(),
                Some("DoesNotExist") => found.is_none(),
                _ => false,
            }
        })
}

/// Ready condition true and not being deleted.
pub fn pod_healthy(pod: &Value) -> bool {
    pod.pointer("/metadata/deletionTimestamp").is_none()
        && pod
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
}

/// Succeeded or Failed.
pub fn pod_finished(pod: &Value) -> bool {
    matches!(
        str_at(pod, "/status/phase"),
        Some("Succeeded") | Some("Failed")
    )
}

/// The numbers of a budget over its pods.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    pub expected: i64,
    pub current_healthy: i64,
    pub desired_healthy: i64,
    pub disruptions_allowed: i64,
}

pub fn budget(pdb: &Value, pods: &[&Value]) -> Budget {
    let matching: Vec<&&Value> = pods
        .iter()
        .filter(|p| selector_matches(pdb.pointer("/spec/selector"), p))
        .collect();
    let expected = matching.len() as i64;
    let current_healthy = matching.iter().filter(|p| pod_healthy(p)).count() as i64;
    let spec = pdb.get("spec").cloned().unwrap_or(Value::Null);
    let desired_healthy = if let Some(min) = spec.get("minAvailable").and_then(int_or_percent) {
        scaled(min, expected)
    } else if let Some(max) = spec.get("maxUnavailable").and_then(int_or_percent) {
        (expected - scaled(max, expected)).max(0)
    } else {
        0
    };
    Budget {
        expected,
        current_healthy,
        desired_healthy,
        disruptions_allowed: (current_healthy - desired_healthy).max(0),
    }
}

/// The PDB's status for the pods of its namespace; keeps `disruptedPods` entries of pods that
/// still exist and the condition's transition time when the condition did not change.
pub fn pdb_status(pdb: &Value, pods: &[&Value], now: &str) -> Value {
    let b = budget(pdb, pods);
    let generation = pdb
        .pointer("/metadata/generation")
        .cloned()
        .unwrap_or(json!(1));
    let allowed = b.disruptions_allowed > 0;
    let old_condition = pdb
        .pointer("/status/conditions/0")
        .cloned()
        .unwrap_or(Value::Null);
    let status_str = if allowed { "True" } else { "False" };
    let transition = if old_condition["status"] == status_str {
        old_condition["lastTransitionTime"].clone()
    } else {
        json!(now)
    };
    let mut status = json!({
        "observedGeneration": generation,
        "disruptionsAllowed": b.disruptions_allowed,
        "currentHealthy": b.current_healthy,
        "desiredHealthy": b.desired_healthy,
        "expectedPods": b.expected,
        "conditions": [{
            "type": "DisruptionAllowed",
            "status": status_str,
            "reason": if allowed { "SufficientPods" } else { "InsufficientPods" },
            "message": "",
            "observedGeneration": generation,
            "lastTransitionTime": transition,
        }],
    });
    if let Some(disrupted) = pdb
        .pointer("/status/disruptedPods")
        .and_then(Value::as_object)
    {
        let kept: serde_json::Map<String, Value> = disrupted
            .iter()
            .filter(|(name, _)| {
                pods.iter().any(|p| {
                    name_of(p) == name.as_str()
                        && p.pointer("/metadata/deletionTimestamp").is_none()
                })
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !kept.is_empty() {
            status["disruptedPods"] = Value::Object(kept);
        }
    }
    status
}

/// What an eviction request may do.
#[derive(Debug, PartialEq)]
pub enum EvictionVerdict {
    /// Delete the pod; `Some(pdb)` when a budget was spent.
    Allow(Option<String>),
    /// 429: the named budget forbids it.
    Blocked {
        pdb: String,
        desired: i64,
        current: i64,
    },
    /// 500: more than one budget selects the pod.
    MultipleBudgets,
}

pub fn eviction_verdict(pod: &Value, pdbs: &[&Value], pods: &[&Value]) -> EvictionVerdict {
    if pod.pointer("/metadata/deletionTimestamp").is_some()
        || pod_finished(pod)
        || str_at(pod, "/status/phase") == Some("Pending")
    {
        return EvictionVerdict::Allow(None);
    }
    let matching: Vec<&&Value> = pdbs
        .iter()
        .filter(|pdb| selector_matches(pdb.pointer("/spec/selector"), pod))
        .collect();
    let pdb = match matching.as_slice() {
        [] => return EvictionVerdict::Allow(None),
        [pdb] => **pdb,
        _ => return EvictionVerdict::MultipleBudgets,
    };
    let b = budget(pdb, pods);
    let name = name_of(pdb).to_string();
    if !pod_healthy(pod) {
        let always = str_at(pdb, "/spec/unhealthyPodEvictionPolicy") == Some("AlwaysAllow");
        if always || b.current_healthy >= b.desired_healthy {
            return EvictionVerdict::Allow(None);
        }
    } else if b.disruptions_allowed > 0 {
        return EvictionVerdict::Allow(Some(name));
    }
    EvictionVerdict::Blocked {
        pdb: name,
        desired: b.desired_healthy,
        current: b.current_healthy,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, app: &str, ready: bool) -> Value {
        json!({
            "metadata": {"name": name, "labels": {"app": app}},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
        })
    }

    fn pdb(spec: Value) -> Value {
        let mut spec = spec;
        spec["selector"] = json!({"matchLabels": {"app": "web"}});
        json!({"metadata": {"name": "web-pdb", "generation": 1}, "spec": spec})
    }

    #[test]
    fn budgets_table() {
        let pods = [
            pod("a", "web", true),
            pod("b", "web", true),
            pod("c", "web", false),
            pod("d", "db", true),
        ];
        let refs: Vec<&Value> = pods.iter().collect();
        let cases = [
            (json!({"minAvailable": 2}), 3, 2, 2, 0),
            (json!({"minAvailable": 1}), 3, 2, 1, 1),
            (json!({"minAvailable": "50%"}), 3, 2, 2, 0),
            (json!({"maxUnavailable": 1}), 3, 2, 2, 0),
            (json!({"maxUnavailable": "100%"}), 3, 2, 0, 2),
            (json!({"maxUnavailable": 0}), 3, 2, 3, 0),
        ];
        for (spec, expected, healthy, desired, allowed) in cases {
            let b = budget(&pdb(spec.clone()), &refs);
            assert_eq!(
                (
                    b.expected,
                    b.current_healthy,
                    b.desired_healthy,
                    b.disruptions_allowed
                ),
                (expected, healthy, desired, allowed),
                "{spec}"
            );
        }
    }

    #[test]
    fn verdicts() {
        let pods = [pod("a", "web", true), pod("b", "web", true)];
        let refs: Vec<&Value> = pods.iter().collect();
        let blocking = pdb(json!({"minAvailable": 2}));
        assert_eq!(
            eviction_verdict(&pods[0], &[&blocking], &refs),
            EvictionVerdict::Blocked {
                pdb: "web-pdb".into(),
                desired: 2,
                current: 2
            }
        );
        let allowing = pdb(json!({"maxUnavailable": 1}));
        assert_eq!(
            eviction_verdict(&pods[0], &[&allowing], &refs),
            EvictionVerdict::Allow(Some("web-pdb".into()))
        );
        assert_eq!(
            eviction_verdict(&pods[0], &[&allowing, &blocking], &refs),
            EvictionVerdict::MultipleBudgets
        );
        let other = pod("x", "db", true);
        assert_eq!(
            eviction_verdict(&other, &[&blocking], &refs),
            EvictionVerdict::Allow(None)
        );
        let mut finished = pods[0].clone();
        finished["status"]["phase"] = json!("Succeeded");
        assert_eq!(
            eviction_verdict(&finished, &[&blocking], &refs),
            EvictionVerdict::Allow(None)
        );
    }

    #[test]
    fn selectors() {
        let p = pod("a", "web", true);
        assert!(selector_matches(Some(&json!({})), &p));
        assert!(!selector_matches(None, &p));
        assert!(selector_matches(
            Some(
                &json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]})
            ),
            &p
        ));
        assert!(!selector_matches(
            Some(&json!({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]})),
            &p
        ));
        assert_eq!(
            int_or_percent(&json!("25%")),
            Some(IntOrPercent::Percent(25))
        );
        assert_eq!(int_or_percent(&json!(-1)), None);
    }
}
