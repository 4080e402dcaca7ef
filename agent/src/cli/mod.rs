//! The `mco-agent` command line: one module per subcommand. To add one, add a variant to
//! [`Command`] (its doc comment is the help text), a module with an `Args` struct and a `run`
//! function, and a match arm in [`run`].

pub mod diff;
pub mod drain;
pub mod once_from;
pub mod start;
pub mod status;
pub mod validate;

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// Exit code of a failed command (bad input, I/O error, refusal).
pub const EXIT_FAILURE: u8 = 1;
/// Exit code of `validate` when the disk does not match.
pub const EXIT_MISMATCH: u8 = 1;
/// Exit code of `diff` and `once-from` when the change is not reconcilable.
pub const EXIT_UNRECONCILABLE: u8 = 2;

/// Node agent for MachineConfigs on ostree-based nodes.
#[derive(Debug, Parser)]
#[command(name = "mco-agent", version)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon: follow the desired config and keep the node in it.
    Start(Box<start::Args>),
    /// Apply a MachineConfig (YAML or JSON) or an Ignition config (any spec) without a cluster.
    OnceFrom(once_from::Args),
    /// Check the on-disk state against a config: exit 0 when it matches, 1 with every mismatch.
    Validate(validate::Args),
    /// Show the update plan from OLD to NEW: exit 0 when reconcilable, 2 with the reason when not.
    Diff(diff::Args),
    /// Cordon the node and evict its pods (exit 1 naming the pods and budgets that block).
    Drain(drain::DrainArgs),
    /// Make the node schedulable again.
    Uncordon(drain::UncordonArgs),
    /// Where the node stands: state, current and desired config, last update, update in
    /// progress, deployments (from the agent's files; works without the daemon).
    Status(status::Args),
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Start(args) => start::run(&args),
        Command::OnceFrom(args) => once_from::run(&args),
        Command::Validate(args) => validate::run(&args),
        Command::Diff(args) => diff::run(&args),
        Command::Drain(args) => drain::run_drain(&args),
        Command::Uncordon(args) => drain::run_uncordon(&args),
        Command::Status(args) => status::run(&args),
    }
}

/// The binary's entry point: parse, log to stderr, run, and print a failure as one line.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // The daemon logs its progress; interactive commands only what goes wrong.
    init_logging(match cli.command {
        Command::Start(_) => "info",
        _ => "warn",
    });
    #[cfg(feature = "failpoints")]
    let _failpoints = fail::FailScenario::setup();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

/// Logs to stderr (journald under systemd); level from `RUST_LOG`, else `default_level`.
fn init_logging(default_level: &str) {
    if let Err(e) = crate::logging::init("mco-agent", None, default_level) {
        eprintln!("warning: logging not set up: {e}");
    }
}
