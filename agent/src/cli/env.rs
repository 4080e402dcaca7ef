//! The environment of `start` (and `config show`): one `MCO_AGENT_…` variable per option, the
//! first names kept as aliases, unknown `MCO_AGENT_…` variables warned about (a typo would
//! otherwise be ignored silently), and a bad value named by its variable.

use std::ffi::OsString;

use clap::Command;

/// First names of variables, and the variable each is now an alias of.
pub const ALIASES: [(&str, &str); 1] = [("MCO_METRICS_LISTEN", "MCO_AGENT_METRICS_LISTEN")];

/// `MCO_AGENT_…` variables that name no option but are not typos: the configuration fragments'
/// root (tests), what hooks are given (a hook that runs `mco-agent` passes them on), and the
/// benchmarks' binary.
const OTHERS: [&str; 9] = [
    "MCO_AGENT_CONFIG_ROOT",
    "MCO_AGENT_PHASE",
    "MCO_AGENT_CURRENT_CONFIG",
    "MCO_AGENT_DESIRED_CONFIG",
    "MCO_AGENT_ROOT",
    "MCO_AGENT_REBOOT",
    "MCO_AGENT_HOOK",
    "MCO_AGENT_CONFIG",
    "MCO_AGENT_BIN",
];

/// `command` (the whole command line) reading an alias where it is set and the variable it
/// stands for is not, in `start` and `config show`.
pub fn with_aliases(mut command: Command, var: impl Fn(&str) -> Option<OsString>) -> Command {
    for (alias, name) in ALIASES {
        if var(name).is_some() || var(alias).is_none() {
            continue;
        }
        let read_alias = |c: Command| {
            let ids: Vec<_> = c
                .get_arguments()
                .filter(|a| a.get_env().is_some_and(|e| e == name))
                .map(|a| a.get_id().clone())
                .collect();
            ids.into_iter()
                .fold(c, |c, id| c.mut_arg(id, |a| a.env(alias)))
        };
        command = command
            .mut_subcommand("start", read_alias)
            .mut_subcommand("config", |c| c.mut_subcommand("show", read_alias));
    }
    command
}

/// The `MCO_AGENT_…` variables among `names` that `start` does not read, each with the closest
/// one it does (when one is close).
pub fn unknown(
    start: &Command,
    names: impl Iterator<Item = String>,
) -> Vec<(String, Option<String>)> {
    let known: Vec<String> = start
        .get_arguments()
        .filter_map(|a| a.get_env())
        .map(|e| e.to_string_lossy().into_owned())
        .chain(OTHERS.iter().map(|s| s.to_string()))
        .chain(ALIASES.iter().map(|(a, _)| a.to_string()))
        .collect();
    let mut unknown: Vec<_> = names
        .filter(|n| n.starts_with("MCO_AGENT_") && !known.contains(n))
        .map(|n| {
            let closest = machine_config::closest::closest(&n, known.iter().map(String::as_str))
                .map(str::to_string);
            (n, closest)
        })
        .collect();
    unknown.sort();
    unknown
}

/// A clap error about a value that came from a variable, said with the variable: clap names
/// the option only, and the option was not on the command line. `None` when the value was
/// typed (or the error is of another kind).
pub fn invalid_value(
    e: &clap::Error,
    command: &Command,
    argv: &[OsString],
    var: impl Fn(&str) -> Option<OsString>,
) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::InvalidValue && e.kind() != ErrorKind::ValueValidation {
        return None;
    }
    let text = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    let option = text(ContextKind::InvalidArg)?;
    let value = text(ContextKind::InvalidValue)?;
    let long = option
        .split([' ', '='])
        .next()?
        .strip_prefix("--")?
        .to_string();
    let arg = [command.find_subcommand("start")?]
        .into_iter()
        .flat_map(|c| c.get_arguments())
        .find(|a| a.get_long() == Some(long.as_str()))?;
    let name = arg.get_env()?.to_string_lossy().into_owned();
    // typed on the command line: clap's message is right
    let typed = argv.iter().any(|a| {
        a.to_str()
            .is_some_and(|a| a == format!("--{long}") || a.starts_with(&format!("--{long}=")))
    });
    if typed || var(&name).map(|v| v.to_string_lossy() == value.as_str()) != Some(true) {
        return None;
    }
    Some(format!(
        "{name}={value:?}: not a valid value for --{long}{}",
        why_invalid(e)
    ))
}

