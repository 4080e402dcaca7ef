//! `mco-agent diff OLD NEW [--policy FILE] [--json]`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use machine_config::diff::Changes;
use machine_config::plan::{Plan, PolicyOptions};

use crate::input::LoadedConfig;
use crate::input::policy::read_policy_file;

/// Arguments of `diff`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The config the node is in (MachineConfig or Ignition).
    pub old: PathBuf,
    /// The config to move to.
    pub new: PathBuf,
    /// A MachineConfiguration (YAML or JSON) whose `spec.nodeDisruptionPolicy` is merged over
    /// the default policies (as the MCO merges the cluster's).
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Print the plan as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Prints the plan; exit 0 when reconcilable, 2 when not.
pub fn run(args: &Args) -> Result<ExitCode> {
    let old = LoadedConfig::read(&args.old)?;
    let new = LoadedConfig::read(&args.new)?;
    let mut opts = PolicyOptions {
        arch: std::env::consts::ARCH.to_string(),
        ..PolicyOptions::default()
    };
    if let Some(path) = &args.policy {
        let file = read_policy_file(path)?;
        opts.policies = file.policies;
        opts.overrides = file.overrides;
    }
    let plan = Plan::new(&old.machine_config, &new.machine_config, &opts)?;
    if args.json {
        println!("{}", plan.to_json());
    } else {
        print_plan(&plan);
    }
    Ok(if plan.reconcilable {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(super::EXIT_UNRECONCILABLE)
    })
}

fn print_plan(p: &Plan) {
    if let Some(reason) = &p.reason {
        println!("unreconcilable: {reason}");
    } else {
        println!("reconcilable");
    }
    print_changes("files", &p.files);
    print_changes("units", &p.units);
    let yes_no = |b: bool| if b { "changed" } else { "unchanged" };
    println!("passwd: {}", yes_no(p.passwd));
    println!("osImageURL: {}", yes_no(p.os_update));
    println!("kernel type: {}", yes_no(p.kernel_type));
    println!("fips: {}", yes_no(p.fips));
    if p.kargs.is_empty() {
        println!("kernel arguments: unchanged");
    } else {
        println!("kernel arguments: rpm-ostree kargs {}", p.kargs.join(" "));
    }
    if !p.extensions.install.is_empty() || !p.extensions.uninstall.is_empty() {
        println!(
            "extensions: install [{}], uninstall [{}]",
            p.extensions.install.join(" "),
            p.extensions.uninstall.join(" ")
        );
    }
    if p.reconcilable {
        let actions: Vec<String> = p.actions.iter().map(ToString::to_string).collect();
        println!("actions: {}", actions.join(", "));
        // Which policy entry chose each change's actions.
        for line in p.explain() {
            println!("  {line}");
        }
        println!("drain: {}", if p.drain { "yes" } else { "no" });
        println!("reboot: {}", if p.reboot { "yes" } else { "no" });
    }
}

fn print_changes(what: &str, c: &Changes) {
    if c.is_empty() {
        println!("{what}: unchanged");
        return;
    }
    for (verb, list) in [
        ("added", &c.added),
        ("changed", &c.changed),
        ("removed", &c.removed),
    ] {
        for item in list {
            println!("{what} {verb}: {item}");
        }
    }
}
