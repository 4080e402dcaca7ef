//! What `validate` and `diff` print under a file whose contents differ: a line of short hashes
//! and sizes, and with `--show-contents` how the contents differ (a unified diff), unless they
//! are a secret.
//!
//! Secrets are never shown, whatever the terminal or the log the output lands in (it reaches
//! tickets and chat): contents are not shown when either side's mode lacks the world-read bit,
//! when the path is where credentials live ([`secret_path`]: `/etc/kubernetes`,
//! `/var/lib/kubelet`, `/etc/pki`, SSH keys, `*.key`, `*.pem`, pull secrets, the password
//! files), or when either side holds what the support bundle leaves out of any text (a private
//! key, a password hash, a URL's credentials, a registry credential, a bearer token:
//! [`crate::gather::redact::secret_in`]). Only the reason and the sizes are printed then. The
//! hashes follow the rule of `validate`'s facts: a file others may not read has none shown.

use std::path::{Component, Path};
use std::time::Duration;

use similar::{Algorithm, TextDiff};

use crate::gather::redact;
use crate::validate::{octal, public_digest, sha256_hex};

/// Lines of a file's diff shown at most (after its two header lines); the rest is counted.
pub const MAX_DIFF_LINES: usize = 200;
/// Contents larger than this are not diffed (nor read from the disk).
pub const MAX_DIFF_BYTES: u64 = 4 << 20;
/// The diff gives up looking for the smallest diff after this long (it is then coarser).
const DIFF_TIMEOUT: Duration = Duration::from_secs(2);
/// Hex digits of a short hash.
const SHORT_HASH: usize = 12;
/// Lines of context around each change.
const CONTEXT: usize = 3;

/// The two sides of a comparison: `expected` and `on disk` (`validate`), or the two configs'
/// names (`diff`).
#[derive(Debug, Clone, Copy)]
pub struct Sides<'a> {
    /// The side the diff's `---` lines are from.
    pub old: &'a str,
    /// The side the diff's `+++` lines are from.
    pub new: &'a str,
    /// Said before each side in sizes: `in ` gives `7 bytes in A, 8 in B`, nothing gives
    /// `7 bytes expected, 8 on disk`.
    pub preposition: &'static str,
}

impl Sides<'_> {
    /// `validate`'s sides: the config's contents against the disk's.
    pub const VALIDATE: Sides<'static> = Sides {
        old: "expected",
        new: "on disk",
        preposition: "",
    };

    /// `7 bytes expected, 8 on disk`.
    pub fn sizes(&self, old: u64, new: u64) -> String {
        let p = self.preposition;
        format!("{} {p}{}, {new} {p}{}", bytes(old), self.old, self.new)
    }
}

/// One side's contents.
#[derive(Debug, Clone, Copy)]
pub struct Version<'a> {
    /// The contents; may be left empty when `size` is over [`MAX_DIFF_BYTES`] (never shown).
    pub bytes: &'a [u8],
    /// The contents' size.
    pub size: u64,
    /// Permission bits (the config's mode, or the file's on disk).
    pub mode: u32,
}

impl<'a> Version<'a> {
    /// `bytes`, all of them, with permission bits `mode`.
    pub fn whole(bytes: &'a [u8], mode: u32) -> Self {
        Version {
            bytes,
            size: bytes.len() as u64,
            mode,
        }
    }
}

/// One side's size and sha256 (lowercase hex; `None` when it is not shown).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digest {
    /// Size in bytes.
    pub size: u64,
    /// Full hex digest, when it may be shown.
    pub sha256: Option<String>,
}

impl Digest {
    /// The digest of `bytes`, its hash only when `mode` lets others read the file.
    pub fn of(bytes: &[u8], mode: u32) -> Self {
        Digest {
            size: bytes.len() as u64,
            sha256: public_digest(mode, || sha256_hex(bytes)),
        }
    }
}

/// `  expected sha256:0123456789ab (12 bytes), on disk sha256:… (15 bytes)`: the line under a
/// file whose contents differ. A side without a hash is its size only, and the line says why.
pub fn hash_line(sides: &Sides<'_>, old: &Digest, new: &Digest) -> String {
    let side = |label: &str, d: &Digest| match &d.sha256 {
        Some(h) => format!(
            "{label} sha256:{} ({})",
            h.get(..SHORT_HASH).unwrap_or(h),
            bytes(d.size)
        ),
        None => format!("{label} {}", bytes(d.size)),
    };
    let mut line = format!("  {}, {}", side(sides.old, old), side(sides.new, new));
    if old.sha256.is_none() || new.sha256.is_none() {
        line.push_str(" (no hash of a file others may not read)");
    }
    line
}

/// The lines (indented by two spaces) that show how `old` and `new`, the contents of `path`,
/// differ: a unified diff with 3 lines of context, at most [`MAX_DIFF_LINES`] of it;
/// or one line saying why there is none (a secret, binary or too large contents).
pub fn show(path: &str, sides: &Sides<'_>, old: Version<'_>, new: Version<'_>) -> Vec<String> {
    let sizes = sides.sizes(old.size, new.size);
    if let Some(why) = secret_reason(path, &[old.mode, new.mode]) {
        return vec![not_shown(&why, &sizes)];
    }
    if old.size > MAX_DIFF_BYTES || new.size > MAX_DIFF_BYTES {
        return vec![format!(
            "  contents not shown: too large to diff ({sizes}; at most {} MiB are)",
            MAX_DIFF_BYTES >> 20
        )];
    }
    let (Ok(o), Ok(n)) = (
        std::str::from_utf8(old.bytes),
        std::str::from_utf8(new.bytes),
    ) else {
        return vec![format!("  binary contents differ ({sizes})")];
    };
    if let Some(why) = redact::secret_in(o).or_else(|| redact::secret_in(n)) {
        return vec![not_shown(&format!("holds {why}"), &sizes)];
    }
    if o == n {
        return vec![format!("  same contents ({})", bytes(old.size))];
    }
    unified(path, sides, o, n)
}

