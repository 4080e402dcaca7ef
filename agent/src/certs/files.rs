//! How the certificate writer writes one file: the MCD's `writeToDisk` rules (a trailing
//! newline, the existing mode kept, new files 0644 in 0755 directories, atomic), durable, and
//! nothing rewritten that already holds the data.

use std::borrow::Cow;
use std::path::Path;

use crate::rootfs::{DEFAULT_FILE_MODE, FileKind, Owner, Root};

use super::CertError;

/// `data` as the MCD writes a bundle: with a newline appended unless it ends in one (so empty
/// data is `"\n"`).
pub(crate) fn with_newline(data: &[u8]) -> Cow<'_, [u8]> {
    if data.ends_with(b"\n") {
        Cow::Borrowed(data)
    } else {
        let mut out = Vec::with_capacity(data.len() + 1);
        out.extend_from_slice(data);
        out.push(b'\n');
        Cow::Owned(out)
    }
}

/// Writes `data` (with [`with_newline`]) to `path`. The mode is `mode` when given, else the
/// existing file's (0644 for a new one); the owner is the existing file's (root for a new one).
/// Returns whether the file changed.
pub(crate) fn write_bundle(
    root: &Root,
    path: &str,
    data: &[u8],
    mode: Option<u32>,
) -> Result<bool, CertError> {
    write_file(root, path, &with_newline(data), mode, true)
}

/// Writes `contents` to `path` as they are. The mode is `mode` when given, else (with
/// `keep_mode`) the existing file's, else 0644; the owner is kept with the mode. Returns whether
/// the file changed.
pub(crate) fn write_file(
    root: &Root,
    path: &str,
    contents: &[u8],
    mode: Option<u32>,
    keep_mode: bool,
) -> Result<bool, CertError> {
    let p = Path::new(path);
    let err = |e| CertError::write(path, e);
    let existing = root.lstat(p).map_err(err)?;
    let (existing_mode, owner) = match existing {
        Some(info) if info.kind == FileKind::File => (Some(info.permissions()), info.owner),
        _ => (None, Owner::ROOT),
    };
    let mode = mode
        .or(existing_mode.filter(|_| keep_mode))
        .unwrap_or(DEFAULT_FILE_MODE);
    let owner = if keep_mode { owner } else { Owner::ROOT };
    if existing_mode == Some(mode)
        && existing.is_some_and(|i| i.owner == owner && i.size == contents.len() as u64)
        && root.read(p).map_err(err)?.as_deref() == Some(contents)
    {
        return Ok(false);
    }
    root.write_atomic(p, contents, mode, owner).map_err(err)?;
    Ok(true)
}
