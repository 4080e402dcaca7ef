//! The hooks part of `mco-agent diff`: which of the administrator's hooks an update from OLD
//! to NEW would run, and (`--check-playbooks`) its playbooks run in Ansible's check mode.
//!
//! `pre-apply` hooks are OLD's (the ones on the node when the update starts), the others NEW's
//! (the update writes them before they run); `pre-reboot` and `post-boot` run only when the
//! plan reboots.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use machine_config::Config;
use machine_config::plan::Plan;
use serde::Serialize;

use crate::hooks::{self, Hook, HookInput, HookOptions, Kind, Phase};

/// One hook an update would run.
#[derive(Debug, Serialize)]
pub struct PlannedHook {
    pub phase: Phase,
    pub name: String,
    pub path: String,
    pub kind: Kind,
    /// `old` or `new`: the config whose file it is.
    pub config: &'static str,
    /// `--check-playbooks`: `ok`, or why the check failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    #[serde(skip)]
    contents: Vec<u8>,
    #[serde(skip)]
    hook: Option<Hook>,
}

/// The hooks an update from `old` to `new` with `plan` would run, in the order it would run
/// them.
pub fn planned(old: &Config, new: &Config, plan: &Plan) -> Result<Vec<PlannedHook>> {
    let mut out = Vec::new();
    for phase in Phase::ALL {
        let (config, which) = match phase {
            Phase::PreApply => (old, "old"),
            Phase::PostApply => (new, "new"),
            Phase::PreReboot | Phase::PostBoot if plan.reboot => (new, "new"),
            Phase::PreReboot | Phase::PostBoot => continue,
        };
        for (hook, contents) in hooks::in_config(config, phase)? {
            out.push(PlannedHook {
                phase,
                name: hook.name.clone(),
                path: hook.path.display().to_string(),
                kind: hook.kind,
                config: which,
                check: None,
                contents,
                hook: Some(hook),
            });
        }
    }
    Ok(out)
}

/// Runs every playbook of `hooks` with `ansible-playbook --check --diff` against `root`, from a
/// temporary copy; returns whether every one passed (each hook's `check` says how it went).
pub async fn check_playbooks(
    hooks: &mut [PlannedHook],
    root: &Path,
    names: (&str, &str),
    plan: &Plan,
    opts: &HookOptions,
) -> Result<bool> {
    let dir = PrivateDir::create()?;
    let mut all_ok = true;
    for planned in hooks.iter_mut().filter(|h| h.kind == Kind::Playbook) {
        let Some(hook) = &planned.hook else { continue };
        let copy = dir.0.join(&planned.name);
        std::fs::write(&copy, &planned.contents)
            .with_context(|| format!("writing {}", copy.display()))?;
        let input = HookInput {
            phase: planned.phase,
            current_config: names.0.to_string(),
            desired_config: names.1.to_string(),
            root: root.to_path_buf(),
            reboot: plan.reboot,
            plan: serde_json::from_str(&plan.to_json()).unwrap_or_default(),
        };
        let result = hooks::run_file(&copy, hook, &input, opts, true).await;
        planned.check = Some(if result.success {
            "ok".to_string()
        } else {
            all_ok = false;
            result.message(hook)
        });
    }
    Ok(all_ok)
}

/// A directory only we can read (0700), removed with what it holds when dropped.
struct PrivateDir(PathBuf);

impl PrivateDir {
    fn create() -> Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path = std::env::temp_dir().join(format!(
            "mco-agent-playbooks-{}-{nanos}",
            std::process::id()
        ));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        Ok(PrivateDir(path))
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The hooks as text lines (`hooks: none` when there are none).
pub fn describe(hooks: &[PlannedHook]) -> Vec<String> {
    if hooks.is_empty() {
        return vec!["hooks: none".to_string()];
    }
    hooks
        .iter()
        .map(|h| {
            let kind = match h.kind {
                Kind::Executable => "executable",
                Kind::Playbook => "playbook",
            };
            let mut line = format!("hook {}: {} ({kind}, {} config)", h.phase, h.path, h.config);
            if let Some(check) = &h.check {
                line.push_str(&format!(": check {check}"));
            }
            line
        })
        .collect()
}
