//! `mco-agent diff OLD NEW [--policy FILE] [-o json|yaml] [--check-playbooks [--root DIR]]`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use machine_config::diff::Changes;
use machine_config::plan::{Plan, PolicyOptions};
use machine_config::{Config, MachineConfig};

use super::contents::{self, Digest, Sides, Version};
use super::report::{Label, say};
use super::{Classify, Exit, diff_hooks};
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
    /// Refuse a config with a key no Ignition spec knows (most often a typo, which would
    /// otherwise be ignored with a warning and change what is applied). Exit 65.
    #[arg(long)]
    pub strict: bool,
    /// `-o json|yaml`: the plan as one object.
    #[command(flatten)]
    pub output: super::output::OutputArgs,
    /// Under each changed file, show how its contents change: a unified diff of OLD's
    /// contents against NEW's. A secret is never shown (a file others may not read, one under
    /// /etc/kubernetes, /var/lib/kubelet or /etc/pki, SSH keys, *.key, *.pem, pull secrets,
    /// password files, or contents holding a key, a password hash or a credential): only its
    /// sizes.
    #[arg(long, conflicts_with = "output")]
    pub show_contents: bool,
    /// Run the Ansible playbooks among the hooks the update would run in check mode
    /// (`ansible-playbook --check --diff`) against `--root`, on this machine as the calling
    /// user: they report what they would change. Check mode changes nothing only where the
    /// playbook lets it: a task marked `check_mode: false` runs for real. Use it on configs
    /// you trust. Exit 1 when one fails.
    #[arg(long)]
    pub check_playbooks: bool,
    /// The node's root the playbooks are checked against (their `mco_agent_root`).
    #[arg(long, default_value = "/", requires = "check_playbooks")]
    pub root: PathBuf,
    /// How the hooks run (for `--check-playbooks`).
    #[command(flatten)]
    pub hooks: super::hook_args::HookArgs,
}

/// Prints the plan; exit 0 when reconcilable, 2 when not.
pub fn run(args: &Args) -> Result<ExitCode> {
    let old = LoadedConfig::read(&args.old).invalid_input()?;
    let new = LoadedConfig::read(&args.new).invalid_input()?;
    if args.strict {
        old.refuse_ignored(&args.old.display().to_string())
            .invalid_input()?;
        new.refuse_ignored(&args.new.display().to_string())
            .invalid_input()?;
    }
    let mut opts = PolicyOptions {
        arch: std::env::consts::ARCH.to_string(),
        ..PolicyOptions::default()
    };
    if let Some(path) = &args.policy {
        let file = read_policy_file(path).invalid_input()?;
        opts.policies = file.policies;
        opts.overrides = file.overrides;
    }
    let plan = Plan::new(&old.machine_config, &new.machine_config, &opts).invalid_input()?;
    let mut hooks = if plan.reconcilable {
        diff_hooks::planned(&old.ignition, &new.ignition, &plan)?
    } else {
        Vec::new()
    };
    let mut checks_ok = true;
    if args.check_playbooks {
        let playbooks = hooks
            .iter()
            .filter(|h| h.kind == crate::hooks::Kind::Playbook)
            .count();
        if playbooks > 0 {
            tracing::warn!(
                config = %args.new.display(),
                playbooks,
                "--check-playbooks runs {playbooks} playbook(s) of {} on this machine in Ansible's check mode: a task marked check_mode: false runs for real; use it on configs you trust",
                args.new.display()
            );
        }
        let names = (old.machine_config.name(), new.machine_config.name());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        checks_ok = runtime.block_on(diff_hooks::check_playbooks(
            &mut hooks,
            &args.root,
            names,
            &plan,
            &args.hooks.options(),
        ))?;
    }
    if args.output.format().is_some() {
        // The hooks join the plan's object only when there are some (its shape is documented).
        let mut value: serde_json::Value = serde_json::from_str(&plan.to_json())?;
        if let Some(obj) = value.as_object_mut().filter(|_| !hooks.is_empty()) {
            obj.insert("hooks".to_string(), serde_json::to_value(&hooks)?);
        }
        args.output.print(&value)?;
    } else {
        let names = side_names(args, &old.machine_config, &new.machine_config);
        let sides = Sides {
            old: &names.0,
            new: &names.1,
            preposition: "in ",
        };
        let details = |path: &str| file_lines(&old.ignition, &new.ignition, &sides, path, args);
        print_plan(&plan, &old.machine_config, &new.machine_config, &details);
        if plan.reconcilable {
            for line in diff_hooks::describe(&hooks) {
                println!("{line}");
            }
        }
    }
    if let Some(reason) = &plan.reason {
        say(
            Label::Hint,
            super::unreconcilable::hint(reason, &args.new.display().to_string()),
        );
    }
    Ok(if !plan.reconcilable {
        Exit::Unreconcilable.into()
    } else if !checks_ok {
        Exit::NotAsWanted.into()
    } else {
        ExitCode::SUCCESS
    })
}

