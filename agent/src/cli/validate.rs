//! `mco-agent validate --config FILE [--root DIR] [--json]`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use crate::input::LoadedConfig;
use crate::rootfs::Root;
use crate::validate::validate;

/// Arguments of `validate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// MachineConfig (YAML or JSON) or Ignition config to check against.
    #[arg(long)]
    pub config: PathBuf,
    /// Root directory of the node.
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// Print the mismatches as a JSON list.
    #[arg(long)]
    pub json: bool,
}

/// Validates and prints the report: the MCD-compatible line first, then one line per mismatch.
pub fn run(args: &Args) -> Result<ExitCode> {
    // A one-shot command: its text is read whole and parsed in place, which is about three
    // times cheaper in CPU than the streamed read the daemon and `once-from` use to keep the
    // contents out of memory (docs/benchmarks.md, "validate").
    let config = LoadedConfig::read_whole(&args.config)?;
    let root = Root::open(&args.root)?;
    let report = validate(&root, config.machine_config.name(), &config.ignition);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report.mismatches)?);
    } else if report.is_ok() {
        println!("on-disk state matches {}", report.config);
    } else {
        for line in report.lines() {
            println!("{line}");
        }
    }
    Ok(if report.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(super::EXIT_MISMATCH)
    })
}
