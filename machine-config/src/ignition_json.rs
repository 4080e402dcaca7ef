//! `spec.config` of a MachineConfig: the Ignition config as given (any supported spec), kept as
//! a JSON value, with every `source` string held once in a [`SourceTable`] that the parsed
//! [`Config`] shares.
//!
//! In the value, a string under a `source` key stands for the table entry whose index it spells
//! (`"12"`): that is where nearly all the bytes of a large config are, and this way neither the
//! value, nor the config parsed from it, nor a clone of either copies them. Serializing the value
//! writes the sources back in place, so what is written is the config as given.
//!
//! [`parse_json_file`] reads a JSON file this way, each source an offset and length in the file
//! when it needed no unescaping (the text is read from the file when used: the parsed config
//! holds no contents); [`parse_json_document`] reads a text in memory, each source a span of it;
//! [`IgnitionJson::from_value`] moves the sources out of a value read some other way (YAML, the
//! API server's answers).
//!
//! [`Config`]: crate::Config

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;
use std::io;
use std::rc::Rc;
use std::sync::Arc;

use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::error::ParseError;
use crate::ignition::ParsedConfig;
use crate::source::{DocumentText, Source, SourceFile, SourceTable};

/// The key whose string values are sources.
const SOURCE_KEY: &str = "source";

/// `spec.config`: an Ignition config as given, its sources shared (see the module docs).
#[derive(Clone, Default)]
pub struct IgnitionJson {
    /// The config, each `source` string replaced by its index in `sources`.
    value: Value,
    sources: SourceTable,
}

impl IgnitionJson {
    /// Takes a config value, moving its `source` strings into the table (no copy).
    pub fn from_value(mut value: Value) -> Self {
        let mut sources = Vec::new();
        move_sources(&mut value, &mut sources);
        IgnitionJson {
            value,
            sources: SourceTable::new(sources),
        }
    }

    /// A value already in this form (from [`parse_json_document`]) and its table.
    pub fn from_parts(value: Value, sources: SourceTable) -> Self {
        IgnitionJson { value, sources }
    }

    /// The value (its `source` strings indexes) and the table: the inverse of
    /// [`Self::from_parts`].
    pub fn into_parts(self) -> (Value, SourceTable) {
        (self.value, self.sources)
    }

    /// The config as a plain JSON value (a copy, sources included); fails when a source kept
    /// in a file cannot be read.
    pub fn to_value(&self) -> io::Result<Value> {
        resolved(&self.value, &self.sources, false)
    }

    /// A copy of the part at `path` (`["storage", "links"]`; a list's items by their index,
    /// `["storage", "files", "0"]`), sources included.
    pub fn section(&self, path: &[&str]) -> io::Result<Option<Value>> {
        let mut v = &self.value;
        for key in path {
            let next = match v {
                Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
                other => other.get(key),
            };
            match next {
                Some(next) => v = next,
                None => return Ok(None),
            }
        }
        resolved(v, &self.sources, path.last() == Some(&SOURCE_KEY)).map(Some)
    }

    /// `ignition.version` as written, when it is a string.
    pub fn version(&self) -> Option<&str> {
        self.value.get("ignition")?.get("version")?.as_str()
    }

    /// Whether the config is `{}`.
    pub fn is_empty_object(&self) -> bool {
        self.value.as_object().is_some_and(Map::is_empty)
    }

    /// Parses the config into the internal form (see [`ParsedConfig::from_value`]); its
    /// sources are the ones this value holds, not copies.
    pub fn parse(&self) -> Result<ParsedConfig, ParseError> {
        ParsedConfig::from_value_sharing(self.value.clone(), &self.sources)
    }
}

impl From<Value> for IgnitionJson {
    fn from(value: Value) -> Self {
        IgnitionJson::from_value(value)
    }
}

/// Reads a JSON document, each `source` string becoming an entry of the returned table (a span
/// of `text` when it needed no unescaping), and the value holding its index.
pub fn parse_json_document(
    text: impl Into<DocumentText>,
) -> Result<(Value, SourceTable), ParseError> {
    let text = text.into();
    let mut sources = Vec::new();
    let mut de = serde_json::Deserializer::from_str(text.as_str());
    let value = Seed {
        store: Store::Text(&text),
        sources: &mut sources,
        source: false,
    }
    .deserialize(&mut de)
    .map_err(syntax)?;
    de.end().map_err(syntax)?;
    Ok((value, SourceTable::new(sources)))
}

