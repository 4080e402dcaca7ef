//! The tracking decoder against `serde_path_to_error` over `&Value`, which it replaces: the
//! same result, path and message for the models and for every shape serde derives, on valid
//! documents and on every single-node mutation of them.

// The test types' fields are read only through `Debug`, which dead-code analysis ignores.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt::Debug;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{DisplayPath, deserialize};

/// Decodes `doc` as `T` both ways and fails on any difference; returns whether it decoded.
fn same<T: DeserializeOwned + Debug>(doc: &Value) -> bool {
    let ours = deserialize::<T>(doc);
    let theirs = serde_path_to_error::deserialize::<_, T>(doc);
    match (ours, theirs) {
        (Ok(a), Ok(b)) => {
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "{doc}");
            true
        }
        (Err(a), Err(b)) => {
            let ours = (DisplayPath(&a.path).to_string(), a.error.to_string());
            let theirs = (b.path().to_string(), b.inner().to_string());
            assert_eq!(ours, theirs, "{doc}");
            false
        }
        (a, b) => panic!("{doc}: ours {a:?}, serde_path_to_error {:?}", b.err()),
    }
}

/// Every JSON pointer in `v`.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                pointers(item, format!("{at}/{i}"), out);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                let key = k.replace('~', "~0").replace('/', "~1");
                pointers(item, format!("{at}/{key}"), out);
            }
        }
        _ => {}
    }
    out.push(at);
}

/// Compares both decoders on `doc` and on each mutation of one node: replaced by a value of
/// every JSON type, removed, or (for an object) given an unknown key. Returns how many of the
/// mutations failed to decode (so a test can check the mutations reached the checks).
fn same_under_mutation<T: DeserializeOwned + Debug>(doc: &Value) -> usize {
    assert!(same::<T>(doc), "the unmutated document decodes: {doc}");
    let replacements = [
        json!(null),
        json!(true),
        json!(7),
        json!(-3),
        json!(1.5),
        json!("x"),
        json!([]),
        json!([1, "a"]),
        json!({}),
        json!({"bogus": 1}),
    ];
    let mut all = Vec::new();
    pointers(doc, String::new(), &mut all);
    let mut failed = 0;
    for pointer in &all {
        let mut check = |m: Value| failed += usize::from(!same::<T>(&m));
        for r in &replacements {
            let mut m = doc.clone();
            *m.pointer_mut(pointer).expect("pointer from the document") = r.clone();
            check(m);
        }
        if let Some((parent, key)) = pointer.rsplit_once('/') {
            let mut m = doc.clone();
            match m.pointer_mut(parent).expect("parent") {
                Value::Object(map) => {
                    drop(map.shift_remove(&key.replace("~1", "/").replace("~0", "~")))
                }
                Value::Array(items) => drop(items.remove(key.parse::<usize>().expect("index"))),
                _ => unreachable!("a parent holds children"),
            }
            check(m);
        }
        let mut m = doc.clone();
        if let Some(map) = m.pointer_mut(pointer).and_then(Value::as_object_mut) {
            map.insert("unexpected".into(), json!(1));
            check(m);
        }
    }
    failed
}

fn example(text: &str) -> Value {
    crate::document::parse_value(text.as_bytes()).expect("example parses")
}

#[test]
fn machine_configs_pools_and_ignition_configs() {
    for text in [
        include_str!("../../examples/00-worker-base.yaml"),
        include_str!("../../examples/03-worker-chrony.yaml"),
    ] {
        let mc = example(text);
        assert!(same_under_mutation::<crate::machineconfig::MachineConfig>(&mc) > 0);
        let config = mc["spec"]["config"].clone();
        assert!(same_under_mutation::<crate::ignition::Config>(&config) > 0);
    }
    let pool = example(include_str!("../../examples/pool-worker.yaml"));
    assert!(same_under_mutation::<crate::pool::MachineConfigPool>(&pool) > 0);
}

