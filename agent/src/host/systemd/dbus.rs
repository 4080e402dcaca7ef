//! [`DbusSystemd`]: the [`Systemd`] seam over `org.freedesktop.systemd1` with zbus.

use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use tracing::{debug, info, warn};
use zbus::Connection;
use zbus::proxy::CacheProperties;
use zbus::zvariant::{ObjectPath, OwnedObjectPath};

use super::{ActiveState, JobKind, Systemd, SystemdError, UnitFileChange, UnitState};

/// How long a start/restart/reload job may take by default. systemd's own start and stop
/// timeouts (90 s by default) normally end a job long before this; it only bounds the wait
/// when a unit sets no timeout at all.
pub const DEFAULT_JOB_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// systemd's job mode: replace conflicting queued jobs, as `systemctl` does by default.
const JOB_MODE: &str = "replace";

#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Manager",
    default_service = "org.freedesktop.systemd1",
    default_path = "/org/freedesktop/systemd1"
)]
trait Manager {
    fn reload(&self) -> zbus::Result<()>;
    fn enable_unit_files(
        &self,
        files: &[&str],
        runtime: bool,
        force: bool,
    ) -> zbus::Result<(bool, Vec<(String, String, String)>)>;
    fn disable_unit_files(
        &self,
        files: &[&str],
        runtime: bool,
    ) -> zbus::Result<Vec<(String, String, String)>>;
    fn mask_unit_files(
        &self,
        files: &[&str],
        runtime: bool,
        force: bool,
    ) -> zbus::Result<Vec<(String, String, String)>>;
    fn unmask_unit_files(
        &self,
        files: &[&str],
        runtime: bool,
    ) -> zbus::Result<Vec<(String, String, String)>>;
    fn preset_unit_files(
        &self,
        files: &[&str],
        runtime: bool,
        force: bool,
    ) -> zbus::Result<(bool, Vec<(String, String, String)>)>;
    fn get_unit_file_state(&self, file: &str) -> zbus::Result<String>;
    fn start_unit(&self, name: &str, mode: &str) -> zbus::Result<OwnedObjectPath>;
    fn restart_unit(&self, name: &str, mode: &str) -> zbus::Result<OwnedObjectPath>;
    fn reload_unit(&self, name: &str, mode: &str) -> zbus::Result<OwnedObjectPath>;
    fn get_unit(&self, name: &str) -> zbus::Result<OwnedObjectPath>;
    fn load_unit(&self, name: &str) -> zbus::Result<OwnedObjectPath>;

    #[zbus(signal)]
    fn job_removed(
        &self,
        id: u32,
        job: ObjectPath<'_>,
        unit: &str,
        result: &str,
    ) -> zbus::Result<()>;
}

