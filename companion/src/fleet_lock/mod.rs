//! The FleetLock server (Zincati's reboot coordination protocol, [`machine_config::fleetlock`])
//! on the config server's listener: `POST /v1/pre-reboot` and `POST /v1/steady-state`, a
//! counting semaphore per group (1 slot unless configured) with owned, recursive locks.
//!
//! | answer | when | `kind` |
//! |---|---|---|
//! | 200, empty | locked (or already held by this id); unlocked (or not held) | — |
//! | 400 | no `fleet-lock-protocol: true` header | `invalid_missing_protocol_header` |
//! | 400 | a body that is not `{"client_params": {"id", "group"}}` with a valid group | `invalid_client_params` |
//! | 400 | a group that is not known ([`access`]) | `invalid_client_params` |
//! | 401 | with `--client-ca`: a client that did not prove to be a node, or the plain-HTTP listener | `unauthenticated` |
//! | 403 | a client that proved to be a node (its certificate or bootstrap token) asks for another id, or (cluster) another pool's group | `invalid_client_params` |
//! | 405 | not a POST | `invalid_method` |
//! | 409 | every slot of the group is held by others (not named) | `failed_lock_semaphore_full` |
//! | 413 | a body over 4 KiB | `invalid_client_params` |
//! | 500 | the state could not be read or written | `failed_semaphore_backend` |
//! | 503 | (cluster) another replica kept changing the group; try again | `failed_semaphore_backend` |
//!
//! Where the semaphores live: standalone a state file ([`file_store`]), in a cluster Leases
//! ([`lease_store`]), so that restarts and replicas agree on who holds a slot.

pub mod access;
pub mod args;
pub mod file_store;
pub mod lease_store;
pub mod semaphore;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Bytes;
use machine_config::fleetlock::{
    ErrorBody, HEADER, HEADER_VALUE, PRE_REBOOT_PATH, Request, STEADY_STATE_PATH, kind,
};

use crate::peer::Peer;

/// The largest request body read.
pub const MAX_BODY_BYTES: usize = 4096;
/// The `kind` of a request with another method than POST.
pub const INVALID_METHOD: &str = "invalid_method";
/// The `kind` of a request from a client that did not prove to be a node, where nodes must.
pub const UNAUTHENTICATED: &str = "unauthenticated";

/// Why a lock operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockError {
    Full(semaphore::Full),
    /// The store could not be read or written.
    Backend(String),
    /// Concurrent writers: try again.
    Busy(String),
}

/// Where the semaphores are kept.
#[async_trait]
pub trait LockStore: Send + Sync {
    /// `RecursiveLock` for `id` in `group` with `slots` slots.
    async fn lock(&self, group: &str, id: &str, slots: u32) -> Result<(), LockError>;
    /// `UnlockIfHeld`.
    async fn unlock(&self, group: &str, id: &str) -> Result<(), LockError>;
    fn describe(&self) -> String;
}

/// Slots per group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slots {
    pub default: u32,
    pub per_group: BTreeMap<String, u32>,
}

impl Default for Slots {
    fn default() -> Self {
        Slots {
            default: 1,
            per_group: BTreeMap::new(),
        }
    }
}

impl Slots {
    pub fn of(&self, group: &str) -> u32 {
        self.per_group.get(group).copied().unwrap_or(self.default)
    }
}

/// The FleetLock service.
pub struct FleetLock {
    store: Arc<dyn LockStore>,
    slots: Slots,
    groups: Arc<dyn access::Groups>,
    /// `--client-ca`: only proven nodes, over TLS ([`access::authenticate`]).
    nodes_only: bool,
}

/// Whether `path` is one of the FleetLock endpoints.
pub fn is_fleet_lock_path(path: &str) -> bool {
    path == PRE_REBOOT_PATH || path == STEADY_STATE_PATH
}

impl FleetLock {
    /// `groups`: the groups clients may use; `nodes_only`: whether clients must prove to be
    /// nodes (the server checks client certificates).
    pub fn new(
        store: Arc<dyn LockStore>,
        slots: Slots,
        groups: Arc<dyn access::Groups>,
        nodes_only: bool,
    ) -> Self {
        tracing::info!(store = store.describe(), slots = slots.default, per_group = ?slots.per_group, groups = groups.describe(), nodes_only, "FleetLock served at {PRE_REBOOT_PATH} and {STEADY_STATE_PATH}");
        if !nodes_only {
            tracing::warn!(
                "FleetLock is anonymous: without --client-ca any client that reaches the \
                 listener can take or release any slot"
            );
        }
        FleetLock {
            store,
            slots,
            groups,
            nodes_only,
        }
    }

