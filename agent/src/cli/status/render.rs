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
    line("State", s.state.as_deref().unwrap_or("unknown"));
    if !s.reason.is_empty() {
        line("Reason", &s.reason);
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
    let ago = Duration::from_secs(now_ms.saturating_sub(ms) / 1000);
    format!(
        "{} ({} ago)",
        humantime::format_rfc3339_seconds(at),
        duration(ago)
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
    use crate::cli::status::Deployments;
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
            status_updated_ms: Some(1_700_000_000_000),
            unreadable: vec!["deployments: x".into(), "second".into()],
        };
        let text = human(&s, 1_700_000_065_000);
        assert_eq!(
            text,
            "State:        Working
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

    #[test]
    fn durations_are_short() {
        assert_eq!(duration(Duration::from_millis(1234)), "1.23s");
        assert_eq!(duration(Duration::from_secs(3725)), "1h 2m 5s");
    }
}