/// Reads the JSON document in `file` from `offset` on (past a byte order mark, say) as
/// [`parse_json_document`] reads a text, except that each `source` string that needed no
/// unescaping becomes an offset and length in the file: the document is streamed, so what is in
/// memory is the value without its sources and the one string being read. A source that had
/// escapes (rare: data URLs are base64 or percent-encoded) is copied.
pub fn parse_json_file(
    file: &Arc<SourceFile>,
    offset: u64,
) -> Result<(Value, SourceTable), ParseError> {
    let consumed = Rc::new(Cell::new(offset));
    let mut sources = Vec::new();
    let mut de =
        serde_json::Deserializer::from_reader(file.counting_reader(offset, Rc::clone(&consumed)));
    let value = Seed {
        store: Store::File(file, &consumed),
        sources: &mut sources,
        source: false,
    }
    .deserialize(&mut de)
    .map_err(syntax)?;
    de.end().map_err(syntax)?;
    Ok((value, SourceTable::new(sources)))
}

fn syntax(e: serde_json::Error) -> ParseError {
    ParseError::Syntax {
        format: "JSON",
        message: e.to_string(),
    }
}

/// Where the strings a [`Seed`] reads come from, so that a source can refer to them in place.
#[derive(Clone, Copy)]
enum Store<'d> {
    /// Nowhere the source can refer to: each is copied.
    None,
    /// A text in memory the deserializer lends slices of.
    Text(&'d DocumentText),
    /// A file, and how far the parser has read in it.
    File(&'d Arc<SourceFile>, &'d Cell<u64>),
}

/// Puts the sources back into a part of a value read by [`parse_json_document`] that is not an
/// Ignition config (a MachineConfig's `metadata`, say).
pub(crate) fn restore_sources(value: &mut Value, sources: &SourceTable) -> io::Result<()> {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                if let (true, Value::String(s)) = (key == SOURCE_KEY, &*child) {
                    *child = Value::String(sources.text(s)?.into_owned());
                } else {
                    restore_sources(child, sources)?;
                }
            }
        }
        Value::Array(items) => {
            for v in items {
                restore_sources(v, sources)?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn move_sources(value: &mut Value, sources: &mut Vec<Source>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                match child {
                    Value::String(s) if key == SOURCE_KEY => {
                        let index = sources.len().to_string();
                        sources.push(Source::from(std::mem::replace(s, index)));
                    }
                    _ => move_sources(child, sources),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| move_sources(v, sources)),
        _ => {}
    }
}

fn resolved(value: &Value, sources: &SourceTable, source: bool) -> io::Result<Value> {
    Ok(match value {
        Value::String(s) if source => Value::String(sources.text(s)?.into_owned()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), resolved(v, sources, k == SOURCE_KEY)?)))
                .collect::<io::Result<_>>()?,
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| resolved(v, sources, false))
                .collect::<io::Result<_>>()?,
        ),
        other => other.clone(),
    })
}

/// A value of an [`IgnitionJson`] seen with its sources in place.
#[derive(Clone, Copy)]
struct View<'a> {
    value: &'a Value,
    sources: &'a SourceTable,
    /// The value is held by a `source` key.
    source: bool,
}

