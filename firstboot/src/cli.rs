//! The `mco-firstboot` command line, in the library so that the man page and shell completion
//! generator (`docgen/`) builds them from the same definition the binary parses.

use std::path::PathBuf;
use std::time::Duration;

use clap::{CommandFactory, Parser};

/// Completes a node's first boot from the encapsulated MachineConfig (OS image, kernel
/// arguments, kernel type, extensions through rpm-ostree), then reboots, before kubelet starts.
#[derive(Debug, Parser)]
#[command(name = "mco-firstboot", version)]
pub struct Args {
    /// Root directory of the node.
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// Stage the changes but do not reboot.
    #[arg(long)]
    pub skip_reboot: bool,
    /// After a failed attempt, try again after this long (e.g. `1m`), until one succeeds.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub retry_every: Option<Duration>,
}

/// The command-line definition `mco-firstboot` parses.
pub fn command() -> clap::Command {
    Args::command()
}
