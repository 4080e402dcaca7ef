//! The update engine: one explicit state enum ([`record::Step`]), one transition function
//! (`Engine::transition`, in `steps.rs`), the update in progress persisted before every
//! step that can be interrupted ([`record`]), every change of the recorded step checked
//! against the table of allowed ones ([`transitions`], drawn in `docs/architecture.md`).
//! `once-from` and the daemon (`start`) drive it;
//! `mco-firstboot` uses only its OS step ([`stage_os_changes`], [`running_deployment`]).
//!
//! An update runs: reconcile (Unreconcilable with the MCD's reason) → preflight validation of
//! the disk against the current config (skipped with the force file) → plan → *record* →
//! drain if the plan says so → write files, units, users (`apply`) → OS changes through
//! rpm-ostree → post-config actions and Done, or a reboot → after the boot, verify the booted
//! deployment, kernel arguments and files → commit `currentconfig`, uncordon, Done.
//! `currentconfig` is written only when the update is complete (after the reboot is verified
//! for reboot updates), so a reboot that did not take never makes the node believe it is
//! updated (the MCD's #5133).
//!
//! # Crash safety: what a restart does at each step
//! The record is written (atomically) *before* each step runs, so a `kill -9` or a power cut
//! leaves it at the step that was running:
//!
//! | recorded step | on restart |
//! |---|---|
//! | (none) | nothing was changed, or the update completed |
//! | `Draining` | drain again (idempotent), go on |
//! | `Writing` | files may be half-written: roll back to the current config, retry later |
//! | `Os`, same boot | wait for a transaction still running, roll back (`cleanup -p`, files), retry |
//! | `Os`, another boot | the deployment from before still runs (the locked staged one was dropped): stage again; the new OS runs: verify; else roll back |
//! | `PostActions` | run the actions again (idempotent), complete |
//! | `RebootRequested`, same boot | request the reboot again (release the staged deployment, or logind) |
//! | `RebootRequested`, another boot | verify; but if the deployment from before still runs: stage again (the reboot came before ours was requested, or ours lost the staged deployment to a power cut before it was finalized: then once per update) |
//! | `Verifying` / `NotTaken` | verify (again); an update leaving image mode first writes the files again, once (next row) |
//! | `RewritingFiles` | write the desired config's files, units and users again (idempotent), then request one more reboot (recorded with it, so the next boot verifies) |
//! | `RollingBack` | roll back again (idempotent) |
//! | `BootFailed` | roll the boot back again: the previous deployment the default (skipped when it is already), files re-applied |
//! | `RebootingBack`, same boot | request the reboot again |
//! | `RebootingBack`, another boot | record the failed target, Degraded with the failed check |
//!
//! Roll back is applying desired→current with every unit rewritten, after the backups of
//! every path are re-established ([`backups`]), and removing staged OS changes. Every file
//! write is atomic (temp file, fsync, rename), so no file is ever half-written; the temp file a
//! kill leaves between the write and the rename is removed when the agent starts again
//! ([`stale_temps`]).
//!
//! The administrator's hooks (`/etc/mco-agent/hooks.d/<phase>/`) run at `pre-apply`,
//! `post-apply`, `pre-reboot` and `post-boot`; when, and what their results and a crash while
//! one runs do: [`hooks`] (a hook's start and end are marked in the record, so a restart does
//! not run it twice for one step).
//!
//! Failpoints (feature `failpoints`, `FAILPOINTS='engine::writing=return(kill)'`): see
//! [`crate::failpoints`]; every step has one.
//!
//! # Differences from the MCD, on purpose
//! - The force file skips validation and re-applies everything, but reboots only when the
//!   plan needs it; it is consumed when the update it started completes.
//! - After the reboot into an update the node must also pass health checks ([`health`]: the
//!   units the config enables, the kubelet, `/etc/mco-agent/health.d/`) within a deadline, or
//!   the boot is rolled back ([`rollback`]): the previous deployment and config, one reboot,
//!   Degraded with the failed check, the target not applied again by itself. The MCD has none.
//! - A failed verification after a reboot leaves the node Degraded with what did not take; it
//!   is never rebooted again automatically (no reboot loops), with one exception: when the
//!   reboot the agent asked for boots the deployment from before the update (the power was lost
//!   before the staged deployment was finalized), the OS changes are staged and the node
//!   rebooted once more, once per update; the MCD degrades at once. The force file or a new
//!   desired config recover it.
//! - An empty `osImageURL` means the config does not manage the OS image: it is not checked.
//! - OS changes are staged with rpm-ostree's `lock-finalization` (see below), so a reboot the
//!   agent did not ask for never boots a half-staged OS.
//!
//! # Finalization-locked staging
//! Every OS transaction of an update (rebase, kernel arguments, kernel type, extensions) is
//! staged with `lock-finalization` when the node will be rebooted by the agent
//! ([`live::SeamOptions::lock_finalization`], on by default; `--no-lock-finalization` turns it
//! off). ostree's `ostree-finalize-staged.service` then leaves the staged deployment out at a
//! shutdown until it is released: the [`Rebooter`] makes its checks (finalize service active,
//! no block inhibitor, delay locks logged, reason recorded) and releases it with
//! `FinalizeDeployment(checksum)`, after which rpm-ostree reboots. A reboot that comes while
//! the agent is between transactions (the image rebased, the kernel arguments not yet) drops
//! the staged deployment instead of booting a half-applied OS: the node comes back on the
//! deployment it ran before the update ([`UpdateRecord::os_base`]), with the desired files
//! already written, and the engine stages the OS changes again and reboots, converging
//! without a rollback or a Degraded state. Without a rebooter (`--skip-reboot`, an alternate
//! root) staging is not locked, so the reboot somebody else makes finalizes it.

