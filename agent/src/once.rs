//! `once-from`: apply a config to a root without a cluster, against the config recorded there.
//!
//! The plan comes from the model (`Plan::new(current, desired)`): an unreconcilable change is
//! refused, and so is a change to the OS (image, kernel arguments, kernel type, extensions),
//! which needs rpm-ostree, unless `skip_os` (then the OS parts are left out: the recorded
//! config keeps the current OS fields, so it says what the root really holds).
//!
//! A root with no recorded config gets its first application: what Ignition would do at first
//! boot, so directories and links are written too. The reconcile check then runs against an
//! empty config that already has the desired directories and links (the MCD's rules refuse
//! any change to them on a running node, and there is none to make on a fresh one); every other
//! rule applies (no users but core, no groups, disks, filesystems, RAID, appends, ...).

use anyhow::Context;
use machine_config::plan::{Plan, PolicyOptions};
use machine_config::{MachineConfig, MachineConfigSpec};
use serde_json::{Map, Value};

use crate::apply::{ApplyError, ApplyOptions, ApplyOutcome, apply};
use crate::input::{self, LoadedConfig};
use crate::rootfs::Root;
use crate::units::OfflineUnits;

/// Name of the empty config a first application starts from (the MCD's first-boot name).
pub const EMPTY_CONFIG_NAME: &str = "mco-empty-mc";

/// How to run.
#[derive(Clone, Debug, Default)]
pub struct OnceFromOptions {
    /// Leave out OS changes instead of refusing the config.
    pub skip_os: bool,
    /// Node architecture for the reconcile check (`std::env::consts::ARCH` by default).
    pub arch: String,
}

/// What `once-from` did.
#[derive(Debug)]
pub struct OnceFromReport {
    /// Name of the applied config.
    pub config: String,
    /// Name of the config the root was in (`None` on a first application).
    pub previous: Option<String>,
    /// The plan that was applied (OS parts removed when they were skipped).
    pub plan: Plan,
    /// What the apply wrote.
    pub outcome: ApplyOutcome,
    /// OS changes left out by `skip_os`.
    pub left_out: Vec<String>,
}

/// Why `once-from` did not apply.
#[derive(Debug, thiserror::Error)]
pub enum OnceFromError {
    /// The change is not reconcilable (the MCD's message); nothing was written.
    #[error("{0}")]
    Unreconcilable(String),
    /// Anything else (bad input, refused OS change, I/O); see [`Self::disk_changed`].
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
    /// Applying failed part way and was rolled back (or the rollback failed too).
    #[error("{0}")]
    Apply(String),
}

/// Applies `desired` to `root`.
pub async fn once_from(
    root: &Root,
    desired: &LoadedConfig,
    opts: &OnceFromOptions,
) -> Result<OnceFromReport, OnceFromError> {
    let current = input::read_current(root)?;
    let first = current.is_none();
    let (old_mc, old_ign) = match &current {
        Some(c) => (c.machine_config.clone(), c.ignition.clone()),
        None => (
            first_application_baseline(&desired.machine_config),
            machine_config::Config::empty(),
        ),
    };
    let policy = PolicyOptions {
        arch: if opts.arch.is_empty() {
            std::env::consts::ARCH.to_string()
        } else {
            opts.arch.clone()
        },
        ..PolicyOptions::default()
    };
    let plan =
        Plan::new(&old_mc, &desired.machine_config, &policy).context("planning the update")?;
    if let Some(reason) = &plan.reason {
        return Err(OnceFromError::Unreconcilable(reason.clone()));
    }
    let left_out = os_changes(&plan, &old_mc, &desired.machine_config);
    let (recorded, plan) = if left_out.is_empty() {
        (desired.machine_config.clone(), plan)
    } else if opts.skip_os {
        let recorded = with_os_of(&desired.machine_config, &old_mc);
        let plan = Plan::new(&old_mc, &recorded, &policy)
            .context("planning the update without OS changes")?;
        (recorded, plan)
    } else {
        return Err(OnceFromError::Failed(anyhow::anyhow!(
            "config {} changes the OS ({}), which needs rpm-ostree and is not available to once-from yet; \
             nothing was changed. Rerun with --skip-os to apply everything else",
            desired.machine_config.name(),
            left_out.join("; ")
        )));
    };

    let options = ApplyOptions {
        field_prefix: desired.field_prefix,
        write_all: false,
        first_application: first,
    };
    let units = OfflineUnits::new(root);
    let outcome = match apply(root, &old_ign, &desired.ignition, &options, &units).await {
        Ok(o) => o,
        Err(ApplyError::Write(e)) => {
            return Err(OnceFromError::Apply(
                roll_back(root, &old_ign, desired, &units, e).await,
            ));
        }
        Err(e) => return Err(OnceFromError::Failed(e.into())),
    };
    input::write_current(root, &recorded).context("recording the applied config")?;
    Ok(OnceFromReport {
        config: desired.machine_config.name().to_string(),
        previous: current.map(|c| c.machine_config.name().to_string()),
        plan,
        outcome,
        left_out: if opts.skip_os { left_out } else { Vec::new() },
    })
}

