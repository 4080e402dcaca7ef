//! [`DbusOsUpdater`]: the [`OsUpdater`] that talks to rpm-ostreed on the system bus.
//!
//! On creation it registers with `Sysroot.RegisterClient({"id": <client id>})` and it
//! unregisters on [`DbusOsUpdater::close`] (or, best effort, on drop). Each change is one
//! rpm-ostree transaction (see [`transaction`]); afterwards it calls `Sysroot.Reload()` so the
//! properties read next reflect the change, as rpm-ostree's own client does. A refusal with
//! "Transaction in progress" is retried with exponential backoff up to a deadline. A client that
//! restarted finds a transaction it (or anyone) started through `ActiveTransactionPath` and
//! waits for it with [`OsUpdater::resume`].

mod config;
mod parse;
pub mod proxies;
mod request;
mod status_json;
pub mod transaction;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use async_trait::async_trait;
use zbus::Connection;
use zbus::proxy::CacheProperties;
use zbus::zvariant::{OwnedObjectPath, Value};

pub use self::config::{Backoff, ClientConfig};
use self::proxies::{Options, OsProxy, SysrootProxy};
use self::request::Request;
use super::OsUpdater;
use super::error::OsError;
use super::types::{BootConfig, CleanupTarget, KargsTarget, OsImage, OsStatus, TransactionOutcome};
use super::{KargsChange, PackageChange};

/// rpm-ostree over D-Bus.
pub struct DbusOsUpdater {
    sysroot: SysrootProxy<'static>,
    config: ClientConfig,
    os_path: tokio::sync::OnceCell<OwnedObjectPath>,
    registered: AtomicBool,
}

impl DbusOsUpdater {
    /// Connects to the system bus (`DBUS_SYSTEM_BUS_ADDRESS` is honoured) and registers.
    pub async fn connect(config: ClientConfig) -> Result<Self, OsError> {
        let conn = crate::system_bus::connect()
            .await
            .map_err(OsError::Connect)?;
        Self::new(&conn, config).await
    }

    /// Registers on an existing bus connection.
    pub async fn new(conn: &Connection, config: ClientConfig) -> Result<Self, OsError> {
        let sysroot = SysrootProxy::builder(conn)
            .cache_properties(CacheProperties::No)
            .build()
            .await
            .map_err(OsError::Connect)?;
        let options = Options::from([("id", Value::from(config.client_id.as_str()))]);
        sysroot
            .register_client(options)
            .await
            .map_err(|e| OsError::call("RegisterClient", e))?;
        Ok(DbusOsUpdater {
            sysroot,
            config,
            os_path: tokio::sync::OnceCell::new(),
            registered: AtomicBool::new(true),
        })
    }

    /// Unregisters (`UnregisterClient`).
    pub async fn close(&self) -> Result<(), OsError> {
        if self.registered.swap(false, Ordering::SeqCst) {
            self.sysroot
                .unregister_client(Options::new())
                .await
                .map_err(|e| OsError::call("UnregisterClient", e))?;
        }
        Ok(())
    }

    /// The OS object to act on.
    async fn os(&self) -> Result<OsProxy<'static>, OsError> {
        let path = self
            .os_path
            .get_or_try_init(|| async {
                if let Some(name) = &self.config.osname {
                    return self
                        .sysroot
                        .get_os(name)
                        .await
                        .map_err(|e| OsError::call("GetOS", e));
                }
                let booted = self
                    .sysroot
                    .booted()
                    .await
                    .map_err(|e| OsError::call("Booted", e))?;
                if booted.as_str() != "/" {
                    return Ok(booted);
                }
                // Not booted (a test or offline sysroot): the OS of the first deployment.
                let status = self.status_without_kargs().await?;
                let first = status
                    .deployments
                    .first()
                    .ok_or_else(|| OsError::Protocol {
                        what: "Deployments".into(),
                        message: "the sysroot is not booted and has no deployments".into(),
                    })?;
                self.sysroot
                    .get_os(&first.osname)
                    .await
                    .map_err(|e| OsError::call("GetOS", e))
            })
            .await?;
        OsProxy::builder(self.sysroot.inner().connection())
            .path(path.clone())
            .map_err(|e| OsError::call("OS", e))?
            .cache_properties(CacheProperties::No)
            .build()
            .await
            .map_err(|e| OsError::call("OS", e))
    }

    async fn status_without_kargs(&self) -> Result<OsStatus, OsError> {
        let raw = self
            .sysroot
            .deployments()
            .await
            .map_err(|e| OsError::call("Deployments", e))?;
        Ok(OsStatus {
            deployments: raw
                .iter()
                .map(parse::deployment)
                .collect::<Result<_, _>>()?,
        })
    }

    /// Calls a transaction-creating method until it is not refused as busy, then follows the
    /// transaction to its end and reloads.
    async fn transact(
        &self,
        os: &OsProxy<'_>,
        request: Request<'_>,
    ) -> Result<TransactionOutcome, OsError> {
        let method = request.method(self.config.lock_finalization);
        let begun = Instant::now();
        let mut delays = self.config.busy_retry.delays();
        let address = loop {
            match self.call_once(os, &request).await {
                Ok(a) => break a,
                Err(e) if e.is_busy() => match delays.next() {
                    Some(d) => {
                        tracing::warn!(method, retry_in = ?d, "rpm-ostree is busy, retrying: {e}");
                        tokio::time::sleep(d).await;
                    }
                    None => {
                        return Err(OsError::Busy {
                            method: method.to_string(),
                            waited: begun.elapsed(),
                            message: e.to_string(),
                        });
                    }
                },
                Err(e) => return Err(e),
            }
        };
        self.follow(method, &address).await
    }

    /// Follows the transaction at `address` to its end, then reloads.
    async fn follow(&self, method: &str, address: &str) -> Result<TransactionOutcome, OsError> {
        let conn = transaction::connect(method, address).await?;
        let result =
            transaction::run(method, address, &conn, self.config.transaction_timeout).await;
        let _ = conn.close().await;
        if let Err(e) = self.sysroot.reload().await {
            tracing::warn!(
                method,
                "rpm-ostree Reload after the transaction failed: {e}"
            );
        }
        result
    }

    pub(super) fn command_line(&self, what: &str) -> Value<'static> {
        Value::from(format!("{} {what}", self.config.client_id))
    }
}

