//! The human form of `status`: one labelled line per fact, readable at a glance.

use std::fmt::Write as _;
use std::time::{Duration, UNIX_EPOCH};

use super::{DeploymentInfo, NodeStatus, Pending};

/// Width of the labels column.
const LABEL: usize = 14;

/// The status as text; `now_ms` for ages ("5m ago").
pub fn human(s: &NodeStatus, now_ms: u64) -> String {
    let mut out = String::new();
    let mut line = |label: &str, value: &str| {
        let _ = writeln!(out, "{:<LABEL$}{value}", format!("{label}:"));
    };
    line("Agent", &agent(s, now_ms));
    let running = s.agent.as_ref().is_some_and(|a| a.running);
    line(
        "State",
        &match (&s.state, s.status_updated_ms) {
            (None, _) => "unknown".to_string(),
            (Some(state), Some(at)) if !running => format!(
                "{state} (as last reported, {} ago: no agent runs to keep it current)",
                duration(ago(at, now_ms))
            ),
            (Some(state), _) => state.clone(),
        },
    );
    if !s.reason.is_empty() {
        line("Reason", &s.reason);
    }
    if let Some(at) = s.status_updated_ms {
        line("Reported", &when(at, now_ms));
    }
    if let Some(e) = &s.last_error {
        let mut t = format!("{}, {}", e.message, when(e.at_ms, now_ms));
        if e.what == "fetch"
            && let Some(ok) = s.last_fetch_ms.filter(|ok| *ok > e.at_ms)
        {
            let _ = write!(t, "; fetched since, {}", when(ok, now_ms));
        }
        line("Last error", &t);
    }
    line("Current", s.current.as_deref().unwrap_or("none"));
    line("Desired", s.desired.as_deref().unwrap_or("unknown"));
    if let Some(i) = &s.current_image {
        line("Image", &format!("{i} (image mode)"));
    }
    if let Some(i) = s
        .desired_image
        .as_ref()
        .filter(|i| s.current_image.as_ref() != Some(*i))
    {
        line("Image wanted", i);
    }
    line(
        "Pending",
        &s.pending
            .as_ref()
            .map_or_else(|| "none".to_string(), pending),
    );
    if s.needs_reboot {
        line(
            "Needs reboot",
            "yes: the update is staged and waits for a reboot nobody requested",
        );
    }
    line(
        "Last update",
        &s.last_update.as_ref().map_or_else(
            || "unknown".to_string(),
            |u| {
                let result = if u.result.is_empty() {
                    "running"
                } else {
                    &u.result
                };
                let mut t = format!("{} -> {}: {result}", u.from, u.to);
                t.push_str(if u.reboot {
                    ", with a reboot"
                } else {
                    ", no reboot"
                });
                if let Some(d) = u.duration_ms {
                    let _ = write!(t, ", took {}", duration(Duration::from_millis(d)));
                }
                let _ = write!(t, ", {}", when(u.ended_ms.unwrap_or(u.started_ms), now_ms));
                t
            },
        ),
    );
    if let Some(st) = &s.strategy {
        let mut t = st.name.clone();
        for part in [Some(&st.detail), st.window.as_ref()].into_iter().flatten() {
            if !part.is_empty() {
                let _ = write!(t, "; {part}");
            }
        }
        line("Strategy", &t);
        if st.name == "fleet_lock" || st.lock_held {
            line(
                "Reboot slot",
                if st.lock_held {
                    "held (FleetLock): given back once the node is Done in its new config"
                } else {
                    "not held"
                },
            );
        }
        if let Some(w) = &st.waiting {
            line("Waiting", w);
        }
    }
    match &s.deployments {
        Some(d) => {
            let running = if d.booted { "Booted" } else { "Default" };
            deployment(&mut out, running, d.running.as_ref());
            deployment(&mut out, "Next boot", d.next.as_ref());
            deployment(&mut out, "Rollback", d.rollback.as_ref());
            let _ = writeln!(out, "{:<LABEL$}{}", "", format_args!("(from {})", d.source));
        }
        None => {
            let _ = writeln!(out, "{:<LABEL$}unknown", "Deployments:");
        }
    }
    for (i, problem) in s.unreadable.iter().enumerate() {
        let label = if i == 0 { "Not read:" } else { "" };
        let _ = writeln!(out, "{label:<LABEL$}{problem}");
    }
    out
}

