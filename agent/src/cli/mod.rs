//! The `mco-agent` command line: one module per subcommand. To add one, add a variant to
//! [`Command`] (its doc comment is the help text), a module with an `Args` struct and a `run`
//! function, and a match arm in [`run`].

pub mod config;
pub mod config_file;
pub mod contents;
pub mod diff;
pub mod diff_hooks;
pub mod drain;
pub mod env;
#[cfg(test)]
mod error_chains;
pub mod exit;
pub mod gather;
pub mod hook_args;
pub mod once_from;
pub mod output;
pub mod pivot;
pub mod recover;
pub mod report;
pub mod rollback;
pub mod start;
pub mod status;
pub mod strategy;
pub mod unreconcilable;
pub mod validate;

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

pub use self::exit::{Classify, Exit};

/// On a terminal, clap's usage errors colour their `error:` label only, as the agent's own
/// errors do (docs/man/mco-agent.md); the rest of them, and `--help`, is plain text.
const STYLES: clap::builder::Styles = clap::builder::Styles::plain()
    .error(clap::builder::styling::AnsiColor::Red.on_default().bold());

/// Node agent for MachineConfigs on ostree-based nodes.
#[derive(Debug, Parser)]
#[command(name = "mco-agent", version, styles = STYLES)]
pub struct Cli {
    /// Say more: `-v` the command's progress and other components' warnings, `-vv` debug
    /// messages (`RUST_LOG` sets any filter). The daemon logs its progress anyway.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
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
    /// rebooted into unless --skip-reboot; --dry-run says what would change.
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
    /// Write the node's support bundle (a tar.gz): status, update record, configs and the
    /// plan between them, journals, rpm-ostree, configuration fragments, hooks; secrets left
    /// out and listed in its manifest.
    Gather(gather::Args),
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

/// Parses `argv` (with the binary's name first). A usage error, `--help` or `--version` is the
/// [`clap::Error`] that says it (see [`clap_exit`]); a bad configuration fragment is an error
/// naming its file, line and key.
pub fn parse(argv: Vec<OsString>) -> Result<Parsed> {
    let command = env::with_aliases(Cli::command(), |n| std::env::var_os(n));
    let matches = command.clone().try_get_matches_from(&argv)?;
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
    let settings = config_file::load(&config_file::config_root(), start).invalid_input()?;
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
        command.clone().try_get_matches_from(&argv)?
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
        return Err(exit::error(Exit::NotConfirmed, no_terminal));
    }
    print!("{question} [y/N] ");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    stdin.lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// Opens the root directory a command works on (`--root`): one that does not exist, or is not
/// a directory, is said once and is invalid input.
pub(crate) fn open_root(path: &std::path::Path) -> Result<crate::rootfs::Root> {
    check_root(path)?;
    Ok(crate::rootfs::Root::open(path)?)
}

/// Refuses a `--root` that does not exist or is not a directory, saying so once (invalid input).
pub(crate) fn check_root(path: &std::path::Path) -> Result<()> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(exit::error(
                Exit::InvalidInput,
                format!("--root {}: no such directory", path.display()),
            ));
        }
        Ok(m) if !m.is_dir() => {
            return Err(exit::error(
                Exit::InvalidInput,
                format!("--root {}: not a directory", path.display()),
            ));
        }
        _ => {}
    }
    Ok(())
}

/// Refuses to start a command that writes to the node at `root` when this user cannot write
/// there (not root, or a read-only root): [`Exit::NeedsRoot`], before anything is changed.
/// Checked on the root's `etc` (where configs write), or the root itself without one; a root
/// that does not exist is said first ([`check_root`]).
pub(crate) fn check_writable(root: &std::path::Path) -> Result<()> {
    use rustix::fs::{Access, AtFlags, CWD, accessat};
    check_root(root)?;
    let etc = root.join("etc");
    let path = if etc.is_dir() {
        etc
    } else {
        root.to_path_buf()
    };
    match accessat(CWD, &path, Access::WRITE_OK, AtFlags::EACCESS) {
        Ok(()) => Ok(()),
        Err(e) if e == rustix::io::Errno::ROFS => Err(exit::error(
            Exit::NeedsRoot,
            format!("{} is read-only; nothing was changed", path.display()),
        )),
        Err(e) if e == rustix::io::Errno::ACCESS || e == rustix::io::Errno::PERM => {
            Err(exit::classified(
                Exit::NeedsRoot,
                Some("run it as root (e.g. with sudo)".to_string()),
                anyhow::anyhow!(
                    "needs root; nothing was changed ({} is not writable by this user)",
                    path.display()
                ),
            ))
        }
        // what cannot be checked (a missing root) is said by the command itself
        Err(_) => Ok(()),
    }
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
        Command::Gather(args) => gather::run(&args),
        // what `parse` rendered, with the origin of every value
        Command::Config(config::ConfigCommand::Show(args)) => {
            config::run(shown.unwrap_or_default(), &args)
        }
    }
}

/// Prints what clap says (usage error, help, version) and gives its exit code: 0 for `--help`
/// and `--version`, [`Exit::Usage`] for anything else.
pub fn clap_exit(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let _ = e.print();
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => ExitCode::SUCCESS,
        _ => Exit::Usage.into(),
    }
}

/// The binary's entry point: parse, set up logging, run, and print a failure as `error: …`
/// (and `hint: …`) with the exit code of its class ([`exit`]).
pub fn main() -> ExitCode {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let parsed = match parse(argv.clone()) {
        Ok(parsed) => parsed,
        Err(e) => {
            if let Some(clap) = e.downcast_ref::<clap::Error>() {
                // a bad value from the environment is said with its variable
                if let Some(message) =
                    env::invalid_value(clap, &Cli::command(), &argv, |n| std::env::var_os(n))
                {
                    report::say(report::Label::Error, message);
                    return Exit::InvalidInput.into();
                }
                return clap_exit(clap);
            }
            return report::fail(&e);
        }
    };
    let verbose = parsed.cli.verbose;
    match parsed.cli.command {
        // the daemon logs its progress (to the journal under systemd)
        Command::Start(_) => {
            let level = match verbose {
                0 => None,
                1 => Some("debug"),
                _ => Some("trace"),
            };
            if let Err(e) = crate::logging::init("mco-agent", level, "info") {
                report::say(report::Label::Warning, format!("logging not set up: {e}"));
            }
        }
        // what `recover`, `rollback` and `pivot` change on the node goes to the journal too,
        // also from a shell (the journal keeps why the OS changed)
        Command::Recover(_) | Command::Rollback(_) | Command::Pivot(_) => {
            init_command_logging(verbose, true)
        }
        _ => init_command_logging(verbose, false),
    }
    if matches!(parsed.cli.command, Command::Start(_) | Command::Config(_)) {
        let command = Cli::command();
        if let Some(start) = command.find_subcommand("start") {
            let names = std::env::vars_os().filter_map(|(k, _)| k.into_string().ok());
            for (name, closest) in env::unknown(start, names) {
                let hint = closest
                    .map(|c| format!(" (did you mean {c}?)"))
                    .unwrap_or_default();
                tracing::warn!("unknown environment variable {name}, ignored{hint}");
            }
        }
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
        Err(e) => report::fail(&e),
    }
}

/// Logs for people on stderr ([`crate::logging::init_command`]).
fn init_command_logging(verbose: u8, journal: bool) {
    if let Err(e) = crate::logging::init_command("mco-agent", verbose, journal) {
        report::say(report::Label::Warning, format!("logging not set up: {e}"));
    }
}
