//! Unit enablement without a running systemd, on a root directory: the links
//! `systemctl --root DIR enable|disable|preset` would create or remove, from each unit file's
//! `[Install]` section, and the unit-file state `systemctl is-enabled` would report.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{Context, Result, bail};

use super::install::{InstallInfo, UnitName};
use super::preset::{PresetAction, PresetPolicy};
use crate::rootfs::{FileKind, Owner, Root};

/// Where the administrator's unit files and enablement links live.
pub const SYSTEM_UNIT_DIR: &str = "/etc/systemd/system";

/// Unit search path, highest priority first (systemd's for the system manager).
const UNIT_PATH: [&str; 5] = [
    "/etc/systemd/system",
    "/run/systemd/system",
    "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
];

/// Suffixes of the dependency directories enablement links live in.
const LINK_DIR_SUFFIXES: [&str; 3] = [".wants", ".requires", ".upholds"];

/// Unit-file state as `systemctl is-enabled` names it (the subset an offline root can show).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnitFileState {
    /// Linked from a `.wants/`, `.requires/` or `.upholds/` directory, or aliased.
    Enabled,
    /// Has `[Install]` links to make but none exists.
    Disabled,
    /// Has no `[Install]` links to make.
    Static,
    /// Only names `Also=` units.
    Indirect,
    /// `/etc/systemd/system/<unit>` is a link to `/dev/null`.
    Masked,
    /// `/run/systemd/system/<unit>` is a link to `/dev/null`.
    MaskedRuntime,
    /// No unit file in the search path.
    NotFound,
}

impl UnitFileState {
    /// The word `systemctl is-enabled` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            UnitFileState::Enabled => "enabled",
            UnitFileState::Disabled => "disabled",
            UnitFileState::Static => "static",
            UnitFileState::Indirect => "indirect",
            UnitFileState::Masked => "masked",
            UnitFileState::MaskedRuntime => "masked-runtime",
            UnitFileState::NotFound => "not-found",
        }
    }
}

impl std::fmt::Display for UnitFileState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Enablement through links in a root directory.
#[derive(Debug)]
pub struct OfflineUnits<'r> {
    root: &'r Root,
    /// For [`Self::snapshot`]: the unit directory's links, read at the first state asked
    /// (`None` inside when reading them failed: each unit then reads them itself, and fails
    /// with its own error as it did).
    links: Option<OnceLock<Option<Vec<LinkEntry>>>>,
}

/// A symlink enablement may consist of, with its target: one in the unit directory (an
/// alias), or in one of its dependency directories.
#[derive(Debug)]
struct LinkEntry {
    in_dependency_dir: bool,
    name: String,
    path: PathBuf,
    target: Option<PathBuf>,
}

/// A unit file found in the search path.
struct Found {
    /// In-root path of the unit file (the link target enablement uses).
    path: PathBuf,
    install: InstallInfo,
}

impl<'r> OfflineUnits<'r> {
    /// Enablement for `root`.
    pub fn new(root: &'r Root) -> Self {
        OfflineUnits { root, links: None }
    }

    /// Enablement for `root` that only reads states while nothing changes the links (a
    /// validation): the links under `/etc/systemd/system` are read once, not again for every
    /// unit asked about (each unit's state looks at every link, so reading them per unit grew
    /// with units times links). Enabling or disabling through this would see stale links, so
    /// only [`Self::state`] is meant for it.
    pub fn snapshot(root: &'r Root) -> Self {
        OfflineUnits {
            root,
            links: Some(OnceLock::new()),
        }
    }

