//! Manifest files read the way `kubectl apply -f` reads them before it sends JSON: YAML 1.1
//! scalars as sigs.k8s.io/yaml resolves them (`mode: 0644` is the octal 420, `08` the number
//! 8, `yes`/`on`/`y` are true), numbers that are whole sent as integers (Go's JSON encoder
//! writes the float 1000 as `1000`), multi-document streams, and `List` kinds unpacked.
//!
//! Not modelled: booleans in mixed case (`yEs` is a string to kubectl, true here) and
//! booleans used as mapping keys (kubectl turns the key `on` into `"true"`).

use anyhow::{Context, Result};
use serde_json::{Number, Value};

/// Every object in a YAML (multi-document) or JSON text, with `List` kinds unpacked.
pub fn parse(text: &str) -> Result<Vec<Value>> {
    let options = serde_saphyr::options! { legacy_octal_numbers: true };
    let docs: Vec<Value> = serde_saphyr::from_multiple_with_options(text, options)
        .context("parsing manifests as YAML 1.1")?;
    let mut objects = Vec::new();
    for mut doc in docs.into_iter().filter(|d| !d.is_null()) {
        whole_numbers_as_integers(&mut doc);
        match doc.get("items").and_then(Value::as_array) {
            Some(items) if doc["kind"].as_str().is_some_and(|k| k.ends_with("List")) => {
                objects.extend(items.iter().cloned());
            }
            _ => objects.push(doc),
        }
    }
    Ok(objects)
}

/// Floats without a fraction become integers, as Go's JSON encoder writes them.
fn whole_numbers_as_integers(value: &mut Value) {
    match value {
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|_| n.is_f64())
                && f.fract() == 0.0
                && f.abs() < 9.0e15
            {
                // Exact: |f| < 2^53, so the integer is the float's value.
                *n = Number::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_numbers_as_integers),
        Value::Object(map) => map.values_mut().for_each(whole_numbers_as_integers),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn yaml_1_1_scalars_as_kubectl_sends_them() {
        let text = "a: 0644\nb: -010\nc: 08\nd: 1e3\ne: 0.5\nf: 0x1F\ng: 1_000\nh: on\ni: 'on'\nj: 0\nk: 2001-12-14\nl: 1:20\n";
        let docs = parse(text).unwrap();
        assert_eq!(
            docs[0],
            json!({"a": 420, "b": -8, "c": 8, "d": 1000, "e": 0.5, "f": 31, "g": 1000,
                   "h": true, "i": "on", "j": 0, "k": "2001-12-14", "l": "1:20"})
        );
        assert_eq!(serde_json::to_string(&docs[0]["c"]).unwrap(), "8");
    }

    #[test]
    fn lists_and_documents() {
        let text = "kind: List\nitems:\n- {kind: A}\n- {kind: B}\n---\n---\nkind: C\n";
        let kinds: Vec<Value> = parse(text)
            .unwrap()
            .iter()
            .map(|o| o["kind"].clone())
            .collect();
        assert_eq!(kinds, [json!("A"), json!("B"), json!("C")]);
        assert!(parse("a: [").is_err());
    }
}
