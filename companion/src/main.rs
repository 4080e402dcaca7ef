//! `mco-companion`: a thin binary over the library.

use std::process::ExitCode;

use clap::Parser;
use mco_companion::cli::{Cli, run};

fn main() -> ExitCode {
    let tuned = mco_companion::allocator::tune();
    // The MachineConfig cache holds every rendered config beside the base configs whose file
    // contents it repeats: hold each large content once.
    machine_config::source::shared::enable();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    mco_companion::allocator::log_settings(tuned);
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("mco-companion: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("mco-companion: {err:#}");
            ExitCode::FAILURE
        }
    }
}
