//! The drain controller's decisions, free of the API: what a node's `desiredDrain` asks for,
//! whether it must be cordoned (again), and when a failed drain is tried again with which
//! messages (the MCO's drain controller: 1 minute, then every 5 minutes with
//! `DrainThresholdExceeded` once failing for 10 minutes, `DrainFailed` past an hour, retried
//! forever). Every duration is a field of [`DrainTimings`] so tests can shrink them.

use std::time::Duration;

use machine_config::mco::annotations::{DRAIN_VERB, UNCORDON_VERB};

/// The drain controller's clock settings.
#[derive(Debug, Clone, PartialEq)]
pub struct DrainTimings {
    /// A failed drain is tried again after this long (the MCO's 1 minute)...
    pub requeue: Duration,
    /// ...until it has been failing for this long (10 minutes)...
    pub failing_threshold: Duration,
    /// ...then every this long (5 minutes), with a `DrainThresholdExceeded` event.
    pub failing_requeue: Duration,
    /// Past this long a drain gets a `DrainFailed` event on every try (1 hour).
    pub timeout: Duration,
    /// One drain attempt (the kubectl drain helper's timeout, 90 s).
    pub attempt: Duration,
    /// Delay before repeating an eviction a PodDisruptionBudget refused (5 s).
    pub eviction_retry: Duration,
    /// How often to check that evicted pods are gone.
    pub poll: Duration,
}

impl Default for DrainTimings {
    fn default() -> Self {
        Self {
            requeue: Duration::from_secs(60),
            failing_threshold: Duration::from_secs(600),
            failing_requeue: Duration::from_secs(300),
            timeout: Duration::from_secs(3600),
            attempt: Duration::from_secs(90),
            eviction_retry: Duration::from_secs(5),
            poll: Duration::from_secs(1),
        }
    }
}

/// What a node's `desiredDrain` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `lastAppliedDrain` already says it was done.
    Done,
    /// `drain-<config>`: cordon and drain.
    Drain,
    /// `uncordon-<config>`.
    Uncordon,
}

/// Reads the request (the verb is the text before the first `-`, as the MCO reads it); an
/// unknown verb is the MCO's error.
pub fn request(
    node: &str,
    desired: Option<&str>,
    last_applied: Option<&str>,
) -> Result<Request, String> {
    let desired = desired.unwrap_or_default();
    if desired == last_applied.unwrap_or_default() {
        return Ok(Request::Done);
    }
    match desired.split('-').next().unwrap_or_default() {
        DRAIN_VERB => Ok(Request::Drain),
        UNCORDON_VERB => Ok(Request::Uncordon),
        verb => Err(format!(
            "node {node}: non-recognized drain verb detected {verb}"
        )),
    }
}

/// Whether to cordon before draining: a drain this controller has not started yet, or a node
/// someone uncordoned while its drain was under way.
pub fn must_cordon(ongoing_for: Option<Duration>, unschedulable: bool) -> bool {
    ongoing_for.is_none() || !unschedulable
}

/// The error log and `DrainFailed` event message of a drain going on for longer than the
/// timeout, checked before each try.
pub fn overdue(node: &str, ongoing_for: Duration, t: &DrainTimings) -> Option<String> {
    (ongoing_for > t.timeout).then(|| {
        format!(
            "node {node}: drain exceeded timeout: {}. Will continue to retry.",
            go_duration(t.timeout)
        )
    })
}

/// How every failed try's message begins (the agent reads it in the node's `reason` to leave the
/// reason to this controller).
pub const FAILED_PREFIX: &str = mco_kube::error::DRAIN_CONTROLLER_FAILED;

/// What to do after a failed try.
#[derive(Debug, Clone, PartialEq)]
pub struct Retry {
    pub after: Duration,
    /// The controller's log line for the node.
    pub message: String,
    /// `DrainThresholdExceeded` carries the message as an event too.
    pub threshold_exceeded: bool,
}

/// The retry of a drain that failed with `error` after going on for `ongoing_for` (measured
/// when the try began, as the MCO does).
pub fn after_failure(ongoing_for: Duration, error: &str, t: &DrainTimings) -> Retry {
    if ongoing_for > t.failing_threshold {
        Retry {
            after: t.failing_requeue,
            message: format!(
                "Drain failed. Drain has been failing for more than {} minutes. Waiting {} minutes then retrying. Error message from drain: {error}",
                minutes(t.failing_threshold),
                minutes(t.failing_requeue)
            ),
            threshold_exceeded: true,
        }
    } else {
        Retry {
            after: t.requeue,
            message: format!(
                "Drain failed. Waiting {} minute then retrying. Error message from drain: {error}",
                minutes(t.requeue)
            ),
            threshold_exceeded: false,
        }
    }
}

