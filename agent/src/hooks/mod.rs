//! Update hooks: executables and Ansible playbooks that an administrator delivers as ordinary
//! MachineConfig files under `/etc/mco-agent/hooks.d/<phase>/`, run by the engine at that
//! phase of every update, in the order of their names.
//!
//! - `pre-apply`: before anything changes (before the drain): a non-zero exit stops the update.
//! - `post-apply`: after the files, units and users (and the staged OS changes) are in place;
//!   for an update without a reboot, after its post-config actions.
//! - `pre-reboot`: just before the agent asks for the reboot of a reboot update: a non-zero
//!   exit stops the update (it is rolled back).
//! - `post-boot`: after the reboot, once the booted deployment, kernel arguments and files are
//!   verified, before the update is committed.
//!
//! A hook gets a JSON description of the update ([`HookInput`]) on standard input and the
//! main facts in its environment (`MCO_AGENT_PHASE`, `MCO_AGENT_CURRENT_CONFIG`,
//! `MCO_AGENT_DESIRED_CONFIG`, `MCO_AGENT_ROOT`, `MCO_AGENT_REBOOT`, `MCO_AGENT_HOOK`); each
//! line it prints goes to the journal. `*.yml` / `*.yaml` files are run with
//! `ansible-playbook -c local -i localhost,`, the same facts as extra variables
//! (`mco_agent_root`, `mco_agent_phase`, ...). This module finds and runs hooks; when they run
//! and what their results do to the update is the engine's business (`engine::hooks`).

mod process;

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use machine_config::Config;
use serde::Serialize;

use crate::rootfs::{FileKind, Root};

pub use process::{HookResult, run, run_file};

/// Where hooks live on the node, one directory per phase.
pub use machine_config::policy::HOOKS_DIR;

/// The default time a hook may run before it is killed (`--hook-timeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// When in an update a hook runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Phase {
    #[serde(rename = "pre-apply")]
    PreApply,
    #[serde(rename = "post-apply")]
    PostApply,
    #[serde(rename = "pre-reboot")]
    PreReboot,
    #[serde(rename = "post-boot")]
    PostBoot,
}

impl Phase {
    /// Every phase, in the order an update meets them.
    pub const ALL: [Phase; 4] = [
        Phase::PreApply,
        Phase::PostApply,
        Phase::PreReboot,
        Phase::PostBoot,
    ];

    /// The phase's name, which is also its directory under [`HOOKS_DIR`].
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::PreApply => "pre-apply",
            Phase::PostApply => "post-apply",
            Phase::PreReboot => "pre-reboot",
            Phase::PostBoot => "post-boot",
        }
    }

    /// A `pre-*` hook can veto the update; a `post-*` one only reports that it went wrong.
    pub fn is_pre(self) -> bool {
        matches!(self, Phase::PreApply | Phase::PreReboot)
    }

    /// The phase's directory on the node.
    pub fn dir(self) -> PathBuf {
        Path::new(HOOKS_DIR).join(self.as_str())
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How hooks run (`start --hook-timeout`, `--ansible-playbook`, `--alternate-root-hooks`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookOptions {
    /// How long one hook may run; then its process group is killed and it has failed.
    pub timeout: Duration,
    /// The `ansible-playbook` program that runs `*.yml` / `*.yaml` hooks (looked up in `PATH`
    /// when it has no `/`; inside the root when hooks run there).
    pub ansible_playbook: PathBuf,
    /// Where they run, for the root the update is applied to.
    pub placement: Placement,
}

/// Where the hooks of an update run. A hook is a program the *config* delivers, run as root:
/// on a node that is the node's administrator acting on the node; for a config applied to an
/// alternate root (an image being built, a mounted disk) running it on the machine that
/// applies the config would let the config act on that machine, so such a root runs no hook
/// unless the caller says where.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Placement {
    /// On this machine, the root as working directory: the root is this machine's (`/`, or
    /// the host's root mounted elsewhere).
    #[default]
    Host,
    /// Inside the root (chroot, working directory `/`, `MCO_AGENT_ROOT=/`): a hook acts on the
    /// root only, and finds its interpreter (and `ansible-playbook`) there.
    Chroot,
    /// Not at all (said in the log): an alternate root without the caller's word.
    Skip,
}

impl Default for HookOptions {
    fn default() -> Self {
        HookOptions {
            timeout: DEFAULT_TIMEOUT,
            ansible_playbook: PathBuf::from("ansible-playbook"),
            placement: Placement::Host,
        }
    }
}

/// What a hook is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// An executable, run as it is.
    Executable,
    /// An Ansible playbook (`*.yml`, `*.yaml`), run with `ansible-playbook` on the local
    /// connection.
    Playbook,
}

/// One hook found on the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hook {
    pub phase: Phase,
    /// Its file name (what orders hooks and names them in messages).
    pub name: String,
    /// Its path on the node (inside the root).
    pub path: PathBuf,
    pub kind: Kind,
}

/// What a file in a phase's directory is, by its name and permission bits: `None` for what
/// is not a hook (hidden files such as the temp files of atomic writes, editor backups,
/// files that are neither executable nor playbooks).
pub fn kind_of(name: &str, mode: u32) -> Option<Kind> {
    if name.starts_with('.') || name.ends_with('~') {
        return None;
    }
    if name.ends_with(".yml") || name.ends_with(".yaml") {
        return Some(Kind::Playbook);
    }
    (mode & 0o111 != 0).then_some(Kind::Executable)
}

