//! Logging setup, called once by each binary.
//!
//! Under systemd (`JOURNAL_STREAM` or `INVOCATION_ID` set) events go to journald with their
//! fields as journal fields, prefixed `MCO_` (`unit = "crio.service"` becomes
//! `MCO_UNIT=crio.service`), under a syslog identifier such as `mco-agent`. Otherwise they go
//! to stderr in a compact format. The level comes from a command-line flag if given, else
//! `RUST_LOG`, else the binary's default (`info` for the daemon, `warn` for interactive commands
//! whose output is their result).
//!
//! One-shot commands (everything but the daemon) log for people instead ([`init_command`],
//! [`human`]): `warning: …` lines on stderr, their own crates' only unless `-v`.
//!
//! Never log file contents or secrets: log paths, sizes, hashes and names instead.

pub mod human;

use tracing_journald::{Priority, PriorityMappings};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Journal fields of events are prefixed with this (`MCO_UNIT`, `MCO_CONFIG`, ...).
pub const JOURNAL_FIELD_PREFIX: &str = "MCO";

/// Where the logs went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogSink {
    Journald,
    Stderr,
}

#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    #[error("invalid log level or filter {filter:?}: {message}")]
    Filter { filter: String, message: String },
    #[error("a logger is already installed in this process")]
    AlreadyInstalled,
}

/// Whether systemd started this process with its output going to the journal.
pub fn under_systemd() -> bool {
    std::env::var_os("JOURNAL_STREAM").is_some() || std::env::var_os("INVOCATION_ID").is_some()
}

fn filter(level: Option<&str>, default_level: &str) -> Result<EnvFilter, LoggingError> {
    let spec = match level {
        Some(level) => level.to_owned(),
        None => std::env::var("RUST_LOG")
            .ok()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| default_level.to_owned()),
    };
    EnvFilter::try_new(&spec).map_err(|e| LoggingError::Filter {
        filter: spec,
        message: e.to_string(),
    })
}

/// Installs the process's logger. `identifier` is the syslog identifier in the journal
/// (`mco-agent`, `mco-firstboot`); `level` is the command-line level or filter, if any
/// (`debug`, `mco_agent=debug,info`); without one, `RUST_LOG` or else `default_level` applies.
///
/// When running under systemd but journald cannot be reached, logs go to stderr (which
/// systemd also collects) and a warning says so.
pub fn init(
    identifier: &str,
    level: Option<&str>,
    default_level: &str,
) -> Result<LogSink, LoggingError> {
    let filter = filter(level, default_level)?;
    let registry = tracing_subscriber::registry().with(filter);
    let journald_error = if under_systemd() {
        match tracing_journald::layer() {
            Ok(layer) => {
                // syslog's usual meaning (journalctl -p info shows info and above); the crate's
                // default would log info as notice.
                let priorities = PriorityMappings {
                    info: Priority::Informational,
                    debug: Priority::Debug,
                    ..PriorityMappings::new()
                };
                let layer = layer
                    .with_priority_mappings(priorities)
                    .with_syslog_identifier(identifier.to_owned())
                    .with_field_prefix(Some(JOURNAL_FIELD_PREFIX.to_owned()));
                registry
                    .with(layer)
                    .try_init()
                    .map_err(|_| LoggingError::AlreadyInstalled)?;
                return Ok(LogSink::Journald);
            }
            Err(e) => Some(e),
        }
    } else {
        None
    };
    let stderr = tracing_subscriber::fmt::layer()
        .compact()
        .with_ansi(human::stderr_colour())
        .with_writer(std::io::stderr);
    registry
        .with(stderr)
        .try_init()
        .map_err(|_| LoggingError::AlreadyInstalled)?;
    if let Some(e) = journald_error {
        tracing::warn!(error = %e, "running under systemd but journald is unreachable: logging to stderr");
    }
    Ok(LogSink::Stderr)
}

/// Installs the logger of a one-shot command: lines for people on stderr ([`human`]; the
/// filter [`human::filter_for`] `verbose`, or `RUST_LOG`). With `journal`, for a command that
/// changes the node (`recover`, `rollback`, `pivot`), its decisions also go to the journal
/// whenever journald can be reached (at `info`, under `identifier`, so `journalctl -u
/// mco-agent` or `-t mco-agent` shows who did what, also when run from a shell).
pub fn init_command(identifier: &str, verbose: u8, journal: bool) -> Result<LogSink, LoggingError> {
    use tracing_subscriber::Layer as _;
    let stderr = tracing_subscriber::fmt::layer()
        .event_format(human::Human {
            colour: human::stderr_colour(),
        })
        .with_writer(std::io::stderr)
        .with_filter(filter(
            (verbose > 0).then(|| human::filter_for(verbose)).as_deref(),
            &human::filter_for(0),
        )?);
    let journald = journal
        .then(|| tracing_journald::layer().ok())
        .flatten()
        .map(|layer| {
            layer
                .with_priority_mappings(PriorityMappings {
                    info: Priority::Informational,
                    debug: Priority::Debug,
                    ..PriorityMappings::new()
                })
                .with_syslog_identifier(identifier.to_owned())
                .with_field_prefix(Some(JOURNAL_FIELD_PREFIX.to_owned()))
                .with_filter(EnvFilter::new("info"))
        });
    let sink = if journald.is_some() {
        LogSink::Journald
    } else {
        LogSink::Stderr
    };
    tracing_subscriber::registry()
        .with(stderr)
        .with(journald)
        .try_init()
        .map_err(|_| LoggingError::AlreadyInstalled)?;
    Ok(sink)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_level_wins_and_bad_filters_are_named() {
        for (level, want) in [
            (Some("debug"), "debug"),
            (Some("mco_agent=trace,info"), "mco_agent=trace,info"),
        ] {
            assert_eq!(filter(level, "warn").expect("valid").to_string(), want);
        }
        let err = filter(Some("mco_agent=loud"), "info").expect_err("invalid level");
        assert!(err.to_string().contains("\"mco_agent=loud\""), "{err}");
    }
}
