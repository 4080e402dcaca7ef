//! A fake systemd manager for tests: `org.freedesktop.systemd1` on a (private) bus with the
//! units it is given, each in a fixed state. Enough for the reboot path, which reads
//! `ostree-finalize-staged.service`'s state (`GetUnit`/`LoadUnit`, then the unit's
//! `LoadState`, `ActiveState` and `SubState`). Unknown units are systemd's `NoSuchUnit`.

use anyhow::{Context, Result};
use zbus::zvariant::OwnedObjectPath;

/// systemd's bus name and manager object.
pub const BUS_NAME: &str = "org.freedesktop.systemd1";
pub const MANAGER_PATH: &str = "/org/freedesktop/systemd1";

/// Errors as systemd names them.
#[derive(Debug, zbus::DBusError)]
#[zbus(prefix = "org.freedesktop.systemd1")]
enum SystemdError {
    #[zbus(error)]
    ZBus(zbus::Error),
    NoSuchUnit(String),
}

struct Manager {
    units: Vec<String>,
}

/// systemd's escaping of unit names into object paths (`_2e` for `.`, ...).
fn unit_path(name: &str) -> String {
    let escaped: String = name
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("_{b:02x}")
            }
        })
        .collect();
    format!("{MANAGER_PATH}/unit/{escaped}")
}

impl Manager {
    fn path(&self, name: &str) -> Result<OwnedObjectPath, SystemdError> {
        if !self.units.iter().any(|u| u == name) {
            return Err(SystemdError::NoSuchUnit(format!("Unit {name} not loaded.")));
        }
        OwnedObjectPath::try_from(unit_path(name)).map_err(|e| SystemdError::ZBus(e.into()))
    }
}

#[zbus::interface(name = "org.freedesktop.systemd1.Manager")]
impl Manager {
    fn get_unit(&self, name: &str) -> Result<OwnedObjectPath, SystemdError> {
        self.path(name)
    }

    fn load_unit(&self, name: &str) -> Result<OwnedObjectPath, SystemdError> {
        self.path(name)
    }
}

struct Unit {
    active_state: String,
    sub_state: String,
}

#[zbus::interface(name = "org.freedesktop.systemd1.Unit")]
impl Unit {
    #[zbus(property)]
    fn load_state(&self) -> String {
        "loaded".into()
    }

    #[zbus(property)]
    fn active_state(&self) -> String {
        self.active_state.clone()
    }

    #[zbus(property)]
    fn sub_state(&self) -> String {
        self.sub_state.clone()
    }
}

/// A running fake systemd; it stays on the bus as long as this lives.
pub struct FakeSystemdBus {
    _conn: zbus::Connection,
}

impl FakeSystemdBus {
    /// Serves systemd on `conn` with `units`, each `(name, active state, sub state)`.
    pub async fn start(conn: zbus::Connection, units: &[(&str, &str, &str)]) -> Result<Self> {
        let server = conn.object_server();
        for (name, active, sub) in units {
            server
                .at(
                    unit_path(name),
                    Unit {
                        active_state: active.to_string(),
                        sub_state: sub.to_string(),
                    },
                )
                .await
                .with_context(|| format!("serving the fake unit {name}"))?;
        }
        server
            .at(
                MANAGER_PATH,
                Manager {
                    units: units.iter().map(|(n, _, _)| n.to_string()).collect(),
                },
            )
            .await
            .context("serving the fake systemd manager")?;
        crate::dbus::object_server_ready(&conn).await?;
        conn.request_name(BUS_NAME)
            .await
            .context("owning org.freedesktop.systemd1")?;
        Ok(FakeSystemdBus { _conn: conn })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_names_are_escaped_like_systemd() {
        assert_eq!(
            unit_path("ostree-finalize-staged.service"),
            "/org/freedesktop/systemd1/unit/ostree_2dfinalize_2dstaged_2eservice"
        );
    }
}
