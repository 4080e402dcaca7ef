//! `-o json|yaml`: a command's result for programs instead of text for people, spelled as
//! kubectl spells it. `--json`, the first spelling, is kept as a hidden alias of `-o json`.

use anyhow::{Context, Result};
use serde::Serialize;

/// A form for programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Json,
    Yaml,
}

/// The output options of `status`, `validate` and `diff`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct OutputArgs {
    /// Print the result as json or yaml instead of text.
    #[arg(short = 'o', long = "output", value_enum, value_name = "FORMAT")]
    pub output: Option<Format>,
    /// `-o json`, as first spelled.
    #[arg(long, hide = true, conflicts_with = "output")]
    pub json: bool,
}

impl OutputArgs {
    /// The form asked for; `None`: text.
    pub fn format(&self) -> Option<Format> {
        if self.json {
            Some(Format::Json)
        } else {
            self.output
        }
    }

    /// Prints `value` in the form asked for (JSON indented, as every command prints it);
    /// `false` when text was asked for and nothing was printed.
    pub fn print<T: Serialize>(&self, value: &T) -> Result<bool> {
        match self.format() {
            None => Ok(false),
            Some(Format::Json) => {
                println!("{}", serde_json::to_string_pretty(value)?);
                Ok(true)
            }
            Some(Format::Yaml) => {
                let text = serde_saphyr::to_string(value).context("writing YAML")?;
                print!("{text}");
                if !text.ends_with('\n') {
                    println!();
                }
                Ok(true)
            }
        }
    }
}
