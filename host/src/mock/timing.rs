//! What the mock server actually did, as opposed to what it was asked to do: the time
//! from each request's arrival to its first token chunk, and the gaps between token
//! chunks, measured when each chunk is handed to the connection. Tests and the benchmark
//! compare the client's measurements with these, so timer lateness on a busy machine is
//! not mistaken for client error.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

/// Running sums and extremes, updated with relaxed atomics (a few per chunk, no lock).
///
/// The minimum bounds a client's per-request error without storing every request: for
/// each request, client − server ≤ client − (the server's minimum), so the client's p99
/// minus the server's minimum is an upper bound of the p99 error.
#[derive(Debug)]
pub struct TimingRecorder {
    first_tokens: AtomicU64,
    ttft_ns: AtomicU64,
    ttft_min_ns: AtomicU64,
    ttft_max_ns: AtomicU64,
    gaps: AtomicU64,
    gap_ns: AtomicU64,
    gap_min_ns: AtomicU64,
    gap_max_ns: AtomicU64,
}

impl Default for TimingRecorder {
    fn default() -> Self {
        TimingRecorder {
            first_tokens: AtomicU64::new(0),
            ttft_ns: AtomicU64::new(0),
            ttft_min_ns: AtomicU64::new(u64::MAX),
            ttft_max_ns: AtomicU64::new(0),
            gaps: AtomicU64::new(0),
            gap_ns: AtomicU64::new(0),
            gap_min_ns: AtomicU64::new(u64::MAX),
            gap_max_ns: AtomicU64::new(0),
        }
    }
}

impl TimingRecorder {
    pub fn first_token(&self, since_arrival: Duration) {
        let ns = since_arrival.as_nanos() as u64;
        self.first_tokens.fetch_add(1, Ordering::Relaxed);
        self.ttft_ns.fetch_add(ns, Ordering::Relaxed);
        self.ttft_min_ns.fetch_min(ns, Ordering::Relaxed);
        self.ttft_max_ns.fetch_max(ns, Ordering::Relaxed);
    }

    pub fn gap(&self, since_previous: Duration) {
        let ns = since_previous.as_nanos() as u64;
        self.gaps.fetch_add(1, Ordering::Relaxed);
        self.gap_ns.fetch_add(ns, Ordering::Relaxed);
        self.gap_min_ns.fetch_min(ns, Ordering::Relaxed);
        self.gap_max_ns.fetch_max(ns, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> TimingSnapshot {
        let n = self.first_tokens.load(Ordering::Relaxed);
        let g = self.gaps.load(Ordering::Relaxed);
        let mean = |sum: u64, n: u64| {
            if n == 0 {
                0.0
            } else {
                sum as f64 / n as f64 / 1e6
            }
        };
        // 0 before the first sample, like the means.
        let extreme = |v: &AtomicU64, n: u64| {
            if n == 0 {
                0.0
            } else {
                v.load(Ordering::Relaxed) as f64 / 1e6
            }
        };
        TimingSnapshot {
            first_tokens: n,
            mean_ttft_ms: mean(self.ttft_ns.load(Ordering::Relaxed), n),
            min_ttft_ms: extreme(&self.ttft_min_ns, n),
            max_ttft_ms: extreme(&self.ttft_max_ns, n),
            gaps: g,
            mean_itl_ms: mean(self.gap_ns.load(Ordering::Relaxed), g),
            min_itl_ms: extreme(&self.gap_min_ns, g),
            max_itl_ms: extreme(&self.gap_max_ns, g),
        }
    }
}

/// The server's own timing so far (`GET /mock/timing` serves it as JSON).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TimingSnapshot {
    /// Streams that sent a first token chunk.
    pub first_tokens: u64,
    /// Mean time from request arrival to the first token chunk, in ms.
    pub mean_ttft_ms: f64,
    pub min_ttft_ms: f64,
    pub max_ttft_ms: f64,
    /// Gaps between successive token chunks of a stream.
    pub gaps: u64,
    pub mean_itl_ms: f64,
    pub min_itl_ms: f64,
    pub max_itl_ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn means_are_sums_over_counts() {
        let r = TimingRecorder::default();
        assert_eq!(r.snapshot().mean_ttft_ms, 0.0);
        r.first_token(Duration::from_millis(50));
        r.first_token(Duration::from_millis(52));
        r.gap(Duration::from_micros(9_500));
        r.gap(Duration::from_micros(10_500));
        r.gap(Duration::from_millis(10));
        let s = r.snapshot();
        assert_eq!((s.first_tokens, s.gaps), (2, 3));
        assert!((s.mean_ttft_ms - 51.0).abs() < 1e-9);
        assert_eq!((s.min_ttft_ms, s.max_ttft_ms), (50.0, 52.0));
        assert_eq!((s.min_itl_ms, s.max_itl_ms), (9.5, 10.5));
        assert!((s.mean_itl_ms - 10.0).abs() < 1e-9);
    }
}
