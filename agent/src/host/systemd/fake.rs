//! [`FakeSystemd`]: an in-memory [`Systemd`] for unit tests of callers.
//!
//! It keeps unit-file states and unit active states, records every call, and can be told to
//! fail a call or a job. Unit-file changes are reported as if every unit were
//! `WantedBy=multi-user.target`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;

use super::{ActiveState, JobKind, Systemd, SystemdError, UnitFileChange, UnitState};

/// One call the fake received, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SystemdCall {
    DaemonReload,
    Enable(Vec<String>),
    Disable(Vec<String>),
    Mask(Vec<String>),
    Unmask(Vec<String>),
    Preset(Vec<String>),
    UnitFileState(String),
    Start(String),
    Restart(String),
    Reload(String),
    ActiveState(String),
}

#[derive(Default)]
struct Inner {
    calls: Vec<SystemdCall>,
    /// Unit file -> state (`enabled`, `disabled`, `static`, ...), without masks.
    unit_files: BTreeMap<String, String>,
    masked: BTreeSet<String>,
    /// Unit file -> state `preset` gives it (default `enabled`).
    presets: BTreeMap<String, String>,
    /// Loaded units and their active state.
    active: BTreeMap<String, ActiveState>,
    reloadable: BTreeSet<String>,
    /// Units whose start jobs succeed without activating them (an unmet condition).
    stay_inactive: BTreeSet<String>,
    /// Results other than `done` of the jobs of a kind for a unit.
    job_results: BTreeMap<(&'static str, String), String>,
    call_failures: BTreeMap<(&'static str, String), String>,
}

/// The result systemd gives a job that succeeded.
const JOB_DONE: &str = "done";

#[derive(Default)]
pub struct FakeSystemd {
    inner: Mutex<Inner>,
}

const WANTS_DIR: &str = "/etc/systemd/system/multi-user.target.wants";

impl FakeSystemd {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic in another test thread must not hide this test's result.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds a unit file in `state` (`enabled`, `disabled`, `static`, ...).
    pub fn with_unit_file(self, unit: &str, state: &str) -> Self {
        self.lock()
            .unit_files
            .insert(unit.to_owned(), state.to_owned());
        self
    }

    /// Adds a loaded unit in `state` (a unit file too, `static` unless already added).
    pub fn with_unit(self, unit: &str, state: ActiveState) -> Self {
        {
            let mut inner = self.lock();
            inner
                .unit_files
                .entry(unit.to_owned())
                .or_insert_with(|| "static".to_owned());
            inner.active.insert(unit.to_owned(), state);
        }
        self
    }

    /// Gives `unit` an `ExecReload=`, so reloading it is possible.
    pub fn with_reloadable(self, unit: &str) -> Self {
        self.lock().reloadable.insert(unit.to_owned());
        self
    }

    /// What `preset` makes of `unit` (`enabled` by default).
    pub fn with_preset(self, unit: &str, state: &str) -> Self {
        self.lock()
            .presets
            .insert(unit.to_owned(), state.to_owned());
        self
    }

    /// The next jobs of `kind` for `unit` end with `result` (`failed`, `timeout`, ...);
    /// `done`, systemd's result of a job that succeeded, makes them succeed again.
    pub fn fail_job(&self, kind: JobKind, unit: &str, result: &str) {
        let key = (kind.as_str(), unit.to_owned());
        let mut inner = self.lock();
        if result == JOB_DONE {
            inner.job_results.remove(&key);
        } else {
            inner.job_results.insert(key, result.to_owned());
        }
    }

    /// Calls of D-Bus `method` (`EnableUnitFiles`, `Reload`, `StartUnit`, ...) about `target`
    /// (the units joined by spaces, or `the manager`) fail with `message`.
    pub fn fail_call(&self, method: &'static str, target: &str, message: &str) {
        self.lock()
            .call_failures
            .insert((method, target.to_owned()), message.to_owned());
    }

    /// Calls of `method` about `target` succeed again, undoing `fail_call`.
    pub fn succeed_call(&self, method: &'static str, target: &str) {
        self.lock()
            .call_failures
            .remove(&(method, target.to_owned()));
    }

    /// Start jobs for `unit` succeed but leave it inactive, like a unit whose condition is unmet.
    pub fn stay_inactive_after_start(&self, unit: &str) {
        self.lock().stay_inactive.insert(unit.to_owned());
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<SystemdCall> {
        self.lock().calls.clone()
    }
}

fn owned(units: &[&str]) -> Vec<String> {
    units.iter().map(|u| (*u).to_owned()).collect()
}

fn call_error(
    method: &'static str,
    target: &str,
    dbus_name: &str,
    message: String,
) -> SystemdError {
    SystemdError::Call {
        method,
        target: target.to_owned(),
        dbus_name: Some(dbus_name.to_owned()),
        message,
    }
}

impl Inner {
    fn check_failure(&self, method: &'static str, target: &str) -> Result<(), SystemdError> {
        match self.call_failures.get(&(method, target.to_owned())) {
            Some(message) => Err(call_error(
                method,
                target,
                "org.freedesktop.DBus.Error.Failed",
                message.clone(),
            )),
            None => Ok(()),
        }
    }

    fn file_state(&self, unit: &str) -> Option<String> {
        if self.masked.contains(unit) {
            return Some("masked".to_owned());
        }
        self.unit_files.get(unit).cloned()
    }

    /// Sets the (unmasked) state of each unit file; every unit must exist and not be masked.
    fn set_file_states(
        &mut self,
        method: &'static str,
        units: &[&str],
        state_for: impl Fn(&Inner, &str) -> String,
    ) -> Result<Vec<UnitFileChange>, SystemdError> {
        self.check_failure(method, &units.join(" "))?;
        for unit in units {
            if self.masked.contains(*unit) {
                return Err(call_error(
                    method,
                    unit,
                    "org.freedesktop.systemd1.UnitMasked",
                    format!("Unit file {unit} is masked."),
                ));
            }
            if !self.unit_files.contains_key(*unit) {
                return Err(call_error(
                    method,
                    unit,
                    "org.freedesktop.systemd1.NoSuchUnit",
                    format!("Unit file {unit} does not exist."),
                ));
            }
        }
        let mut changes = Vec::new();
        for unit in units {
            let new = state_for(self, unit);
            let old = self
                .unit_files
                .insert((*unit).to_owned(), new.clone())
                .unwrap_or_default();
            let link = format!("{WANTS_DIR}/{unit}");
            match (old == "enabled", new == "enabled") {
                (false, true) => changes.push(UnitFileChange {
                    kind: "symlink".to_owned(),
                    path: link,
                    source: format!("/etc/systemd/system/{unit}"),
                }),
                (true, false) => changes.push(UnitFileChange {
                    kind: "unlink".to_owned(),
                    path: link,
                    source: String::new(),
                }),
                _ => {}
            }
        }
        Ok(changes)
    }

    fn job(&mut self, kind: JobKind, unit: &str) -> Result<(), SystemdError> {
        let method = match kind {
            JobKind::Start => "StartUnit",
            JobKind::Restart => "RestartUnit",
            JobKind::Reload => "ReloadUnit",
        };
        self.check_failure(method, unit)?;
        if self.masked.contains(unit) {
            return Err(call_error(
                method,
                unit,
                "org.freedesktop.systemd1.UnitMasked",
                format!("Unit {unit} is masked."),
            ));
        }
        if !self.unit_files.contains_key(unit) {
            return Err(call_error(
                method,
                unit,
                "org.freedesktop.systemd1.NoSuchUnit",
                format!("Unit {unit} not found."),
            ));
        }
        if kind == JobKind::Reload && !self.reloadable.contains(unit) {
            return Err(call_error(
                method,
                unit,
                "org.freedesktop.systemd1.JobTypeNotApplicable",
                format!("Job type reload is not applicable for unit {unit}."),
            ));
        }
        if let Some(result) = self
            .job_results
            .get(&(kind.as_str(), unit.to_owned()))
            .cloned()
        {
            if kind != JobKind::Reload {
                self.active.insert(unit.to_owned(), ActiveState::Failed);
            }
            return Err(SystemdError::JobFailed {
                kind,
                unit: unit.to_owned(),
                result,
            });
        }
        let state = if kind == JobKind::Reload {
            self.active
                .get(unit)
                .cloned()
                .unwrap_or(ActiveState::Inactive)
        } else if self.stay_inactive.contains(unit) {
            ActiveState::Inactive
        } else {
            ActiveState::Active
        };
        self.active.insert(unit.to_owned(), state);
        Ok(())
    }
}

#[async_trait]
impl Systemd for FakeSystemd {
    async fn daemon_reload(&self) -> Result<(), SystemdError> {
        let mut inner = self.lock();
        inner.calls.push(SystemdCall::DaemonReload);
        inner.check_failure("Reload", "the manager")
    }

    async fn enable_unit_files(&self, units: &[&str]) -> Result<Vec<UnitFileChange>, SystemdError> {
        let mut inner = self.lock();
        inner.calls.push(SystemdCall::Enable(owned(units)));
        inner.set_file_states("EnableUnitFiles", units, |_, _| "enabled".to_owned())
    }

    async fn disable_unit_files(
        &self,
        units: &[&str],
    ) -> Result<Vec<UnitFileChange>, SystemdError> {
        let mut inner = self.lock();
        inner.calls.push(SystemdCall::Disable(owned(units)));
        inner.set_file_states("DisableUnitFiles", units, |inner, unit| {
            match inner.unit_files.get(unit).map(String::as_str) {
                Some("enabled") => "disabled".to_owned(),
                other => other.unwrap_or("disabled").to_owned(),
            }
        })
    }

    async fn mask_unit_files(&self, units: &[&str]) -> Result<Vec<UnitFileChange>, SystemdError> {
        let mut inner = self.lock();
        inner.calls.push(SystemdCall::Mask(owned(units)));
        inner.check_failure("MaskUnitFiles", &units.join(" "))?;
        let mut changes = Vec::new();
        for unit in units {
            if inner.masked.insert((*unit).to_owned()) {
                changes.push(UnitFileChange {
                    kind: "symlink".to_owned(),
                    path: format!("/etc/systemd/system/{unit}"),
                    source: "/dev/null".to_owned(),
                });
            }
        }
        Ok(changes)
    }

    async fn unmask_unit_files(&self, units: &[&str]) -> Result<Vec<UnitFileChange>, SystemdError> {
        let mut inner = self.lock();
        inner.calls.push(SystemdCall::Unmask(owned(units)));
        inner.check_failure("UnmaskUnitFiles", &units.join(" "))?;
        let mut changes = Vec::new();
        for unit in units {
            if inner.masked.remove(*unit) {
                changes.push(UnitFileChange {
                    kind: "unlink".to_owned(),
                    path: format!("/etc/systemd/system/{unit}"),
                    source: String::new(),
                });
            }
        }
        Ok(changes)
    }

    async fn preset_unit_files(&self, units: &[&str]) -> Result<Vec<UnitFileChange>, SystemdError> {
        let mut inner = self.lock();
        inner.calls.push(SystemdCall::Preset(owned(units)));
        inner.set_file_states("PresetUnitFiles", units, |inner, unit| {
            inner
                .presets
                .get(unit)
                .cloned()
                .unwrap_or_else(|| "enabled".to_owned())
        })
    }

    async fn unit_file_state(&self, unit: &str) -> Result<String, SystemdError> {
        let mut inner = self.lock();
        inner
            .calls
            .push(SystemdCall::UnitFileState(unit.to_owned()));
        inner.check_failure("GetUnitFileState", unit)?;
        inner.file_state(unit).ok_or_else(|| {
            call_error(
                "GetUnitFileState",
                unit,
                "org.freedesktop.DBus.Error.FileNotFound",
                "No such file or directory".to_owned(),
            )
        })
    }

    async fn start_unit(&self, unit: &str) -> Result<(), SystemdError> {
        let mut inner = self.lock();
        inner.calls.push(SystemdCall::Start(unit.to_owned()));
        inner.job(JobKind::Start, unit)
    }

    async fn restart_unit(&self, unit: &str) -> Result<(), SystemdError> {
        let mut inner = self.lock();
        inner.calls.push(SystemdCall::Restart(unit.to_owned()));
        inner.job(JobKind::Restart, unit)
    }

    async fn reload_unit(&self, unit: &str) -> Result<(), SystemdError> {
        let mut inner = self.lock();
        inner.calls.push(SystemdCall::Reload(unit.to_owned()));
        inner.job(JobKind::Reload, unit)
    }

    async fn unit_active_state(&self, unit: &str) -> Result<UnitState, SystemdError> {
        let mut inner = self.lock();
        inner.calls.push(SystemdCall::ActiveState(unit.to_owned()));
        inner.check_failure("GetUnit", unit)?;
        let load_state = match inner.file_state(unit).as_deref() {
            Some("masked") => "masked",
            Some(_) => "loaded",
            None => "not-found",
        };
        let active_state = inner
            .active
            .get(unit)
            .cloned()
            .unwrap_or(ActiveState::Inactive);
        let sub_state = match active_state {
            ActiveState::Active => "running",
            ActiveState::Failed => "failed",
            _ => "dead",
        };
        Ok(UnitState {
            load_state: load_state.to_owned(),
            active_state,
            sub_state: sub_state.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests;
