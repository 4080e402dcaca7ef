//! The daemon: configuration, shared state, object export and the one-transaction-at-a-time rule.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use zbus::Connection;
use zbus::message::Header;
use zbus::zvariant::OwnedObjectPath;

use super::error::{ACCESS_DENIED, DaemonError};
use super::os_iface::OsIface;
use super::snapshot::SysrootSnapshot;
use super::sysroot_iface::SysrootIface;
use super::txn::{Txn, TxnRequest};

/// The bus name rpm-ostreed owns.
pub const BUS_NAME: &str = "org.projectatomic.rpmostree1";
/// The sysroot object.
pub const SYSROOT_PATH: &str = "/org/projectatomic/rpmostree1/Sysroot";
/// The parent of the per-OS objects.
pub const BASE_PATH: &str = "/org/projectatomic/rpmostree1";

/// How the stand-in runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The ostree sysroot (`/` on a booted system).
    pub sysroot: PathBuf,
    /// Where transaction sockets are created.
    pub run_dir: PathBuf,
    /// Image reference to commit mapping (see the origin module).
    pub image_map: Option<PathBuf>,
    /// Registries that refuse pulls without credentials in `/run/ostree/auth.json` (see the
    /// auth module); none by default.
    pub auth: super::auth::RegistryAuth,
    /// A test knob: each job pretends to download for this long first, emitting
    /// `PercentProgress`, so tests can act while a transaction runs. Zero by default.
    pub txn_delay: Duration,
    /// A test knob: the task that accepts a client's connection to a transaction waits this
    /// long before adding the client as a peer, as a descheduled thread on a loaded machine
    /// can (the client may call `Start()` in between). Zero by default.
    pub peer_setup_delay: Duration,
}

/// The per-OS object path, escaped as rpm-ostree escapes it (`-` and `/` become `_`, other
/// characters outside `[A-Za-z0-9_]` become `_XX` hex).
pub fn os_object_path(osname: &str) -> String {
    let mut p = format!("{BASE_PATH}/");
    for b in osname.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' => p.push(b as char),
            b'/' | b'-' => p.push('_'),
            other => p.push_str(&format!("_{other:02X}")),
        }
    }
    p
}

/// State shared by the D-Bus objects.
pub struct Shared {
    pub config: Config,
    bus: Mutex<Option<Connection>>,
    clients: Mutex<HashMap<String, String>>,
    active: tokio::sync::Mutex<Option<Arc<Txn>>>,
    next_txn: AtomicU64,
    rebooting: AtomicBool,
    /// The method of every transaction started, in order.
    started: Mutex<Vec<String>>,
}

impl Shared {
    pub(crate) fn bus(&self) -> Connection {
        self.bus
            .lock()
            .expect("bus lock")
            .clone()
            .expect("the daemon is connected before it serves")
    }

    /// Reads the sysroot off the async threads.
    pub(crate) async fn snapshot(&self) -> Result<SysrootSnapshot, DaemonError> {
        let path = self.config.sysroot.clone();
        tokio::task::spawn_blocking(move || SysrootSnapshot::read(&path))
            .await
            .map_err(|e| DaemonError::failed(format!("reading the sysroot: {e}")))?
            .map_err(DaemonError::failed)
    }

    /// uid 0 is always allowed; nobody else is (no polkit here).
    pub(crate) async fn authorize(
        &self,
        hdr: &Header<'_>,
        kind: &str,
        method: &str,
    ) -> Result<(), DaemonError> {
        let sender = hdr
            .sender()
            .ok_or_else(|| DaemonError::failed("call without a sender"))?;
        let uid = zbus::fdo::DBusProxy::new(&self.bus())
            .await?
            .get_connection_unix_user(sender.clone().into())
            .await
            .map_err(|e| DaemonError::failed(format!("looking up the caller's uid: {e}")))?;
        if uid == 0 {
            Ok(())
        } else {
            Err(DaemonError::new(
                ACCESS_DENIED,
                format!("rpmostreed {kind} operation {method} not allowed for user"),
            ))
        }
    }

