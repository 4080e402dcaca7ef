//! The deployments of an ostree sysroot, read with libostree by the helper executable
//! `mco-sysroot-status` (crate `sysroot-status`), which prints them as JSON.
//!
//! Why a separate process: libostree brings some sixty shared libraries (glib, gio, gpgme,
//! curl, krb5, icu, ...) that the dynamic loader would map and relocate at every start of
//! `mco-agent`, and whose touched pages would stay resident in the idle daemon; only
//! `mco-agent status` reads a sysroot (docs/benchmarks.md). The helper is looked up by
//! [`SysrootReader::locate`]; whatever goes wrong with it (missing, failing, hanging, printing
//! nonsense) is an [`OsError::Sysroot`] naming the sysroot, as a libostree error is.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use super::error::OsError;
use super::types::{Deployment, OsStatus};

/// The helper's file name.
pub const SYSROOT_READER_NAME: &str = "mco-sysroot-status";

/// Where the package installs the helper.
pub const SYSROOT_READER_PATH: &str = "/usr/libexec/mco-sysroot-status";

/// The environment variable naming another helper (tests, a non-standard install).
pub const SYSROOT_READER_ENV: &str = "MCO_SYSROOT_STATUS_BIN";

/// How long the helper may take: loading a sysroot reads a few small files per deployment.
pub const SYSROOT_READER_TIMEOUT: Duration = Duration::from_secs(10);

/// The sysroot's deployments, in boot order, with their kernel arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysrootState {
    pub path: PathBuf,
    pub status: OsStatus,
}

impl SysrootState {
    /// The booted deployment (none when the sysroot is not the running system's).
    pub fn booted(&self) -> Option<&Deployment> {
        self.status.booted()
    }

    pub fn staged(&self) -> Option<&Deployment> {
        self.status.staged()
    }

    /// See [`OsStatus::pending`].
    pub fn pending(&self) -> Option<&Deployment> {
        self.status.pending()
    }

    /// The deployment after the booted one (after the default one when not booted).
    pub fn rollback(&self) -> Option<&Deployment> {
        let anchor = self.status.booted_or_default()?;
        let pos = self
            .status
            .deployments
            .iter()
            .position(|d| d.id == anchor.id)?;
        self.status
            .deployments
            .iter()
            .skip(pos + 1)
            .find(|d| d.osname == anchor.osname)
    }

    /// See [`OsStatus::booted_or_default`].
    pub fn booted_or_default(&self) -> Option<&Deployment> {
        self.status.booted_or_default()
    }
}

/// Runs the `mco-sysroot-status` helper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysrootReader {
    program: PathBuf,
    timeout: Duration,
}

impl SysrootReader {
    /// The helper at `program`, with the default timeout.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        SysrootReader {
            program: program.into(),
            timeout: SYSROOT_READER_TIMEOUT,
        }
    }

    /// The helper named by `$MCO_SYSROOT_STATUS_BIN`; else the one next to the running
    /// executable (a cargo build: `target/<profile>/`) or in `../libexec/` from it (an install
    /// under a prefix, e.g. `/usr/local`); else [`SYSROOT_READER_PATH`] (whose absence is then
    /// the error).
    pub fn locate() -> Self {
        if let Some(p) = std::env::var_os(SYSROOT_READER_ENV).filter(|p| !p.is_empty()) {
            return Self::new(p);
        }
        let beside = std::env::current_exe().ok().and_then(|exe| {
            let dir = exe.parent()?.to_path_buf();
            [
                dir.join(SYSROOT_READER_NAME),
                dir.join("../libexec").join(SYSROOT_READER_NAME),
            ]
            .into_iter()
            .find(|p| p.is_file())
        });
        Self::new(beside.unwrap_or_else(|| PathBuf::from(SYSROOT_READER_PATH)))
    }

    /// The same helper with another time limit.
    pub fn with_timeout(self, timeout: Duration) -> Self {
        SysrootReader { timeout, ..self }
    }

    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The deployments of the sysroot at `path`. The helper is killed when it overruns the
    /// timeout or when this future is dropped.
    pub async fn read(&self, path: &Path) -> Result<SysrootState, OsError> {
        let err = |message: String| OsError::Sysroot {
            path: path.to_path_buf(),
            message,
        };
        let program = self.program.display();
        let child = tokio::process::Command::new(&self.program)
            .arg(path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                let e = crate::rootfs::go_error_text(&e);
                err(format!("running the sysroot reader {program}: {e}"))
            })?;
        let out = tokio::time::timeout(self.timeout, child.wait_with_output())
            .await
            .map_err(|_| {
                err(format!(
                    "the sysroot reader {program} did not finish within {:?} (killed)",
                    self.timeout
                ))
            })?
            .map_err(|e| err(format!("waiting for the sysroot reader {program}: {e}")))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let stderr = stderr.trim();
            // The helper's own message already names the sysroot, as this error does.
            let prefix = format!("ostree sysroot {}: ", path.display());
            return Err(err(match stderr.strip_prefix(&prefix) {
                Some(message) if !message.contains('\n') => message.to_string(),
                _ if stderr.is_empty() => {
                    format!("the sysroot reader {program} failed ({})", out.status)
                }
                _ => format!(
                    "the sysroot reader {program} failed ({}): {stderr}",
                    out.status
                ),
            }));
        }
        let status: OsStatus = serde_json::from_slice(&out.stdout).map_err(|e| {
            err(format!(
                "the sysroot reader {program} printed no deployments JSON: {e}"
            ))
        })?;
        Ok(SysrootState {
            path: path.to_path_buf(),
            status,
        })
    }
}

#[cfg(test)]
#[path = "sysroot_tests.rs"]
mod tests;
