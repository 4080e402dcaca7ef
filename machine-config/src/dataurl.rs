//! `data:` URLs (RFC 2397), accepting exactly what Ignition and the MCD accept.
//!
//! Grammar: `data:[<type>/<subtype>][;<attr>=<value>]*[;base64],<data>`. Without `;base64` the data
//! is percent-encoded and may only contain URL characters (no spaces, no non-ASCII); with it the
//! data is padded standard base64, where line feeds are ignored.
//!
//! Errors never quote the URL (it is file contents, maybe a secret): they say what is wrong and
//! where (`invalid character at byte 3 of the percent-encoded data`).

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

/// A decoded `data:` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataUrl {
    /// `type/subtype`, `text/plain` when absent.
    pub media_type: String,
    /// Media type parameters (`charset` is `US-ASCII` by default).
    pub params: BTreeMap<String, String>,
    /// Whether the data was base64 (else percent-encoded).
    pub base64: bool,
    /// The decoded bytes.
    pub data: Vec<u8>,
}

/// Why a `data:` URL could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid data URL: {0}")]
pub struct DataUrlError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, DataUrlError> {
    Err(DataUrlError(msg.into()))
}

/// Standard alphabet, padding required, non-canonical trailing bits tolerated (like Go's
/// `base64.StdEncoding`).
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::RequireCanonical)
        .with_decode_allow_trailing_bits(true),
);

fn is_tspecial(c: char) -> bool {
    "()<>@,;:\\\"/[]?=".contains(c)
}

fn is_token_char(c: char) -> bool {
    c.is_ascii() && !c.is_ascii_control() && c != ' ' && !is_tspecial(c)
}

// Byte tests: a non-ASCII character's bytes are all non-ASCII, so the first byte failing is
// where the first character failing starts (the offsets the errors give), and a scan of bytes
// costs a fraction of one of `char`s on the megabytes of a large config.
fn is_url_byte(b: u8) -> bool {
    b.is_ascii() && !b.is_ascii_control() && !b" <>#\"{}|\\^[]`".contains(&b)
}

fn is_base64_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'\n')
}

const KNOWN_TYPES: [&str; 7] = [
    "text",
    "image",
    "audio",
    "video",
    "application",
    "message",
    "multipart",
];

/// Returns the scheme of a URL-like string (`https` for `https://x`), if it has one.
pub fn scheme(source: &str) -> Option<&str> {
    let (scheme, _) = source.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(scheme)
}

/// Decodes a `data:` URL.
pub fn decode(url: &str) -> Result<DataUrl, DataUrlError> {
    let (mut out, data) = split(url)?;
    if out.base64
        && let Some(bytes) = decode_base64_fast(data.as_bytes())
    {
        out.data = bytes;
        return Ok(out);
    }
    out.data = if out.base64 {
        if let Some(at) = data.bytes().position(|b| !is_base64_byte(b)) {
            return err(format!("invalid base64 character at byte {at} of the data"));
        }
        let compact: Vec<u8> = data.bytes().filter(|b| *b != b'\n').collect();
        BASE64.decode(compact).or_else(|e| err(base64_error(&e)))?
    } else {
        if let Some(at) = data.bytes().position(|b| !is_url_byte(b)) {
            return err(format!(
                "invalid character at byte {at} of the percent-encoded data"
            ));
        }
        percent_decode(data)?
    };
    Ok(out)
}

/// Checks a `data:` URL as [`decode`] does, failing with the very same error, without holding
/// its data decoded: base64 is decoded in pieces into one small buffer. Validating a config
/// checks every source; decoding each whole held a large file's base64 text compacted and its
/// bytes at once (4 MiB for a 1.6 MiB CA bundle), in every parse of the config.
pub fn check(url: &str) -> Result<(), DataUrlError> {
    let (head, data) = split(url)?;
    // No separate scan for base64: a byte out of the alphabet (line feeds aside) fails the
    // decode of its piece, which is then worded by the whole decode like any other failure.
    let ok = if head.base64 {
        base64_decodes_in_pieces(data.as_bytes())
    } else {
        data.bytes().all(is_url_byte) && percent_scan(data, |_| ()).is_ok()
    };
    match ok {
        true => Ok(()),
        // the whole decode words the error (a piece's offsets are not the data's)
        false => decode(url).map(|_| ()),
    }
}

