//! The system bus connection every D-Bus seam of the agent uses ([`crate::os`] for
//! rpm-ostree, [`crate::host`] for systemd and logind), and how long a call on it may wait.

use std::time::Duration;

/// How long any D-Bus method call of the agent waits for its answer. rpm-ostreed, systemd and
/// logind answer in milliseconds (long work runs as a job or a transaction, followed by
/// signals); a service that does not answer at all is hung, and the agent reports that with the
/// method's name instead of waiting forever. GDBus and sd-bus clients give up after 25 s; a
/// loaded node gets more.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// Connects to the system bus. `DBUS_SYSTEM_BUS_ADDRESS` is honoured when set (tests point
/// it at a private bus or a container's bus), as every D-Bus client of the agent must. Method
/// calls on it give up after [`CALL_TIMEOUT`].
pub async fn connect() -> zbus::Result<zbus::Connection> {
    zbus::connection::Builder::system()?
        .method_timeout(CALL_TIMEOUT)
        .build()
        .await
}
