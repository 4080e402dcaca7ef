//! `mco-agent once-from FILE|URL [--ca FILE] [--root DIR] [--skip-reboot] [--skip-os]
//! [--policy FILE]`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use machine_config::mco::EMPTY_CONFIG_NAME;

use super::report::{Label, say};
use super::{Classify, Exit};
use crate::engine::{Outcome, UpdateReport};
use crate::input::LoadedConfig;
use crate::input::policy::read_policy_file;
use crate::once::{OnceFromOptions, once_from};

/// Arguments of `once-from`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// MachineConfig (YAML or JSON) or Ignition config (spec 2.2, 3.0–3.5) to apply: a file, or
    /// an http(s) URL, e.g. a config server's `https://HOST:22623/config/worker` (whose answer
    /// yields the MachineConfig it carries).
    #[arg(value_name = "FILE|URL")]
    pub source: String,
    /// The CA bundle (PEM) that signs an https URL's certificate (default: the system's trust
    /// store).
    #[arg(long)]
    pub ca: Option<PathBuf>,
    /// Accept a plain `http://` URL (with a warning): nothing authenticates the server or
    /// protects the config on the way. Without it such a URL is refused.
    #[arg(long)]
    pub insecure_http: bool,
    /// Root directory of the node.
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// Do not reboot even if the plan needs it (say so instead).
    #[arg(long)]
    pub skip_reboot: bool,
    /// Stage OS changes without rpm-ostree's lock-finalization (by default they are locked
    /// until the reboot releases them with FinalizeDeployment, when once-from reboots).
    #[arg(long)]
    pub no_lock_finalization: bool,
    /// Leave out OS changes (image, kernel arguments, kernel type, extensions) instead of
    /// refusing the config when rpm-ostree cannot make them.
    #[arg(long)]
    pub skip_os: bool,
    /// A MachineConfiguration (YAML or JSON) whose `spec.nodeDisruptionPolicy` is merged over
    /// the default node disruption policies (as the MCO merges the cluster's).
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Read the boot id from this file instead of the kernel's (tests simulate reboots).
    /// Refuse a config with a key no Ignition spec knows (most often a typo, which would
    /// otherwise be ignored with a warning and change what is applied). Exit 65.
    #[arg(long)]
    pub strict: bool,
    #[arg(long, hide = true)]
    pub boot_id_file: Option<PathBuf>,
    /// The administrator's hooks.
    #[command(flatten)]
    pub hooks: super::hook_args::HookArgs,
    /// Where the config's hooks run when `--root` is not this machine's root: `skip` (none
    /// runs), `chroot` (inside the root) or `host` (on this machine, for a root that is its
    /// own mounted elsewhere).
    #[arg(
        long,
        value_enum,
        env = "MCO_AGENT_ALTERNATE_ROOT_HOOKS",
        default_value = "skip"
    )]
    pub alternate_root_hooks: super::hook_args::AlternateRootHooks,
}

