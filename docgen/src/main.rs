//! `mco-docgen PAGES_DIR OUT_DIR`: writes the man pages (`OUT_DIR/man/man8/`) and shell
//! completions (`OUT_DIR/completions/{bash,zsh,fish}/`) of mco-agent, mco-firstboot and
//! mco-companion, with the hand-written sections from PAGES_DIR (`docs/man`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Generates the man pages and shell completions of mco-agent, mco-firstboot and mco-companion.
#[derive(Debug, Parser)]
#[command(name = "mco-docgen", version)]
struct Args {
    /// The hand-written sections, one `PAGE.md` per page (docs/man).
    pages_dir: PathBuf,
    /// Where to write `man/man8/` and `completions/`.
    out_dir: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match mco_docgen::generate(&args.pages_dir, &args.out_dir) {
        Ok(done) => {
            println!(
                "mco-docgen: {} man pages and {} completion scripts in {}",
                done.man_pages.len(),
                done.completions.len(),
                args.out_dir.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mco-docgen: {e:#}");
            ExitCode::FAILURE
        }
    }
}
