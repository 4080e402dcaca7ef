//! The config server: HTTPS (and optionally plain HTTP) on hyper 1, HTTP/1.1 only, answering
//! `/config/<pool>` and `/healthz` like the machine-config-server. What it serves comes from a
//! [`ConfigSource`]: the standalone manifests directory or the cluster.

mod guard;
mod listen;
pub mod routes;
pub mod tls;

use hyper::body::Bytes;
use machine_config::SpecVersion;

pub use listen::{Limits, serve};

/// One request for a pool's config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolRequest {
    /// Pool name from the path.
    pub pool: String,
    /// The node identity the client presented, if any (see [`routes`]).
    pub node: Option<String>,
    /// The negotiated Ignition spec.
    pub spec: SpecVersion,
}

/// Why a config cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServeError {
    /// HTTP 404: no such pool (standalone mode).
    #[error("not found: {0}")]
    NotFound(String),
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