impl Drop for DbusOsUpdater {
    fn drop(&mut self) {
        if self.registered.swap(false, Ordering::SeqCst)
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            let sysroot = self.sysroot.clone();
            rt.spawn(async move {
                let _ = sysroot.unregister_client(Options::new()).await;
            });
        }
    }
}

#[async_trait]
impl OsUpdater for DbusOsUpdater {
    async fn status(&self) -> Result<OsStatus, OsError> {
        let mut status = self.status_without_kargs().await?;
        if status.deployments.is_empty() {
            return Ok(status);
        }
        let os = self.os().await?;
        for (i, d) in status.deployments.iter_mut().enumerate() {
            let bc = os
                .get_deployment_boot_config(&i.to_string(), false)
                .await
                .map_err(|e| OsError::call("GetDeploymentBootConfig", e))?;
            d.kargs = Some(parse::boot_config(&bc)?.options);
        }
        Ok(status)
    }

    async fn kargs(&self, target: KargsTarget) -> Result<BootConfig, OsError> {
        let os = self.os().await?;
        let (id, pending) = match target {
            KargsTarget::Pending => (String::new(), true),
            KargsTarget::Booted => (String::new(), false),
            KargsTarget::Index(i) => (i.to_string(), false),
        };
        let bc = os
            .get_deployment_boot_config(&id, pending)
            .await
            .map_err(|e| OsError::call("GetDeploymentBootConfig", e))?;
        parse::boot_config(&bc)
    }

    async fn kernel_args(
        &self,
        existing: Option<&str>,
        change: &KargsChange,
    ) -> Result<TransactionOutcome, OsError> {
        if change.is_empty() {
            return Ok(TransactionOutcome::nothing_to_do(
                "KernelArgs",
                "no kernel argument changes",
            ));
        }
        let os = self.os().await?;
        self.transact(&os, Request::KernelArgs { existing, change })
            .await
    }

    async fn rebase(&self, image: &OsImage) -> Result<TransactionOutcome, OsError> {
        let refspec = image.refspec();
        let os = self.os().await?;
        let osname = os.name().await.map_err(|e| OsError::call("Name", e))?;
        // rpm-ostree refuses a rebase to the reference it already follows; the next boot
        // already runs this image, so there is nothing to do.
        let status = self.status_without_kargs().await?;
        if let Some(next) = status.deployments.iter().find(|d| d.osname == osname)
            && next.image_url().as_deref() == Some(image.image())
        {
            tracing::info!(image = image.image(), "the OS image is already deployed");
            return Ok(TransactionOutcome::nothing_to_do(
                "Rebase",
                "already on this image",
            ));
        }
        self.transact(&os, Request::Rebase { refspec: &refspec })
            .await
    }

    async fn update_deployment(
        &self,
        change: &PackageChange,
    ) -> Result<TransactionOutcome, OsError> {
        if change.is_empty() {
            return Ok(TransactionOutcome::nothing_to_do(
                "UpdateDeployment",
                "no package changes",
            ));
        }
        let os = self.os().await?;
        self.transact(&os, Request::Packages(change)).await
    }

    async fn cleanup(&self, targets: &[CleanupTarget]) -> Result<TransactionOutcome, OsError> {
        if targets.is_empty() {
            return Ok(TransactionOutcome::nothing_to_do(
                "Cleanup",
                "nothing to clean",
            ));
        }
        let os = self.os().await?;
        let elements: Vec<&str> = targets.iter().map(|t| t.as_str()).collect();
        self.transact(&os, Request::Cleanup(elements)).await
    }

    async fn finalize_deployment(&self, checksum: &str) -> Result<TransactionOutcome, OsError> {
        let os = self.os().await?;
        self.transact(&os, Request::Finalize { checksum }).await
    }

    async fn rollback(&self) -> Result<TransactionOutcome, OsError> {
        let os = self.os().await?;
        self.transact(&os, Request::Rollback).await
    }

    async fn resume(&self) -> Result<Option<TransactionOutcome>, OsError> {
        let address = self
            .sysroot
            .active_transaction_path()
            .await
            .map_err(|e| OsError::call("ActiveTransactionPath", e))?;
        if address.is_empty() {
            return Ok(None);
        }
        let (method, sender, _) = self
            .sysroot
            .active_transaction()
            .await
            .map_err(|e| OsError::call("ActiveTransaction", e))?;
        let method = if method.is_empty() {
            "transaction".to_string()
        } else {
            method
        };
        tracing::info!(method, started_by = %sender, "re-attaching to the active rpm-ostree transaction");
        match self.follow(&method, &address).await {
            Ok(o) => Ok(Some(o)),
            Err(e @ OsError::TransactionConnection { .. }) => {
                // It may have closed in the meantime.
                let now = self
                    .sysroot
                    .active_transaction_path()
                    .await
                    .unwrap_or_default();
                if now.is_empty() { Ok(None) } else { Err(e) }
            }
            Err(e) => Err(e),
        }
    }
}
