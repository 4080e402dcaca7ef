//! The update in progress, persisted before every step that can be interrupted:
//! `/etc/machine-config-daemon/mco-agent-update.json` inside the root (our file; the MCD has no
//! equivalent). It holds both configs in full, so an update can be finished or rolled back after
//! a crash or a reboot without asking anyone for them, and the step it was at.
//!
//! `currentconfig` (the MCO's file) is not touched until the update is complete.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use machine_config::MachineConfig;
use serde::{Deserialize, Serialize};

use super::policy::ActivePolicy;
use crate::rootfs::{Owner, Root};

/// Where the update in progress is recorded, inside the root.
pub const UPDATE_RECORD: &str = "/etc/machine-config-daemon/mco-agent-update.json";

/// Version of the record's format.
const RECORD_VERSION: u32 = 1;
/// A copy of the record while a bad boot is rolled back (steps `BootFailed` and
/// `RebootingBack`), in `/var`, which every ostree deployment shares. rpm-ostree's `Rollback`
/// boots the previous deployment with its own `/etc`, as the node left it when it rebooted
/// into the update: the update's record still at `RebootRequested` (read alone, a reboot that
/// never happened, staged again: a boot loop), the update's files, and none of what the
/// rollback wrote. While this copy exists it is the record.
pub const BOOT_ROLLBACK_RECORD: &str = "/var/lib/mco-agent/boot-rollback.json";

/// A step of an update, as recorded. The comment of each variant says what a restart does when
/// it finds the record at that step (see the module docs of [`crate::engine`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Step {
    /// The drain was requested. Restart: drain again (idempotent), then go on.
    Draining,
    /// Files, units and users are being written. Restart: roll back, then retry.
    Writing,
    /// rpm-ostree is staging OS changes. Restart in the same boot: wait for a transaction still
    /// running, then roll back (`cleanup -p` and files), then retry. After an unplanned reboot:
    /// stage again when the deployment from before the update still runs (the reboot dropped
    /// a finalization-locked staged deployment, or came before anything was staged), verify
    /// when the new OS booted, roll back otherwise.
    Os,
    /// Post-config actions (reload/restart/daemon-reload) are running; nothing else is left.
    /// Restart: run them again (idempotent), then complete.
    PostActions,
    /// A reboot is being requested in boot `boot_id`. Restart in the same boot: request it
    /// again; in another boot: verify, unless the deployment from before the update still runs
    /// (a finalization-locked staged deployment was dropped, or the power was lost before the
    /// staged deployment was finalized): then stage the OS changes again, after a reboot we
    /// asked for only once.
    RebootRequested,
    /// Verifying after the reboot that the OS and files took. Restart: verify again.
    Verifying,
    /// The update left image mode: booted into the rendered config's base image, whose `/etc`
    /// lacks the desired config's files the built image carried in its `/usr/etc` (ostree's
    /// `/etc` merge dropped them), the desired config's files, units and users are written
    /// again, then one more reboot is requested ([`UpdateRecord::rewrote_after_image_mode`]).
    /// Restart (in any boot): write them again (idempotent), then reboot.
    RewritingFiles,
    /// Verification found that the update did not take; the node is Degraded. Restart: verify
    /// again (a later boot may have fixed it). Never rebooted again automatically.
    NotTaken,
    /// Rolling files, units, users and staged OS changes back to the current config. Restart:
    /// roll back again (idempotent).
    RollingBack,
    /// A health check failed after the reboot into the update (or an admin ran `mco-agent
    /// rollback`): the deployment from before the update is made the default again and files,
    /// units and users go back to the current config. Restart: do it again (idempotent).
    BootFailed,
    /// The reboot back into the deployment from before the update is being requested. Restart
    /// in the same boot: request it again; in another boot: record the failed target, the
    /// node Degraded with the failed check.
    RebootingBack,
}

impl Step {
    /// A step of rolling a bad boot back (automatically or by hand).
    pub fn rolls_back_boot(self) -> bool {
        matches!(self, Step::BootFailed | Step::RebootingBack)
    }

