//! Applying a config to a root: the current→desired change (so rolling back is applying
//! desired→current). Everything is decoded and checked first (`prepare`); bad input changes
//! nothing. Then, in the MCD's order: files, units and drop-ins, stale data (files, drop-ins and
//! units the desired config dropped: originals restored or paths deleted), unit enablement,
//! `core`'s SSH keys and password. Directories and links are written only on a first
//! application (the MCD never changes them on a running node).
//!
//! Recording the applied config (`currentconfig`) is the caller's step, after this succeeds.

pub mod backup;
mod core_paths;
mod files;
mod passwd;
mod prepare;
mod units;

use machine_config::Config;
use machine_config::mco::paths::KUBELET_CA;
use serde::Serialize;

use crate::rootfs::accounts::Accounts;
use crate::rootfs::{Root, RootError};
use crate::units::{EnablementPlan, UnitEnablement};

pub use core_paths::authorized_keys_path;

/// A config that cannot be applied; nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct InputError {
    /// JSON path of the offending field (`$.spec.config.storage.files.2.user.name`).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl InputError {
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        InputError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Why an apply failed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// Bad input; nothing was written.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The root could not be read before anything was written.
    #[error("reading the root: {0}")]
    Read(RootError),
    /// Writing failed part way: the root may hold part of the change (roll back by applying
    /// desired→current).
    #[error("applying failed part way: {0:#}")]
    Write(anyhow::Error),
}

impl ApplyError {
    /// Whether the root may have been changed.
    pub fn disk_changed(&self) -> bool {
        matches!(self, ApplyError::Write(_))
    }
}

/// How to apply.
#[derive(Clone, Copy, Debug)]
pub struct ApplyOptions<'a> {
    /// JSON-path prefix of the config in its document, for error messages: `$` for a bare
    /// Ignition config, `$.spec.config` for a MachineConfig.
    pub field_prefix: &'a str,
    /// Write every unit and the passwd section even when unchanged (the force file's re-apply).
    pub write_all: bool,
    /// Nothing was applied to this root before: also create directories and links, as Ignition
    /// would at first boot.
    pub first_application: bool,
    /// The certificate writer keeps `/etc/kubernetes/kubelet-ca.crt`: a config's copy of it is
    /// not written (the MCD's `skipCertificateWrite`; a rendered config holds the CA of when it
    /// was rendered, older than the ControllerConfig's).
    pub skip_certificate_write: bool,
}

impl Default for ApplyOptions<'_> {
    fn default() -> Self {
        ApplyOptions {
            field_prefix: "$",
            write_all: false,
            first_application: false,
            skip_certificate_write: false,
        }
    }
}

/// What an apply did (paths inside the root).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ApplyOutcome {
    /// Files written (changed or new).
    pub files_written: Vec<String>,
    /// Files already holding the desired contents, mode and owner.
    pub files_unchanged: usize,
    /// Dropped files whose original was put back.
    pub files_restored: Vec<String>,
    /// Dropped files deleted.
    pub files_removed: Vec<String>,
    /// Directories created or adjusted (first application).
    pub directories: Vec<String>,
    /// Links created (first application).
    pub links: Vec<String>,
    /// Unit files, drop-ins and masks written, removed or restored.
    pub units_written: Vec<String>,
    /// Units the desired config dropped.
    pub units_removed: Vec<String>,
    /// The enablement changes run.
    pub enablement: EnablementPlan,
    /// Whether core's keys file changed.
    pub ssh_keys_written: bool,
    /// Whether core's password hash changed.
    pub password_changed: bool,
    /// Parts of the config left out, and why.
    pub skipped: Vec<String>,
}

