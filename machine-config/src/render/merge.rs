//! Ignition's config merge (what the MCO calls through `ign3.Merge`), over spec 3.x JSON.
//!
//! Rules, as Ignition's `config/merge` applies them to the 3.5 types:
//! - objects merge field by field; a scalar or `null`-free value in the child replaces the
//!   parent's; a field the child leaves out (`null`/absent) keeps the parent's;
//! - "ignore duplicates" lists are concatenated, parent first: a file's `append`, filesystem
//!   `options`/`mountOptions`, LUKS and RAID `options`;
//! - every other list is keyed: an entry whose key is also in the child's same list is merged
//!   with it in place, entries only in the child are appended, entries only in the parent stay;
//! - `storage.files`, `directories` and `links` share one key space (the path), and so do
//!   `kernelArguments.shouldExist`/`shouldNotExist`: a child entry in one list removes the
//!   parent's entry with the same key from the other;
//! - an HTTP header the child lists without a `value` removes the parent's header.
//!
//! Keys: path (nodes), name (units, dropins, users, groups, RAID, LUKS, headers), device (disks,
//! filesystems), source (merged configs, CAs), url (Tang servers), `number:N` else `label:L`
//! (partitions), the value itself (lists of strings).

use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};

/// Merges `child` over `parent` (both spec 3.x Ignition configs as JSON objects).
pub fn merge_ignition(parent: &Value, child: &Value) -> Value {
    merge_value(parent, child, "")
}

#[derive(Clone, Copy)]
enum KeyOf {
    Field(&'static str),
    Partition,
    Itself,
}

#[derive(Clone, Copy)]
enum ListRule {
    Concat,
    Keyed {
        handle: Option<&'static str>,
        key: KeyOf,
    },
}

fn list_rule(pattern: &str) -> ListRule {
    use KeyOf::*;
    use ListRule::*;
    let keyed = |key| Keyed { handle: None, key };
    match pattern {
        "storage.files.*.append"
        | "storage.filesystems.*.options"
        | "storage.filesystems.*.mountOptions"
        | "storage.luks.*.options"
        | "storage.raid.*.options" => Concat,
        "storage.files" | "storage.directories" | "storage.links" => Keyed {
            handle: Some("node"),
            key: Field("path"),
        },
        "kernelArguments.shouldExist" | "kernelArguments.shouldNotExist" => Keyed {
            handle: Some("kernelArgument"),
            key: Itself,
        },
        "storage.disks.*.partitions" => keyed(Partition),
        p if p.ends_with(".httpHeaders") => keyed(Field("name")),
        "ignition.config.merge" | "ignition.security.tls.certificateAuthorities" => {
            keyed(Field("source"))
        }
        "passwd.users"
        | "passwd.groups"
        | "systemd.units"
        | "systemd.units.*.dropins"
        | "storage.raid"
        | "storage.luks" => keyed(Field("name")),
        "storage.disks" | "storage.filesystems" => keyed(Field("device")),
        "storage.luks.*.clevis.tang" => keyed(Field("url")),
        _ => keyed(Itself),
    }
}

fn key_of(item: &Value, key: KeyOf) -> String {
    let text = |v: Option<&Value>| match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        _ => String::new(),
    };
    match key {
        KeyOf::Field(field) => text(item.get(field)),
        KeyOf::Itself => text(Some(item)),
        KeyOf::Partition => match item.get("number").and_then(Value::as_i64) {
            Some(n) if n != 0 => format!("number:{n}"),
            _ => match item.get("label").and_then(Value::as_str) {
                Some(label) => format!("label:{label}"),
                None => String::new(),
            },
        },
    }
}

fn child_pattern(pattern: &str, key: &str) -> String {
    if pattern.is_empty() {
        key.to_string()
    } else {
        format!("{pattern}.{key}")
    }
}

fn merge_value(parent: &Value, child: &Value, pattern: &str) -> Value {
    match (parent, child) {
        (_, Value::Null) => parent.clone(),
        (Value::Object(p), Value::Object(c)) => Value::Object(merge_object(p, c, pattern)),
        _ => child.clone(),
    }
}

/// Where each keyed child entry lives: (handle, key) → (list field, index).
type ChildIndex<'a> = HashMap<(String, String), (&'a str, usize)>;

fn merge_object(
    parent: &Map<String, Value>,
    child: &Map<String, Value>,
    pattern: &str,
) -> Map<String, Value> {
    let mut index: ChildIndex = HashMap::new();
    for (field, value) in child {
        let Value::Array(items) = value else { continue };
        if let ListRule::Keyed { handle, key } = list_rule(&child_pattern(pattern, field)) {
            let handle = handle.unwrap_or(field.as_str()).to_string();
            for (i, item) in items.iter().enumerate() {
                index.insert((handle.clone(), key_of(item, key)), (field.as_str(), i));
            }
        }
    }
    let mut out = Map::new();
    let fields = parent
        .keys()
        .chain(child.keys().filter(|k| !parent.contains_key(*k)));
    for field in fields {
        let field_pattern = child_pattern(pattern, field);
        let merged = match (parent.get(field), child.get(field)) {
            (Some(Value::Array(p)), c)
                if matches!(c, None | Some(Value::Null) | Some(Value::Array(_))) =>
            {
                let empty = Vec::new();
                let c = c.and_then(Value::as_array).unwrap_or(&empty);
                let list = merge_list(p, c, field, &field_pattern, child, &index);
                if list.is_empty() {
                    continue;
                }
                Value::Array(list)
            }
            (Some(p), Some(c)) => merge_value(p, c, &field_pattern),
            (Some(p), None) => p.clone(),
            (None, Some(c)) => c.clone(),
            (None, None) => continue,
        };
        out.insert(field.clone(), merged);
    }
    out
}

fn merge_list(
    parent: &[Value],
    child: &[Value],
    field: &str,
    pattern: &str,
    child_obj: &Map<String, Value>,
    index: &ChildIndex,
) -> Vec<Value> {
    let (handle, key) = match list_rule(pattern) {
        ListRule::Concat => return parent.iter().chain(child).cloned().collect(),
        ListRule::Keyed { handle, key } => (handle.unwrap_or(field), key),
    };
    let item_pattern = format!("{pattern}.*");
    let mut out = Vec::with_capacity(parent.len() + child.len());
    let mut parent_keys = HashSet::new();
    for p in parent {
        let k = key_of(p, key);
        parent_keys.insert(k.clone());
        match index.get(&(handle.to_string(), k)) {
            Some((list, i)) if *list == field => {
                let Some(c) = child_obj.get(*list).and_then(|l| l.get(*i)) else {
                    continue;
                };
                let is_header = pattern.ends_with(".httpHeaders");
                if is_header && c.get("value").is_none_or(Value::is_null) {
                    // a header without value in the child deletes the parent's header
                    continue;
                }
                out.push(if c.is_object() {
                    merge_value(p, c, &item_pattern)
                } else {
                    c.clone()
                });
            }
            // the child has this key in another list of the same key space: it replaces it there
            Some(_) => {}
            None => out.push(p.clone()),
        }
    }
    for c in child {
        if !parent_keys.contains(&key_of(c, key)) {
            out.push(c.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests;
