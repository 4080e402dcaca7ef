//! A resource's `source` URL, held once however many parsed forms refer to it.
//!
//! File contents travel as `data:` URLs, which make up nearly all of a large config. A
//! [`Source`] is a cheap handle on such a string: a span of the file the config was read from
//! (an offset and a length: the text is read from the file each time it is used, so a parsed
//! config holds no contents at all), a span of a document's text in memory (no copy), or a
//! shared allocation of its own. Cloning a [`Config`], the MachineConfig that carries it, or an
//! update record's copy of either never copies the text.
//!
//! Every use of the text goes through [`Source::text`], which can fail only for a source kept in
//! a file: the file can no longer be read, or it changed since it was parsed (its size, inode or
//! modification time differ), and the error says which file.
//!
//! A process that keeps many documents repeating each other's contents can have equal large
//! sources share one allocation ([`shared::enable`]).
//!
//! A [`SourceTable`] collects the sources of one document while it is read (see
//! [`crate::IgnitionJson`]): in the JSON value the document leaves behind, each `source` string
//! is replaced by its index in the table, so that neither the value nor the typed config holds
//! a second copy.
//!
//! [`Config`]: crate::Config

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::ops::Range;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub mod shared;

/// A `source` string (a URL), shared.
#[derive(Clone)]
pub struct Source(Repr);

/// The text of a JSON document read in memory, shared by the sources that are spans of it: a
/// `String` (read from a file, or a server's answer), or anything else that holds UTF-8 text
/// for as long as it lives (the agent maps a large config file instead of copying it).
#[derive(Clone)]
pub struct DocumentText(Arc<dyn AsRef<str> + Send + Sync>);

impl DocumentText {
    /// Shares `text`.
    pub fn new(text: impl AsRef<str> + Send + Sync + 'static) -> Self {
        DocumentText(Arc::new(text))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        (*self.0).as_ref()
    }
}

impl From<String> for DocumentText {
    fn from(text: String) -> Self {
        DocumentText::new(text)
    }
}

#[derive(Clone)]
enum Repr {
    /// A string of its own.
    Owned(Arc<str>),
    /// A span of a document's text. The span holds a JSON string's contents that needed no
    /// unescaping, so the text *is* the value.
    Span {
        doc: DocumentText,
        range: Range<usize>,
    },
    /// A span of a file, read when used; as for `Span`, the bytes are the value.
    Stored {
        file: Arc<SourceFile>,
        range: Range<u64>,
    },
}

impl Source {
    /// A source spanning `range` of `doc`; `None` when the range is not a `str` boundary span.
    pub(crate) fn span(doc: &DocumentText, range: Range<usize>) -> Option<Self> {
        doc.as_str().get(range.clone())?;
        Some(Source(Repr::Span {
            doc: doc.clone(),
            range,
        }))
    }

    /// A source spanning `range` of `file` (bytes the parser read there as a JSON string that
    /// needed no unescaping).
    pub(crate) fn stored(file: &Arc<SourceFile>, range: Range<u64>) -> Self {
        Source(Repr::Stored {
            file: Arc::clone(file),
            range,
        })
    }

