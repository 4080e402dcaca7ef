//! The `Systemd` seam: unit files, daemon-reload and unit jobs through
//! `org.freedesktop.systemd1.Manager`.
//!
//! [`DbusSystemd`] talks to the real manager over the system bus; `FakeSystemd` (feature
//! `fakes`) keeps unit states in memory and records calls, for tests of callers.

mod dbus;
mod enablement;
#[cfg(any(test, feature = "fakes"))]
mod fake;

use std::fmt;

use async_trait::async_trait;

pub use dbus::DbusSystemd;
#[cfg(any(test, feature = "fakes"))]
pub use fake::{FakeSystemd, SystemdCall};

/// One change systemd reports for an enable/disable/mask/unmask/preset call
/// (the `a(sss)` of the D-Bus reply): what it did, to which path, and the link target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitFileChange {
    /// `symlink`, `unlink`, ...
    pub kind: String,
    /// The symlink or file that changed.
    pub path: String,
    /// What a new symlink points to (empty for `unlink`).
    pub source: String,
}

impl fmt::Display for UnitFileChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.source.is_empty() {
            write!(f, "{} {}", self.kind, self.path)
        } else {
            write!(f, "{} {} -> {}", self.kind, self.path, self.source)
        }
    }
}

/// A unit's `ActiveState` property.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActiveState {
    Active,
    Reloading,
    Inactive,
    Failed,
    Activating,
    Deactivating,
    Maintenance,
    Refreshing,
    /// A state this code does not know (newer systemd).
    Other(String),
}

impl ActiveState {
    pub fn parse(s: &str) -> Self {
        match s {
            "active" => Self::Active,
            "reloading" => Self::Reloading,
            "inactive" => Self::Inactive,
            "failed" => Self::Failed,
            "activating" => Self::Activating,
            "deactivating" => Self::Deactivating,
            "maintenance" => Self::Maintenance,
            "refreshing" => Self::Refreshing,
            other => Self::Other(other.to_owned()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::Active => "active",
            Self::Reloading => "reloading",
            Self::Inactive => "inactive",
            Self::Failed => "failed",
            Self::Activating => "activating",
            Self::Deactivating => "deactivating",
            Self::Maintenance => "maintenance",
            Self::Refreshing => "refreshing",
            Self::Other(s) => s,
        }
    }

    /// Up and running (`active`, or `reloading`, which is active too).
    pub fn is_active(&self) -> bool {
        matches!(self, Self::Active | Self::Reloading)
    }
}

impl fmt::Display for ActiveState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a unit stands: `LoadState`, `ActiveState` and `SubState`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitState {
    /// `loaded`, `not-found`, `masked`, `error`, ...
    pub load_state: String,
    pub active_state: ActiveState,
    /// Type-specific detail: `running`, `exited`, `dead`, ...
    pub sub_state: String,
}

impl UnitState {
    /// The unit file exists (systemd could load the unit).
    pub fn is_found(&self) -> bool {
        self.load_state != "not-found"
    }
}

impl fmt::Display for UnitState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}, load state {})",
            self.active_state, self.sub_state, self.load_state
        )
    }
}

/// The kind of job a call queued, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    Start,
    Restart,
    Reload,
}

impl JobKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::Restart => "restart",
            Self::Reload => "reload",
        }
    }
}

impl fmt::Display for JobKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SystemdError {
    /// A D-Bus call failed (the manager refused it, or the bus is gone).
    #[error("systemd {method} for {target} failed: {message}")]
    Call {
        method: &'static str,
        /// The unit(s) the call was about, or `the manager`.
        target: String,
        /// The D-Bus error name when systemd replied with one
        /// (`org.freedesktop.systemd1.NoSuchUnit`, ...).
        dbus_name: Option<String>,
        message: String,
    },
    /// The job ran and ended with a result other than `done`.
    #[error("{kind} of {unit} ended with result '{result}'")]
    JobFailed {
        kind: JobKind,
        unit: String,
        /// `failed`, `timeout`, `canceled`, `dependency`, `skipped`, ...
        result: String,
    },
    /// No `JobRemoved` arrived for the job in time.
    #[error("{kind} of {unit} did not finish within {timeout:?} (job {job})")]
    JobTimeout {
        kind: JobKind,
        unit: String,
        job: String,
        timeout: std::time::Duration,
    },
    /// The connection to the bus ended while a job was pending.
    #[error("lost the connection to systemd while waiting for the {kind} of {unit}")]
    JobSignalLost { kind: JobKind, unit: String },
}

impl SystemdError {
    /// The D-Bus error name systemd replied with, if any.
    pub fn dbus_name(&self) -> Option<&str> {
        match self {
            Self::Call { dbus_name, .. } => dbus_name.as_deref(),
            _ => None,
        }
    }
}

/// The operations the agent needs from systemd's manager.
///
/// Unit-file calls act on the persistent configuration (`runtime = false`) and return the
/// changes systemd made. Job calls (`start_unit`, `restart_unit`, `reload_unit`) queue a job in
/// mode `replace` and return only once it has finished; a result other than `done` is a
/// [`SystemdError::JobFailed`] naming the unit and the result.
#[async_trait]
pub trait Systemd: Send + Sync {
    /// `systemctl daemon-reload`: returns once the manager has reloaded.
    async fn daemon_reload(&self) -> Result<(), SystemdError>;
    /// `systemctl enable`; replaces conflicting symlinks (force), since the config must win.
    async fn enable_unit_files(&self, units: &[&str]) -> Result<Vec<UnitFileChange>, SystemdError>;
    async fn disable_unit_files(&self, units: &[&str])
    -> Result<Vec<UnitFileChange>, SystemdError>;
    /// `systemctl mask`; replaces existing symlinks (force).
    async fn mask_unit_files(&self, units: &[&str]) -> Result<Vec<UnitFileChange>, SystemdError>;
    async fn unmask_unit_files(&self, units: &[&str]) -> Result<Vec<UnitFileChange>, SystemdError>;
    /// `systemctl preset`: the distribution's policy, without forcing over existing links.
    async fn preset_unit_files(&self, units: &[&str]) -> Result<Vec<UnitFileChange>, SystemdError>;
    /// `GetUnitFileState`: `enabled`, `disabled`, `static`, `masked`, ...
    async fn unit_file_state(&self, unit: &str) -> Result<String, SystemdError>;
    async fn start_unit(&self, unit: &str) -> Result<(), SystemdError>;
    async fn restart_unit(&self, unit: &str) -> Result<(), SystemdError>;
    async fn reload_unit(&self, unit: &str) -> Result<(), SystemdError>;
    /// Load, active and sub state of a unit (loading it if systemd has not yet).
    async fn unit_active_state(&self, unit: &str) -> Result<UnitState, SystemdError>;
}
