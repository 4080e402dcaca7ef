//! Man pages and shell completions of `mco-agent`, `mco-firstboot` and `mco-companion`, built
//! from their clap definitions (the options, always current) and the hand-written sections
//! kept in `docs/man/` (files, environment, exit status, examples). A separate crate so that
//! none of it is in the shipped binaries; `rpm-spec/mco-agent.spec` runs it (docs/install.md).

pub mod completions;
pub mod handwritten;
pub mod manpage;
pub mod pages;
pub mod synopsis;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::CommandFactory;

use crate::handwritten::HandWritten;
use crate::pages::Page;

/// The manual section of every page: system administration commands and daemons.
pub const SECTION: &str = "8";

/// The command-line definitions of the three binaries.
pub fn programs() -> Vec<clap::Command> {
    vec![
        mco_agent::cli::Cli::command(),
        mco_firstboot::cli::command(),
        mco_companion::cli::Cli::command(),
    ]
}

/// Every page of every program, parents before their subcommands.
pub fn all_pages() -> Vec<Page> {
    programs().into_iter().flat_map(pages::pages).collect()
}

/// Reads and checks the hand-written sections of `page` from `dir/<page>.md`.
pub fn read_hand_written(dir: &Path, page: &Page) -> Result<HandWritten> {
    let path = dir.join(format!("{}.md", page.name));
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "{}: the hand-written sections of {}({SECTION}) (every subcommand has a page)",
            path.display(),
            page.name
        )
    })?;
    let hand = handwritten::parse(&text).with_context(|| path.display().to_string())?;
    pages::check(page, &hand).with_context(|| path.display().to_string())?;
    Ok(hand)
}

/// What [`generate`] wrote.
#[derive(Debug)]
pub struct Generated {
    pub man_pages: Vec<PathBuf>,
    pub completions: Vec<PathBuf>,
}

/// Writes `out/man/man8/<page>.8` for every page and `out/completions/{bash,zsh,fish}/…` for
/// every program, from the hand-written sections in `pages_dir`. Everything is read and checked
/// before the first file is written: a missing, stray or malformed page changes nothing.
pub fn generate(pages_dir: &Path, out: &Path) -> Result<Generated> {
    let pages = all_pages();
    let mut rendered = Vec::new();
    for page in &pages {
        let hand = read_hand_written(pages_dir, page)?;
        rendered.push((page, manpage::render(page, &hand)?));
    }
    let stray = stray_files(pages_dir, &pages)?;
    if !stray.is_empty() {
        bail!(
            "{}: no command has a page named after {} (a removed or renamed subcommand?)",
            pages_dir.display(),
            stray.join(", ")
        );
    }
    let completions: Vec<_> = programs()
        .into_iter()
        .flat_map(completions::scripts)
        .collect::<Result<_>>()?;

    let man_dir = out.join("man").join(format!("man{SECTION}"));
    let mut man_pages = Vec::new();
    for (page, text) in rendered {
        let path = man_dir.join(format!("{}.{SECTION}", page.name));
        write(&path, text.as_bytes())?;
        man_pages.push(path);
    }
    let mut written = Vec::new();
    for script in completions {
        let path = out.join("completions").join(&script.relative_path);
        write(&path, &script.text)?;
        written.push(path);
    }
    Ok(Generated {
        man_pages,
        completions: written,
    })
}

/// The `.md` files of `dir` (other than README.md) that name no page.
pub fn stray_files(dir: &Path, pages: &[Page]) -> Result<Vec<String>> {
    let mut stray = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".md") else {
            continue;
        };
        if stem != "README" && !pages.iter().any(|p| p.name == stem) {
            stray.push(name);
        }
    }
    stray.sort();
    Ok(stray)
}

fn write(path: &Path, contents: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, contents).with_context(|| format!("writing {}", path.display()))
}
