//! The agent's configuration files: every setting of `start` can also come from TOML fragments
//! in `/usr/lib/mco-agent/config.d/*.toml` (the distribution's) and
//! `/etc/mco-agent/config.d/*.toml` (the administrator's), Zincati's arrangement: fragments are
//! read in the order of their file names, a later one overriding the keys of an earlier one, and
//! a fragment in `/etc` replaces the one of the same name in `/usr/lib`. A key is a `start`
//! option's long name with `_` for `-` (`config_server = "https://…:22623"`,
//! `skip_reboot = true`); the command line and the `MCO_AGENT_*` variables still win.
//!
//! The fragments are the agent's own configuration and are read from the host, never from
//! `--root` (a root is the node being managed, not where the agent is configured).
//! `MCO_AGENT_CONFIG_ROOT` (tests) reads them under another directory.
//!
//! A fragment that does not parse, an unknown key or a value the option refuses is one error
//! naming the file, the line and the key (with the closest known key, or the accepted values),
//! and nothing starts with half a configuration.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, Command};

/// Where fragments live, in increasing precedence.
pub const CONFIG_DIRS: [&str; 2] = ["/usr/lib/mco-agent/config.d", "/etc/mco-agent/config.d"];
/// Reads the fragments under this directory instead of `/` (tests).
pub const CONFIG_ROOT_ENV: &str = "MCO_AGENT_CONFIG_ROOT";

/// One setting from a fragment.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    /// The option's arguments as the command line would give them (`true`, a path, `30s`);
    /// more than one for an option that repeats (`window = ["Sat 22:00 3h", …]`).
    pub values: Vec<String>,
    pub file: PathBuf,
    pub line: usize,
}

impl Setting {
    /// `FILE:LINE`.
    pub fn origin(&self) -> String {
        format!("{}:{}", self.file.display(), self.line)
    }
}

/// The fragment files in the order they apply (by file name; `/etc` masks `/usr/lib`).
pub fn fragments(root: &Path) -> Result<Vec<PathBuf>> {
    let mut by_name: BTreeMap<OsString, PathBuf> = BTreeMap::new();
    for dir in CONFIG_DIRS {
        let dir = root.join(dir.trim_start_matches('/'));
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
        };
        for entry in entries {
            let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "toml") && path.is_file() {
                by_name.insert(entry.file_name(), path);
            }
        }
    }
    Ok(by_name.into_values().collect())
}

/// The settings of every fragment under `root`, checked against `start`'s options (`start`:
/// the subcommand's clap definition).
pub fn load(root: &Path, start: &Command) -> Result<BTreeMap<String, Setting>> {
    let mut settings = BTreeMap::new();
    for file in fragments(root)? {
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        for (key, setting) in parse_fragment(&file, &text, start)? {
            settings.insert(key, setting);
        }
    }
    Ok(settings)
}

/// One fragment's settings.
fn parse_fragment(file: &Path, text: &str, start: &Command) -> Result<Vec<(String, Setting)>> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let line = e.span().map_or(0, |s| line_of(text, s.start));
        anyhow::anyhow!(
            "{}:{line}: not a valid configuration fragment: {}",
            file.display(),
            e.message()
        )
    })?;
    let mut out = Vec::new();
    for (key, value) in table {
        let line = key_line(text, &key);
        let at = format!("{}:{line}", file.display());
        let Some(arg) = option(start, &key) else {
            let known = keys(start);
            match machine_config::closest::closest(&key, known.iter().map(String::as_str)) {
                Some(closest) => bail!("{at}: unknown key {key:?} (did you mean {closest}?)"),
                None => bail!(
                    "{at}: unknown key {key:?} (the keys are the options of `mco-agent start`, \
                     with `_` for `-`: {})",
                    known.join(", ")
                ),
            }
        };
        let values = match (&value, arg.get_action()) {
            (toml::Value::Array(items), ArgAction::Append) => items
                .iter()
                .enumerate()
                .map(|(i, item)| match item {
                    toml::Value::Table(t) if key == "window" => {
                        window_from_table(t).map_err(|e| anyhow::anyhow!("{at}: {key}[{i}]: {e}"))
                    }
                    other => scalar(other)
                        .ok_or_else(|| anyhow::anyhow!("{at}: {key}[{i}]: expected a string")),
                })
                .collect::<Result<Vec<_>>>()?,
            (toml::Value::Boolean(b), ArgAction::SetTrue) => vec![b.to_string()],
            (_, ArgAction::SetTrue) => bail!("{at}: {key}: expected true or false"),
            (other, _) => vec![scalar(other).ok_or_else(|| {
                anyhow::anyhow!(
                    "{at}: {key}: expected a single value (a string, a number or a boolean)"
                )
            })?],
        };
        // the option's own parser decides, as on the command line
        let long = arg.get_long().unwrap_or_default();
        let mut probe = start.clone().no_binary_name(true);
        if let Err(e) =
            probe.try_get_matches_from_mut(as_arguments(arg.get_action(), long, &values))
        {
            bail!("{at}: {key}: {}", refusal(&e));
        }
        out.push((
            key,
            Setting {
                values,
                file: file.to_path_buf(),
                line,
            },
        ));
    }
    Ok(out)
}

