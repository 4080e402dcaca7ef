//! The `Rebooter` seam: reboot without losing a staged deployment and without bypassing
//! inhibitor locks.
//!
//! [`LogindRebooter`] first finds out what is staged for the next boot (from rpm-ostree when it
//! has a connection to it, [`LogindRebooter::with_os_updater`], else from ostree's
//! `/run/ostree/staged-deployment`), then
//! 1. makes sure `ostree-finalize-staged.service` is active when a deployment is staged: that
//!    unit writes the staged deployment out when it is stopped at shutdown, so rebooting while
//!    it is inactive silently drops the update (the MCD works around the same problem,
//!    OCPBUGS-51150, by ordering its reboot unit after the service);
//! 2. reads logind's inhibitor locks: block locks on shutdown refuse the reboot, naming their
//!    holders (logind would let root through them); delay locks are logged and honoured by
//!    logind itself, which waits for them up to `InhibitDelayMaxUSec`;
//! 3. records the reason in `/run/mco-agent/reboot-reason`;
//! 4. reboots: a staged deployment made with rpm-ostree's `lock-finalization` is released with
//!    `FinalizeDeployment(checksum)`, after which rpm-ostree reboots (through systemd and
//!    logind, so delay locks still hold the shutdown); anything else through logind's
//!    `Reboot(false)`. A locked deployment is never rebooted away through logind: the shutdown
//!    would drop it.

#[cfg(any(test, feature = "fakes"))]
mod fake;
mod logind;
#[cfg(test)]
mod tests;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use cap_std_ext::cap_std::{ambient_authority, fs::Dir};
use cap_std_ext::dirext::CapStdExtDirExt;
use tracing::{info, warn};

use crate::host::systemd::{DbusSystemd, Systemd, SystemdError, UnitState};
use crate::os::{OsError, OsUpdater};

#[cfg(any(test, feature = "fakes"))]
pub use fake::{FakeLoginManager, FakeRebooter};
pub use logind::{DbusLoginManager, Inhibitor, LoginError, LoginManager};

/// Writes a staged deployment out at shutdown (ostree-boot).
pub const FINALIZE_STAGED_UNIT: &str = "ostree-finalize-staged.service";
/// Present (relative to the root) while ostree has a staged deployment.
pub const STAGED_DEPLOYMENT_MARKER: &str = "run/ostree/staged-deployment";
/// Present (relative to the root) while the staged deployment is finalization-locked.
pub const STAGED_LOCKED_MARKER: &str = "run/ostree/staged-deployment-locked";
/// Where the reason of the last requested reboot is recorded (relative to the root).
pub const REBOOT_REASON_FILE: &str = "run/mco-agent/reboot-reason";

#[async_trait]
pub trait Rebooter: Send + Sync {
    /// Reboots the host because of `reason`. Returns once the reboot is queued; the process
    /// is normally stopped by the shutdown soon after.
    async fn reboot(&self, reason: &str) -> Result<(), RebootError>;
}

#[derive(Debug, thiserror::Error)]
pub enum RebootError {
    #[error(
        "refusing to reboot: a staged deployment exists but {unit} cannot be found \
         (load state {load_state}); the deployment would be lost at shutdown"
    )]
    FinalizeServiceMissing {
        unit: &'static str,
        load_state: String,
    },
    #[error(
        "refusing to reboot: a staged deployment exists but {unit} is {state} after starting it; \
         the deployment would be lost at shutdown"
    )]
    FinalizeServiceInactive {
        unit: &'static str,
        state: UnitState,
    },
    #[error("refusing to reboot: could not make {unit} active for the staged deployment: {error}")]
    FinalizeService {
        unit: &'static str,
        error: SystemdError,
    },
    #[error("could not check for a staged deployment at {}: {error}", path.display())]
    StagedCheck { path: PathBuf, error: io::Error },
    #[error("refusing to reboot: shutdown is blocked by inhibitor lock(s) held by {holders}")]
    Blocked { holders: String },
    #[error("refusing to reboot: could not list logind's inhibitor locks: {0}")]
    ListInhibitors(LoginError),
    #[error("could not record the reboot reason in {}: {error}", path.display())]
    RecordReason { path: PathBuf, error: io::Error },
    #[error("reboot through logind failed: {0}")]
    Reboot(LoginError),
    #[error(
        "refusing to reboot: could not read rpm-ostree's deployments to find a staged one: {0}"
    )]
    OsStatus(Box<OsError>),
    #[error(
        "refusing to reboot: the staged deployment is finalization-locked ({}) and only \
         rpm-ostree's FinalizeDeployment releases it, but there is no connection to rpm-ostree; \
         a reboot through logind would drop it",
        path.display()
    )]
    LockedWithoutRpmOstree { path: PathBuf },
    #[error("releasing the staged deployment {checksum} with FinalizeDeployment failed: {error}")]
    Finalize {
        checksum: String,
        error: Box<OsError>,
    },
}

