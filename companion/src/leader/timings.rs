//! The election's timings and the fencing margins they leave.
//!
//! All durations are measured on each replica's own monotonic clock; no replica compares its
//! clock with another's or with the times written in the Lease. The arithmetic
//! ([`Timings::validate`]), with `t` the moment the leader *sent* its last renewal that
//! succeeded:
//!
//! - the leader starts writes only before `t + renew_deadline` ([`Timings::renew_deadline`]);
//! - a write still in flight then is abandoned at `t + renew_deadline + write_cutoff`
//!   ([`Timings::write_cutoff`]: half of what `lease_duration - renew_deadline` leaves);
//! - another replica may take the Lease only `lease_duration` after it *observed* that renewal,
//!   which it can only do after the API server stored it, so after `t`;
//! - what is left, [`Timings::clock_margin`], absorbs the two clocks running at different rates
//!   and a process that is slow to notice its deadline: it must hold at least
//!   [`MAX_CLOCK_RATE_ERROR`] of the three intervals plus [`SCHEDULING_SLACK`].

use std::time::Duration;

/// How far two replicas' monotonic clocks may disagree in rate: NTP slews a clock by at most
/// 500 ppm, so two clocks by at most 1000 ppm together.
pub const MAX_CLOCK_RATE_ERROR: f64 = 0.001;
/// Time for a replica to notice its deadline passed (a timer firing late on a loaded node).
pub const SCHEDULING_SLACK: Duration = Duration::from_millis(250);

/// Lease duration, renew deadline and retry period, as client-go's leader election has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    /// How long others wait, after they last saw the Lease renewed, before they take it.
    /// Whole seconds: the Lease's `leaseDurationSeconds` cannot say less.
    pub lease_duration: Duration,
    /// How long after its last successful renewal the leader keeps acting.
    pub renew_deadline: Duration,
    /// Time between tries to acquire or renew.
    pub retry_period: Duration,
}

impl Default for Timings {
    /// The values OpenShift's conventions give controllers on a highly available control
    /// plane (the MCO's controller uses them): the leader tries four more times (every 26 s)
    /// before it steps down, 107 s after its last successful renewal; a crashed leader is
    /// replaced 137 to 168 s after its last renewal; one that stops gracefully (it releases the
    /// Lease) at the others' next try, within 31 s.
    fn default() -> Self {
        Timings {
            lease_duration: Duration::from_secs(137),
            renew_deadline: Duration::from_secs(107),
            retry_period: Duration::from_secs(26),
        }
    }
}

impl Timings {
    /// How long a write started before the renew deadline may stay in flight.
    pub fn write_cutoff(&self) -> Duration {
        self.lease_duration.saturating_sub(self.renew_deadline) / 2
    }

    /// What remains between the moment the leader's last write is abandoned and the earliest
    /// moment another replica may take the Lease.
    pub fn clock_margin(&self) -> Duration {
        self.lease_duration
            .saturating_sub(self.renew_deadline)
            .saturating_sub(self.write_cutoff())
    }

    /// The margin the clocks and scheduling need for these intervals.
    pub fn needed_margin(&self) -> Duration {
        let measured = self.lease_duration + self.renew_deadline + self.write_cutoff();
        measured.mul_f64(MAX_CLOCK_RATE_ERROR) + SCHEDULING_SLACK
    }

