//! The two things a bundle asks the host rather than reads from the root's files: the journal
//! (`journalctl`) and rpm-ostreed (the agent's D-Bus client). [`NodeSources`] is the seam;
//! [`HostSources`] the real one.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;

use crate::os::{ClientConfig, DbusOsUpdater};

/// How long rpm-ostreed may take to answer before the bundle goes on without it.
pub const RPM_OSTREE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one `journalctl` may run before it is killed and the bundle goes on.
pub const JOURNAL_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the host's parts of a bundle come from.
#[async_trait]
pub trait NodeSources: Send + Sync {
    /// How [`Self::journal`] gets `unit`'s journal of `boot` (`0` this boot, `-1` the one
    /// before), for the manifest: the command line.
    fn journal_command(&self, unit: &str, boot: i32) -> String;
    /// The journal of `unit` in `boot`; `Err` says why not (the tool is missing, the boot is
    /// not in the journal, ...).
    async fn journal(&self, unit: &str, boot: i32) -> Result<Vec<u8>, String>;
    /// How [`Self::rpm_ostree_status`] asks, for the manifest.
    fn rpm_ostree_source(&self) -> String;
    /// rpm-ostreed's deployments and transaction, as `rpm-ostree status --json` shapes them.
    async fn rpm_ostree_status(&self) -> Result<serde_json::Value, String>;
}

/// The real sources: `journalctl` (with `--root` for a root other than `/`) and rpm-ostreed on
/// the system bus (`DBUS_SYSTEM_BUS_ADDRESS` honoured).
pub struct HostSources {
    /// The node's root; `/` reads the running system's journal.
    pub root: PathBuf,
    /// The `journalctl` to run.
    pub journalctl: PathBuf,
}

impl HostSources {
    /// The sources of the node at `root`, with `journalctl` from `PATH`.
    pub fn new(root: &Path) -> Self {
        HostSources {
            root: root.to_path_buf(),
            journalctl: PathBuf::from("journalctl"),
        }
    }

    fn journal_args(&self, unit: &str, boot: i32) -> Vec<String> {
        let mut args = Vec::new();
        if self.root != Path::new("/") {
            args.push(format!("--root={}", self.root.display()));
        }
        args.extend([
            "--no-pager".to_string(),
            "--output=short-iso-precise".to_string(),
            format!("--unit={unit}"),
            format!("--boot={boot}"),
        ]);
        args
    }
}

#[async_trait]
impl NodeSources for HostSources {
    fn journal_command(&self, unit: &str, boot: i32) -> String {
        let mut words = vec![self.journalctl.display().to_string()];
        words.extend(self.journal_args(unit, boot));
        words.join(" ")
    }

    async fn journal(&self, unit: &str, boot: i32) -> Result<Vec<u8>, String> {
        let child = tokio::process::Command::new(&self.journalctl)
            .args(self.journal_args(unit, boot))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("{} could not be run: {e}", self.journalctl.display()))?;
        let output = tokio::time::timeout(JOURNAL_TIMEOUT, child.wait_with_output())
            .await
            .map_err(|_| format!("journalctl did not finish within {JOURNAL_TIMEOUT:?}"))?
            .map_err(|e| format!("journalctl: {e}"))?;
        if output.status.success() {
            return Ok(output.stdout);
        }
        let said = String::from_utf8_lossy(&output.stderr);
        let said: Vec<&str> = said
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        Err(format!(
            "journalctl {}: {}",
            output.status,
            if said.is_empty() {
                "it printed no reason".to_string()
            } else {
                said.join("; ")
            }
        ))
    }

    fn rpm_ostree_source(&self) -> String {
        "rpm-ostreed on the system bus, through the agent's D-Bus client (Sysroot.Deployments, \
         Sysroot.ActiveTransaction)"
            .to_string()
    }

    async fn rpm_ostree_status(&self) -> Result<serde_json::Value, String> {
        tokio::time::timeout(RPM_OSTREE_TIMEOUT, async {
            let os = DbusOsUpdater::connect(ClientConfig::default())
                .await
                .map_err(|e| e.to_string())?;
            let status = os.status_json().await.map_err(|e| e.to_string());
            let _ = os.close().await;
            status
        })
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "rpm-ostreed did not answer within {RPM_OSTREE_TIMEOUT:?}"
            ))
        })
    }
}

/// Sources with canned answers, for tests.
#[cfg(test)]
#[derive(Default)]
pub struct FakeSources {
    /// `(unit, boot)` → the journal or why not; missing pairs fail with "no such boot".
    pub journals: std::collections::BTreeMap<(String, i32), Result<Vec<u8>, String>>,
    pub rpm_ostree: Option<Result<serde_json::Value, String>>,
}

#[cfg(test)]
#[async_trait]
impl NodeSources for FakeSources {
    fn journal_command(&self, unit: &str, boot: i32) -> String {
        format!("fake-journal {unit} {boot}")
    }

    async fn journal(&self, unit: &str, boot: i32) -> Result<Vec<u8>, String> {
        self.journals
            .get(&(unit.to_string(), boot))
            .cloned()
            .unwrap_or_else(|| Err(format!("no boot {boot} in the journal")))
    }

    fn rpm_ostree_source(&self) -> String {
        "fake rpm-ostreed".to_string()
    }

    async fn rpm_ostree_status(&self) -> Result<serde_json::Value, String> {
        self.rpm_ostree
            .clone()
            .unwrap_or_else(|| Err("rpm-ostreed is not running".to_string()))
    }
}
