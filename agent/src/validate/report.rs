//! Mismatches found by on-disk validation, and how they are printed.

use serde::Serialize;
use sha2::{Digest, Sha256};

/// What kind of check failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MismatchKind {
    /// The path could not be stat'ed (usually: it does not exist).
    Missing,
    /// The path is there but could not be read.
    Unreadable,
    /// The mode (type and permission bits) differs.
    Mode,
    /// The contents differ.
    Content,
    /// The config's contents could not be decoded.
    Decode,
    /// The config has an `append` section, which is not supported.
    Append,
    /// A masked unit is not a link to `/dev/null`.
    Mask,
    /// A unit's enablement differs.
    Enablement,
    /// The owner (user or group) differs.
    Owner,
    /// core's password hash differs (the hash is never shown).
    PasswordHash,
}

/// Facts about one side of a comparison (what the config wants, or what is on disk). Never
/// contents: sizes and hashes only, and a hash only of a file every user may read (an unsalted
/// digest of a short secret, a token or a password file, is as good as the secret to whoever
/// can guess it: the output of `validate` and `recover` reaches logs, Events and tickets).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Facts {
    /// `file`, `directory`, `symlink`, `other`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    /// Permission bits in octal (`0644`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Size in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// SHA-256 of the contents, hex; only for a file others may read (`public_digest`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Symlink target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Unit-file state (`enabled`, `disabled`...), or the expected `enabled` setting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Owner as `uid:gid`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

impl Facts {
    /// Facts of a regular file's bytes and mode.
    pub fn of_contents(mode: u32, contents: &[u8]) -> Self {
        Facts {
            kind: Some("file"),
            mode: Some(octal(mode)),
            size: Some(contents.len() as u64),
            sha256: public_digest(mode, || sha256_hex(contents)),
            ..Facts::default()
        }
    }

    /// A regular file's facts from its size and sha256 (lowercase hex), read as a stream.
    pub fn of_digest(mode: u32, size: u64, sha256: String) -> Self {
        Facts {
            kind: Some("file"),
            mode: Some(octal(mode)),
            size: Some(size),
            sha256: public_digest(mode, || sha256),
            ..Facts::default()
        }
    }

    fn describe(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if let Some(k) = self.kind
            && k != "file"
        {
            parts.push(k.to_string());
        }
        if let Some(m) = &self.mode {
            parts.push(format!("mode {m}"));
        }
        if let Some(s) = self.size {
            parts.push(format!("{s} byte{}", if s == 1 { "" } else { "s" }));
        }
        if let Some(h) = &self.sha256 {
            parts.push(format!("sha256 {h}"));
        }
        if let Some(t) = &self.target {
            parts.push(format!("-> {t}"));
        }
        if let Some(s) = &self.state {
            parts.push(s.clone());
        }
        if let Some(o) = &self.owner {
            parts.push(format!("owner {o}"));
        }
        if parts.is_empty() {
            "nothing".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// One difference between the config and the disk.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Mismatch {
    /// The path on the node (`/etc/foo`, `/etc/systemd/system/x.service`).
    pub path: String,
    /// The unit concerned, for unit and drop-in checks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Which check failed.
    pub kind: MismatchKind,
    /// The MCD's message for this failure (unwrapped).
    pub message: String,
    /// What the config wants.
    pub expected: Facts,
    /// What is on disk (`null` when nothing is there).
    pub found: Option<Facts>,
}

impl Mismatch {
    /// The message followed by expected and found facts.
    pub fn detail_line(&self) -> String {
        let found = self
            .found
            .as_ref()
            .map(Facts::describe)
            .unwrap_or_else(|| "nothing".to_string());
        format!(
            "{} (expected: {}; found: {})",
            self.message,
            self.expected.describe(),
            found
        )
    }
}

/// The result of validating a root against a config.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ValidationReport {
    /// Name of the config validated against (`rendered-worker-…`).
    pub config: String,
    /// Every mismatch, in the MCD's checking order (files, then units).
    pub mismatches: Vec<Mismatch>,
}

impl ValidationReport {
    /// Whether the disk matches.
    pub fn is_ok(&self) -> bool {
        self.mismatches.is_empty()
    }

    /// The error the MCD would report (its first mismatch, wrapped), if any.
    pub fn mcd_error(&self) -> Option<String> {
        self.mismatches.first().map(|m| {
            format!(
                "unexpected on-disk state validating against {}: {}",
                self.config, m.message
            )
        })
    }

    /// The text report: the MCD-compatible line, then one detailed line per mismatch.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self.mcd_error().into_iter().collect();
        out.extend(self.mismatches.iter().map(Mismatch::detail_line));
        out
    }
}

/// `0644`-style octal of permission bits.
pub fn octal(mode: u32) -> String {
    format!("{mode:04o}")
}

/// The digest of a file with permission bits `mode`, only when others may read it.
pub fn public_digest(mode: u32, digest: impl FnOnce() -> String) -> Option<String> {
    (mode & 0o004 != 0).then(digest)
}

/// Hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}
