//! rpm-ostreed's transaction model.
//!
//! A mutating method creates one transaction: a worker thread that loads and *locks* the sysroot
//! (so a concurrent `ostree admin` or second daemon is refused), and a private unix socket whose
//! address the method returns. Clients connect to it peer-to-peer and find the
//! `org.projectatomic.rpmostree1.Transaction` interface at `/`. Nothing happens before a client
//! calls `Start()`; from then on the job runs to the end even if clients leave, and every
//! connected client gets the `Message`/`TaskBegin`/`TaskEnd`/`PercentProgress` signals and one
//! `Finished(success, error_message)`. A client that calls `Start()` after the end gets
//! `Finished` again on its own connection.
//!
//! If the caller's bus name vanishes before `Start()`, the transaction is cancelled and closed.
//! A finished transaction closes when its last client disconnects, or at the latest 30 s after
//! it finished (rpm-ostreed's guard against clients that leak their connections). Until it
//! closes, the sysroot's `ActiveTransaction`/`ActiveTransactionPath` name it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio::task::JoinHandle;
use zbus::Connection;
use zbus::names::BusName;

use super::daemon::Shared;
use super::error::DaemonError;
use super::ops::{self, Operation};
use super::worker::{Control, Event, spawn_worker};

/// The transaction interface name.
pub const TRANSACTION_IFACE: &str = "org.projectatomic.rpmostree1.Transaction";
/// rpm-ostreed's FORCE_CLOSE_TXN_TIMEOUT_SECS.
const FORCE_CLOSE_AFTER: Duration = Duration::from_secs(30);

/// What a method call asks for.
pub struct TxnRequest {
    pub method: &'static str,
    pub sender: String,
    pub object_path: String,
    pub osname: String,
    /// Method and arguments, for rpm-ostreed's "same call joins the running transaction".
    pub fingerprint: String,
    pub title: String,
    pub client_description: String,
    pub op: Operation,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Created,
    Started,
    Finished { success: bool, message: String },
    Closed,
}

struct Inner {
    state: State,
    /// The connected clients, by their connection's server GUID (one generated per client).
    peers: Vec<(String, Connection)>,
    control: Option<std::sync::mpsc::Sender<Control>>,
    tasks: Vec<JoinHandle<()>>,
    watcher: Option<JoinHandle<()>>,
}

/// One transaction.
pub struct Txn {
    pub id: u64,
    pub method: &'static str,
    pub sender: String,
    pub object_path: String,
    pub client_description: String,
    pub address: String,
    fingerprint: String,
    title: Mutex<String>,
    socket_path: PathBuf,
    cancel: Arc<AtomicBool>,
    inner: Mutex<Inner>,
    shared: Weak<Shared>,
}

impl Txn {
    /// Creates the transaction: worker thread with the locked sysroot, socket, watchers.
    pub(crate) async fn create(
        shared: &Arc<Shared>,
        id: u64,
        req: TxnRequest,
    ) -> Result<Arc<Txn>, DaemonError> {
        let cancel = Arc::new(AtomicBool::new(false));
        let (events_tx, events_rx) = unbounded_channel();
        let control = spawn_worker(shared, &req, cancel.clone(), events_tx).await?;

        let socket_path = shared.config.run_dir.join(format!("transaction-{id}.sock"));
        let _ = std::fs::remove_file(&socket_path);
        let listener = tokio::net::UnixListener::bind(&socket_path).map_err(|e| {
            DaemonError::failed(format!(
                "Failed to listen on {}: {e}",
                socket_path.display()
            ))
        })?;
        // Any local user may connect, as with rpm-ostreed's socket; methods are authorized.
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&socket_path, std::fs::Permissions::from_mode(0o666));

