//! The metrics as an engine [`Observer`]: states, events and update ends map onto metrics
//! directly; drains, OS changes and reboots are read off the engine's step transitions, which
//! its state machine makes explicit (see [`crate::engine::record::Step`]):
//!
//! | transition | metric |
//! |---|---|
//! | `Draining` → next step | drain succeeded (its duration) |
//! | `Draining`, then the update ends without another step | drain failed (its duration) |
//! | `Os` → `RollingBack` | an OS change failed (`mcd_pivot_errors_total` + 1) |
//! | `Os` or `Writing` → `RebootRequested`/`PostActions` | the OS step succeeded or was not needed (`mcd_pivot_errors_total` = 0) |
//! | `RebootRequested` → `RollingBack` | the reboot request failed (`mcd_reboots_failed_total` + 1) |

use std::sync::{Arc, Mutex};
use std::time::Instant;

use machine_config::mco::events::reason;

use super::Metrics;
use crate::engine::rollback::BOOT_ROLLED_BACK;
use crate::engine::{Observation, Observer, Outcome, Step};

/// Feeds [`Metrics`] from what the engine reports.
pub struct MetricsObserver {
    metrics: Arc<Metrics>,
    /// The step last entered, and when.
    last_step: Mutex<Option<(String, Instant)>>,
}

impl MetricsObserver {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        MetricsObserver {
            metrics,
            last_step: Mutex::new(None),
        }
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    fn step(&self, next: Option<&str>) {
        let mut last = self.last_step.lock().unwrap_or_else(|p| p.into_inner());
        let prev = last.take();
        if let Some((prev, since)) = &prev {
            let is = |s: Step| prev == s.as_str();
            let next_is = |s: Step| next == Some(s.as_str());
            let after_changes = next_is(Step::RebootRequested) || next_is(Step::PostActions);
            if is(Step::Draining) && next.is_some_and(|n| n != prev) {
                self.metrics.drain_ended(true, since.elapsed());
            } else if is(Step::Os) && next_is(Step::RollingBack) {
                self.metrics.pivot_failed();
            } else if (is(Step::Os) || is(Step::Writing)) && after_changes {
                self.metrics.pivot_ok();
            } else if is(Step::RebootRequested) && next_is(Step::RollingBack) {
                self.metrics.reboot_failed();
            }
        }
        *last = match (next, prev) {
            // The same step again (a retry within it): keep when it started.
            (Some(n), Some((p, since))) if n == p => Some((p, since)),
            (Some(n), _) => Some((n.to_string(), Instant::now())),
            (None, _) => None,
        };
    }

    fn finished(&self, to: &str, outcome: &Outcome, duration: Option<std::time::Duration>) {
        let last = self
            .last_step
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some((step, since)) = last
            && step == Step::Draining.as_str()
        {
            // A failed drain ends the update without another step.
            self.metrics.drain_ended(false, since.elapsed());
        }
        let result = match outcome {
            Outcome::Done => {
                self.metrics.update_completed(to);
                "Done"
            }
            Outcome::Rebooting => "Rebooting",
            Outcome::NeedsReboot => "NeedsReboot",
            Outcome::Waiting { .. } => "Waiting",
            Outcome::Unreconcilable(reason) => {
                self.metrics.update_failed(to, reason);
                "Unreconcilable"
            }
            Outcome::Degraded(reason) => {
                self.metrics.update_failed(to, reason);
                "Degraded"
            }
        };
        self.metrics.update_ended(result, duration);
    }
}

impl Observer for MetricsObserver {
    fn observe(&self, what: &Observation<'_>) {
        match *what {
            Observation::State { state, reason, .. } => self.metrics.set_state(state, reason),
            Observation::Event { reason, .. } if reason == reason::CONFIG_DRIFT_DETECTED => {
                self.metrics.config_drift()
            }
            Observation::Event { reason, .. } if reason == BOOT_ROLLED_BACK => {
                self.metrics.boot_rolled_back()
            }
            Observation::Event { .. } => {}
            Observation::Step(step) => self.step(step),
            Observation::Finished {
                to,
                outcome,
                duration,
                ..
            } => self.finished(to, outcome, duration),
        }
    }
}