/// Applies the change from `old` (what the root is in) to `new`. Unit enablement goes through
/// `systemd` ([`crate::units::OfflineUnits`] for a root directory, systemd over D-Bus on a node).
pub async fn apply(
    root: &Root,
    old: &Config,
    new: &Config,
    options: &ApplyOptions<'_>,
    systemd: &dyn UnitEnablement,
) -> Result<ApplyOutcome, ApplyError> {
    let accounts = Accounts::load(root).map_err(ApplyError::Read)?;
    let mode = prepare::PrepareMode {
        field_prefix: options.field_prefix,
        write_all: options.write_all,
        first_application: options.first_application,
    };
    let mut prepared = prepare::prepare(root, &accounts, old, new, mode)?;
    if options.skip_certificate_write {
        prepared.files.retain(|f| {
            let skip = f.path == std::path::Path::new(KUBELET_CA);
            if skip {
                tracing::debug!(
                    path = KUBELET_CA,
                    "Skipping file during writeFiles: the certificate writer keeps it"
                );
            }
            !skip
        });
    }
    let mut out = ApplyOutcome::default();
    write(root, &prepared, systemd, &mut out)
        .await
        .map_err(ApplyError::Write)?;
    Ok(out)
}

/// Checks that `apply` would accept the change (the input decodes, owners resolve, every path
/// can be written) without writing anything: the errors `apply` would return before touching
/// the disk.
pub fn check(
    root: &Root,
    old: &Config,
    new: &Config,
    options: &ApplyOptions<'_>,
) -> Result<(), ApplyError> {
    let accounts = Accounts::load(root).map_err(ApplyError::Read)?;
    let mode = prepare::PrepareMode {
        field_prefix: options.field_prefix,
        write_all: options.write_all,
        first_application: options.first_application,
    };
    prepare::prepare(root, &accounts, old, new, mode)?;
    Ok(())
}

async fn write(
    root: &Root,
    p: &prepare::Prepared<'_>,
    systemd: &dyn UnitEnablement,
    out: &mut ApplyOutcome,
) -> anyhow::Result<()> {
    record_originals(root, p)?;
    for dir in &p.dirs {
        not_stopped()?;
        files::create_dir(root, dir, out)?;
    }
    for file in &p.files {
        not_stopped()?;
        files::write_file(root, file, out)?;
    }
    for link in &p.links {
        not_stopped()?;
        files::create_link(root, link, out)?;
    }
    crate::failpoints::failpoint("engine::apply-midway")?;
    let mut plan = EnablementPlan::default();
    units::write_units(root, &p.units, &mut plan, out)?;
    for path in &p.stale_files {
        files::release(root, path, out)?;
    }
    for path in &p.stale_dropins {
        files::release_unit_file(root, path, out)?;
    }
    units::release_units(root, &p.stale_units, systemd, out).await?;
    plan.run(systemd).await?;
    out.enablement = plan;
    if let Some(passwd) = &p.passwd {
        passwd::write_passwd(root, passwd, out)?;
    }
    Ok(())
}

/// Between two file replacements, a stop request ([`crate::stop`]) ends the writes: a large
/// config's writes are the longest stretch of an update that never waits, and the next start
/// resumes them from the update record (as after a kill between the same two files).
fn not_stopped() -> anyhow::Result<()> {
    if crate::stop::requested() {
        anyhow::bail!("stop requested: the writes resume from the update record at the next start");
    }
    Ok(())
}

/// Keeps the original of every path the apply will write (or stamps that there was none), then
/// makes all of that durable with one `syncfs` instead of two fsyncs per path.
fn record_originals(root: &Root, p: &prepare::Prepared<'_>) -> anyhow::Result<()> {
    let mut paths: Vec<std::path::PathBuf> = p.files.iter().map(|f| f.path.clone()).collect();
    for unit in &p.units {
        for dropin in unit
            .dropins
            .iter()
            .filter(|d| d.contents.as_deref().is_some_and(|c| !c.is_empty()))
        {
            paths.push(prepare::dropin_path(&unit.name, &dropin.name).into());
        }
        if unit.is_masked() || unit.contents.as_deref().is_some_and(|c| !c.is_empty()) {
            paths.push(prepare::unit_path(&unit.name).into());
        }
    }
    for path in &paths {
        backup::record_original(root, path)?;
    }
    root.sync()?;
    Ok(())
}

#[cfg(test)]
mod tests;
