//! Weekly maintenance windows in a time zone (the `periodic` strategy): when the disruptive
//! part of an update may run. Pure: every question takes the instant it is asked at, so tests
//! (and the daemon, through [`super::Clock`]) decide what "now" is.
//!
//! Zincati's rules: a window is days of the week, a wall-clock start (`hh:mm`) and a length
//! in whole minutes; it may run past midnight and past the end of the week; windows may
//! overlap. Wall-clock times are obeyed in the configured zone, so on the day clocks go back a
//! window over the repeated hour is longer (that wall-clock time happens twice), and on the day
//! they go forward the skipped part of a window does not happen (shorter, or gone entirely).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use jiff::civil::Weekday;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, Zoned};

const MINUTES_PER_DAY: u32 = 24 * 60;
const MINUTES_PER_WEEK: u32 = 7 * MINUTES_PER_DAY;

/// One recurring window: `Sat,Sun 23:30 1h`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    /// Monday-first, no repeats, in the order given.
    pub days: Vec<Weekday>,
    /// Minutes after local midnight.
    pub start_minute: u32,
    /// 1 ..= a week.
    pub length_minutes: u32,
}

impl Window {
    /// Whether local minute-of-week `mow` (Monday 00:00 = 0) is inside this window.
    fn contains(&self, mow: u32) -> bool {
        self.days.iter().any(|d| {
            let start = day_index(*d) * MINUTES_PER_DAY + self.start_minute;
            (mow + MINUTES_PER_WEEK - start) % MINUTES_PER_WEEK < self.length_minutes
        })
    }
}

impl FromStr for Window {
    type Err = String;

    /// `DAYS HH:MM LENGTH`: days comma-separated, in full or their first three letters
    /// (`Sat,Sun`, `monday`); a 24-hour start; a length such as `3h`, `90m`, `1h 30m`.
    fn from_str(s: &str) -> Result<Self, String> {
        let usage = "expected DAYS HH:MM LENGTH, e.g. \"Sat,Sun 22:00 3h\"";
        let mut parts = s.split_whitespace();
        let (Some(days), Some(start)) = (parts.next(), parts.next()) else {
            return Err(format!("window {s:?}: {usage}"));
        };
        let length = parts.collect::<Vec<_>>().join(" ");
        if length.is_empty() {
            return Err(format!("window {s:?}: no length; {usage}"));
        }
        let mut parsed = Vec::new();
        for day in days.split(',') {
            let d = parse_day(day).ok_or_else(|| {
                format!("window {s:?}: {day:?} is not a day of the week (Mon, Tue, … or Monday, …)")
            })?;
            if !parsed.contains(&d) {
                parsed.push(d);
            }
        }
        let start_minute = parse_hh_mm(start).ok_or_else(|| {
            format!("window {s:?}: start {start:?} is not HH:MM (00:00 to 23:59)")
        })?;
        let length = humantime::parse_duration(&length)
            .map_err(|e| format!("window {s:?}: length {length:?}: {e}"))?;
        let length_minutes = whole_minutes(length).ok_or_else(|| {
            format!(
                "window {s:?}: the length must be whole minutes, at least 1m and at most 7 days"
            )
        })?;
        Ok(Window {
            days: parsed,
            start_minute,
            length_minutes,
        })
    }
}

impl fmt::Display for Window {
    /// The form [`Window::from_str`] reads, normalised: `Sat,Sun 22:00 3h`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days: Vec<&str> = self.days.iter().map(|d| short_name(*d)).collect();
        let length =
            humantime::format_duration(Duration::from_secs(u64::from(self.length_minutes) * 60));
        write!(
            f,
            "{} {:02}:{:02} {length}",
            days.join(","),
            self.start_minute / 60,
            self.start_minute % 60
        )
    }
}

/// The windows and the zone they are read in.
#[derive(Clone, Debug)]
pub struct Schedule {
    pub windows: Vec<Window>,
    pub zone: TimeZone,
    /// As configured (`UTC`, `localtime`, `Europe/Berlin`), for messages.
    pub zone_name: String,
}

/// The time zone `name` names: `UTC` (or `utc`), `localtime` (the system's `/etc/localtime`,
/// UTC when it does not exist), or an IANA name from the system's time zone database.
pub fn time_zone(name: &str) -> Result<TimeZone, String> {
    match name {
        "UTC" | "utc" => Ok(TimeZone::UTC),
        "localtime" => {
            TimeZone::try_system().map_err(|e| format!("time zone localtime (/etc/localtime): {e}"))
        }
        name => TimeZone::get(name)
            .map_err(|e| format!("time zone {name:?} is not in the time zone database: {e}")),
    }
}

/// Where a schedule stands at an instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WindowState {
    /// Inside a window, until `until` (`None`: the windows cover the whole week).
    Open { until: Option<Zoned> },
    /// Outside; the next window opens at `opens` (`None`: no window ever opens, e.g. its only
    /// wall-clock time is always skipped).
    Closed { opens: Option<Zoned> },
}

