//! The part of `org.freedesktop.login1.Manager` the reboot path needs, behind
//! [`LoginManager`] so the reboot checks can be unit-tested with a fake.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use zbus::Connection;
use zbus::proxy::CacheProperties;

/// An inhibitor lock, as `ListInhibitors` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inhibitor {
    /// Colon-separated: `shutdown`, `sleep`, `idle`, `handle-power-key`, ...
    pub what: String,
    pub who: String,
    pub why: String,
    /// `block` or `delay`.
    pub mode: String,
    pub uid: u32,
    pub pid: u32,
}

impl Inhibitor {
    pub fn inhibits_shutdown(&self) -> bool {
        self.what.split(':').any(|w| w == "shutdown")
    }

    pub fn is_block(&self) -> bool {
        self.mode == "block"
    }
}

impl fmt::Display for Inhibitor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "'{}' (pid {}, uid {}): {}",
            self.who, self.pid, self.uid, self.why
        )
    }
}

#[derive(Debug, thiserror::Error)]
#[error("logind {method} failed: {message}")]
pub struct LoginError {
    pub method: &'static str,
    /// The D-Bus error name when logind replied with one.
    pub dbus_name: Option<String>,
    pub message: String,
}

impl LoginError {
    fn from_zbus(method: &'static str, err: zbus::Error) -> Self {
        match err {
            zbus::Error::MethodError(name, message, _) => Self {
                method,
                message: message.unwrap_or_else(|| name.to_string()),
                dbus_name: Some(name.to_string()),
            },
            other => Self {
                method,
                dbus_name: None,
                message: other.to_string(),
            },
        }
    }
}

/// logind's manager, reduced to what rebooting needs.
#[async_trait]
pub trait LoginManager: Send + Sync {
    async fn list_inhibitors(&self) -> Result<Vec<Inhibitor>, LoginError>;
    /// `InhibitDelayMaxUSec`: how long logind waits for delay locks before shutting down.
    async fn inhibit_delay_max(&self) -> Result<Duration, LoginError>;
    /// `Reboot(false)`: non-interactive; returns once logind has queued the reboot.
    async fn reboot(&self) -> Result<(), LoginError>;
}

#[zbus::proxy(
    interface = "org.freedesktop.login1.Manager",
    default_service = "org.freedesktop.login1",
    default_path = "/org/freedesktop/login1"
)]
trait Login1Manager {
    #[allow(clippy::type_complexity)]
    fn list_inhibitors(&self) -> zbus::Result<Vec<(String, String, String, String, u32, u32)>>;
    fn reboot(&self, interactive: bool) -> zbus::Result<()>;
    #[zbus(property, name = "InhibitDelayMaxUSec")]
    fn inhibit_delay_max_usec(&self) -> zbus::Result<u64>;
}

/// The real [`LoginManager`]: logind on a D-Bus connection (normally the system bus).
#[derive(Clone)]
pub struct DbusLoginManager {
    conn: Connection,
}

impl DbusLoginManager {
    pub fn new(conn: Connection) -> Self {
        Self { conn }
    }

    async fn proxy(&self, method: &'static str) -> Result<Login1ManagerProxy<'_>, LoginError> {
        Login1ManagerProxy::builder(&self.conn)
            .cache_properties(CacheProperties::No)
            .build()
            .await
            .map_err(|e| LoginError::from_zbus(method, e))
    }
}

#[async_trait]
impl LoginManager for DbusLoginManager {
    async fn list_inhibitors(&self) -> Result<Vec<Inhibitor>, LoginError> {
        let raw = self
            .proxy("ListInhibitors")
            .await?
            .list_inhibitors()
            .await
            .map_err(|e| LoginError::from_zbus("ListInhibitors", e))?;
        Ok(raw
            .into_iter()
            .map(|(what, who, why, mode, uid, pid)| Inhibitor {
                what,
                who,
                why,
                mode,
                uid,
                pid,
            })
            .collect())
    }

    async fn inhibit_delay_max(&self) -> Result<Duration, LoginError> {
        let usec = self
            .proxy("Get(InhibitDelayMaxUSec)")
            .await?
            .inhibit_delay_max_usec()
            .await
            .map_err(|e| LoginError::from_zbus("Get(InhibitDelayMaxUSec)", e))?;
        Ok(Duration::from_micros(usec))
    }

    async fn reboot(&self) -> Result<(), LoginError> {
        self.proxy("Reboot")
            .await?
            .reboot(false)
            .await
            .map_err(|e| LoginError::from_zbus("Reboot", e))
    }
}
