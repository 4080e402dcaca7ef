//! Exponential backoff of failed updates: 1 s, 2 s, 4 s ... up to 60 s, forever (the MCD's
//! failure rate limiter).

use std::time::Duration;

/// The next delay, doubling from `MIN` to `MAX`.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    pub const MIN: Duration = Duration::from_secs(1);
    pub const MAX: Duration = Duration::from_secs(60);

    pub fn new() -> Self {
        Self::up_to(Self::MAX)
    }

    /// Doubling up to `max` instead of `MAX` (when smaller): a daemon that polls every `max`
    /// tries again at least that often, and says so.
    pub fn up_to(max: Duration) -> Self {
        let max = max.min(Self::MAX);
        Backoff {
            next: Self::MIN.min(max),
            max,
        }
    }

    /// The delay before the next retry; later calls double it up to `MAX`.
    pub fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(self.max);
        d
    }

    /// Back to `MIN` (after a success, or when the target changed).
    pub fn reset(&mut self) {
        self.next = Self::MIN.min(self.max);
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_a_minute_and_resets() {
        let mut b = Backoff::new();
        let secs: Vec<u64> = (0..9).map(|_| b.next_delay().as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_secs(1));
    }

    #[test]
    fn a_poll_interval_caps_the_delay() {
        let cases: [(u64, &[u64]); 3] = [
            (5, &[1, 2, 4, 5, 5]),
            (1, &[1, 1, 1]),
            (3600, &[1, 2, 4, 8, 16, 32, 60, 60]),
        ];
        for (poll, want) in cases {
            let mut b = Backoff::up_to(Duration::from_secs(poll));
            let got: Vec<u64> = want.iter().map(|_| b.next_delay().as_secs()).collect();
            assert_eq!(got, want, "polling every {poll} s");
            b.reset();
            assert_eq!(
                b.next_delay().as_secs(),
                want[0],
                "after a reset, every {poll} s"
            );
        }
    }
}
