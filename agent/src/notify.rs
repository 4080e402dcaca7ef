//! The systemd service protocol (sd_notify): `READY=1`, `STATUS=<step>` and `WATCHDOG=1`.
//!
//! Everything here is a no-op when `NOTIFY_SOCKET` is unset (not started by systemd, or a unit
//! that is not `Type=notify`). Failures to notify are logged, not returned: the agent cannot
//! do anything better about them, and systemd reacts to missing notifications itself.

use std::time::Duration;

use sd_notify::NotifyState;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

fn send(state: &[NotifyState<'_>], what: &str) {
    if let Err(e) = sd_notify::notify(state) {
        warn!(error = %e, "sd_notify {what} failed");
    }
}

/// Tells systemd that start-up is complete.
pub fn ready() {
    send(&[NotifyState::Ready], "READY=1");
}

/// Sets the status line `systemctl status` shows, e.g. the current update step.
pub fn status(step: &str) {
    // One line: a newline would start another assignment (READY=1, ...) in the datagram.
    let step = step.replace(['\n', '\r'], " ");
    send(&[NotifyState::Status(&step)], "STATUS");
}

/// When systemd asked for watchdog pings (`WATCHDOG_USEC` for this process), starts a task
/// sending `WATCHDOG=1` every half period, and returns it; otherwise `None`.
/// Must be called inside a tokio runtime.
pub fn spawn_watchdog() -> Option<JoinHandle<()>> {
    std::env::var_os("NOTIFY_SOCKET")?;
    let period = sd_notify::watchdog_enabled()?;
    let interval = (period / 2).max(Duration::from_millis(1));
    debug!(
        ?period,
        "systemd watchdog enabled: pinging every half period"
    );
    Some(tokio::spawn(async move {
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            send(&[NotifyState::Watchdog], "WATCHDOG=1");
        }
    }))
}