/// What the option's parser refused, in a fragment's terms: the value and what is accepted
/// (`invalid value 'kubectl' (accepted: agent, controller)`), not clap's `--drain-mode
/// <DRAIN_MODE>`.
fn refusal(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue};
    match e.get(ContextKind::InvalidValue) {
        Some(ContextValue::String(value)) => {
            format!("invalid value '{value}'{}", super::env::why_invalid(e))
        }
        _ => {
            let text = e.to_string();
            text.lines()
                .next()
                .unwrap_or_default()
                .trim_start_matches("error: ")
                .to_string()
        }
    }
}

/// The command-line arguments that give `long` the values `values`.
fn as_arguments(action: &ArgAction, long: &str, values: &[String]) -> Vec<String> {
    match action {
        ArgAction::SetTrue if values == ["true"] => vec![format!("--{long}")],
        ArgAction::SetTrue => vec![],
        _ => values.iter().map(|v| format!("--{long}={v}")).collect(),
    }
}

/// A string, number or boolean as the command line would give it.
fn scalar(value: &toml::Value) -> Option<String> {
    match value {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        _ => None,
    }
}

/// Zincati's table form of a maintenance window, `{days = ["Sat"], start_time = "22:00",
/// length_minutes = 180}`, as the `--window` argument `Sat 22:00 180m`.
fn window_from_table(t: &toml::Table) -> Result<String> {
    for key in t.keys() {
        if !["days", "start_time", "length_minutes"].contains(&key.as_str()) {
            bail!("unknown key {key:?} (a window has days, start_time and length_minutes)");
        }
    }
    let days = match t.get("days") {
        Some(toml::Value::Array(days)) if !days.is_empty() => days
            .iter()
            .map(|d| d.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| anyhow::anyhow!("days: expected an array of day names"))?,
        _ => bail!("days: expected a non-empty array of day names, e.g. [\"Sat\", \"Sun\"]"),
    };
    let Some(start) = t.get("start_time").and_then(|v| v.as_str()) else {
        bail!("start_time: expected \"HH:MM\"");
    };
    let Some(length) = t.get("length_minutes").and_then(|v| v.as_integer()) else {
        bail!("length_minutes: expected a number of minutes");
    };
    Ok(format!("{} {start} {length}m", days.join(",")))
}

/// The option of `start` a key names.
fn option<'a>(start: &'a Command, key: &str) -> Option<&'a clap::Arg> {
    start
        .get_arguments()
        .find(|a| a.get_long().is_some_and(|l| l.replace('-', "_") == key) && !is_meta(a))
}

/// `--help` and `--version` are not settings.
fn is_meta(arg: &clap::Arg) -> bool {
    matches!(
        arg.get_action(),
        ArgAction::Help | ArgAction::HelpLong | ArgAction::Version
    )
}

/// Every key a fragment may set and the documentation names: the hidden options (test
/// timings, kept out of `--help`, the man pages and the completions) are accepted but never
/// listed or suggested.
pub fn keys(start: &Command) -> Vec<String> {
    start
        .get_arguments()
        .filter(|a| !is_meta(a) && !a.is_hide_set())
        .filter_map(|a| a.get_long().map(|l| l.replace('-', "_")))
        .collect()
}

/// The arguments the fragments add to a command line whose parse gave `matches`, key by key:
/// the settings of options neither the command line nor the environment set.
pub fn arguments_from(
    settings: &BTreeMap<String, Setting>,
    start: &Command,
    matches: &ArgMatches,
) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for (key, setting) in settings {
        let Some(arg) = option(start, key) else {
            continue;
        };
        let given = |a: &clap::Arg| {
            matches!(
                matches.value_source(a.get_id().as_str()),
                Some(ValueSource::CommandLine | ValueSource::EnvVariable)
            )
        };
        // the command line or the environment set it, or chose an option it conflicts with
        // (`--config-file` over a fragment's `config_server`)
        if given(arg) || start.get_arg_conflicts_with(arg).into_iter().any(given) {
            continue;
        }
        let long = arg.get_long().unwrap_or_default();
        out.push((
            key.clone(),
            as_arguments(arg.get_action(), long, &setting.values),
        ));
    }
    out
}

/// The root the fragments are read under: `/`, or `MCO_AGENT_CONFIG_ROOT`.
pub fn config_root() -> PathBuf {
    std::env::var_os(CONFIG_ROOT_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The line a top-level `key = …` is on (0 when it cannot be told, e.g. a quoted key).
fn key_line(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| {
            let l = l.trim_start();
            let assigned = l
                .strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='));
            // an array of tables: `[[window]]`
            assigned || l.trim_end() == format!("[[{key}]]")
        })
        .map_or(0, |i| i + 1)
}

#[cfg(test)]
mod tests;
