//! `mco-agent drain --node-name NAME [--kubeconfig FILE] [--eviction-kubeconfig FILE] [--timeout DURATION]`
//! and `mco-agent uncordon --node-name NAME [--kubeconfig FILE] [--timeout DURATION]`: the agent's drain by hand.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};

use super::{Classify, Exit, exit};
use crate::cluster::{self, DrainError, DrainOptions, Drainer, RetryPolicy};

/// Arguments of `drain`.
#[derive(Debug, clap::Args)]
pub struct DrainArgs {
    /// The node to drain.
    #[arg(long = "node-name", value_name = "NAME", alias = "node")]
    pub node: String,
    /// Credentials for the node (cordon).
    #[arg(long, default_value = cluster::KUBELET_KUBECONFIG)]
    pub kubeconfig: PathBuf,
    /// Separate credentials for listing and evicting pods (default: --kubeconfig).
    #[arg(long)]
    pub eviction_kubeconfig: Option<PathBuf>,
    /// Give up after this long (attempts of at most 90 s are repeated until then), e.g. `10m`.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1h")]
    pub timeout: Duration,
}

/// Arguments of `uncordon`.
#[derive(Debug, clap::Args)]
pub struct UncordonArgs {
    /// The node to make schedulable.
    #[arg(long = "node-name", value_name = "NAME", alias = "node")]
    pub node: String,
    /// Credentials for the node.
    #[arg(long, default_value = cluster::KUBELET_KUBECONFIG)]
    pub kubeconfig: PathBuf,
    /// Give up after this long (failed API calls are retried until then), e.g. `30s`; the
    /// error then names the last call's failure.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "90s")]
    pub timeout: Duration,
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

async fn drainer(
    node: &str,
    kubeconfig: &Path,
    eviction: Option<&Path>,
    options: DrainOptions,
) -> Result<Drainer> {
    let node = cluster::node_name(Some(node)).invalid_input()?;
    let node_client = client(kubeconfig).await?;
    let pods_client = match eviction {
        Some(path) => client(path).await?,
        None => node_client.clone(),
    };
    Ok(Drainer::new(
        &node,
        node_client,
        pods_client,
        options,
        RetryPolicy::default(),
    ))
}

/// A client with the credentials of `kubeconfig`; a file that does not exist is invalid
/// input.
async fn client(kubeconfig: &Path) -> Result<kube::Client> {
    if !kubeconfig.exists() {
        return Err(exit::error(
            Exit::InvalidInput,
            format!("--kubeconfig {}: no such file", kubeconfig.display()),
        ));
    }
    cluster::client_from_kubeconfig(kubeconfig)
        .await
        .map_err(|e| {
            let exit = match e {
                cluster::ClusterError::Kubeconfig { .. } => Exit::InvalidInput,
                _ => Exit::Failed,
            };
            exit::classified(exit, None, e.into())
        })
}

/// Cordons and drains; exit 1 naming the pods (and their PodDisruptionBudgets) left.
pub fn run_drain(args: &DrainArgs) -> Result<ExitCode> {
    let options = DrainOptions {
        overall_timeout: args.timeout,
        attempt_timeout: DrainOptions::default().attempt_timeout.min(args.timeout),
        ..DrainOptions::default()
    };
    runtime()?.block_on(async {
        let drainer = drainer(
            &args.node,
            &args.kubeconfig,
            args.eviction_kubeconfig.as_deref(),
            options,
        )
        .await?;
        let report = drainer.drain().await.map_err(|e| {
            // pods that block are the node's state; anything else kept the drain from working
            let exit = match e {
                DrainError::Blocked { .. } => Exit::NotAsWanted,
                _ => Exit::Failed,
            };
            exit::classified(exit, None, e.into())
        })?;
        for pod in &report.removed {
            println!("evicted pod {pod}");
        }
        for (pod, why) in &report.skipped {
            println!("skipped pod {pod} ({why})");
        }
        println!(
            "node/{} drained in {:.1}s",
            args.node,
            report.elapsed.as_secs_f64()
        );
        Ok(ExitCode::SUCCESS)
    })
}

/// Makes the node schedulable again, retrying a failed API call for up to `--timeout`.
pub fn run_uncordon(args: &UncordonArgs) -> Result<ExitCode> {
    runtime()?.block_on(async {
        let options = DrainOptions {
            attempt_timeout: args.timeout,
            ..DrainOptions::default()
        };
        let drainer = drainer(&args.node, &args.kubeconfig, None, options).await?;
        drainer.uncordon().await?;
        println!("node/{} uncordoned", args.node);
        Ok(ExitCode::SUCCESS)
    })
}
