//! The node's own kernel tuning, `/etc/pivot/kernel-args`: the MCD's `UpdateTuningArgs`
//! (upstream `pkg/daemon/kernelargs.go`), which every update runs after the OS changes and
//! before the new config is recorded, outside the MachineConfigs (OKD nodes rely on it).
//!
//! The file holds one `ADD <arg>` or `DELETE <arg>` a line. Only a tunable argument is acted
//! on: on RHCOS/SCOS (Enterprise Linux) only `nosmt`, on Fedora CoreOS any, on any other OS
//! none. An `ADD` of an argument the running kernel's command line (`/proc/cmdline`) already
//! has, or a `DELETE` of one it lacks, is skipped. What is left goes to rpm-ostree as one
//! kernel-argument change of the deployment that boots next.
//!
//! Differences, both because the MCD's way hurts users (docs/mcd-compatibility.md): a line
//! that is neither (the MCD skips it, logged only at verbosity 2, so a mistyped `add nosmt`
//! silently leaves SMT on) is an error naming the file and the line, before anything changes;
//! blank lines and `#` comments are allowed. The change is `--append-if-missing` /
//! `--delete-if-present` (the MCD's `--append` / `--delete`), so an argument the staged
//! deployment already has, or already lacks, is no error and no duplicate.

use std::path::Path;

use anyhow::{Context, Result};

use super::{KargsChange, OsUpdater};
use crate::rootfs::Root;

/// The tuning file, inside the root.
pub const TUNING_FILE: &str = "/etc/pivot/kernel-args";
/// The running kernel's command line, inside the root.
pub const CMDLINE_FILE: &str = "/proc/cmdline";

/// Which kernel arguments the node's OS lets the tuning file change (the MCD's `isArgTunable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tunable {
    /// RHCOS or SCOS: the allowlist (`nosmt`).
    EnterpriseLinux,
    /// Fedora CoreOS: any argument.
    Fedora,
    /// Any other OS: none.
    Nothing,
}

/// The arguments tunable on Enterprise Linux CoreOS (the MCD's `tuneableRHCOSArgsAllowlist`).
const EL_ALLOWLIST: &[&str] = &["nosmt"];

impl Tunable {
    /// From the MCO's name of the OS (`host_os::labels`).
    pub fn for_os(os: &str) -> Self {
        match os {
            "RHCOS" | "SCOS" => Tunable::EnterpriseLinux,
            "FCOS" => Tunable::Fedora,
            _ => Tunable::Nothing,
        }
    }

    fn allows(self, arg: &str) -> bool {
        match self {
            Tunable::EnterpriseLinux => EL_ALLOWLIST.contains(&arg),
            Tunable::Fedora => true,
            Tunable::Nothing => false,
        }
    }
}

/// One line of the tuning file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TuningLine {
    Add(String),
    Delete(String),
}

/// A tuning file that is not one `ADD <arg>` / `DELETE <arg>` a line.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{file} line {line}: {reason}: {text:?}")]
pub struct TuningError {
    pub file: String,
    pub line: usize,
    pub text: String,
    pub reason: &'static str,
}

/// Parses the tuning file's text (`file` names it in errors).
pub fn parse(file: &str, text: &str) -> Result<Vec<TuningLine>, TuningError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let error = |reason| TuningError {
            file: file.to_string(),
            line: i + 1,
            text: raw.to_string(),
            reason,
        };
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        // (the MCD's prefixes are case-sensitive and followed by a space)
        let (verb, arg): (fn(String) -> TuningLine, &str) =
            if let Some(arg) = raw.strip_prefix("ADD ") {
                (TuningLine::Add, arg)
            } else if let Some(arg) = raw.strip_prefix("DELETE ") {
                (TuningLine::Delete, arg)
            } else {
                return Err(error(
                    "expected \"ADD <argument>\" or \"DELETE <argument>\"",
                ));
            };
        let arg = arg.trim();
        if arg.is_empty() {
            return Err(error("no kernel argument"));
        }
        if arg.split_whitespace().nth(1).is_some() {
            return Err(error("one kernel argument a line"));
        }
        out.push(verb(arg.to_string()));
    }
    Ok(out)
}

/// What became of one line (the MCD's `parseTuningFile` decisions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Append(String),
    Delete(String),
    /// `ADD` of an argument the command line has: "skipping ... already in use".
    AlreadyInUse(String),
    /// `DELETE` of one it lacks: "skipping ... not present in the current argument list".
    NotPresent(String),
    /// Not tunable on this OS: "not an allowlisted kernel argument".
    NotTunable(String),
}

