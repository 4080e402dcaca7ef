//! `mco-agent once-from FILE [--root DIR] [--skip-reboot] [--skip-os]`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;

use crate::input::LoadedConfig;
use crate::once::{OnceFromError, OnceFromOptions, OnceFromReport, once_from};
use crate::rootfs::Root;

/// Arguments of `once-from`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// MachineConfig (YAML or JSON) or Ignition config (spec 2.2, 3.0–3.5) to apply.
    pub file: PathBuf,
    /// Root directory of the node.
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// Do not reboot even if the plan needs it (say so instead).
    #[arg(long)]
    pub skip_reboot: bool,
    /// Leave out OS changes (image, kernel arguments, kernel type, extensions) instead of
    /// refusing the config.
    #[arg(long)]
    pub skip_os: bool,
}

/// Applies the file and prints what was done.
pub fn run(args: &Args) -> Result<ExitCode> {
    let desired = LoadedConfig::read(&args.file)?;
    let root = Root::open(&args.root)?;
    let opts = OnceFromOptions {
        skip_os: args.skip_os,
        arch: String::new(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    match runtime.block_on(once_from(&root, &desired, &opts)) {
        Ok(report) => {
            print_report(&report, &args.root, args.skip_reboot);
            Ok(ExitCode::SUCCESS)
        }
        Err(OnceFromError::Unreconcilable(reason)) => {
            eprintln!("error: {reason}");
            Ok(ExitCode::from(super::EXIT_UNRECONCILABLE))
        }
        Err(e) => Err(anyhow::Error::from(e).context(args.file.display().to_string())),
    }
}

fn print_report(r: &OnceFromReport, root: &Path, skip_reboot: bool) {
    let o = &r.outcome;
    match &r.previous {
        Some(prev) => println!("applied {} to {} (was {prev})", r.config, root.display()),
        None => println!(
            "applied {} to {} (first application)",
            r.config,
            root.display()
        ),
    }
    println!(
        "files: {} written, {} unchanged, {} restored, {} removed",
        o.files_written.len(),
        o.files_unchanged,
        o.files_restored.len(),
        o.files_removed.len()
    );
    if !o.directories.is_empty() || !o.links.is_empty() {
        println!(
            "directories: {}, links: {}",
            o.directories.len(),
            o.links.len()
        );
    }
    println!(
        "units: {} unit files changed, {} units removed; enabled [{}], disabled [{}], preset [{}]",
        o.units_written.len(),
        o.units_removed.len(),
        o.enablement.enable.join(" "),
        o.enablement.disable.join(" "),
        o.enablement.preset.join(" ")
    );
    if o.ssh_keys_written || o.password_changed {
        println!(
            "core: ssh keys {}, password hash {}",
            if o.ssh_keys_written {
                "written"
            } else {
                "unchanged"
            },
            if o.password_changed {
                "changed"
            } else {
                "unchanged"
            }
        );
    }
    for s in &o.skipped {
        println!("skipped: {s}");
    }
    for s in &r.left_out {
        println!("left out (--skip-os): {s}");
    }
    let actions: Vec<String> = r
        .plan
        .actions
        .iter()
        .map(|a| match a.unit() {
            Some(u) => format!("{} {u}", a.type_name()),
            None => a.type_name().to_string(),
        })
        .collect();
    if !actions.is_empty() {
        println!("post-update actions: {}", actions.join(", "));
    }
    if r.plan.reboot {
        let why = if skip_reboot {
            "not rebooting (--skip-reboot)"
        } else if root != Path::new("/") {
            "not rebooting: an alternate root is never rebooted"
        } else {
            "once-from does not reboot the node itself yet: reboot it to finish"
        };
        println!("reboot needed: {why}");
    } else {
        println!("no reboot needed");
    }
}
