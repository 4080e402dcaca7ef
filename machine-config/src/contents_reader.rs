//! A file's contents decoded as they are read, a piece at a time: what a check that compares
//! them with bytes elsewhere (on-disk validation) needs, without holding the whole decoded file.
//!
//! The reader yields exactly the bytes [`decode_resource`] returns, and fails wherever it fails
//! (a bad base64 piece, gzip data that does not inflate or inflates past the cap, a hash that
//! does not match, checked once the last byte has been read). It does not say *why*: its errors
//! are plain I/O errors, and a caller that needs the wording (a mismatch report) decodes the file
//! with [`File::decoded_contents`], whose errors are the MCD's.
//!
//! Streamed: base64 `data:` URLs (the form rendered configs use for every file), gzip-compressed
//! or not. Anything else (percent-encoded data, usually a few bytes) is decoded whole up front.

use std::borrow::Cow;
use std::io::{self, Read};

use sha2::{Digest as _, Sha256, Sha512};

use crate::contents::{MAX_DECOMPRESSED_BYTES, decode_resource};
use crate::dataurl;
use crate::ignition::File;
use crate::ignition::hash::{HashFunction, parse_hash};
use crate::source::Source;

/// Base64 symbols decoded per piece (whole quanta): about 48 KiB of output.
const PIECE_SYMBOLS: usize = 64 * 1024;

/// A file's decoded contents as a [`Read`] (see the module docs).
pub struct ContentsReader<'a> {
    inner: Inner<'a>,
    /// The decoded size, when it is known without decoding.
    len: Option<u64>,
    /// The verification hash being computed, and the expected lowercase hex.
    verify: Option<(Hasher, String)>,
}

enum Inner<'a> {
    Plain(Base64Pieces<'a>),
    Gzip(Capped<flate2::read::MultiGzDecoder<Base64Pieces<'a>>>),
    Whole(io::Cursor<Vec<u8>>),
}

enum Hasher {
    Sha256(Sha256),
    Sha512(Sha512),
}

impl Hasher {
    fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Sha256(h) => h.update(data),
            Hasher::Sha512(h) => h.update(data),
        }
    }

    fn hex(&mut self) -> String {
        match self {
            Hasher::Sha256(h) => hex::encode(h.finalize_reset()),
            Hasher::Sha512(h) => hex::encode(h.finalize_reset()),
        }
    }
}

impl<'a> ContentsReader<'a> {
    /// A reader of `file`'s decoded contents; `None` when they cannot be decoded (the header
    /// of the source, the compression or the hash syntax is wrong: `decoded_contents` says how).
    pub fn new(file: &'a File) -> Option<Self> {
        let res = &file.contents;
        // A source kept in a file is read here, once: the base64 text of this one file is
        // what the reader holds (the decoded contents come a piece at a time).
        let text = res.source.as_ref().map(Source::text).transpose().ok()?;
        let streamed = text.and_then(|src| {
            if dataurl::scheme(&src) != Some("data") {
                return None;
            }
            let (url, data) = dataurl::split(&src).ok()?;
            let start = data.as_ptr() as usize - src.as_ptr() as usize;
            url.base64.then_some((src, start))
        });
        let inner = match (streamed, res.compression.as_deref()) {
            (Some((src, start)), None | Some("")) => Inner::Plain(Base64Pieces::new(src, start)),
            (Some((src, start)), Some("gzip")) => Inner::Gzip(Capped {
                inner: flate2::read::MultiGzDecoder::new(Base64Pieces::new(src, start)),
                left: MAX_DECOMPRESSED_BYTES,
            }),
            // The hash is checked by the whole decode.
            _ => {
                let bytes = decode_resource(&file.path, res).ok()?;
                return Some(ContentsReader {
                    len: Some(bytes.len() as u64),
                    inner: Inner::Whole(io::Cursor::new(bytes)),
                    verify: None,
                });
            }
        };
        let verify = match &res.verification.hash {
            None => None,
            Some(hash) => {
                let (function, expected) = parse_hash(hash).ok()?;
                let hasher = match function {
                    HashFunction::Sha256 => Hasher::Sha256(Sha256::new()),
                    HashFunction::Sha512 => Hasher::Sha512(Sha512::new()),
                };
                Some((hasher, expected))
            }
        };
        let len = match &inner {
            Inner::Plain(pieces) => pieces.decoded_len(),
            _ => None,
        };
        Some(ContentsReader { inner, len, verify })
    }

    /// The decoded size, when it is known before reading (uncompressed base64 data, or data
    /// decoded up front); `None` for gzip data (only inflating it tells) or malformed base64.
    pub fn decoded_len(&self) -> Option<u64> {
        self.len
    }
}

