//! `data:` URLs (RFC 2397, as Ignition and the MCD accept them) and file contents: the input as a
//! URL, decoded; what decodes must survive the re-encodings the project writes (the MCO's
//! base64 form, the percent form, the config server's appended-file URLs). The input's raw
//! bytes also go through the contents pipeline as a gzip stream (`compression: gzip`), whose
//! output must then pass its own sha256 and sha512 verification.
#![no_main]

use libfuzzer_sys::fuzz_target;
use machine_config::contents::decode_resource;
use machine_config::dataurl;
use machine_config::ignition::{Resource, Verification};

fn resource(source: String, compression: Option<&str>, hash: Option<String>) -> Resource {
    Resource {
        source: Some(source.into()),
        compression: compression.map(str::to_string),
        verification: Verification { hash },
        ..Resource::default()
    }
}

fn decodes_to(url: &str, data: &[u8], writer: &str) {
    let back = dataurl::decode(url).unwrap_or_else(|e| panic!("{writer} wrote {url:?}: {e}"));
    assert_eq!(back.data, data, "{writer} changed the data");
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = dataurl::scheme(text);
        if let Ok(url) = dataurl::decode(text) {
            decodes_to(
                &dataurl::encode_base64(&url.data),
                &url.data,
                "encode_base64",
            );
            decodes_to(
                &dataurl::encode_percent(&url.data),
                &url.data,
                "encode_percent",
            );
        }
        let _ = decode_resource("/fuzz/url", &resource(text.to_string(), None, None));
    }

    let gzipped = resource(dataurl::encode_base64(data), Some("gzip"), None);
    if let Ok(plain) = decode_resource("/fuzz/gzip", &gzipped) {
        for hash in [
            format!("sha256-{}", sha256_hex(&plain)),
            format!("sha512-{}", sha512_hex(&plain)),
        ] {
            let checked = resource(dataurl::encode_base64(data), Some("gzip"), Some(hash));
            assert_eq!(
                decode_resource("/fuzz/gzip", &checked).as_deref(),
                Ok(&plain[..])
            );
        }
    }
});

fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(data))
}

fn sha512_hex(data: &[u8]) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha512::digest(data))
}
