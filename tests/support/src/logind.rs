//! A fake logind for tests: `org.freedesktop.login1.Manager` on a (private) bus with what the
//! agent's reboot path calls: `ListInhibitors` (no locks), `Reboot` (recorded, nothing reboots)
//! and the `InhibitDelayMaxUSec` property.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{Context, Result};

/// The fake's bus name and object path (logind's).
pub const BUS_NAME: &str = "org.freedesktop.login1";
pub const OBJECT_PATH: &str = "/org/freedesktop/login1";

/// A running fake logind; it stays on the bus as long as this lives.
pub struct FakeLogind {
    _conn: zbus::Connection,
    reboots: Arc<AtomicU32>,
}

struct Manager {
    reboots: Arc<AtomicU32>,
}

#[zbus::interface(name = "org.freedesktop.login1.Manager")]
impl Manager {
    #[allow(clippy::type_complexity)]
    fn list_inhibitors(&self) -> Vec<(String, String, String, String, u32, u32)> {
        Vec::new()
    }

    fn reboot(&self, interactive: bool) {
        tracing::info!(interactive, "fake logind: Reboot requested");
        self.reboots.fetch_add(1, Ordering::SeqCst);
    }

    #[zbus(property, name = "InhibitDelayMaxUSec")]
    fn inhibit_delay_max_usec(&self) -> u64 {
        5_000_000
    }
}

impl FakeLogind {
    /// Serves logind on `conn` (a connection to the bus the agent uses).
    pub async fn start(conn: zbus::Connection) -> Result<Self> {
        let reboots = Arc::new(AtomicU32::new(0));
        conn.object_server()
            .at(
                OBJECT_PATH,
                Manager {
                    reboots: reboots.clone(),
                },
            )
            .await
            .context("serving the fake logind object")?;
        crate::dbus::object_server_ready(&conn).await?;
        conn.request_name(BUS_NAME)
            .await
            .context("owning org.freedesktop.login1")?;
        Ok(FakeLogind {
            _conn: conn,
            reboots,
        })
    }

    /// How many reboots were requested.
    pub fn reboots(&self) -> u32 {
        self.reboots.load(Ordering::SeqCst)
    }
}
