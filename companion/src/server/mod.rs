//! The config server: HTTPS (and optionally plain HTTP) on hyper 1, HTTP/1.1 only, answering
//! `/config/<pool>` and `/healthz` like the machine-config-server. What it serves comes from a
//! [`ConfigSource`]: the standalone manifests directory or the cluster.

pub mod bootstrap;
pub(crate) mod guard;
pub mod identity;
mod listen;
pub mod routes;
pub mod tls;

use hyper::body::Bytes;
use machine_config::SpecVersion;

pub use crate::peer::Peer;
pub use listen::{Limits, serve, serve_with_fleet_lock};

/// One request for a pool's config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolRequest {
    /// Pool name from the path.
    pub pool: String,
    /// The node the client proved to be (its client certificate, see [`identity`], or its
    /// bootstrap token, see [`bootstrap`]); only a proven node gets a per-node config. A name the client merely claims is not here.
    pub node: Option<String>,
    /// The rendered config the client asks for by name (`X-MCO-Config`, see [`routes`]);
    /// `None`: whatever the pool serves, as the MCS answers.
    pub config: Option<String>,
    /// The negotiated Ignition spec.
    pub spec: SpecVersion,
}

/// Why a config cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServeError {
    /// HTTP 404: no such pool (standalone mode), or no such rendered config.
    #[error("not found: {0}")]
    NotFound(String),
    /// HTTP 403: the client may not have this config (another pool's, or another node's own).
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// HTTP 500: the config exists but cannot be produced, or (cluster mode, as the MCS) the pool
    /// could not be fetched.
    #[error("{0}")]
    Failed(String),
}

/// Produces the bytes served for a pool request (the full Ignition config with appended files).
pub trait ConfigSource: Send + Sync + 'static {
    /// The response body for `request`.
    fn config(&self, request: &PoolRequest) -> Result<Bytes, ServeError>;
}