impl RebootError {
    /// Whether rpm-ostreed refused because it has queued a reboot already: the reboot is
    /// under way.
    pub fn reboot_queued(&self) -> bool {
        match self {
            RebootError::Finalize { error, .. } | RebootError::OsStatus(error) => {
                error.is_rebooting()
            }
            _ => false,
        }
    }
}

/// What is staged for the next boot.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Staged {
    Nothing,
    /// Finalized by `ostree-finalize-staged.service` at shutdown.
    Unlocked,
    /// Kept back at shutdown until `FinalizeDeployment` with this checksum releases it.
    Locked {
        checksum: String,
    },
}

/// Whether a staged deployment exists, or how to find out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StagedDeployment {
    /// Look for `/run/ostree/staged-deployment` under the root (the default).
    Detect,
    /// The caller knows (from rpm-ostree) that one is staged.
    Present,
    /// The caller knows that none is staged.
    Absent,
}

/// The real [`Rebooter`]: the checks above, then logind.
pub struct LogindRebooter {
    systemd: Arc<dyn Systemd>,
    login: Arc<dyn LoginManager>,
    os: Option<Arc<dyn OsUpdater>>,
    root: PathBuf,
    staged: StagedDeployment,
}

impl LogindRebooter {
    /// `root` is where `/run` is looked up (`/` on a live host, `/proc/<pid>/root` for a
    /// container).
    pub fn new(
        systemd: Arc<dyn Systemd>,
        login: Arc<dyn LoginManager>,
        root: impl Into<PathBuf>,
    ) -> Self {
        Self {
            systemd,
            login,
            os: None,
            root: root.into(),
            staged: StagedDeployment::Detect,
        }
    }

    /// Reads what is staged from rpm-ostree, and releases a finalization-locked staged
    /// deployment with `FinalizeDeployment` instead of rebooting through logind.
    pub fn with_os_updater(mut self, os: Arc<dyn OsUpdater>) -> Self {
        self.os = Some(os);
        self
    }

    /// systemd and logind on `conn`.
    pub fn on_connection(conn: zbus::Connection, root: impl Into<PathBuf>) -> Self {
        Self::new(
            Arc::new(DbusSystemd::new(conn.clone())),
            Arc::new(DbusLoginManager::new(conn)),
            root,
        )
    }

    pub fn with_staged_deployment(mut self, staged: StagedDeployment) -> Self {
        self.staged = staged;
        self
    }

    fn open_root(&self) -> io::Result<Dir> {
        Dir::open_ambient_dir(&self.root, ambient_authority())
    }

    /// What is staged: rpm-ostree's word when it is connected and reports a staged deployment,
    /// else ostree's run-state files under the root (or what the caller said).
    async fn staged(&self) -> Result<Staged, RebootError> {
        if let Some(os) = &self.os {
            let status = os
                .status()
                .await
                .map_err(|e| RebootError::OsStatus(Box::new(e)))?;
            if let Some(d) = status.staged() {
                return Ok(if d.finalization_locked {
                    Staged::Locked {
                        checksum: d.finalize_checksum().to_owned(),
                    }
                } else {
                    Staged::Unlocked
                });
            }
        }
        match self.staged {
            StagedDeployment::Present => Ok(Staged::Unlocked),
            StagedDeployment::Absent => Ok(Staged::Nothing),
            StagedDeployment::Detect => {
                if !self.marker_exists(STAGED_DEPLOYMENT_MARKER)? {
                    Ok(Staged::Nothing)
                } else if self.os.is_none() && self.marker_exists(STAGED_LOCKED_MARKER)? {
                    Err(RebootError::LockedWithoutRpmOstree {
                        path: self.root.join(STAGED_LOCKED_MARKER),
                    })
                } else {
                    Ok(Staged::Unlocked)
                }
            }
        }
    }

    fn marker_exists(&self, marker: &str) -> Result<bool, RebootError> {
        self.open_root()
            .and_then(|root| root.symlink_metadata_optional(marker))
            .map(|m| m.is_some())
            .map_err(|error| RebootError::StagedCheck {
                path: self.root.join(marker),
                error,
            })
    }

