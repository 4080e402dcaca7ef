//! `mco-agent status [--root DIR] [--sysroot DIR] [-o json|yaml]`: where the node stands, from the
//! files the agent keeps, so it works whether or not the daemon runs:
//!
//! - the status file `/run/mco-agent/status.json` (state, reason, desired, last update; written
//!   by the running agent, gone after a reboot until it runs again);
//! - `/etc/machine-config-daemon/currentconfig` (the config the node is in, committed only once
//!   an update is complete);
//! - the update record `/etc/machine-config-daemon/mco-agent-update.json` (the update in
//!   progress and its step);
//! - the deployments: the ostree sysroot read with libostree (`--sysroot`, default the root) by
//!   the helper `mco-sysroot-status` (`os::sysroot`), or rpm-ostree on the system bus when
//!   there is no sysroot to read (or the helper fails).
//!
//! What cannot be read is said, and the rest is still shown.

pub(crate) mod render;
mod times;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use machine_config::mco::image::layered_image;
use machine_config::mco::paths::CURRENT_CONFIG;
use serde::Serialize;

use crate::engine::record::{self, UpdateRecord};
use crate::engine::report::{AgentProcess, LastError, LastUpdate, STATUS_FILE, read_status};
use crate::engine::{BOOT_ID_FILE, read_boot_id};
use crate::input;
use crate::os::{ClientConfig, DbusOsUpdater, Deployment, OsStatus, OsUpdater, SysrootReader};
use crate::rootfs::Root;
use crate::strategy::StrategyStatus;

/// How long rpm-ostree may take to answer before the deployments are given up.
const RPM_OSTREE_TIMEOUT: Duration = Duration::from_secs(5);

/// Arguments of `status`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Root directory of the node.
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// The ostree sysroot to read the deployments from (default: the root; rpm-ostree on the
    /// system bus when it is not one).
    #[arg(long)]
    pub sysroot: Option<PathBuf>,
    #[command(flatten)]
    pub output: super::output::OutputArgs,
    /// Read the boot id from this file instead of the kernel's (tests simulate reboots).
    #[arg(long, hide = true)]
    pub boot_id_file: Option<PathBuf>,
}

/// Everything `status` knows; the `-o json|yaml` output.
#[derive(Debug, Clone, Default, Serialize)]
pub struct NodeStatus {
    /// `Done`, `Working`, `Degraded`, `Unreconcilable`; `None` without a status file.
    pub state: Option<String>,
    pub reason: String,
    /// The config the node is in: `currentconfig`, else what the status file says.
    pub current: Option<String>,
    pub desired: Option<String>,
    /// The layered OS image the node is in (image-mode pools: `currentimage`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_image: Option<String>,
    /// The OS image the node is asked to run: the pool's layered image, or the image of the
    /// update in progress.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub desired_image: Option<String>,
    /// An update is applied but waits for a reboot nobody requested.
    pub needs_reboot: bool,
    #[serde(serialize_with = "times::last_update")]
    pub last_update: Option<LastUpdate>,
    pub pending: Option<Pending>,
    pub deployments: Option<Deployments>,
    /// The update strategy, its next window, the FleetLock slot, why an update waits (from
    /// the status file; the slot also from the update record).
    pub strategy: Option<StrategyStatus>,
    /// When the agent last wrote the status file (Unix milliseconds; RFC 3339 in the output,
    /// `status_updated`, as every time there).
    #[serde(rename = "status_updated", serialize_with = "times::rfc3339_opt")]
    pub status_updated_ms: Option<u64>,
    /// The daemon that keeps the status file, and whether it still runs (`None`: no daemon
    /// wrote the file, or there is none).
    pub agent: Option<AgentState>,
    /// The daemon's last failure to fetch the desired config or to reach the API server.
    #[serde(serialize_with = "times::last_error")]
    pub last_error: Option<LastError>,
    /// When the daemon last fetched the desired config (Unix milliseconds).
    #[serde(rename = "last_fetch", serialize_with = "times::rfc3339_opt")]
    pub last_fetch_ms: Option<u64>,
    /// What could not be read, and why.
    pub unreadable: Vec<String>,
}

