//! Why the previous boot's staged deployment may not have been written: the first `error:`
//! line of `ostree-finalize-staged.service` in the previous boot's journal, as the MCD reads it
//! (`syncFinalizationFailureAnnotation`, rpmostree-client-go's `QueryPreviousDeploymentError`).
//! It goes to the Node's `ostree-finalize-staged-failure` annotation and, as
//! `; possible root cause: <line>`, after every on-disk validation error: a node that comes
//! back in its old deployment says why instead of only "unexpected on-disk state".
//!
//! The MCD reads it again at every sync, but the previous boot's journal cannot change while
//! this boot runs: the agent reads it once per start.

use anyhow::{Context, Result};
use machine_config::mco::annotations::OSTREE_FINALIZE_STAGED_FAILURE;

use crate::engine::Engine;
use crate::host::command::HostCommands;

/// How much of the line is kept (the annotation's value, and the suffix).
pub const MAX_LEN: usize = 2000;

/// The command the MCD runs.
const JOURNALCTL: &[&str] = &[
    "journalctl",
    "-b",
    "-1",
    "-o",
    "cat",
    "_UID=0",
    "-u",
    "ostree-finalize-staged.service",
];

/// The first line of `journal` beginning `error:`, cut to [`MAX_LEN`] bytes (on a character
/// boundary).
pub fn first_error(journal: &str) -> Option<String> {
    let line = journal.lines().find(|l| l.starts_with("error:"))?;
    let mut end = line.len().min(MAX_LEN);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    Some(line[..end].to_string())
}

/// The previous boot's finalization error, `None` when there was none.
pub async fn previous_boot_error(cmds: &dyn HostCommands) -> Result<Option<String>> {
    let journal = cmds
        .stdout(JOURNALCTL)
        .await
        .context("reading the previous boot's ostree-finalize-staged.service journal")?;
    Ok(first_error(&journal))
}

/// Reads the previous boot's finalization error (with the host's programs), keeps it for
/// validation errors, and sets the Node's annotation through the node writer: to the line, or
/// to `""` when there is none and the node has the annotation (`annotated`), as the MCD
/// does. A journal that cannot be read (no previous boot) is a warning.
pub async fn sync(engine: &Engine, annotated: bool) {
    let Some(cmds) = engine.seams().commands.as_deref() else {
        return;
    };
    let found = match previous_boot_error(cmds).await {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(error = %format!("{e:#}"), "could not read the previous boot's finalization errors");
            return;
        }
    };
    if let Some(line) = &found {
        tracing::warn!(
            error = line,
            "ostree-finalize-staged.service failed in the previous boot"
        );
    }
    engine.set_possible_root_cause(found.clone());
    let value = match (&found, annotated) {
        (Some(line), _) => line.as_str(),
        (None, true) => "",
        (None, false) => return,
    };
    if let Err(e) = engine
        .reporter()
        .cluster()
        .annotate(OSTREE_FINALIZE_STAGED_FAILURE, value)
        .await
    {
        tracing::warn!(error = %format!("{e:#}"), "could not set {OSTREE_FINALIZE_STAGED_FAILURE}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::command::FakeCommands;

    #[test]
    fn the_first_error_line_is_kept_whole_up_to_the_limit() {
        let journal = "Finalizing staged deployment\nerror: Installing kernel: No space left on device\nerror: later\n";
        assert_eq!(
            first_error(journal).as_deref(),
            Some("error: Installing kernel: No space left on device")
        );
        assert_eq!(first_error("Finalizing\n  error: indented\n"), None);
        assert_eq!(first_error(""), None);
        let long = format!("error: {}", "é".repeat(MAX_LEN));
        let cut = first_error(&long).unwrap();
        assert!(
            cut.len() <= MAX_LEN && cut.len() >= MAX_LEN - 1,
            "{}",
            cut.len()
        );
    }

    #[tokio::test]
    async fn the_journal_is_read_as_the_mcd_reads_it() {
        let cmds = FakeCommands::new().ok(JOURNALCTL, "Starting\nerror: boom\n");
        assert_eq!(
            previous_boot_error(&cmds).await.unwrap().as_deref(),
            Some("error: boom")
        );
        assert_eq!(
            cmds.calls(),
            vec!["journalctl -b -1 -o cat _UID=0 -u ostree-finalize-staged.service"]
        );
        let cmds = FakeCommands::new().fails(
            &["journalctl"],
            1,
            "Data from the specified boot (-1) is not available: No such boot ID in journal",
        );
        let e = previous_boot_error(&cmds).await.unwrap_err();
        assert_eq!(
            format!("{e:#}"),
            "reading the previous boot's ostree-finalize-staged.service journal: journalctl failed (exit status 1): Data from the specified boot (-1) is not available: No such boot ID in journal"
        );
    }
}
