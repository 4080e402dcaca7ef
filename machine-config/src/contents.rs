//! Decoding file contents: `data:` URL, then `compression`, then `verification.hash`.
//!
//! No source is an empty file, whatever `compression` says (Ignition and the MCD agree). An
//! *empty* source (`source: ""`, which a spec 2.2 file without contents translates to) is refused,
//! as the MCD refuses it (its data-URL decoder fails with `missing data prefix`), although
//! Ignition writes an empty file for it: the MCD decides what a running node accepts.
//!
//! The hash is checked against the *decompressed* bytes: that is what Ignition's fetcher hashes
//! (it hashes the stream coming out of the decompressor) and what its spec documents ("if
//! `compression` is specified, the hash describes the decompressed file").

use std::io::Read as _;

use sha2::{Digest as _, Sha256, Sha512};

use crate::dataurl;
use crate::error::describe_source;
use crate::ignition::hash::{HashFunction, parse_hash};
use crate::ignition::{File, Resource};
use crate::source::Source;

/// Upper bound on a decompressed resource (128 MiB), so a gzip bomb cannot exhaust the node's
/// memory: well below the agent unit's `MemoryMax=1G`, since a file is held whole where the
/// MCD's rules compare or hash it (a MachineConfig, an etcd object of at most ~1.5 MiB, holds
/// no honest file near this). `tests/bench/gzip_bomb.sh` measures the peak.
pub const MAX_DECOMPRESSED_BYTES: u64 = 128 << 20;

/// Why a file's contents could not be decoded. Every variant names the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("couldn't decode file {path:?}: {message}")]
    DataUrl { path: String, message: String },
    #[error(
        "couldn't decode file {path:?}: remote source scheme {scheme:?} cannot be fetched on a node; only data: URLs are supported"
    )]
    RemoteSource { path: String, scheme: String },
    #[error("couldn't decode file {path:?}: unsupported compression type {compression:?}")]
    Compression { path: String, compression: String },
    #[error("couldn't decode file {path:?}: failed decompressing: {message}")]
    Gunzip { path: String, message: String },
    #[error("couldn't decode file {path:?}: malformed verification hash {hash:?}")]
    HashSyntax { path: String, hash: String },
    #[error(
        "couldn't decode file {path:?}: hash verification failed (calculated {calculated} but expected {expected})"
    )]
    HashMismatch {
        path: String,
        calculated: String,
        expected: String,
    },
}

fn digest(f: HashFunction, data: &[u8]) -> String {
    match f {
        HashFunction::Sha256 => hex::encode(Sha256::digest(data)),
        HashFunction::Sha512 => hex::encode(Sha512::digest(data)),
    }
}

/// Decodes a resource into bytes. `what` names the owner in errors (a file path).
/// No source is an empty resource (its compression does not matter); an empty source is an
/// error, as for the MCD. Errors never show the source itself, only its scheme and length.
pub fn decode_resource(what: &str, res: &Resource) -> Result<Vec<u8>, DecodeError> {
    let path = || what.to_string();
    let text = match res.source.as_ref().map(Source::text).transpose() {
        Ok(text) => text,
        Err(e) => {
            return Err(DecodeError::DataUrl {
                path: path(),
                message: e.to_string(),
            });
        }
    };
    let raw = match text.as_deref() {
        None => return Ok(Vec::new()),
        Some("") => {
            return Err(DecodeError::DataUrl {
                path: path(),
                message: "empty source: not a data URL (the MCD refuses it too; use \"data:,\" for an empty file)".to_string(),
            });
        }
        Some(src) => match dataurl::scheme(src) {
            Some("data") => {
                dataurl::decode(src)
                    .map_err(|e| DecodeError::DataUrl {
                        path: path(),
                        message: format!("{e} ({})", describe_source(src)),
                    })?
                    .data
            }
            Some(scheme) => {
                return Err(DecodeError::RemoteSource {
                    path: path(),
                    scheme: scheme.to_string(),
                });
            }
            None => {
                return Err(DecodeError::DataUrl {
                    path: path(),
                    message: format!("{} is not a URL", describe_source(src)),
                });
            }
        },
    };
    let data = match res.compression.as_deref() {
        None | Some("") => raw,
        Some("gzip") => gunzip(&raw).map_err(|message| DecodeError::Gunzip {
            path: path(),
            message,
        })?,
        Some(other) => {
            return Err(DecodeError::Compression {
                path: path(),
                compression: other.to_string(),
            });
        }
    };
    if let Some(hash) = &res.verification.hash {
        let (function, expected) = parse_hash(hash).map_err(|_| DecodeError::HashSyntax {
            path: path(),
            hash: hash.clone(),
        })?;
        let calculated = digest(function, &data);
        if calculated != expected {
            return Err(DecodeError::HashMismatch {
                path: path(),
                calculated,
                expected,
            });
        }
    }
    Ok(data)
}

