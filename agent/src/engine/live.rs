//! The real seams for a node: systemd, rpm-ostree and logind over the system bus
//! (`DBUS_SYSTEM_BUS_ADDRESS` honoured), or, for an alternate root, offline unit enablement and
//! no live systemd, with OS work still going to rpm-ostree on the system bus when it answers.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};

use super::Seams;
use crate::host::reboot::LogindRebooter;
use crate::host::systemd::DbusSystemd;
use crate::os::{ClientConfig, DbusOsUpdater, RpmQuery, host_os};
use crate::rootfs::Root;

/// How long connecting to the bus and registering with rpm-ostree may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// What to connect.
#[derive(Clone, Debug)]
pub struct SeamOptions {
    /// The root is the running host (`/`): units through systemd, post-config actions run.
    pub live: bool,
    /// Leave OS work out (`--skip-os`): no rpm-ostree.
    pub skip_os: bool,
    /// Never reboot, and say why (`--skip-reboot`, `an alternate root is never rebooted`).
    pub no_reboot: Option<String>,
    /// Stage OS changes with rpm-ostree's `lock-finalization` and release them with
    /// `FinalizeDeployment` when rebooting (see the engine's docs). On by default; it takes
    /// effect only when the agent reboots (with `no_reboot` the staged deployment is left for
    /// the next reboot to finalize).
    pub lock_finalization: bool,
}

impl Default for SeamOptions {
    fn default() -> Self {
        SeamOptions {
            live: false,
            skip_os: false,
            no_reboot: None,
            lock_finalization: true,
        }
    }
}

/// Whether `root` is the running host's root directory.
pub fn is_host_root(root: &Path) -> bool {
    root.canonicalize().is_ok_and(|p| p == Path::new("/"))
}

/// Connects the seams. On a live host the system bus is required (systemd does the unit
/// work); elsewhere a missing bus only means no rpm-ostree and no reboot.
pub async fn connect(root: &Path, opts: &SeamOptions) -> Result<Seams> {
    let bus = match tokio::time::timeout(CONNECT_TIMEOUT, crate::system_bus::connect()).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(format!("the system bus is not reachable: {e}")),
        Err(_) => Err(format!(
            "the system bus did not answer within {CONNECT_TIMEOUT:?}"
        )),
    };
    let mut seams = Seams::default();
    if opts.live {
        let conn = bus
            .as_ref()
            .map_err(|e| anyhow::anyhow!("{e}"))
            .context("systemd on the running host")?;
        let systemd = Arc::new(DbusSystemd::new(conn.clone()));
        seams.units = Some(systemd.clone());
        seams.systemd = Some(systemd);
    }
    if opts.skip_os {
        seams.os_unavailable = "OS changes are left out (--skip-os)".into();
    } else {
        match &bus {
            Ok(conn) => {
                let config = ClientConfig {
                    lock_finalization: opts.lock_finalization && opts.no_reboot.is_none(),
                    ..ClientConfig::default()
                };
                let os =
                    tokio::time::timeout(CONNECT_TIMEOUT, DbusOsUpdater::new(conn, config)).await;
                match os {
                    Ok(Ok(os)) => seams.os = Some(Arc::new(os)),
                    Ok(Err(e)) => {
                        seams.os_unavailable = format!("rpm-ostree is not reachable: {e}")
                    }
                    Err(_) => {
                        seams.os_unavailable =
                            format!("rpm-ostree did not answer within {CONNECT_TIMEOUT:?}")
                    }
                }
            }
            Err(e) => seams.os_unavailable = e.clone(),
        }
    }
    // The MCD verifies extension packages on an Enterprise Linux CoreOS only; the running
    // host's database is the one a reboot changes.
    if opts.live && Root::open(root).is_ok_and(|r| host_os::is_el(&r)) {
        seams.packages = Some(Arc::new(RpmQuery::new(root)));
    }
    if opts.live {
        let commands = crate::host::command::ProcessCommands::default();
        // as its systemd service the agent is sandboxed: podman runs outside the unit
        let commands = if crate::host::command::ProcessCommands::in_a_systemd_unit() {
            commands.outside_the_unit()
        } else {
            commands
        };
        seams.commands = Some(Arc::new(commands));
    }
    match (&opts.no_reboot, &bus) {
        (Some(why), _) => seams.no_reboot = why.clone(),
        (None, Ok(conn)) => {
            let mut rebooter = LogindRebooter::on_connection(conn.clone(), root);
            if let Some(os) = &seams.os {
                rebooter = rebooter.with_os_updater(os.clone());
            }
            seams.rebooter = Some(Arc::new(rebooter));
        }
        (None, Err(e)) => seams.no_reboot = format!("cannot reboot: {e}"),
    }
    Ok(seams)
}
