//! `mco-agent recover [--yes] [--action reapply|retarget] [--wait DURATION]`: for a Degraded or
//! stuck node. Shows what is wrong (the node's status, every mismatch of the disk against its
//! current config, the update in progress and its step, a drain blocker, the deployments),
//! proposes the remedy an admin would otherwise apply by hand ([`diagnose`]), and with
//! confirmation applies it: the force file (the running agent re-applies the desired config
//! over drift), or the Node's `desiredConfig` set back to the config the node runs. Every choice
//! is printed before it is made, logged to the journal and recorded as an Event on the Node.
//!
//! The disk is only ever changed by the running agent (`recover` asks it through the force file
//! or the Node), so an update the agent is running is never raced.

pub mod diagnose;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use machine_config::MachineConfig;
use machine_config::mco::annotations::{DESIRED_CONFIG, REASON, STATE};
use machine_config::mco::paths::FORCE_FILE;

use self::diagnose::{Action, Findings, Remedy};
use super::Exit;
use crate::cli::status::{self, NodeStatus};
use crate::cluster::{self, ClusterOptions, KubeNodeApi, NodeApi};
use crate::engine::BOOT_ID_FILE;
use crate::engine::record;
use crate::engine::report::read_status;
use crate::input;
use crate::rootfs::{Owner, Root};
use crate::validate::{SpecRules, validate_as};

/// The reason of the Event `recover` records on the Node (not one of the MCD's: it has no such
/// command).
pub const RECOVER_EVENT: &str = "RecoverRequested";
/// How long the cluster may take to answer before `recover` goes on with the node's files.
const CLUSTER_TIMEOUT: Duration = Duration::from_secs(15);

/// Arguments of `recover`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Root directory of the node.
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// The ostree sysroot to read the deployments from (default: the root).
    #[arg(long)]
    pub sysroot: Option<PathBuf>,
    /// Do it without asking.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Apply this remedy instead of the proposed one.
    #[arg(long, value_enum)]
    pub action: Option<Action>,
    /// After acting, wait this long for the agent to report the node Done (e.g. `5m`).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub wait: Option<Duration>,
    /// The node's credentials (to read and write its Node and record an Event).
    #[arg(long, default_value = cluster::KUBELET_KUBECONFIG)]
    pub kubeconfig: PathBuf,
    /// The Node's name (default: the host name).
    #[arg(long)]
    pub node_name: Option<String>,
    /// Leave the cluster out: only the node's own files are read and written.
    #[arg(long)]
    pub no_cluster: bool,
    /// Read the boot id from this file instead of the kernel's (tests simulate reboots).
    #[arg(long, hide = true)]
    pub boot_id_file: Option<PathBuf>,
}

/// Diagnoses, proposes, and with confirmation acts.
pub fn run(args: &Args) -> Result<ExitCode> {
    // it writes to the node once confirmed: said before anything is shown or asked
    super::check_writable(&args.root)?;
    let root = super::open_root(&args.root)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(recover(args, &root))
}

