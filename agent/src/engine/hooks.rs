//! When the administrator's hooks ([`crate::hooks`]) run in an update, and what their results do.
//!
//! | phase | runs | hooks of | a failure |
//! |---|---|---|---|
//! | `pre-apply` | before the update is recorded, before the drain | the current config (on disk) | stops the update: nothing changed, Degraded with the hook's message, retried with backoff |
//! | `post-apply` | in `PostActions` after the actions (no reboot), or in `RebootRequested` before the reboot is asked for | the desired config (written by the update) | Degraded with the hook's message, the update not committed and retried from its step |
//! | `pre-reboot` | in `RebootRequested`, after `post-apply`, just before the reboot is asked for (only when the agent reboots) | the desired config | stops the update: rolled back, Degraded, retried |
//! | `post-boot` | in `Verifying`, after the booted OS and files are verified, before the commit | the desired config | `NotTaken`: Degraded with the hook's message, verified (and the failed hook run) again at every retry |
//!
//! `pre-apply` runs the *current* config's hooks because the desired config's files are not on
//! the node before the update writes them (and it must not write anything before the veto);
//! so a new or changed `pre-apply` hook first gates the update after the one that delivers it,
//! as a new `ExecStartPre=` of a unit counts from its next start.
//!
//! # Crash safety
//! Each hook of a recorded update is marked in the update record (`hooks`) as started *before*
//! it runs and as succeeded or failed after, so a restart of the agent never runs a hook twice
//! for one step of an update: a succeeded hook is not run again when the step is (a restart, a
//! retry), and a hook found started without an end (the agent was killed while it ran) is not
//! run again either: a `pre-*` hook that did not finish never said yes, so the update is stopped
//! (rolled back, Degraded, and retried as a new update, whose hooks run afresh); a `post-*`
//! hook's effect is unknown, so it is logged and the update goes on. A hook that *failed* is
//! run again at the next retry of its step, like the step itself. `pre-apply` runs before
//! anything is recorded or changed: a kill there leaves nothing behind, and the next start
//! begins the update anew, `pre-apply` included, which is what a gate on the node's present
//! state should do.
//!
//! There is no failpoint here: a kill while a hook runs is tested for real, by a hook that
//! kills the agent (`agent/tests/hooks_e2e.rs`), and every failpoint is also a power cut of the
//! VM scenarios, which deliver no hooks.

use anyhow::Result;
use machine_config::MachineConfig;
use machine_config::plan::Plan;

use super::Engine;
use super::record::{self, HookMark, HookState, UpdateRecord};
use crate::hooks::{self, Hook, HookInput, Phase, Placement};

impl Engine {
    /// Runs the current config's `pre-apply` hooks (before anything is recorded); `Err` with
    /// the first failing hook's message.
    pub(crate) async fn pre_apply_hooks(
        &self,
        current: &MachineConfig,
        desired: &MachineConfig,
        plan: &Plan,
    ) -> Result<(), String> {
        let input = self.hook_input(Phase::PreApply, current, desired, plan);
        for hook in self.hooks_of(Phase::PreApply)? {
            let result = hooks::run(&self.root, &hook, &input, &self.opts.hooks, false).await;
            if !result.success {
                return Err(format!(
                    "update to {} stopped: {}",
                    desired.name(),
                    result.message(&hook)
                ));
            }
        }
        Ok(())
    }

    /// Runs the hooks of `phase` for the recorded update `rec`, each marked in the record
    /// before and after it runs (see the module docs); `Err` with the message of the first
    /// hook that failed (or, for a `pre-*` phase, was interrupted).
    pub(crate) async fn recorded_hooks(
        &self,
        rec: &mut UpdateRecord,
        plan: &Plan,
        phase: Phase,
    ) -> Result<(), String> {
        let input = self.hook_input(phase, &rec.current, &rec.desired, plan);
        for hook in self.hooks_of(phase)? {
            match mark_of(rec, &hook) {
                Some(HookState::Succeeded) => {
                    tracing::info!(phase = %phase, hook = hook.name, "hook already ran for this update: not run again");
                    continue;
                }
                Some(HookState::Started) if phase.is_pre() => {
                    return Err(format!(
                        "{phase} hook {} was interrupted (the agent stopped while it ran) and is not run twice",
                        hook.name
                    ));
                }
                Some(HookState::Started) => {
                    tracing::warn!(phase = %phase, hook = hook.name, "hook was interrupted (the agent stopped while it ran); not run twice for one update, going on");
                    continue;
                }
                Some(HookState::Failed) | None => {}
            }
            self.mark(rec, &hook, HookState::Started)?;
            let result = hooks::run(&self.root, &hook, &input, &self.opts.hooks, false).await;
            let state = if result.success {
                HookState::Succeeded
            } else {
                HookState::Failed
            };
            self.mark(rec, &hook, state)?;
            if !result.success {
                return Err(result.message(&hook));
            }
        }
        Ok(())
    }

    /// The hooks of `phase` that run: none for a root whose hooks are not run
    /// ([`Placement::Skip`]), said in the log when there were some.
    fn hooks_of(&self, phase: Phase) -> Result<Vec<Hook>, String> {
        let found = hooks::discover(&self.root, phase).map_err(|e| format!("{e:#}"))?;
        if self.opts.hooks.placement == Placement::Skip && !found.is_empty() {
            let names: Vec<&str> = found.iter().map(|h| h.name.as_str()).collect();
            tracing::warn!(
                phase = %phase,
                hooks = ?names,
                root = %self.root.path().display(),
                "not running the {phase} hooks of the alternate root {}: a config's hook would run on this machine as root (--alternate-root-hooks chroot runs them inside the root)",
                self.root.path().display()
            );
            return Ok(Vec::new());
        }
        Ok(found)
    }

    /// Records `state` for `hook` (persisted at once: the record is the memory across kills).
    fn mark(&self, rec: &mut UpdateRecord, hook: &Hook, state: HookState) -> Result<(), String> {
        let phase = hook.phase.as_str();
        match rec
            .hooks
            .iter_mut()
            .find(|m| m.phase == phase && m.name == hook.name)
        {
            Some(m) => m.state = state,
            None => rec.hooks.push(HookMark {
                phase: phase.to_string(),
                name: hook.name.clone(),
                state,
            }),
        }
        record::store(&self.root, rec).map_err(|e| format!("{e:#}"))
    }

    fn hook_input(
        &self,
        phase: Phase,
        current: &MachineConfig,
        desired: &MachineConfig,
        plan: &Plan,
    ) -> HookInput {
        HookInput {
            phase,
            current_config: current.name().to_string(),
            desired_config: desired.name().to_string(),
            root: self.root.path().to_path_buf(),
            reboot: plan.reboot,
            plan: serde_json::from_str(&plan.to_json()).unwrap_or_default(),
        }
    }
}

fn mark_of(rec: &UpdateRecord, hook: &Hook) -> Option<HookState> {
    rec.hooks
        .iter()
        .find(|m| m.phase == hook.phase.as_str() && m.name == hook.name)
        .map(|m| m.state)
}