/// Applies the file and prints what was done.
pub fn run(args: &Args) -> Result<ExitCode> {
    super::check_writable(&args.root)?;
    let opts = OnceFromOptions {
        skip_os: args.skip_os,
        skip_reboot: args.skip_reboot,
        no_lock_finalization: args.no_lock_finalization,
        arch: String::new(),
        boot_id_file: args.boot_id_file.clone(),
        policy: args
            .policy
            .as_deref()
            .map(read_policy_file)
            .transpose()
            .invalid_input()?,
        hooks: args
            .hooks
            .options_for(&args.root, false, args.alternate_root_hooks),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // The config is read (fetched) before anything is touched: a bad source changes nothing.
    let (report, desired) = runtime.block_on(async {
        let spill = crate::input::spill::state_dir(&args.root);
        let desired = LoadedConfig::load(
            &args.source,
            args.ca.as_deref(),
            args.insecure_http,
            Some(&spill),
        )
        .await
        .map_err(source_error)?;
        if args.strict {
            desired.refuse_ignored(&args.source).invalid_input()?;
        }
        let report = once_from(&args.root, &desired, &opts).await?;
        anyhow::Ok((report, desired))
    })?;
    let mut code = ExitCode::SUCCESS;
    let resumed = report.resumed.iter().map(|u| (u, true));
    for (update, resumed) in resumed.chain(report.update.iter().map(|u| (u, false))) {
        match &update.outcome {
            Outcome::Unreconcilable(reason) => {
                // the short version (the MCD's words are the reason annotation's and diff -o json's); a resumed update's
                // is about configs other than these
                let short = (!resumed)
                    .then(|| short_reason(&args.root, &desired, reason))
                    .flatten();
                match short {
                    Some(lines) => {
                        let mut lines = lines.into_iter();
                        say(
                            Label::Error,
                            format!("unreconcilable: {}", lines.next().unwrap_or_default()),
                        );
                        for line in lines {
                            eprintln!("{line}");
                        }
                    }
                    None => say(Label::Error, reason),
                }
                code = Exit::Unreconcilable.into();
            }
            Outcome::Degraded(reason) => {
                let hint = if !args.skip_os && reason.contains("which needs rpm-ostree") {
                    ". Rerun with --skip-os to apply everything else"
                } else {
                    ""
                };
                say(Label::Error, format!("{}: {reason}{hint}", args.source));
                code = Exit::NotAsWanted.into();
            }
            _ => print!(
                "{}",
                describe(update, &args.root, &report.no_reboot, resumed)
            ),
        }
    }
    Ok(code)
}

/// The short version of why the config recorded in `root` cannot move to `desired`
/// ([`super::unreconcilable::lines`]), when one is recorded.
fn short_reason(root: &Path, desired: &LoadedConfig, reason: &str) -> Option<Vec<String>> {
    let root = crate::rootfs::Root::open(root).ok()?;
    let current = crate::input::read_current(&root).ok()??;
    Some(super::unreconcilable::lines(
        &current.machine_config,
        &desired.machine_config,
        reason,
    ))
}

/// A config that cannot be had: fetching it failed ([`Exit::Failed`]), else what was given is
/// wrong (a missing file, a malformed config, a refused URL).
fn source_error(e: anyhow::Error) -> anyhow::Error {
    let fetch = e
        .chain()
        .any(|c| c.is::<crate::input::served::FetchError>());
    let exit = if fetch {
        Exit::Failed
    } else {
        Exit::InvalidInput
    };
    super::exit::classified(exit, None, e)
}

/// The first line: what happened to the root.
fn headline(r: &UpdateReport, root: &Path, resumed: bool) -> String {
    let root = root.display();
    let first = r.from == EMPTY_CONFIG_NAME;
    let was = if first {
        "first application".to_string()
    } else {
        format!("was {}", r.from)
    };
    if r.verified {
        format!(
            "completed the update of {root} to {} after the reboot: verified ({was})",
            r.to
        )
    } else if resumed {
        format!("resumed the recorded update of {root} to {} ({was})", r.to)
    } else if first || r.applied.is_some() {
        format!("applied {} to {root} ({was})", r.to)
    } else {
        format!("finished the update of {root} from {} to {}", r.from, r.to)
    }
}

/// What an update did, one line per fact, for a person. `resumed`: the update was recorded by
/// an earlier run (and is finished, or found still waiting, now).
fn describe(r: &UpdateReport, root: &Path, no_reboot: &str, resumed: bool) -> String {
    let mut lines = vec![headline(r, root, resumed)];
    if let Some(o) = &r.applied {
        lines.push(format!(
            "files: {} written, {} unchanged, {} restored, {} removed",
            o.files_written.len(),
            o.files_unchanged,
            o.files_restored.len(),
            o.files_removed.len()
        ));
        if !o.directories.is_empty() || !o.links.is_empty() {
            lines.push(format!(
                "directories: {}, links: {}",
                o.directories.len(),
                o.links.len()
            ));
        }
        lines.push(format!(
            "units: {} unit files changed, {} units removed; enabled [{}], disabled [{}], preset [{}]",
            o.units_written.len(),
            o.units_removed.len(),
            o.enablement.enable.join(" "),
            o.enablement.disable.join(" "),
            o.enablement.preset.join(" ")
        ));
        if o.ssh_keys_written || o.password_changed {
            let word = |b: bool, yes: &'static str| if b { yes } else { "unchanged" };
            lines.push(format!(
                "core: ssh keys {}, password hash {}",
                word(o.ssh_keys_written, "written"),
                word(o.password_changed, "changed")
            ));
        }
        for s in &o.skipped {
            lines.push(format!("skipped: {s}"));
        }
    }
    for s in &r.left_out {
        lines.push(format!("left out (--skip-os): {s}"));
    }
    for s in &r.os_changes {
        lines.push(format!("OS change staged: {s}"));
    }
    if let Some(plan) = &r.plan {
        let actions: Vec<String> = plan.actions.iter().map(ToString::to_string).collect();
        if !actions.is_empty() {
            lines.push(format!("post-update actions: {}", actions.join(", ")));
            // Which policy entry chose each change's actions.
            lines.extend(plan.explain().into_iter().map(|l| format!("  {l}")));
        }
    }
    match r.outcome {
        Outcome::Rebooting => lines.push(format!("reboot needed: rebooting into {}", r.to)),
        Outcome::NeedsReboot => lines.push(format!("reboot needed: {no_reboot}")),
        _ => lines.push("no reboot needed".to_string()),
    }
    for s in &r.skipped_actions {
        lines.push(format!("skipped post-update action: {s}"));
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_update_verified_after_the_reboot_is_completed_not_applied() {
        let root = Path::new("/");
        let skip = "not rebooting (--skip-reboot)";
        let first = |outcome, verified| UpdateReport {
            outcome,
            verified,
            ..UpdateReport::new(EMPTY_CONFIG_NAME, "rendered-2")
        };
        let second = |outcome, verified| UpdateReport {
            outcome,
            verified,
            ..UpdateReport::new("rendered-1", "rendered-2")
        };
        let staged = UpdateReport {
            outcome: Outcome::Rebooting,
            os_changes: vec!["kernel arguments: +nosmt".into()],
            ..UpdateReport::new(EMPTY_CONFIG_NAME, "rendered-2")
        };
        let cases = [
            // (report, resumed, what once-from prints)
            (
                first(Outcome::Done, true),
                true,
                "completed the update of / to rendered-2 after the reboot: verified (first application)\n\
                 no reboot needed\n",
            ),
            (
                second(Outcome::Done, true),
                true,
                "completed the update of / to rendered-2 after the reboot: verified (was rendered-1)\n\
                 no reboot needed\n",
            ),
            (
                second(Outcome::NeedsReboot, false),
                true,
                "resumed the recorded update of / to rendered-2 (was rendered-1)\n\
                 reboot needed: not rebooting (--skip-reboot)\n",
            ),
            (
                staged,
                false,
                "applied rendered-2 to / (first application)\n\
                 OS change staged: kernel arguments: +nosmt\n\
                 reboot needed: rebooting into rendered-2\n",
            ),
        ];
        for (report, resumed, want) in cases {
            assert_eq!(describe(&report, root, skip, resumed), want, "{report:?}");
        }
    }
}