        let txn = Arc::new(Txn {
            id,
            method: req.method,
            sender: req.sender,
            object_path: req.object_path,
            client_description: req.client_description,
            address: format!("unix:path={}", socket_path.display()),
            fingerprint: req.fingerprint,
            title: Mutex::new(req.title),
            socket_path,
            cancel,
            inner: Mutex::new(Inner {
                state: State::Created,
                peers: Vec::new(),
                control: Some(control),
                tasks: Vec::new(),
                watcher: None,
            }),
            shared: Arc::downgrade(shared),
        });
        let accept = tokio::spawn(accept_loop(Arc::downgrade(&txn), listener));
        let pump = tokio::spawn(event_pump(Arc::downgrade(&txn), events_rx));
        let watcher = tokio::spawn(watch_caller(Arc::downgrade(&txn), shared.bus()));
        {
            let mut inner = txn.inner.lock().expect("txn lock");
            inner.tasks.extend([accept, pump]);
            inner.watcher = Some(watcher);
        }
        Ok(txn)
    }

    pub fn title(&self) -> String {
        self.title.lock().expect("title lock").clone()
    }

    /// True when `method` with the same arguments would join this transaction.
    pub fn is_compatible(&self, method: &str, fingerprint: &str) -> bool {
        self.method == method && self.fingerprint == fingerprint
    }

    pub fn is_closed(&self) -> bool {
        self.inner.lock().expect("txn lock").state == State::Closed
    }

    /// `Start()` from the client on `conn`: returns whether this call started it, and the
    /// `Finished` arguments to send again if it has already finished.
    ///
    /// The caller becomes a peer here, under the lock that starts the job, if the task that
    /// accepted its connection has not added it yet: that task runs on its own and, on a loaded
    /// machine, can be descheduled between the handshake and adding the peer while the client
    /// calls `Start()` and a short job finishes; `Finished` then went to every peer but this
    /// client, which waited for it until its timeout (the os_kargs hang under load).
    fn start(&self, conn: &Connection) -> (bool, Option<(bool, String)>) {
        let mut inner = self.inner.lock().expect("txn lock");
        if inner.state != State::Closed {
            add_peer(&mut inner.peers, conn);
        }
        match &inner.state {
            State::Created => {
                inner.state = State::Started;
                if let Some(w) = inner.watcher.take() {
                    w.abort();
                }
                if let Some(c) = &inner.control {
                    let _ = c.send(Control::Start);
                }
                tracing::info!(txn = self.id, method = self.method, "transaction started");
                (true, None)
            }
            State::Finished { success, message } => (false, Some((*success, message.clone()))),
            State::Started | State::Closed => (false, None),
        }
    }

    fn peers(&self) -> Vec<Connection> {
        let inner = self.inner.lock().expect("txn lock");
        inner.peers.iter().map(|(_, c)| c.clone()).collect()
    }

    async fn emit<B>(&self, name: &str, body: &B)
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
    {
        for peer in self.peers() {
            if let Err(e) = peer
                .emit_signal(None::<BusName<'_>>, "/", TRANSACTION_IFACE, name, body)
                .await
            {
                tracing::debug!(txn = self.id, "emitting {name}: {e}");
            }
        }
    }

    async fn finish(self: &Arc<Self>, result: Result<ops::Outcome, String>) {
        let (success, message) = match &result {
            Ok(_) => (true, String::new()),
            Err(m) => (false, m.clone()),
        };
        if success {
            tracing::info!(txn = self.id, method = self.method, "transaction succeeded");
        } else {
            tracing::warn!(
                txn = self.id,
                method = self.method,
                "transaction failed: {message}"
            );
        }
        {
            let mut inner = self.inner.lock().expect("txn lock");
            inner.state = State::Finished {
                success,
                message: message.clone(),
            };
            inner.control = None;
        }
        if let Some(shared) = self.shared.upgrade() {
            // Like rpm-ostreed, reload the sysroot state before telling clients.
            shared.sysroot_changed().await;
        }
        if let (Ok(outcome), Some(shared)) = (&result, self.shared.upgrade())
            && outcome.reboot
        {
            // rpm-ostreed starts the reboot at the end of the job, before `Finished`, and it
            // does not depend on the client. On a task of its own: the client leaving after
            // `Finished` closes the transaction, which aborts the task running this, and the
            // reboot went with it (the crash-safety test waited 180 s for a reboot whose call
            // was never sent).
            shared.start_reboot();
        }
        self.emit("Finished", &(success, message.as_str())).await;
        let weak = Arc::downgrade(self);
        let timer = tokio::spawn(async move {
            tokio::time::sleep(FORCE_CLOSE_AFTER).await;
            if let Some(t) = weak.upgrade() {
                tracing::warn!(txn = t.id, "Forcibly closing transaction due to timeout");
                t.close().await;
            }
        });
        self.inner.lock().expect("txn lock").tasks.push(timer);
        self.maybe_close().await;
    }

    async fn maybe_close(self: &Arc<Self>) {
        let close = {
            let inner = self.inner.lock().expect("txn lock");
            matches!(inner.state, State::Finished { .. }) && inner.peers.is_empty()
        };
        if close {
            self.close().await;
        }
    }

    /// Closes the transaction: no more clients, socket gone, sysroot no longer names it.
    pub(crate) async fn close(self: &Arc<Self>) {
        let (tasks, peers) = {
            let mut inner = self.inner.lock().expect("txn lock");
            if inner.state == State::Closed {
                return;
            }
            inner.state = State::Closed;
            // Dropping the control channel makes a worker that never started unlock and exit.
            inner.control = None;
            let mut tasks = std::mem::take(&mut inner.tasks);
            tasks.extend(inner.watcher.take());
            (tasks, std::mem::take(&mut inner.peers))
        };
        let _ = std::fs::remove_file(&self.socket_path);
        for (_, p) in peers {
            let _ = p.close().await;
        }
        if let Some(shared) = self.shared.upgrade() {
            shared.transaction_closed(self.id).await;
        }
        tracing::info!(txn = self.id, "transaction closed");
        // Last, since this may be running inside one of these tasks.
        for t in tasks {
            t.abort();
        }
    }
}

/// The `Transaction` interface each peer connection serves at `/`.
struct TxnIface {
    txn: Weak<Txn>,
}

