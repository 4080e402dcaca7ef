use super::*;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn schedule(windows: &[&str], zone: TimeZone) -> Schedule {
    Schedule {
        windows: windows.iter().map(|w| w.parse().unwrap()).collect(),
        zone,
        zone_name: "test".to_string(),
    }
}

/// The US Eastern rules as a POSIX TZ string: DST from the 2nd Sunday of March to the 1st
/// Sunday of November, independent of the machine's time zone database.
fn eastern() -> TimeZone {
    TimeZone::posix("EST5EDT,M3.2.0,M11.1.0").unwrap()
}

#[test]
fn windows_parse_and_print_normalised() {
    let rows: &[(&str, Result<&str, &str>)] = &[
        ("Sat 22:00 3h", Ok("Sat 22:00 3h")),
        ("sat,SUNDAY 23:30 60m", Ok("Sat,Sun 23:30 1h")),
        ("Wed 01:00 90m", Ok("Wed 01:00 1h 30m")),
        ("Mon,Mon 00:00 1h 30m", Ok("Mon 00:00 1h 30m")),
        ("Fri 23:59 7days", Ok("Fri 23:59 7days")),
        ("Sat 22:00", Err("no length")),
        ("Sat", Err("expected DAYS HH:MM LENGTH")),
        ("Sab 22:00 3h", Err("\"Sab\" is not a day of the week")),
        ("Sat 24:00 3h", Err("start \"24:00\" is not HH:MM")),
        ("Sat 9:00 3h", Err("start \"9:00\" is not HH:MM")),
        ("Sat 22:00 30s", Err("whole minutes")),
        ("Sat 22:00 0m", Err("whole minutes")),
        ("Sat 22:00 8days", Err("at most 7 days")),
        ("Sat 22:00 soon", Err("length \"soon\"")),
    ];
    for (text, want) in rows {
        let got = text.parse::<Window>().map(|w| w.to_string());
        match (want, &got) {
            (Ok(w), Ok(g)) => assert_eq!(g, w, "{text}"),
            (Err(part), Err(e)) => assert!(e.contains(part), "{text}: {e}"),
            _ => panic!("{text}: want {want:?}, got {got:?}"),
        }
    }
}

#[test]
fn window_edges_in_utc() {
    let s = schedule(
        &[
            "Sat 22:00 3h",
            "Sun 23:00 2h",
            "Wed 01:00 30m",
            "Wed 01:15 30m",
        ],
        TimeZone::UTC,
    );
    // 2026-11-28 is a Saturday
    let rows: &[(&str, bool)] = &[
        ("2026-11-28T21:59:59Z", false),
        ("2026-11-28T22:00:00Z", true),
        ("2026-11-29T00:59:59Z", true), // past midnight
        ("2026-11-29T01:00:00Z", false),
        ("2026-11-29T22:59:00Z", false),
        ("2026-11-29T23:00:00Z", true),
        ("2026-11-30T00:59:00Z", true), // Sunday's window runs into Monday: past the week's end
        ("2026-11-30T01:00:00Z", false),
        ("2026-12-02T01:00:00Z", true),
        ("2026-12-02T01:35:00Z", true), // the overlapping window
        ("2026-12-02T01:45:00Z", false),
        ("2026-12-03T22:30:00Z", false), // Thursday
    ];
    for (at, open) in rows {
        assert_eq!(s.is_open(ts(at)), *open, "{at}");
    }
}

#[test]
fn state_says_until_when_and_when_next() {
    let s = schedule(&["Sat 22:00 3h"], TimeZone::UTC);
    let rows: &[(&str, WindowState)] = &[
        (
            "2026-11-28T21:59:30Z",
            WindowState::Closed {
                opens: Some(ts("2026-11-28T22:00:00Z").to_zoned(TimeZone::UTC)),
            },
        ),
        (
            "2026-11-28T22:00:00Z",
            WindowState::Open {
                until: Some(ts("2026-11-29T01:00:00Z").to_zoned(TimeZone::UTC)),
            },
        ),
        (
            // just closed: a week to wait
            "2026-11-29T01:00:00Z",
            WindowState::Closed {
                opens: Some(ts("2026-12-05T22:00:00Z").to_zoned(TimeZone::UTC)),
            },
        ),
    ];
    for (at, want) in rows {
        assert_eq!(&s.state(ts(at)), want, "{at}");
    }
    let always = schedule(&["Mon 00:00 7days"], TimeZone::UTC);
    assert_eq!(
        always.state(ts("2026-11-28T12:00:00Z")),
        WindowState::Open { until: None }
    );
}