    /// The Lease's `leaseDurationSeconds`.
    pub fn lease_duration_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }

    /// Refuses timings that would let two replicas act at once, or a leader that cannot retry
    /// a failed renewal before it must step down.
    pub fn validate(&self) -> Result<(), String> {
        let Timings {
            lease_duration,
            renew_deadline,
            retry_period,
        } = *self;
        if retry_period.is_zero() {
            return Err("the retry period must be longer than 0".into());
        }
        if lease_duration.subsec_nanos() != 0 || lease_duration.is_zero() {
            return Err(format!(
                "the lease duration must be a whole number of seconds (the Lease's \
                 leaseDurationSeconds), not {lease_duration:?}"
            ));
        }
        // client-go's rule: at least one renewal retried, with its jitter, before the deadline
        if renew_deadline <= retry_period.mul_f64(1.2) {
            return Err(format!(
                "the renew deadline ({renew_deadline:?}) must be longer than 1.2 retry periods \
                 ({retry_period:?}): a leader must be able to retry a failed renewal"
            ));
        }
        if renew_deadline >= lease_duration {
            return Err(format!(
                "the renew deadline ({renew_deadline:?}) must be shorter than the lease \
                 duration ({lease_duration:?}): the leader must stop before others may take over"
            ));
        }
        if self.clock_margin() < self.needed_margin() {
            return Err(format!(
                "lease duration {lease_duration:?} minus renew deadline {renew_deadline:?} \
                 leaves {:?} for writes in flight and {:?} for the clocks; they need {:?}: \
                 lengthen the lease duration",
                self.write_cutoff(),
                self.clock_margin(),
                self.needed_margin()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(lease_ms: u64, renew_ms: u64, retry_ms: u64) -> Timings {
        Timings {
            lease_duration: Duration::from_millis(lease_ms),
            renew_deadline: Duration::from_millis(renew_ms),
            retry_period: Duration::from_millis(retry_ms),
        }
    }

    #[test]
    fn the_default_margins_are_openshifts() {
        let d = Timings::default();
        assert_eq!(d, t(137_000, 107_000, 26_000));
        assert_eq!(d.validate(), Ok(()));
        assert_eq!(d.write_cutoff(), Duration::from_secs(15));
        assert_eq!(d.clock_margin(), Duration::from_secs(15));
        // 259 s measured at 1000 ppm, plus the slack
        assert_eq!(d.needed_margin(), Duration::from_millis(259 + 250));
        assert_eq!(d.lease_duration_seconds(), 137);
    }

    #[test]
    fn the_leaders_last_write_ends_before_anyone_may_take_the_lease() {
        // every valid setting: the leader's renew deadline, plus its last write's cutoff, plus
        // the clocks' disagreement over both intervals, ends before the lease duration that
        // others measure from a later moment (their observation of the renewal)
        for timings in [
            Timings::default(),
            t(6_000, 4_000, 1_000),
            t(15_000, 10_000, 2_000),
            t(270_000, 240_000, 60_000),
        ] {
            assert_eq!(timings.validate(), Ok(()), "{timings:?}");
            let leader_done = (timings.renew_deadline + timings.write_cutoff())
                .mul_f64(1.0 + MAX_CLOCK_RATE_ERROR)
                + SCHEDULING_SLACK;
            let others_may_take = timings.lease_duration.mul_f64(1.0 - MAX_CLOCK_RATE_ERROR);
            assert!(
                leader_done < others_may_take,
                "{timings:?}: the leader may write until {leader_done:?}, others take over at {others_may_take:?}"
            );
        }
    }

    #[test]
    fn unsafe_or_unworkable_timings_are_refused_saying_why() {
        let cases = [
            (t(6_000, 4_000, 0), "retry period must be longer than 0"),
            (t(6_500, 4_000, 1_000), "whole number of seconds"),
            (t(6_000, 1_100, 1_000), "longer than 1.2 retry periods"),
            (
                t(6_000, 6_000, 1_000),
                "must be shorter than the lease duration",
            ),
            (
                t(6_000, 7_000, 1_000),
                "must be shorter than the lease duration",
            ),
            // 400 ms between deadline and lease: 200 ms for writes, 200 ms for the clocks
            (t(6_000, 5_600, 1_000), "lengthen the lease duration"),
            // the clocks' share grows with the intervals: 30 s is not enough at 9 hours
            (
                t(32_400_000, 32_370_000, 1_000),
                "lengthen the lease duration",
            ),
        ];
        for (timings, why) in cases {
            let err = timings.validate().unwrap_err();
            assert!(err.contains(why), "{timings:?}: {err}");
        }
    }
}