/// Minutes as Go's `%v` prints a float (`10`, `0.5`).
fn minutes(d: Duration) -> String {
    // From whole milliseconds, so that e.g. 600 ms prints `0.01` (not a rounding artefact).
    let m = d.as_millis() as f64 / 60_000.0;
    format!("{m}")
}

/// A duration as Go's `time.Duration` prints it (`1h0m0s`, `5m0s`, `30s`, `250ms`).
pub fn go_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs == 0 {
        return format!("{}ms", d.subsec_millis());
    }
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    let frac = match d.subsec_millis() {
        0 => String::new(),
        ms => format!(".{:03}", ms).trim_end_matches('0').to_string(),
    };
    match (h, m) {
        (0, 0) => format!("{s}{frac}s"),
        (0, _) => format!("{m}m{s}{frac}s"),
        _ => format!("{h}h{m}m{s}{frac}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn requests_as_the_mco_reads_them() {
        type Case<'a> = (Option<&'a str>, Option<&'a str>, Result<Request, String>);
        let cases: &[Case] = &[
            (None, None, Ok(Request::Done)),
            (
                Some("drain-rendered-b"),
                Some("drain-rendered-b"),
                Ok(Request::Done),
            ),
            (
                Some("drain-rendered-b"),
                Some("uncordon-rendered-a"),
                Ok(Request::Drain),
            ),
            (Some("drain-rendered-b"), None, Ok(Request::Drain)),
            (
                Some("uncordon-rendered-b"),
                Some("drain-rendered-b"),
                Ok(Request::Uncordon),
            ),
            (
                Some("reboot-rendered-b"),
                None,
                Err("node w0: non-recognized drain verb detected reboot".into()),
            ),
        ];
        for (desired, last, want) in cases {
            assert_eq!(
                &request("w0", *desired, *last),
                want,
                "{desired:?} {last:?}"
            );
        }
    }

    #[test]
    fn cordons_a_new_drain_and_a_node_uncordoned_meanwhile() {
        assert!(must_cordon(None, false));
        assert!(must_cordon(None, true));
        assert!(must_cordon(Some(MIN), false), "uncordoned externally");
        assert!(!must_cordon(Some(MIN), true));
    }

    /// The retry table: one minute at first, five with an event past ten minutes, the
    /// `DrainFailed` message past the hour, and never a give-up.
    #[test]
    fn retries_back_off_and_never_stop() {
        let t = DrainTimings::default();
        let err = "pod apps/web-1: eviction refused by PodDisruptionBudget \"web\"";
        let first = after_failure(Duration::ZERO, err, &t);
        assert_eq!(first.after, MIN);
        assert!(!first.threshold_exceeded);
        assert_eq!(
            first.message,
            format!(
                "Drain failed. Waiting 1 minute then retrying. Error message from drain: {err}"
            )
        );
        assert_eq!(
            after_failure(10 * MIN, err, &t).after,
            MIN,
            "at 10 min: not more than"
        );
        let late = after_failure(11 * MIN, err, &t);
        assert_eq!(late.after, 5 * MIN);
        assert!(late.threshold_exceeded);
        assert_eq!(
            late.message,
            format!(
                "Drain failed. Drain has been failing for more than 10 minutes. Waiting 5 minutes then retrying. Error message from drain: {err}"
            )
        );
        // The agent leaves the node's reason to this controller by this prefix.
        assert!(
            first.message.starts_with(FAILED_PREFIX) && late.message.starts_with(FAILED_PREFIX)
        );
        assert_eq!(overdue("w0", 59 * MIN, &t), None);
        assert_eq!(
            overdue("w0", 61 * MIN, &t).as_deref(),
            Some("node w0: drain exceeded timeout: 1h0m0s. Will continue to retry.")
        );
        assert_eq!(after_failure(600 * MIN, err, &t).after, 5 * MIN);
    }

    #[test]
    fn durations_as_go_prints_them() {
        assert_eq!(go_duration(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(go_duration(Duration::from_secs(300)), "5m0s");
        assert_eq!(go_duration(Duration::from_secs(30)), "30s");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(go_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(minutes(Duration::from_secs(30)), "0.5");
    }
}
