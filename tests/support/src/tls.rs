//! Throw-away TLS material for tests: a CA generated with rcgen and certificates it signs,
//! plus rustls server/client configurations built with the ring provider (the project's only
//! TLS provider).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Installs ring as the process-wide rustls provider (needed by reqwest's `rustls-no-provider`).
/// Safe to call any number of times.
pub fn install_ring_provider() {
    // An error only means a provider is already installed, which is what we want.
    let _already_installed = rustls::crypto::ring::default_provider().install_default();
}

/// A certificate authority that lives as long as the test needs it.
pub struct TestCa {
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A certificate and its private key, both PEM.
#[derive(Clone, Debug)]
pub struct CertifiedKey {
    pub cert_pem: String,
    pub key_pem: String,
}

impl TestCa {
    /// Generates a new CA (ECDSA P-256) with the given common name.
    pub fn new(common_name: &str) -> Result<Self> {
        let key = KeyPair::generate().context("generating CA key")?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = name(common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).context("self-signing CA")?;
        Ok(Self {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA certificate, PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// Issues a server certificate for the given names; entries that parse as IP addresses become
    /// IP SANs, the others DNS SANs.
    pub fn issue_server_cert(&self, names: &[String]) -> Result<CertifiedKey> {
        let mut params = CertificateParams::new(names.to_vec())
            .with_context(|| format!("server certificate names {names:?}"))?;
        params.distinguished_name = name(names.first().map_or("server", String::as_str));
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue(params)
    }

    /// Issues a client certificate with the given common name and organisation (a Kubernetes
    /// user and group, when used against an API server that trusts this CA).
    pub fn issue_client_cert(&self, common_name: &str, organization: &str) -> Result<CertifiedKey> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        let mut dn = name(common_name);
        dn.push(DnType::OrganizationName, organization);
        params.distinguished_name = dn;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.issue(params)
    }

    fn issue(&self, params: CertificateParams) -> Result<CertifiedKey> {
        let key = KeyPair::generate().context("generating key")?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .context("signing certificate")?;
        Ok(CertifiedKey {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// A rustls client configuration that trusts only this CA.
    pub fn client_config(&self) -> Result<Arc<rustls::ClientConfig>> {
        client_config_trusting(&self.cert_pem)
    }
}

impl CertifiedKey {
    /// A rustls server configuration (ring, TLS 1.2 and 1.3) presenting this certificate,
    /// with the given ALPN protocols (e.g. `[b"http/1.1"]`).
    pub fn server_config(&self, alpn: &[&[u8]]) -> Result<Arc<rustls::ServerConfig>> {
        let certs = parse_certs(&self.cert_pem)?;
        let key = parse_key(&self.key_pem)?;
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("server certificate")?;
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(Arc::new(config))
    }

    /// As [`Self::server_config`], also asking clients for a certificate signed by the CA in
    /// `client_ca_pem` (a client without one still connects, to authenticate another way; a
    /// certificate that does not verify fails the handshake).
    pub fn server_config_with_client_ca(
        &self,
        alpn: &[&[u8]],
        client_ca_pem: &str,
    ) -> Result<Arc<rustls::ServerConfig>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for cert in parse_certs(client_ca_pem)? {
            roots.add(cert).context("adding client CA certificate")?;
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .allow_unauthenticated()
        .build()
        .context("client certificate verifier")?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?
            .with_client_cert_verifier(verifier)
            .with_single_cert(parse_certs(&self.cert_pem)?, parse_key(&self.key_pem)?)
            .context("server certificate")?;
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(Arc::new(config))
    }

    /// Writes `<stem>.crt` and `<stem>.key` (mode 0600) into `dir`; returns both paths.
    pub fn write_to(&self, dir: &Path, stem: &str) -> Result<(PathBuf, PathBuf)> {
        let cert = dir.join(format!("{stem}.crt"));
        let key = dir.join(format!("{stem}.key"));
        std::fs::write(&cert, &self.cert_pem).with_context(|| format!("writing {cert:?}"))?;
        write_private(&key, self.key_pem.as_bytes())?;
        Ok((cert, key))
    }
}

/// A rustls client configuration (ring) trusting the CA certificates in `ca_pem`.
pub fn client_config_trusting(ca_pem: &str) -> Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in parse_certs(ca_pem)? {
        roots.add(cert).context("adding CA certificate")?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .context("TLS protocol versions")?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Arc::new(config))
}

/// [`client_config_trusting`] offering TLS 1.3's cipher suites in the order Go's `crypto/tls`
/// does on a machine with AES instructions (AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305), as
/// Ignition (a Go program) offers them: the config server follows the client's order, so a
/// benchmark of first-boot fetches pays the cipher a booting machine would get (rustls's own
/// client puts AES-256-GCM first, the costlier one).
pub fn ignition_like_client_config(ca_pem: &str) -> Result<Arc<rustls::ClientConfig>> {
    use rustls::crypto::ring::cipher_suite;
    let mut roots = rustls::RootCertStore::empty();
    for cert in parse_certs(ca_pem)? {
        roots.add(cert).context("adding CA certificate")?;
    }
    let provider = rustls::crypto::CryptoProvider {
        cipher_suites: vec![
            cipher_suite::TLS13_AES_128_GCM_SHA256,
            cipher_suite::TLS13_AES_256_GCM_SHA384,
            cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
        ],
        ..rustls::crypto::ring::default_provider()
    };
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("TLS protocol versions")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The names a local test server's certificate should carry: `localhost`, the loopback
/// addresses, the listen address if it is a specific one, and any extra names.
pub fn local_names(listen: Option<IpAddr>, extra: &[String]) -> Vec<String> {
    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    if let Some(ip) = listen.filter(|ip| !ip.is_unspecified()) {
        names.push(ip.to_string());
    }
    names.extend(extra.iter().cloned());
    names.dedup();
    names
}

fn name(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn
}

fn parse_certs(pem: &str) -> Result<Vec<CertificateDer<'static>>> {
    let certs = rustls_pemfile::certs(&mut pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .context("parsing PEM certificates")?;
    anyhow::ensure!(!certs.is_empty(), "no certificate in PEM input");
    Ok(certs)
}

fn parse_key(pem: &str) -> Result<PrivateKeyDer<'static>> {
    rustls_pemfile::private_key(&mut pem.as_bytes())
        .context("parsing PEM private key")?
        .context("no private key in PEM input")
}

fn write_private(path: &Path, contents: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {path:?}"))?;
    file.write_all(contents)
        .with_context(|| format!("writing {path:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The server follows the client's order: an Ignition-like client gets AES-128-GCM, the
    /// plain rustls client AES-256-GCM.
    #[tokio::test]
    async fn an_ignition_like_client_negotiates_what_go_would() -> Result<()> {
        install_ring_provider();
        let ca = TestCa::new("cipher test CA")?;
        let server = ca
            .issue_server_cert(&["127.0.0.1".to_string()])?
            .server_config(&[])?;
        let negotiated = |client: Arc<rustls::ClientConfig>| {
            let server = server.clone();
            async move {
                let (a, b) = tokio::io::duplex(64 * 1024);
                let accept = tokio_rustls::TlsAcceptor::from(server).accept(b);
                let name = rustls::pki_types::ServerName::try_from("127.0.0.1")?;
                let connect = tokio_rustls::TlsConnector::from(client).connect(name, a);
                let (client, _server) = tokio::try_join!(connect, accept)?;
                let suite = client.get_ref().1.negotiated_cipher_suite();
                anyhow::Ok(suite.map(|s| s.suite()))
            }
        };
        assert_eq!(
            negotiated(ignition_like_client_config(ca.cert_pem())?).await?,
            Some(rustls::CipherSuite::TLS13_AES_128_GCM_SHA256)
        );
        assert_eq!(
            negotiated(client_config_trusting(ca.cert_pem())?).await?,
            Some(rustls::CipherSuite::TLS13_AES_256_GCM_SHA384)
        );
        Ok(())
    }

    #[test]
    fn server_and_client_configs_build() {
        let ca = TestCa::new("test-ca").unwrap();
        let server = ca
            .issue_server_cert(&local_names(None, &["example.test".into()]))
            .unwrap();
        assert!(server.cert_pem.contains("BEGIN CERTIFICATE"));
        assert!(server.key_pem.contains("PRIVATE KEY"));
        let config = server.server_config(&[b"http/1.1"]).unwrap();
        assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
        ca.client_config().unwrap();
        let client = ca
            .issue_client_cert("system:node:n1", "system:nodes")
            .unwrap();
        parse_key(&client.key_pem).unwrap();
    }

    #[test]
    fn garbage_pem_is_refused() {
        assert!(client_config_trusting("not a certificate").is_err());
    }
}