pub mod backups;
pub mod bootloader;
#[cfg(any(test, feature = "fakes"))]
pub mod fake;
pub mod health;
pub mod hooks;
pub mod live;
pub mod observe;
mod os;
pub mod os_image;
#[cfg(test)]
mod os_image_tests;
pub mod policy;
mod post_actions;
pub mod record;
pub mod report;
pub mod rollback;
mod rollback_records;
pub mod stale_temps;
mod start;
mod steps;
pub mod transitions;
mod verify;

#[cfg(test)]
pub(crate) mod tests;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use machine_config::MachineConfig;
use machine_config::mco::paths::FORCE_FILE;
use machine_config::plan::Plan;

use crate::apply::ApplyOutcome;
use crate::hooks::HookOptions;
use crate::host::reboot::Rebooter;
use crate::host::systemd::Systemd;
use crate::os::{InstalledPackages, OsUpdater};
use crate::rootfs::Root;
use crate::stop::StopFlag;
use crate::strategy::Strategy;
use crate::units::UnitEnablement;

pub use health::{HealthOptions, KubeletProbe};
pub use observe::{Observation, Observer};
pub use os::{
    describe as describe_os_changes, running as running_deployment, stage as stage_os_changes,
};
pub use policy::{ActivePolicy, FixedPolicy, PolicySource};
pub use record::{Step, UpdateRecord};
pub use report::{ClusterReport, NoCluster, Reporter, Status};
pub use rollback::RollbackPlan;

/// Where the kernel says which boot this is.
pub const BOOT_ID_FILE: &str = "/proc/sys/kernel/random/boot_id";

/// The engine's hands: one small trait per host effect.
#[derive(Clone, Default)]
pub struct Seams {
    /// Unit enablement for apply; `None`: offline links under the root.
    pub units: Option<Arc<dyn UnitEnablement>>,
    /// Live systemd for post-config actions; `None`: they are skipped and said so.
    pub systemd: Option<Arc<dyn Systemd>>,
    /// rpm-ostree; `None`: OS changes cannot be made ([`Seams::os_unavailable`] says why).
    pub os: Option<Arc<dyn OsUpdater>>,
    /// Why `os` is `None`.
    pub os_unavailable: String,
    /// The reboot; `None`: never reboot ([`Seams::no_reboot`] says why).
    pub rebooter: Option<Arc<dyn Rebooter>>,
    /// Why `rebooter` is `None` (`--skip-reboot`, ...).
    pub no_reboot: String,
    /// The booted OS's RPM database, where extension packages are verified after a reboot
    /// (the MCD's `verifyExtensionPackages`); `None`: not verified (not an Enterprise Linux
    /// CoreOS, as upstream, or not the running host).
    pub packages: Option<Arc<dyn InstalledPackages>>,
    /// The host's programs (podman, mokutil, journalctl) for the OS step's decisions; `None`
    /// (an alternate root): images come from their registry, no bootloader update.
    pub commands: Option<Arc<dyn crate::host::command::HostCommands>>,
}