#[zbus::interface(name = "org.projectatomic.rpmostree1.Transaction")]
impl TxnIface {
    #[zbus(property)]
    fn title(&self) -> String {
        self.txn.upgrade().map(|t| t.title()).unwrap_or_default()
    }

    #[zbus(property)]
    fn initiating_client_description(&self) -> String {
        self.txn
            .upgrade()
            .map(|t| t.client_description.clone())
            .unwrap_or_default()
    }

    /// Cancels the job at its next check; a job that never started will fail when started.
    fn cancel(&self) {
        if let Some(t) = self.txn.upgrade() {
            tracing::info!(txn = t.id, "transaction cancel requested");
            t.cancel.store(true, Ordering::SeqCst);
        }
    }

    async fn start(&self, #[zbus(connection)] conn: &Connection) -> bool {
        let Some(txn) = self.txn.upgrade() else {
            return false;
        };
        let (started, finished) = txn.start(conn);
        if let Some((success, message)) = finished {
            let conn = conn.clone();
            tokio::spawn(async move {
                let _ = conn
                    .emit_signal(
                        None::<BusName<'_>>,
                        "/",
                        TRANSACTION_IFACE,
                        "Finished",
                        &(success, message.as_str()),
                    )
                    .await;
            });
        }
        started
    }
}

async fn accept_loop(txn: Weak<Txn>, listener: tokio::net::UnixListener) {
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::warn!("accepting a transaction client: {e}");
                continue;
            }
        };
        let weak = txn.clone();
        tokio::spawn(async move {
            let conn = async {
                zbus::connection::Builder::unix_stream(stream)
                    .server(zbus::Guid::generate())?
                    .p2p()
                    .serve_at("/", TxnIface { txn: weak.clone() })?
                    .build()
                    .await
            }
            .await;
            let conn = match conn {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!("transaction client handshake: {e}");
                    return;
                }
            };
            let Some(t) = weak.upgrade() else { return };
            let delay = t.shared.upgrade().map(|s| s.config.peer_setup_delay);
            if let Some(delay) = delay.filter(|d| !d.is_zero()) {
                tokio::time::sleep(delay).await;
            }
            add_peer(&mut t.inner.lock().expect("txn lock").peers, &conn);
            tracing::info!(txn = t.id, "Process connected to transaction progress");
            drop(t);
            conn.closed().await;
            if let Some(t) = weak.upgrade() {
                let key = conn.server_guid().to_string();
                t.inner
                    .lock()
                    .expect("txn lock")
                    .peers
                    .retain(|(id, _)| *id != key);
                tracing::info!(txn = t.id, "Process disconnected from transaction progress");
                t.maybe_close().await;
            }
        });
    }
}

/// Adds the client on `conn` to `peers` unless it is there already (the accepting task and
/// `Start()` both add it, whichever comes first).
fn add_peer(peers: &mut Vec<(String, Connection)>, conn: &Connection) {
    let key = conn.server_guid().to_string();
    if !peers.iter().any(|(id, _)| *id == key) {
        peers.push((key, conn.clone()));
    }
}

async fn event_pump(txn: Weak<Txn>, mut events: UnboundedReceiver<Event>) {
    while let Some(ev) = events.recv().await {
        let Some(t) = txn.upgrade() else { return };
        match ev {
            Event::Message(s) => t.emit("Message", &(s.as_str(),)).await,
            Event::TaskBegin(s) => t.emit("TaskBegin", &(s.as_str(),)).await,
            Event::TaskEnd(s) => t.emit("TaskEnd", &(s.as_str(),)).await,
            Event::Percent(s, p) => t.emit("PercentProgress", &(s.as_str(), p)).await,
            Event::Done(r) => {
                t.finish(r).await;
                return;
            }
        }
    }
}

/// Cancels the transaction if its caller leaves the bus before `Start()`.
async fn watch_caller(txn: Weak<Txn>, bus: Connection) {
    let sender = match txn.upgrade() {
        Some(t) => t.sender.clone(),
        None => return,
    };
    let vanished = async {
        let dbus = zbus::fdo::DBusProxy::new(&bus).await?;
        let mut changes = dbus
            .receive_name_owner_changed_with_args(&[(0, sender.as_str())])
            .await?;
        let name = BusName::try_from(sender.as_str())?;
        if !dbus.name_has_owner(name).await? {
            return Ok::<_, zbus::Error>(());
        }
        while let Some(sig) = changes.next().await {
            if sig.args()?.new_owner().is_none() {
                break;
            }
        }
        Ok(())
    }
    .await;
    if let Err(e) = vanished {
        tracing::warn!("watching transaction caller {sender}: {e}");
        return;
    }
    if let Some(t) = txn.upgrade() {
        let unstarted = t.inner.lock().expect("txn lock").state == State::Created;
        if unstarted {
            tracing::warn!(
                txn = t.id,
                "client disconnected before calling Start; cancelling transaction"
            );
            t.close().await;
        }
    }
}