async fn recover(args: &Args, root: &Root) -> Result<ExitCode> {
    let sysroot = args.sysroot.clone().unwrap_or_else(|| args.root.clone());
    let boot_id = args
        .boot_id_file
        .clone()
        .unwrap_or_else(|| PathBuf::from(BOOT_ID_FILE));
    let node_status = status::gather(root, &sysroot, &boot_id).await;
    println!(
        "{}",
        status::render::human(&node_status, record::now_ms()).trim_end()
    );
    let node = connect(args).await;
    let (findings, mismatch_lines) = find(root, &node_status, node.as_ref()).await?;
    if !mismatch_lines.is_empty() {
        println!(
            "\nThe disk against {}:",
            findings.current.as_deref().unwrap_or("?")
        );
        for line in &mismatch_lines {
            println!("  {line}");
        }
    }
    let remedy = match args.action {
        Some(action) => diagnose::forced(&findings, action),
        None => diagnose::propose(&findings),
    };
    println!("\nRemedy: {remedy}");
    if !remedy.acts() {
        return Ok(match remedy {
            Remedy::CannotHelp { .. } => Exit::NotAsWanted.into(),
            _ => ExitCode::SUCCESS,
        });
    }
    if !confirmed(args.yes)? {
        println!("Nothing was changed.");
        return Ok(Exit::NotConfirmed.into());
    }
    super::check_writable(&args.root)?;
    tracing::info!(remedy = %remedy, "mco-agent recover: {remedy}");
    let target = act(root, node.as_ref(), &remedy).await?;
    let agent_runs = node_status.agent.as_ref().is_some_and(|a| a.running);
    if !agent_runs {
        tracing::warn!(
            "no agent runs on this node to act on it: nothing changes until it starts (systemctl start mco-agent)"
        );
    }
    match args.wait {
        Some(timeout) => wait_done(root, node.as_ref(), &target, timeout).await,
        None => {
            println!(
                "Follow it with `mco-agent status` or `journalctl -u mco-agent` (the agent acts within seconds while it runs)."
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The Node, when the cluster answers with the node's credentials; else says why not.
async fn connect(args: &Args) -> Option<KubeNodeApi> {
    if args.no_cluster {
        return None;
    }
    let attempt = async {
        let name = cluster::node_name(args.node_name.as_deref())?;
        let mut options = ClusterOptions::new(&name);
        options.kubeconfig = args.kubeconfig.clone();
        let node = KubeNodeApi::connect(&options).await?;
        node.annotations().await?;
        anyhow::Ok(node)
    };
    match tokio::time::timeout(CLUSTER_TIMEOUT, attempt).await {
        Ok(Ok(node)) => Some(node),
        Ok(Err(e)) => {
            println!("Cluster:      not reached ({e:#}); the node's own files only");
            None
        }
        Err(_) => {
            println!(
                "Cluster:      no answer within {CLUSTER_TIMEOUT:?}; the node's own files only"
            );
            None
        }
    }
}

/// What is wrong: the Node's annotations where the cluster answers (the source of truth), the
/// node's files otherwise; the disk checked against the current config (and the desired one
/// when they differ). Returns the mismatches as the MCD's lines too.
async fn find(
    root: &Root,
    node_status: &NodeStatus,
    node: Option<&KubeNodeApi>,
) -> Result<(Findings, Vec<String>)> {
    let mut f = Findings {
        state: node_status.state.clone(),
        reason: node_status.reason.clone(),
        desired: node_status.desired.clone(),
        pending: node_status
            .pending
            .as_ref()
            .map(|p| (p.from.clone(), p.to.clone(), p.step.clone())),
        force_file: root.lstat(Path::new(FORCE_FILE))?.is_some(),
        cluster: node.is_some(),
        ..Findings::default()
    };
    if let Some(node) = node {
        let annotations = node.annotations().await?;
        let get = |k: &str| annotations.get(k).map(str::to_string);
        f.state = get(STATE).or(f.state);
        f.reason = get(REASON).unwrap_or_default();
        f.desired = get(DESIRED_CONFIG).filter(|d| !d.is_empty()).or(f.desired);
    }
    let mut lines = Vec::new();
    if let Some(current) = input::read_current(root)? {
        let name = current.machine_config.name().to_string();
        let rules = SpecRules::of(&current.machine_config);
        let report = validate_as(root, &name, &current.ignition, rules);
        lines = report.lines();
        f.drift = Some(report.mismatches.iter().map(|m| m.detail_line()).collect());
        if let Some(desired) = f.desired.clone().filter(|d| *d != name)
            && let Some(mc) = desired_config(root, node, &desired).await
        {
            f.disk_matches_desired = mc
                .ignition()
                .ok()
                .map(|config| validate_as(root, &desired, &config, SpecRules::of(&mc)).is_ok());
        }
        f.current = Some(name);
    }
    Ok((f, lines))
}

/// The desired config's contents: from the update record when it is the one being applied,
/// else from the cluster.
async fn desired_config(
    root: &Root,
    node: Option<&KubeNodeApi>,
    name: &str,
) -> Option<MachineConfig> {
    if let Ok(Some(rec)) = record::load(root)
        && rec.desired.name() == name
    {
        return Some(rec.desired);
    }
    node?.get_machine_config(name).await.ok()
}

/// Asks on the terminal unless `yes`; refuses without a terminal to ask on.
fn confirmed(yes: bool) -> Result<bool> {
    if yes {
        return Ok(true);
    }
    super::ask(
        "Proceed?",
        "not confirmed: no terminal to ask on (run with --yes to act without one); nothing was \
         changed",
    )
}

/// Applies `remedy`; returns the config the node should end up Done in.
async fn act(root: &Root, node: Option<&KubeNodeApi>, remedy: &Remedy) -> Result<String> {
    let target = match remedy {
        Remedy::Reapply { config, .. } => {
            root.write_atomic(Path::new(FORCE_FILE), b"", 0o644, Owner::ROOT)
                .with_context(|| format!("creating {FORCE_FILE}"))?;
            println!("Created {FORCE_FILE}: the agent re-applies {config}.");
            config.clone()
        }
        Remedy::Retarget { to, .. } => {
            let node = node.context("re-targeting needs the cluster")?;
            node.set_annotations(&[(DESIRED_CONFIG, Some(to))])
                .await
                .context("setting the Node's desiredConfig")?;
            println!("Set the Node's desiredConfig to {to}.");
            println!(
                "The pool's controller may target the node again: fix or revert the pool's configuration first if the update cannot succeed."
            );
            to.clone()
        }
        _ => anyhow::bail!("nothing to do"),
    };
    if let Some(node) = node
        && let Err(e) = node
            .event(RECOVER_EVENT, &format!("mco-agent recover: {remedy}"))
            .await
    {
        tracing::warn!(error = %e, "recording the recover event failed");
    }
    Ok(target)
}

/// Waits for the node to be Done in `target` (the Node's annotations with a cluster, the
/// status file without) with no force file left.
async fn wait_done(
    root: &Root,
    node: Option<&KubeNodeApi>,
    target: &str,
    timeout: Duration,
) -> Result<ExitCode> {
    let started = Instant::now();
    let last = loop {
        let (state, current, reason) = match node {
            Some(node) => {
                let a = node.annotations().await?;
                let get = |k: &str| a.get(k).unwrap_or_default().to_string();
                (
                    get(STATE),
                    get(machine_config::mco::annotations::CURRENT_CONFIG),
                    get(REASON),
                )
            }
            None => match read_status(root)? {
                Some(s) => (
                    s.state.as_str().to_string(),
                    s.current.unwrap_or_default(),
                    s.reason,
                ),
                None => Default::default(),
            },
        };
        let forced = root.lstat(Path::new(FORCE_FILE))?.is_some();
        if state == "Done" && current == target && !forced {
            println!("Recovered: the node is Done in {target}.");
            return Ok(ExitCode::SUCCESS);
        }
        if started.elapsed() >= timeout {
            break format!("state {state:?}, current {current:?}, reason {reason:?}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    println!("Not recovered within {timeout:?}: {last}");
    Ok(Exit::NotAsWanted.into())
}