/// Whether `arg` is on the command line `cmdline` (the MCD's `isArgInUse`: whole words).
fn in_use(arg: &str, cmdline: &str) -> bool {
    cmdline.split_whitespace().any(|word| word == arg)
}

/// The decision for each line, against the running kernel's command line.
pub fn decide(lines: &[TuningLine], cmdline: &str, tunable: Tunable) -> Vec<Decision> {
    lines
        .iter()
        .map(|line| match line {
            TuningLine::Add(a) | TuningLine::Delete(a) if !tunable.allows(a) => {
                Decision::NotTunable(a.clone())
            }
            TuningLine::Add(a) if in_use(a, cmdline) => Decision::AlreadyInUse(a.clone()),
            TuningLine::Add(a) => Decision::Append(a.clone()),
            TuningLine::Delete(a) if in_use(a, cmdline) => Decision::Delete(a.clone()),
            TuningLine::Delete(a) => Decision::NotPresent(a.clone()),
        })
        .collect()
}

/// The rpm-ostree change of the decisions (additions, then deletions, as the MCD runs them).
pub fn change(decisions: &[Decision]) -> KargsChange {
    let mut c = KargsChange::default();
    for d in decisions {
        match d {
            Decision::Append(a) => c.append_if_missing.push(a.clone()),
            Decision::Delete(a) => c.delete_if_present.push(a.clone()),
            _ => {}
        }
    }
    c
}

/// Reads and parses the tuning file of `root` (no file: no lines). The update checks it
/// before it changes anything, so a malformed file fails it with nothing on disk changed.
pub fn read(root: &Root) -> Result<Vec<TuningLine>> {
    let Some(bytes) = root
        .read(Path::new(TUNING_FILE))
        .with_context(|| format!("reading {TUNING_FILE}"))?
    else {
        return Ok(Vec::new());
    };
    let text =
        String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("{TUNING_FILE}: not UTF-8 text"))?;
    Ok(parse(TUNING_FILE, &text)?)
}

/// Reads the tuning file of `root` and stages its changes through `os`; returns them
/// (empty: nothing to do). No file: nothing to do, rpm-ostree is not asked.
/// When the root has no `/proc/cmdline` (an alternate root, not the running system) the
/// command line is the arguments of the deployment that is booted, or else would boot.
pub async fn apply(root: &Root, os: &dyn OsUpdater) -> Result<KargsChange> {
    let lines = read(root)?;
    if lines.is_empty() {
        return Ok(KargsChange::default());
    }
    let tunable = super::host_os::read(root)
        .map(|(os, _)| Tunable::for_os(&os))
        .unwrap_or(Tunable::Nothing);
    let cmdline = match root
        .read(Path::new(CMDLINE_FILE))
        .with_context(|| format!("reading {CMDLINE_FILE}"))?
    {
        Some(b) => String::from_utf8_lossy(&b).into_owned(),
        None => running_kargs(os).await?,
    };
    let decisions = decide(&lines, &cmdline, tunable);
    for d in &decisions {
        match d {
            Decision::AlreadyInUse(a) => tracing::info!("skipping \"{a}\" as it is already in use"),
            Decision::NotPresent(a) => {
                tracing::info!("skipping \"{a}\" as it is not present in the current argument list")
            }
            Decision::NotTunable(a) => {
                tracing::warn!(file = TUNING_FILE, "{a} not an allowlisted kernel argument")
            }
            Decision::Append(_) | Decision::Delete(_) => {}
        }
    }
    let change = change(&decisions);
    if change.is_empty() {
        return Ok(change);
    }
    os.kernel_args(None, &change)
        .await
        .with_context(|| format!("changing the kernel arguments {TUNING_FILE} asks for"))?;
    tracing::info!(file = TUNING_FILE, change = ?change, "Updated kernel tuning arguments");
    Ok(change)
}

/// The change, for messages: `/etc/pivot/kernel-args: --append-if-missing=nosmt`.
pub fn describe(c: &KargsChange) -> String {
    let flags = c
        .append_if_missing
        .iter()
        .map(|a| format!("--append-if-missing={a}"));
    let flags = flags.chain(
        c.delete_if_present
            .iter()
            .map(|a| format!("--delete-if-present={a}")),
    );
    format!("{TUNING_FILE}: {}", flags.collect::<Vec<_>>().join(" "))
}

async fn running_kargs(os: &dyn OsUpdater) -> Result<String> {
    let status = os.status().await.context("reading the deployments")?;
    let running = status
        .booted_or_default()
        .context("rpm-ostree reports no deployment")?;
    Ok(running.kargs.clone().unwrap_or_default())
}

#[cfg(test)]
#[path = "tuning_tests.rs"]
mod tests;