    pub(crate) fn register_client(&self, sender: &str, id: &str) {
        tracing::info!("Client {sender} registered as {id:?}");
        self.clients
            .lock()
            .expect("clients lock")
            .insert(sender.to_string(), id.to_string());
    }

    pub(crate) fn unregister_client(&self, sender: &str) {
        tracing::info!("Client {sender} unregistered");
        self.clients.lock().expect("clients lock").remove(sender);
    }

    /// rpm-ostreed's description of a caller.
    pub(crate) fn client_description(&self, sender: &str) -> String {
        match self.clients.lock().expect("clients lock").get(sender) {
            Some(id) => format!("client(id:{id} dbus:{sender})"),
            None => format!("caller {sender}"),
        }
    }

    /// The running transaction's `(method, sender, object path)` and address, or empties.
    pub(crate) async fn active(&self) -> ((String, String, String), String) {
        match self.active.lock().await.as_ref() {
            Some(t) if !t.is_closed() => (
                (
                    t.method.to_string(),
                    t.sender.clone(),
                    t.object_path.clone(),
                ),
                t.address.clone(),
            ),
            _ => Default::default(),
        }
    }

    /// Starts a transaction, or joins the running one when it is the same call, or refuses
    /// with "Transaction in progress". Returns the transaction's address.
    pub(crate) async fn begin(self: &Arc<Self>, req: TxnRequest) -> Result<String, DaemonError> {
        if self.rebooting.load(Ordering::SeqCst) {
            return Err(DaemonError::failed(
                "Reboot initiated, cannot start new transaction",
            ));
        }
        let mut active = self.active.lock().await;
        if let Some(t) = active.as_ref().filter(|t| !t.is_closed()) {
            if t.is_compatible(req.method, &req.fingerprint) {
                tracing::info!(txn = t.id, "Client joining existing transaction");
                return Ok(t.address.clone());
            }
            return Err(DaemonError::transaction_in_progress(&t.title()));
        }
        let id = self.next_txn.fetch_add(1, Ordering::SeqCst) + 1;
        tracing::info!(txn = id, method = req.method, sender = %req.sender, "new transaction");
        let method = req.method;
        let txn = Txn::create(self, id, req).await?;
        self.started
            .lock()
            .expect("started lock")
            .push(method.to_string());
        let address = txn.address.clone();
        *active = Some(txn);
        drop(active);
        self.emit_sysroot_properties(&["ActiveTransaction", "ActiveTransactionPath"])
            .await;
        Ok(address)
    }

    /// Called by a transaction that closed.
    pub(crate) async fn transaction_closed(&self, id: u64) {
        let mut active = self.active.lock().await;
        if active.as_ref().is_some_and(|t| t.id == id) {
            *active = None;
            drop(active);
            self.emit_sysroot_properties(&["ActiveTransaction", "ActiveTransactionPath"])
                .await;
        }
    }

    /// The sysroot changed: export objects for new OSes, tell clients about new values.
    pub(crate) async fn sysroot_changed(self: &Arc<Self>) {
        if let Err(e) = self.export_os_objects().await {
            tracing::warn!("exporting OS objects: {e}");
        }
        self.emit_sysroot_properties(&["Booted", "Deployments"])
            .await;
    }

    async fn export_os_objects(self: &Arc<Self>) -> Result<(), DaemonError> {
        let snapshot = self.snapshot().await?;
        let bus = self.bus();
        for osname in snapshot.osnames() {
            let path = os_object_path(&osname);
            let iface = OsIface::new(self.clone(), osname);
            bus.object_server().at(path.as_str(), iface).await?;
        }
        Ok(())
    }

    async fn emit_sysroot_properties(&self, names: &[&str]) {
        let bus = self.bus();
        let Ok(iface) = bus
            .object_server()
            .interface::<_, SysrootIface>(SYSROOT_PATH)
            .await
        else {
            return;
        };
        let emitter = iface.signal_emitter();
        let obj = iface.get().await;
        for name in names {
            let res = match *name {
                "Booted" => obj.booted_changed(emitter).await,
                "Deployments" => obj.deployments_changed(emitter).await,
                "ActiveTransaction" => obj.active_transaction_changed(emitter).await,
                "ActiveTransactionPath" => obj.active_transaction_path_changed(emitter).await,
                _ => Ok(()),
            };
            if let Err(e) = res {
                tracing::debug!("emitting PropertiesChanged for {name}: {e}");
            }
        }
    }

