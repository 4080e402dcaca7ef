//! `mco-agent once-from FILE [--root DIR] [--skip-reboot] [--skip-os]`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;

use crate::engine::{Outcome, UpdateReport};
use crate::input::LoadedConfig;
use crate::once::{EMPTY_CONFIG_NAME, OnceFromOptions, once_from};

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
    /// refusing the config when rpm-ostree cannot make them.
    #[arg(long)]
    pub skip_os: bool,
    /// Read the boot id from this file instead of the kernel's (tests simulate reboots).
    #[arg(long, hide = true)]
    pub boot_id_file: Option<PathBuf>,
}

/// Applies the file and prints what was done.
pub fn run(args: &Args) -> Result<ExitCode> {
    let desired = LoadedConfig::read(&args.file)?;
    let opts = OnceFromOptions {
        skip_os: args.skip_os,
        skip_reboot: args.skip_reboot,
        arch: String::new(),
        boot_id_file: args.boot_id_file.clone(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(once_from(&args.root, &desired, &opts))?;
    let mut code = ExitCode::SUCCESS;
    for update in report.resumed.iter().chain(&report.update) {
        match &update.outcome {
            Outcome::Unreconcilable(reason) => {
                eprintln!("error: {reason}");
                code = ExitCode::from(super::EXIT_UNRECONCILABLE);
            }
            Outcome::Degraded(reason) => {
                let hint = if !args.skip_os && reason.contains("which needs rpm-ostree") {
                    ". Rerun with --skip-os to apply everything else"
                } else {
                    ""
                };
                eprintln!("error: {}: {reason}{hint}", args.file.display());
                code = ExitCode::from(super::EXIT_FAILURE);
            }
            _ => print_report(update, &args.root, &report.no_reboot),
        }
    }
    Ok(code)
}

fn print_report(r: &UpdateReport, root: &Path, no_reboot: &str) {
    if r.from == EMPTY_CONFIG_NAME {
        println!("applied {} to {} (first application)", r.to, root.display());
    } else if r.applied.is_some() {
        println!("applied {} to {} (was {})", r.to, root.display(), r.from);
    } else {
        println!(
            "finished the update of {} from {} to {}",
            root.display(),
            r.from,
            r.to
        );
    }
    if let Some(o) = &r.applied {
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
            let word = |b: bool, yes: &'static str| if b { yes } else { "unchanged" };
            println!(
                "core: ssh keys {}, password hash {}",
                word(o.ssh_keys_written, "written"),
                word(o.password_changed, "changed")
            );
        }
        for s in &o.skipped {
            println!("skipped: {s}");
        }
    }
    for s in &r.left_out {
        println!("left out (--skip-os): {s}");
    }
    for s in &r.os_changes {
        println!("OS change staged: {s}");
    }
    if let Some(plan) = &r.plan {
        let actions: Vec<String> = plan
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
    }
    match r.outcome {
        Outcome::Rebooting => println!("reboot needed: rebooting into {}", r.to),
        Outcome::NeedsReboot => println!("reboot needed: {no_reboot}"),
        _ => println!("no reboot needed"),
    }
    for s in &r.skipped_actions {
        println!("skipped post-update action: {s}");
    }
}