/// Undoes a partly applied change by applying desired→current; returns the message to report.
async fn roll_back(
    root: &Root,
    old_ign: &machine_config::Config,
    desired: &LoadedConfig,
    units: &OfflineUnits<'_>,
    cause: anyhow::Error,
) -> String {
    let options = ApplyOptions {
        field_prefix: desired.field_prefix,
        write_all: true,
        first_application: false,
    };
    match apply(root, &desired.ignition, old_ign, &options, units).await {
        Ok(_) => format!(
            "applying {} failed and was rolled back: {cause:#}",
            desired.machine_config.name()
        ),
        Err(e) => format!(
            "applying {} failed: {cause:#}; rolling back failed too, the root is partly updated: {e}",
            desired.machine_config.name()
        ),
    }
}

/// The OS changes of `plan`, described for messages.
fn os_changes(plan: &Plan, old: &MachineConfig, new: &MachineConfig) -> Vec<String> {
    let mut out = Vec::new();
    if plan.os_update {
        out.push(format!(
            "osImageURL {:?} -> {:?}",
            old.spec.os_image_url, new.spec.os_image_url
        ));
    }
    if !plan.kargs.is_empty() {
        out.push(format!(
            "kernel arguments: rpm-ostree kargs {}",
            plan.kargs.join(" ")
        ));
    }
    if plan.kernel_type {
        out.push(format!(
            "kernelType {:?} -> {:?}",
            old.kernel_type(),
            new.kernel_type()
        ));
    }
    if !plan.extensions.install.is_empty() || !plan.extensions.uninstall.is_empty() {
        out.push(format!(
            "extensions: install [{}], uninstall [{}]",
            plan.extensions.install.join(" "),
            plan.extensions.uninstall.join(" ")
        ));
    }
    out
}

/// `new` with the OS fields of `os_from`.
fn with_os_of(new: &MachineConfig, os_from: &MachineConfig) -> MachineConfig {
    let mut mc = new.clone();
    let (s, o) = (&mut mc.spec, &os_from.spec);
    s.os_image_url = o.os_image_url.clone();
    s.base_os_extensions_container_image = o.base_os_extensions_container_image.clone();
    s.kernel_arguments = o.kernel_arguments.clone();
    s.kernel_type = o.kernel_type.clone();
    s.extensions = o.extensions.clone();
    mc
}

/// The config a fresh root is taken to be in: empty, except for the desired config's
/// directories and links (see the module docs).
pub fn first_application_baseline(desired: &MachineConfig) -> MachineConfig {
    let mut config = Map::new();
    if let Some(cfg) = &desired.spec.config {
        if let Some(version) = cfg.get("ignition").and_then(|i| i.get("version")) {
            config.insert("ignition".into(), serde_json::json!({ "version": version }));
        }
        let mut storage = Map::new();
        for key in ["directories", "links"] {
            if let Some(v) = cfg.get("storage").and_then(|s| s.get(key)) {
                storage.insert(key.into(), v.clone());
            }
        }
        if !storage.is_empty() {
            config.insert("storage".into(), Value::Object(storage));
        }
    }
    MachineConfig::new(
        EMPTY_CONFIG_NAME,
        MachineConfigSpec {
            config: (!config.is_empty()).then_some(Value::Object(config)),
            ..MachineConfigSpec::default()
        },
    )
}
