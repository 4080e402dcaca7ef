//! The agent's hands on a live host, each behind a small trait with a real D-Bus
//! implementation and an in-memory fake: [`systemd`] (units and jobs) and [`reboot`]
//! (logind, with the staged-deployment safety check).

pub mod reboot;
pub mod selinux;
pub mod systemd;

/// Connects to the system bus. `DBUS_SYSTEM_BUS_ADDRESS` is honoured when set (tests point
/// it at a private bus or a container's bus), as every D-Bus client of the agent must.
pub async fn system_bus() -> zbus::Result<zbus::Connection> {
    zbus::Connection::system().await
}
