//! `mco-agent pivot IMAGE [--dry-run] [--reboot|--skip-reboot] [--root DIR] [--node-name NAME]
//! [--kubeconfig FILE]`: rebase the OS to IMAGE by hand (see [`crate::pivot`]).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;

use super::Classify;
use crate::cluster::{self, ClusterOptions, KubeNodeApi, NodeApi};
use crate::pivot::{PivotOptions, PivotOutcome, pivot};

/// Arguments of `pivot`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The OS image, without transport: `registry/repository@sha256:<digest>` (a tag works
    /// too, with a warning: what it names may change).
    #[arg(value_name = "IMAGE")]
    pub image: String,
    /// Say what would change, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Reboot into the image once it is staged (the default).
    #[arg(long, overrides_with = "skip_reboot")]
    pub reboot: bool,
    /// Stage the image for the next boot, do not reboot.
    #[arg(long, overrides_with = "reboot", alias = "no-reboot")]
    pub skip_reboot: bool,
    /// Root directory of the node (another root is never rebooted).
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// The node's name, to report the pivot on its Node (default: the host name).
    #[arg(long = "node-name", value_name = "NAME", alias = "node")]
    pub node: Option<String>,
    /// Credentials for the Node; when the file does not exist the pivot is not reported.
    #[arg(long, default_value = cluster::KUBELET_KUBECONFIG)]
    pub kubeconfig: PathBuf,
    /// Stage without rpm-ostree's lock-finalization.
    #[arg(long)]
    pub no_lock_finalization: bool,
}

/// Pivots and prints what was done (or would be).
pub fn run(args: &Args) -> Result<ExitCode> {
    let opts = PivotOptions {
        image: args.image.clone(),
        dry_run: args.dry_run,
        reboot: !args.skip_reboot,
        lock_finalization: !args.no_lock_finalization,
    };
    // A malformed image changes nothing and needs no connection to say so.
    crate::pivot::check_image(&opts.image).invalid_input()?;
    if args.dry_run {
        super::check_root(&args.root)?;
    } else {
        super::check_writable(&args.root)?;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(async {
        let node = if args.dry_run {
            None
        } else {
            node_api(args).await
        };
        pivot(&args.root, &opts, node).await
    })?;
    print!("{}", describe(&outcome));
    Ok(ExitCode::SUCCESS)
}

/// The Node to report to, when the node has credentials for it.
async fn node_api(args: &Args) -> Option<Arc<dyn NodeApi>> {
    if !args.kubeconfig.exists() {
        return None;
    }
    let name = match cluster::node_name(args.node.as_deref()) {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!(error = %e, "not reporting the pivot on the Node");
            return None;
        }
    };
    let mut options = ClusterOptions::new(&name);
    options.kubeconfig = args.kubeconfig.clone();
    match KubeNodeApi::connect(&options).await {
        Ok(api) => Some(Arc::new(api)),
        Err(e) => {
            tracing::warn!(error = %e, "not reporting the pivot on the Node");
            None
        }
    }
}

/// What happened, one line per fact.
fn describe(outcome: &PivotOutcome) -> String {
    let was = |from: &Option<String>| {
        from.clone()
            .unwrap_or_else(|| "an OS that is not an image".to_string())
    };
    match outcome {
        PivotOutcome::AlreadyThere { image } => {
            format!("already running {image}: nothing to do\n")
        }
        PivotOutcome::WouldRebase {
            from,
            to,
            reboot,
            unknown,
        } => {
            let from = match unknown {
                Some(_) => "the running OS (unknown, below)".to_string(),
                None => was(from),
            };
            let mut t = format!("would rebase the OS from {from} to {to}\n");
            if !machine_config::mco::image::pinned_by_digest(to) {
                // the label coloured on a terminal, as on stderr
                let warning = super::report::Label::Warning.prefix(super::report::stdout_colour());
                t.push_str(&format!(
                    "{warning} {to} is not pinned by digest: what it names may change\n"
                ));
            }
            t.push_str(if *reboot {
                "would reboot into it\n"
            } else {
                "would not reboot: it boots at the next reboot\n"
            });
            if let Some(why) = unknown {
                t.push_str(&format!(
                    "unknown: the running OS image, and whether it is {to} already ({why})\n"
                ));
            }
            t.push_str("(dry run: nothing changed)\n");
            t
        }
        PivotOutcome::Staged {
            from,
            to,
            no_reboot,
        } => {
            let mut t = format!("staged {to} (was {})\n", was(from));
            match no_reboot {
                None => t.push_str("rebooting into it\n"),
                Some(why) => t.push_str(&format!("reboot needed: {why}\n")),
            }
            t
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_read_plainly() {
        let to = "quay.io/os@sha256:1".to_string();
        assert_eq!(
            describe(&PivotOutcome::WouldRebase {
                from: Some("quay.io/os@sha256:0".into()),
                to: to.clone(),
                reboot: true,
                unknown: None,
            }),
            "would rebase the OS from quay.io/os@sha256:0 to quay.io/os@sha256:1\nwarning: quay.io/os@sha256:1 is not pinned by digest: what it names may change\nwould reboot into it\n(dry run: nothing changed)\n"
        );
        // Without rpm-ostree (no system bus): the target, the tag warning, and what is unknown.
        assert_eq!(
            describe(&PivotOutcome::WouldRebase {
                from: None,
                to: "quay.io/os:4.18".into(),
                reboot: false,
                unknown: Some("the system bus is not reachable".into()),
            }),
            "would rebase the OS from the running OS (unknown, below) to quay.io/os:4.18\nwarning: quay.io/os:4.18 is not pinned by digest: what it names may change\nwould not reboot: it boots at the next reboot\nunknown: the running OS image, and whether it is quay.io/os:4.18 already (the system bus is not reachable)\n(dry run: nothing changed)\n"
        );
        let pinned =
            "quay.io/os@sha256:1111111111111111111111111111111111111111111111111111111111111111";
        assert!(
            !describe(&PivotOutcome::WouldRebase {
                from: None,
                to: pinned.into(),
                reboot: true,
                unknown: None,
            })
            .contains("warning"),
            "a digest is pinned"
        );
        assert_eq!(
            describe(&PivotOutcome::Staged {
                from: None,
                to: to.clone(),
                no_reboot: Some("not rebooting (--skip-reboot)".into())
            }),
            "staged quay.io/os@sha256:1 (was an OS that is not an image)\nreboot needed: not rebooting (--skip-reboot)\n"
        );
        assert_eq!(
            describe(&PivotOutcome::AlreadyThere { image: to }),
            "already running quay.io/os@sha256:1: nothing to do\n"
        );
    }
}
