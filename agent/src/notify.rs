//! The systemd service protocol (sd_notify): `READY=1`, `STATUS=<step>` and `WATCHDOG=1`.
//!
//! The watchdog is pinged by the work it watches, never by an independent timer (a timer keeps
//! pinging while the update loop hangs, and the hung agent is never restarted): the daemon's
//! loop pings each time it goes round ([`watchdog_ping`]), and an update pings at each step it
//! reaches ([`status`]). A single step may take long (a drain, an rpm-ostree transaction
//! pulling an image), so while the loop runs one ([`long_work`]) systemd is told to wait longer
//! between pings (`WATCHDOG_USEC=`), and the unit's period comes back when the work ends.
//!
//! Everything here is a no-op when `NOTIFY_SOCKET` is unset (not started by systemd, or a unit
//! that is not `Type=notify`). Failures to notify are logged, not returned: the agent cannot
//! do anything better about them, and systemd reacts to missing notifications itself.

use std::time::Duration;

use sd_notify::NotifyState;
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

/// Sets the status line `systemctl status` shows, e.g. the current update step; reaching a
/// step is progress, so it pings the watchdog too.
pub fn status(step: &str) {
    // One line: a newline would start another assignment (READY=1, ...) in the datagram.
    let step = step.replace(['\n', '\r'], " ");
    send(&[NotifyState::Status(&step)], "STATUS");
    watchdog_ping();
}

/// The watchdog period systemd asked this process for (`WATCHDOG_USEC`), if any.
pub fn watchdog_period() -> Option<Duration> {
    std::env::var_os("NOTIFY_SOCKET")?;
    sd_notify::watchdog_enabled()
}

/// `WATCHDOG=1`, when systemd watches this process.
pub fn watchdog_ping() {
    if watchdog_period().is_some() {
        send(&[NotifyState::Watchdog], "WATCHDOG=1");
    }
}

/// Long work under way: systemd waits up to its budget between pings; dropping it restores the
/// unit's period (and pings).
#[must_use]
pub struct LongWork {
    period: Duration,
}

/// The most `WATCHDOG_USEC=` can say (a `u32` of microseconds, about 71 minutes).
const MAX_WATCHDOG: Duration = Duration::from_micros(u32::MAX as u64);

/// Starts long work that reaches its next step within `budget` (at most about 71 minutes); `None`
/// when systemd does not watch this process.
pub fn long_work(budget: Duration) -> Option<LongWork> {
    let period = watchdog_period()?;
    set_watchdog(budget.min(MAX_WATCHDOG).max(period));
    Some(LongWork { period })
}

impl Drop for LongWork {
    fn drop(&mut self) {
        set_watchdog(self.period);
    }
}

fn set_watchdog(period: Duration) {
    let usec = u32::try_from(period.as_micros()).unwrap_or(u32::MAX);
    debug!(?period, "watchdog period");
    send(
        &[NotifyState::WatchdogUsec(usec), NotifyState::Watchdog],
        "WATCHDOG_USEC",
    );
}
