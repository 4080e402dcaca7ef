//! A Kubernetes API test server: in memory, HTTPS (or HTTP) on a local address, with the
//! semantics the agent, the companion and kubectl rely on (discovery, CRUD, patches, watches,
//! selectors, optimistic concurrency, evictions against PodDisruptionBudgets, graceful pod
//! termination) and fault injection for tests.
//!
//! In-process: [`TestApiServer::start`] runs the server on its own thread and runtime (so tests
//! of any runtime flavour, and blocking `kubectl` calls, can use it) and hands out kubeconfigs
//! and handles to seed, inspect and break it. As a binary: `mco-test-apiserver`.

mod catalog;
mod columns;
mod disruption;
mod faults;
pub mod fixtures;
mod handler;
mod kubeconfig;
mod lifecycle;
mod manifests;
mod openapi;
mod patch;
mod registry;
mod resource;
mod routes;
mod selector;
mod status;
mod store;
mod strategy;
mod table;
mod validation;
mod watch;
mod writes;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::Value;

pub use faults::{FaultAction, Faults};
pub use patch::PatchType;
pub use status::ApiError;
use store::Store;
pub use strategy::Target;

/// How to run a server.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Where to listen; port 0 picks a free port.
    pub listen: SocketAddr,
    /// HTTPS with a generated CA and bearer tokens required (true), or plain HTTP where
    /// requests without credentials are accepted (client-go sends no token over HTTP).
    pub tls: bool,
    /// Extra names for the server certificate (besides localhost and loopback addresses).
    pub extra_names: Vec<String>,
    /// The URL written into kubeconfigs (default: the listen address, or 127.0.0.1 when it
    /// is unspecified).
    pub server_url: Option<String>,
    /// How long deleted or evicted pods on a node stay terminating (0 = gone at once).
    pub pod_termination_delay: Duration,
    /// How often watches that allow bookmarks get one.
    pub bookmark_interval: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: true,
            extra_names: Vec::new(),
            server_url: None,
            pod_termination_delay: Duration::ZERO,
            bookmark_interval: Duration::from_secs(2),
        }
    }
}

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRecord {
    pub method: String,
    pub path: String,
    pub query: String,
    pub user: String,
    pub status: u16,
}

const LOG_LIMIT: usize = 10_000;

pub(crate) struct ServerState {
    store: Arc<Store>,
    faults: Faults,
    users: Mutex<HashMap<String, String>>,
    address: String,
    /// Plain HTTP mode: requests without credentials are served as `system:anonymous`.
    anonymous_allowed: bool,
    bookmark_interval: Duration,
    log: Mutex<VecDeque<RequestRecord>>,
}

impl ServerState {
    fn user_for_token(&self, token: &str) -> Option<String> {
        self.users
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(token)
            .cloned()
    }

    fn record(&self, record: RequestRecord) {
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        if log.len() >= LOG_LIMIT {
            log.pop_front();
        }
        log.push_back(record);
    }
}

/// A running test server. Dropping it stops the server.
pub struct TestApiServer {
    url: String,
    ca_pem: Option<String>,
    state: Arc<ServerState>,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestApiServer {
    /// Starts an HTTPS server on 127.0.0.1 with default options.
    pub fn start() -> Result<Self> {
        Self::start_with(ServerOptions::default())
    }

    pub fn start_with(options: ServerOptions) -> Result<Self> {
        crate::tls::install_ring_provider();
        let listener = std::net::TcpListener::bind(options.listen)
            .with_context(|| format!("binding {}", options.listen))?;
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let host = if local.ip().is_unspecified() {
            "127.0.0.1".to_string()
        } else {
            match local.ip() {
                std::net::IpAddr::V6(ip) => format!("[{ip}]"),
                ip => ip.to_string(),
            }
        };
        let scheme = if options.tls { "https" } else { "http" };
        let url = options
            .server_url
            .clone()
            .unwrap_or_else(|| format!("{scheme}://{host}:{}", local.port()));
        let (ca_pem, tls) = if options.tls {
            let ca = crate::tls::TestCa::new("mco-test-apiserver-ca")?;
            let names = crate::tls::local_names(Some(local.ip()), &options.extra_names);
            let server_cert = ca.issue_server_cert(&names)?;
            let config = server_cert.server_config(&[b"http/1.1"])?;
            (
                Some(ca.cert_pem().to_string()),
                Some(tokio_rustls::TlsAcceptor::from(config)),
            )
        } else {
            (None, None)
        };
        let store = Store::new();
        store.set_pod_termination_delay(options.pod_termination_delay);
        let state = Arc::new(ServerState {
            store,
            faults: Faults::default(),
            users: Mutex::new(HashMap::new()),
            address: format!("{host}:{}", local.port()),
            anonymous_allowed: !options.tls,
            bookmark_interval: options.bookmark_interval,
            log: Mutex::new(VecDeque::new()),
        });
        let (shutdown, shutdown_rx) = tokio::sync::oneshot::channel();
        let thread_state = state.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("mco-test-apiserver".into())
            .spawn(move || serve_thread(listener, tls, thread_state, shutdown_rx, ready_tx))
            .context("spawning the server thread")?;
        ready_rx
            .recv()
            .context("the server thread exited early")?
            .context("starting the server")?;
        let dir = tempfile::tempdir().context("creating the kubeconfig directory")?;
        let server = Self {
            url,
            ca_pem,
            state,
            kubeconfig: dir.path().join("admin.kubeconfig"),
            dir,
            shutdown: Some(shutdown),
            thread: Some(thread),
        };
        let admin = server.kubeconfig.clone();
        server.write_kubeconfig(&admin, "admin")?;
        Ok(server)
    }

    /// The server's URL, e.g. `https://127.0.0.1:41234`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A kubeconfig for user `admin`.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// A directory that lives as long as the server (for test files).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The CA certificate (PEM) when serving HTTPS.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// Registers `user` (if new) and returns its bearer token.
    pub fn token_for(&self, user: &str) -> String {
        let mut users = self.state.users.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((token, _)) = users.iter().find(|(_, u)| u.as_str() == user) {
            return token.clone();
        }
        let token = format!("mco-test-{}", strategy::new_uid());
        users.insert(token.clone(), user.to_string());
        token
    }

    /// Writes a kubeconfig authenticating as `user` (registered if new).
    pub fn write_kubeconfig(&self, path: &Path, user: &str) -> Result<()> {
        let token = self.token_for(user);
        kubeconfig::write(path, &self.url, self.ca_pem.as_deref(), user, &token)
    }

    /// A `kubectl` command talking to this server with `kubeconfig` (discovery cache and
    /// `HOME` inside the server's directory, so runs never share state with the host).
    pub fn kubectl(&self, kubeconfig: &Path) -> std::process::Command {
        let mut command = std::process::Command::new("kubectl");
        command
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir().join("kube-cache"))
            .env("HOME", self.dir());
        command
    }