/// The daemon named in the status file.
#[derive(Debug, Clone, Serialize)]
pub struct AgentState {
    /// Its process still runs (`/proc/PID` is an `mco-agent`), like `systemctl status`'s
    /// `Active:`.
    pub running: bool,
    pub pid: u32,
    #[serde(rename = "started", serialize_with = "times::rfc3339")]
    pub started_ms: u64,
}

impl AgentState {
    fn of(process: &AgentProcess) -> Self {
        AgentState {
            running: is_agent_process(process.pid),
            pid: process.pid,
            started_ms: process.started_ms,
        }
    }
}

/// Whether process `pid` runs and is an `mco-agent` (not another process given the pid since).
fn is_agent_process(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .is_ok_and(|comm| comm.trim_end() == env!("CARGO_PKG_NAME"))
}

/// The update in progress, from the update record.
#[derive(Debug, Clone, Serialize)]
pub struct Pending {
    pub from: String,
    pub to: String,
    /// The step it is at (`engine::record::Step`).
    pub step: String,
    pub reboot: bool,
    pub force: bool,
    #[serde(rename = "started", serialize_with = "times::rfc3339")]
    pub started_ms: u64,
    pub reason: Option<String>,
    /// The step was entered in this boot; `None` when the boot id cannot be read.
    pub this_boot: Option<bool>,
}

/// The OS deployments.
#[derive(Debug, Clone, Serialize)]
pub struct Deployments {
    /// Where they were read: `sysroot <path>` or `rpm-ostree`.
    pub source: String,
    /// The sysroot is the running system's (else `running` is the default deployment).
    pub booted: bool,
    /// The booted deployment, or the default one of a sysroot that is not booted.
    pub running: Option<DeploymentInfo>,
    /// The deployment the next boot starts, when it is another one (staged or pending).
    pub next: Option<DeploymentInfo>,
    pub rollback: Option<DeploymentInfo>,
}

/// One deployment.
#[derive(Debug, Clone, Serialize)]
pub struct DeploymentInfo {
    pub osname: String,
    pub checksum: String,
    pub version: Option<String>,
    /// The OS image it runs (`osImageURL` terms), or its ostree refspec.
    pub image: Option<String>,
    pub origin: Option<String>,
    pub kargs: Option<String>,
    pub staged: bool,
    pub pinned: bool,
}

impl From<&Deployment> for DeploymentInfo {
    fn from(d: &Deployment) -> Self {
        DeploymentInfo {
            osname: d.osname.clone(),
            checksum: d.checksum.clone(),
            version: d.version.clone(),
            image: d.image_url(),
            origin: d.origin.clone(),
            kargs: d.kargs.clone(),
            staged: d.staged,
            pinned: d.pinned,
        }
    }
}

