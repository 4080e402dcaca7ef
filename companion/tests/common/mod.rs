//! Shared by the companion's integration tests: throw-away TLS material and an in-process
//! standalone server on an ephemeral port.
#![allow(dead_code)]

pub mod clients;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use machine_config::render::RenderOptions;
use mco_companion::server::{self, Limits};
use mco_companion::standalone::Standalone;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// The fixture manifests (two pools, worker/infra configs, a per-node config for worker-0).
pub fn fixture_manifests() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/manifests")
}

/// A CA and a server certificate for 127.0.0.1 and localhost it signed, written as PEM files.
pub struct Pki {
    pub dir: tempfile::TempDir,
    pub ca_pem: String,
    /// The cluster's client CA, which signs kubelet client certificates.
    pub client_ca: mco_test_support::tls::TestCa,
}

impl Pki {
    pub fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let (ca_pem, cert_pem, key_pem) = issue("mco-companion test CA");
        std::fs::write(dir.path().join("ca.crt"), &ca_pem).unwrap();
        std::fs::write(dir.path().join("tls.crt"), cert_pem).unwrap();
        write_key(&dir.path().join("tls.key"), &key_pem);
        let client_ca = mco_test_support::tls::TestCa::new("test cluster client CA").unwrap();
        std::fs::write(dir.path().join("client-ca.crt"), client_ca.cert_pem()).unwrap();
        Pki {
            dir,
            ca_pem,
            client_ca,
        }
    }
    pub fn client_ca(&self) -> PathBuf {
        self.dir.path().join("client-ca.crt")
    }
    /// A client certificate the client CA signed, as one PEM file (certificate then key, as the
    /// kubelet's `kubelet-client-current.pem`).
    pub fn client_cert(&self, common_name: &str, organization: &str) -> PathBuf {
        Self::client_cert_from(&self.client_ca, &self.dir, common_name, organization)
    }
    /// The same from another CA (which the server does not trust).
    pub fn client_cert_from(
        ca: &mco_test_support::tls::TestCa,
        dir: &tempfile::TempDir,
        common_name: &str,
        organization: &str,
    ) -> PathBuf {
        let cert = ca.issue_client_cert(common_name, organization).unwrap();
        let path = dir
            .path()
            .join(format!("{}.pem", common_name.replace(':', "_")));
        std::fs::write(&path, format!("{}{}", cert.cert_pem, cert.key_pem)).unwrap();
        path
    }
    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }
    pub fn cert(&self) -> PathBuf {
        self.dir.path().join("tls.crt")
    }
    pub fn key(&self) -> PathBuf {
        self.dir.path().join("tls.key")
    }
    /// The server's bootstrap token directory (one file per node).
    pub fn bootstrap_tokens(&self) -> PathBuf {
        self.dir.path().join("bootstrap-tokens")
    }
    /// Gives `node` the bootstrap `token` (a file readable by its owner only).
    pub fn add_bootstrap_token(&self, node: &str, token: &str) {
        std::fs::create_dir_all(self.bootstrap_tokens()).unwrap();
        write_key(&self.bootstrap_tokens().join(node), &format!("{token}\n"));
    }
}

/// Writes a private key readable by its owner only (the server refuses any other).
pub fn write_key(path: &Path, pem: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, pem).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// (CA PEM, server cert PEM, server key PEM) from a fresh CA named `ca_name`.
pub fn issue(ca_name: &str) -> (String, String, String) {
    let ca = mco_test_support::tls::TestCa::new(ca_name).unwrap();
    let cert = ca
        .issue_server_cert(&["127.0.0.1".to_string(), "localhost".to_string()])
        .unwrap();
    (ca.cert_pem().to_string(), cert.cert_pem, cert.key_pem)
}

/// A running standalone server; stops when dropped.
pub struct Server {
    pub port: u16,
    pub insecure_port: u16,
    pub source: Arc<Standalone>,
    stop: watch::Sender<bool>,
    _runtime: Option<tokio::runtime::Runtime>,
}

impl Server {
    /// Starts on its own runtime (for tests that run blocking clients such as curl).
    pub fn start(pki: &Pki, manifests: &Path, limits: Limits) -> Server {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let mut server = runtime.block_on(Server::start_async(pki, manifests, limits));
        server._runtime = Some(runtime);
        server
    }

    /// Starts on the current runtime.
    pub async fn start_async(pki: &Pki, manifests: &Path, limits: Limits) -> Server {
        let source = Arc::new(Standalone::open(manifests, RenderOptions::default()).unwrap());
        let tls =
            server::tls::server_config(&pki.cert(), &pki.key(), Some(&pki.client_ca())).unwrap();
        let (stop, shutdown) = watch::channel(false);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let insecure = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let insecure_port = insecure.local_addr().unwrap().port();
        let dyn_source: Arc<dyn server::ConfigSource> = source.clone();
        std::fs::create_dir_all(pki.bootstrap_tokens()).unwrap();
        let bootstrap = Some(Arc::new(
            // the lifetime `serve` has by default (`--bootstrap-token-hours 24`)
            server::bootstrap::BootstrapTokens::open(
                &pki.bootstrap_tokens(),
                Some(std::time::Duration::from_secs(24 * 3600)),
            )
            .unwrap(),
        ));
        tokio::spawn(server::serve(
            listener,
            Some(tls),
            bootstrap.clone(),
            dyn_source.clone(),
            limits.clone(),
            shutdown.clone(),
        ));
        tokio::spawn(server::serve(
            insecure,
            None,
            bootstrap,
            dyn_source,
            limits,
            shutdown.clone(),
        ));
        tokio::spawn(
            source
                .clone()
                .watch(std::time::Duration::from_secs(1), shutdown),
        );
        Server {
            port,
            insecure_port,
            source,
            stop,
            _runtime: None,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(runtime) = self._runtime.take() {
            runtime.shutdown_timeout(std::time::Duration::from_secs(2));
        }
    }
}

/// Decodes every file of a served config (any spec): (path, contents), in order.
pub fn decoded_files(config: &serde_json::Value) -> Vec<(String, Vec<u8>)> {
    let config = machine_config::Config::from_value(config.clone()).unwrap();
    config
        .storage
        .files
        .iter()
        .map(|f| (f.path.clone(), f.decoded_contents().unwrap()))
        .collect()
}
