//! What the rollbacks keep in the root: the config a bad boot was rolled back from (never
//! applied again by itself) and the config before the last completed update (what `mco-agent
//! rollback` returns to). Written by the update's commit ([`super::steps`]) and by the
//! rollbacks ([`super::rollback`]), read by both and by `status`.

use std::path::Path;

use anyhow::{Context, Result};
use machine_config::MachineConfig;
use serde::{Deserialize, Serialize};

use super::record::UpdateRecord;
use crate::rootfs::{Owner, Root};

/// The config a bad boot was rolled back from, inside the root: not applied again by itself.
pub const FAILED_TARGET: &str = "/etc/machine-config-daemon/mco-agent-failed-target.json";
/// The config the node was in before its last completed update, inside the root.
pub const PREVIOUS_CONFIG: &str = "/etc/machine-config-daemon/mco-agent-previous.json";
/// The event of a rolled-back boot (ours; the MCD has none).
pub const BOOT_ROLLED_BACK: &str = "BootRolledBack";

/// A target the node was rolled back from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FailedTarget {
    /// The config that failed (compared in full with a new desired config).
    pub config: MachineConfig,
    /// The node's Degraded reason.
    pub reason: String,
    /// When it was rolled back (Unix milliseconds).
    pub at_ms: u64,
}

/// The config before the last completed update.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PreviousConfig {
    /// The config to return to.
    pub config: MachineConfig,
    /// The config the update went to (what `currentconfig` must still say).
    pub updated_to: String,
    /// The deployment the node ran before the update, when the update changed the OS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<String>,
}

pub(super) fn read_json<T: for<'de> Deserialize<'de>>(
    root: &Root,
    path: &str,
) -> Result<Option<T>> {
    let Some(bytes) = root.read(Path::new(path))? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .with_context(|| format!("{}: unreadable", root.host_path(Path::new(path)).display()))
}

/// Serialized straight into the file: the previous config is a whole MachineConfig, which a
/// string of its JSON would hold a second time while it is written.
pub(super) fn write_json<T: Serialize>(root: &Root, path: &str, value: &T) -> Result<()> {
    root.write_atomic_json(Path::new(path), value, 0o600, Owner::ROOT)
        .with_context(|| format!("writing {path}"))
}

pub(super) fn remove(root: &Root, path: &str) -> Result<()> {
    root.remove_file(Path::new(path))
        .with_context(|| format!("removing {path}"))?;
    Ok(())
}

/// The recorded failed target, if any.
pub fn failed_target(root: &Root) -> Result<Option<FailedTarget>> {
    read_json(root, FAILED_TARGET)
}

/// The recorded previous config, if any.
pub fn previous_config(root: &Root) -> Result<Option<PreviousConfig>> {
    read_json(root, PREVIOUS_CONFIG)
}

/// Records the config before the update `rec` completes (nothing for a first application:
/// there is no config to return to).
pub(crate) fn record_previous(root: &Root, rec: &UpdateRecord) -> Result<()> {
    if rec.first_application {
        return remove(root, PREVIOUS_CONFIG);
    }
    if rec.current.name() == rec.desired.name() {
        // The same config again (the force file, a re-apply): nothing new to go back from.
        return Ok(());
    }
    let previous = PreviousConfig {
        config: rec.current.clone(),
        updated_to: rec.desired.name().to_string(),
        deployment: rec.os_base.clone().filter(|_| rec.os_staged),
    };
    write_json(root, PREVIOUS_CONFIG, &previous)
}