#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Unit",
    default_service = "org.freedesktop.systemd1"
)]
trait Unit {
    #[zbus(property)]
    fn load_state(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn active_state(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn sub_state(&self) -> zbus::Result<String>;
}

/// The real [`Systemd`]: systemd's manager on a D-Bus connection (normally the system bus).
#[derive(Clone)]
pub struct DbusSystemd {
    conn: Connection,
    job_timeout: Duration,
}

impl DbusSystemd {
    /// Uses `conn`, which must reach systemd's manager (`org.freedesktop.systemd1`).
    pub fn new(conn: Connection) -> Self {
        Self {
            conn,
            job_timeout: DEFAULT_JOB_TIMEOUT,
        }
    }

    /// Connects to the system bus (`DBUS_SYSTEM_BUS_ADDRESS` when set).
    pub async fn system() -> Result<Self, SystemdError> {
        let conn = crate::system_bus::connect()
            .await
            .map_err(|e| call_error("connect", "the system bus", e))?;
        Ok(Self::new(conn))
    }

    /// Bounds how long a start/restart/reload waits for its job to finish.
    pub fn with_job_timeout(mut self, timeout: Duration) -> Self {
        self.job_timeout = timeout;
        self
    }

    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    async fn manager(&self) -> Result<ManagerProxy<'_>, SystemdError> {
        ManagerProxy::builder(&self.conn)
            .cache_properties(CacheProperties::No)
            .build()
            .await
            .map_err(|e| call_error("connect", "the manager", e))
    }

    /// Queues a job for `unit` and waits for its `JobRemoved` signal.
    async fn run_job(&self, kind: JobKind, unit: &str) -> Result<(), SystemdError> {
        let manager = self.manager().await?;
        let method = job_method(kind);
        // Subscribe before queueing: a quick job can be removed before the reply to the
        // queueing call reaches us.
        let mut removed = manager
            .receive_job_removed()
            .await
            .map_err(|e| call_error("AddMatch(JobRemoved)", unit, e))?;
        let queued = match kind {
            JobKind::Start => manager.start_unit(unit, JOB_MODE).await,
            JobKind::Restart => manager.restart_unit(unit, JOB_MODE).await,
            JobKind::Reload => manager.reload_unit(unit, JOB_MODE).await,
        };
        let job = queued.map_err(|e| call_error(method, unit, e))?;
        debug!(unit, job = job.as_str(), "queued {kind} job");

        let wait = async {
            while let Some(signal) = removed.next().await {
                let Ok(args) = signal.args() else {
                    warn!("ignoring a JobRemoved signal with unexpected arguments");
                    continue;
                };
                if args.job().as_str() == job.as_str() {
                    return Ok(args.result().to_string());
                }
            }
            Err(SystemdError::JobSignalLost {
                kind,
                unit: unit.to_owned(),
            })
        };
        let result = tokio::time::timeout(self.job_timeout, wait)
            .await
            .map_err(|_| SystemdError::JobTimeout {
                kind,
                unit: unit.to_owned(),
                job: job.to_string(),
                timeout: self.job_timeout,
            })??;
        if result == "done" {
            info!(unit, "{kind} of unit finished");
            Ok(())
        } else {
            Err(SystemdError::JobFailed {
                kind,
                unit: unit.to_owned(),
                result,
            })
        }
    }

    async fn unit_path(
        &self,
        manager: &ManagerProxy<'_>,
        unit: &str,
    ) -> Result<OwnedObjectPath, SystemdError> {
        match manager.get_unit(unit).await {
            Ok(path) => Ok(path),
            // Units nobody needed yet are not loaded: ask systemd to load this one.
            Err(zbus::Error::MethodError(name, _, _)) if name.as_str() == NO_SUCH_UNIT => manager
                .load_unit(unit)
                .await
                .map_err(|e| call_error("LoadUnit", unit, e)),
            Err(e) => Err(call_error("GetUnit", unit, e)),
        }
    }
}

const NO_SUCH_UNIT: &str = "org.freedesktop.systemd1.NoSuchUnit";

fn job_method(kind: JobKind) -> &'static str {
    match kind {
        JobKind::Start => "StartUnit",
        JobKind::Restart => "RestartUnit",
        JobKind::Reload => "ReloadUnit",
    }
}

fn call_error(method: &'static str, target: &str, err: zbus::Error) -> SystemdError {
    let (dbus_name, message) = match err {
        zbus::Error::MethodError(name, message, _) => {
            let message = message.unwrap_or_default();
            (
                Some(name.to_string()),
                if message.is_empty() {
                    name.to_string()
                } else {
                    message
                },
            )
        }
        other => (None, other.to_string()),
    };
    SystemdError::Call {
        method,
        target: target.to_owned(),
        dbus_name,
        message,
    }
}

fn changes(raw: Vec<(String, String, String)>) -> Vec<UnitFileChange> {
    raw.into_iter()
        .map(|(kind, path, source)| UnitFileChange { kind, path, source })
        .collect()
}

fn log_changes(what: &str, units: &[&str], changes: &[UnitFileChange]) {
    let units = units.join(" ");
    if changes.is_empty() {
        debug!(units, "{what}: nothing to change");
    }
    for change in changes {
        info!(units, change = %change, "{what}");
    }
}

#[async_trait]
impl Systemd for DbusSystemd {
    async fn daemon_reload(&self) -> Result<(), SystemdError> {
        // systemd answers Reload only once the reload is complete.
        self.manager()
            .await?
            .reload()
            .await
            .map_err(|e| call_error("Reload", "the manager", e))?;
        info!("systemd daemon-reload done");
        Ok(())
    }