/// How the engine runs.
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Leave OS changes out instead of failing when they cannot be made (`--skip-os`): the
    /// recorded config keeps the current OS fields, so it says what the node really runs.
    pub skip_os: bool,
    /// Node architecture for the reconcile check.
    pub arch: String,
    /// Where the boot id is read (tests simulate reboots by changing it).
    pub boot_id_file: PathBuf,
    /// Validate the disk against the current config before an update (the MCD's preflight
    /// check). `once-from` applies what it is given without it, as the MCD's once-from does.
    pub preflight: bool,
    /// Keep the status file `/run/mco-agent/status.json` (inside the root) up to date.
    pub status_file: bool,
    /// A reboot update that is not rebooted (no rebooter) waits for the next boot to be
    /// verified and committed (a node). `false`: it is committed at once, since the root is not
    /// the running system and no boot of it can be observed (`once-from --root`).
    pub verify_after_reboot: bool,
    /// JSON path of the Ignition config in its document, for messages: `$.spec.config` for a
    /// MachineConfig, `$` for a bare Ignition config.
    pub field_prefix: &'static str,
    /// How the administrator's hooks run (timeout, `ansible-playbook`).
    pub hooks: HookOptions,
    /// The health checks after the reboot into an update ([`health`]).
    pub health: HealthOptions,
    /// Updates leave `/etc/kubernetes/kubelet-ca.crt` to the certificate writer (a daemon
    /// with a cluster: [`crate::apply::ApplyOptions::skip_certificate_write`]).
    pub skip_certificate_write: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            skip_os: false,
            arch: std::env::consts::ARCH.to_string(),
            boot_id_file: PathBuf::from(BOOT_ID_FILE),
            preflight: true,
            status_file: true,
            verify_after_reboot: true,
            field_prefix: "$.spec.config",
            hooks: HookOptions::default(),
            health: HealthOptions::default(),
            skip_certificate_write: false,
        }
    }
}

/// How an update ended (for now).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The node is in the desired config (committed).
    Done,
    /// A reboot into the desired config was requested.
    Rebooting,
    /// The update is applied and staged but needs a reboot nobody requested (`--skip-reboot`).
    NeedsReboot,
    /// The change cannot be made in place; nothing was changed.
    Unreconcilable(String),
    /// The update failed (rolled back when it had started), or did not take after a reboot.
    Degraded(String),
    /// The update strategy does not let the update start yet (outside the maintenance
    /// windows, no FleetLock slot): nothing was changed; ask again after `recheck_in`.
    Waiting {
        reason: String,
        recheck_in: Duration,
    },
}

/// What an update did.
#[derive(Clone, Debug)]
pub struct UpdateReport {
    /// The config the node was in.
    pub from: String,
    /// The config applied.
    pub to: String,
    pub outcome: Outcome,
    /// The plan (absent when none could be made, or for a resumed update).
    pub plan: Option<Plan>,
    /// What the apply wrote.
    pub applied: Option<ApplyOutcome>,
    /// OS changes made, described.
    pub os_changes: Vec<String>,
    /// OS changes left out (`--skip-os`).
    pub left_out: Vec<String>,
    /// Post-config actions run.
    pub actions: Vec<String>,
    /// Post-config actions skipped, with why.
    pub skipped_actions: Vec<String>,
    /// Wall time of this run of the engine.
    pub duration: Duration,
    /// The node was found running the update (booted deployment, kernel arguments, files)
    /// after the reboot it needed, and the update was committed: it completed a recorded
    /// update rather than applying anything.
    pub verified: bool,
}

impl UpdateReport {
    /// A report of an update from `from` to `to` that has done nothing yet (outcome Done).
    pub fn new(from: &str, to: &str) -> Self {
        UpdateReport {
            from: from.to_string(),
            to: to.to_string(),
            outcome: Outcome::Done,
            plan: None,
            applied: None,
            os_changes: Vec::new(),
            left_out: Vec::new(),
            actions: Vec::new(),
            skipped_actions: Vec::new(),
            duration: Duration::ZERO,
            verified: false,
        }
    }
}

/// The update engine over one root.
pub struct Engine {
    root: Root,
    seams: Seams,
    opts: EngineOptions,
    reporter: Reporter,
    boot_id: String,
    /// Where a new update's node disruption policies come from (the default table unless
    /// [`Engine::with_policy_source`] says otherwise).
    policy_source: Arc<dyn PolicySource>,
    /// When a new update may drain or reboot ([`crate::strategy`]; `immediate` unless
    /// [`Engine::with_strategy`]).
    strategy: Arc<Strategy>,
    /// A stop request: no step begins after it ([`crate::stop`]; the process's unless
    /// [`Engine::with_stop`]).
    stop: StopFlag,
    /// The previous boot's `ostree-finalize-staged.service` error, appended to validation
    /// errors as the MCD appends it (`; possible root cause: ...`).
    possible_root_cause: std::sync::Mutex<Option<String>>,
}

