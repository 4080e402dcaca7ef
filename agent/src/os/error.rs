//! Errors of the OS seam. Each names the rpm-ostree method (or the sysroot) and carries
//! rpm-ostree's own message.

use std::path::PathBuf;
use std::time::Duration;

/// GDBus' name for `G_IO_ERROR_BUSY`, which rpm-ostreed uses for "Transaction in progress".
pub const GIO_ERROR_BUSY: &str =
    "org.gtk.GDBus.UnmappedGError.Quark._g_2dio_2derror_2dquark.Code26";

#[derive(Debug, thiserror::Error)]
pub enum OsError {
    /// (The bus' error is said in the text, not returned as `source()`: a chain says it once.)
    #[error("connecting to rpm-ostree on the system bus: {0}")]
    Connect(zbus::Error),

    /// The method call itself failed (rpm-ostreed refused it).
    #[error("rpm-ostree {method} failed: {message}")]
    Call {
        method: String,
        /// The D-Bus error name, when there is one.
        name: Option<String>,
        message: String,
    },

    /// The transaction ran and reported `Finished(false, message)`.
    #[error("rpm-ostree {method} transaction failed: {message}")]
    Transaction { method: String, message: String },

    /// Another transaction kept running for longer than we wait.
    #[error(
        "rpm-ostree {method}: another transaction is still in progress after {waited:?}: {message}"
    )]
    Busy {
        method: String,
        waited: Duration,
        message: String,
    },

    /// The transaction's peer-to-peer connection failed or closed before `Finished`.
    #[error("rpm-ostree {method} transaction at {address}: {message}")]
    TransactionConnection {
        method: String,
        address: String,
        message: String,
    },

    #[error("rpm-ostree {method}: no Finished signal within {timeout:?}")]
    Timeout { method: String, timeout: Duration },

    /// rpm-ostree answered with something we cannot read.
    #[error("rpm-ostree {what}: {message}")]
    Protocol { what: String, message: String },

    /// The kernel arguments are no longer the ones the change was computed against.
    #[error(
        "kernel arguments changed since the change was planned: expected {expected:?}, found {found:?}"
    )]
    KargsConflict { expected: String, found: String },

    #[error("invalid rpm-ostree kargs argument {arg:?}: {reason}")]
    InvalidKargsArg { arg: String, reason: String },

    #[error("unknown kernel type {0:?} (expected default, realtime or 64k-pages)")]
    InvalidKernelType(String),

    #[error("ostree sysroot {}: {message}", path.display())]
    Sysroot { path: PathBuf, message: String },
}

impl OsError {
    /// Wraps a failed D-Bus call to `method`.
    pub fn call(method: &str, e: zbus::Error) -> Self {
        match e {
            zbus::Error::MethodError(name, msg, _) => OsError::Call {
                method: method.to_string(),
                name: Some(name.to_string()),
                message: msg.unwrap_or_default(),
            },
            zbus::Error::FDO(fdo) => OsError::Call {
                method: method.to_string(),
                name: None,
                message: fdo.to_string(),
            },
            zbus::Error::InputOutput(io) if io.kind() == std::io::ErrorKind::TimedOut => {
                OsError::Call {
                    method: method.to_string(),
                    name: None,
                    // the connection's own timeout (the agent's: `system_bus::CALL_TIMEOUT`)
                    message: "no answer before the D-Bus call timed out (is rpm-ostreed hung?)"
                        .to_string(),
                }
            }
            other => OsError::Call {
                method: method.to_string(),
                name: None,
                message: other.to_string(),
            },
        }
    }

    /// True for rpm-ostreed's "Transaction in progress" (another client's transaction, or the
    /// sysroot locked by another process): worth retrying, not fatal.
    pub fn is_busy(&self) -> bool {
        match self {
            OsError::Call { name, message, .. } => {
                name.as_deref() == Some(GIO_ERROR_BUSY)
                    || message
                        .to_ascii_lowercase()
                        .contains("transaction in progress")
            }
            _ => false,
        }
    }
}

/// What rpm-ostreed answers to a new transaction once it has queued a reboot (after a
/// `FinalizeDeployment`, or a `--reboot` transaction of another client).
pub const REBOOT_INITIATED: &str = "Reboot initiated, cannot start new transaction";

impl OsError {
    /// True when rpm-ostreed refused the call because it is rebooting the node: the reboot is
    /// under way, and nothing new should start before it.
    pub fn is_rebooting(&self) -> bool {
        matches!(self, OsError::Call { message, .. } if message.contains(REBOOT_INITIATED))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reboot_under_way_is_recognised() {
        let rebooting = OsError::Call {
            method: "UpdateDeployment".into(),
            name: Some("org.projectatomic.rpmostreed.Error.Failed".into()),
            message: REBOOT_INITIATED.into(),
        };
        assert!(rebooting.is_rebooting());
        assert!(!rebooting.is_busy());
        let failed = OsError::Transaction {
            method: "Rebase".into(),
            message: "manifest unknown".into(),
        };
        assert!(!failed.is_rebooting());
    }

    #[test]
    fn a_call_nobody_answers_names_the_method() {
        let timed_out = zbus::Error::InputOutput(std::sync::Arc::new(std::io::Error::from(
            std::io::ErrorKind::TimedOut,
        )));
        let err = OsError::call("KernelArgs", timed_out);
        assert_eq!(
            err.to_string(),
            "rpm-ostree KernelArgs failed: no answer before the D-Bus call timed out (is rpm-ostreed \
             hung?)"
        );
        assert!(!err.is_busy());
    }

    #[test]
    fn busy_is_recognised_by_name_or_message() {
        let busy = OsError::Call {
            method: "KernelArgs".into(),
            name: Some(GIO_ERROR_BUSY.into()),
            message: "Transaction in progress: rebase\n You can cancel...".into(),
        };
        assert!(busy.is_busy());
        let locked = OsError::Call {
            method: "Rebase".into(),
            name: Some("org.projectatomic.rpmostreed.Error.Failed".into()),
            message: "System transaction in progress".into(),
        };
        assert!(locked.is_busy());
        let other = OsError::Call {
            method: "Rebase".into(),
            name: Some("org.freedesktop.DBus.Error.AccessDenied".into()),
            message: "rpmostreed OS operation Rebase not allowed for user".into(),
        };
        assert!(!other.is_busy());
        assert_eq!(
            other.to_string(),
            "rpm-ostree Rebase failed: rpmostreed OS operation Rebase not allowed for user"
        );
        let failed = OsError::Transaction {
            method: "Rebase".into(),
            message: "manifest unknown".into(),
        };
        assert!(!failed.is_busy());
        assert_eq!(
            failed.to_string(),
            "rpm-ostree Rebase transaction failed: manifest unknown"
        );
    }
}
