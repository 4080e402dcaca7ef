//! Label selectors (`=`, `==`, `!=`, `in`, `notin`, exists, `!` not exists) and field selectors
//! (`=`, `==`, `!=` over a per-resource set of fields), parsed from query strings.

use std::collections::BTreeMap;

use serde_json::Value;

use super::registry::ResourceDef;
use super::status::ApiError;

#[derive(Debug, Clone, PartialEq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<LabelReq>);

impl LabelSelector {
    pub fn parse(input: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for term in split_terms(input) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            reqs.push(parse_label_term(term).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "unable to parse requirement: invalid label selector term {term:?}"
                ))
            })?);
        }
        Ok(Self(reqs))
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|req| match req {
            LabelReq::Eq(k, v) => labels.get(k) == Some(v),
            LabelReq::NotEq(k, v) => labels.get(k) != Some(v),
            LabelReq::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            LabelReq::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            LabelReq::Exists(k) => labels.contains_key(k),
            LabelReq::NotExists(k) => !labels.contains_key(k),
        })
    }

    /// Matches an object's `metadata.labels`.
    pub fn matches_object(&self, obj: &Value) -> bool {
        self.0.is_empty() || self.matches(&labels_of(obj))
    }
}

/// Splits on commas that are not inside parentheses.
fn split_terms(input: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&input[start..]);
    terms
}

fn parse_label_term(term: &str) -> Option<LabelReq> {
    if let Some(key) = term.strip_prefix('!') {
        let key = key.trim();
        return valid_key(key).then(|| LabelReq::NotExists(key.to_string()));
    }
    if let Some((k, v)) = term.split_once("!=") {
        return pair(k, v).map(|(k, v)| LabelReq::NotEq(k, v));
    }
    if let Some((k, v)) = term.split_once("==") {
        return pair(k, v).map(|(k, v)| LabelReq::Eq(k, v));
    }
    if let Some((k, v)) = term.split_once('=') {
        return pair(k, v).map(|(k, v)| LabelReq::Eq(k, v));
    }
    if let Some(open) = term.find('(') {
        let head = term[..open].trim();
        let list = term[open + 1..].strip_suffix(')')?;
        let values: Vec<String> = list
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        if values.iter().any(|v| !valid_value(v)) {
            return None;
        }
        let (key, op) = head.rsplit_once(char::is_whitespace)?;
        let key = key.trim();
        if !valid_key(key) {
            return None;
        }
        return match op {
            "in" => Some(LabelReq::In(key.to_string(), values)),
            "notin" => Some(LabelReq::NotIn(key.to_string(), values)),
            _ => None,
        };
    }
    valid_key(term).then(|| LabelReq::Exists(term.to_string()))
}

fn pair(k: &str, v: &str) -> Option<(String, String)> {
    let (k, v) = (k.trim(), v.trim());
    (valid_key(k) && valid_value(v)).then(|| (k.to_string(), v.to_string()))
}

fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 317
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_value(value: &str) -> bool {
    value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// `metadata.labels` as a map (non-string values ignored).
pub fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// A parsed field selector.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    pub fn parse(input: &str, def: &ResourceDef) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for term in input.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{input}'; can't understand '{term}'"
                )));
            };
            let field = field.trim();
            let supported = matches!(field, "metadata.name" | "metadata.namespace")
                || def.fields.contains(&field);
            if !supported {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            reqs.push((field.to_string(), equal, value.trim().to_string()));
        }
        Ok(Self(reqs))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0
            .iter()
            .all(|(field, equal, value)| (field_value(obj, field) == *value) == *equal)
    }
}

/// The string form of a field as the API server's field sets have it (missing is "",
/// booleans "true"/"false").
fn field_value(obj: &Value, field: &str) -> String {
    if field == "source" {
        return obj
            .pointer("/source/component")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
    }
    let pointer = format!("/{}", field.replace('.', "/"));
    match obj.pointer(&pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        // An absent spec.unschedulable is false in the node field set.
        None if field == "spec.unschedulable" => "false".to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::registry::{RESOURCES, index_of};
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_selector_table() {
        let l = labels(&[
            ("app", "web"),
            ("tier", "front"),
            ("node-role.kubernetes.io/worker", ""),
        ]);
        let cases = [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app!=db", true),
            ("missing!=x", true),
            ("app in (web, db)", true),
            ("app in (db)", false),
            ("app notin (db)", true),
            ("missing notin (db)", true),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("node-role.kubernetes.io/worker", true),
            ("node-role.kubernetes.io/worker=", true),
            ("app=web,tier=front", true),
            ("app=web,tier=back", false),
            ("app in (web,db),!missing", true),
        ];
        for (sel, want) in cases {
            let parsed = LabelSelector::parse(sel).unwrap();
            assert_eq!(parsed.matches(&l), want, "selector {sel:?}");
        }
        for bad in ["app in web", "a b", "=x", "app in (a b)"] {
            assert!(
                LabelSelector::parse(bad).is_err(),
                "{bad:?} should be refused"
            );
        }
    }

    #[test]
    fn field_selector_table() {
        let pods = &RESOURCES[index_of("pods")];
        let pod = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"}});
        let cases = [
            ("spec.nodeName=n1", true),
            ("spec.nodeName==n1", true),
            ("spec.nodeName!=n1", false),
            ("metadata.name=p,metadata.namespace=ns", true),
            ("metadata.namespace!=ns", false),
            ("status.phase=", true),
        ];
        for (sel, want) in cases {
            assert_eq!(
                FieldSelector::parse(sel, pods).unwrap().matches(&pod),
                want,
                "{sel}"
            );
        }
        let nodes = &RESOURCES[index_of("nodes")];
        assert!(FieldSelector::parse("spec.nodeName=n1", nodes).is_err());
        let sel = FieldSelector::parse("spec.unschedulable=false", nodes).unwrap();
        assert!(sel.matches(&json!({"metadata": {"name": "n"}, "spec": {}})));
        assert!(!sel.matches(&json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true}})));
    }
}