/// The names the two sides go by in the lines under a changed file: the configs' names, or
/// the paths given when both configs have the same name.
fn side_names(args: &Args, old: &MachineConfig, new: &MachineConfig) -> (String, String) {
    if old.name() != new.name() {
        return (old.name().to_string(), new.name().to_string());
    }
    (
        args.old.display().to_string(),
        args.new.display().to_string(),
    )
}

/// The lines under a changed file: its short hashes and sizes on each side and, with
/// `--show-contents`, how its contents change (never a secret's: [`contents`]).
fn file_lines<'a>(
    old: &'a Config,
    new: &'a Config,
    sides: &Sides<'_>,
    path: &str,
    args: &Args,
) -> Vec<String> {
    // the entry that wins, as the plan compares them
    let find = |c: &'a Config| c.storage.files.iter().rev().find(|f| f.path == path);
    let (Some(of), Some(nf)) = (find(old), find(new)) else {
        return Vec::new();
    };
    let (om, nm) = (of.mode_or_default(), nf.mode_or_default());
    let (ob, nb) = match (of.decoded_contents(), nf.decoded_contents()) {
        (Ok(o), Ok(n)) => (o, n),
        // the plan decoded NEW's; OLD's may not decode (it is then simply different)
        (Err(e), _) | (_, Err(e)) => return vec![format!("  {e}")],
    };
    let mut out = vec![contents::hash_line(
        sides,
        &Digest::of(&ob, om),
        &Digest::of(&nb, nm),
    )];
    if args.show_contents {
        out.extend(contents::show(
            path,
            sides,
            Version::whole(&ob, om),
            Version::whole(&nb, nm),
        ));
    }
    out
}

fn print_plan(
    p: &Plan,
    old: &MachineConfig,
    new: &MachineConfig,
    file_details: &dyn Fn(&str) -> Vec<String>,
) {
    if let Some(reason) = &p.reason {
        // the short version; the MCD's words are in -o json's reason
        let mut lines = super::unreconcilable::lines(old, new, reason).into_iter();
        println!("unreconcilable: {}", lines.next().unwrap_or_default());
        for line in lines {
            println!("{line}");
        }
    } else {
        println!("reconcilable");
    }
    print_changes("files", &p.files, file_details);
    print_changes("units", &p.units, &|_| Vec::new());
    let yes_no = |b: bool| if b { "changed" } else { "unchanged" };
    println!("passwd: {}", yes_no(p.passwd));
    println!("osImageURL: {}", yes_no(p.os_update));
    println!("kernel type: {}", yes_no(p.kernel_type));
    println!("fips: {}", yes_no(p.fips));
    if p.kargs.is_empty() {
        println!("kernel arguments: unchanged");
    } else {
        println!(
            "kernel arguments: {}",
            machine_config::kargs::human_change(
                &old.spec.kernel_arguments,
                &new.spec.kernel_arguments
            )
        );
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

/// `files changed: /etc/x` lines, each changed item followed by its `details`.
fn print_changes(what: &str, c: &Changes, details: &dyn Fn(&str) -> Vec<String>) {
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
            if verb == "changed" {
                for line in details(item) {
                    println!("{line}");
                }
            }
        }
    }
}
