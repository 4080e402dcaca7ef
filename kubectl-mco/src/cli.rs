//! The command line. kubectl hands a plugin every argument after its name and none of its own
//! flags, so the connection flags kubectl users type (`--kubeconfig`, `--context`, `-n`) are
//! parsed here, with kubectl's meaning.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use kube::config::{KubeConfigOptions, Kubeconfig};

#[derive(Debug, Parser)]
#[command(
    name = "kubectl mco",
    bin_name = "kubectl mco",
    version,
    about = "MachineConfigPools and their nodes' updates (mco-agent)"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Print JSON or YAML instead of tables (the companion's /status.json has the same fields).
    #[arg(short = 'o', long, global = true, value_enum)]
    pub output: Option<Output>,
    /// Keep running and print again whenever a pool, Node or MachineConfigNode changes.
    #[arg(short = 'w', long, global = true)]
    pub watch: bool,
    #[command(flatten)]
    pub connection: Connection,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Every pool (config, machine counts, paused, degraded) and each of its nodes.
    Status,
    /// The nodes of one pool: state, current and desired config, update step, reason.
    Nodes {
        /// The MachineConfigPool's name.
        pool: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Json,
    Yaml,
}

/// How to reach the API server, as kubectl's flags say it.
#[derive(Debug, Args)]
pub struct Connection {
    /// Path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long, global = true, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current-context).
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// The namespace of the events shown (default: every namespace). Pools, Nodes and
    /// MachineConfigNodes are cluster-scoped.
    #[arg(short = 'n', long, global = true, value_name = "NAME")]
    pub namespace: Option<String>,
}

impl Connection {
    /// A client as kubectl would build it from these flags.
    pub async fn client(&self) -> Result<kube::Client> {
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..KubeConfigOptions::default()
        };
        let config = match &self.kubeconfig {
            Some(path) => {
                let kubeconfig = Kubeconfig::read_from(path)
                    .with_context(|| format!("reading kubeconfig {}", path.display()))?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                    .await
                    .with_context(|| format!("kubeconfig {}", path.display()))?
            }
            None => kube::Config::from_kubeconfig(&options)
                .await
                .context("reading the kubeconfig ($KUBECONFIG or ~/.kube/config)")?,
        };
        kube::Client::try_from(config).context("creating the API client")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line() {
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from([
            "kubectl-mco",
            "nodes",
            "worker",
            "-o",
            "yaml",
            "--context",
            "prod",
            "-n",
            "openshift-machine-config-operator",
            "-w",
        ])
        .unwrap();
        assert!(matches!(cli.command, Command::Nodes { ref pool } if pool == "worker"));
        assert_eq!(cli.output, Some(Output::Yaml));
        assert!(cli.watch);
        assert_eq!(cli.connection.context.as_deref(), Some("prod"));
        assert!(Cli::try_parse_from(["kubectl-mco", "status", "-o", "wide"]).is_err());
        assert!(Cli::try_parse_from(["kubectl-mco", "nodes"]).is_err());
    }
}