impl Schedule {
    /// `zone`: `UTC` (the default), `localtime` (the system's `/etc/localtime`, UTC when it
    /// does not exist), or an IANA name from the system's time zone database.
    pub fn new(windows: Vec<Window>, zone: &str) -> Result<Self, String> {
        if windows.is_empty() {
            return Err("the periodic strategy needs at least one window".to_string());
        }
        Ok(Schedule {
            windows,
            zone: time_zone(zone)?,
            zone_name: zone.to_string(),
        })
    }

    /// Whether `now` is inside a window.
    pub fn is_open(&self, now: Timestamp) -> bool {
        let mow = minute_of_week(&now.to_zoned(self.zone.clone()));
        self.windows.iter().any(|w| w.contains(mow))
    }

    /// Open until when, or closed until when.
    pub fn state(&self, now: Timestamp) -> WindowState {
        if self.is_open(now) {
            let until = self.first_minute(now, false);
            WindowState::Open { until }
        } else {
            WindowState::Closed {
                opens: self.first_minute(now, true),
            }
        }
    }

    /// The first minute boundary after `now` at which [`Self::is_open`] is `open`, within two
    /// weeks (a window whose only wall-clock time is skipped by a DST change opens a week
    /// later). Between two offset changes of the zone, wall-clock time runs with real time, so
    /// each step jumps to the next wall-clock minute whose state is `open`, or to the next
    /// offset change when that comes first, and checks there.
    fn first_minute(&self, now: Timestamp, open: bool) -> Option<Zoned> {
        let coverage = self.coverage();
        let horizon = now
            .checked_add(SignedDuration::from_hours(2 * 7 * 24 + 2))
            .ok()?;
        let next = now.as_second().div_euclid(60) * 60 + 60;
        let mut t = Timestamp::from_second(next).ok()?;
        while t < horizon {
            let local = t.to_zoned(self.zone.clone());
            let mow = minute_of_week(&local);
            if coverage[mow as usize] == open {
                return Some(local);
            }
            let wall = (1..=MINUTES_PER_WEEK)
                .find(|d| coverage[((mow + d) % MINUTES_PER_WEEK) as usize] == open)?;
            let mut step = SignedDuration::from_mins(i64::from(wall));
            if let Some(change) = self.zone.following(t).next() {
                let until = change.timestamp().duration_since(t);
                if until > SignedDuration::ZERO && until < step {
                    // the minute at or after the change
                    let mins = (until.as_secs() + 59) / 60;
                    step = SignedDuration::from_mins(mins.max(1));
                }
            }
            t = t.checked_add(step).ok()?;
        }
        None
    }

    /// Which local minutes of the week (Monday 00:00 = 0) some window covers.
    fn coverage(&self) -> Vec<bool> {
        (0..MINUTES_PER_WEEK)
            .map(|mow| self.windows.iter().any(|w| w.contains(mow)))
            .collect()
    }

    /// `Sat,Sun 22:00 3h; Wed 01:00 30m (Europe/Berlin)`.
    pub fn describe(&self) -> String {
        let w: Vec<String> = self.windows.iter().map(|w| w.to_string()).collect();
        format!("{} ({})", w.join("; "), self.zone_name)
    }
}

/// Monday 00:00 = 0.
fn minute_of_week(local: &Zoned) -> u32 {
    day_index(local.weekday()) * MINUTES_PER_DAY + local.hour() as u32 * 60 + local.minute() as u32
}

fn day_index(d: Weekday) -> u32 {
    d.to_monday_zero_offset() as u32
}

fn parse_day(s: &str) -> Option<Weekday> {
    const NAMES: [(&str, Weekday); 7] = [
        ("monday", Weekday::Monday),
        ("tuesday", Weekday::Tuesday),
        ("wednesday", Weekday::Wednesday),
        ("thursday", Weekday::Thursday),
        ("friday", Weekday::Friday),
        ("saturday", Weekday::Saturday),
        ("sunday", Weekday::Sunday),
    ];
    let s = s.to_ascii_lowercase();
    NAMES
        .iter()
        .find(|(full, _)| s == *full || s == full[..3])
        .map(|(_, d)| *d)
}

fn short_name(d: Weekday) -> &'static str {
    ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"][day_index(d) as usize]
}

fn parse_hh_mm(s: &str) -> Option<u32> {
    let (h, m) = s.split_once(':')?;
    if h.len() != 2 || m.len() != 2 {
        return None;
    }
    let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
    (h < 24 && m < 60).then_some(h * 60 + m)
}

fn whole_minutes(d: Duration) -> Option<u32> {
    let secs = d.as_secs();
    let range = 60..=u64::from(MINUTES_PER_WEEK) * 60;
    (d.subsec_nanos() == 0 && secs.is_multiple_of(60) && range.contains(&secs))
        .then_some((secs / 60) as u32)
}

#[cfg(test)]
#[path = "window_tests.rs"]
mod tests;
