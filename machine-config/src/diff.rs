//! What changes between two configs: files and units by name, passwd, and the OS-level fields.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::contents::DecodeError;
use crate::extensions;
use crate::ignition::{Config, File, Unit};
use crate::kargs;
use crate::machineconfig::{MachineConfig, canonical_kernel_type};

/// Names added, changed and removed, each sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Changes {
    pub added: Vec<String>,
    pub changed: Vec<String>,
    pub removed: Vec<String>,
}

impl Changes {
    /// True when nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }

    /// Every name, added then changed then removed.
    pub fn all(&self) -> impl Iterator<Item = &String> {
        self.added.iter().chain(&self.changed).chain(&self.removed)
    }
}

/// Extension packages to install and uninstall, sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ExtensionChanges {
    pub install: Vec<String>,
    pub uninstall: Vec<String>,
}

/// The difference between two MachineConfigs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigDiff {
    pub files: Changes,
    pub units: Changes,
    pub passwd: bool,
    /// `osImageURL` differs, or the force file is present.
    pub os_update: bool,
    pub kernel_type: bool,
    /// The extension list changed (the MCD's flag; packages may still be equal).
    pub extensions_changed: bool,
    pub extensions: ExtensionChanges,
    pub fips: bool,
    pub kargs_changed: bool,
    /// The `rpm-ostree kargs` argv.
    pub kargs: Vec<String>,
}

impl ConfigDiff {
    /// Computes the diff; `force` marks an OS update even when the image is unchanged.
    pub fn new(
        old: &MachineConfig,
        new: &MachineConfig,
        old_ign: &Config,
        new_ign: &Config,
        force: bool,
    ) -> Result<ConfigDiff, DecodeError> {
        let (o, n) = (&old.spec, &new.spec);
        let old_pkgs = extensions::package_set(&o.extensions);
        let new_pkgs = extensions::package_set(&n.extensions);
        let both_empty = o.extensions.is_empty() && n.extensions.is_empty();
        Ok(ConfigDiff {
            files: file_changes(old_ign, new_ign)?,
            units: unit_changes(old_ign, new_ign),
            passwd: old_ign.passwd != new_ign.passwd,
            os_update: o.os_image_url != n.os_image_url || force,
            kernel_type: canonical_kernel_type(&o.kernel_type)
                != canonical_kernel_type(&n.kernel_type),
            extensions_changed: !(both_empty || o.extensions == n.extensions),
            extensions: ExtensionChanges {
                install: new_pkgs.difference(&old_pkgs).cloned().collect(),
                uninstall: old_pkgs.difference(&new_pkgs).cloned().collect(),
            },
            fips: o.fips != n.fips,
            kargs_changed: kargs::changed(&o.kernel_arguments, &n.kernel_arguments),
            kargs: kargs::rpm_ostree_argv(&o.kernel_arguments, &n.kernel_arguments),
        })
    }

    /// Whether anything in the OS (image, kernel, kargs, extensions, FIPS) changes.
    pub fn os_changes(&self) -> bool {
        self.os_update
            || self.kargs_changed
            || self.fips
            || self.kernel_type
            || self.extensions_changed
    }

    /// Nothing at all changes.
    pub fn is_empty(&self) -> bool {
        !self.os_changes() && self.files.is_empty() && self.units.is_empty() && !self.passwd
    }
}

/// Two file entries describe the same on-disk file: same decoded contents, mode, owner and
/// overwrite flag.
fn same_file(old: &File, new: &File) -> Result<bool, DecodeError> {
    if old.mode_or_default() != new.mode_or_default()
        || old.user != new.user
        || old.group != new.group
        || old.overwrite != new.overwrite
        || old.append != new.append
    {
        return Ok(false);
    }
    if old.contents == new.contents {
        return Ok(true);
    }
    // Different encodings of the same bytes are the same file; an old entry that no longer
    // decodes is simply different.
    let new_bytes = new.decoded_contents()?;
    Ok(old.decoded_contents().is_ok_and(|b| b == new_bytes))
}

fn file_changes(old: &Config, new: &Config) -> Result<Changes, DecodeError> {
    let olds: BTreeMap<&str, &File> = old
        .storage
        .files
        .iter()
        .map(|f| (f.path.as_str(), f))
        .collect();
    let news: BTreeMap<&str, &File> = new
        .storage
        .files
        .iter()
        .map(|f| (f.path.as_str(), f))
        .collect();
    let mut c = Changes::default();
    for (path, nf) in &news {
        match olds.get(path) {
            None => c.added.push(path.to_string()),
            Some(of) if !same_file(of, nf)? => c.changed.push(path.to_string()),
            Some(_) => {}
        }
    }
    c.removed = olds
        .keys()
        .filter(|p| !news.contains_key(*p))
        .map(|p| p.to_string())
        .collect();
    Ok(c)
}

/// Units compare by contents, mask, enablement and drop-ins (as a name → contents set).
fn same_unit(a: &Unit, b: &Unit) -> bool {
    let dropins = |u: &Unit| -> BTreeSet<(String, Option<String>)> {
        u.dropins
            .iter()
            .map(|d| (d.name.clone(), d.contents.clone()))
            .collect()
    };
    a.contents == b.contents
        && a.mask == b.mask
        && a.enabled == b.enabled
        && dropins(a) == dropins(b)
}

fn unit_changes(old: &Config, new: &Config) -> Changes {
    let olds: BTreeMap<&str, &Unit> = old
        .systemd
        .units
        .iter()
        .map(|u| (u.name.as_str(), u))
        .collect();
    let news: BTreeMap<&str, &Unit> = new
        .systemd
        .units
        .iter()
        .map(|u| (u.name.as_str(), u))
        .collect();
    let mut c = Changes::default();
    for (name, nu) in &news {
        match olds.get(name) {
            None => c.added.push(name.to_string()),
            Some(ou) if !same_unit(ou, nu) => c.changed.push(name.to_string()),
            Some(_) => {}
        }
    }
    c.removed = olds
        .keys()
        .filter(|n| !news.contains_key(*n))
        .map(|n| n.to_string())
        .collect();
    c
}
