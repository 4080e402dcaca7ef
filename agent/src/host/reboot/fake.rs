//! Fakes: [`FakeRebooter`] for callers of [`Rebooter`], [`FakeLoginManager`] for the
//! reboot checks themselves.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;

use super::{Inhibitor, LoginError, LoginManager, RebootError, Rebooter};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Records reboot reasons instead of rebooting; can be told to refuse.
#[derive(Default)]
pub struct FakeRebooter {
    reasons: Mutex<Vec<String>>,
    refuse_with: Mutex<Option<String>>,
}

impl FakeRebooter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Later reboots fail with a logind error carrying `message`.
    pub fn refuse(&self, message: &str) {
        *lock(&self.refuse_with) = Some(message.to_owned());
    }

    /// Later reboots happen again (undoes [`FakeRebooter::refuse`]).
    pub fn allow(&self) {
        *lock(&self.refuse_with) = None;
    }

    /// The reasons of the reboots that "happened", in order.
    pub fn reasons(&self) -> Vec<String> {
        lock(&self.reasons).clone()
    }
}

#[async_trait]
impl Rebooter for FakeRebooter {
    async fn reboot(&self, reason: &str) -> Result<(), RebootError> {
        if let Some(message) = lock(&self.refuse_with).clone() {
            return Err(RebootError::Reboot(LoginError {
                method: "Reboot",
                dbus_name: Some("org.freedesktop.DBus.Error.Failed".to_owned()),
                message,
            }));
        }
        lock(&self.reasons).push(reason.to_owned());
        Ok(())
    }
}

/// logind in memory: a list of inhibitor locks and a count of reboot requests.
pub struct FakeLoginManager {
    inhibitors: Mutex<Vec<Inhibitor>>,
    delay_max: Duration,
    reboots: Mutex<u32>,
    fail: Mutex<Option<(&'static str, String)>>,
}

impl Default for FakeLoginManager {
    fn default() -> Self {
        Self {
            inhibitors: Mutex::default(),
            // logind's default InhibitDelayMaxSec
            delay_max: Duration::from_secs(5),
            reboots: Mutex::default(),
            fail: Mutex::default(),
        }
    }
}

impl FakeLoginManager {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_inhibitor(self, inhibitor: Inhibitor) -> Self {
        lock(&self.inhibitors).push(inhibitor);
        self
    }

    /// Calls of `method` (`ListInhibitors` or `Reboot`) fail with `message`.
    pub fn fail(&self, method: &'static str, message: &str) {
        *lock(&self.fail) = Some((method, message.to_owned()));
    }

    /// How many times `Reboot` was called successfully.
    pub fn reboots(&self) -> u32 {
        *lock(&self.reboots)
    }

    fn check(&self, method: &'static str) -> Result<(), LoginError> {
        match &*lock(&self.fail) {
            Some((m, message)) if *m == method => Err(LoginError {
                method,
                dbus_name: Some("org.freedesktop.DBus.Error.Failed".to_owned()),
                message: message.clone(),
            }),
            _ => Ok(()),
        }
    }
}

#[async_trait]
impl LoginManager for FakeLoginManager {
    async fn list_inhibitors(&self) -> Result<Vec<Inhibitor>, LoginError> {
        self.check("ListInhibitors")?;
        Ok(lock(&self.inhibitors).clone())
    }

    async fn inhibit_delay_max(&self) -> Result<Duration, LoginError> {
        self.check("Get(InhibitDelayMaxUSec)")?;
        Ok(self.delay_max)
    }

    async fn reboot(&self) -> Result<(), LoginError> {
        self.check("Reboot")?;
        *lock(&self.reboots) += 1;
        Ok(())
    }
}
