//! `mco-firstboot`: completes a node's first boot before kubelet starts, as the MCD's
//! `firstboot-complete-machineconfig` does (upstream
//! `cmd/machine-config-daemon/firstboot_complete_machineconfig.go`).
//!
//! A node provisioned by the config server has Ignition's files already; what Ignition cannot
//! do is the OS: the image, kernel arguments, kernel type and extensions. The config server
//! leaves the target MachineConfig (with an empty Ignition config) in
//! `/etc/ignition-machine-config-encapsulated.json`; `mco-firstboot`
//! 1. reads it ([`encapsulated`]); absent: nothing to do;
//! 2. builds the config the node is in as far as the OS goes ([`baseline`]): the booted
//!    deployment's image, the requested kernel arguments it already has, its kernel type and
//!    extensions, FIPS from `/proc/sys/crypto/fips_enabled`;
//! 3. plans the move (the model's plan and the MCD's legacy first-boot action); an
//!    unreconcilable move (e.g. a FIPS change) is an error naming why;
//! 4. no change: removes the file (as the MCD) and exits without rebooting;
//! 5. else stages the OS changes through rpm-ostree with the update engine's OS step
//!    (`cleanup -p`, rebase, `kargs`, kernel type, extensions), renames the file to `.bak`
//!    and reboots through logind ("Completing firstboot provisioning to NAME"), unless
//!    `--skip-reboot`.
//!
//! Retries: one attempt per run, bounded by rpm-ostree's timeouts; a failure exits 1 with the
//! reason and changes nothing that a retry would not redo (staging starts with `cleanup -p`;
//! the file is set aside only once the changes are staged, and put back when the reboot
//! request fails). `mco-firstboot.service` restarts it every minute until it succeeds, as the
//! MCD loops ("Sleeping 1 minute for retry"), and kubelet waits for it.
//!
//! Differences from the MCD, on purpose:
//! - the current config is not recorded: `currentconfig` is the agent's, which seeds it from
//!   the provisioned content at its first start (the MCD writes the encapsulated config, whose
//!   Ignition config is empty, and overwrites it later);
//! - kernel arguments are compared argument by argument (an entry `"a b"` is two arguments;
//!   the MCD compares entries with single arguments and would append such an entry again);
//! - the kernel type and extensions the booted deployment already has count as present (the
//!   MCD starts from none), so a re-run after the reboot changes nothing;
//! - the encapsulated config's own Ignition content, if any, is not applied (Ignition applied
//!   the served config at first boot).

pub mod baseline;
pub mod cli;
pub mod complete;
pub mod encapsulated;

pub use complete::{Completed, Options, complete};
