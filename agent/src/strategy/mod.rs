//! Update strategies: when the disruptive part of an update (a drain, a reboot) may run.
//! Zincati's three, with its names:
//!
//! - `immediate` (the default): at once.
//! - `periodic`: inside weekly maintenance windows in a time zone ([`window`]); updates that
//!   neither drain nor reboot wait too, unless `--rebootless-outside-windows` lets them run
//!   at any time.
//! - `fleet_lock`: a reboot slot taken from a FleetLock server ([`fleet_lock`]) before a drain
//!   or reboot, given back after the node is Done in the new config (after the verified boot).
//!   Updates that neither drain nor reboot need no slot.
//!
//! The engine asks [`Strategy::before_update`] after it has planned an update and before it
//! records or changes anything; a wait leaves the node exactly as it was.

pub mod fleet_lock;
pub mod window;

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use fleet_lock::{FleetLockClient, LockAnswer};
use window::{Schedule, WindowState};

/// How often a refused reboot slot is asked for again (Zincati's FleetLock client polls too).
pub const DEFAULT_LOCK_RETRY: Duration = Duration::from_secs(60);
/// The longest a closed window is waited for before the clock is looked at again (the clock
/// may be set, or the machine suspended, meanwhile).
const MAX_WINDOW_WAIT: Duration = Duration::from_secs(15 * 60);

/// What time it is.
pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;
}

/// The system's clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// What an update about to start does to the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Disruption {
    pub drain: bool,
    pub reboot: bool,
}

impl Disruption {
    pub fn disruptive(&self) -> bool {
        self.drain || self.reboot
    }
}

/// The strategy's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Go on; `locked`: a FleetLock slot is now held for this update.
    Go { locked: bool },
    /// Not now: why, and when to ask again.
    Wait {
        reason: String,
        recheck_in: Duration,
    },
}

/// Which strategy, with its settings.
pub enum Kind {
    Immediate,
    Periodic {
        schedule: Schedule,
        /// Updates that neither drain nor reboot may run outside the windows.
        rebootless_anytime: bool,
    },
    FleetLock {
        client: FleetLockClient,
        retry: Duration,
    },
}

/// The strategy `start` runs with.
pub struct Strategy {
    pub kind: Kind,
    clock: Arc<dyn Clock>,
}

/// The strategy in `/run/mco-agent/status.json` (what `mco-agent status` shows).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StrategyStatus {
    /// `immediate`, `periodic`, `fleet_lock`.
    pub name: String,
    /// The windows and zone, or the FleetLock server, group and id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// `open until …` or `next window …` (periodic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
    /// A FleetLock reboot slot is held by this node.
    #[serde(default)]
    pub lock_held: bool,
    /// Why the update to the desired config waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
}

impl Strategy {
    pub fn new(kind: Kind, clock: Arc<dyn Clock>) -> Self {
        Strategy { kind, clock }
    }

    /// The default: no waiting.
    pub fn immediate() -> Self {
        Strategy::new(Kind::Immediate, Arc::new(SystemClock))
    }

