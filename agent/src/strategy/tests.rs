use super::*;
use std::sync::Mutex;

/// A clock the test sets.
struct TestClock(Mutex<Timestamp>);

impl Clock for TestClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().unwrap()
    }
}

fn periodic(now: &str, rebootless_anytime: bool) -> (Strategy, Arc<TestClock>) {
    let clock = Arc::new(TestClock(Mutex::new(now.parse().unwrap())));
    let schedule = Schedule::new(vec!["Sat 22:00 3h".parse().unwrap()], "UTC").unwrap();
    let s = Strategy::new(
        Kind::Periodic {
            schedule,
            rebootless_anytime,
        },
        clock.clone(),
    );
    (s, clock)
}

const REBOOT: Disruption = Disruption {
    drain: true,
    reboot: true,
};
const FILES_ONLY: Disruption = Disruption {
    drain: false,
    reboot: false,
};

#[tokio::test]
async fn periodic_waits_for_the_window_and_says_until_when() {
    let (s, clock) = periodic("2026-11-28T21:50:00Z", false);
    let Decision::Wait { reason, recheck_in } = s.before_update("rendered-worker-2", REBOOT).await
    else {
        panic!("went outside the window")
    };
    assert_eq!(
        reason,
        "the update to rendered-worker-2 waits for a maintenance window (Sat 22:00 3h (UTC)): \
         the next opens Sat 2026-11-28 22:00 UTC"
    );
    assert_eq!(recheck_in, Duration::from_secs(600));
    // far from the window: looked at again after at most 15 minutes
    *clock.0.lock().unwrap() = "2026-11-25T10:00:00Z".parse().unwrap();
    match s.before_update("x", REBOOT).await {
        Decision::Wait { recheck_in, .. } => assert_eq!(recheck_in, MAX_WINDOW_WAIT),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        s.status().window.as_deref(),
        Some("next window Sat 2026-11-28 22:00 UTC")
    );
    *clock.0.lock().unwrap() = "2026-11-28T22:00:00Z".parse().unwrap();
    assert_eq!(
        s.before_update("x", REBOOT).await,
        Decision::Go { locked: false }
    );
    assert_eq!(
        s.status().window.as_deref(),
        Some("open until Sun 2026-11-29 01:00 UTC")
    );
}

#[tokio::test]
async fn rebootless_updates_wait_unless_allowed_at_any_time() {
    let rows = [
        (false, FILES_ONLY, false),
        (true, FILES_ONLY, true),
        (true, REBOOT, false),
        (
            true,
            Disruption {
                drain: true,
                reboot: false,
            },
            false,
        ),
    ];
    for (anytime, d, goes) in rows {
        let (s, _) = periodic("2026-11-25T10:00:00Z", anytime);
        let got = s.before_update("x", d).await;
        assert_eq!(
            matches!(got, Decision::Go { .. }),
            goes,
            "{anytime} {d:?}: {got:?}"
        );
    }
}

#[tokio::test]
async fn immediate_never_waits_and_releases_nothing() {
    let s = Strategy::immediate();
    assert_eq!(
        s.before_update("x", REBOOT).await,
        Decision::Go { locked: false }
    );
    s.release().await.unwrap();
    assert_eq!(s.status().name, "immediate");
}
