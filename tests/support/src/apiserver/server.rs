//! The running server: its thread and runtime, TLS with client certificates, and the handles
//! tests use to seed, read, change and break it.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::Value;

use super::audit::{AuditEvent, AuditLog};
use super::authn::{self, Authenticator};
use super::patch::PatchType;
use super::store::Store;
use super::writes::Write;
use super::{
    Faults, RequestRecord, ServerOptions, ServerState, Target, bootstrap, handler, manifests,
    registry,
};
use crate::tls::TestCa;

/// A running test server. Dropping it stops the server.
pub struct TestApiServer {
    pub(super) url: String,
    pub(super) ca_pem: Option<String>,
    pub(super) state: Arc<ServerState>,
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
        let (ca_pem, client_ca, tls) = if options.tls {
            let ca = TestCa::new("mco-test-apiserver-ca")?;
            let client_ca = TestCa::new("mco-test-apiserver-client-ca")?;
            let names = crate::tls::local_names(Some(local.ip()), &options.extra_names);
            let server_cert = ca.issue_server_cert(&names)?;
            let config =
                server_cert.server_config_with_client_ca(&[b"http/1.1"], client_ca.cert_pem())?;
            (
                Some(ca.cert_pem().to_string()),
                Some(client_ca),
                Some(tokio_rustls::TlsAcceptor::from(config)),
            )
        } else {
            (None, None, None)
        };
        let store = Store::new();
        store.set_pod_termination_delay(options.pod_termination_delay);
        for object in bootstrap::objects() {
            store
                .seed(object)
                .context("creating the bootstrap RBAC objects")?;
        }
        let audit = match &options.audit_log {
            Some(path) => AuditLog::to_file(path)?,
            None => AuditLog::default(),
        };
        let state = Arc::new(ServerState {
            store,
            faults: Faults::default(),
            authn: Authenticator::new(client_ca, options.anonymous.unwrap_or(!options.tls)),
            authorization: options.authorization,
            audit,
            address: format!("{host}:{}", local.port()),
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

    pub fn faults(&self) -> &Faults {
        &self.state.faults
    }

    /// Every authorization decision so far (oldest first, at most the last 100000).
    pub fn audit(&self) -> Vec<AuditEvent> {
        self.state.audit.events()
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
            &Write::to(target),
        )?)
    }

    /// Deletes an object as a client would (pods may terminate gracefully).
    pub fn delete(&self, plural: &str, ns: Option<&str>, name: &str) -> Result<Value> {
        Ok(self.state.store.delete(
            Self::resource(plural),
            ns,
            name,
            &Default::default(),
            &Write::main(),
        )?)
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
    let builder = hyper::server::conn::http1::Builder::new();
    // Connection errors (clients hanging up mid-request) only end that connection.
    match tls {
        Some(acceptor) => {
            let Ok(tls_stream) = acceptor.accept(stream).await else {
                return;
            };
            // The client certificate, verified against the client CA during the handshake.
            let peer = tls_stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|chain| chain.first())
                .and_then(|cert| authn::identity_from_certificate(cert));
            let service = hyper::service::service_fn(move |req| {
                handler::handle(state.clone(), req, peer.clone())
            });
            let _ = builder
                .serve_connection(hyper_util::rt::TokioIo::new(tls_stream), service)
                .await;
        }
        None => {
            let service =
                hyper::service::service_fn(move |req| handler::handle(state.clone(), req, None));
            let _ = builder
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        }
    }
}
