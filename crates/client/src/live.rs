//! What a run has measured so far, while it goes on: for whoever watches a run before its
//! result exists (`--until-confident`'s check, and any live view).
//!
//! The decode worker adds each request's record once it is built ([`LiveStats::add`]):
//! one short lock per request, on the decode thread, never per chunk and never on the
//! send or receive paths. Readers take a [`LiveSnapshot`] (a copy, a few kilobytes) as
//! often as they like. Latencies go into HdrHistograms (microseconds, three significant
//! digits: a value is off by at most 0.1%), so memory stays bounded however long the run
//! is; the result's own figures are still computed exactly from the records at the end.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use hdrhistogram::Histogram;

use crate::record::{FailureKind, RequestRecord};

/// The longest latency the histograms hold, in microseconds (a day); longer ones are
/// clamped to it.
const MAX_MICROS: u64 = 86_400_000_000;

/// A latency the live view follows, as vLLM names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveMetric {
    Ttft,
    Tpot,
    Itl,
    E2el,
}

impl LiveMetric {
    pub const ALL: [LiveMetric; 4] = [
        LiveMetric::Ttft,
        LiveMetric::Tpot,
        LiveMetric::Itl,
        LiveMetric::E2el,
    ];

    /// vLLM's name (`ttft`, as in `p99_ttft_ms`).
    pub fn name(self) -> &'static str {
        match self {
            LiveMetric::Ttft => "ttft",
            LiveMetric::Tpot => "tpot",
            LiveMetric::Itl => "itl",
            LiveMetric::E2el => "e2el",
        }
    }
}