    /// Answers a request to one of the endpoints ([`is_fleet_lock_path`]). `body`: `None` when
    /// it was over [`MAX_BODY_BYTES`]; `over_tls`: whether it came on the TLS listener.
    pub async fn answer(
        &self,
        method: &Method,
        path: &str,
        headers: &HeaderMap,
        body: Option<&[u8]>,
        peer: &Peer,
        over_tls: bool,
    ) -> Response<Full<Bytes>> {
        if *method != Method::POST {
            return error(
                StatusCode::METHOD_NOT_ALLOWED,
                INVALID_METHOD,
                format!("{path} takes POST"),
            );
        }
        if headers.get(HEADER).and_then(|v| v.to_str().ok()) != Some(HEADER_VALUE) {
            return error(
                StatusCode::BAD_REQUEST,
                kind::MISSING_HEADER,
                format!("the request has no '{HEADER}: {HEADER_VALUE}' header"),
            );
        }
        let proven = match access::authenticate(peer, over_tls, self.nodes_only) {
            Ok(proven) => proven,
            Err(why) => return error(StatusCode::UNAUTHORIZED, UNAUTHENTICATED, why),
        };
        let Some(body) = body else {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                kind::INVALID_REQUEST,
                format!("the request body is over {MAX_BODY_BYTES} bytes"),
            );
        };
        let request = match Request::parse(body) {
            Ok(r) => r,
            Err(why) => return error(StatusCode::BAD_REQUEST, kind::INVALID_REQUEST, why),
        };
        let (id, group) = (&request.client_params.id, &request.client_params.group);
        // a node that proved its name holds and releases only its own slot
        if let Some(node) = proven
            && node != id
        {
            return error(
                StatusCode::FORBIDDEN,
                kind::INVALID_REQUEST,
                format!("client_params.id {id:?}: the client proved to be node {node:?}"),
            );
        }
        if group.len() > access::MAX_GROUP_BYTES {
            return error(
                StatusCode::BAD_REQUEST,
                kind::INVALID_REQUEST,
                format!(
                    "client_params.group is {} bytes long: at most {} are served",
                    group.len(),
                    access::MAX_GROUP_BYTES
                ),
            );
        }
        let locking = path == PRE_REBOOT_PATH;
        // Giving back one's own slot is harmless in any known group (a node moved to another
        // pool still frees the old one); taking one is for the node's own pool only.
        let owner = if locking { proven } else { None };
        match self.groups.check(group, owner).await {
            Ok(()) => {}
            Err(access::GroupRefusal::Unknown(why)) => {
                return error(StatusCode::BAD_REQUEST, kind::INVALID_REQUEST, why);
            }
            Err(access::GroupRefusal::NotOwn(why)) => {
                return error(StatusCode::FORBIDDEN, kind::INVALID_REQUEST, why);
            }
            Err(access::GroupRefusal::Backend(why)) => {
                tracing::error!(group, id, "FleetLock: {why}");
                return error(StatusCode::INTERNAL_SERVER_ERROR, kind::BACKEND, why);
            }
        }
        let result = if locking {
            self.store.lock(group, id, self.slots.of(group)).await
        } else {
            self.store.unlock(group, id).await
        };
        let op = if locking { "lock" } else { "unlock" };
        match result {
            Ok(()) => {
                tracing::info!(group, id, "FleetLock {op}: ok");
                let mut response = Response::new(Full::new(Bytes::new()));
                response
                    .headers_mut()
                    .insert(CONTENT_LENGTH, HeaderValue::from_static("0"));
                response
            }
            Err(LockError::Full(full)) => {
                tracing::info!(group, id, holders = ?full.holders, "FleetLock {op}: semaphore full");
                error(
                    StatusCode::CONFLICT,
                    kind::SEMAPHORE_FULL,
                    // the holders are other nodes: logged above, never told to a client
                    format!(
                        "semaphore of group {group:?} is full: its {} slot(s) are held by other \
                         clients",
                        full.slots,
                    ),
                )
            }
            Err(LockError::Busy(why)) => {
                tracing::warn!(group, id, "FleetLock {op}: {why}");
                error(StatusCode::SERVICE_UNAVAILABLE, kind::BACKEND, why)
            }
            Err(LockError::Backend(why)) => {
                tracing::error!(group, id, "FleetLock {op}: {why}");
                error(StatusCode::INTERNAL_SERVER_ERROR, kind::BACKEND, why)
            }
        }
    }
}

/// An error answer with the protocol's body.
fn error(status: StatusCode, kind: &str, value: String) -> Response<Full<Bytes>> {
    let body = serde_json::to_vec(&ErrorBody::new(kind, value)).unwrap_or_default();
    let length = body.len();
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
    response
}

#[cfg(test)]
mod tests;