    pub fn name(&self) -> &'static str {
        match self.kind {
            Kind::Immediate => "immediate",
            Kind::Periodic { .. } => "periodic",
            Kind::FleetLock { .. } => "fleet_lock",
        }
    }

    /// Whether this strategy takes FleetLock slots (and so must give them back).
    pub fn uses_lock(&self) -> bool {
        matches!(self.kind, Kind::FleetLock { .. })
    }

    /// May an update to `to` that does `d` start now?
    pub async fn before_update(&self, to: &str, d: Disruption) -> Decision {
        match &self.kind {
            Kind::Immediate => Decision::Go { locked: false },
            Kind::Periodic {
                rebootless_anytime: true,
                ..
            } if !d.disruptive() => Decision::Go { locked: false },
            Kind::Periodic { schedule, .. } => {
                let now = self.clock.now();
                match schedule.state(now) {
                    WindowState::Open { .. } => Decision::Go { locked: false },
                    WindowState::Closed { opens } => {
                        let (next, wait) = match &opens {
                            Some(at) => (
                                format!("the next opens {}", at.strftime("%a %Y-%m-%d %H:%M %Z")),
                                Duration::try_from(at.timestamp().duration_since(now))
                                    .unwrap_or(MAX_WINDOW_WAIT),
                            ),
                            None => ("no window ever opens".to_string(), MAX_WINDOW_WAIT),
                        };
                        Decision::Wait {
                            reason: format!(
                                "the update to {to} waits for a maintenance window ({}): {next}",
                                schedule.describe()
                            ),
                            recheck_in: wait.clamp(Duration::from_secs(1), MAX_WINDOW_WAIT),
                        }
                    }
                }
            }
            Kind::FleetLock { .. } if !d.disruptive() => Decision::Go { locked: false },
            Kind::FleetLock { client, retry } => match client.pre_reboot().await {
                Ok(LockAnswer::Ok) => {
                    tracing::info!(
                        server = client.base(),
                        group = client.group(),
                        id = client.id(),
                        "FleetLock reboot slot taken"
                    );
                    Decision::Go { locked: true }
                }
                Ok(LockAnswer::Refused { kind, message }) => Decision::Wait {
                    reason: format!(
                        "the update to {to} waits for a FleetLock reboot slot in group {}: {message}{}",
                        client.group(),
                        kind.map(|k| format!(" ({k})")).unwrap_or_default()
                    ),
                    recheck_in: *retry,
                },
                Err(e) => Decision::Wait {
                    reason: format!("the update to {to} waits for a FleetLock reboot slot: {e:#}"),
                    recheck_in: *retry,
                },
            },
        }
    }

    /// Gives back the FleetLock slot this node may hold (`steady-state`; a no-op for the
    /// other strategies). `Err` says why it could not; the caller tries again later.
    pub async fn release(&self) -> anyhow::Result<()> {
        let Kind::FleetLock { client, .. } = &self.kind else {
            return Ok(());
        };
        match client.steady_state().await? {
            LockAnswer::Ok => {
                tracing::info!(
                    server = client.base(),
                    group = client.group(),
                    id = client.id(),
                    "FleetLock reboot slot released (steady state)"
                );
                Ok(())
            }
            LockAnswer::Refused { kind, message } => Err(anyhow::anyhow!(
                "releasing the FleetLock reboot slot: {message}{}",
                kind.map(|k| format!(" ({k})")).unwrap_or_default()
            )),
        }
    }

    /// What `status` shows (without the lock and wait, which the engine tracks).
    pub fn status(&self) -> StrategyStatus {
        let (detail, window) = match &self.kind {
            Kind::Immediate => (String::new(), None),
            Kind::Periodic {
                schedule,
                rebootless_anytime,
            } => {
                let fmt = |z: &jiff::Zoned| z.strftime("%a %Y-%m-%d %H:%M %Z").to_string();
                let window = match schedule.state(self.clock.now()) {
                    WindowState::Open { until: Some(u) } => format!("open until {}", fmt(&u)),
                    WindowState::Open { until: None } => "always open".to_string(),
                    WindowState::Closed { opens: Some(o) } => format!("next window {}", fmt(&o)),
                    WindowState::Closed { opens: None } => "no window ever opens".to_string(),
                };
                let extra = if *rebootless_anytime {
                    "; rebootless updates at any time"
                } else {
                    ""
                };
                (format!("{}{extra}", schedule.describe()), Some(window))
            }
            Kind::FleetLock { client, .. } => (
                format!(
                    "{} group {} id {}",
                    client.base(),
                    client.group(),
                    client.id()
                ),
                None,
            ),
        };
        StrategyStatus {
            name: self.name().to_string(),
            detail,
            window,
            ..StrategyStatus::default()
        }
    }
}

#[cfg(test)]
mod tests;
