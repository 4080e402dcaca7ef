//! The options of the administrator's hooks, shared by `start`, `once-from` and `diff` (and so
//! also keys of the configuration fragments: `hook_timeout`, `ansible_playbook`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::hooks::{HookOptions, Placement};

/// How hooks run.
#[derive(Debug, Clone, clap::Args)]
pub struct HookArgs {
    /// How long one hook of /etc/mco-agent/hooks.d/PHASE/ may run (e.g. `10m`, `30s`); then
    /// it is killed with every process it started, and it has failed.
    #[arg(
        long,
        env = "MCO_AGENT_HOOK_TIMEOUT",
        value_parser = humantime::parse_duration,
        default_value = "10m"
    )]
    pub hook_timeout: Duration,
    /// The `ansible-playbook` program that runs the `*.yml` / `*.yaml` hooks (on the local
    /// connection); looked up in PATH unless it is a path.
    #[arg(
        long,
        env = "MCO_AGENT_ANSIBLE_PLAYBOOK",
        default_value = "ansible-playbook"
    )]
    pub ansible_playbook: PathBuf,
}

impl HookArgs {
    /// The hook options of a run on this machine (`diff --check-playbooks`).
    pub fn options(&self) -> HookOptions {
        HookOptions {
            timeout: self.hook_timeout,
            ansible_playbook: self.ansible_playbook.clone(),
            placement: Placement::Host,
        }
    }

    /// The engine's hook options for an update of `root`: on this machine when `root` is its
    /// root (`/`, or `root_is_host`), else where `alternate` says.
    pub fn options_for(
        &self,
        root: &Path,
        root_is_host: bool,
        alternate: AlternateRootHooks,
    ) -> HookOptions {
        let host = root_is_host || crate::engine::live::is_host_root(root);
        HookOptions {
            placement: if host {
                Placement::Host
            } else {
                alternate.placement()
            },
            ..self.options()
        }
    }
}

/// Where the hooks of a config applied to an alternate `--root` run
/// (`--alternate-root-hooks`). Hooks are programs the config delivers, run as root: on an
/// alternate root (an image being built, a mounted disk) they do not run unless asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum AlternateRootHooks {
    /// No hook runs (the log names the hooks left out).
    #[default]
    Skip,
    /// Each hook runs inside the root (chroot, working directory `/`, `MCO_AGENT_ROOT=/`), with
    /// the root's own interpreter and `ansible-playbook`.
    Chroot,
    /// On this machine, as root, with the root as working directory: only for a root that is
    /// this machine's, mounted elsewhere.
    Host,
}

impl AlternateRootHooks {
    fn placement(self) -> Placement {
        match self {
            AlternateRootHooks::Skip => Placement::Skip,
            AlternateRootHooks::Chroot => Placement::Chroot,
            AlternateRootHooks::Host => Placement::Host,
        }
    }
}