/// `running (pid 42) since DATE (5m ago)`, as `systemctl status`'s `Active:`.
fn agent(s: &NodeStatus, now_ms: u64) -> String {
    match &s.agent {
        Some(a) if a.running => format!(
            "running (pid {}) since {}",
            a.pid,
            when(a.started_ms, now_ms)
        ),
        Some(a) => format!(
            "not running (pid {}, started {}, is gone)",
            a.pid,
            when(a.started_ms, now_ms)
        ),
        None if s.status_updated_ms.is_some() => {
            "not running (no daemon has written the status file since the boot)".to_string()
        }
        None => "not running (no status file since the boot)".to_string(),
    }
}

fn ago(ms: u64, now_ms: u64) -> Duration {
    Duration::from_secs(now_ms.saturating_sub(ms) / 1000)
}

/// The update in progress, with what its step means.
fn pending(p: &Pending) -> String {
    let what = match (p.step.as_str(), p.this_boot) {
        ("Draining", _) => "draining the node".to_string(),
        ("Writing", _) => "writing files, units and users".to_string(),
        ("Os", _) => "staging OS changes through rpm-ostree".to_string(),
        ("PostActions", _) => "running post-update actions".to_string(),
        ("RebootRequested", Some(true)) => "reboot requested in this boot, waiting for it".into(),
        ("RebootRequested", _) => {
            "rebooted since; the agent verifies the update when it starts".to_string()
        }
        ("Verifying", _) => "verifying the OS and files after the reboot".to_string(),
        ("NotTaken", _) => "did not take after the reboot".to_string(),
        ("RollingBack", _) => "rolling back".to_string(),
        (other, _) => other.to_string(),
    };
    let mut t = format!("{} -> {} at {}: {what}", p.from, p.to, p.step);
    if p.force {
        t.push_str(" (forced)");
    }
    if let Some(r) = &p.reason {
        let _ = write!(t, " ({r})");
    }
    t
}

fn deployment(out: &mut String, label: &str, d: Option<&DeploymentInfo>) {
    let label = format!("{label}:");
    let Some(d) = d else {
        if label != "Booted:" && label != "Default:" {
            let _ = writeln!(out, "{label:<LABEL$}none");
        }
        return;
    };
    let short: String = d.checksum.chars().take(12).collect();
    let mut head = format!("{} {short}", d.osname);
    if let Some(v) = &d.version {
        let _ = write!(head, " version {v}");
    }
    if d.staged {
        head.push_str(" (staged)");
    }
    if d.pinned {
        head.push_str(" (pinned)");
    }
    let _ = writeln!(out, "{label:<LABEL$}{head}");
    if let Some(image) = d.image.as_ref().or(d.origin.as_ref()) {
        let _ = writeln!(out, "{:<LABEL$}image {image}", "");
    }
    if let Some(k) = &d.kargs {
        let _ = writeln!(out, "{:<LABEL$}kernel arguments: {k}", "");
    }
}

/// `2025-01-02T03:04:05Z (5m 3s ago)`.
fn when(ms: u64, now_ms: u64) -> String {
    let at = UNIX_EPOCH + Duration::from_millis(ms);
    format!(
        "{} ({} ago)",
        humantime::format_rfc3339_seconds(at),
        duration(ago(ms, now_ms))
    )
}

