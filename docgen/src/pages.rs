//! Which pages a program has (itself and each visible subcommand, recursively) and the checks
//! that tie a page's hand-written sections to its command-line definition.

use anyhow::{Result, bail};

use crate::SECTION;
use crate::handwritten::{Block, HandWritten, REQUIRED};

/// One man page: a program or one of its subcommands.
#[derive(Debug, Clone)]
pub struct Page {
    /// The binary: `mco-agent`.
    pub program: String,
    /// `mco-agent-config-show`: the program and subcommand names joined by `-`.
    pub name: String,
    /// The (built) command: its `bin_name` is what the synopsis shows (`mco-agent config show`).
    pub command: clap::Command,
    /// The page of the command above, if any.
    pub parent: Option<String>,
    /// The pages of the subcommands.
    pub children: Vec<String>,
}

/// The pages of one program, parents before their subcommands. Hidden subcommands and clap's
/// `help` subcommand get none.
pub fn pages(program: clap::Command) -> Vec<Page> {
    let mut program = program.disable_help_subcommand(true);
    program.build();
    let mut out = Vec::new();
    collect(program.get_name(), &program, None, &mut out);
    out
}

fn collect(program: &str, command: &clap::Command, parent: Option<&str>, out: &mut Vec<Page>) {
    let name = command
        .get_display_name()
        .unwrap_or_else(|| command.get_name())
        .to_owned();
    let visible: Vec<&clap::Command> = command
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .collect();
    out.push(Page {
        program: program.to_owned(),
        name: name.clone(),
        command: command.clone(),
        parent: parent.map(str::to_owned),
        children: visible
            .iter()
            .map(|s| format!("{name}-{}", s.get_name()))
            .collect(),
    });
    for sub in visible {
        collect(program, sub, Some(&name), out);
    }
}

/// The environment variables the command's visible options read (clap's `env`).
pub fn environment_variables(command: &clap::Command) -> Vec<String> {
    command
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_hide_env_set())
        .filter_map(|a| a.get_env())
        .map(|e| e.to_string_lossy().into_owned())
        .collect()
}

/// The hand-written sections belong to this page: the title names it, every required section
/// is there, and ENVIRONMENT describes every variable the command line reads.
pub fn check(page: &Page, hand: &HandWritten) -> Result<()> {
    let title = format!("{}({SECTION})", page.name);
    if hand.title != title {
        bail!("the title is `{}`, the page is `{title}`", hand.title);
    }
    let missing: Vec<&str> = REQUIRED
        .iter()
        .copied()
        .filter(|name| hand.section(name).is_none())
        .collect();
    if !missing.is_empty() {
        bail!("{title} lacks the section(s) {}", missing.join(", "));
    }
    let described: Vec<&str> = hand
        .section("ENVIRONMENT")
        .map(|s| {
            s.blocks
                .iter()
                .filter_map(|b| match b {
                    Block::Item { term, .. } => Some(term.as_str()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let undescribed: Vec<String> = environment_variables(&page.command)
        .into_iter()
        .filter(|var| !described.iter().any(|t| t.contains(&format!("`{var}`"))))
        .collect();
    if !undescribed.is_empty() {
        bail!(
            "{title}: ENVIRONMENT has no item for {} (read by its options)",
            undescribed.join(", ")
        );
    }
    Ok(())
}
