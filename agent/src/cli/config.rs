//! `mco-agent config show`: the configuration `start` runs with, and where each value comes
//! from (a fragment's file and line, the environment, the command line, or the default).

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::Result;
use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, Command};

use super::config_file::{self, Setting};
use super::start;

/// `config` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Print the effective configuration of `start` (given the same options and environment)
    /// and where each value comes from.
    Show(Box<start::Args>),
}

/// What `show` prints: one line per option of `start`.
pub fn render(
    start: &Command,
    matches: &ArgMatches,
    settings: &BTreeMap<String, Setting>,
    from_files: &[String],
) -> String {
    let mut out = String::from(
        "# the configuration `mco-agent start` runs with: key = value  # where it comes from\n",
    );
    for arg in start.get_arguments() {
        if matches!(
            arg.get_action(),
            ArgAction::Help | ArgAction::HelpLong | ArgAction::Version
        ) {
            continue;
        }
        let Some(long) = arg.get_long() else { continue };
        let key = long.replace('-', "_");
        let id = arg.get_id().as_str();
        // a hidden option (test timings, first spellings) is shown only where it was set
        if arg.is_hide_set()
            && !from_files.contains(&key)
            && !matches!(
                matches.value_source(id),
                Some(ValueSource::CommandLine | ValueSource::EnvVariable)
            )
        {
            continue;
        }
        let raw: Option<Vec<String>> = matches
            .get_raw(id)
            .map(|values| values.map(|v| v.to_string_lossy().into_owned()).collect());
        let origin = match (settings.get(&key), matches.value_source(id)) {
            (Some(setting), _) if from_files.contains(&key) => setting.origin(),
            (_, Some(ValueSource::CommandLine)) => "command line".to_string(),
            (_, Some(ValueSource::EnvVariable)) => format!(
                "environment {}",
                arg.get_env()
                    .map(|e| e.to_string_lossy().into_owned())
                    .unwrap_or_default()
            ),
            (_, Some(ValueSource::DefaultValue)) => "default".to_string(),
            _ => "not set".to_string(),
        };
        match raw.as_deref() {
            Some([value]) => {
                let shown = if value == "true" || value == "false" {
                    value.clone()
                } else {
                    toml::Value::String(value.clone()).to_string()
                };
                out.push_str(&format!("{key} = {shown}  # {origin}\n"));
            }
            Some(values) if !values.is_empty() => {
                let shown: Vec<String> = values
                    .iter()
                    .map(|v| toml::Value::String(v.clone()).to_string())
                    .collect();
                out.push_str(&format!("{key} = [{}]  # {origin}\n", shown.join(", ")));
            }
            _ => out.push_str(&format!("# {key}  # {origin}\n")),
        }
    }
    let files = config_file::fragments(&config_file::config_root()).unwrap_or_default();
    if files.is_empty() {
        out.push_str(&format!(
            "# no fragment in {}\n",
            config_file::CONFIG_DIRS.join(" or ")
        ));
    } else {
        for file in files {
            out.push_str(&format!("# read: {}\n", file.display()));
        }
    }
    out
}

/// Prints what [`render`] made (the parse and the fragments are read by `cli::main`), then
/// runs `start`'s checks of the settings ([`start::Args::check`]): what `start` would refuse
/// fails here too, with the same error and exit code, after the settings and their origins
/// are shown.
pub fn run(shown: &str, args: &start::Args) -> Result<ExitCode> {
    print!("{shown}");
    args.check()?;
    Ok(ExitCode::SUCCESS)
}