    /// The URL: borrowed when it is in memory, read from its file otherwise (see the module
    /// docs for when that fails).
    pub fn text(&self) -> io::Result<Cow<'_, str>> {
        match &self.0 {
            Repr::Owned(s) => Ok(Cow::Borrowed(s)),
            Repr::Span { doc, range } => Ok(Cow::Borrowed(&doc.as_str()[range.clone()])),
            Repr::Stored { file, range } => file.read_str(range.clone()).map(Cow::Owned),
        }
    }

    /// Whether the text is read from a file when used.
    #[cfg(test)]
    pub(crate) fn kept_in_file(&self) -> bool {
        matches!(self.0, Repr::Stored { .. })
    }

    /// Up to the first `n` bytes of the URL (fewer when a character would be cut): what a
    /// check of its scheme needs, without reading a source kept in a file whole.
    pub fn prefix(&self, n: usize) -> io::Result<Cow<'_, str>> {
        match &self.0 {
            Repr::Stored { file, range } => {
                let end = range.end.min(range.start + n as u64);
                let mut buf = vec![0; (end - range.start) as usize];
                file.read_exact_at(&mut buf, range.start)?;
                let valid = match std::str::from_utf8(&buf) {
                    Ok(_) => buf.len(),
                    Err(e) => e.valid_up_to(),
                };
                buf.truncate(valid);
                Ok(Cow::Owned(String::from_utf8(buf).unwrap_or_default()))
            }
            _ => {
                let text = self.text()?;
                let mut end = n.min(text.len());
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                Ok(match text {
                    Cow::Borrowed(t) => Cow::Borrowed(&t[..end]),
                    Cow::Owned(mut t) => {
                        t.truncate(end);
                        Cow::Owned(t)
                    }
                })
            }
        }
    }

    /// The URL's length in bytes (known without reading it).
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Owned(s) => s.len(),
            Repr::Span { range, .. } => range.len(),
            Repr::Stored { range, .. } => (range.end - range.start) as usize,
        }
    }

    /// Whether the URL is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether two handles share the very same bytes (so they are equal without comparing).
    fn same_bytes(&self, other: &Source) -> bool {
        match (&self.0, &other.0) {
            (Repr::Stored { file: f, range: r }, Repr::Stored { file: g, range: s }) => {
                Arc::ptr_eq(f, g) && r == s
            }
            (Repr::Stored { .. }, _) | (_, Repr::Stored { .. }) => false,
            _ => match (self.text(), other.text()) {
                (Ok(a), Ok(b)) => std::ptr::eq(a.as_ptr(), b.as_ptr()) && a.len() == b.len(),
                _ => false,
            },
        }
    }
}

impl Default for Source {
    fn default() -> Self {
        Source(Repr::Owned(Arc::from("")))
    }
}

/// Equal when the texts are. A source that cannot be read equals nothing, not even itself read
/// again: a change is then assumed, and the write it leads to reads the source and reports why
/// it cannot.
impl PartialEq for Source {
    fn eq(&self, other: &Self) -> bool {
        if self.len() != other.len() {
            return false;
        }
        if self.same_bytes(other) {
            return true;
        }
        match (self.text(), other.text()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Source {}

impl PartialEq<str> for Source {
    fn eq(&self, other: &str) -> bool {
        self.len() == other.len() && self.text().is_ok_and(|t| t == other)
    }
}

impl PartialEq<&str> for Source {
    fn eq(&self, other: &&str) -> bool {
        *self == **other
    }
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.text() {
            Ok(text) => fmt::Debug::fmt(&*text, f),
            Err(e) => write!(f, "<unreadable source: {e}>"),
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.text() {
            Ok(text) => f.write_str(&text),
            Err(e) => write!(f, "<unreadable source: {e}>"),
        }
    }
}

impl From<String> for Source {
    fn from(s: String) -> Self {
        Source(Repr::Owned(shared::shared(&s)))
    }
}

impl From<&str> for Source {
    fn from(s: &str) -> Self {
        Source(Repr::Owned(shared::shared(s)))
    }
}

impl Serialize for Source {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let text = self.text().map_err(serde::ser::Error::custom)?;
        s.serialize_str(&text)
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
    pub(crate) fn text<'a>(&'a self, index: &'a str) -> io::Result<Cow<'a, str>> {
        match index.parse::<usize>().ok().and_then(|i| self.0.get(i)) {
            Some(source) => source.text(),
            None => Ok(Cow::Borrowed(index)),
        }
    }

    /// [`Source::prefix`] of the source an index string stands for, or the string itself when
    /// it is no index.
    pub(crate) fn prefix<'a>(&'a self, index: &'a str, n: usize) -> io::Result<Cow<'a, str>> {
        match index.parse::<usize>().ok().and_then(|i| self.0.get(i)) {
            Some(source) => source.prefix(n),
            None => Ok(Cow::Borrowed(index)),
        }
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

/// A file sources are read from (a config file, `currentconfig`), open for the lifetime of the
/// sources. What it was when it was parsed (size, inode, modification time) is checked at every
/// read: a file written in place since then no longer holds the sources at their offsets. A
/// file replaced by a rename is not a change: the open file is still the one that was parsed
/// (its change time moves when it is unlinked, so it is not part of the check).
pub struct SourceFile {
    file: File,
    path: PathBuf,
    stamp: Stamp,
}

#[derive(PartialEq, Eq)]
struct Stamp {
    len: u64,
    ino: u64,
    mtime: (i64, i64),
}

impl Stamp {
    fn of(file: &File) -> io::Result<Self> {
        let m = file.metadata()?;
        Ok(Stamp {
            len: m.len(),
            ino: m.ino(),
            mtime: (m.mtime(), m.mtime_nsec()),
        })
    }
}

impl SourceFile {
    /// Opens the file at `path` for reading.
    pub fn open(path: &Path) -> io::Result<Arc<Self>> {
        Self::from_file(File::open(path)?, path)
    }

    /// A file already open for reading; `path` names it in errors.
    pub fn from_file(file: File, path: &Path) -> io::Result<Arc<Self>> {
        let stamp = Stamp::of(&file)?;
        Ok(Arc::new(SourceFile {
            file,
            path: path.to_path_buf(),
            stamp,
        }))
    }

    /// The path it was opened as.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its size when it was opened.
    pub fn len(&self) -> u64 {
        self.stamp.len
    }

    /// Whether it was empty when it was opened.
    pub fn is_empty(&self) -> bool {
        self.stamp.len == 0
    }

    /// Its first bytes, up to `n` (fewer when it is shorter).
    pub fn head(&self, n: usize) -> io::Result<Vec<u8>> {
        let mut buf = vec![0; n.min(self.stamp.len as usize)];
        self.read_exact_at(&mut buf, 0)?;
        Ok(buf)
    }

    /// Fills `buf` from `offset`, after checking the file is still the one opened.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let context = |e: io::Error| {
            io::Error::new(
                e.kind(),
                format!("reading a source from {}: {e}", self.path.display()),
            )
        };
        if Stamp::of(&self.file).map_err(context)? != self.stamp {
            return Err(io::Error::other(format!(
                "{} changed after it was read: the sources it held are no longer at their offsets",
                self.path.display()
            )));
        }
        self.file.read_exact_at(buf, offset).map_err(context)
    }

    fn read_str(&self, range: Range<u64>) -> io::Result<String> {
        let mut buf = vec![0; (range.end - range.start) as usize];
        self.read_exact_at(&mut buf, range.start)?;
        String::from_utf8(buf).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a source read from {} is not UTF-8", self.path.display()),
            )
        })
    }

