//! The OS seam: kernel arguments, OS image, kernel type and extensions through rpm-ostree, and
//! the booted deployment as ostree sees it.
//!
//! - [`OsUpdater`]: what the agent asks of rpm-ostree. [`DbusOsUpdater`] speaks
//!   `org.projectatomic.rpmostree1` on the system bus (transactions over their peer-to-peer
//!   socket); `FakeOsUpdater` (feature `fakes`) is the in-memory stand-in for tests of callers.
//! - [`sysroot`]: the deployments read with libostree (booted checksum, origin, BLS kernel
//!   arguments, staged/pending/rollback) by the `mco-sysroot-status` helper, for
//!   `mco-agent status`; the agent itself does not link libostree.
//! - [`validate`]: the MCD's two OS checks and their messages.
//! - [`rpmdb`]: the booted OS's RPM database ([`InstalledPackages`], `rpm -q`), where the
//!   extension packages are verified after a reboot; [`host_os`]: which OS the root runs.
//!
//! Typical use, in the MCD's order (clean up a pending deployment, rebase, then kernel
//! arguments; upstream `pkg/daemon/update.go`):
//! ```no_run
//! # use mco_agent::os::*;
//! # async fn f(plan_kargs_argv: &[String], image: &str) -> Result<(), OsError> {
//! let os = DbusOsUpdater::connect(ClientConfig::default()).await?;
//! os.resume().await?; // a transaction a previous run left going
//! os.cleanup(&[CleanupTarget::Pending]).await?;
//! os.rebase(&OsImage::Registry(image.into())).await?;
//! os.kernel_args(None, &KargsChange::from_argv(plan_kargs_argv)?).await?;
//! let staged = os.status().await?;
//! # let _ = staged; os.close().await
//! # }
//! ```

pub mod dbus;
mod error;
#[cfg(any(test, feature = "fakes"))]
pub mod fake;
pub mod host_os;
mod kargs;
mod packages;
pub mod pull_secret;
pub mod rpmdb;
pub mod sysroot;
pub mod tuning;
mod types;
pub mod validate;

use async_trait::async_trait;

pub use dbus::{Backoff, ClientConfig, DbusOsUpdater};
pub use error::{GIO_ERROR_BUSY, OsError};
#[cfg(any(test, feature = "fakes"))]
pub use fake::{FakeOsUpdater, OsCall};
pub use kargs::KargsChange;
pub use packages::PackageChange;
pub use pull_secret::{PullSecret, arrange_pull_secret};
#[cfg(any(test, feature = "fakes"))]
pub use rpmdb::FakeInstalledPackages;
pub use rpmdb::{InstalledPackages, RpmQuery, verify_extensions};
pub use sysroot::{SysrootReader, SysrootState};
pub use types::{
    BootConfig, CleanupTarget, Deployment, KargsTarget, OsImage, OsStatus, TransactionOutcome,
};
pub use validate::{OsMismatch, check_kernel_args, check_os_image};

/// What the agent asks of rpm-ostree. Every change is one rpm-ostree transaction that stages a
/// new deployment (on a booted system; it is written as the new default otherwise); it takes
/// effect at the next boot.
#[async_trait]
pub trait OsUpdater: Send + Sync {
    /// All deployments in boot order, each with its kernel arguments.
    async fn status(&self) -> Result<OsStatus, OsError>;

    /// One deployment's kernel arguments (`GetDeploymentBootConfig`).
    async fn kargs(&self, target: KargsTarget) -> Result<BootConfig, OsError>;

    /// Changes the kernel arguments of the next boot. `change` carries the plan's
    /// `rpm-ostree kargs` argv ([`KargsChange::from_argv`]). rpm-ostree computes the new
    /// arguments from the existing string the client sends: with `existing` = `None` the
    /// current pending arguments are read right before the call; with `Some(s)` the call is
    /// refused with [`OsError::KargsConflict`] if they are no longer `s`. An empty change does
    /// nothing.
    async fn kernel_args(
        &self,
        existing: Option<&str>,
        change: &KargsChange,
    ) -> Result<TransactionOutcome, OsError>;

    /// Rebases to an OS image; nothing to do when the next boot already runs it.
    async fn rebase(&self, image: &OsImage) -> Result<TransactionOutcome, OsError>;

    /// Layers/removes packages and base-package overrides (kernel type, extensions), without
    /// pulling a newer base.
    async fn update_deployment(
        &self,
        change: &PackageChange,
    ) -> Result<TransactionOutcome, OsError>;

    /// Removes pending/rollback deployments and the like (`rpm-ostree cleanup -p/-r/-b/-m`).
    async fn cleanup(&self, targets: &[CleanupTarget]) -> Result<TransactionOutcome, OsError>;

    /// Releases a staged deployment made with `lock-finalization` whose base is `checksum`;
    /// rpm-ostree then reboots the machine.
    async fn finalize_deployment(&self, checksum: &str) -> Result<TransactionOutcome, OsError>;

    /// `rpm-ostree rollback` without rebooting: the rollback deployment (the one after the
    /// booted one) becomes the default, so the next boot runs it; with no rollback deployment
    /// but a pending one, the booted deployment goes back on top. A staged deployment is
    /// dropped. Calling it twice swaps back: callers check the default deployment first.
    async fn rollback(&self) -> Result<TransactionOutcome, OsError>;

    /// Waits for a transaction that is already running (e.g. started before this process
    /// restarted); `None` when there is none.
    async fn resume(&self) -> Result<Option<TransactionOutcome>, OsError>;
}