/// Decompresses in two passes: the first streams to nowhere and counts, so a bomb is refused at
/// the cap having held nothing but the decoder's window; only a stream under the cap is then
/// decompressed into memory, into a buffer of its exact size.
fn gunzip(data: &[u8]) -> Result<Vec<u8>, String> {
    let mut counting = flate2::read::MultiGzDecoder::new(data).take(MAX_DECOMPRESSED_BYTES + 1);
    let size = std::io::copy(&mut counting, &mut std::io::sink()).map_err(|e| e.to_string())?;
    if size > MAX_DECOMPRESSED_BYTES {
        return Err(format!(
            "decompressed size exceeds {MAX_DECOMPRESSED_BYTES} bytes"
        ));
    }
    let mut out = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    flate2::read::MultiGzDecoder::new(data)
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    Ok(out)
}

impl File {
    /// The bytes this file should contain: decoded `contents` (an empty file when there is no
    /// source; an error for an empty source, as for the MCD). `append` fragments are not included (the MCD refuses them; see reconcile).
    pub fn decoded_contents(&self) -> Result<Vec<u8>, DecodeError> {
        decode_resource(&self.path, &self.contents)
    }

    /// Each `append` fragment, decoded.
    pub fn decoded_appends(&self) -> Result<Vec<Vec<u8>>, DecodeError> {
        self.append
            .iter()
            .map(|r| decode_resource(&self.path, r))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;
    use crate::ignition::Verification;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    fn res(source: Option<String>, compression: Option<&str>, hash: Option<String>) -> Resource {
        Resource {
            source: source.map(Into::into),
            compression: compression.map(str::to_string),
            verification: Verification { hash },
            ..Resource::default()
        }
    }

    /// The cap is well below the agent unit's `MemoryMax=1G` (a file is held whole where it is
    /// compared): a file one byte over it is refused, one at it decodes, whole or streamed.
    #[test]
    fn gzip_beyond_the_cap_is_refused() {
        const {
            assert!(
                MAX_DECOMPRESSED_BYTES <= 128 << 20,
                "the cap stays a small share of 1 GiB"
            )
        };
        let cap = usize::try_from(MAX_DECOMPRESSED_BYTES).unwrap();
        let url = |len: usize| {
            let gz = gzip(&vec![0u8; len]);
            format!(
                "data:;base64,{}",
                base64::Engine::encode(&base64::engine::general_purpose::STANDARD, gz)
            )
        };
        let over = res(Some(url(cap + 1)), Some("gzip"), None);
        assert_eq!(
            decode_resource("/etc/bomb", &over).unwrap_err().to_string(),
            format!(
                "couldn't decode file \"/etc/bomb\": failed decompressing: decompressed size exceeds {cap} bytes"
            )
        );
        let at = res(Some(url(cap)), Some("gzip"), None);
        assert_eq!(decode_resource("/etc/big", &at).unwrap().len(), cap);
        let file = File {
            path: "/etc/bomb".into(),
            contents: over,
            ..File::default()
        };
        let mut streamed = crate::ContentsReader::new(&file).unwrap();
        assert!(std::io::copy(&mut streamed, &mut std::io::sink()).is_err());
    }

    #[test]
    fn decodes_every_form() {
        let hello = b"hello\n".to_vec();
        let gz = gzip(&hello);
        let sha512 = format!("sha512-{}", hex::encode(Sha512::digest(&hello)));
        let sha256 = format!("sha256-{}", hex::encode(Sha256::digest(&hello)));
        let cases: Vec<(&str, Resource, Vec<u8>)> = vec![
            ("no source", res(None, None, None), vec![]),
            ("no source, gzip", res(None, Some("gzip"), None), vec![]),
            (
                "percent",
                res(Some("data:,hello%0A".into()), None, None),
                hello.clone(),
            ),
            (
                "base64",
                res(Some(dataurl::encode_base64(&hello)), None, None),
                hello.clone(),
            ),
            (
                "gzip",
                res(Some(dataurl::encode_base64(&gz)), Some("gzip"), None),
                hello.clone(),
            ),
            (
                "empty compression",
                res(Some("data:,hello%0A".into()), Some(""), None),
                hello.clone(),
            ),
            (
                "sha512 good",
                res(Some("data:,hello%0A".into()), None, Some(sha512.clone())),
                hello.clone(),
            ),
            (
                "sha256 good",
                res(Some("data:,hello%0A".into()), None, Some(sha256.clone())),
                hello.clone(),
            ),
            (
                "hash of decompressed bytes",
                res(
                    Some(dataurl::encode_base64(&gz)),
                    Some("gzip"),
                    Some(sha512),
                ),
                hello.clone(),
            ),
        ];
        for (name, r, want) in cases {
            assert_eq!(decode_resource("/etc/f", &r).expect(name), want, "{name}");
        }
    }

    #[test]
    fn errors_name_the_file() {
        let gz = gzip(b"hello\n");
        let bad_sha = format!("sha256-{}", "0".repeat(64));
        let gz_sha = format!("sha256-{}", hex::encode(Sha256::digest(&gz)));
        let cases: Vec<(Resource, &str)> = vec![
            (
                res(Some("https://example.com/f".into()), None, None),
                "couldn't decode file \"/etc/f\": remote source scheme \"https\" cannot be fetched on a node; only data: URLs are supported",
            ),
            (
                res(Some("data:,a b".into()), None, None),
                "couldn't decode file \"/etc/f\": invalid data URL: invalid character at byte 1 of the percent-encoded data (data: URL of 9 bytes)",
            ),
            (
                res(Some("data:,x".into()), Some("xz"), None),
                "couldn't decode file \"/etc/f\": unsupported compression type \"xz\"",
            ),
            (
                res(
                    Some("data:,this-is-not-gzip-data".into()),
                    Some("gzip"),
                    None,
                ),
                "couldn't decode file \"/etc/f\": failed decompressing: invalid gzip header",
            ),
            (
                res(Some("data:,hello%0A".into()), None, Some(bad_sha)),
                "couldn't decode file \"/etc/f\": hash verification failed (calculated 5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03 but expected 0000000000000000000000000000000000000000000000000000000000000000)",
            ),
            (
                // the hash of the compressed bytes is not what Ignition checks
                res(
                    Some(dataurl::encode_base64(&gz)),
                    Some("gzip"),
                    Some(gz_sha),
                ),
                "hash verification failed",
            ),
            (
                res(Some("data:,x".into()), None, Some("md5-abc".into())),
                "malformed verification hash \"md5-abc\"",
            ),
            (
                res(Some("relative/path".into()), None, None),
                "couldn't decode file \"/etc/f\": source of 13 bytes without a URL scheme is not a URL",
            ),
            (
                res(Some(String::new()), None, None),
                "couldn't decode file \"/etc/f\": empty source: not a data URL",
            ),
            (
                res(Some(String::new()), Some("gzip"), None),
                "empty source: not a data URL",
            ),
        ];
        for (r, want) in cases {
            let e = decode_resource("/etc/f", &r).expect_err(want).to_string();
            assert!(e.contains(want), "got {e:?}, want {want:?}");
        }
    }
}
