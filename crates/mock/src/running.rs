//! `--ttft-per-running-ms`: a server whose first token comes later the more requests it
//! is already serving, so that a load search (`bench sweep serve_sla`) has a known
//! capacity to find. A request counts as running from its arrival until its last token's
//! deadline; one arriving while `n` others run gets its first token `n` times the delay
//! later (and every later token with it).

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug, Default)]
pub(super) struct Running {
    /// Added to the TTFT for each request running at arrival; zero turns the count off.
    per_request: Duration,
    /// The last-token deadlines of the requests admitted so far (pruned as they pass).
    ends: Mutex<Vec<Instant>>,
}

impl Running {
    pub(super) fn new(per_request: Duration) -> Running {
        Running {
            per_request,
            ends: Mutex::default(),
        }
    }

    /// Admits a request arriving at `arrival` whose last token comes `ttft + tail` after
    /// it (plus the delay): returns the delay, and counts the request as running until its
    /// last token.
    pub(super) fn admit(&self, arrival: Instant, ttft: Duration, tail: Duration) -> Duration {
        if self.per_request.is_zero() {
            return Duration::ZERO;
        }
        let mut ends = self.ends.lock().unwrap_or_else(PoisonError::into_inner);
        ends.retain(|&end| end > arrival);
        let others = u32::try_from(ends.len()).unwrap_or(u32::MAX);
        let delay = self.per_request.saturating_mul(others);
        ends.push(arrival + ttft + delay + tail);
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_running_request_adds_the_delay_until_its_last_token() {
        let running = Running::new(Duration::from_millis(10));
        let t0 = Instant::now();
        let ttft = Duration::from_millis(20);
        let tail = Duration::from_millis(5);
        assert_eq!(running.admit(t0, ttft, tail), Duration::ZERO);
        // The first runs until t0 + 25 ms.
        let t1 = t0 + Duration::from_millis(1);
        assert_eq!(running.admit(t1, ttft, tail), Duration::from_millis(10));
        // The second runs until t1 + 35 ms = t0 + 36 ms; at t0 + 30 only it remains.
        assert_eq!(
            running.admit(t0 + Duration::from_millis(30), ttft, tail),
            Duration::from_millis(10)
        );
        // After every deadline, nothing runs.
        assert_eq!(
            running.admit(t0 + Duration::from_secs(1), ttft, tail),
            Duration::ZERO
        );
    }

    #[test]
    fn off_by_default() {
        let running = Running::default();
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(
                running.admit(t0, Duration::from_millis(20), Duration::ZERO),
                Duration::ZERO
            );
        }
    }
}