#[test]
fn machine_configuration() {
    let doc = json!({
        "apiVersion": "operator.openshift.io/v1",
        "kind": "MachineConfiguration",
        "metadata": {"name": "cluster"},
        "spec": {"nodeDisruptionPolicy": {
            "files": [{"path": "/etc/a", "actions": [{"type": "Restart", "restart": {"serviceName": "a.service"}}]}],
            "units": [{"name": "b.service", "actions": [{"type": "Reload", "reload": {"serviceName": "b.service"}}]}],
            "sshkey": {"actions": [{"type": "None"}]}
        }}
    });
    same_under_mutation::<crate::machineconfiguration::MachineConfiguration>(&doc);
}

#[derive(Debug, Deserialize)]
enum Shape {
    Unit,
    New(u8),
    Pair(u8, String),
    Named { a: u8, b: Option<Vec<u8>> },
}

#[derive(Debug, Deserialize)]
struct Meters(f64);

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Either {
    Number(u8),
    Named { x: String },
}

#[derive(Debug, Deserialize)]
#[serde(tag = "kind")]
enum Tagged {
    One { v: u8 },
    Two,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "kind", content = "with")]
enum Adjacent {
    Three(Vec<u8>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Strict {
    shapes: Vec<Shape>,
    by_name: BTreeMap<String, Shape>,
    pair: (u8, bool),
    meters: Meters,
    #[serde(default)]
    inner: Option<Box<Strict>>,
    either: Vec<Either>,
    tagged: Tagged,
    adjacent: Adjacent,
    unit: (),
    any: Value,
}

#[derive(Debug, Deserialize)]
struct Flattened {
    name: String,
    #[serde(flatten)]
    rest: BTreeMap<String, u8>,
}

#[test]
fn every_shape_serde_derives() {
    let strict = json!({
        "shapes": ["Unit", {"New": 1}, {"Pair": [2, "b"]}, {"Named": {"a": 3, "b": [4]}}, {"Unit": null}],
        "byName": {"k": {"Named": {"a": 1, "b": null}}},
        "pair": [1, true],
        "meters": 2.5,
        "inner": {
            "shapes": [], "byName": {}, "pair": [0, false], "meters": 0, "either": [],
            "tagged": {"kind": "Two"}, "adjacent": {"kind": "Three", "with": []}, "unit": null,
            "any": null
        },
        "either": [1, {"x": "y"}],
        "tagged": {"kind": "One", "v": 9},
        "adjacent": {"kind": "Three", "with": [1, 2]},
        "unit": null,
        "any": {"free": ["form", 1]}
    });
    assert!(same_under_mutation::<Strict>(&strict) > 0);
    let flattened = json!({"name": "n", "a": 1, "b": 2});
    assert!(same_under_mutation::<Flattened>(&flattened) > 0);
    // A struct from a list, and a string or bytes from a list of numbers.
    assert!(same::<(u8, String)>(&json!([1, "a"])));
    assert!(!same::<(u8, String)>(&json!([1, "a", 2])));
    assert!(same::<Vec<u8>>(&json!([1, 2])));
    assert!(!same::<BTreeMap<String, u8>>(&json!({"a": 1, "b": "2"})));
}

#[test]
fn paths_name_the_field() {
    let doc = json!({"shapes": [{"Named": {"a": "x"}}]});
    let err = deserialize::<BTreeMap<String, Vec<Shape>>>(&doc).unwrap_err();
    assert_eq!(DisplayPath(&err.path).to_string(), "shapes[0].Named.a");
    assert_eq!(
        err.error.to_string(),
        "invalid type: string \"x\", expected u8"
    );
    let err = deserialize::<Vec<u8>>(&json!([1, -1])).unwrap_err();
    assert_eq!(DisplayPath(&err.path).to_string(), "[1]");
    let err = deserialize::<u8>(&json!("a")).unwrap_err();
    assert_eq!(DisplayPath(&err.path).to_string(), ".");
}