#[test]
fn a_zone_moves_the_windows() {
    // Panama: UTC-5 all year
    let s = schedule(&["Sat 23:30 1h"], TimeZone::posix("EST5").unwrap());
    assert!(!s.is_open(ts("2026-11-28T23:30:00Z")));
    assert!(s.is_open(ts("2026-11-29T04:30:00Z")));
    assert!(s.is_open(ts("2026-11-29T05:29:00Z")));
    assert!(!s.is_open(ts("2026-11-29T05:30:00Z")));
}

#[test]
fn spring_forward_shortens_or_skips_a_window() {
    // 2026-03-08 02:00 EST (07:00Z) becomes 03:00 EDT
    let s = schedule(&["Sun 01:30 1h"], eastern());
    let rows: &[(&str, bool)] = &[
        ("2026-03-08T06:29:00Z", false), // 01:29 EST
        ("2026-03-08T06:30:00Z", true),  // 01:30 EST
        ("2026-03-08T06:59:00Z", true),  // 01:59 EST
        ("2026-03-08T07:00:00Z", false), // 03:00 EDT: 02:00–02:30 never happens
        ("2026-03-15T05:30:00Z", true),  // a week later, 01:30 EDT: a full hour again
        ("2026-03-15T06:29:00Z", true),
        ("2026-03-15T06:30:00Z", false),
    ];
    for (at, open) in rows {
        assert_eq!(s.is_open(ts(at)), *open, "{at}");
    }
    // a window entirely inside the skipped hour does not happen that day
    let skipped = schedule(&["Sun 02:15 30m"], eastern());
    assert_eq!(
        skipped.state(ts("2026-03-07T17:00:00Z")),
        WindowState::Closed {
            opens: Some(ts("2026-03-15T06:15:00Z").to_zoned(eastern())),
        }
    );
}

#[test]
fn fall_back_repeats_the_wall_clock_hour() {
    // 2026-11-01 02:00 EDT (06:00Z) becomes 01:00 EST: 01:00–02:00 happens twice
    let s = schedule(&["Sun 01:30 1h"], eastern());
    let rows: &[(&str, bool)] = &[
        ("2026-11-01T05:29:00Z", false), // 01:29 EDT
        ("2026-11-01T05:30:00Z", true),  // 01:30 EDT
        ("2026-11-01T05:59:00Z", true),  // 01:59 EDT
        ("2026-11-01T06:00:00Z", false), // 01:00 EST, again before the window
        ("2026-11-01T06:30:00Z", true),  // 01:30 EST: the window's wall-clock time again
        ("2026-11-01T07:29:00Z", true),  // 02:29 EST
        ("2026-11-01T07:30:00Z", false), // 02:30 EST
    ];
    for (at, open) in rows {
        assert_eq!(s.is_open(ts(at)), *open, "{at}");
    }
    // open in the first 01:30, until the clocks go back (then again at the second 01:30)
    assert_eq!(
        s.state(ts("2026-11-01T05:45:00Z")),
        WindowState::Open {
            until: Some(ts("2026-11-01T06:00:00Z").to_zoned(eastern()))
        }
    );
}

#[test]
fn iana_zones_come_from_the_system_database() {
    // Europe/Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST (01:00Z)
    let s = Schedule::new(vec!["Sun 02:30 1h".parse().unwrap()], "Europe/Berlin").unwrap();
    match s.state(ts("2026-03-29T00:00:00Z")) {
        WindowState::Closed { opens: Some(at) } => {
            // the window's part after the gap: 03:00 CEST
            assert_eq!(at.timestamp(), ts("2026-03-29T01:00:00Z"));
            assert_eq!((at.hour(), at.minute()), (3, 0));
        }
        other => panic!("{other:?}"),
    }
    assert!(!s.is_open(ts("2026-03-29T01:30:00Z")));
    let e = Schedule::new(vec!["Sun 02:30 1h".parse().unwrap()], "Mars/Olympus").unwrap_err();
    assert!(
        e.contains("time zone \"Mars/Olympus\" is not in the time zone database"),
        "{e}"
    );
    let e = Schedule::new(vec![], "UTC").unwrap_err();
    assert!(e.contains("at least one window"), "{e}");
}
