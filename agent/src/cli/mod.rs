//! The `mco-agent` command line: one module per subcommand. To add one, add a variant to
//! [`Command`] (its doc comment is the help text), a module with an `Args` struct and a `run`
//! function, and a match arm in [`run`].

pub mod config;
pub mod config_file;
pub mod diff;
pub mod diff_hooks;
pub mod drain;
pub mod hook_args;
pub mod once_from;
pub mod pivot;
pub mod recover;
pub mod rollback;
pub mod start;
pub mod status;
pub mod strategy;
pub mod validate;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

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
    /// Rebase the OS to an image by hand (a recovery): staged through rpm-ostree, logged,
    /// rebooted into unless --no-reboot; --dry-run says what would change.
    Pivot(pivot::Args),
    /// Go back to the config and OS deployment from before the last update, with one reboot
    /// (asks first unless --yes).
    Rollback(rollback::Args),
    /// Where the node stands: state, current and desired config, last update, update in
    /// progress, deployments (from the agent's files; works without the daemon).
    Status(status::Args),
    /// For a Degraded or stuck node: show what is wrong and, confirmed, re-apply the desired
    /// config over drift or re-target the node to the config it runs.
    Recover(recover::Args),
    /// The agent's configuration files (`/usr/lib/mco-agent/config.d`, `/etc/mco-agent/config.d`).
    #[command(subcommand)]
    Config(config::ConfigCommand),
}

/// A parsed command line: `start` and `config show` with the configuration fragments' settings
/// added where neither the command line nor the environment gave a value.
#[derive(Debug)]
pub struct Parsed {
    pub cli: Cli,
    /// What `config show` prints.
    pub config_shown: Option<String>,
}

/// Parses `argv` (with the binary's name first). Usage errors, `--help` and `--version` exit as
/// clap makes them; a bad configuration fragment is an error naming its file, line and key.
pub fn parse(argv: Vec<OsString>) -> Result<Parsed> {
    let command = Cli::command();
    let matches = command
        .clone()
        .try_get_matches_from(&argv)
        .unwrap_or_else(|e| e.exit());
    // the subcommand whose options the fragments set, and how many words name it
    let words = match matches.subcommand() {
        Some(("start", _)) => 1,
        Some(("config", m)) if m.subcommand_name() == Some("show") => 2,
        _ => {
            let cli = Cli::from_arg_matches(&matches).context("parsing the command line")?;
            return Ok(Parsed {
                cli,
                config_shown: None,
            });
        }
    };
    let start = command
        .find_subcommand("start")
        .context("the start subcommand")?;
    let settings = config_file::load(&config_file::config_root(), start)?;
    let options = |m: &clap::ArgMatches| -> Option<clap::ArgMatches> {
        match words {
            1 => m.subcommand_matches("start").cloned(),
            _ => m
                .subcommand_matches("config")
                .and_then(|c| c.subcommand_matches("show"))
                .cloned(),
        }
    };
    let given = options(&matches).context("the subcommand's options")?;
    let added = config_file::arguments_from(&settings, start, &given);
    let from_files: Vec<String> = added.iter().map(|(key, _)| key.clone()).collect();
    let matches = if added.is_empty() {
        matches
    } else {
        // right after the words that name the subcommand, before what the user typed
        let at = argv
            .iter()
            .position(|a| a == "start" || a == "config")
            .map_or(1, |i| i + words);
        let mut argv = argv;
        argv.splice(
            at..at,
            added
                .into_iter()
                .flat_map(|(_, args)| args)
                .map(OsString::from),
        );
        command
            .clone()
            .try_get_matches_from(&argv)
            .unwrap_or_else(|e| e.exit())
    };
    let config_shown = match words {
        2 => {
            let shown = options(&matches).context("the subcommand's options")?;
            Some(config::render(start, &shown, &settings, &from_files))
        }
        _ => None,
    };
    let cli = Cli::from_arg_matches(&matches).context("parsing the command line")?;
    Ok(Parsed { cli, config_shown })
}

/// Asks `question` on the terminal (`[y/N]`); without a terminal to ask on, fails with
/// `no_terminal` (which says how to confirm without one).
pub(crate) fn ask(question: &str, no_terminal: &str) -> Result<bool> {
    use std::io::{BufRead, IsTerminal, Write};
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        anyhow::bail!("{no_terminal}");
    }
    print!("{question} [y/N] ");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    stdin.lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// Runs a parsed command line.
pub fn run(parsed: Parsed) -> Result<ExitCode> {
    let shown = parsed.config_shown.as_deref();
    match parsed.cli.command {
        Command::Start(args) => start::run(&args),
        Command::OnceFrom(args) => once_from::run(&args),
        Command::Validate(args) => validate::run(&args),
        Command::Diff(args) => diff::run(&args),
        Command::Drain(args) => drain::run_drain(&args),
        Command::Uncordon(args) => drain::run_uncordon(&args),
        Command::Rollback(args) => rollback::run(&args),
        Command::Status(args) => status::run(&args),
        Command::Recover(args) => recover::run(&args),
        Command::Pivot(args) => pivot::run(&args),
        // what `parse` rendered, with the origin of every value
        Command::Config(config::ConfigCommand::Show(_)) => config::run(shown.unwrap_or_default()),
    }
}

/// The binary's entry point: parse, log to stderr, run, and print a failure as one line.
pub fn main() -> ExitCode {
    let parsed = match parse(std::env::args_os().collect()) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(EXIT_FAILURE);
        }
    };
    // The daemon and a pivot log their progress (the journal keeps why the OS changed);
    // other interactive commands only what goes wrong.
    match parsed.cli.command {
        Command::Start(_) | Command::Pivot(_) => init_logging("info"),
        // what `recover` and `rollback` change on the node goes to the journal too, also from
        // a shell
        Command::Recover(_) | Command::Rollback(_) => {
            if let Err(e) = crate::logging::init_admin("mco-agent") {
                eprintln!("warning: logging not set up: {e}");
            }
        }
        _ => init_logging("warn"),
    }
    if let Command::Start(_) = parsed.cli.command {
        let root = config_file::config_root();
        let files = config_file::fragments(&root).unwrap_or_default();
        let files: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        tracing::info!(
            fragments = ?files,
            "configuration: {} fragment(s) of {}",
            files.len(),
            config_file::CONFIG_DIRS.join(", ")
        );
    }
    #[cfg(feature = "failpoints")]
    let _failpoints = fail::FailScenario::setup();
    match run(parsed) {
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