/// `  contents not shown (secret: WHY; SIZES)`.
pub fn not_shown(why: &str, sizes: &str) -> String {
    format!("  contents not shown (secret: {why}; {sizes})")
}

/// Why contents at `path` with any of these permission bits are never shown, if they are not.
pub fn secret_reason(path: &str, modes: &[u32]) -> Option<String> {
    if let Some(mode) = modes.iter().find(|m| *m & 0o004 == 0) {
        return Some(format!("mode {}, not world-readable", octal(*mode)));
    }
    secret_path(path).map(str::to_string)
}

/// Directories whose files hold credentials, whatever their mode.
const SECRET_DIRS: [(&str, &str); 4] = [
    (
        "/etc/kubernetes",
        "under /etc/kubernetes (cluster credentials)",
    ),
    (
        "/var/lib/kubelet",
        "under /var/lib/kubelet (the kubelet's credentials and pull secret)",
    ),
    ("/etc/pki", "under /etc/pki (keys and certificates)"),
    ("/run/secrets", "under /run/secrets"),
];

/// Files that hold registry credentials.
const PULL_SECRETS: [&str; 4] = [
    "/etc/containers/auth.json",
    "/run/containers/0/auth.json",
    machine_config::mco::paths::MERGED_PULL_SECRET,
    machine_config::mco::paths::OSTREE_AUTH,
];

/// Files that hold (or may hold) password hashes.
const PASSWORD_FILES: [&str; 6] = [
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/passwd",
    "/etc/passwd-",
];

/// Why the file at `path` is a secret whatever its mode, if it is: see the module's comment.
/// The path is cleaned first (`//`, `.` and `..`), as the file it names is.
pub fn secret_path(path: &str) -> Option<&'static str> {
    let clean = clean(path);
    let (dir, name) = clean.rsplit_once('/').unwrap_or(("", clean.as_str()));
    let under = |d: &str| {
        clean
            .strip_prefix(d)
            .is_some_and(|rest| rest.starts_with('/'))
    };
    if let Some((_, why)) = SECRET_DIRS.iter().find(|(d, _)| under(d)) {
        return Some(*why);
    }
    if PASSWORD_FILES.contains(&clean.as_str()) {
        return Some("password hashes");
    }
    if PULL_SECRETS.contains(&clean.as_str())
        || (name == "config.json" && dir.ends_with("/.docker"))
        || (name == "auth.json" && dir.ends_with("/containers"))
    {
        return Some("a pull secret");
    }
    if clean.split('/').any(|c| c == ".ssh") {
        return Some("under .ssh (SSH keys)");
    }
    if under("/etc/ssh") && name.contains("key") {
        return Some("an SSH key");
    }
    if name.ends_with(".key") {
        return Some("a key (*.key)");
    }
    if name.ends_with(".pem") {
        return Some("a PEM file (*.pem)");
    }
    None
}

/// `path` without `//`, `.` and `..` (lexically, as for an absolute path).
fn clean(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in Path::new(path).components() {
        match c {
            Component::Normal(p) => parts.push(p.to_str().unwrap_or_default()),
            Component::ParentDir => {
                parts.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    format!("/{}", parts.join("/"))
}

/// The unified diff of two texts, each line indented and made printable, cut after
/// [`MAX_DIFF_LINES`] lines.
fn unified(path: &str, sides: &Sides<'_>, old: &str, new: &str) -> Vec<String> {
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Myers)
        .timeout(DIFF_TIMEOUT)
        .diff_lines(old, new);
    let text = diff
        .unified_diff()
        .context_radius(CONTEXT)
        .header(
            &format!("{} {path}", sides.old),
            &format!("{} {path}", sides.new),
        )
        .to_string();
    // `\r` and other control characters stay visible (escaped) instead of acting on the
    // terminal: the disk's side is whatever someone wrote there.
    let mut lines: Vec<String> = text
        .split_terminator('\n')
        .map(|l| format!("  {}", printable(l)))
        .collect();
    const HEADER: usize = 2;
    if lines.len() > HEADER + MAX_DIFF_LINES {
        let left_out = lines.len() - HEADER - MAX_DIFF_LINES;
        lines.truncate(HEADER + MAX_DIFF_LINES);
        lines.push(format!(
            "  ... {left_out} more line{} of this diff not shown",
            if left_out == 1 { "" } else { "s" }
        ));
    }
    lines
}

/// `line` with control characters (but tab) and the bidirectional overrides escaped.
fn printable(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    for c in line.chars() {
        let bidi = matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        if (c.is_control() && c != '\t') || bidi {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `1 byte`, `2 bytes`.
fn bytes(n: u64) -> String {
    format!("{n} byte{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests;