/// [`check`], except that base64 data is not decoded: only the header is checked then (for a
/// caller that decodes the data anyway, see [`crate::deferring_contents_base64`]).
pub fn check_unless_base64(url: &str) -> Result<(), DataUrlError> {
    match split(url)? {
        (head, _) if head.base64 => Ok(()),
        _ => check(url),
    }
}

/// Bytes of base64 text decoded at a time by [`check`] (whole quanta).
const CHECK_PIECE: usize = 48 * 1024;

/// Whether base64 `data` (line feeds ignored) decodes. Every piece but the last is whole quanta
/// without padding, so the pieces decode exactly when the whole does.
fn base64_decodes_in_pieces(data: &[u8]) -> bool {
    let mut out = vec![0u8; CHECK_PIECE / 4 * 3];
    let decodes = |piece: &[u8], last: bool, out: &mut [u8]| {
        (last || !piece.iter().rev().take(2).any(|b| *b == b'=')) && decode_base64_slice(piece, out)
    };
    if memchr::memchr(b'\n', data).is_none() {
        let mut pieces = data.chunks(CHECK_PIECE).peekable();
        while let Some(piece) = pieces.next() {
            if !decodes(piece, pieces.peek().is_none(), &mut out) {
                return false;
            }
        }
        return true;
    }
    let mut compact = data.iter().copied().filter(|b| *b != b'\n').peekable();
    let mut piece = Vec::with_capacity(CHECK_PIECE);
    loop {
        piece.clear();
        piece.extend(compact.by_ref().take(CHECK_PIECE));
        let last = compact.peek().is_none();
        if !decodes(&piece, last, &mut out) {
            return false;
        }
        if last {
            return true;
        }
    }
}

/// Reads a `data:` URL's header: the URL with no data yet (`data` empty), and its data still
/// encoded (base64 or percent-encoded, as `base64` says). [`decode`] is this, then the data.
pub fn split(url: &str) -> Result<(DataUrl, &str), DataUrlError> {
    let Some(rest) = url.strip_prefix("data:") else {
        return err("missing data prefix");
    };
    let Some((header, data)) = rest.split_once(',') else {
        return err("missing comma before data");
    };
    let mut parts = header.split(';');
    let media = parts.next().unwrap_or_default();
    let mut out = DataUrl {
        media_type: "text/plain".to_string(),
        params: BTreeMap::from([("charset".to_string(), "US-ASCII".to_string())]),
        base64: false,
        data: Vec::new(),
    };
    if !media.is_empty() {
        let Some((ty, sub)) = media.split_once('/') else {
            return err("media type has no slash");
        };
        let known = KNOWN_TYPES.iter().any(|k| ty.starts_with(k))
            || ty.starts_with("x-")
            || ty.starts_with("X-");
        if !known || !ty.chars().all(is_token_char) {
            return err("invalid media type");
        }
        if sub.is_empty() || !sub.chars().all(is_token_char) {
            return err("invalid media subtype");
        }
        out.media_type = media.to_string();
        out.params.remove("charset");
    }
    let params: Vec<&str> = parts.collect();
    for (i, param) in params.iter().enumerate() {
        match param.split_once('=') {
            Some((attr, value)) => {
                if attr.is_empty() || !attr.chars().all(is_token_char) {
                    return err(format!("invalid attribute of parameter {}", i + 1));
                }
                let value = param_value(value)
                    .map_err(|e| DataUrlError(format!("parameter {}: {}", i + 1, e.0)))?;
                out.params.insert(attr.to_string(), value);
            }
            None if i + 1 == params.len() && *param == "base64" => out.base64 = true,
            None if i + 1 == params.len() => {
                return err(format!(
                    "expected base64 as the last parameter, got another word (parameter {})",
                    i + 1
                ));
            }
            None => return err(format!("parameter {} has no value", i + 1)),
        }
    }
    Ok((out, data))
}

