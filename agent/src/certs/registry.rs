//! Registry CAs under `/etc/docker/certs.d`: one directory per registry, holding `ca.crt`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use machine_config::Config;
use machine_config::controller_config::ControllerConfigSpec;
use machine_config::mco::paths::REGISTRY_CERTS_DIR;

use super::files::write_file;
use super::{CertError, Written};
use crate::rootfs::{FileKind, Owner, Root};

/// Mode of `certs.d` and of the registry directories created in it.
const DIR_MODE: u32 = 0o755;
/// Mode of each `ca.crt` (the MCD's default, whatever the file had).
const CA_MODE: u32 = 0o644;

/// The registry directories to write, by name, each with its bundle (an administrator's bundle
/// for a registry the cluster also names wins, as it is written last).
pub(crate) fn plan(spec: &ControllerConfigSpec) -> Result<BTreeMap<String, &[u8]>, CertError> {
    let mut out = BTreeMap::new();
    for bundle in spec.registry_bundles() {
        let dir = bundle.registry();
        if let Some(why) = not_a_directory_name(&dir) {
            return Err(CertError::InvalidRegistry {
                file: bundle.file.clone(),
                dir,
                why,
            });
        }
        out.insert(dir, bundle.data.as_slice());
    }
    Ok(out)
}

/// Why `dir` cannot be one directory under `certs.d`, if it cannot.
fn not_a_directory_name(dir: &str) -> Option<&'static str> {
    if dir.is_empty() {
        Some("the name is empty")
    } else if dir == "." {
        Some("the name is \".\"")
    } else if dir.contains('/') {
        Some("the name contains \"/\"")
    } else if dir.contains('\0') {
        Some("the name contains a NUL byte")
    } else {
        None
    }
}

/// Removes the directories of `certs.d` that neither `registries` nor `keep` name, then writes
/// each registry's `ca.crt`.
pub(crate) fn write(
    root: &Root,
    registries: &BTreeMap<String, &[u8]>,
    keep: impl FnOnce() -> BTreeSet<String>,
    written: &mut Written,
) -> Result<(), CertError> {
    let certs = Path::new(REGISTRY_CERTS_DIR);
    let err = |e| CertError::write(REGISTRY_CERTS_DIR, e);
    let entries = match root.read_dir(certs).map_err(err)? {
        Some(entries) => entries,
        None => {
            root.create_dir(certs, DIR_MODE, Owner::ROOT).map_err(err)?;
            Vec::new()
        }
    };
    let mut keep = Some(keep);
    let mut kept = BTreeSet::new();
    for (name, kind) in entries {
        let named = name.to_str().is_some_and(|n| registries.contains_key(n));
        if kind != FileKind::Dir || named {
            continue;
        }
        if let Some(keep) = keep.take() {
            kept = keep();
        }
        if !name.to_str().is_some_and(|n| kept.contains(n)) {
            remove_stale(root, &certs.join(&name), written)?;
        }
    }
    for (dir, data) in registries {
        let path = format!("{REGISTRY_CERTS_DIR}/{dir}/ca.crt");
        if write_file(root, &path, data, Some(CA_MODE), false)? {
            written.files.push(PathBuf::from(path));
        }
    }
    Ok(())
}

/// Removes a directory no bundle names (plain files in `certs.d` are kept, as the MCD keeps
/// them).
fn remove_stale(root: &Root, path: &Path, written: &mut Written) -> Result<(), CertError> {
    remove_tree(root, path)?;
    tracing::info!(directory = %path.display(), "removed a registry CA directory no ControllerConfig bundle names");
    written.removed.push(
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    );
    Ok(())
}

/// Removes the directory `path` and everything in it (symlinks are removed, never followed).
fn remove_tree(root: &Root, path: &Path) -> Result<(), CertError> {
    let err = |p: &Path, e| CertError::write(p, e);
    for (name, kind) in root
        .read_dir(path)
        .map_err(|e| err(path, e))?
        .unwrap_or_default()
    {
        let child = path.join(name);
        if kind == FileKind::Dir {
            remove_tree(root, &child)?;
        } else {
            root.remove_file(&child).map_err(|e| err(&child, e))?;
        }
    }
    root.remove_empty_dir(path).map_err(|e| err(path, e))?;
    Ok(())
}

/// The `certs.d` directories `config` writes files into: kept even when no bundle names them
/// (the MCD removes them, and then finds the config's files missing).
pub fn registry_dirs_of(config: &Config) -> BTreeSet<String> {
    config
        .storage
        .files
        .iter()
        .filter_map(|f| {
            let rest = Path::new(&f.path).strip_prefix(REGISTRY_CERTS_DIR).ok()?;
            let mut parts = rest.components();
            let dir = parts.next()?.as_os_str().to_str()?.to_string();
            // a file directly in certs.d names no directory
            parts.next().map(|_| dir)
        })
        .collect()
}