/// The hooks of `phase` on the node, in the order of their names (bytewise, as `ls` in the C
/// locale and run-parts order them). Entries that are not hooks are logged and left out.
pub fn discover(root: &Root, phase: Phase) -> Result<Vec<Hook>> {
    let dir = phase.dir();
    let Some(entries) = root
        .read_dir(&dir)
        .with_context(|| format!("listing the {phase} hooks"))?
    else {
        return Ok(Vec::new());
    };
    let mut hooks = Vec::new();
    for (name, kind) in entries {
        let Some(name) = utf8(&name) else {
            tracing::warn!(dir = %dir.display(), name = ?name, "hook name is not UTF-8: not run");
            continue;
        };
        let path = dir.join(&name);
        // Follow a link (a MachineConfig may link a hook to a shared script), inside the root.
        let info = match kind {
            FileKind::Symlink => root
                .canonicalize(&path)?
                .map(|target| root.lstat(&target))
                .transpose()?
                .flatten(),
            _ => root.lstat(&path)?,
        };
        match info {
            Some(info) if info.kind == FileKind::File => match kind_of(&name, info.mode) {
                Some(kind) => hooks.push(Hook {
                    phase,
                    name,
                    path,
                    kind,
                }),
                None if !name.starts_with('.') => tracing::warn!(
                    hook = %path.display(),
                    "not a hook (neither executable nor *.yml/*.yaml): not run"
                ),
                None => {}
            },
            _ => tracing::warn!(hook = %path.display(), "not a regular file: not run"),
        }
    }
    Ok(hooks)
}

/// The hooks of `phase` that `config` delivers (files directly in the phase's directory), in
/// name order, with their contents: what an update to `config` would run (`mco-agent diff`).
pub fn in_config(config: &Config, phase: Phase) -> Result<Vec<(Hook, Vec<u8>)>> {
    let dir = phase.dir();
    let mut found = Vec::new();
    for file in &config.storage.files {
        let path = Path::new(&file.path);
        if path.parent() != Some(dir.as_path()) {
            continue;
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // Ignition's default mode for a file is 0644.
        let mode = u32::try_from(file.mode.unwrap_or(0o644)).unwrap_or(0);
        let Some(kind) = kind_of(&name, mode) else {
            continue;
        };
        let contents = file
            .decoded_contents()
            .with_context(|| format!("decoding the hook {}", file.path))?;
        let hook = Hook {
            phase,
            name,
            path: path.to_path_buf(),
            kind,
        };
        found.push((hook, contents));
    }
    found.sort_by(|a, b| a.0.name.as_bytes().cmp(b.0.name.as_bytes()));
    Ok(found)
}

fn utf8(name: &OsString) -> Option<String> {
    std::str::from_utf8(name.as_bytes())
        .ok()
        .map(str::to_string)
}

/// What a hook is told about the update (standard input, as one JSON object).
#[derive(Clone, Debug, Serialize)]
pub struct HookInput {
    pub phase: Phase,
    /// The config the node is in (the rendered MachineConfig's name).
    pub current_config: String,
    /// The config being applied.
    pub desired_config: String,
    /// The node's root as the agent sees it (`/` on a node).
    pub root: PathBuf,
    /// Whether the update reboots the node.
    pub reboot: bool,
    /// The update's plan: files and units changed, OS changes, actions, drain, reboot, and
    /// the policy entry behind each decision (as `mco-agent diff -o json` prints it).
    pub plan: serde_json::Value,
}

impl HookInput {
    /// The environment a hook gets besides the agent's.
    pub fn env(&self, hook: &Hook) -> Vec<(&'static str, String)> {
        vec![
            ("MCO_AGENT_PHASE", self.phase.as_str().to_string()),
            ("MCO_AGENT_CURRENT_CONFIG", self.current_config.clone()),
            ("MCO_AGENT_DESIRED_CONFIG", self.desired_config.clone()),
            ("MCO_AGENT_ROOT", self.root.display().to_string()),
            ("MCO_AGENT_REBOOT", self.reboot.to_string()),
            ("MCO_AGENT_HOOK", hook.name.clone()),
        ]
    }

    /// The extra variables of a playbook: the environment's facts, lower-case, the whole
    /// description as `mco_agent_update`, and `ansible_python_interpreter`.
    pub fn extra_vars(&self, hook: &Hook) -> serde_json::Value {
        let mut vars = serde_json::Map::new();
        for (key, value) in self.env(hook) {
            let value = match key {
                "MCO_AGENT_REBOOT" => serde_json::Value::Bool(self.reboot),
                _ => serde_json::Value::String(value),
            };
            vars.insert(key.to_ascii_lowercase(), value);
        }
        vars.insert(
            "mco_agent_update".to_string(),
            serde_json::to_value(self).unwrap_or_default(),
        );
        // Modules run with the Python that runs ansible-playbook, as Ansible advises for the
        // local connection (its discovery may pick another Python of the host).
        vars.insert(
            "ansible_python_interpreter".to_string(),
            serde_json::Value::String("{{ ansible_playbook_python }}".to_string()),
        );
        serde_json::Value::Object(vars)
    }
}

#[cfg(test)]
mod tests;
