//! Shell completion scripts (clap_complete), named where each shell's completion directory
//! looks them up: bash by command name, zsh `_NAME`, fish `NAME.fish`.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap_complete::Shell;

/// One completion script.
#[derive(Debug)]
pub struct Script {
    /// Under the completions directory: `bash/mco-agent`, `zsh/_mco-agent`, `fish/mco-agent.fish`.
    pub relative_path: PathBuf,
    pub text: Vec<u8>,
}

/// The bash, zsh and fish scripts of one program.
pub fn scripts(program: clap::Command) -> Vec<Result<Script>> {
    let name = program.get_name().to_owned();
    [
        (Shell::Bash, "bash", name.clone()),
        (Shell::Zsh, "zsh", format!("_{name}")),
        (Shell::Fish, "fish", format!("{name}.fish")),
    ]
    .into_iter()
    .map(|(shell, dir, file)| {
        let mut command = without_hidden(&program);
        let mut text = Vec::new();
        clap_complete::generate(shell, &mut command, &name, &mut text);
        if text.is_empty() {
            bail!("{shell} completion of {name}: empty");
        }
        if shell == Shell::Bash {
            text = repair_bash_dispatch(&name, text)?;
        }
        Ok(Script {
            relative_path: PathBuf::from(dir).join(file),
            text,
        })
    })
    .collect()
}

/// `command` without its hidden options and subcommands (test seams, old spellings kept as
/// aliases): clap_complete offers hidden options too, and a completion should offer only what
/// `--help` shows.
fn without_hidden(command: &clap::Command) -> clap::Command {
    // clap takes names as `&'static str` (without its `string` feature); this tool runs once
    let name: &'static str = Box::leak(command.get_name().to_owned().into_boxed_str());
    let mut visible = clap::Command::new(name)
        .args(
            command
                .get_arguments()
                .filter(|a| !a.is_hide_set())
                .cloned(),
        )
        .subcommands(
            command
                .get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(without_hidden),
        );
    if let Some(about) = command.get_about() {
        visible = visible.about(about.clone());
    }
    if let Some(version) = command.get_version() {
        let version: &'static str = Box::leak(version.to_owned().into_boxed_str());
        visible = visible.version(version);
    }
    visible
}

/// clap_complete's bash script escapes a hyphenated program name two ways: the loop over the
/// words sets `cmd=mco__agent__subcmd__diff`, the `case` that completes a subcommand's options
/// is labelled `mco__subcmd__agent__subcmd__diff`, so no subcommand's options ever complete
/// (clap-rs/clap#6421, open). The labels are renamed to what the loop sets; a script that
/// still has a label the loop never sets is refused rather than shipped.
fn repair_bash_dispatch(name: &str, text: Vec<u8>) -> Result<Vec<u8>> {
    let text = String::from_utf8(text)?;
    let text = if name.contains('-') {
        let set = format!("{}__", name.replace('-', "__"));
        let labelled = format!("{}__", name.replace('-', "__subcmd__"));
        text.replace(&labelled, &set)
    } else {
        text
    };
    let set: std::collections::BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("cmd=\"")?.strip_suffix('"'))
        .collect();
    // the labels of the `case "${cmd}"`: an identifier and `)`, indented 8
    let labels = text.lines().filter_map(|l| {
        let label = l.strip_prefix("        ")?.strip_suffix(')')?;
        label
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
            .then_some(label)
    });
    for label in labels {
        if !set.contains(label) {
            bail!("bash completion of {name}: case {label} is never reached");
        }
    }
    Ok(text.into_bytes())
}