    /// The root this works on.
    pub fn root(&self) -> &'r Root {
        self.root
    }

    /// Creates the enablement links of `unit` (and of its `Also=` units).
    pub fn enable_one(&self, unit: &str) -> Result<()> {
        let mut seen = BTreeSet::new();
        self.enable_rec(unit, &mut seen)
    }

    /// Removes every enablement link of `unit` (and of its `Also=` units). A unit without a unit
    /// file has nothing to remove.
    pub fn disable_one(&self, unit: &str) -> Result<()> {
        let mut seen = BTreeSet::new();
        self.disable_rec(unit, &mut seen)
    }

    /// Enables or disables `unit` as the root's preset policy says. A masked unit is left alone
    /// (as `systemctl preset-all` does).
    pub fn preset_one(&self, unit: &str, policy: &PresetPolicy) -> Result<()> {
        if matches!(
            self.state(unit)?,
            UnitFileState::Masked | UnitFileState::MaskedRuntime
        ) {
            tracing::info!(unit, "unit is masked, preset leaves it alone");
            return Ok(());
        }
        match policy.action_for(unit) {
            PresetAction::Enable => self.enable_one(unit),
            PresetAction::Disable => self.disable_one(unit),
            PresetAction::Ignore => Ok(()),
        }
    }

    /// The unit-file state of `unit`, as `systemctl --root DIR is-enabled` would report it.
    pub fn state(&self, unit: &str) -> Result<UnitFileState> {
        if self.is_masked_in("/etc/systemd/system", unit)? {
            return Ok(UnitFileState::Masked);
        }
        if self.is_masked_in("/run/systemd/system", unit)? {
            return Ok(UnitFileState::MaskedRuntime);
        }
        let Some(found) = self.find(unit)? else {
            return Ok(UnitFileState::NotFound);
        };
        if !self.links_of(unit, &found)?.is_empty() {
            return Ok(UnitFileState::Enabled);
        }
        let has_links = found.install.has_links()
            && !(UnitName::parse(unit).is_some_and(|n| n.is_template())
                && found.install.alias.is_empty()
                && found.install.default_instance.is_none());
        Ok(if has_links {
            UnitFileState::Disabled
        } else if found.install.also.is_empty() {
            UnitFileState::Static
        } else {
            UnitFileState::Indirect
        })
    }

    fn enable_rec(&self, unit: &str, seen: &mut BTreeSet<String>) -> Result<()> {
        if !seen.insert(unit.to_string()) {
            return Ok(());
        }
        if matches!(
            self.state(unit)?,
            UnitFileState::Masked | UnitFileState::MaskedRuntime
        ) {
            bail!("Failed to enable unit: unit {unit} is masked");
        }
        let found = self
            .find(unit)?
            .with_context(|| format!("Failed to enable unit: unit {unit} does not exist"))?;
        // Every name becomes a link under the unit directory: nothing else may come out.
        if let Err(e) = found.install.check(unit) {
            bail!(
                "Failed to enable unit {unit} ({}): {e}",
                found.path.display()
            );
        }
        let name = UnitName::parse(unit).with_context(|| format!("invalid unit name {unit:?}"))?;
        // A template is enabled under its default instance, if it has one.
        let link_name = if name.is_template() {
            found
                .install
                .default_instance
                .as_deref()
                .map(|i| name.with_instance(i))
        } else {
            Some(unit.to_string())
        };
        let mut links: Vec<PathBuf> = Vec::new();
        if let Some(link_name) = &link_name {
            for (targets, suffix) in [
                (&found.install.wanted_by, ".wants"),
                (&found.install.required_by, ".requires"),
                (&found.install.upheld_by, ".upholds"),
            ] {
                for target in targets {
                    links.push(
                        Path::new(SYSTEM_UNIT_DIR)
                            .join(format!("{target}{suffix}"))
                            .join(link_name),
                    );
                }
            }
        }
        for alias in &found.install.alias {
            if alias != unit {
                links.push(Path::new(SYSTEM_UNIT_DIR).join(alias));
            }
        }
        for link in &links {
            if let Some(info) = self.root.lstat(link)? {
                if info.kind != FileKind::Symlink {
                    bail!(
                        "Failed to enable unit {unit}: {} exists and is not a symlink",
                        link.display()
                    );
                }
                if self.root.read_link(link)?.as_deref() == Some(found.path.as_path()) {
                    continue;
                }
            }
            self.root
                .symlink(link, &found.path, Owner::ROOT)
                .with_context(|| format!("enabling {unit}"))?;
            tracing::info!(link = %link.display(), target = %found.path.display(), "created enablement symlink");
        }
        for also in &found.install.also {
            self.enable_rec(also, seen)?;
        }
        Ok(())
    }

    fn disable_rec(&self, unit: &str, seen: &mut BTreeSet<String>) -> Result<()> {
        if !seen.insert(unit.to_string()) {
            return Ok(());
        }
        let Some(found) = self.find(unit)? else {
            tracing::info!(unit, "unit has no unit file, nothing to disable");
            return Ok(());
        };
        for link in self.links_of(unit, &found)? {
            self.root
                .remove_file(&link)
                .with_context(|| format!("disabling {unit}"))?;
            tracing::info!(link = %link.display(), "removed enablement symlink");
            // `systemctl disable` removes a dependency directory it emptied (`rmdir_parents`
            // up to the unit directory); one that was empty already stays.
            if let Some(dir) = link.parent().filter(|d| *d != Path::new(SYSTEM_UNIT_DIR))
                && self
                    .root
                    .remove_empty_dir(dir)
                    .with_context(|| format!("disabling {unit}"))?
            {
                tracing::info!(dir = %dir.display(), "removed empty dependency directory");
            }
        }
        if let Err(e) = found.install.check(unit) {
            bail!(
                "Failed to disable unit {unit} ({}): {e}",
                found.path.display()
            );
        }
        for also in &found.install.also {
            self.disable_rec(also, seen)?;
        }
        Ok(())
    }

    /// Existing enablement links of `unit` under `/etc/systemd/system`: entries of the dependency
    /// directories named like the unit (or an instance of it, for a template) or pointing at its
    /// unit file, and aliases pointing at its unit file.
    fn links_of(&self, unit: &str, found: &Found) -> Result<Vec<PathBuf>> {
        let snapshot = self.links.as_ref().and_then(|cell| {
            cell.get_or_init(|| self.read_links(None).ok().flatten())
                .as_deref()
        });
        let read_now;
        let entries: &[LinkEntry] = match snapshot {
            Some(entries) => entries,
            None => match self.read_links(Some(unit))? {
                Some(entries) => {
                    read_now = entries;
                    &read_now
                }
                None => return Ok(Vec::new()),
            },
        };
        let name = UnitName::parse(unit);
        let names_this_unit = |entry: &str| {
            entry == unit
                || name.as_ref().is_some_and(|n| {
                    n.is_template()
                        && entry.starts_with(&format!("{}@", n.prefix))
                        && entry.ends_with(&format!(".{}", n.suffix))
                })
        };
        let points_here = |e: &LinkEntry| e.target.as_deref() == Some(found.path.as_path());
        let links = entries.iter().filter(|e| match e.in_dependency_dir {
            // an alias: a link of another name to the unit file
            false => e.name != unit && points_here(e),
            true => {
                names_this_unit(&e.name)
                    || (points_here(e)
                        && name
                            .as_ref()
                            .is_some_and(|n| n.is_template() || e.name == unit))
            }
        });
        Ok(links.map(|e| e.path.clone()).collect())
    }

    /// The symlinks [`Self::links_of`] looks at, with their targets, in the order the
    /// directories list them: those in `/etc/systemd/system` (but the one named `skip`, which
    /// is not read) and those in its dependency directories. `None` without that directory.
    fn read_links(&self, skip: Option<&str>) -> Result<Option<Vec<LinkEntry>>> {
        let base = Path::new(SYSTEM_UNIT_DIR);
        let Some(entries) = self.root.read_dir(base)? else {
            return Ok(None);
        };
        let mut links = Vec::new();
        for (entry, kind) in entries {
            let entry = entry.to_string_lossy().into_owned();
            let path = base.join(&entry);
            if kind == FileKind::Symlink && Some(entry.as_str()) != skip {
                links.push(LinkEntry {
                    in_dependency_dir: false,
                    target: self.root.read_link(&path)?,
                    name: entry,
                    path,
                });
                continue;
            }
            if kind != FileKind::Dir || !LINK_DIR_SUFFIXES.iter().any(|s| entry.ends_with(s)) {
                continue;
            }
            for (link, link_kind) in self.root.read_dir(&path)?.unwrap_or_default() {
                if link_kind != FileKind::Symlink {
                    continue;
                }
                let link = link.to_string_lossy().into_owned();
                let link_path = path.join(&link);
                links.push(LinkEntry {
                    in_dependency_dir: true,
                    target: self.root.read_link(&link_path)?,
                    name: link,
                    path: link_path,
                });
            }
        }
        Ok(Some(links))
    }

    /// Finds the unit file of `unit` (or of its template) in the search path.
    fn find(&self, unit: &str) -> Result<Option<Found>> {
        let mut candidates = vec![unit.to_string()];
        if let Some(template) = UnitName::parse(unit).and_then(|n| n.template()) {
            candidates.push(template);
        }
        for candidate in &candidates {
            for dir in UNIT_PATH {
                let path = Path::new(dir).join(candidate);
                let Some(info) = self.root.lstat(&path)? else {
                    continue;
                };
                if info.kind == FileKind::Symlink
                    && self.root.read_link(&path)?.as_deref() == Some(Path::new("/dev/null"))
                {
                    return Ok(None);
                }
                let Some(text) = self.root.read_to_string(&path)? else {
                    continue;
                };
                return Ok(Some(Found {
                    path,
                    install: InstallInfo::parse(&text),
                }));
            }
        }
        Ok(None)
    }

    fn is_masked_in(&self, dir: &str, unit: &str) -> Result<bool> {
        let path = Path::new(dir).join(unit);
        Ok(self.root.read_link(&path).ok().flatten().as_deref() == Some(Path::new("/dev/null")))
    }
}
