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
        let mut command = program.clone();
        let mut text = Vec::new();
        clap_complete::generate(shell, &mut command, &name, &mut text);
        if text.is_empty() {
            bail!("{shell} completion of {name}: empty");
        }
        Ok(Script {
            relative_path: PathBuf::from(dir).join(file),
            text,
        })
    })
    .collect()
}
