//! The server's TLS configuration: rustls with the ring provider, TLS 1.2 and 1.3 only, ALPN
//! `http/1.1` only (the MCS disables HTTP/2), and the certificate re-read from disk when its files
//! change, like the MCS's certificate watcher, so a rotated certificate needs no restart.

use anyhow::{Context, Result};
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::fs;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How often a handshake may trigger a look at the certificate files' modification times.
const RELOAD_CHECK_INTERVAL: Duration = Duration::from_secs(2);

/// Builds the server's rustls configuration from PEM files. With `client_ca` (a PEM bundle:
/// the cluster's client CA, which signs the kubelets' client certificates) the server asks for a
/// client certificate and verifies one that is presented against that CA (a certificate from
/// another CA fails the handshake); a client without one (Ignition at first boot) is still
/// served, as an unauthenticated client.
pub fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> Result<Arc<rustls::ServerConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let resolver = ReloadingCert::new(cert, key, provider.clone())?;
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .context("configuring TLS versions")?;
    let builder = match client_ca {
        Some(ca) => builder.with_client_cert_verifier(client_verifier(ca, provider)?),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(Arc::new(resolver));
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Verifies optional client certificates against the CA bundle in `ca`.
fn client_verifier(
    ca: &Path,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>> {
    let pem = fs::read(ca).with_context(|| format!("reading the client CA {}", ca.display()))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut BufReader::new(pem.as_slice())) {
        let cert = cert.with_context(|| format!("parsing the client CA {}", ca.display()))?;
        roots
            .add(cert)
            .with_context(|| format!("the client CA {}", ca.display()))?;
    }
    anyhow::ensure!(
        !roots.is_empty(),
        "the client CA file {} holds no PEM certificate",
        ca.display()
    );
    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .allow_unauthenticated()
        .build()
        .with_context(|| format!("the client CA {}", ca.display()))
}

/// Loads a certificate chain and its private key from PEM files.
pub fn load_certified_key(
    cert: &Path,
    key: &Path,
    provider: &CryptoProvider,
) -> Result<CertifiedKey> {
    let cert_pem =
        fs::read(cert).with_context(|| format!("reading certificate {}", cert.display()))?;
    let chain = rustls_pemfile::certs(&mut BufReader::new(cert_pem.as_slice()))
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("parsing certificate {}", cert.display()))?;
    anyhow::ensure!(
        !chain.is_empty(),
        "certificate file {} holds no PEM certificate",
        cert.display()
    );
    check_key_permissions(key)?;
    let key_pem =
        fs::read(key).with_context(|| format!("reading private key {}", key.display()))?;
    let private = rustls_pemfile::private_key(&mut BufReader::new(key_pem.as_slice()))
        .with_context(|| format!("parsing private key {}", key.display()))?
        .with_context(|| {
            format!(
                "private key file {} holds no PEM private key",
                key.display()
            )
        })?;
    CertifiedKey::from_der(chain, private, provider).with_context(|| {
        format!(
            "private key {} does not fit certificate {}",
            key.display(),
            cert.display()
        )
    })
}

/// Refuses a private key file others may read, or its group may write, as ssh and PostgreSQL
/// do: whoever can read it can impersonate the config server to every node. The group may read
/// it only when root owns the file (PostgreSQL's rule; a Kubernetes secret volume with
/// `fsGroup` gives the pod's group read on root-owned files). The mode of the file a symlink
/// points at counts.
fn check_key_permissions(key: &Path) -> Result<()> {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let meta =
        fs::metadata(key).with_context(|| format!("reading private key {}", key.display()))?;
    let mode = meta.permissions().mode() & 0o7777;
    let allowed = if meta.uid() == 0 { 0o640 } else { 0o600 };
    anyhow::ensure!(
        mode & 0o777 & !allowed == 0,
        "private key {} is accessible to others or to its group (mode {:04o}, owner uid {}): it \
         must be readable by its owner only (chmod 600), or also by its group when root owns it",
        key.display(),
        mode,
        meta.uid()
    );
    Ok(())
}

/// Serves the certificate from `cert`/`key`, reloading it when either file's mtime changes.
/// A reload that fails keeps the previous certificate and logs why.
#[derive(Debug)]
struct ReloadingCert {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<CryptoProvider>,
    state: Mutex<LoadedCert>,
}

#[derive(Debug)]
struct LoadedCert {
    key: Arc<CertifiedKey>,
    stamps: (Option<SystemTime>, Option<SystemTime>),
    checked: Instant,
}

impl ReloadingCert {
    fn new(cert: &Path, key: &Path, provider: Arc<CryptoProvider>) -> Result<Self> {
        let loaded = load_certified_key(cert, key, &provider)?;
        Ok(ReloadingCert {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            state: Mutex::new(LoadedCert {
                key: Arc::new(loaded),
                stamps: stamps(cert, key),
                checked: Instant::now(),
            }),
            provider,
        })
    }
}

fn stamps(cert: &Path, key: &Path) -> (Option<SystemTime>, Option<SystemTime>) {
    let mtime = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).ok();
    (mtime(cert), mtime(key))
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if state.checked.elapsed() >= RELOAD_CHECK_INTERVAL {
            state.checked = Instant::now();
            let now = stamps(&self.cert, &self.key);
            if now != state.stamps {
                match load_certified_key(&self.cert, &self.key, &self.provider) {
                    Ok(fresh) => {
                        tracing::info!(cert = %self.cert.display(), "reloaded the serving certificate");
                        state.key = Arc::new(fresh);
                        state.stamps = now;
                    }
                    Err(err) => tracing::warn!(
                        cert = %self.cert.display(),
                        "keeping the previous serving certificate: {err:#}"
                    ),
                }
            }
        }
        Some(state.key.clone())
    }
}