/// Decodes a piece of base64 data (no line feeds) the way [`decode`] does the whole: a piece
/// that is not the last must be whole quanta without padding (see `contents_reader`).
pub(crate) fn decode_base64_piece(piece: &[u8], out: &mut Vec<u8>) -> Result<(), DataUrlError> {
    let len = out.len();
    if base64_simd::STANDARD.decode_append(piece, out).is_ok() {
        return Ok(());
    }
    out.truncate(len);
    BASE64
        .decode_vec(piece, out)
        .or_else(|e| err(base64_error(&e)))
}

// Every decode of base64 data tries `base64_simd` first (several times faster: decoding was
// most of the CPU of checking a large config), and what that refuses is decoded again by
// `BASE64`, which decides and words the error. `base64_simd`'s standard engine accepts a subset
// of what `BASE64` does (it refuses non-zero trailing bits, which Ignition's decoder accepts)
// and decodes alike where both accept (a test holds them to it): the results are `BASE64`'s.

/// The bytes of base64 `data` when it has no line feeds and the fast decode takes it (what a
/// rendered config's data always is); `None` for the long way.
fn decode_base64_fast(data: &[u8]) -> Option<Vec<u8>> {
    if memchr::memchr(b'\n', data).is_some() {
        return None;
    }
    base64_simd::STANDARD.decode_to_vec(data).ok()
}

/// Whether base64 `piece` (no line feeds) decodes into `out`, which has room for it.
fn decode_base64_slice(piece: &[u8], out: &mut [u8]) -> bool {
    let fits = piece.len() / 4 * 3 <= out.len();
    (fits
        && base64_simd::STANDARD
            .decode(piece, base64_simd::Out::from_slice(out))
            .is_ok())
        || BASE64.decode_slice(piece, out).is_ok()
}

fn param_value(value: &str) -> Result<String, DataUrlError> {
    if let Some(quoted) = value.strip_prefix('"') {
        let Some(inner) = quoted.strip_suffix('"') else {
            return err("unclosed quoted string");
        };
        let mut s = String::new();
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some(e) => s.push(e),
                    None => return err("unterminated escape in quoted parameter"),
                },
                c if c.is_ascii() => s.push(c),
                _ => return err("invalid character in quoted value"),
            }
        }
        return Ok(s);
    }
    if value.is_empty() || !value.chars().all(is_token_char) {
        return err("invalid value");
    }
    String::from_utf8(percent_decode(value)?).or_else(|_| err("value is not UTF-8"))
}

/// A base64 error without the offending byte (the `base64` crate quotes it).
fn base64_error(e: &base64::DecodeError) -> String {
    use base64::DecodeError::*;
    let what = match e {
        InvalidByte(offset, _) => format!("invalid byte at offset {offset}"),
        InvalidLength(len) => format!("invalid length ({len} symbols)"),
        InvalidLastSymbol { offset, .. } => format!("invalid last symbol at offset {offset}"),
        InvalidPadding => "invalid padding".to_string(),
    };
    format!("bad base64 data: {what} (line feeds not counted)")
}

fn percent_decode(s: &str) -> Result<Vec<u8>, DataUrlError> {
    let mut out = Vec::with_capacity(s.len());
    percent_scan(s, |b| out.push(b))?;
    Ok(out)
}

/// Percent-decodes `s`, each byte given to `out`.
fn percent_scan(s: &str, mut out: impl FnMut(u8)) -> Result<(), DataUrlError> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).unwrap_or_default();
            let text = std::str::from_utf8(hex).unwrap_or_default();
            match (hex.len(), u8::from_str_radix(text, 16)) {
                (2, Ok(b)) if text.chars().all(|c| c.is_ascii_hexdigit()) => out(b),
                _ => return err(format!("bad percent-escape at byte {i}")),
            }
            i += 3;
        } else {
            out(bytes[i]);
            i += 1;
        }
    }
    Ok(())
}

/// Encodes bytes as `data:;base64,...` (what the MCO generates for its own files).
pub fn encode_base64(data: &[u8]) -> String {
    format!("data:;base64,{}", BASE64.encode(data))
}