impl Read for ContentsReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = match &mut self.inner {
            Inner::Plain(r) => r.read(buf)?,
            Inner::Gzip(r) => {
                let n = r.read(buf)?;
                // The end of the gzip data must be the end of the source, as it is when the
                // whole source is decoded before it is inflated.
                if n == 0 && !buf.is_empty() && !r.inner.get_ref().is_exhausted() {
                    return Err(invalid("data after the end of the gzip stream"));
                }
                n
            }
            Inner::Whole(r) => r.read(buf)?,
        };
        if let Some((hasher, expected)) = &mut self.verify {
            if n > 0 {
                hasher.update(&buf[..n]);
            } else if !buf.is_empty() {
                if hasher.hex() != *expected {
                    return Err(invalid("hash verification failed"));
                }
                // Checked once: reading again at the end is still the end.
                self.verify = None;
            }
        }
        Ok(n)
    }
}

fn invalid(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.into())
}

/// Base64 data decoded a piece at a time, line feeds skipped, padding allowed only at the end:
/// the pieces joined are what decoding the whole data gives, and every error it reports is one
/// here too.
struct Base64Pieces<'a> {
    /// The source; the data not decoded yet is `text[at_text..]`.
    text: Cow<'a, str>,
    at_text: usize,
    /// The data has line feeds (pieces are then gathered into `symbols`).
    line_feeds: bool,
    symbols: Vec<u8>,
    decoded: Vec<u8>,
    at: usize,
}

impl<'a> Base64Pieces<'a> {
    /// The data at `start` of `text` (a `data:` URL, its data after the comma).
    fn new(text: Cow<'a, str>, start: usize) -> Self {
        let line_feeds = memchr::memchr(b'\n', &text.as_bytes()[start..]).is_some();
        Base64Pieces {
            text,
            at_text: start,
            line_feeds,
            symbols: Vec::new(),
            decoded: Vec::new(),
            at: 0,
        }
    }

    /// The data not decoded yet.
    fn rest(&self) -> &[u8] {
        &self.text.as_bytes()[self.at_text..]
    }

    /// The decoded size of well-formed data (whole quanta, padding only at the end).
    fn decoded_len(&self) -> Option<u64> {
        let rest = self.rest();
        let feeds = if self.line_feeds {
            rest.iter().filter(|b| **b == b'\n').count()
        } else {
            0
        };
        let symbols = rest.len() - feeds;
        if !symbols.is_multiple_of(4) {
            return None;
        }
        let mut tail = rest.iter().rev().filter(|b| **b != b'\n');
        let padding = tail.by_ref().take(2).take_while(|b| **b == b'=').count();
        Some((symbols / 4 * 3 - padding) as u64)
    }

    /// Whether every piece has been decoded and handed out.
    fn is_exhausted(&self) -> bool {
        self.rest().is_empty() && self.at == self.decoded.len()
    }

    /// Decodes the next piece into `decoded`; false at the end of the data.
    fn next_piece(&mut self) -> io::Result<bool> {
        let rest = &self.text.as_bytes()[self.at_text..];
        if rest.is_empty() {
            return Ok(false);
        }
        let (piece, taken): (&[u8], usize) = if self.line_feeds {
            self.symbols.clear();
            let mut taken = 0;
            for &b in rest {
                taken += 1;
                if b != b'\n' {
                    self.symbols.push(b);
                    if self.symbols.len() == PIECE_SYMBOLS {
                        break;
                    }
                }
            }
            (&self.symbols, taken)
        } else {
            let n = rest.len().min(PIECE_SYMBOLS);
            (&rest[..n], n)
        };
        self.at_text += taken;
        // Padding ends the data: in a piece that is not the last it is an error, as it is in
        // the whole data. Only a piece's last quantum can pass its own decode with padding (a
        // `=` anywhere before it fails that decode), so only that is looked at.
        let last = rest[taken..].iter().all(|b| *b == b'\n');
        if !last && piece.iter().rev().take(2).any(|b| *b == b'=') {
            return Err(invalid("base64 padding before the end of the data"));
        }
        self.decoded.clear();
        self.at = 0;
        dataurl::decode_base64_piece(piece, &mut self.decoded).map_err(|e| invalid(e.0))?;
        Ok(true)
    }
}

impl Read for Base64Pieces<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.decoded.len() {
            if !self.next_piece()? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.decoded.len() - self.at);
        buf[..n].copy_from_slice(&self.decoded[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Inflated data, refused once it passes the cap the whole decode has.
struct Capped<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.left = self
            .left
            .checked_sub(n as u64)
            .ok_or_else(|| invalid("decompressed size exceeds the cap"))?;
        Ok(n)
    }
}

#[cfg(test)]
mod tests;