    async fn enable_unit_files(&self, units: &[&str]) -> Result<Vec<UnitFileChange>, SystemdError> {
        let (has_install_info, raw) = self
            .manager()
            .await?
            .enable_unit_files(units, false, true)
            .await
            .map_err(|e| call_error("EnableUnitFiles", &units.join(" "), e))?;
        if !has_install_info {
            warn!(
                units = units.join(" "),
                "unit files have no [Install] section: enabling does nothing"
            );
        }
        let changes = changes(raw);
        log_changes("enabled unit files", units, &changes);
        Ok(changes)
    }

    async fn disable_unit_files(
        &self,
        units: &[&str],
    ) -> Result<Vec<UnitFileChange>, SystemdError> {
        let raw = self
            .manager()
            .await?
            .disable_unit_files(units, false)
            .await
            .map_err(|e| call_error("DisableUnitFiles", &units.join(" "), e))?;
        let changes = changes(raw);
        log_changes("disabled unit files", units, &changes);
        Ok(changes)
    }

    async fn mask_unit_files(&self, units: &[&str]) -> Result<Vec<UnitFileChange>, SystemdError> {
        let raw = self
            .manager()
            .await?
            .mask_unit_files(units, false, true)
            .await
            .map_err(|e| call_error("MaskUnitFiles", &units.join(" "), e))?;
        let changes = changes(raw);
        log_changes("masked unit files", units, &changes);
        Ok(changes)
    }

    async fn unmask_unit_files(&self, units: &[&str]) -> Result<Vec<UnitFileChange>, SystemdError> {
        let raw = self
            .manager()
            .await?
            .unmask_unit_files(units, false)
            .await
            .map_err(|e| call_error("UnmaskUnitFiles", &units.join(" "), e))?;
        let changes = changes(raw);
        log_changes("unmasked unit files", units, &changes);
        Ok(changes)
    }

    async fn preset_unit_files(&self, units: &[&str]) -> Result<Vec<UnitFileChange>, SystemdError> {
        let (_, raw) = self
            .manager()
            .await?
            .preset_unit_files(units, false, false)
            .await
            .map_err(|e| call_error("PresetUnitFiles", &units.join(" "), e))?;
        let changes = changes(raw);
        log_changes("preset unit files", units, &changes);
        Ok(changes)
    }

    async fn unit_file_state(&self, unit: &str) -> Result<String, SystemdError> {
        self.manager()
            .await?
            .get_unit_file_state(unit)
            .await
            .map_err(|e| call_error("GetUnitFileState", unit, e))
    }

    async fn start_unit(&self, unit: &str) -> Result<(), SystemdError> {
        self.run_job(JobKind::Start, unit).await
    }

    async fn restart_unit(&self, unit: &str) -> Result<(), SystemdError> {
        self.run_job(JobKind::Restart, unit).await
    }

    async fn reload_unit(&self, unit: &str) -> Result<(), SystemdError> {
        self.run_job(JobKind::Reload, unit).await
    }

    async fn unit_active_state(&self, unit: &str) -> Result<UnitState, SystemdError> {
        let manager = self.manager().await?;
        let path = self.unit_path(&manager, unit).await?;
        let proxy = UnitProxy::builder(&self.conn)
            .path(path)
            .map_err(|e| call_error("Get(ActiveState)", unit, e))?
            .cache_properties(CacheProperties::No)
            .build()
            .await
            .map_err(|e| call_error("Get(ActiveState)", unit, e))?;
        let load_state = proxy
            .load_state()
            .await
            .map_err(|e| call_error("Get(LoadState)", unit, e))?;
        let active_state = proxy
            .active_state()
            .await
            .map_err(|e| call_error("Get(ActiveState)", unit, e))?;
        let sub_state = proxy
            .sub_state()
            .await
            .map_err(|e| call_error("Get(SubState)", unit, e))?;
        Ok(UnitState {
            load_state,
            active_state: ActiveState::parse(&active_state),
            sub_state,
        })
    }
}
