//! Exponential backoff of failed updates: 1 s, 2 s, 4 s ... up to 60 s, forever (the MCD's
//! failure rate limiter).

use std::time::Duration;

/// The next delay, doubling from `MIN` to `MAX`.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
}

impl Backoff {
    pub const MIN: Duration = Duration::from_secs(1);
    pub const MAX: Duration = Duration::from_secs(60);

    pub fn new() -> Self {
        Backoff { next: Self::MIN }
    }

    /// The delay before the next retry; later calls double it up to `MAX`.
    pub fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        d
    }

    /// Back to `MIN` (after a success, or when the target changed).
    pub fn reset(&mut self) {
        self.next = Self::MIN;
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
}