/// Encodes bytes as `data:,<percent-encoded>`, keeping RFC 2396's unreserved characters
/// (`A-Za-z0-9-_.!~*'()`) as the MCS's encoder does.
pub fn encode_percent(data: &[u8]) -> String {
    let mut s = String::from("data:,");
    for &b in data {
        if b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast decoder never accepts what `BASE64` refuses, and decodes alike where both
    /// accept: every string of up to 6 symbols over an alphabet of the edge cases (padding,
    /// trailing bits, bytes out of the alphabet), and longer ones built from them.
    #[test]
    fn the_fast_base64_decode_agrees_with_the_reference_one() {
        let symbols = [b'A', b'B', b'Q', b'/', b'+', b'=', b'-', b'\n'];
        let mut checked = 0;
        let mut fast_refused = 0;
        for len in 0..=6u32 {
            for n in 0..symbols.len().pow(len) {
                let mut data = Vec::new();
                let mut k = n;
                for _ in 0..len {
                    data.push(symbols[k % symbols.len()]);
                    k /= symbols.len();
                }
                // And the same behind a long valid prefix (the SIMD loop's own path).
                for prefix in [&b""[..], &b"QUJDREVGR0hJSktMTU5PUFFSU1RVVldY"[..]] {
                    let data = [prefix, &data].concat();
                    let reference = BASE64.decode(&data).ok();
                    let fast = decode_base64_fast(&data);
                    if let Some(fast) = &fast {
                        assert_eq!(Some(fast), reference.as_ref(), "{data:?}");
                    } else {
                        fast_refused += 1;
                    }
                    let mut out = vec![0; data.len()];
                    assert_eq!(
                        decode_base64_slice(&data, &mut out),
                        reference.is_some(),
                        "{data:?}"
                    );
                    let mut piece = vec![7];
                    let decoded = decode_base64_piece(&data, &mut piece);
                    assert_eq!(decoded.is_ok(), reference.is_some(), "{data:?}");
                    if let Some(reference) = reference {
                        assert_eq!(piece, [&[7][..], &reference].concat(), "{data:?}");
                    }
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 2 * (0..=6).map(|l| 8usize.pow(l)).sum::<usize>());
        assert!(fast_refused > 0);
        // Trailing bits: Ignition's decoder accepts them; the fast one does not, so the
        // reference decides.
        assert_eq!(decode("data:;base64,QR==").unwrap().data, b"A");
    }

    #[test]
    fn decodes_valid_urls() {
        let cases: &[(&str, &[u8], &str, bool)] = &[
            ("data:,", b"", "text/plain", false),
            ("data:,hello%20world", b"hello world", "text/plain", false),
            ("data:,a%0Ab", b"a\nb", "text/plain", false),
            ("data:;base64,aGVsbG8=", b"hello", "text/plain", true),
            (
                "data:text/plain;charset=utf-8;base64,aGVsbG8K",
                b"hello\n",
                "text/plain",
                true,
            ),
            (
                "data:text/plain;base64,aGVs\nbG8=",
                b"hello",
                "text/plain",
                true,
            ),
            (
                "data:application/octet-stream,%00%FF",
                &[0, 255],
                "application/octet-stream",
                false,
            ),
            ("data:x-custom/thing,ok", b"ok", "x-custom/thing", false),
            (
                "data:text/plain;charset=\"utf-8\",x",
                b"x",
                "text/plain",
                false,
            ),
        ];
        for (url, data, media, b64) in cases {
            let d = decode(url).unwrap_or_else(|e| panic!("{url}: {e}"));
            assert_eq!(d.data, *data, "{url}");
            assert_eq!(d.media_type, *media, "{url}");
            assert_eq!(d.base64, *b64, "{url}");
        }
        let d = decode("data:text/plain;charset=utf-8;base64,aGk=").unwrap();
        assert_eq!(d.params.get("charset").map(String::as_str), Some("utf-8"));
        assert_eq!(
            decode("data:,x")
                .unwrap()
                .params
                .get("charset")
                .map(String::as_str),
            Some("US-ASCII")
        );
    }

    #[test]
    fn rejects_malformed_urls() {
        let cases = [
            ("https://example.com/x", "missing data prefix"),
            ("data:text/plain", "missing comma before data"),
            (
                "data:,hello world",
                "invalid character at byte 5 of the percent-encoded data",
            ),
            (
                "data:,caf\u{e9}",
                "invalid character at byte 3 of the percent-encoded data",
            ),
            ("data:,%zz", "bad percent-escape at byte 0"),
            ("data:,abc%4", "bad percent-escape at byte 3"),
            ("data:;base64,aGVsbG8", "bad base64 data: invalid"),
            (
                "data:;base64,aGV sbG8=",
                "invalid base64 character at byte 3 of the data",
            ),
            (
                "data:;base65,aGVsbG8=",
                "expected base64 as the last parameter",
            ),
            ("data:foo/bar,x", "invalid media type"),
            ("data:text,x", "media type has no slash"),
            (
                "data:text/plain;charset,x",
                "got another word (parameter 1)",
            ),
            ("data:text/plain;charset;a=b,x", "parameter 1 has no value"),
            (
                "data:text/plain;a=\"\u{e9}\",x",
                "parameter 1: invalid character in quoted value",
            ),
        ];
        for (url, want) in cases {
            let e = decode(url).expect_err(url).to_string();
            assert!(e.starts_with("invalid data URL: "), "{url}: {e}");
            assert!(e.contains(want), "{url}: got {e:?}, want {want:?}");
        }
    }

    #[test]
    fn check_fails_exactly_when_decode_does_and_with_its_error() {
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let big = encode_base64(&bytes);
        let data = big.strip_prefix("data:;base64,").unwrap();
        let lines: Vec<&str> = data
            .as_bytes()
            .chunks(76)
            .map(|l| std::str::from_utf8(l).unwrap())
            .collect();
        let cases = [
            big.clone(),
            format!("data:;base64,{}", lines.join("\n")),
            // one piece and four symbols more, and its last symbol short
            encode_base64(&bytes[..CHECK_PIECE / 4 * 3 + 3]),
            big[..big.len() - 1].to_string(),
            // padding inside what would be a piece that is not the last
            format!("data:;base64,{}", "QQ==".repeat(20_000)),
            format!("data:;base64,{}", "QR==".repeat(3)),
            format!("data:;base64,{}#{}", &data[..60_000], &data[60_000..]),
            "data:;base64,aGVsbG8".to_string(),
            "data:;base64,aGV sbG8=".to_string(),
            // out of the alphabet, found by the decode of the piece (no scan before it)
            "data:;base64,aGVs\u{e9}bG8=".to_string(),
            "data:;base64,aGVs\nbG8-".to_string(),
            format!("data:;base64,{}_{}", &data[..70_000], &data[70_001..]),
            "data:,caf\u{e9}".to_string(),
            "data:,hello%20world".to_string(),
            "data:,hello world".to_string(),
            "data:,abc%4".to_string(),
            "data:text,x".to_string(),
            "https://example.com/x".to_string(),
        ];
        for url in &cases {
            let short = &url[..url.len().min(40)];
            assert_eq!(check(url), decode(url).map(|_| ()), "{short}");
        }
        assert!(check(&cases[0]).is_ok() && check(&cases[1]).is_ok() && check(&cases[2]).is_ok());
        assert!(check(&cases[4]).is_err() && check(&cases[6]).is_err());
        assert_eq!(
            check("data:;base64,aGVs\u{e9}bG8=")
                .unwrap_err()
                .to_string(),
            "invalid data URL: invalid base64 character at byte 4 of the data"
        );
    }

    #[test]
    fn encoders_round_trip() {
        let data = b"line one\nline two: 100% \x00\xff";
        assert_eq!(decode(&encode_base64(data)).unwrap().data, data);
        assert_eq!(decode(&encode_percent(data)).unwrap().data, data);
    }

    #[test]
    fn percent_encoding_escapes_like_the_mcs() {
        assert_eq!(encode_percent(b"a-Z_0.!~*'()"), "data:,a-Z_0.!~*'()");
        assert_eq!(
            encode_percent(b"{\"k\": 1}\n"),
            "data:,%7B%22k%22%3A%201%7D%0A"
        );
        assert_eq!(encode_percent("é".as_bytes()), "data:,%C3%A9");
        assert_eq!(decode(&encode_percent(b"x y/z")).unwrap().data, b"x y/z");
    }

    #[test]
    fn schemes() {
        assert_eq!(scheme("https://x/y"), Some("https"));
        assert_eq!(scheme("data:,x"), Some("data"));
        assert_eq!(scheme("arn:aws:s3:::b/k"), Some("arn"));
        assert_eq!(scheme("/etc/passwd"), None);
        assert_eq!(scheme(""), None);
    }
}
