//! The node side of mco-agent.
//!
//! - [`rootfs`]: root-confined file access (every path resolved inside `--root`), atomic writes,
//!   the root's users and groups, `/etc/shadow`.
//! - [`apply`]: applying a current→desired config change to a root (files, units, backups,
//!   SSH keys, password), validated and decoded before the disk is touched.
//! - [`validate`]: on-disk validation with the MCD's messages, every mismatch reported.
//! - [`units`]: unit enablement behind the [`units::UnitEnablement`] trait; offline links for a root.
//! - [`input`]: reading configs given on the command line and the recorded `currentconfig`.
//! - [`cli`]: the `mco-agent` subcommands.
//! - [`daemon`]: `mco-agent start`: start-up checks, following the desired config, drift monitor.
//! - [`engine`]: the update engine (state machine, persisted steps, rollback, verification).
//! - [`cluster`]: the Node object (annotation protocol, events, `desiredConfig` watch), drains
//!   through the Eviction API, rendered MachineConfigs from the API server.
//! - [`host`]: the live host over D-Bus: systemd (unit files, jobs) and reboot through logind.
//! - [`logging`]: journald or stderr logging, set up once per binary.
//! - [`metrics`]: Prometheus metrics (the MCD's names and ours) fed by the engine, served on
//!   `127.0.0.1:8797/metrics`; the kubelet health check.
//! - [`notify`]: sd_notify READY/STATUS/WATCHDOG.
//! - [`os`]: rpm-ostree over D-Bus (kernel arguments, OS image, kernel type, extensions), the
//!   booted deployment read with libostree, and the MCD's OS checks.

pub mod apply;
pub mod cli;
pub mod cluster;
pub mod daemon;
pub mod engine;
pub mod failpoints;
pub mod host;
pub mod input;
pub mod logging;
pub mod metrics;
pub mod notify;
pub mod once;
pub mod os;
pub mod rootfs;
pub mod units;
pub mod validate;
