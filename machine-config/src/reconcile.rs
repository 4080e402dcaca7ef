//! Whether a node can move from one config to another in place: the MCD's rules and reason
//! strings (`can't reconcile config A with B: ...`).

use crate::extensions;
use crate::ignition::{Config, PasswdUser};
use crate::kargs::go_string_slice;
use crate::machineconfig::{
    KERNEL_TYPE_64K_PAGES, KERNEL_TYPE_DEFAULT, KERNEL_TYPE_REALTIME, MachineConfig,
    canonical_kernel_type,
};
use crate::machineconfiguration::IrreconcilableValidationOverrides;
use crate::mco::paths::FORCE_FILE;

/// Why two configs cannot be reconciled. `Display` is the MCD's full message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("can't reconcile config {old} with {new}: {reason}")]
pub struct Unreconcilable {
    pub old: String,
    pub new: String,
    /// Everything after `can't reconcile config A with B: `.
    pub reason: String,
}

/// What the check needs beyond the two configs.
#[derive(Debug, Clone, Default)]
pub struct ReconcileOptions {
    /// The node's architecture (`x86_64`, `aarch64`, ...), for `64k-pages`.
    pub arch: String,
    /// The node's FIPS state (`/proc/sys/crypto/fips_enabled`), when known.
    pub fips_enabled: Option<bool>,
    /// `MachineConfiguration.spec.irreconcilableValidationOverrides`.
    pub overrides: IrreconcilableValidationOverrides,
}

/// Checks that `new` can be applied in place on a node running `old`.
pub fn reconcile(
    old: &MachineConfig,
    new: &MachineConfig,
    arch: &str,
) -> Result<(), Unreconcilable> {
    reconcile_with(
        old,
        new,
        &ReconcileOptions {
            arch: arch.to_string(),
            ..ReconcileOptions::default()
        },
    )
}

/// [`reconcile`] with every option.
pub fn reconcile_with(
    old: &MachineConfig,
    new: &MachineConfig,
    opts: &ReconcileOptions,
) -> Result<(), Unreconcilable> {
    let (old_name, new_name) = (old.name(), new.name());
    let fail = |reason: String| Unreconcilable {
        old: old_name.to_string(),
        new: new_name.to_string(),
        reason,
    };
    // The render controller's check, wrapped the way the MCD wraps it.
    let rendered = |reason: String| {
        fail(format!(
            "configs {old_name}, {new_name} are not reconcilable: {reason}"
        ))
    };
    let old_ign = old.ignition().map_err(|e| {
        rendered(format!(
            "parsing old Ignition config from machineconfig {old_name:?} failed: {e}"
        ))
    })?;
    let new_ign = new.ignition().map_err(|e| {
        rendered(format!(
            "parsing new Ignition config from machineconfig {new_name:?} failed: {e}"
        ))
    })?;
    check_configs(
        &old_ign,
        &new_ign,
        old.spec.fips,
        new.spec.fips,
        &opts.overrides,
    )
    .map_err(|reason| {
        rendered(format!(
            "new machineconfig {old_name:?} is not reconcilable against {new_name:?}: {reason}"
        ))
    })?;
    if let Some(node_fips) = opts.fips_enabled
        && node_fips != new.spec.fips
    {
        return Err(fail(FIPS_CHANGE.to_string()));
    }
    check_os_fields(new, &opts.arch).map_err(fail)
}

const FIPS_CHANGE: &str =
    "detected change to FIPS flag; refusing to modify FIPS on a running cluster";

/// The Ignition-level rules, in the MCO's order; `Err` is the bare reason.
pub fn check_configs(
    old: &Config,
    new: &Config,
    old_fips: bool,
    new_fips: bool,
    overrides: &IrreconcilableValidationOverrides,
) -> Result<(), String> {
    if old.passwd != new.passwd {
        check_passwd(old, new).map_err(|e| format!("invalid passwd change(s): {e}"))?;
    }
    if old.kernel_arguments != new.kernel_arguments {
        return Err("ignition kargs section contains changes".into());
    }
    let overridden = |name: &str| overrides.storage.iter().any(|s| s == name);
    let (os, ns) = (&old.storage, &new.storage);
    if !overridden("Disks") && os.disks != ns.disks {
        return Err("ignition disks section contains changes".into());
    }
    if !overridden("FileSystems") && os.filesystems != ns.filesystems {
        return Err("ignition filesystems section contains changes".into());
    }
    if !overridden("Raid") && os.raid != ns.raid {
        return Err("ignition raid section contains changes".into());
    }
    if os.directories != ns.directories {
        return Err("ignition directories section contains changes".into());
    }
    if os.links != ns.links && !ns.links.is_empty() {
        return Err("ignition links section contains changes".into());
    }
    for f in &ns.files {
        if !f.append.is_empty() {
            return Err(format!("ignition file {} includes append", f.path));
        }
        if f.path == FORCE_FILE {
            return Err(format!("cannot create {FORCE_FILE} via Ignition"));
        }
    }
    if old_fips != new_fips {
        return Err(FIPS_CHANGE.into());
    }
    Ok(())
}

fn check_passwd(old: &Config, new: &Config) -> Result<(), String> {
    if old.passwd.groups != new.passwd.groups {
        return Err("ignition Passwd Groups section contains changes".into());
    }
    if old.passwd.users == new.passwd.users {
        return Ok(());
    }
    if new.passwd.users.iter().any(|u| u.name != "core") {
        return Err(
            "ignition passwd user section contains unsupported changes: non-core user".into(),
        );
    }
    // Only the last user is checked (an empty list does not remove users).
    match new.passwd.users.last() {
        None => Ok(()),
        Some(user) => verify_core_user(user),
    }
}

fn verify_core_user(user: &PasswdUser) -> Result<(), String> {
    if user.name == "core" && (user.password_hash.is_some() || !user.ssh_authorized_keys.is_empty())
    {
        let rest = PasswdUser {
            name: String::new(),
            ssh_authorized_keys: Vec::new(),
            password_hash: None,
            ..user.clone()
        };
        if rest != PasswdUser::default() {
            return Err("SSH keys and password hash are not reconcilable".into());
        }
        Ok(())
    } else {
        Err("ignition passwd user section contains unsupported changes: user must be core and have 1 or more sshKeys".into())
    }
}

/// Kernel type and extensions of the new config.
fn check_os_fields(new: &MachineConfig, arch: &str) -> Result<(), String> {
    let kt = new.spec.kernel_type.as_str();
    if !matches!(
        kt,
        "" | KERNEL_TYPE_DEFAULT | KERNEL_TYPE_REALTIME | KERNEL_TYPE_64K_PAGES
    ) {
        return Err(format!("kernelType={kt} is invalid"));
    }
    let bad = extensions::unsupported(&new.spec.extensions);
    if !bad.is_empty() {
        return Err(format!(
            "invalid extensions found: {}",
            go_string_slice(&bad)
        ));
    }
    let canonical = canonical_kernel_type(kt);
    if canonical != KERNEL_TYPE_DEFAULT && new.spec.extensions.iter().any(|e| e == "kernel-devel") {
        return Err(format!(
            "installing kernel-devel extension is not supported with kernelType: {canonical}"
        ));
    }
    if canonical == KERNEL_TYPE_64K_PAGES && !matches!(arch, "aarch64" | "arm64") {
        return Err("64k-pages is only supported for aarch64 architecture".into());
    }
    Ok(())
}
