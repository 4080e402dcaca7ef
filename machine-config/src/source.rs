//! A resource's `source` URL, held once however many parsed forms refer to it.
//!
//! File contents travel as `data:` URLs, which make up nearly all of a large config. A
//! [`Source`] is a cheap handle on such a string: either a span of the document text the config
//! was read from (no copy at all) or a shared allocation of its own. Cloning a [`Config`], the
//! MachineConfig that carries it, or an update record's copy of either never copies the text.
//!
//! A [`SourceTable`] collects the sources of one document while it is read (see
//! [`crate::IgnitionJson`]): in the JSON value the document leaves behind, each `source` string
//! is replaced by its index in the table, so that neither the value nor the typed config holds
//! a second copy.
//!
//! [`Config`]: crate::Config

use std::cell::RefCell;
use std::fmt;
use std::ops::{Deref, Range};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A `source` string (a URL), shared.
#[derive(Clone)]
pub struct Source(Repr);

#[derive(Clone)]
enum Repr {
    /// A string of its own.
    Owned(Arc<str>),
    /// A span of a document's text. The span holds a JSON string's contents that needed no
    /// unescaping, so the text *is* the value.
    Span {
        doc: Arc<String>,
        range: Range<usize>,
    },
}

impl Source {
    /// A source spanning `range` of `doc`; `None` when the range is not a `str` boundary span.
    pub(crate) fn span(doc: &Arc<String>, range: Range<usize>) -> Option<Self> {
        doc.get(range.clone())?;
        Some(Source(Repr::Span {
            doc: Arc::clone(doc),
            range,
        }))
    }

    /// The URL.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Owned(s) => s,
            Repr::Span { doc, range } => &doc[range.clone()],
        }
    }

    /// Whether two handles share the very same bytes (so they are equal without comparing).
    fn same_bytes(&self, other: &Source) -> bool {
        let (a, b) = (self.as_str(), other.as_str());
        std::ptr::eq(a.as_ptr(), b.as_ptr()) && a.len() == b.len()
    }
}

impl Default for Source {
    fn default() -> Self {
        Source(Repr::Owned(Arc::from("")))
    }
}

impl Deref for Source {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Source {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for Source {
    fn eq(&self, other: &Self) -> bool {
        self.same_bytes(other) || self.as_str() == other.as_str()
    }
}

impl Eq for Source {}

impl PartialEq<str> for Source {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Source {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<String> for Source {
    fn from(s: String) -> Self {
        Source(Repr::Owned(Arc::from(s)))
    }
}

impl From<&str> for Source {
    fn from(s: &str) -> Self {
        Source(Repr::Owned(Arc::from(s)))
    }
}

impl Serialize for Source {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Source {
    /// A string; while a [`SourceTable`] is being resolved (see `SourceTable::resolving`),
    /// the string is an index into it.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = Source;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Source, E> {
                match RESOLVING.with(|t| t.borrow().as_ref().map(|t| t.lookup(v))) {
                    None => Ok(Source::from(v)),
                    Some(Some(source)) => Ok(source),
                    Some(None) => Err(E::custom("a source that is not in the document")),
                }
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Source, E> {
                match RESOLVING.with(|t| t.borrow().is_some()) {
                    false => Ok(Source::from(v)),
                    true => self.visit_str(&v),
                }
            }
        }
        d.deserialize_string(Visit)
    }
}

/// The sources of one document, in the order they were read. Cloning shares them.
#[derive(Clone, Default)]
pub struct SourceTable(Arc<Vec<Source>>);

thread_local! {
    /// The table typed decoding resolves `source` indexes against, while one is set.
    static RESOLVING: RefCell<Option<SourceTable>> = const { RefCell::new(None) };
}

impl SourceTable {
    /// A table of these sources.
    pub(crate) fn new(sources: Vec<Source>) -> Self {
        SourceTable(Arc::new(sources))
    }

    /// The source an index string (`"12"`) stands for.
    pub(crate) fn lookup(&self, index: &str) -> Option<Source> {
        let i: usize = index.parse().ok()?;
        self.0.get(i).cloned()
    }

    /// The text an index string stands for, or the string itself when it is no index.
    pub(crate) fn text<'a>(&'a self, index: &'a str) -> &'a str {
        index
            .parse::<usize>()
            .ok()
            .and_then(|i| self.0.get(i))
            .map_or(index, Source::as_str)
    }

    /// Runs `f` (typed decoding of a value this table belongs to) with every [`Source`] read
    /// as an index into this table.
    pub(crate) fn resolving<T>(&self, f: impl FnOnce() -> T) -> T {
        struct Reset(Option<SourceTable>);
        impl Drop for Reset {
            fn drop(&mut self) {
                let previous = self.0.take();
                RESOLVING.with(|t| *t.borrow_mut() = previous);
            }
        }
        let previous = RESOLVING.with(|t| t.borrow_mut().replace(self.clone()));
        let _reset = Reset(previous);
        f()
    }

    /// How many sources the table holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the table holds no source.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for SourceTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SourceTable({} sources)", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_is_the_text_it_covers_and_compares_by_contents() {
        let doc = Arc::new(String::from(r#"{"source":"data:,a"}"#));
        let span = Source::span(&doc, 11..18).unwrap();
        assert_eq!(span.as_str(), "data:,a");
        assert_eq!(span, Source::from("data:,a"));
        assert_eq!(span.clone(), span);
        assert_ne!(span, Source::from("data:,b"));
        assert!(Source::span(&doc, 11..40).is_none());
        assert_eq!(serde_json::to_string(&span).unwrap(), r#""data:,a""#);
    }

    #[test]
    fn indexes_resolve_only_while_a_table_is_set() {
        let table = SourceTable::new(vec![Source::from("data:,x")]);
        let plain: Source = serde_json::from_str(r#""0""#).unwrap();
        assert_eq!(plain, "0");
        let resolved: Source = table.resolving(|| serde_json::from_str(r#""0""#).unwrap());
        assert_eq!(resolved, "data:,x");
        let missing = table.resolving(|| serde_json::from_str::<Source>(r#""1""#));
        assert!(missing.is_err());
        let after: Source = serde_json::from_str(r#""0""#).unwrap();
        assert_eq!(after, "0");
        assert_eq!(table.text("0"), "data:,x");
        assert_eq!(table.text("x"), "x");
    }
}
