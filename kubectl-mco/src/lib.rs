//! `kubectl mco`: the MachineConfigPools and each node's update, read from the API like
//! kubectl reads it (kubeconfig, context, namespace), printed as tables (coloured on a
//! terminal only) or as the JSON/YAML the companion's `/status.json` serves.
//!
//! - `cli`: the command line, kubectl's connection flags included.
//! - `table`: the text tables.
//! - `watch`: `--watch`, redrawing when a pool, Node or MachineConfigNode changes.

mod cli;
mod table;
mod watch;

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use mco_kube::fleet::{self, FleetStatus};

pub use cli::{Cli, Command, Output};

/// Runs the plugin with the process's arguments: 0 on success, 1 on an error (printed on
/// stderr), 2 on a usage error (clap's).
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: &Cli) -> Result<()> {
    let client = cli.connection.client().await?;
    let namespace = cli.connection.namespace.as_deref();
    let stdout = std::io::stdout();
    let colour = stdout.is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let render = |status: &FleetStatus| render(cli, status, colour);
    if cli.watch {
        return watch::run(&client, namespace, colour, render).await;
    }
    let status = fleet::read(&client, namespace).await?;
    let text = render(&status)?;
    let mut out = stdout.lock();
    out.write_all(text.as_bytes())
        .context("writing to stdout")?;
    Ok(())
}

/// What one read of the fleet prints.
fn render(cli: &Cli, status: &FleetStatus, colour: bool) -> Result<String> {
    match &cli.command {
        Command::Status => match cli.output {
            Some(format) => serialize(format, status),
            None => Ok(table::status(status, colour)),
        },
        Command::Nodes { pool } => {
            let found = status.pool(pool).with_context(|| {
                let names: Vec<&str> = status.pools.iter().map(|p| p.name.as_str()).collect();
                format!(
                    "machineconfigpool {pool:?} not found (pools: {})",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                )
            })?;
            match cli.output {
                Some(format) => serialize(format, found),
                None => Ok(table::nodes(&found.nodes, colour)),
            }
        }
    }
}

fn serialize<T: serde::Serialize>(format: Output, value: &T) -> Result<String> {
    Ok(match format {
        Output::Json => fleet::to_json(value).context("writing JSON")?,
        Output::Yaml => serde_saphyr::to_string(value).context("writing YAML")?,
    })
}
