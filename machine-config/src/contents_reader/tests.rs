use std::io::{Read as _, Write as _};

use sha2::{Digest as _, Sha256, Sha512};

use super::*;
use crate::ignition::{Resource, Verification};

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

fn file(source: Option<String>, compression: Option<&str>, hash: Option<String>) -> File {
    File {
        path: "/etc/f".to_string(),
        contents: Resource {
            source: source.map(Into::into),
            compression: compression.map(str::to_string),
            verification: Verification { hash },
            ..Resource::default()
        },
        ..File::default()
    }
}

/// Reads the whole stream in small, odd-sized reads (pieces and reads do not line up).
fn read_all(mut r: ContentsReader<'_>) -> Result<Vec<u8>, std::io::Error> {
    let mut out = Vec::new();
    let mut buf = [0u8; 1000];
    loop {
        match r.read(&mut buf)? {
            0 => return Ok(out),
            n => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// The stream gives what the whole decode gives, or fails where it fails; the size it knows
/// up front is the decoded size.
fn assert_same_as_whole(name: &str, f: &File) {
    let whole = f.decoded_contents();
    let Some(reader) = ContentsReader::new(f) else {
        assert!(
            whole.is_err(),
            "{name}: no reader, but the whole decode worked"
        );
        return;
    };
    let len = reader.decoded_len();
    match (whole, read_all(reader)) {
        (Ok(want), Ok(got)) => {
            assert!(want == got, "{name}: streamed bytes differ");
            if let Some(len) = len {
                assert_eq!(len, want.len() as u64, "{name}: size known up front");
            }
        }
        (Err(_), Err(_)) => {}
        (want, got) => panic!(
            "{name}: whole decode {:?}, stream {:?}",
            want.map(|b| b.len()),
            got.map(|b| b.len())
        ),
    }
}

/// Pseudo-random bytes, so that gzip does not shrink them to nothing.
fn noise(len: usize) -> Vec<u8> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn every_form_streams_what_the_whole_decode_gives() {
    let big = noise(300_000);
    let gz = gzip(&big);
    let b64 = dataurl::encode_base64(&big);
    let data = b64.strip_prefix("data:;base64,").unwrap();
    let wrapped: String = data
        .as_bytes()
        .chunks(76)
        .map(|c| format!("{}\n", std::str::from_utf8(c).unwrap()))
        .collect();
    let sha256 = format!("sha256-{}", hex::encode(Sha256::digest(&big)));
    let sha512 = format!("sha512-{}", hex::encode(Sha512::digest(&big)));
    let mut two_members = gzip(&big[..1000]);
    two_members.extend(gzip(&big[1000..]));
    let cases = [
        ("no source", file(None, None, None)),
        ("no source, gzip", file(None, Some("gzip"), None)),
        ("empty source", file(Some(String::new()), None, None)),
        ("remote", file(Some("https://x/y".into()), None, None)),
        ("percent", file(Some("data:,a%20b".into()), None, None)),
        ("bad percent", file(Some("data:,a b".into()), None, None)),
        (
            "empty base64",
            file(Some("data:;base64,".into()), None, None),
        ),
        (
            "short",
            file(Some(dataurl::encode_base64(b"hello\n")), None, None),
        ),
        (
            "one padding",
            file(Some(dataurl::encode_base64(b"hi")), None, None),
        ),
        ("several pieces", file(Some(b64.clone()), None, None)),
        (
            "line feeds",
            file(Some(format!("data:;base64,{wrapped}")), None, None),
        ),
        (
            "gzip",
            file(Some(dataurl::encode_base64(&gz)), Some("gzip"), None),
        ),
        (
            "two gzip members",
            file(
                Some(dataurl::encode_base64(&two_members)),
                Some("gzip"),
                None,
            ),
        ),
        (
            "sha256",
            file(Some(b64.clone()), None, Some(sha256.clone())),
        ),
        (
            "sha512 of the inflated bytes",
            file(
                Some(dataurl::encode_base64(&gz)),
                Some("gzip"),
                Some(sha512),
            ),
        ),
        (
            "hash of other bytes",
            file(
                Some(dataurl::encode_base64(b"other")),
                None,
                Some(sha256.clone()),
            ),
        ),
        (
            "hash syntax",
            file(Some(b64.clone()), None, Some("md5-00".into())),
        ),
        (
            "padding in the middle",
            file(
                Some(format!("data:;base64,{}AAAA", "QQ==".repeat(20_000))),
                None,
                None,
            ),
        ),
        (
            "padding in the middle of a piece",
            file(Some("data:;base64,QQ==QUFB".into()), None, None),
        ),
        (
            "a bad symbol in a later piece",
            file(Some(format!("{b64}*AAA")), None, None),
        ),
        (
            "not whole quanta",
            file(Some(format!("{b64}A")), None, None),
        ),
        ("not gzip", file(Some(b64.clone()), Some("gzip"), None)),
        (
            "gzip cut short",
            file(
                Some(dataurl::encode_base64(&gz[..gz.len() / 2])),
                Some("gzip"),
                None,
            ),
        ),
        (
            "unknown compression",
            file(Some(b64.clone()), Some("xz"), None),
        ),
        (
            "bad header",
            file(Some("data:foo;base64,AAAA".into()), None, None),
        ),
    ];
    for (name, f) in &cases {
        assert_same_as_whole(name, f);
    }
}

#[test]
fn the_size_is_known_up_front_only_without_compression() {
    let f = file(Some(dataurl::encode_base64(b"hello")), None, None);
    assert_eq!(ContentsReader::new(&f).unwrap().decoded_len(), Some(5));
    let f = file(Some("data:,abc".into()), None, None);
    assert_eq!(ContentsReader::new(&f).unwrap().decoded_len(), Some(3));
    let f = file(
        Some(dataurl::encode_base64(&gzip(b"hello"))),
        Some("gzip"),
        None,
    );
    assert_eq!(ContentsReader::new(&f).unwrap().decoded_len(), None);
}

#[test]
fn a_hash_mismatch_is_an_error_at_the_end_only() {
    let sha = format!("sha256-{}", "0".repeat(64));
    let f = file(Some(dataurl::encode_base64(b"hello")), None, Some(sha));
    let mut r = ContentsReader::new(&f).unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(r.read(&mut buf).unwrap(), 5);
    let e = r.read(&mut buf).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
}
