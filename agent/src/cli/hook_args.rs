//! The options of the administrator's hooks, shared by `start`, `once-from` and `diff` (and so
//! also keys of the configuration fragments: `hook_timeout`, `ansible_playbook`).

use std::path::PathBuf;
use std::time::Duration;

use crate::hooks::HookOptions;

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
    /// The engine's hook options.
    pub fn options(&self) -> HookOptions {
        HookOptions {
            timeout: self.hook_timeout,
            ansible_playbook: self.ansible_playbook.clone(),
        }
    }
}
