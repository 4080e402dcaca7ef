//! [`DbusOsUpdater`]: the [`OsUpdater`] that talks to rpm-ostreed on the system bus.
//!
//! On creation it registers with `Sysroot.RegisterClient({"id": <client id>})` and it
//! unregisters on [`DbusOsUpdater::close`] (or, best effort, on drop). Each change is one
//! rpm-ostree transaction (see [`transaction`]); afterwards it calls `Sysroot.Reload()` so the
//! properties read next reflect the change, as rpm-ostree's own client does. A refusal with
//! "Transaction in progress" is retried with exponential backoff up to a deadline. A client that
//! restarted finds a transaction it (or anyone) started through `ActiveTransactionPath` and
//! waits for it with [`OsUpdater::resume`].

mod parse;
pub mod proxies;
pub mod transaction;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use zbus::Connection;
use zbus::proxy::CacheProperties;
use zbus::zvariant::{OwnedObjectPath, Value};

use self::proxies::{Options, OsProxy, SysrootProxy};
use super::OsUpdater;
use super::error::OsError;
use super::types::{
    BootConfig, CleanupTarget, KargsChange, KargsTarget, OsImage, OsStatus, PackageChange,
    TransactionOutcome,
};

/// How long to keep retrying while another transaction runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
    pub give_up_after: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(30),
            give_up_after: Duration::from_secs(30 * 60),
        }
    }
}

impl Backoff {
    /// The waits between attempts, doubling up to `max`, until `give_up_after` is spent.
    pub fn delays(&self) -> impl Iterator<Item = Duration> + '_ {
        let mut next = self.initial;
        let mut total = Duration::ZERO;
        std::iter::from_fn(move || {
            if total + next > self.give_up_after {
                return None;
            }
            let d = next;
            total += d;
            next = (next * 2).min(self.max);
            Some(d)
        })
    }
}

/// How the client behaves.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The id given to `RegisterClient`; also prefixes transaction titles.
    pub client_id: String,
    /// The OS (stateroot) to act on; by default the booted one, or on a sysroot that is not
    /// booted the OS of the first deployment.
    pub osname: Option<String>,
    /// Stage with `lock-finalization` (`KernelArgs`, `UpdateDeployment`; a rebase then goes
    /// through `UpdateDeployment`'s `set-refspec`, since `Rebase` has no such option). A locked
    /// staged deployment is *not* finalized at shutdown: it must be released with
    /// [`OsUpdater::finalize_deployment`], which also reboots. Off by default.
    pub lock_finalization: bool,
    /// Retrying "Transaction in progress".
    pub busy_retry: Backoff,
    /// How long one transaction may run (image pulls can be slow).
    pub transaction_timeout: Duration,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            client_id: "mco-agent".into(),
            osname: None,
            lock_finalization: false,
            busy_retry: Backoff::default(),
            transaction_timeout: Duration::from_secs(2 * 60 * 60),
        }
    }
}

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
        let conn = Connection::system().await.map_err(OsError::Connect)?;
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

    /// One call of the method behind `request`; returns the transaction address.
    async fn call_once(&self, os: &OsProxy<'_>, request: &Request<'_>) -> Result<String, OsError> {
        let lock = self.config.lock_finalization;
        let method = request.method(lock);
        let reply = match request {
            Request::KernelArgs { existing, change } => {
                // Read the arguments right before each attempt: after waiting for another
                // transaction they may have changed, and rpm-ostree computes the new ones
                // from the string we send.
                let current = self.kargs(KargsTarget::Pending).await?.options;
                if let Some(expected) = existing
                    && *expected != current
                {
                    return Err(OsError::KargsConflict {
                        expected: expected.to_string(),
                        found: current,
                    });
                }
                let mut opts = Options::new();
                if !change.append_if_missing.is_empty() {
                    opts.insert(
                        "append-if-missing",
                        Value::from(strs(&change.append_if_missing)),
                    );
                }
                if !change.delete_if_present.is_empty() {
                    opts.insert(
                        "delete-if-present",
                        Value::from(strs(&change.delete_if_present)),
                    );
                }
                opts.insert("initiating-command-line", self.command_line("kargs"));
                if lock {
                    opts.insert("lock-finalization", Value::from(true));
                }
                os.kernel_args(
                    &current,
                    &strs(&change.append),
                    &strs(&change.replace),
                    &strs(&change.delete),
                    opts,
                )
                .await
            }
            Request::Rebase { refspec } if lock => {
                let modifiers = Options::from([("set-refspec", Value::from(*refspec))]);
                let opts = Options::from([
                    ("lock-finalization", Value::from(true)),
                    ("initiating-command-line", self.command_line("rebase")),
                ]);
                os.update_deployment(modifiers, opts).await
            }
            Request::Rebase { refspec } => os.rebase(Options::new(), refspec, &[]).await,
            Request::Packages(change) => {
                let mut modifiers = Options::new();
                for (key, list) in [
                    ("install-packages", &change.install),
                    ("uninstall-packages", &change.uninstall),
                    ("override-remove-packages", &change.override_remove),
                    ("override-reset-packages", &change.override_reset),
                ] {
                    if !list.is_empty() {
                        modifiers.insert(key, Value::from(strs(list)));
                    }
                }
                // Packages only: never an implicit upgrade of the base.
                let mut opts = Options::from([
                    ("no-pull-base", Value::from(true)),
                    ("initiating-command-line", self.command_line("update")),
                ]);
                if lock {
                    opts.insert("lock-finalization", Value::from(true));
                }
                os.update_deployment(modifiers, opts).await
            }
            Request::Cleanup(elements) => os.cleanup(elements).await,
            Request::Finalize { checksum } => {
                let opts = Options::from([
                    ("checksum", Value::from(*checksum)),
                    (
                        "initiating-command-line",
                        self.command_line("finalize-deployment"),
                    ),
                ]);
                os.finalize_deployment(opts).await
            }
        };
        reply.map_err(|e| OsError::call(method, e))
    }

    fn command_line(&self, what: &str) -> Value<'static> {
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

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// A change, as one rpm-ostree method call.
enum Request<'a> {
    KernelArgs {
        existing: Option<&'a str>,
        change: &'a KargsChange,
    },
    Rebase {
        refspec: &'a str,
    },
    Packages(&'a PackageChange),
    Cleanup(Vec<&'static str>),
    Finalize {
        checksum: &'a str,
    },
}

impl Request<'_> {
    /// The method called; a rebase with finalization locked goes through `UpdateDeployment`.
    fn method(&self, lock_finalization: bool) -> &'static str {
        match self {
            Request::KernelArgs { .. } => "KernelArgs",
            Request::Rebase { .. } if lock_finalization => "UpdateDeployment",
            Request::Rebase { .. } => "Rebase",
            Request::Packages(_) => "UpdateDeployment",
            Request::Cleanup(_) => "Cleanup",
            Request::Finalize { .. } => "FinalizeDeployment",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_the_cap_and_gives_up() {
        let b = Backoff {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(4),
            give_up_after: Duration::from_secs(20),
        };
        let d: Vec<u64> = b.delays().map(|d| d.as_secs()).collect();
        assert_eq!(d, [1, 2, 4, 4, 4, 4]);
        assert!(d.iter().sum::<u64>() <= 20);
        let none = Backoff {
            give_up_after: Duration::ZERO,
            ..b
        };
        assert_eq!(none.delays().count(), 0);
    }
}