    /// A reader of the file from `offset` on, which counts the bytes handed out in `consumed`
    /// (the offset of the next byte): the JSON parser reads a byte at a time, so the count
    /// says where in the file the string it just read ends.
    pub(crate) fn counting_reader(
        &self,
        offset: u64,
        consumed: std::rc::Rc<std::cell::Cell<u64>>,
    ) -> CountingReader<'_> {
        consumed.set(offset);
        CountingReader {
            file: &self.file,
            next: offset,
            buf: vec![0; 64 * 1024].into_boxed_slice(),
            at: 0,
            filled: 0,
            consumed,
        }
    }
}

impl fmt::Debug for SourceFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SourceFile({})", self.path.display())
    }
}

/// See [`SourceFile::counting_reader`].
pub(crate) struct CountingReader<'a> {
    file: &'a File,
    /// Offset of the next read from the file.
    next: u64,
    buf: Box<[u8]>,
    at: usize,
    filled: usize,
    consumed: std::rc::Rc<std::cell::Cell<u64>>,
}

impl Read for CountingReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.at == self.filled {
            self.filled = self.file.read_at(&mut self.buf, self.next)?;
            self.next += self.filled as u64;
            self.at = 0;
        }
        let n = out.len().min(self.filled - self.at);
        out[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
        self.at += n;
        self.consumed.set(self.consumed.get() + n as u64);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_is_the_text_it_covers_and_compares_by_contents() {
        let doc = DocumentText::from(String::from(r#"{"source":"data:,a"}"#));
        let span = Source::span(&doc, 11..18).unwrap();
        assert_eq!(span.text().unwrap(), "data:,a");
        assert_eq!(span, Source::from("data:,a"));
        assert_eq!(span.clone(), span);
        assert_ne!(span, Source::from("data:,b"));
        assert!(Source::span(&doc, 11..40).is_none());
        assert_eq!(serde_json::to_string(&span).unwrap(), r#""data:,a""#);
        assert_eq!(span.prefix(5).unwrap(), "data:");
        assert_eq!(Source::from("été").prefix(2).unwrap(), "é");
        assert_eq!(Source::from("ab").prefix(16).unwrap(), "ab");
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
        assert_eq!(table.text("0").unwrap(), "data:,x");
        assert_eq!(table.text("x").unwrap(), "x");
    }
}