/// `1.25s`, `3m 2s`: seconds with two decimals below a minute, whole seconds above.
fn duration(d: Duration) -> String {
    if d < Duration::from_secs(60) {
        format!("{:.2}s", d.as_secs_f64())
    } else {
        humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::status::{AgentState, Deployments};
    use crate::engine::report::LastError;
    use crate::engine::report::LastUpdate;
    use crate::strategy::StrategyStatus;

    #[test]
    fn a_node_in_the_middle_of_a_reboot_update_reads_at_a_glance() {
        let s = NodeStatus {
            state: Some("Working".into()),
            reason: String::new(),
            current: Some("rendered-a".into()),
            desired: Some("rendered-b".into()),
            current_image: None,
            desired_image: None,
            needs_reboot: false,
            last_update: Some(LastUpdate {
                from: "rendered-a".into(),
                to: "rendered-b".into(),
                started_ms: 1_700_000_000_000,
                reboot: true,
                ..LastUpdate::default()
            }),
            pending: Some(Pending {
                from: "rendered-a".into(),
                to: "rendered-b".into(),
                step: "RebootRequested".into(),
                reboot: true,
                force: false,
                started_ms: 1_700_000_000_000,
                reason: None,
                this_boot: Some(true),
            }),
            deployments: Some(Deployments {
                source: "sysroot /".into(),
                booted: true,
                running: Some(DeploymentInfo {
                    osname: "rhcos".into(),
                    checksum: "0123456789abcdef".into(),
                    version: Some("418.94".into()),
                    image: Some("quay.io/x@sha256:1".into()),
                    origin: None,
                    kargs: Some("root=LABEL=root rw".into()),
                    staged: false,
                    pinned: false,
                }),
                next: None,
                rollback: None,
            }),
            strategy: None,
            status_updated_ms: Some(1_700_000_060_000),
            agent: Some(AgentState {
                running: true,
                pid: 42,
                started_ms: 1_699_999_000_000,
            }),
            last_error: None,
            last_fetch_ms: None,
            unreadable: vec!["deployments: x".into(), "second".into()],
        };
        let text = human(&s, 1_700_000_065_000);
        assert_eq!(
            text,
            "Agent:        running (pid 42) since 2023-11-14T21:56:40Z (17m 45s ago)
State:        Working
Reported:     2023-11-14T22:14:20Z (5.00s ago)
Current:      rendered-a
Desired:      rendered-b
Pending:      rendered-a -> rendered-b at RebootRequested: reboot requested in this boot, waiting for it
Last update:  rendered-a -> rendered-b: running, with a reboot, 2023-11-14T22:13:20Z (1m 5s ago)
Booted:       rhcos 0123456789ab version 418.94
              image quay.io/x@sha256:1
              kernel arguments: root=LABEL=root rw
Next boot:    none
Rollback:     none
              (from sysroot /)
Not read:     deployments: x
              second
"
        );
    }

    #[test]
    fn the_strategy_its_window_the_slot_and_the_wait_are_shown() {
        let rows: &[(StrategyStatus, &str)] = &[
            (
                StrategyStatus {
                    name: "periodic".into(),
                    detail: "Sat 22:00 3h (UTC)".into(),
                    window: Some("next window Sat 2026-11-28 22:00 UTC".into()),
                    lock_held: false,
                    waiting: Some("the update to rendered-b waits for a maintenance window".into()),
                },
                "Strategy:     periodic; Sat 22:00 3h (UTC); next window Sat 2026-11-28 22:00 UTC
Waiting:      the update to rendered-b waits for a maintenance window
",
            ),
            (
                StrategyStatus {
                    name: "fleet_lock".into(),
                    detail: "https://c:22623 group worker id node-a".into(),
                    window: None,
                    lock_held: true,
                    waiting: None,
                },
                "Strategy:     fleet_lock; https://c:22623 group worker id node-a
Reboot slot:  held (FleetLock): given back once the node is Done in its new config
",
            ),
            (
                StrategyStatus {
                    name: "immediate".into(),
                    ..StrategyStatus::default()
                },
                "Strategy:     immediate\n",
            ),
        ];
        for (st, want) in rows {
            let s = NodeStatus {
                strategy: Some(st.clone()),
                ..NodeStatus::default()
            };
            let text = human(&s, 0);
            assert!(text.contains(want), "{text}");
        }
    }

    #[test]
    fn image_mode_shows_the_layered_image_and_the_one_wanted() {
        let mut s = NodeStatus {
            state: Some("Working".into()),
            current: Some("rendered-a".into()),
            desired: Some("rendered-a".into()),
            current_image: Some("registry.example/ocl@sha256:1".into()),
            desired_image: Some("registry.example/ocl@sha256:2".into()),
            ..NodeStatus::default()
        };
        let text = human(&s, 0);
        assert!(
            text.contains("Image:        registry.example/ocl@sha256:1 (image mode)\nImage wanted: registry.example/ocl@sha256:2\n"),
            "{text}"
        );
        s.desired_image = s.current_image.clone();
        assert!(!human(&s, 0).contains("Image wanted"));
    }

    /// Whether the agent runs, the age of what it reported and its last failure: `status`
    /// never reads as a current `Done` when nobody keeps it current.
    #[test]
    fn the_agent_its_reports_age_and_its_last_failure_are_shown() {
        const NOW: u64 = 1_700_001_800_000;
        const REPORTED: u64 = 1_700_000_000_000;
        let agent = |running| AgentState {
            running,
            pid: 42,
            started_ms: 1_699_999_000_000,
        };
        let failed = LastError {
            what: "fetch".into(),
            message: "cannot get the desired config from https://c:22623: connection refused"
                .into(),
            at_ms: 1_700_000_000_000,
        };
        let rows: Vec<(NodeStatus, Vec<&str>)> = vec![
            (
                NodeStatus {
                    state: Some("Done".into()),
                    status_updated_ms: Some(REPORTED),
                    agent: Some(agent(true)),
                    ..NodeStatus::default()
                },
                vec![
                    "Agent:        running (pid 42) since 2023-11-14T21:56:40Z (46m 40s ago)
",
                    "State:        Done
",
                    "Reported:     2023-11-14T22:13:20Z (30m ago)
",
                ],
            ),
            (
                NodeStatus {
                    state: Some("Done".into()),
                    status_updated_ms: Some(REPORTED),
                    agent: Some(agent(false)),
                    ..NodeStatus::default()
                },
                vec![
                    "Agent:        not running (pid 42, started 2023-11-14T21:56:40Z (46m 40s ago), is gone)
",
                    "State:        Done (as last reported, 30m ago: no agent runs to keep it current)
",
                ],
            ),
            (
                NodeStatus {
                    state: Some("Done".into()),
                    status_updated_ms: Some(REPORTED),
                    ..NodeStatus::default()
                },
                vec![
                    "Agent:        not running (no daemon has written the status file since the boot)
",
                    "State:        Done (as last reported, 30m ago",
                ],
            ),
            (
                NodeStatus::default(),
                vec![
                    "Agent:        not running (no status file since the boot)
",
                    "State:        unknown
",
                ],
            ),
            (
                NodeStatus {
                    state: Some("Done".into()),
                    status_updated_ms: Some(NOW),
                    agent: Some(agent(true)),
                    last_error: Some(failed.clone()),
                    ..NodeStatus::default()
                },
                vec![
                    "Last error:   cannot get the desired config from https://c:22623: connection refused, 2023-11-14T22:13:20Z (30m ago)
",
                ],
            ),
            (
                NodeStatus {
                    state: Some("Done".into()),
                    status_updated_ms: Some(NOW),
                    agent: Some(agent(true)),
                    last_error: Some(failed),
                    last_fetch_ms: Some(1_700_001_790_000),
                    ..NodeStatus::default()
                },
                vec![
                    "connection refused, 2023-11-14T22:13:20Z (30m ago); fetched since, 2023-11-14T22:43:10Z (10.00s ago)
",
                ],
            ),
        ];
        for (s, wanted) in rows {
            let text = human(&s, NOW);
            for want in wanted {
                assert!(text.contains(want), "{want:?} not in:\n{text}");
            }
        }
    }

    #[test]
    fn durations_are_short() {
        assert_eq!(duration(Duration::from_millis(1234)), "1.23s");
        assert_eq!(duration(Duration::from_secs(3725)), "1h 2m 5s");
    }
}
