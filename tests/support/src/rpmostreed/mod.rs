//! An rpm-ostree stand-in: `org.projectatomic.rpmostree1` over a real ostree sysroot.
//!
//! rpm-ostree is not packaged for Debian, where the tests run. This daemon implements the part
//! of its D-Bus API the agent uses, as rpm-ostree's `src/daemon/org.projectatomic.rpmostree1.xml`
//! declares it (names, signatures, option keys, object paths, errors) and with rpm-ostreed's
//! transaction model (see [`txn`]):
//!
//! - `Sysroot` at `/org/projectatomic/rpmostree1/Sysroot`: `RegisterClient`, `UnregisterClient`,
//!   `Reload`, `ReloadConfig`, `GetOS`; properties `Booted`, `Path`, `ActiveTransaction`,
//!   `ActiveTransactionPath`, `AutomaticUpdatePolicy`, `Deployments`.
//! - `OS` at `/org/projectatomic/rpmostree1/<os>`: `KernelArgs`, `Rebase`, `UpdateDeployment`,
//!   `Cleanup`, `FinalizeDeployment`, `Rollback` (each returns a transaction address),
//!   `GetDeploymentBootConfig`; properties `BootedDeployment`, `DefaultDeployment`,
//!   `RollbackDeployment`, `Name`, `CachedUpdate`, `HasCachedUpdateRpmDiff`.
//! - One transaction at a time: a different call while one is active fails with rpm-ostreed's
//!   `Transaction in progress: <title>` (`G_IO_ERROR_BUSY`); the very same call joins it.
//! - uid 0 is authorised for everything; other users are refused (there is no polkit).
//!
//! Every change is a real libostree deployment: staged when the sysroot is booted (as on the
//! VM guest, where `ostree-finalize-staged.service` finalizes it at shutdown), otherwise written
//! as the new default. `Deployments` and `GetDeploymentBootConfig` are read from the sysroot.
//! Where rpm-ostree would need things these machines lack, the stand-in does this instead:
//! - container images: mapped to local commits ([`origin`] documents the `--image-map` file and
//!   the `mco-image/sha256/<digest>` refs); the origin records `container-image-reference`
//!   exactly as rpm-ostree does, and `Deployments` reports it (plus
//!   `container-image-reference-digest` when the reference is pinned by digest); a pull from a
//!   registry the test says needs credentials is refused unless `/run/ostree/auth.json` has
//!   some for it ([`auth`]);
//! - packages: no RPMs are installed; kernel-type overrides and extensions are recorded in the
//!   new deployment's origin (`[packages] requested=`, `[overrides] remove=`) and reported as
//!   `requested-packages`, `requested-base-removals` and `packages`;
//! - the old refspec is not purged after a rebase (`skip-purge` is always in effect);
//! - `lock-finalization` creates libostree's `/run/ostree/staged-deployment-locked` (2022.7 has
//!   no staging option for it), so `ostree admin finalize-staged` leaves the deployment out;
//!   `FinalizeDeployment` removes it, checking its `checksum` option against the staged
//!   deployment's commit as rpm-ostree checks the base commit (the stand-in never layers for
//!   real, so the commit is the base, for a container image too);
//! - reboots (`reboot` options, `FinalizeDeployment`) are requested from logind on the bus,
//!   after `Finished`;
//! - `Cleanup` on a sysroot that is not booted anchors "pending" and "rollback" at libostree's
//!   merge deployment instead of the (absent) booted one.

mod admin;
pub mod auth;
mod daemon;
pub mod error;
pub mod ops;
pub mod origin;
mod os_iface;
mod packages;
pub mod snapshot;
mod sysroot_iface;
pub mod txn;
mod worker;

pub use daemon::{BASE_PATH, BUS_NAME, Config, Daemon, SYSROOT_PATH, os_object_path};

use anyhow::{Context, Result};

/// Runs the stand-in on the system bus (`DBUS_SYSTEM_BUS_ADDRESS` is honoured) until SIGTERM
/// or SIGINT.
pub async fn run(config: Config) -> Result<()> {
    let conn = zbus::Connection::system()
        .await
        .context("connecting to the system bus")?;
    let daemon = Daemon::start(config, conn).await?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::select! {
        _ = term.recv() => {}
        r = tokio::signal::ctrl_c() => r.context("waiting for SIGINT")?,
    }
    tracing::info!("rpm-ostree stand-in exiting");
    daemon.shutdown().await;
    Ok(())
}