/// The run's figures so far.
#[derive(Debug, Clone)]
pub struct LiveSnapshot {
    /// Requests sent so far (in flight: sent less completed, failed and cancelled).
    pub sent: u64,
    pub completed: u64,
    pub failed: u64,
    /// Requests the client cancelled on purpose (`--request-cancellation-rate`).
    pub cancelled: u64,
    /// Failed requests by kind, in the order the kinds first failed.
    pub failures_by_kind: Vec<(FailureKind, u64)>,
    /// Output tokens of the completed requests (the server's usage, else one per chunk).
    pub output_tokens: u64,
    histograms: [Histogram<u64>; 4],
    /// How late each recorded request was sent against its schedule, beyond any wait for
    /// a concurrency permit (the result's `schedule_lag_ms_*`), in microseconds.
    schedule_lag: Histogram<u64>,
    /// The server's own gauges at its latest `/metrics` read (`--server-metrics-interval`),
    /// by server (its name or URL): KV-cache usage, requests running and waiting.
    pub server_gauges: Vec<(String, Vec<(&'static str, f64)>)>,
}

impl LiveSnapshot {
    fn new() -> LiveSnapshot {
        let histogram =
            || Histogram::new_with_bounds(1, MAX_MICROS, 3).expect("valid histogram bounds");
        LiveSnapshot {
            sent: 0,
            completed: 0,
            failed: 0,
            cancelled: 0,
            failures_by_kind: Vec::new(),
            output_tokens: 0,
            histograms: std::array::from_fn(|_| histogram()),
            schedule_lag: Histogram::new_with_bounds(1, MAX_MICROS, 3)
                .expect("valid histogram bounds"),
            server_gauges: Vec::new(),
        }
    }

    /// The schedule lag of the requests recorded so far, in microseconds (none from the
    /// native engine, which has no schedule of sends).
    pub fn schedule_lag(&self) -> &Histogram<u64> {
        &self.schedule_lag
    }

    /// The values of one latency so far, in microseconds.
    pub fn histogram(&self, metric: LiveMetric) -> &Histogram<u64> {
        &self.histograms[metric as usize]
    }

    fn add(&mut self, record: &RequestRecord) {
        let lag = record.start_time - record.intended_start_time - record.concurrency_wait;
        let micros = (lag.max(0.0) * 1e6).round().min(MAX_MICROS as f64) as u64;
        // In bounds by the clamp: recording cannot fail.
        let _ = self.schedule_lag.record(micros);
        if !record.succeeded() {
            match record.failure() {
                _ if record.cancelled() => self.cancelled += 1,
                Some(failure) => {
                    self.failed += 1;
                    match self
                        .failures_by_kind
                        .iter_mut()
                        .find(|(k, _)| *k == failure.kind)
                    {
                        Some((_, n)) => *n += 1,
                        None => self.failures_by_kind.push((failure.kind, 1)),
                    }
                }
                None => {}
            }
            return;
        }
        // The live count is the server's usage or, without it, one token per chunk.
        let tokens = record
            .output_tokens
            .unwrap_or_else(|| u32::try_from(record.itl.len() + 1).unwrap_or(u32::MAX));
        self.add_success(
            record.ttft,
            record.latency,
            record.itl.iter().copied(),
            tokens,
        );
    }

    fn add_success(
        &mut self,
        ttft: f64,
        latency: f64,
        itl: impl Iterator<Item = f64>,
        tokens: u32,
    ) {
        self.completed += 1;
        self.output_tokens += u64::from(tokens);
        let mut put = |metric: LiveMetric, seconds: f64| {
            let micros = (seconds * 1e6).round().clamp(1.0, MAX_MICROS as f64) as u64;
            // In bounds by the clamp: recording cannot fail.
            let _ = self.histograms[metric as usize].record(micros);
        };
        put(LiveMetric::Ttft, ttft);
        put(LiveMetric::E2el, latency);
        // Like vLLM's TPOT: over requests with more than one output token.
        if tokens > 1 {
            put(LiveMetric::Tpot, (latency - ttft) / f64::from(tokens - 1));
        }
        for gap in itl {
            put(LiveMetric::Itl, gap);
        }
    }
}

/// The requests counted so far (a part of [`LiveSnapshot`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveCounts {
    pub sent: u64,
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
    /// Failed requests by kind, in the order the kinds first failed.
    pub failures_by_kind: Vec<(FailureKind, u64)>,
}

impl LiveCounts {
    /// Sent and not yet recorded (a request is recorded once its answer is decoded).
    pub fn in_flight(&self) -> u64 {
        self.sent
            .saturating_sub(self.completed + self.failed + self.cancelled)
    }
}

/// The shared, growing figures of one run.
#[derive(Debug)]
pub struct LiveStats {
    inner: Mutex<LiveSnapshot>,
    /// Counted apart, without the lock: the load generator adds one per request it sends.
    sent: AtomicU64,
}

impl Default for LiveStats {
    fn default() -> Self {
        LiveStats {
            inner: Mutex::new(LiveSnapshot::new()),
            sent: AtomicU64::new(0),
        }
    }
}

impl LiveStats {
    /// A request was sent (one relaxed atomic add on the send path: no lock).
    pub fn sent(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    /// A request's record, once it is built.
    pub fn add(&self, record: &RequestRecord) {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .add(record);
    }

    /// A successful request measured without a record (the native engine's): its TTFT,
    /// end-to-end latency and gaps in seconds, and its output tokens.
    pub fn add_success(
        &self,
        ttft: f64,
        latency: f64,
        itl: impl Iterator<Item = f64>,
        tokens: u32,
    ) {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .add_success(ttft, latency, itl, tokens);
    }

    /// The gauges of the latest `/metrics` read of server `source` (a few times a second
    /// at most, from the scraping task).
    pub fn set_server_gauges(&self, source: &str, gauges: Vec<(&'static str, f64)>) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        match inner.server_gauges.iter_mut().find(|(s, _)| s == source) {
            Some((_, values)) => *values = gauges,
            None => inner.server_gauges.push((source.to_owned(), gauges)),
        }
    }

    /// The counts so far, without the latencies: a cheap copy (no histogram is cloned)
    /// for a view that shows only them, such as the progress bar's message.
    pub fn counts(&self) -> LiveCounts {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        LiveCounts {
            sent: self.sent.load(Ordering::Relaxed),
            completed: inner.completed,
            failed: inner.failed,
            cancelled: inner.cancelled,
            failures_by_kind: inner.failures_by_kind.clone(),
        }
    }

    /// A copy of the figures so far.
    pub fn snapshot(&self) -> LiveSnapshot {
        let mut snapshot = self
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        snapshot.sent = self.sent.load(Ordering::Relaxed);
        snapshot
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_the_snapshots_counts_and_in_flight_what_is_not_recorded() {
        let live = LiveStats::default();
        for _ in 0..5 {
            live.sent();
        }
        let ok = RequestRecord {
            ttft: 0.01,
            latency: 0.02,
            ..RequestRecord::default()
        };
        live.add(&ok);
        live.add(&RequestRecord {
            outcome: Err(FailureKind::Reset.failure("reset")),
            ..RequestRecord::default()
        });
        let counts = live.counts();
        let snapshot = live.snapshot();
        assert_eq!(
            counts,
            LiveCounts {
                sent: 5,
                completed: 1,
                failed: 1,
                cancelled: 0,
                failures_by_kind: vec![(FailureKind::Reset, 1)],
            }
        );
        assert_eq!(
            (snapshot.sent, snapshot.completed, snapshot.failed),
            (5, 1, 1)
        );
        assert_eq!(counts.in_flight(), 3);
    }
}
