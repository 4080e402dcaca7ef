//! `mco-firstboot [--root DIR] [--skip-reboot] [--retry-every DURATION]`: completes first
//! boot (see `mco_firstboot`). Exit 0 when first boot is complete or a reboot into it was
//! requested; 1 on failure, or with `--retry-every` (what the unit runs) another attempt after
//! that long, until one succeeds: the unit's start job stays pending meanwhile, so kubelet,
//! ordered after it, waits (as with the MCD, which loops "Sleeping 1 minute for retry"). A
//! oneshot unit's `Restart=` would not hold kubelet back: systemd ends the start job at the
//! first failure.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use machine_config::mco::paths::ENCAPSULATED;
use mco_agent::host::reboot::{LogindRebooter, Rebooter};
use mco_agent::os::{ClientConfig, DbusOsUpdater};
use mco_agent::rootfs::Root;
use mco_firstboot::cli::Args;
use mco_firstboot::{Completed, Options, complete, encapsulated};

fn main() -> ExitCode {
    let args = Args::parse();
    if let Err(e) = mco_agent::logging::init("mco-firstboot", None, "info") {
        eprintln!("warning: logging not set up: {e}");
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut attempt = 1u64;
    loop {
        match runtime.block_on(run(&args)) {
            Ok(done) => {
                print(&done, &args);
                return ExitCode::SUCCESS;
            }
            Err(e) => match args.retry_every {
                None => {
                    eprintln!("error: {e:#}");
                    return ExitCode::FAILURE;
                }
                Some(every) => {
                    eprintln!(
                        "error: attempt {attempt} failed: {e:#}; retrying in {}",
                        humantime::format_duration(every)
                    );
                    runtime.block_on(async { tokio::time::sleep(every).await });
                    attempt += 1;
                }
            },
        }
    }
}

async fn run(args: &Args) -> Result<Completed> {
    let root = mco_agent::host::selinux::label_files(
        Root::open(&args.root)?,
        mco_agent::engine::live::is_host_root(&args.root),
    );
    if encapsulated::read(&root)?.is_none() {
        return Ok(Completed::NothingToDo);
    }
    let bus = mco_agent::system_bus::connect()
        .await
        .context("connecting to the system bus")?;
    let config = ClientConfig {
        client_id: "mco-firstboot".into(),
        ..ClientConfig::default()
    };
    let os = DbusOsUpdater::new(&bus, config)
        .await
        .context("registering with rpm-ostree")?;
    let rebooter =
        (!args.skip_reboot).then(|| LogindRebooter::on_connection(bus.clone(), &args.root));
    let result = complete(
        &root,
        &os,
        rebooter.as_ref().map(|r| r as &dyn Rebooter),
        &Options::default(),
    )
    .await;
    if let Err(e) = os.close().await {
        tracing::warn!(error = %e, "unregistering from rpm-ostree");
    }
    result
}

fn print(done: &Completed, args: &Args) {
    let file = args.root.join(ENCAPSULATED.trim_start_matches('/'));
    match done {
        Completed::NothingToDo => {
            println!("first boot is complete: no {}", file.display())
        }
        Completed::NoChange { config } => println!(
            "first boot is complete: the node runs the OS of {config}; removed {}",
            file.display()
        ),
        Completed::Staged {
            config,
            changes,
            rebooting,
        } => {
            for c in changes {
                println!("staged for {config}: {c}");
            }
            if *rebooting {
                println!("rebooting into {config}");
            } else {
                println!("reboot needed into {config}: not rebooting (--skip-reboot)");
            }
        }
    }
}
