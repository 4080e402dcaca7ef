//! The node side of mco-agent.
//!
//! The modules, from the bottom up. A module uses only modules of its own layer or below
//! (`tests/layers.rs` checks every `crate::` path against this table), and the pure model,
//! the `machine-config` crate (with the MCO's on-node names in `machine_config::mco`), is
//! under all of them.
//!
//! 0. Foundations
//!    - [`rootfs`]: root-confined file access (every path resolved inside `--root`), atomic
//!      writes, the root's users and groups, `/etc/shadow`.
//!    - [`failpoints`]: crash and failure injection (feature `failpoints`).
//!    - [`logging`]: journald or stderr logging, set up once per binary.
//!    - [`notify`]: sd_notify READY/STATUS/WATCHDOG.
//!    - [`stop`]: SIGTERM/SIGINT turned into a stop request honoured within seconds.
//!    - [`idle_pages`]: the executable's pages handed back to the kernel while the daemon idles.
//!    - [`system_bus`]: the system bus connection of every D-Bus seam, with its call timeout.
//! 1. Files of a root
//!    - [`certs`]: the certificate writer's files from the ControllerConfig (kubelet and cloud
//!      CAs, registry CAs, the merged pull secret) and the service-CA rotation of kubeconfigs.
//!    - [`apply`]: applying a current→desired config change to a root (files, units, backups,
//!      SSH keys, password), validated and decoded before the disk is touched.
//!    - [`validate`]: on-disk validation with the MCD's messages, every mismatch reported.
//!    - [`units`]: unit enablement behind the [`units::UnitEnablement`] trait; offline links
//!      for a root.
//!    - [`input`]: reading configs (a file, an http(s) URL, a config server's answer) and the
//!      recorded `currentconfig`.
//!    - [`hooks`]: the administrator's update hooks (`/etc/mco-agent/hooks.d/<phase>/`):
//!      executables and Ansible playbooks, found and run with a timeout.
//! 2. The host and the cluster
//!    - [`os`]: rpm-ostree over D-Bus (kernel arguments, OS image, kernel type, extensions),
//!      the booted deployment read with libostree, and the MCD's OS checks.
//!    - [`host`]: the live host: systemd (unit files, jobs) and reboot through logind over
//!      D-Bus, the container runtime's image service (CRI) over gRPC.
//!    - [`cluster`]: the Node object (annotation protocol, events, `desiredConfig` watch),
//!      drains through the Eviction API, rendered MachineConfigs from the API server.
//!    - [`strategy`]: when a disruptive update may run: at once, in maintenance windows, or
//!      under a FleetLock reboot slot.
//! 3. The update, and the pinned images
//!    - [`engine`]: the update engine (state machine, persisted steps, rollback,
//!      verification).
//!    - [`pinned`]: the pinned image sets of the node's pools pulled through the runtime and
//!      pinned in CRI-O's config, reported in the MachineConfigNode.
//! 4. Ways to run it
//!    - [`daemon`]: `mco-agent start`: start-up checks, following the desired config, drift
//!      monitor.
//!    - [`once`]: `once-from`: one config applied through the engine, without a cluster.
//!    - [`pivot`]: `pivot`: the OS rebased to an image by hand (a recovery).
//!    - [`metrics`]: Prometheus metrics (the MCD's names and ours) fed by the engine, served
//!      on `127.0.0.1:8797/metrics`; the kubelet health check.
//!    - [`gather`]: `gather`: the node's support bundle (status, update record, plan,
//!      journals, rpm-ostree, fragments, hooks), secrets left out and listed.
//! 5. The command line
//!    - [`cli`]: the `mco-agent` subcommands.

// 0. Foundations
pub mod failpoints;
pub mod idle_pages;
pub mod logging;
pub mod notify;
pub mod rootfs;
pub mod stop;
pub mod system_bus;

// 1. Files of a root
pub mod apply;
pub mod certs;
pub mod hooks;
pub mod input;
pub mod units;
pub mod validate;

// 2. The host and the cluster
pub mod cluster;
pub mod host;
pub mod os;
pub mod strategy;

// 3. The update, and the pinned images
pub mod engine;
pub mod pinned;

// 4. Ways to run it
pub mod daemon;
pub mod gather;
pub mod metrics;
pub mod once;
pub mod pivot;

// 5. The command line
pub mod cli;