impl<'a> View<'a> {
    fn child(&self, value: &'a Value, source: bool) -> View<'a> {
        View {
            value,
            sources: self.sources,
            source,
        }
    }

    fn text(&self, s: &'a str) -> io::Result<Cow<'a, str>> {
        if self.source {
            self.sources.text(s)
        } else {
            Ok(Cow::Borrowed(s))
        }
    }

    /// Whether two strings are the same text; one that cannot be read is not (see
    /// `Source`'s equality).
    fn same_text(&self, a: &'a str, other: &View<'_>, b: &str) -> bool {
        match (self.text(a), other.text(b)) {
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        }
    }

    fn equals(self, other: View<'_>) -> bool {
        match (self.value, other.value) {
            (Value::String(a), Value::String(b)) => {
                if self.source && other.source {
                    match (self.sources.lookup(a), other.sources.lookup(b)) {
                        (Some(x), Some(y)) => x == y,
                        _ => self.same_text(a, &other, b),
                    }
                } else {
                    self.same_text(a, &other, b)
                }
            }
            (Value::Object(a), Value::Object(b)) => {
                a.len() == b.len()
                    && a.iter().all(|(k, v)| {
                        b.get(k).is_some_and(|w| {
                            let s = k == SOURCE_KEY;
                            self.child(v, s).equals(other.child(w, s))
                        })
                    })
            }
            (Value::Array(a), Value::Array(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .zip(b)
                        .all(|(v, w)| self.child(v, false).equals(other.child(w, false)))
            }
            (a, b) => a == b,
        }
    }
}

impl Serialize for View<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.value {
            Value::String(v) => s.serialize_str(&self.text(v).map_err(serde::ser::Error::custom)?),
            Value::Object(map) => {
                let mut m = s.serialize_map(Some(map.len()))?;
                for (k, v) in map {
                    m.serialize_entry(k, &self.child(v, k == SOURCE_KEY))?;
                }
                m.end()
            }
            Value::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for v in items {
                    seq.serialize_element(&self.child(v, false))?;
                }
                seq.end()
            }
            other => other.serialize(s),
        }
    }
}

impl IgnitionJson {
    fn view(&self) -> View<'_> {
        View {
            value: &self.value,
            sources: &self.sources,
            source: false,
        }
    }
}

impl Serialize for IgnitionJson {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.view().serialize(s)
    }
}

impl<'de> Deserialize<'de> for IgnitionJson {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut sources = Vec::new();
        let value = Seed {
            store: Store::None,
            sources: &mut sources,
            source: false,
        }
        .deserialize(d)?;
        Ok(IgnitionJson::from_parts(value, SourceTable::new(sources)))
    }
}

impl PartialEq for IgnitionJson {
    fn eq(&self, other: &Self) -> bool {
        self.view().equals(other.view())
    }
}

impl PartialEq<Value> for IgnitionJson {
    fn eq(&self, other: &Value) -> bool {
        self.view().equals(View {
            value: other,
            sources: &SourceTable::default(),
            source: false,
        })
    }
}

impl fmt::Debug for IgnitionJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.to_value() {
            Ok(value) => fmt::Debug::fmt(&value, f),
            Err(e) => write!(f, "<a config with an unreadable source: {e}>"),
        }
    }
}

/// Builds a JSON value, moving each string held by a `source` key into `sources` (a span of
/// the store when the string is found there as it is).
struct Seed<'s, 'd> {
    store: Store<'d>,
    sources: &'s mut Vec<Source>,
    /// The value is held by a `source` key.
    source: bool,
}

impl Seed<'_, '_> {
    fn push(&mut self, source: Source) -> Value {
        let index = self.sources.len().to_string();
        self.sources.push(source);
        Value::String(index)
    }

    fn span(&self, s: &str) -> Option<Source> {
        let Store::Text(doc) = self.store else {
            return None;
        };
        let start = (s.as_ptr() as usize).checked_sub(doc.as_str().as_ptr() as usize)?;
        Source::span(doc, start..start + s.len())
    }

    /// `s`, just read from the file, as a span of it: the parser has read up to and including
    /// its closing quote. The string needed no unescaping exactly when its opening quote is
    /// `s.len()` bytes before that one (every escape is longer than what it stands for), and a
    /// quote there is the opening one when no backslash precedes it (inside a string a quote
    /// is always escaped; outside one there is no backslash).
    fn stored(&self, s: &str) -> Option<Source> {
        let Store::File(file, consumed) = self.store else {
            return None;
        };
        let end = consumed.get().checked_sub(1)?;
        let start = end.checked_sub(s.len() as u64)?;
        let mut before = [0; 2];
        let mut after = [0; 1];
        file.read_exact_at(&mut before, start.checked_sub(2)?)
            .ok()?;
        file.read_exact_at(&mut after, end).ok()?;
        if before[1] != b'"' || before[0] == b'\\' || after != [b'"'] {
            return None;
        }
        // Both ends of the span are what the parser read (a guard on the count above).
        let k = s.len().min(64);
        let mut head = vec![0; k];
        let mut tail = vec![0; k];
        file.read_exact_at(&mut head, start).ok()?;
        file.read_exact_at(&mut tail, end - k as u64).ok()?;
        let bytes = s.as_bytes();
        (head == bytes[..k] && tail == bytes[bytes.len() - k..])
            .then(|| Source::stored(file, start..end))
    }
}

