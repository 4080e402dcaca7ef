//! Where a files-only update's time goes, read from the timestamps of the lines the agent logs
//! anyway (at `info`, one per step of the update): no timing code in the agent itself.

use std::time::{Duration, SystemTime};

/// The log lines that end each phase, in order: (phase name, what its last line contains).
/// A phase runs from the end of the previous one (the first from `desiredConfig` set).
pub const PHASES: [(&str, &str); 7] = [
    (
        "watch: desiredConfig set -> the agent sees it",
        "desiredConfig changed",
    ),
    (
        "desired config fetched (TLS), currentconfig read",
        "Checking Reconcilable for config",
    ),
    (
        "policies, plan, checks, strategy, hooks, backups, record (fsync)",
        "Starting update from",
    ),
    (
        "state=Working reported (Node patch, Event, MCN)",
        ": Writing",
    ),
    (
        "3 files written (fsync each + directory), record (fsync)",
        ": PostActions",
    ),
    ("post-update actions (crio reload)", "to Done"),
    (
        "state=Done reported (Node patch, Event, MCN)",
        "Transitioned from state: Working -> Done",
    ),
];

/// The last phase, seen from outside: the Done the agent logged read back from the API.
pub const SEEN: &str = "Done seen on the benchmark's own watch of the Node";

/// The phases of one update: how long each took, in [`PHASES`] order then [`SEEN`]. `log` is
/// the agent's whole log; the update's lines are the first of each kind logged after `set`
/// (the wall-clock time `desiredConfig` was written); `seen` is when the bench read Done back.
pub fn of_update(log: &str, set: SystemTime, seen: SystemTime) -> Result<Vec<Duration>, String> {
    let mut lines = log
        .lines()
        .filter_map(|l| timestamp(l).map(|t| (t, l)))
        .filter(|(t, _)| *t >= set);
    let mut at = set;
    let mut phases = Vec::with_capacity(PHASES.len() + 1);
    for (name, marker) in PHASES {
        let (t, _) = lines
            .find(|(_, l)| l.contains(marker))
            .ok_or_else(|| format!("no line with {marker:?} ({name}) in the agent's log"))?;
        phases.push(t.duration_since(at).unwrap_or_default());
        at = t;
    }
    phases.push(seen.duration_since(at).unwrap_or_default());
    Ok(phases)
}

/// The time at the start of a log line (`tracing_subscriber`'s RFC 3339 UTC stamp, maybe in
/// ANSI colour codes, whose own digits, as in `ESC[2m`, are not the stamp's).
fn timestamp(line: &str) -> Option<SystemTime> {
    let mut rest = line;
    while let Some(after) = rest.strip_prefix("\x1b[") {
        rest = &after[after.find(|c: char| c.is_ascii_alphabetic())? + 1..];
    }
    let end = rest.find('Z')? + 1;
    let ts: jiff::Timestamp = rest[..end].parse().ok()?;
    Some(SystemTime::from(ts))
}
