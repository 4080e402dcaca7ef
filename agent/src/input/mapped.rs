//! A large JSON config file mapped into memory instead of read into a buffer of its own.
//!
//! `validate` parses its config in place, every file's contents a span of the text (see
//! [`machine_config::ignition_json::parse_json_document`]). Reading a 10 MiB config copies it
//! out of the page cache into fresh pages, which the kernel must first zero: about a quarter of
//! `validate`'s CPU on the benchmark config (docs/benchmarks.md, "validate"). A private
//! read-only mapping uses the page cache's own pages, so nothing is copied or zeroed.
//!
//! The price: the text must not change while it is mapped. A config rewritten *in place* while
//! `validate` runs would change bytes the parse has already checked, and one truncated under the
//! mapping raises `SIGBUS`. Configs are replaced by rename (the agent's `currentconfig`, the
//! files tools write), which leaves the mapped file as it was; a file smaller than
//! [`MAP_AT_LEAST`] is read as before, where copying costs nothing worth the risk.

// The agent's second `unsafe`: mmap and munmap take raw addresses (see the SAFETY notes).
#![allow(unsafe_code)]

use std::ffi::c_void;
use std::fs::File;
use std::ptr::NonNull;

use rustix::mm::{MapFlags, ProtFlags};

/// Files smaller than this are read: below it, mapping saves nothing measurable.
pub const MAP_AT_LEAST: u64 = 1 << 20;

/// A file's text, mapped read-only, known to be UTF-8 and to start (after a byte order mark
/// and blanks) with `{`.
pub struct MappedJson {
    addr: NonNull<c_void>,
    len: usize,
    /// Where the text starts: past a UTF-8 byte order mark.
    start: usize,
}

// SAFETY: the mapping is read-only and owned by this value alone (unmapped once, in `drop`);
// sharing `&[u8]` views of it between threads is as safe as sharing any immutable buffer.
unsafe impl Send for MappedJson {}
// SAFETY: as for `Send`: nothing writes through the mapping.
unsafe impl Sync for MappedJson {}

impl MappedJson {
    /// Maps `file` when it is a regular file of at least [`MAP_AT_LEAST`] bytes whose text is a
    /// JSON object in UTF-8; `None` otherwise (too small, not JSON, not UTF-8, or the mapping
    /// failed): the caller then reads the file, and its parse says what is wrong.
    pub fn map(file: &File) -> Option<Self> {
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() < MAP_AT_LEAST {
            return None;
        }
        let len = usize::try_from(meta.len()).ok()?;
        // SAFETY: a fresh private read-only mapping of `len` bytes of an open regular file at
        // an address the kernel picks: no existing memory is touched. POPULATE reads the pages
        // in at once (they are in the page cache: the text is scanned end to end next).
        let addr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ,
                MapFlags::PRIVATE | MapFlags::POPULATE,
                file,
                0,
            )
        }
        .ok()?;
        let mut mapped = MappedJson {
            addr: NonNull::new(addr)?,
            len,
            start: 0,
        };
        let bytes = mapped.bytes();
        let start = if bytes.starts_with(b"\xEF\xBB\xBF") {
            3
        } else {
            0
        };
        let first = bytes[start..].iter().find(|b| !b.is_ascii_whitespace());
        if first != Some(&b'{') || std::str::from_utf8(&bytes[start..]).is_err() {
            return None;
        }
        mapped.start = start;
        Some(mapped)
    }

    /// The whole mapping.
    fn bytes(&self) -> &[u8] {
        // SAFETY: `addr` is the start of a live mapping of `len` readable bytes (unmapped only
        // when `self` is dropped, which the borrow outlives not).
        unsafe { std::slice::from_raw_parts(self.addr.as_ptr().cast::<u8>(), self.len) }
    }
}

impl AsRef<str> for MappedJson {
    fn as_ref(&self) -> &str {
        // SAFETY: `map` checked these bytes are UTF-8, and the mapping is read-only (see the
        // module docs for a file changed in place under it).
        unsafe { std::str::from_utf8_unchecked(&self.bytes()[self.start..]) }
    }
}

impl Drop for MappedJson {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once; no borrow of it outlives `self`.
        // Failing to unmap leaves address space mapped, nothing worse: ignored.
        let _ = unsafe { rustix::mm::munmap(self.addr.as_ptr(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn file_with(bytes: &[u8]) -> File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        f
    }

    /// A JSON object of at least `len` bytes: `{"a":"xxx…"}`.
    fn json_of(len: usize, prefix: &[u8]) -> Vec<u8> {
        let mut v = prefix.to_vec();
        v.extend_from_slice(b" {\"a\":\"");
        v.resize(len, b'x');
        v.extend_from_slice(b"\"}");
        v
    }

    #[test]
    fn a_large_json_file_is_mapped_as_its_text() {
        let big = MAP_AT_LEAST as usize;
        for prefix in [&b""[..], b"\xEF\xBB\xBF"] {
            let bytes = json_of(big, prefix);
            let mapped = MappedJson::map(&file_with(&bytes)).expect("mapped");
            let text: &str = mapped.as_ref();
            assert_eq!(text.as_bytes(), &bytes[prefix.len()..]);
            assert!(text.starts_with(" {\"a\":\"x"));
        }
    }

    #[test]
    fn what_is_not_a_large_utf8_json_object_is_left_to_be_read() {
        let big = MAP_AT_LEAST as usize;
        let small = json_of(100, b"");
        let mut not_utf8 = json_of(big, b"");
        not_utf8[big / 2] = 0xFF;
        let mut yaml = json_of(big, b"");
        yaml[1] = b'a';
        for (what, bytes) in [
            ("small", small),
            ("not UTF-8", not_utf8),
            ("not JSON", yaml),
        ] {
            assert!(MappedJson::map(&file_with(&bytes)).is_none(), "{what}");
        }
        let dir = tempfile::tempdir().unwrap();
        assert!(MappedJson::map(&File::open(dir.path()).unwrap()).is_none());
    }
}
