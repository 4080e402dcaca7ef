//! Credentials the server hands out: bearer tokens and client certificates per identity, and
//! kubeconfig files carrying them, so tests can run real binaries (and `kubectl`) as a node, a
//! service account or the administrator.

use std::path::Path;

use anyhow::Result;

use super::identity::Identity;
use super::kubeconfig::{self, UserCredential};
use super::server::TestApiServer;
use crate::tls::CertifiedKey;

/// How a kubeconfig authenticates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    /// A bearer token (any identity).
    Token,
    /// A client certificate signed by the server's client CA, as kubelets authenticate
    /// (HTTPS only; at most one group).
    ClientCertificate,
}

impl TestApiServer {
    /// The bearer token of `user`, whose groups are those its name implies (see
    /// [`Identity::for_user`]); registered on first use.
    pub fn token_for(&self, user: &str) -> String {
        self.token_for_identity(&Identity::for_user(user))
    }

    /// The bearer token of `identity`, registered on first use.
    pub fn token_for_identity(&self, identity: &Identity) -> String {
        self.state.authn.token_for(identity)
    }

    /// A client certificate and key (PEM) for `identity`: CN = user, O = its group.
    pub fn client_certificate(&self, identity: &Identity) -> Result<CertifiedKey> {
        self.state.authn.client_cert(identity)
    }

    /// The CA (PEM) client certificates must be signed by, when serving HTTPS: what a server
    /// that authenticates nodes by their kubelet certificate trusts.
    pub fn client_ca_pem(&self) -> Option<&str> {
        self.state.authn.client_ca_pem()
    }

    /// Writes a kubeconfig with a token for `user` (groups as [`Self::token_for`] gives them).
    pub fn write_kubeconfig(&self, path: &Path, user: &str) -> Result<()> {
        self.write_identity_kubeconfig(path, &Identity::for_user(user), Credential::Token)
    }

    /// Writes a kubeconfig (mode 0600) authenticating as `identity` with `credential`.
    pub fn write_identity_kubeconfig(
        &self,
        path: &Path,
        identity: &Identity,
        credential: Credential,
    ) -> Result<()> {
        let ca = self.ca_pem.as_deref();
        match credential {
            Credential::Token => {
                let token = self.token_for_identity(identity);
                let credential = UserCredential::Token(&token);
                kubeconfig::write(path, &self.url, ca, &identity.user, &credential)
            }
            Credential::ClientCertificate => {
                let cert = self.client_certificate(identity)?;
                let credential = UserCredential::ClientCertificate {
                    cert_pem: &cert.cert_pem,
                    key_pem: &cert.key_pem,
                };
                kubeconfig::write(path, &self.url, ca, &identity.user, &credential)
            }
        }
    }

    /// Writes the kubeconfig a kubelet of node `name` has: a client certificate for
    /// `system:node:NAME` in `system:nodes` (a token over plain HTTP).
    pub fn write_node_kubeconfig(&self, path: &Path, name: &str) -> Result<()> {
        let credential = if self.ca_pem.is_some() {
            Credential::ClientCertificate
        } else {
            Credential::Token
        };
        self.write_identity_kubeconfig(path, &Identity::node(name), credential)
    }

    /// Writes a kubeconfig with the token of service account `namespace/name`.
    pub fn write_service_account_kubeconfig(
        &self,
        path: &Path,
        namespace: &str,
        name: &str,
    ) -> Result<()> {
        let identity = Identity::service_account(namespace, name);
        self.write_identity_kubeconfig(path, &identity, Credential::Token)
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
}
