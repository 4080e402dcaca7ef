//! mco-companion: the minimal cluster side of mco-agent.
//!
//! - [`negotiate`]: Ignition spec negotiation from the `Accept` header, as the MCS does it.
//! - [`server`]: the config server (TLS with rustls/ring, HTTP/1.1, `/config/<pool>`,
//!   `/healthz`, limits), over any [`server::ConfigSource`].
//! - [`served`]: the body served for a rendered config (appended files, down-translation) and
//!   its cache.
//! - [`manifests`] and [`standalone`]: standalone mode from a directory of manifests,
//!   re-rendered when it changes.
//! - [`cluster`]: cluster mode: the render and node controllers, the drain controller, the
//!   node disruption policy status (as the MCO's controllers and operator do).
//! - [`leader`]: leader election among replicas (a Lease): only the leader runs the
//!   controllers, and a fence keeps a replica that lost the Lease from writing.
//! - [`fleet_lock`]: the FleetLock server (reboot slots per group) on the same listener.
//! - [`peer`]: what a client proved about itself (certificate, bootstrap token, nothing).
//! - [`status_page`]: the fleet's status page and `/status.json` on a listener of their own.
//! - [`cli`]: the `mco-companion` command line (`render`, `serve`).
//! - [`allocator`]: the C allocator's settings for a long-running server of large bodies.
//!
//! Rendering itself (pool selection, the MCO merge, per-node configs, rendered names) lives in
//! `machine_config::render`; down-translation in `machine_config::downtranslate`.

pub mod allocator;
pub mod cli;
pub mod cluster;
pub mod fleet_lock;
pub mod leader;
pub mod manifests;
pub mod negotiate;
pub mod peer;
pub mod served;
pub mod server;
pub mod standalone;
pub mod status_page;
