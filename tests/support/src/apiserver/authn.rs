//! Authentication as kube-apiserver chains it: a client certificate signed by the client CA
//! (user = CN, groups = O), then a bearer token, then — where allowed — the anonymous user;
//! `system:authenticated` is added to every authenticated identity. An unknown token is a
//! 401 even where anonymous requests are allowed. Impersonation (`Impersonate-User`,
//! `Impersonate-Group`) is authorized with the `impersonate` verb on users, groups and
//! service accounts.

use std::collections::HashMap;
use std::sync::Mutex;

use anyhow::{Context, Result};
use hyper::HeaderMap;
use hyper::header::AUTHORIZATION;

use super::attributes::Attributes;
use super::identity::{ANONYMOUS, AUTHENTICATED, Identity, UNAUTHENTICATED};
use super::status::ApiError;
use crate::tls::{CertifiedKey, TestCa};

/// The credentials the server accepts.
pub struct Authenticator {
    tokens: Mutex<HashMap<String, Identity>>,
    /// Signs client certificates; None over plain HTTP.
    client_ca: Option<TestCa>,
    /// Requests without credentials are `system:anonymous` (kube-apiserver's
    /// `--anonymous-auth`); otherwise only health and version are open to them.
    anonymous: bool,
}

impl Authenticator {
    pub fn new(client_ca: Option<TestCa>, anonymous: bool) -> Self {
        Self {
            tokens: Mutex::new(HashMap::new()),
            client_ca,
            anonymous,
        }
    }

    /// The bearer token of `identity`, registered on first use.
    pub fn token_for(&self, identity: &Identity) -> String {
        let mut tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((token, _)) = tokens.iter().find(|(_, id)| *id == identity) {
            return token.clone();
        }
        let token = format!("mco-test-{}", super::strategy::new_uid());
        tokens.insert(token.clone(), identity.clone());
        token
    }

    /// The identity a bearer token stands for, if the server issued it (a TokenReview's
    /// answer), with `system:authenticated`.
    pub fn identity_of_token(&self, token: &str) -> Option<Identity> {
        let tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        tokens.get(token).map(|id| id.clone().authenticated())
    }

    /// A client certificate for `identity` (CN = user, O = its first group: one organisation
    /// is all the certificate generator writes; use a token for more groups).
    pub fn client_cert(&self, identity: &Identity) -> Result<CertifiedKey> {
        let ca = self
            .client_ca
            .as_ref()
            .context("client certificates need the HTTPS server (it has no client CA over HTTP)")?;
        anyhow::ensure!(
            identity.groups.len() <= 1,
            "a client certificate carries one group; {identity} needs a token"
        );
        let group = identity.groups.first().map_or("", String::as_str);
        ca.issue_client_cert(&identity.user, group)
    }

    pub fn client_ca_pem(&self) -> Option<&str> {
        self.client_ca.as_ref().map(TestCa::cert_pem)
    }

    /// The identity of a request: its verified client certificate's, its token's, or the
    /// anonymous user's; `public` requests (health, version) are let in without credentials.
    pub fn authenticate(
        &self,
        headers: &HeaderMap,
        peer: Option<&Identity>,
        public: bool,
    ) -> Result<Identity, ApiError> {
        if let Some(identity) = peer {
            return Ok(identity.clone().authenticated());
        }
        if let Some(value) = headers.get(AUTHORIZATION) {
            let token = value
                .to_str()
                .ok()
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::trim)
                .ok_or_else(ApiError::unauthorized)?;
            return self
                .identity_of_token(token)
                .ok_or_else(ApiError::unauthorized);
        }
        if self.anonymous || public {
            return Ok(Identity::anonymous());
        }
        Err(ApiError::unauthorized())
    }
}

/// The identity in a verified client certificate (DER): CN and every O.
pub fn identity_from_certificate(der: &[u8]) -> Option<Identity> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let user = subject
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok())
        .map(String::from)
        .collect();
    Some(Identity { user, groups })
}