    /// The step's name for logs and the status file.
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Draining => "Draining",
            Step::Writing => "Writing",
            Step::Os => "Os",
            Step::PostActions => "PostActions",
            Step::RebootRequested => "RebootRequested",
            Step::Verifying => "Verifying",
            Step::RewritingFiles => "RewritingFiles",
            Step::NotTaken => "NotTaken",
            Step::RollingBack => "RollingBack",
            Step::BootFailed => "BootFailed",
            Step::RebootingBack => "RebootingBack",
        }
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The update in progress.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UpdateRecord {
    /// Format version.
    pub version: u32,
    /// The step the update is at.
    pub step: Step,
    /// The config the node was in when the update started (what a rollback returns to).
    pub current: MachineConfig,
    /// The config being applied.
    pub desired: MachineConfig,
    /// Nothing was applied to the root before (no `currentconfig`): directories and links are
    /// written too, and the current config is an empty one.
    pub first_application: bool,
    /// The force file was present when the update started: every unit is rewritten and
    /// on-disk validation was skipped.
    pub force: bool,
    /// The plan needs a reboot.
    pub reboot: bool,
    /// OS changes were (or are being) staged through rpm-ostree.
    pub os_staged: bool,
    /// The deployment running when OS staging began (rpm-ostree's id). Still running after a
    /// reboot means nothing staged took effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_base: Option<String>,
    /// The reboot (through logind, or the release of the staged deployment with
    /// `FinalizeDeployment`) was asked for; recorded just before asking.
    #[serde(default)]
    pub reboot_requested: bool,
    /// The OS changes were staged again once because the reboot the agent asked for booted the
    /// deployment from before the update (the power was lost before the staged deployment was
    /// finalized). A second such boot is not retried: the node is Degraded (no reboot loops).
    #[serde(default)]
    pub restaged_after_lost_reboot: bool,
    /// The update left image mode and, after the reboot into the base image, wrote the desired
    /// config's files, units and users again ([`Step::RewritingFiles`]); recorded with the
    /// second reboot's request. Set, the next boot verifies as usual: at most one extra reboot
    /// per update, never a loop.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rewrote_after_image_mode: bool,
    /// A boot rollback started by `mco-agent rollback`, not by the daemon: in the boot it was
    /// started in, only that command drives it (the daemon leaves it alone, so the two never
    /// run the same step at once).
    #[serde(default)]
    pub by_hand: bool,
    /// The boot in which `step` was entered.
    pub boot_id: String,
    /// When the update started (Unix milliseconds).
    pub started_ms: u64,
    /// Paths (files, unit files, drop-ins) whose `orig`/`noorig` backup must exist before any
    /// apply of this update runs; see [`crate::engine::backups`].
    #[serde(default)]
    pub stamped: Vec<String>,
    /// Why the update is being rolled back, or why it did not take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The node disruption policies the update was planned with (a record written before
    /// they were recorded is planned with the default table).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<ActivePolicy>,
    /// The administrator's hooks this update started, and how each ended (persisted before a
    /// hook runs, so a restart does not run it twice: [`crate::engine::hooks`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<HookMark>,
    /// A FleetLock reboot slot was taken for this update (the `fleet_lock` strategy); it is
    /// given back once the node is Done in a config, after a restart or reboot too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lock_held: bool,
}

impl UpdateRecord {
    /// A new record for an update from `current` to `desired`, at `step`.
    pub fn new(current: MachineConfig, desired: MachineConfig, step: Step, boot_id: &str) -> Self {
        UpdateRecord {
            version: RECORD_VERSION,
            step,
            current,
            desired,
            first_application: false,
            force: false,
            reboot: false,
            os_staged: false,
            os_base: None,
            reboot_requested: false,
            restaged_after_lost_reboot: false,
            rewrote_after_image_mode: false,
            by_hand: false,
            boot_id: boot_id.to_string(),
            started_ms: now_ms(),
            stamped: Vec::new(),
            reason: None,
            policy: None,
            hooks: Vec::new(),
            lock_held: false,
        }
    }