impl<'de> DeserializeSeed<'de> for Seed<'_, '_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_borrowed_str<E>(mut self, v: &'de str) -> Result<Value, E> {
        if !self.source {
            return Ok(Value::String(v.to_string()));
        }
        let source = self.span(v).unwrap_or_else(|| Source::from(v));
        Ok(self.push(source))
    }

    fn visit_str<E>(mut self, v: &str) -> Result<Value, E> {
        if !self.source {
            return Ok(Value::String(v.to_string()));
        }
        let source = self.stored(v).unwrap_or_else(|| Source::from(v));
        Ok(self.push(source))
    }

    fn visit_string<E>(mut self, v: String) -> Result<Value, E> {
        if !self.source {
            return Ok(Value::String(v));
        }
        Ok(self.push(Source::from(v)))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(v) = seq.next_element_seed(Seed {
            store: self.store,
            sources: &mut *self.sources,
            source: false,
        })? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            let value = access.next_value_seed(Seed {
                store: self.store,
                sources: &mut *self.sources,
                source: key == SOURCE_KEY,
            })?;
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }
}

#[cfg(test)]
#[path = "ignition_json_file_tests.rs"]
mod file_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DOC: &str = r#"{"ignition":{"version":"3.4.0"},"metadata":{"source":"kept"},
        "storage":{"files":[{"path":"/etc/a","contents":{"source":"data:,a"}},
        {"path":"/etc/b","contents":{"source":"data:,b\/c"}}]}}"#;

    #[test]
    fn a_document_lends_its_sources_and_serializes_as_given() {
        let text = DocumentText::from(DOC.to_string());
        let (value, sources) = parse_json_document(text.clone()).unwrap();
        assert_eq!(sources.len(), 3);
        assert_eq!(value["storage"]["files"][0]["contents"]["source"], "1");
        let ign = IgnitionJson::from_parts(value, sources);
        let plain: Value = serde_json::from_str(DOC).unwrap();
        assert_eq!(ign.to_value().unwrap(), plain);
        assert_eq!(serde_json::to_value(&ign).unwrap(), plain);
        assert_eq!(ign, plain);
        assert_eq!(ign, IgnitionJson::from_value(plain.clone()));
        assert_eq!(ign.version(), Some("3.4.0"));
        assert_eq!(
            ign.section(&["storage", "files", "1"]).unwrap(),
            Some(json!({"path": "/etc/b", "contents": {"source": "data:,b/c"}}))
        );
        let config = ign.parse().unwrap().config;
        assert_eq!(
            config.storage.files[1].contents.source,
            Some(Source::from("data:,b/c"))
        );
        // The unescaped source is a span of the document, not a copy.
        let a = config.storage.files[0].contents.source.clone().unwrap();
        let a = a.text().unwrap();
        let std::borrow::Cow::Borrowed(a) = a else {
            panic!("a copy")
        };
        let text = text.as_str();
        let start = a.as_ptr() as usize - text.as_ptr() as usize;
        assert_eq!(&text[start..start + a.len()], "data:,a");
    }

    #[test]
    fn other_values_are_left_alone_and_differences_are_seen() {
        let v = json!({"ignition": {"version": "3.2.0"}, "storage": {"files": [
            {"path": "/x", "contents": {"source": ["not", "a", "string"]}}]}});
        let ign = IgnitionJson::from_value(v.clone());
        assert_eq!(ign.to_value().unwrap(), v);
        let mut other = v.clone();
        other["storage"]["files"][0]["path"] = json!("/y");
        assert_ne!(ign, IgnitionJson::from_value(other));
        let a = IgnitionJson::from_value(json!({"contents": {"source": "data:,a"}}));
        let b = IgnitionJson::from_value(json!({"contents": {"source": "data:,b"}}));
        assert_ne!(a, b);
        // Indexes are not compared as such: the same source at another index is equal.
        let c = IgnitionJson::from_value(
            json!({"x": {"source": "data:,0"}, "contents": {"source": "data:,a"}}),
        );
        let d = IgnitionJson::from_value(
            json!({"contents": {"source": "data:,a"}, "x": {"source": "data:,0"}}),
        );
        assert_eq!(c, d);
    }
}