/// The identity a request impersonates, if it asks to: `Impersonate-User` (a service account
/// user gets its groups when none are given) and `Impersonate-Group`s, each allowed by
/// `may(verb impersonate on users|groups|serviceaccounts)` for the real requester.
pub fn impersonate(
    headers: &HeaderMap,
    may: &dyn Fn(&Attributes) -> Result<(), ApiError>,
) -> Result<Option<Identity>, ApiError> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(String::from)
            .collect()
    };
    let users = values("impersonate-user");
    let mut groups = values("impersonate-group");
    let Some(user) = users.first() else {
        if groups.is_empty() {
            return Ok(None);
        }
        return Err(ApiError::internal(
            "requested [Impersonate-Group] without impersonating a user",
        ));
    };
    let target = Identity::for_user(user);
    let check = |resource: &str, namespace: &str, name: &str| {
        may(&Attributes::resource(
            "impersonate",
            "",
            resource,
            namespace,
            name,
        ))
    };
    for group in &groups {
        check("groups", "", group)?;
    }
    match target.service_account_name() {
        Some((ns, name)) => {
            check("serviceaccounts", ns, name)?;
            // A service account's groups are known; they need no permission of their own.
            if groups.is_empty() {
                groups = target.groups.clone();
            }
        }
        None => check("users", "", user)?,
    }
    if user != ANONYMOUS
        && !groups
            .iter()
            .any(|g| g == AUTHENTICATED || g == UNAUTHENTICATED)
    {
        groups.push(AUTHENTICATED.to_string());
    }
    Ok(Some(Identity {
        user: user.clone(),
        groups,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_certificates_and_anonymous() {
        let ca = TestCa::new("client-ca").unwrap();
        let authn = Authenticator::new(Some(ca), false);
        let node = Identity::node("n1");
        let token = authn.token_for(&node);
        assert_eq!(authn.token_for(&node), token, "one token per identity");
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
        let who = authn.authenticate(&headers, None, false).unwrap();
        assert_eq!(who.groups, ["system:nodes", AUTHENTICATED]);
        headers.insert(AUTHORIZATION, "Bearer nope".parse().unwrap());
        assert_eq!(
            authn.authenticate(&headers, None, true).unwrap_err().code,
            401
        );
        let none = HeaderMap::new();
        assert_eq!(
            authn.authenticate(&none, None, false).unwrap_err().code,
            401
        );
        assert_eq!(
            authn.authenticate(&none, None, true).unwrap().user,
            ANONYMOUS
        );

        let cert = authn.client_cert(&node).unwrap();
        let der = rustls_pemfile::certs(&mut cert.cert_pem.as_bytes())
            .next()
            .unwrap()
            .unwrap();
        assert_eq!(identity_from_certificate(&der).unwrap(), node);
        assert!(
            authn
                .client_cert(&Identity::service_account("a", "b"))
                .is_err()
        );
    }

    #[test]
    fn impersonation_is_authorized_per_target() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "impersonate-user",
            "system:serviceaccount:mco:companion".parse().unwrap(),
        );
        let asked = Mutex::new(Vec::new());
        let allow = |a: &Attributes| {
            asked.lock().unwrap().push(format!(
                "{} {} {}/{}",
                a.verb, a.resource, a.namespace, a.name
            ));
            Ok(())
        };
        let who = impersonate(&headers, &allow).unwrap().unwrap();
        assert_eq!(
            who.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:mco",
                AUTHENTICATED
            ]
        );
        assert_eq!(
            *asked.lock().unwrap(),
            ["impersonate serviceaccounts mco/companion"]
        );

        headers.insert("impersonate-user", "system:node:n1".parse().unwrap());
        headers.insert("impersonate-group", "system:nodes".parse().unwrap());
        let deny = |a: &Attributes| Err(ApiError::forbidden("", &a.resource, &a.name, "no"));
        assert_eq!(impersonate(&headers, &deny).unwrap_err().code, 403);
        let who = impersonate(&headers, &allow).unwrap().unwrap();
        assert_eq!(who.node_name(), Some("n1"));
    }
}