    /// `current -> desired`, for logs and messages.
    pub fn describe(&self) -> String {
        format!("{} -> {}", self.current.name(), self.desired.name())
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Reads the update record; `None` when no update is in progress. A record that cannot be
/// read is an error naming the file (it is never ignored: it may say the disk is half-updated).
pub fn load(root: &Root) -> Result<Option<UpdateRecord>> {
    match load_from(root, BOOT_ROLLBACK_RECORD)? {
        Some(rolling_back) => Ok(Some(rolling_back)),
        None => load_from(root, UPDATE_RECORD),
    }
}

fn load_from(root: &Root, path: &str) -> Result<Option<UpdateRecord>> {
    let path = Path::new(path);
    let Some(bytes) = root.read(path).map_err(|e| root.on_host(e))? else {
        return Ok(None);
    };
    let record: UpdateRecord = serde_json::from_slice(&bytes).with_context(|| {
        format!(
            "{}: unreadable update record",
            root.host_path(path).display()
        )
    })?;
    if record.version != RECORD_VERSION {
        anyhow::bail!(
            "{}: update record version {} is not supported (expected {RECORD_VERSION})",
            root.host_path(path).display(),
            record.version
        );
    }
    Ok(Some(record))
}

/// Persists `record` atomically (temp file, fsync, rename).
pub fn store(root: &Root, record: &UpdateRecord) -> Result<()> {
    // Serialized into the file: the record holds two MachineConfigs, never copied into a string.
    root.write_atomic_json(Path::new(UPDATE_RECORD), record, 0o600, Owner::ROOT)
        .with_context(|| format!("recording the update step {}", record.step))?;
    if matches!(record.step, Step::BootFailed | Step::RebootingBack) {
        root.write_atomic_json(Path::new(BOOT_ROLLBACK_RECORD), record, 0o600, Owner::ROOT)
            .with_context(|| {
                format!(
                    "recording the update step {} in {BOOT_ROLLBACK_RECORD}",
                    record.step
                )
            })?;
    }
    Ok(())
}

/// Removes the record: no update is in progress any more. The copy in `/var` goes first: a
/// crash in between leaves the record in `/etc`, at the same step.
pub fn clear(root: &Root) -> Result<()> {
    root.remove_file(Path::new(BOOT_ROLLBACK_RECORD))
        .with_context(|| format!("removing {BOOT_ROLLBACK_RECORD}"))?;
    root.remove_file(Path::new(UPDATE_RECORD))
        .context("removing the update record")?;
    Ok(())
}

/// How far a hook of a recorded update got.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookState {
    /// Recorded just before it was started; still so after a restart: it was interrupted.
    Started,
    Succeeded,
    Failed,
}

/// One hook of a recorded update ([`crate::engine::hooks`] runs them and keeps these).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookMark {
    pub phase: String,
    pub name: String,
    pub state: HookState,
}

#[cfg(test)]
mod tests {
    use super::*;
    use machine_config::MachineConfigSpec;

    #[test]
    fn round_trips_and_clears() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        assert!(load(&root).unwrap().is_none());
        let mut rec = UpdateRecord::new(
            MachineConfig::new("a", MachineConfigSpec::default()),
            MachineConfig::new("b", MachineConfigSpec::default()),
            Step::Writing,
            "boot-1",
        );
        rec.stamped = vec!["/etc/x".into()];
        store(&root, &rec).unwrap();
        assert_eq!(load(&root).unwrap(), Some(rec.clone()));
        assert_eq!(rec.describe(), "a -> b");
        clear(&root).unwrap();
        assert!(load(&root).unwrap().is_none());
        clear(&root).unwrap();
    }

    /// A record written before the image-mode rewrite existed (no `rewrote_after_image_mode`)
    /// loads, the field unset; once set it is kept.
    #[test]
    fn a_record_of_the_previous_version_loads() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        let mut rec = UpdateRecord::new(
            MachineConfig::new("a", MachineConfigSpec::default()),
            MachineConfig::new("b", MachineConfigSpec::default()),
            Step::RebootRequested,
            "boot-1",
        );
        let old = serde_json::to_value(&rec).unwrap();
        assert!(old.get("rewrote_after_image_mode").is_none(), "{old}");
        root.write_atomic(
            Path::new(UPDATE_RECORD),
            old.to_string().as_bytes(),
            0o600,
            Owner::ROOT,
        )
        .unwrap();
        assert_eq!(load(&root).unwrap(), Some(rec.clone()));
        rec.rewrote_after_image_mode = true;
        rec.step = Step::RewritingFiles;
        store(&root, &rec).unwrap();
        assert_eq!(load(&root).unwrap(), Some(rec));
    }

    #[test]
    fn a_broken_record_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        root.write_atomic(Path::new(UPDATE_RECORD), b"{", 0o600, Owner::ROOT)
            .unwrap();
        let err = format!("{:#}", load(&root).unwrap_err());
        assert!(
            err.contains("mco-agent-update.json: unreadable update record"),
            "{err}"
        );
    }
}