    /// rpm-ostreed's reboot for `reboot` options and `FinalizeDeployment`: from now on no
    /// transaction starts, and logind is asked (on the same bus) on a task of its own.
    pub(crate) fn start_reboot(self: Arc<Self>) {
        self.rebooting.store(true, Ordering::SeqCst);
        tokio::spawn(async move { self.reboot().await });
    }

    async fn reboot(&self) {
        tracing::info!("rebooting through logind");
        let res = self
            .bus()
            .call_method(
                Some("org.freedesktop.login1"),
                "/org/freedesktop/login1",
                Some("org.freedesktop.login1.Manager"),
                "Reboot",
                &(false,),
            )
            .await;
        if let Err(e) = res {
            tracing::error!("asking logind to reboot: {e}");
        }
    }
}

/// A running stand-in on a bus connection.
pub struct Daemon {
    shared: Arc<Shared>,
    conn: Connection,
}

impl Daemon {
    /// Exports the objects on `conn` and takes the well-known name.
    pub async fn start(config: Config, conn: Connection) -> Result<Daemon> {
        std::fs::create_dir_all(&config.run_dir)
            .with_context(|| format!("creating {}", config.run_dir.display()))?;
        let shared = Arc::new(Shared {
            config,
            bus: Mutex::new(Some(conn.clone())),
            clients: Mutex::new(HashMap::new()),
            active: tokio::sync::Mutex::new(None),
            next_txn: AtomicU64::new(0),
            rebooting: AtomicBool::new(false),
            started: Mutex::new(Vec::new()),
        });
        // Fail early, with the path, if the sysroot cannot be read.
        shared
            .snapshot()
            .await
            .map_err(|e| anyhow::anyhow!("{}", e.message))?;
        conn.object_server()
            .at(SYSROOT_PATH, SysrootIface::new(shared.clone()))
            .await?;
        shared
            .export_os_objects()
            .await
            .map_err(|e| anyhow::anyhow!("{}", e.message))?;
        crate::dbus::object_server_ready(&conn).await?;
        conn.request_name(BUS_NAME)
            .await
            .with_context(|| format!("taking the bus name {BUS_NAME}"))?;
        tracing::info!(sysroot = %shared.config.sysroot.display(), "rpm-ostree stand-in ready");
        Ok(Daemon { shared, conn })
    }

    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// The ids of the registered clients (`RegisterClient`), sorted.
    pub fn registered_clients(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .shared
            .clients
            .lock()
            .expect("clients lock")
            .values()
            .cloned()
            .collect();
        ids.sort();
        ids
    }

    /// The method of every transaction started so far (`Rebase`, `KernelArgs`, ...), in order;
    /// a client that joined a running transaction started none.
    pub fn transactions(&self) -> Vec<String> {
        self.shared.started.lock().expect("started lock").clone()
    }

    /// The active transaction's address, if any.
    pub async fn active_transaction_path(&self) -> String {
        self.shared.active().await.1
    }

    /// Stops serving: closes a running transaction, gives up the name, closes the connection.
    pub async fn shutdown(self) {
        let active = self.shared.active.lock().await.clone();
        if let Some(t) = active {
            t.close().await;
        }
        let _ = self.conn.release_name(BUS_NAME).await;
        let _ = self.conn.close().await;
    }

    /// The object path of an OS.
    pub fn os_path(osname: &str) -> OwnedObjectPath {
        OwnedObjectPath::try_from(os_object_path(osname)).expect("escaped paths are valid")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_paths_are_escaped_like_rpm_ostree() {
        assert_eq!(
            os_object_path("rhcos"),
            "/org/projectatomic/rpmostree1/rhcos"
        );
        assert_eq!(
            os_object_path("fedora-coreos"),
            "/org/projectatomic/rpmostree1/fedora_coreos"
        );
        assert_eq!(os_object_path("a.b"), "/org/projectatomic/rpmostree1/a_2Eb");
    }
}