/// What a clap error about a bad value adds to naming it: the accepted values (` (accepted:
/// agent, controller)`) or what its parser said (`: expected number at 0`); empty otherwise.
/// Said the same way for a variable and a configuration fragment.
pub fn why_invalid(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue};
    if let Some(ContextValue::Strings(valid)) = e.get(ContextKind::ValidValue) {
        format!(" (accepted: {})", valid.join(", "))
    } else if let Some(source) = std::error::Error::source(e) {
        format!(": {source}")
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |n| vars.iter().find(|(k, _)| *k == n).map(|(_, v)| v.into())
    }

    fn start() -> Command {
        let mut c = crate::cli::Cli::command();
        c.build();
        c.find_subcommand("start").unwrap().clone()
    }

    #[test]
    fn unknown_variables_are_found_with_the_closest_known_one() {
        let names = [
            "MCO_AGENT_POOL",
            "MCO_AGENT_POOLS",
            "MCO_AGENT_SKIP_REBOT",
            "MCO_AGENT_PHASE",
            "MCO_METRICS_LISTEN",
            "MCO_AGENT_WHATEVER_ELSE_ENTIRELY",
            "PATH",
        ];
        let found = unknown(&start(), names.iter().map(|s| s.to_string()));
        assert_eq!(
            found,
            vec![
                (
                    "MCO_AGENT_POOLS".to_string(),
                    Some("MCO_AGENT_POOL".to_string())
                ),
                (
                    "MCO_AGENT_SKIP_REBOT".to_string(),
                    Some("MCO_AGENT_SKIP_REBOOT".to_string())
                ),
                ("MCO_AGENT_WHATEVER_ELSE_ENTIRELY".to_string(), None),
            ]
        );
    }

    #[test]
    fn every_visible_option_of_start_has_one_variable_with_the_prefix() {
        for arg in start().get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if arg.is_hide_set() || ["help", "verbose", "version"].contains(&long) {
                continue;
            }
            let want = format!("MCO_AGENT_{}", long.to_uppercase().replace('-', "_"));
            assert_eq!(
                arg.get_env().map(|e| e.to_string_lossy().into_owned()),
                Some(want),
                "--{long}"
            );
        }
    }

    #[test]
    fn an_alias_is_read_only_when_its_variable_is_not_set() {
        // which variable `start --metrics-listen` reads (clap reads the process's environment)
        let reads = |vars: &'static [(&'static str, &'static str)]| {
            let c = with_aliases(crate::cli::Cli::command(), env(vars));
            let start = c.find_subcommand("start").unwrap();
            start
                .get_arguments()
                .find(|a| a.get_long() == Some("metrics-listen"))
                .and_then(|a| a.get_env())
                .map(|e| e.to_string_lossy().into_owned())
        };
        let rows: [(&'static [(&'static str, &'static str)], &str); 3] = [
            (&[], "MCO_AGENT_METRICS_LISTEN"),
            (
                &[("MCO_METRICS_LISTEN", "127.0.0.1:1")],
                "MCO_METRICS_LISTEN",
            ),
            (
                &[
                    ("MCO_METRICS_LISTEN", "127.0.0.1:1"),
                    ("MCO_AGENT_METRICS_LISTEN", "127.0.0.1:2"),
                ],
                "MCO_AGENT_METRICS_LISTEN",
            ),
        ];
        for (vars, want) in rows {
            assert_eq!(reads(vars).as_deref(), Some(want), "{vars:?}");
        }
    }
}
