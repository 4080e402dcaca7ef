//! Writing files, directories and links, and releasing files a config no longer manages.

use std::io::Read;
use std::path::Path;

use super::ApplyOutcome;
use super::backup::{self, Released};
use super::prepare::{PreparedDir, PreparedFile, PreparedLink};
use crate::rootfs::{Opened, Owner, Root, RootError};

/// Writes `file` unless the disk already holds exactly it; keeps the original first.
pub(crate) fn write_file(
    root: &Root,
    file: &PreparedFile<'_>,
    out: &mut ApplyOutcome,
) -> anyhow::Result<()> {
    backup::record_original(root, &file.path)?;
    if write_if_different(root, file)? {
        out.files_written.push(file.path.display().to_string());
    } else {
        out.files_unchanged += 1;
    }
    Ok(())
}

/// Writes `file` unless the disk already holds exactly it (no backup). Returns whether it wrote.
pub(crate) fn write_if_different(root: &Root, file: &PreparedFile<'_>) -> anyhow::Result<bool> {
    let contents = file.contents.bytes()?;
    if holds(root, &file.path, &contents, file.mode, file.owner)? {
        return Ok(false);
    }
    root.write_atomic(&file.path, &contents, file.mode, file.owner)?;
    tracing::info!(path = %file.path.display(), mode = format!("{:04o}", file.mode), "wrote file");
    Ok(true)
}

/// Writes a unit file or drop-in (mode 0644, root) unless it is already there; keeps the
/// original first.
pub(crate) fn write_unit_file(
    root: &Root,
    path: &Path,
    contents: &[u8],
    out: &mut ApplyOutcome,
) -> Result<(), RootError> {
    backup::record_original(root, path)?;
    if holds(root, path, contents, UNIT_FILE_MODE, Owner::ROOT)? {
        return Ok(());
    }
    root.write_atomic(path, contents, UNIT_FILE_MODE, Owner::ROOT)?;
    tracing::info!(path = %path.display(), "wrote unit file");
    out.units_written.push(path.display().to_string());
    Ok(())
}

/// Mode of unit files and drop-ins.
const UNIT_FILE_MODE: u32 = 0o644;

pub(crate) fn create_dir(
    root: &Root,
    dir: &PreparedDir,
    out: &mut ApplyOutcome,
) -> Result<(), RootError> {
    root.create_dir(&dir.path, dir.mode, dir.owner)?;
    out.directories.push(dir.path.display().to_string());
    Ok(())
}

pub(crate) fn create_link(
    root: &Root,
    link: &PreparedLink,
    out: &mut ApplyOutcome,
) -> Result<(), RootError> {
    if link.hard {
        root.hard_link(&link.path, &link.target)?;
    } else {
        root.symlink(&link.path, &link.target, link.owner)?;
    }
    out.links.push(link.path.display().to_string());
    Ok(())
}

/// Puts back the original of a file the config dropped, or removes it.
pub(crate) fn release(root: &Root, path: &Path, out: &mut ApplyOutcome) -> Result<(), RootError> {
    match release_path(root, path)? {
        Released::Restored => out.files_restored.push(path.display().to_string()),
        Released::Removed => out.files_removed.push(path.display().to_string()),
        Released::LeftAlone => {}
    }
    Ok(())
}

/// Puts back the original of a unit file or drop-in the config dropped, or removes it.
pub(crate) fn release_unit_file(
    root: &Root,
    path: &Path,
    out: &mut ApplyOutcome,
) -> Result<(), RootError> {
    release_path(root, path)?;
    out.units_written.push(path.display().to_string());
    Ok(())
}

fn release_path(root: &Root, path: &Path) -> Result<Released, RootError> {
    let released = backup::restore_or_remove(root, path)?;
    match released {
        Released::Restored => tracing::info!(path = %path.display(), "restored the original file"),
        Released::Removed => tracing::info!(path = %path.display(), "removed stale file"),
        Released::LeftAlone => {}
    }
    Ok(released)
}

/// Whether `path` is a regular file with exactly these contents, mode and owner.
fn holds(
    root: &Root,
    path: &Path,
    contents: &[u8],
    mode: u32,
    owner: Owner,
) -> Result<bool, RootError> {
    let (mut f, info) = match root.open_nofollow(path) {
        Ok(Opened::File(f, info)) => (f, info),
        Ok(Opened::NotRegular(_)) => return Ok(false),
        Err(e) if e.is_not_found() => return Ok(false),
        Err(e) => return Err(e),
    };
    if info.permissions() != mode || info.owner != owner || info.size != contents.len() as u64 {
        return Ok(false);
    }
    same_bytes(&mut f, contents).map_err(|e| RootError::io("read", path, e))
}

/// Whether `reader` yields exactly `expected`, read in chunks and stopped at the first
/// difference: no buffer as large as the file (which may have grown since it was stat'ed).
fn same_bytes(reader: &mut impl Read, expected: &[u8]) -> std::io::Result<bool> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut offset = 0;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(offset == expected.len());
        }
        if expected.get(offset..offset + n) != Some(&buf[..n]) {
            return Ok(false);
        }
        offset += n;
    }
}

#[cfg(test)]
mod tests {
    use super::same_bytes;

    #[test]
    fn a_stream_is_compared_chunk_by_chunk_to_its_end() {
        let long = vec![7u8; 200 * 1024];
        assert!(same_bytes(&mut long.as_slice(), &long).unwrap());
        assert!(same_bytes(&mut &b""[..], b"").unwrap());
        assert!(!same_bytes(&mut &long[..long.len() - 1], &long).unwrap());
        assert!(!same_bytes(&mut long.as_slice(), &long[..long.len() - 1]).unwrap());
        let mut other = long.clone();
        other[150 * 1024] = 8;
        assert!(!same_bytes(&mut other.as_slice(), &long).unwrap());
    }
}
