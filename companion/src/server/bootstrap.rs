//! First-boot bootstrap tokens: how a node proves its name before its kubelet has a client
//! certificate.
//!
//! At first boot Ignition is the client and holds no certificate, so without a credential a node
//! gets only its pool's config and its per-node config waits for the first update. A node's
//! pointer config can carry a per-node token instead (Ignition 3.1+ `httpHeaders`):
//! `Authorization: Bearer <token>` together with the name it proves, `X-MCO-Node: <name>` (or
//! `?node=<name>`). The server keeps one token per node in a directory, a file named after the
//! node holding its token, which is exactly how Kubernetes mounts a Secret whose keys are node
//! names. A token proves its node's name as a client certificate does, and only over TLS.
//!
//! A token carries its own expiry, `mco1.<Unix seconds>.<secret>` ([`mint`] makes one): a
//! file's mtime cannot date it, since a Secret volume rewrites its files whenever any key
//! changes or the pod restarts, which would renew every token. The expiry is authenticated by
//! the token's equality with its file, and may lie at most the configured lifetime ahead (a
//! token made to last for years is refused). A token file is refused when others may read it
//! (the key file's rule), when it is shorter than [`MIN_TOKEN_BYTES`], or when its token has no
//! expiry while tokens have a lifetime. Tokens are compared in constant time and never logged;
//! a refusal tells the client only that its token was refused, the log says why.
//!
//! A token is not single-use: Ignition fetches its config again when a response did not reach
//! it whole, and a token spent by the lost response would fail that node's first boot. It
//! stays valid until its expiry, or until its key leaves the Secret.

use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use http::header::AUTHORIZATION;
use http::{HeaderMap, Uri};
use subtle::ConstantTimeEq as _;

use super::Peer;
use super::routes;

/// The shortest token accepted: 32 bytes (e.g. `openssl rand -hex 16` gives 32 characters).
pub const MIN_TOKEN_BYTES: usize = 32;
/// A token file is read up to this size; a longer one is refused.
const MAX_TOKEN_FILE_BYTES: u64 = 4096;
/// The prefix of a token that carries its expiry: `mco1.<Unix seconds>.<secret>`.
pub const TOKEN_PREFIX: &str = "mco1.";

/// A new token for `node`-less use (the node is the file's name), expiring at `expires`: the
/// prefix, the expiry, and 16 random bytes in hex.
pub fn mint(expires: SystemTime) -> String {
    let secs = expires
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let secret: String = rand::random::<[u8; 16]>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{TOKEN_PREFIX}{secs}.{secret}")
}

/// The expiry a token carries: `None` for a token without the prefix, an error for one with
/// the prefix and not the form (it names no part of the token).
fn expiry_of(token: &str) -> Result<Option<SystemTime>, String> {
    let Some(rest) = token.strip_prefix(TOKEN_PREFIX) else {
        return Ok(None);
    };
    let malformed = || {
        format!(
            "is not {TOKEN_PREFIX}<expiry, Unix seconds>.<secret of at least {MIN_TOKEN_BYTES} bytes>"
        )
    };
    let (secs, secret) = rest.split_once('.').ok_or_else(malformed)?;
    let secs: u64 = secs.parse().map_err(|_| malformed())?;
    if secret.len() < MIN_TOKEN_BYTES {
        return Err(malformed());
    }
    SystemTime::UNIX_EPOCH
        .checked_add(Duration::from_secs(secs))
        .map(Some)
        .ok_or_else(malformed)
}

/// The per-node tokens of one directory.
#[derive(Debug, Clone)]
pub struct BootstrapTokens {
    dir: PathBuf,
    lifetime: Option<Duration>,
}

/// What a request's credentials prove, before the route answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authenticated {
    /// The peer as the connection established it (no token presented, or no tokens configured).
    Connection,
    /// A valid token for this node.
    Token(String),
    /// A token that proves nothing; the text is for the client (it names no secret).
    Refused(String),
}

impl BootstrapTokens {
    /// Tokens from `dir`; `lifetime` is the furthest ahead a token's expiry may lie (`None`:
    /// tokens without an expiry are accepted too, and never expire). The directory must exist
    /// and be a directory (it may be empty: a Secret volume with no tokens yet).
    pub fn open(dir: &Path, lifetime: Option<Duration>) -> anyhow::Result<Self> {
        let meta = fs::metadata(dir)
            .map_err(|e| anyhow::anyhow!("bootstrap token directory {}: {e}", dir.display()))?;
        anyhow::ensure!(
            meta.is_dir(),
            "bootstrap token directory {} is not a directory",
            dir.display()
        );
        Ok(BootstrapTokens {
            dir: dir.to_path_buf(),
            lifetime,
        })
    }