    pub fn faults(&self) -> &Faults {
        &self.state.faults
    }

    /// Every request served so far (oldest first, at most the last 10000).
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.state
            .log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.state.store.current_rv()
    }

    /// Inserts an object (apiVersion and kind select the resource), keeping its status.
    pub fn seed(&self, object: Value) -> Result<Value> {
        Ok(self.state.store.seed(object)?)
    }

    /// Seeds every object of a YAML (multi-document) or JSON text, read as `kubectl apply -f`
    /// reads it (YAML 1.1: `mode: 0644` is 420); `List` kinds are unpacked.
    pub fn seed_manifests(&self, text: &str) -> Result<usize> {
        let objects = manifests::parse(text)?;
        for object in &objects {
            self.seed(object.clone())?;
        }
        Ok(objects.len())
    }

    fn resource(plural: &str) -> usize {
        registry::index_of(plural)
    }

    /// The object, if it exists (`ns` is ignored for cluster-scoped resources).
    pub fn get(&self, plural: &str, ns: Option<&str>, name: &str) -> Option<Value> {
        self.state.store.get(Self::resource(plural), ns, name).ok()
    }

    /// All objects of a resource (in `ns`, or in every namespace).
    pub fn list(&self, plural: &str, ns: Option<&str>) -> Vec<Value> {
        self.state
            .store
            .list(
                Self::resource(plural),
                ns,
                &Default::default(),
                &Default::default(),
            )
            .0
    }

    /// Applies a merge patch to an object or its status, as a controller would.
    pub fn patch(
        &self,
        plural: &str,
        ns: Option<&str>,
        name: &str,
        patch: &Value,
        target: Target,
    ) -> Result<Value> {
        Ok(self.state.store.patch(
            Self::resource(plural),
            ns,
            name,
            PatchType::Merge,
            patch,
            target,
            false,
        )?)
    }

    /// Deletes an object as a client would (pods may terminate gracefully).
    pub fn delete(&self, plural: &str, ns: Option<&str>, name: &str) -> Result<Value> {
        Ok(self
            .state
            .store
            .delete(Self::resource(plural), ns, name, &Default::default(), false)?)
    }

    pub fn set_pod_termination_delay(&self, delay: Duration) {
        self.state.store.set_pod_termination_delay(delay);
    }

    /// Forgets the watch history: watches from older versions get 410 Gone.
    pub fn compact(&self) {
        self.state.store.compact();
    }
}

impl Drop for TestApiServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            // The server thread may already be gone; nothing to do then.
            let _gone = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _panicked = thread.join();
        }
    }
}

fn serve_thread(
    listener: std::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    state: Arc<ServerState>,
    shutdown: tokio::sync::oneshot::Receiver<()>,
    ready: std::sync::mpsc::Sender<Result<()>>,
) {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(
                anyhow::Error::new(e).context("building the server runtime")
            ));
            return;
        }
    };
    runtime.block_on(async move {
        state.store.set_runtime(tokio::runtime::Handle::current());
        let listener = match tokio::net::TcpListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                let _ = ready.send(Err(
                    anyhow::Error::new(e).context("registering the listener")
                ));
                return;
            }
        };
        let _ = ready.send(Ok(()));
        let mut shutdown = shutdown;
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                accepted = listener.accept() => {
                    let Ok((stream, _peer)) = accepted else { continue };
                    tokio::spawn(serve_connection(stream, tls.clone(), state.clone()));
                }
            }
        }
    });
    runtime.shutdown_timeout(Duration::from_millis(100));
}

async fn serve_connection(
    stream: tokio::net::TcpStream,
    tls: Option<tokio_rustls::TlsAcceptor>,
    state: Arc<ServerState>,
) {
    let service = hyper::service::service_fn(move |req| handler::handle(state.clone(), req));
    let builder = hyper::server::conn::http1::Builder::new();
    // Connection errors (clients hanging up mid-request) only end that connection.
    match tls {
        Some(acceptor) => {
            let Ok(tls_stream) = acceptor.accept(stream).await else {
                return;
            };
            let _ = builder
                .serve_connection(hyper_util::rt::TokioIo::new(tls_stream), service)
                .await;
        }
        None => {
            let _ = builder
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        }
    }
}
