//! `mco-agent rollback`: back to the config (and, when the last update changed the OS, the
//! deployment) the node was in before its last completed update, with one reboot; what the
//! agent does by itself when the boot into an update fails its health checks. It prints what
//! it will do and asks, unless `--yes`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Result, bail};

use super::{Exit, exit};
use crate::engine::live::{self, SeamOptions};
use crate::engine::{Engine, EngineOptions, NoCluster, Outcome};

/// Arguments of `rollback`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Root directory of the node.
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// Do not ask: roll back.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Do not reboot: the rollback is finished by the agent after the next boot.
    #[arg(long)]
    pub skip_reboot: bool,
    /// Read the boot id from this file instead of the kernel's (tests simulate reboots).
    #[arg(long, hide = true)]
    pub boot_id_file: Option<PathBuf>,
}

pub fn run(args: &Args) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(roll_back(args))
}

async fn roll_back(args: &Args) -> Result<ExitCode> {
    super::check_writable(&args.root)?;
    let live = live::is_host_root(&args.root);
    let root = crate::host::selinux::label_files(super::open_root(&args.root)?, live);
    let no_reboot = if args.skip_reboot {
        Some("--skip-reboot".to_string())
    } else if !live {
        Some(format!(
            "{} is an alternate root, never rebooted",
            args.root.display()
        ))
    } else {
        None
    };
    let why_no_reboot = no_reboot.clone();
    let seams = live::connect(
        &args.root,
        &SeamOptions {
            live,
            skip_os: false,
            no_reboot,
            lock_finalization: false,
        },
    )
    .await?;
    let mut opts = EngineOptions::default();
    if let Some(f) = &args.boot_id_file {
        opts.boot_id_file = f.clone();
    }
    let engine = Engine::new(root, seams, opts, Arc::new(NoCluster))?;
    if let Some(rec) = engine.pending()?
        && rec.by_hand
        && rec.step.rolls_back_boot()
        && rec.boot_id == engine.boot_id()
    {
        // An earlier `rollback` of this boot was interrupted: finish it.
        println!(
            "Resuming the rollback from {} to {} (step {}).",
            rec.desired.name(),
            rec.current.name(),
            rec.step
        );
        let to = rec.current.name().to_string();
        let report = engine.resume().await;
        return ended(report.map(|r| r.outcome), &to, &engine, live);
    }
    let plan = engine.rollback_plan()?;
    println!(
        "Rolling back from {} to {}:",
        plan.from.name(),
        plan.to.name()
    );
    for line in plan.describe(why_no_reboot.as_deref()) {
        println!("  - {line}");
    }
    if !args.yes && !confirm(why_no_reboot.is_none())? {
        println!("Nothing was changed.");
        return Ok(Exit::NotConfirmed.into());
    }
    let report = engine.roll_back_by_hand(&plan).await;
    ended(Some(report.outcome), plan.to.name(), &engine, live)
}

/// What the rollback ended with, said.
fn ended(outcome: Option<Outcome>, to: &str, engine: &Engine, live: bool) -> Result<ExitCode> {
    match outcome.unwrap_or(Outcome::Done) {
        Outcome::Rebooting => {
            println!("Rolled back; rebooting into {to}.");
            Ok(ExitCode::SUCCESS)
        }
        // an alternate root is not the node this runs on: nothing to tell it to reboot
        Outcome::NeedsReboot if !live => {
            println!(
                "Rolled back; not rebooted ({}): the agent finishes the rollback at the root's \
                 next boot.",
                engine.seams().no_reboot
            );
            Ok(ExitCode::SUCCESS)
        }
        Outcome::NeedsReboot => {
            println!(
                "Rolled back; reboot the node to finish ({}).",
                engine.seams().no_reboot
            );
            Ok(ExitCode::SUCCESS)
        }
        Outcome::Degraded(reason) => Err(exit::error(Exit::NotAsWanted, reason)),
        other => bail!("rolling back ended with {other:?}"),
    }
}

/// Asks on the terminal; refuses to guess without one. `reboots`: the rollback reboots the
/// node (not with `--skip-reboot` or an alternate root, where the question must not promise one).
fn confirm(reboots: bool) -> Result<bool> {
    super::ask(
        if reboots {
            "Roll back and reboot?"
        } else {
            "Roll back (without a reboot)?"
        },
        "not rolling back without a terminal to ask on (pass --yes to roll back without asking); \
         nothing was changed",
    )
}
