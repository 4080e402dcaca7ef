//! The cluster end-to-end tier: the API test server (`mco-test-apiserver --rbac`), the companion
//! (`mco-companion serve --controller`, real TLS, asking for kubelet client certificates) and
//! several agents (`mco-agent start`, host-first: the Node's `desiredConfig`, the rendered
//! config fetched from the companion by name), each a process, each agent on its own sandbox
//! root; nodes provisioned the MCO way (a first boot through the real Ignition, then the Node
//! registers) and the pool's availability sampled throughout.
//!
//! A scenario is one short function over [`Cluster`] (`tests/cluster_e2e.rs`):
//!
//! ```ignore
//! let mut cluster = Cluster::start(binaries!(), Spec::default()).await?;
//! let next = cluster.change_base_file("base: 2\n").await?;
//! cluster.wait_pool_done(&next, secs(60)).await?;
//! cluster.finish().await?;
//! ```
//!
//! Who is who: the test is the API server's administrator; the companion runs as the service
//! account the shipped manifests give it (`mco-companion/mco-companion`), each agent as its
//! kubelet (`system:node:NAME`, a client certificate), under the RBAC of the repository's
//! `manifests/` (loaded from them at start, so a rule they lack fails a scenario, and
//! [`Cluster::finish`] fails on any request the server refused them).

pub mod admin;
pub mod api;
pub mod cluster;
pub mod companion;
pub mod ignition;
pub mod image;
pub mod manifests;
pub mod mcn;
pub mod node;
pub mod os;
pub mod proxy;
pub mod sampler;
pub mod scale;
pub mod transitions;

use std::path::PathBuf;
use std::time::Duration;

pub use cluster::{Cluster, DrainMode, NODE_NAME, Spec};

/// The binaries under test (this package's copies of them: see `Cargo.toml`).
#[derive(Debug, Clone)]
pub struct Binaries {
    pub agent: PathBuf,
    pub companion: PathBuf,
    pub apiserver: PathBuf,
    /// The rpm-ostree stand-in, for nodes with an OS ([`Spec::os`]).
    pub rpmostreed: PathBuf,
}

/// The [`Binaries`] cargo built for the calling test or benchmark.
#[macro_export]
macro_rules! binaries {
    () => {
        $crate::Binaries {
            agent: env!("CARGO_BIN_EXE_e2e-mco-agent").into(),
            companion: env!("CARGO_BIN_EXE_e2e-mco-companion").into(),
            apiserver: env!("CARGO_BIN_EXE_e2e-mco-test-apiserver").into(),
            rpmostreed: env!("CARGO_BIN_EXE_e2e-mco-test-rpmostreed").into(),
        }
    };
}

/// `n` seconds.
pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}