/// Prints the node's status.
pub fn run(args: &Args) -> Result<ExitCode> {
    let root = super::open_root(&args.root)?;
    let boot_id_file = args
        .boot_id_file
        .clone()
        .unwrap_or_else(|| PathBuf::from(BOOT_ID_FILE));
    let sysroot = args.sysroot.clone().unwrap_or_else(|| args.root.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let status = runtime.block_on(gather(&root, &sysroot, &boot_id_file));
    if !args.output.print(&status)? {
        print!(
            "{}",
            render::human(&status, crate::engine::record::now_ms())
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Reads everything there is to read about the node at `root`.
pub async fn gather(root: &Root, sysroot: &Path, boot_id_file: &Path) -> NodeStatus {
    let mut s = NodeStatus::default();
    let host = |p: &str| root.host_path(Path::new(p)).display().to_string();
    match read_status(root) {
        Ok(Some(file)) => {
            s.state = Some(file.state.as_str().to_string());
            s.reason = file.reason;
            s.current = file.current;
            s.desired = file.desired;
            s.desired_image = file.desired_image;
            s.needs_reboot = file.needs_reboot;
            s.last_update = file.last_update;
            s.strategy = file.strategy;
            s.status_updated_ms = Some(file.updated_ms);
            s.agent = file.agent.as_ref().map(AgentState::of);
            s.last_error = file.last_error;
            s.last_fetch_ms = file.last_fetch_ms;
        }
        Ok(None) => s.unreadable.push(format!(
            "{}: absent (the agent has not run since the node booted): state, reason and last update unknown",
            host(STATUS_FILE)
        )),
        Err(e) => s.unreadable.push(format!("{e:#}")),
    }
    match input::read_current(root) {
        Ok(Some(c)) => {
            s.current = Some(c.machine_config.name().to_string());
            s.current_image = layered_image(&c.machine_config).map(str::to_string);
        }
        Ok(None) => s.unreadable.push(format!(
            "{}: absent (no config was applied to this root yet)",
            host(CURRENT_CONFIG)
        )),
        Err(e) => s.unreadable.push(format!("{e:#}")),
    }
    match record::load(root) {
        Ok(Some(rec)) => {
            let boot = read_boot_id(boot_id_file);
            if let Err(e) = &boot {
                s.unreadable.push(format!("{e:#}"));
            }
            if s.desired.is_none() {
                s.desired = Some(rec.desired.name().to_string());
            }
            let image = &rec.desired.spec.os_image_url;
            if s.desired_image.is_none()
                && !image.is_empty()
                && *image != rec.current.spec.os_image_url
            {
                s.desired_image = Some(image.clone());
            }
            s.pending = Some(pending(&rec, boot.ok().as_deref()));
            if rec.lock_held {
                s.strategy
                    .get_or_insert_with(|| StrategyStatus {
                        name: "fleet_lock".to_string(),
                        ..StrategyStatus::default()
                    })
                    .lock_held = true;
            }
        }
        Ok(None) => {}
        Err(e) => s.unreadable.push(format!("{e:#}")),
    }
    match deployments(sysroot).await {
        Ok(d) => s.deployments = Some(d),
        Err(e) => s.unreadable.push(format!("deployments: {e}")),
    }
    s
}

fn pending(rec: &UpdateRecord, boot_id: Option<&str>) -> Pending {
    Pending {
        from: rec.current.name().to_string(),
        to: rec.desired.name().to_string(),
        step: rec.step.as_str().to_string(),
        reboot: rec.reboot,
        force: rec.force,
        started_ms: rec.started_ms,
        reason: rec.reason.clone(),
        this_boot: boot_id.map(|b| b == rec.boot_id),
    }
}

/// The deployments of the sysroot at `path`, else from rpm-ostree; `Err` says why neither.
async fn deployments(path: &Path) -> Result<Deployments, String> {
    let sysroot_error = match SysrootReader::locate().read(path).await {
        Ok(state) => {
            return Ok(summarize(
                format!("sysroot {}", path.display()),
                &state.status,
            ));
        }
        Err(e) => e.to_string(),
    };
    // A sysroot that cannot be read with libostree (or a helper that is missing or fails):
    // perhaps rpm-ostree can say.
    let from_rpm_ostree = tokio::time::timeout(RPM_OSTREE_TIMEOUT, async {
        let os = DbusOsUpdater::connect(ClientConfig::default())
            .await
            .map_err(|e| e.to_string())?;
        let status = os.status().await.map_err(|e| e.to_string());
        let _ = os.close().await;
        status
    })
    .await
    .unwrap_or_else(|_| {
        Err(format!(
            "rpm-ostree did not answer within {RPM_OSTREE_TIMEOUT:?}"
        ))
    });
    match from_rpm_ostree {
        Ok(status) => Ok(summarize("rpm-ostree".to_string(), &status)),
        Err(e) => Err(format!("{sysroot_error}; and not from rpm-ostree: {e}")),
    }
}

fn summarize(source: String, status: &OsStatus) -> Deployments {
    let running = status.booted_or_default();
    let next = status
        .default_deployment()
        .filter(|d| running.is_none_or(|r| r.id != d.id));
    let rollback = running.and_then(|r| {
        let pos = status.deployments.iter().position(|d| d.id == r.id)?;
        status.deployments[pos + 1..]
            .iter()
            .find(|d| d.osname == r.osname)
    });
    Deployments {
        source,
        booted: status.booted().is_some(),
        running: running.map(DeploymentInfo::from),
        next: next.map(DeploymentInfo::from),
        rollback: rollback.map(DeploymentInfo::from),
    }
}