impl Engine {
    /// An engine over `root`; reads the boot id once (a new process is a new look at it).
    pub fn new(
        root: Root,
        seams: Seams,
        opts: EngineOptions,
        cluster: Arc<dyn ClusterReport>,
    ) -> Result<Self> {
        let boot_id = read_boot_id(&opts.boot_id_file)?;
        let reporter = Reporter::new(cluster, opts.status_file);
        Ok(Engine {
            root,
            seams,
            opts,
            reporter,
            boot_id,
            policy_source: Arc::new(FixedPolicy(ActivePolicy::defaults())),
            strategy: Arc::new(Strategy::immediate()),
            stop: StopFlag::process(),
            possible_root_cause: std::sync::Mutex::new(None),
        })
    }

    /// Keeps `cause` (the previous boot's finalization error) for validation errors.
    pub fn set_possible_root_cause(&self, cause: Option<String>) {
        *self
            .possible_root_cause
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = cause;
    }

    pub(crate) fn possible_root_cause(&self) -> Option<String> {
        self.possible_root_cause
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Stops between steps when `stop` is requested (tests; the process's flag otherwise).
    pub fn with_stop(mut self, stop: StopFlag) -> Self {
        self.stop = stop;
        self
    }

    /// Plans new updates with the policies `source` gives.
    pub fn with_policy_source(mut self, source: Arc<dyn PolicySource>) -> Self {
        self.policy_source = source;
        self
    }

    /// Starts new updates when `strategy` lets them.
    pub fn with_strategy(mut self, strategy: Arc<Strategy>) -> Self {
        self.reporter.update_status(&self.root, |s| {
            s.strategy = Some(strategy.status());
        });
        self.strategy = strategy;
        self
    }

    pub fn strategy(&self) -> &Strategy {
        &self.strategy
    }

    pub fn root(&self) -> &Root {
        &self.root
    }

    /// Removes the temp files that writes killed mid-way left in the directories the agent
    /// writes in ([`stale_temps`]); the daemon and `once-from` do it first thing.
    pub fn remove_stale_temp_files(&self) -> Vec<std::path::PathBuf> {
        stale_temps::remove_stale_temp_files(&self.root)
    }

    pub fn reporter(&self) -> &Reporter {
        &self.reporter
    }

    pub fn seams(&self) -> &Seams {
        &self.seams
    }

    pub fn options(&self) -> &EngineOptions {
        &self.opts
    }

    /// This boot's id.
    pub fn boot_id(&self) -> &str {
        &self.boot_id
    }

    /// The recorded update in progress, if any.
    pub fn pending(&self) -> Result<Option<UpdateRecord>> {
        record::load(&self.root)
    }

    /// Whether the force file is present.
    pub fn force_file_present(&self) -> Result<bool> {
        Ok(self.root.lstat(Path::new(FORCE_FILE))?.is_some())
    }

    /// Removes the force file (it has been acted on).
    pub fn consume_force_file(&self) -> Result<()> {
        if self
            .root
            .remove_file(Path::new(FORCE_FILE))
            .context("removing the force file")?
        {
            tracing::info!(path = FORCE_FILE, "force file consumed");
        }
        Ok(())
    }
}

/// Reads a boot id file (one line).
pub fn read_boot_id(path: &Path) -> Result<String> {
    let s = std::fs::read_to_string(path)
        .with_context(|| format!("reading the boot id from {}", path.display()))?;
    let id = s.trim().to_string();
    anyhow::ensure!(!id.is_empty(), "{}: empty boot id", path.display());
    Ok(id)
}

/// `new` with its OS fields replaced by `os_from`'s (what a node runs when OS changes are
/// left out).
pub fn with_os_of(new: &MachineConfig, os_from: &MachineConfig) -> MachineConfig {
    let mut mc = new.clone();
    let (s, o) = (&mut mc.spec, &os_from.spec);
    s.os_image_url = o.os_image_url.clone();
    s.base_os_extensions_container_image = o.base_os_extensions_container_image.clone();
    s.kernel_arguments = o.kernel_arguments.clone();
    s.kernel_type = o.kernel_type.clone();
    s.extensions = o.extensions.clone();
    mc
}