    /// Ensures `ostree-finalize-staged.service` is active, starting it if it is not.
    async fn ensure_finalize_active(&self) -> Result<(), RebootError> {
        let unit = FINALIZE_STAGED_UNIT;
        let wrap = |error| RebootError::FinalizeService { unit, error };
        let state = self.systemd.unit_active_state(unit).await.map_err(wrap)?;
        if !state.is_found() {
            return Err(RebootError::FinalizeServiceMissing {
                unit,
                load_state: state.load_state,
            });
        }
        if state.active_state.is_active() {
            info!(unit, "staged deployment: finalize service is active");
            return Ok(());
        }
        warn!(unit, state = %state, "staged deployment but the finalize service is not active: starting it");
        self.systemd.start_unit(unit).await.map_err(wrap)?;
        let state = self.systemd.unit_active_state(unit).await.map_err(wrap)?;
        if state.active_state.is_active() {
            info!(unit, "staged deployment: finalize service started");
            Ok(())
        } else {
            Err(RebootError::FinalizeServiceInactive { unit, state })
        }
    }

    /// Refuses when block locks on shutdown exist; logs delay locks, which logind honours.
    async fn check_inhibitors(&self) -> Result<(), RebootError> {
        let locks = self
            .login
            .list_inhibitors()
            .await
            .map_err(RebootError::ListInhibitors)?;
        let (block, delay): (Vec<_>, Vec<_>) = locks
            .into_iter()
            .filter(Inhibitor::inhibits_shutdown)
            .partition(Inhibitor::is_block);
        if !block.is_empty() {
            let holders = block
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            return Err(RebootError::Blocked { holders });
        }
        if !delay.is_empty() {
            let max_delay = match self.login.inhibit_delay_max().await {
                Ok(d) => humantime::format_duration(d).to_string(),
                Err(e) => format!("unknown ({e})"),
            };
            for lock in &delay {
                info!(who = %lock.who, why = %lock.why, pid = lock.pid, max_delay = %max_delay,
                    "a delay inhibitor lock holds the shutdown until released (logind waits at most max_delay)");
            }
        }
        Ok(())
    }

    fn record_reason(&self, reason: &str) -> Result<(), RebootError> {
        let wrap = |error| RebootError::RecordReason {
            path: self.root.join(REBOOT_REASON_FILE),
            error,
        };
        let root = self.open_root().map_err(wrap)?;
        let dir = Path::new(REBOOT_REASON_FILE)
            .parent()
            .unwrap_or(Path::new("run"));
        root.create_dir_all(dir).map_err(wrap)?;
        root.atomic_write(REBOOT_REASON_FILE, format!("{}\n", one_line(reason)))
            .map_err(wrap)
    }
}

/// The reason as one line: a reason is free text from callers, the file holds one line.
fn one_line(reason: &str) -> String {
    reason
        .split(['\n', '\r'])
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The reason recorded by the last reboot request under `root`, if any (it lives in `/run`,
/// so it survives only while the reboot has not happened).
pub fn recorded_reason(root: &Path) -> io::Result<Option<String>> {
    let root = Dir::open_ambient_dir(root, ambient_authority())?;
    match root.read_to_string(REBOOT_REASON_FILE) {
        Ok(s) => Ok(Some(s.trim_end().to_owned())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

#[async_trait]
impl Rebooter for LogindRebooter {
    async fn reboot(&self, reason: &str) -> Result<(), RebootError> {
        let staged = self.staged().await?;
        if staged != Staged::Nothing {
            self.ensure_finalize_active().await?;
        }
        self.check_inhibitors().await?;
        self.record_reason(reason)?;
        match (staged, &self.os) {
            (Staged::Locked { checksum }, Some(os)) => {
                info!(
                    reason,
                    checksum,
                    "releasing the finalization-locked staged deployment (FinalizeDeployment); rpm-ostree reboots"
                );
                os.finalize_deployment(&checksum)
                    .await
                    .map_err(|error| RebootError::Finalize {
                        checksum: checksum.clone(),
                        error: Box::new(error),
                    })?;
                info!(
                    checksum,
                    "staged deployment released, reboot queued by rpm-ostree"
                );
            }
            _ => {
                info!(reason, "initiating reboot through logind");
                self.login.reboot().await.map_err(RebootError::Reboot)?;
                info!("reboot queued");
            }
        }
        Ok(())
    }
}