    /// Whether `token` is `node`'s token at `now`; the error says why not (for the log: it
    /// names files and ages, never a token).
    pub fn check(&self, node: &str, token: &str, now: SystemTime) -> Result<(), String> {
        // node names are DNS subdomains: no '/', no leading '.', so this stays in the directory
        if !routes::is_dns_subdomain(node) {
            return Err(format!("{node:?} is not a node name"));
        }
        let path = self.dir.join(node);
        let expected = read_token_file(&path)?;
        let expiry =
            expiry_of(&expected).map_err(|why| format!("the token in {} {why}", path.display()))?;
        match (expiry, self.lifetime) {
            (Some(expires), lifetime) => {
                let at = humantime::format_rfc3339_seconds(expires);
                if now >= expires {
                    return Err(format!("the token in {} expired at {at}", path.display()));
                }
                if let Some(lifetime) = lifetime
                    && expires.duration_since(now).unwrap_or_default() > lifetime
                {
                    return Err(format!(
                        "the token in {} expires at {at}, further ahead than the tokens' lifetime of {} (--bootstrap-token-hours)",
                        path.display(),
                        humantime::format_duration(lifetime)
                    ));
                }
            }
            (None, Some(_)) => {
                return Err(format!(
                    "the token in {} carries no expiry: a token is {TOKEN_PREFIX}<expiry, Unix seconds>.<secret> (mco-companion bootstrap-token prints one), unless --bootstrap-token-hours 0 accepts tokens that never expire",
                    path.display()
                ));
            }
            (None, None) => {}
        }
        if bool::from(expected.as_bytes().ct_eq(token.as_bytes())) {
            Ok(())
        } else {
            Err(format!("the token does not match {}", path.display()))
        }
    }

    /// Resolves a request's bearer token against the node it claims. `tls` is false on the
    /// plain-HTTP listener, where a token is refused (it has crossed the network in clear).
    /// A peer the connection already proved (a client certificate) is kept: the token then
    /// adds nothing.
    pub fn authenticate(
        tokens: Option<&BootstrapTokens>,
        tls: bool,
        peer: &Peer,
        uri: &Uri,
        headers: &HeaderMap,
    ) -> Authenticated {
        let Some(presented) = headers.get(AUTHORIZATION) else {
            return Authenticated::Connection;
        };
        let Some(tokens) = tokens else {
            // as the MCS: a server without tokens ignores credentials it was not asked to check
            return Authenticated::Connection;
        };
        if matches!(peer, Peer::Node(_)) {
            return Authenticated::Connection;
        }
        if !tls {
            tracing::warn!("a bootstrap token was sent over plain HTTP and is refused");
            return Authenticated::Refused(
                "bootstrap tokens are accepted only over HTTPS".to_string(),
            );
        }
        let Some(token) = bearer_token(presented) else {
            return Authenticated::Refused(
                "the Authorization header is not \"Bearer <token>\"".to_string(),
            );
        };
        let node = match routes::node_identity(uri, headers) {
            Ok(Some(node)) => node,
            Ok(None) => {
                return Authenticated::Refused(format!(
                    "a bootstrap token needs the node it is for ({} header or node query \
                     parameter)",
                    routes::NODE_HEADER
                ));
            }
            Err(why) => return Authenticated::Refused(why),
        };
        match tokens.check(&node, token, SystemTime::now()) {
            Ok(()) => Authenticated::Token(node),
            Err(why) => {
                tracing::warn!("bootstrap token for node {node:?} refused: {why}");
                Authenticated::Refused(format!("the bootstrap token for node {node:?} is refused"))
            }
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header (the scheme is case-insensitive).
fn bearer_token(value: &http::HeaderValue) -> Option<&str> {
    let text = value.to_str().ok()?.trim();
    let (scheme, token) = text.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Reads one token file: not readable by others, at most [`MAX_TOKEN_FILE_BYTES`], one line
/// of at least [`MIN_TOKEN_BYTES`].
fn read_token_file(path: &Path) -> Result<String, String> {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let file = fs::File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("no token file {}", path.display()),
        _ => format!("{}: {e}", path.display()),
    })?;
    let meta = file
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    let mode = meta.permissions().mode() & 0o777;
    let allowed = if meta.uid() == 0 { 0o640 } else { 0o600 };
    if mode & !allowed != 0 {
        return Err(format!(
            "token file {} is accessible to others or to its group (mode {mode:04o}): it must \
             be readable by its owner only, or also by its group when root owns it",
            path.display()
        ));
    }
    let mut text = String::new();
    file.take(MAX_TOKEN_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if text.len() as u64 > MAX_TOKEN_FILE_BYTES {
        return Err(format!(
            "token file {} is longer than {MAX_TOKEN_FILE_BYTES} bytes",
            path.display()
        ));
    }
    let token = text.trim_end_matches(['\n', '\r']);
    if token.len() < MIN_TOKEN_BYTES || token.contains(['\n', '\r']) {
        return Err(format!(
            "token file {} must hold one line of at least {MIN_TOKEN_BYTES} bytes",
            path.display()
        ));
    }
    Ok(token.to_string())
}

#[cfg(test)]
mod tests;
