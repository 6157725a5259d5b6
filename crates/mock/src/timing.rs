//! What the mock server actually did, as opposed to what it was asked to do: the time
//! from each request's arrival to its first token chunk, and the gaps between token
//! chunks, measured when each chunk is handed to the connection. Tests and the benchmark
//! compare the client's measurements with these, so timer lateness on a busy machine is
//! not mistaken for client error.
//!
//! Two views of the same points in time: running aggregates over every stream (a few
//! relaxed atomics per chunk), and one [`RequestTiming`] per stream whose request carried
//! an `x-request-id` header, so a client can pair each of its requests (and each gap) with
//! the server's and report exact error percentiles. A stream collects its own gaps in a
//! vector sized once up front and hands the finished entry over under one lock, so the
//! per-chunk path takes no lock and allocates nothing.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;

/// At most this many per-request entries are kept; the oldest go first.
///
/// Together with [`MAX_KEPT_GAPS`] and [`MAX_ID_BYTES`] this bounds the list at about
/// 100,000 x (256 + 80) bytes + 4 Mi x 8 bytes, under 70 MiB. The largest intended use
/// (10,000 requests of 64 tokens, 630,000 gaps) is well inside both limits; a server that
/// serves more keeps the newest requests, which are the latest benchmark run's.
pub const MAX_KEPT_REQUESTS: usize = 100_000;

/// At most this many gaps are kept over all per-request entries (8 bytes each).
pub const MAX_KEPT_GAPS: usize = 4 * 1024 * 1024;

/// Longer `x-request-id` values are not recorded per request (the aggregates still count
/// the stream): bench's ids (`<prefix><index>`) are far shorter, and this keeps a client
/// with huge ids from growing the list beyond its bound.
pub const MAX_ID_BYTES: usize = 256;

/// Running sums and extremes, updated with relaxed atomics (a few per chunk, no lock),
/// plus the finished per-request entries.
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
    requests: Mutex<KeptRequests>,
    /// Requests whose client went away before their answer was generated whole.
    aborted: AtomicU64,
    /// Their `x-request-id`s, oldest first, at most [`MAX_KEPT_REQUESTS`].
    aborted_ids: Mutex<VecDeque<String>>,
}

/// The per-request entries, oldest first, within [`MAX_KEPT_REQUESTS`] and
/// [`MAX_KEPT_GAPS`].
#[derive(Debug, Default)]
struct KeptRequests {
    list: VecDeque<RequestTiming>,
    /// Gaps over all entries in `list`.
    gaps: usize,
    /// Entries dropped to stay within the bounds.
    evicted: u64,
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
            requests: Mutex::new(KeptRequests::default()),
            aborted: AtomicU64::new(0),
            aborted_ids: Mutex::new(VecDeque::new()),
        }
    }
}

/// What the server did for one streamed request, in ms.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestTiming {
    /// The request's `x-request-id` header (bench sends `<request-id-prefix><index>`).
    pub id: String,
    /// Arrival to the first token chunk.
    pub ttft_ms: f64,
    /// Each gap between successive token chunks: `tokens - 1` of them for a stream that
    /// ran to its end, fewer for one that ended early (client gone, delivery fault).
    pub itl_ms: Vec<f64>,
    /// Arrival to the first chunk that carried content rather than reasoning (with
    /// `--reasoning-tokens N`, the chunk of token N): the server's side of a client's
    /// time to first content token. Equal to `ttft_ms` when the answer has no reasoning;
    /// `null` when no content chunk was sent (an answer of reasoning alone, one cut short
    /// before its content, or a pooling answer, which has no output).
    pub first_content_ms: Option<f64>,
    /// With `--per-request-metrics`, the `metrics` object the response carried, exactly
    /// (absent otherwise). A whole (non-streamed) answer has an entry only then: its
    /// `ttft_ms` is arrival to the body's release and it has no gaps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<SentMetrics>,
}

/// vLLM's per-request timing (`--enable-per-request-metrics`) as the mock sends it, in
/// ms, from its own clock. vLLM's TTFT runs from the request's scheduling, so the mock's
/// own wait under load (`--ttft-per-running-ms`) is its queue time and its TTFT is the
/// rest of its time to the first token; `queue + ttft` is what `ttft_ms` records.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SentMetrics {
    pub queue_time_ms: f64,
    pub time_to_first_token_ms: f64,
    pub generation_time_ms: f64,
    /// `generation_time_ms / (n - 1)`; none for an answer of one token (vLLM omits it).
    pub mean_itl_ms: Option<f64>,
    /// vLLM's: `n` over the time from scheduling to the last token (prefill included);
    /// none when that took no time.
    pub tokens_per_second: Option<f64>,
}

impl SentMetrics {
    /// The figures of an answer of `tokens` tokens whose first left `first` after its
    /// arrival (`queue` of it the wait for load) and whose last left `generation` later.
    pub fn new(first: Duration, queue: Duration, generation: Duration, tokens: u32) -> Self {
        let generation_time_ms = ms(generation);
        let ttft = first.saturating_sub(queue);
        let inference = ttft + generation;
        SentMetrics {
            queue_time_ms: ms(queue),
            time_to_first_token_ms: ms(ttft),
            generation_time_ms,
            mean_itl_ms: (tokens > 1).then(|| generation_time_ms / f64::from(tokens - 1)),
            tokens_per_second: (!inference.is_zero())
                .then(|| f64::from(tokens) / inference.as_secs_f64()),
        }
    }

    /// `,"metrics":{...}`, the member as vLLM's response objects end with it (a value it
    /// has none of is left out, as in its streamed chunks). Rust's float formatting is the
    /// shortest text that reads back as the same number, so a client reads exactly what
    /// `/mock/requests` reports.
    pub fn write_member(&self, out: &mut Vec<u8>) {
        use std::io::Write as _;
        let _ = write!(
            out,
            r#","metrics":{{"time_to_first_token_ms":{},"generation_time_ms":{},"queue_time_ms":{}"#,
            self.time_to_first_token_ms, self.generation_time_ms, self.queue_time_ms
        );
        if let Some(itl) = self.mean_itl_ms {
            let _ = write!(out, r#","mean_itl_ms":{itl}"#);
        }
        if let Some(rate) = self.tokens_per_second {
            let _ = write!(out, r#","tokens_per_second":{rate}"#);
        }
        out.push(b'}');
    }
}

/// A stream's own record of its request while it runs; becomes a [`RequestTiming`].
#[derive(Debug)]
pub(super) struct PendingRequest {
    entry: RequestTiming,
    first_token_sent: bool,
}

impl PendingRequest {
    /// Room for `gaps` gaps is reserved now, so that recording a chunk never allocates.
    pub fn new(id: String, gaps: usize) -> Self {
        PendingRequest {
            entry: RequestTiming {
                id,
                ttft_ms: 0.0,
                itl_ms: Vec::with_capacity(gaps),
                first_content_ms: None,
                metrics: None,
            },
            first_token_sent: false,
        }
    }

    pub fn first_token(&mut self, since_arrival: Duration) {
        self.entry.ttft_ms = ms(since_arrival);
        self.first_token_sent = true;
    }

    pub fn gap(&mut self, since_previous: Duration) {
        self.entry.itl_ms.push(ms(since_previous));
    }

    /// The first chunk with content (not reasoning) left at `since_arrival`.
    pub fn first_content(&mut self, since_arrival: Duration) {
        self.entry.first_content_ms = Some(ms(since_arrival));
    }

    /// The per-request metrics the stream's usage chunk carries.
    pub fn metrics(&mut self, metrics: SentMetrics) {
        self.entry.metrics = Some(metrics);
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
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

    /// Keeps a finished stream's entry (one lock); a stream that never sent a token has
    /// no TTFT and leaves none.
    pub(super) fn finish(&self, request: PendingRequest) {
        if !request.first_token_sent {
            return;
        }
        let mut entry = request.entry;
        // A stream that ended early reserved more than it used.
        entry.itl_ms.shrink_to_fit();
        self.keep(entry);
    }

    /// Keeps the entry of a whole answer sent with per-request metrics, `since_arrival`
    /// after its request arrived.
    pub(super) fn whole(&self, id: String, since_arrival: Duration, metrics: SentMetrics) {
        self.keep(RequestTiming {
            id,
            ttft_ms: ms(since_arrival),
            itl_ms: Vec::new(),
            first_content_ms: None,
            metrics: Some(metrics),
        });
    }

    fn keep(&self, entry: RequestTiming) {
        let mut kept = self.kept();
        kept.gaps += entry.itl_ms.len();
        kept.list.push_back(entry);
        while kept.list.len() > MAX_KEPT_REQUESTS || kept.gaps > MAX_KEPT_GAPS {
            let Some(old) = kept.list.pop_front() else {
                break;
            };
            kept.gaps -= old.itl_ms.len();
            kept.evicted += 1;
        }
    }

    /// A request whose client closed its connection before the answer's last token (a
    /// client that gave up: vLLM drops such a request), with its
    /// `x-request-id` when it had one. Rare, so one lock is fine.
    pub(super) fn abort(&self, id: Option<&str>) {
        self.aborted.fetch_add(1, Ordering::Relaxed);
        if let Some(id) = id {
            let mut ids = self
                .aborted_ids
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if ids.len() == MAX_KEPT_REQUESTS {
                ids.pop_front();
            }
            ids.push_back(id.to_owned());
        }
    }

    /// The `x-request-id`s of the requests their clients abandoned, in the order they did.
    pub fn aborted_ids(&self) -> Vec<String> {
        let ids = self
            .aborted_ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        ids.iter().cloned().collect()
    }

    /// The kept per-request entries, in the order their streams finished.
    pub fn requests(&self) -> Vec<RequestTiming> {
        self.kept().list.iter().cloned().collect()
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, KeptRequests> {
        // The list stays consistent even if a holder panicked: every update is a push or
        // pop with its counter.
        self.requests.lock().unwrap_or_else(PoisonError::into_inner)
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
        let (requests_kept, requests_evicted) = {
            let kept = self.kept();
            (kept.list.len() as u64, kept.evicted)
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
            requests_kept,
            requests_evicted,
            aborted: self.aborted.load(Ordering::Relaxed),
        }
    }
}

/// Records an abort when dropped before [`AbortGuard::answered`]: a whole answer's handler
/// is dropped while it waits for the answer's time when its client went away.
pub(super) struct AbortGuard<'a> {
    recorder: &'a TimingRecorder,
    id: Option<&'a str>,
    answered: bool,
}

impl<'a> AbortGuard<'a> {
    pub(super) fn new(recorder: &'a TimingRecorder, id: Option<&'a str>) -> Self {
        AbortGuard {
            recorder,
            id,
            answered: false,
        }
    }

    /// The answer was generated whole: no abort.
    pub(super) fn answered(mut self) {
        self.answered = true;
    }
}

impl Drop for AbortGuard<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.recorder.abort(self.id);
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
    /// Per-request entries held (`GET /mock/requests`).
    pub requests_kept: u64,
    /// Per-request entries dropped, oldest first, to stay within the memory bound.
    pub requests_evicted: u64,
    /// Requests whose client closed the connection before the answer's last token was
    /// sent (not those the mock cut on purpose); their ids: `GET /mock/aborted`.
    pub aborted: u64,
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

    fn finished(r: &TimingRecorder, id: &str, gaps: usize) {
        let mut p = PendingRequest::new(id.to_owned(), gaps);
        p.first_token(Duration::from_micros(50_250));
        for i in 0..gaps {
            p.gap(Duration::from_micros(10_000 + i as u64));
        }
        r.finish(p);
    }

    #[test]
    fn finished_streams_are_kept_in_ms_and_silent_ones_are_not() {
        let r = TimingRecorder::default();
        finished(&r, "a-0", 2);
        // Never sent a token: no TTFT to report.
        r.finish(PendingRequest::new("a-1".to_owned(), 3));
        assert_eq!(
            r.requests(),
            vec![RequestTiming {
                id: "a-0".to_owned(),
                ttft_ms: 50.25,
                itl_ms: vec![10.0, 10.001],
                first_content_ms: None,
                metrics: None,
            }]
        );
        assert_eq!(r.snapshot().requests_kept, 1);
    }

    /// The member vLLM writes, with the numbers kept exactly; one token has no ITL.
    #[test]
    fn per_request_metrics_are_vllms_member() {
        let m = SentMetrics::new(
            Duration::from_micros(70_500),
            Duration::from_millis(20),
            Duration::from_millis(30),
            4,
        );
        let mut out = Vec::new();
        m.write_member(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#","metrics":{"time_to_first_token_ms":50.5,"generation_time_ms":30,"queue_time_ms":20,"mean_itl_ms":10,"tokens_per_second":49.68944099378882}"#
        );
        let one = SentMetrics::new(Duration::from_millis(5), Duration::ZERO, Duration::ZERO, 1);
        let mut out = Vec::new();
        one.write_member(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#","metrics":{"time_to_first_token_ms":5,"generation_time_ms":0,"queue_time_ms":0,"tokens_per_second":200}"#
        );
    }

    #[test]
    fn the_oldest_entries_go_beyond_the_bounds() {
        let r = TimingRecorder::default();
        // Three entries of a third of the gap budget each, plus one: the first must go.
        let third = MAX_KEPT_GAPS / 3;
        for id in ["x", "y", "z"] {
            finished(&r, id, third + 1);
        }
        let ids: Vec<String> = r.requests().into_iter().map(|e| e.id).collect();
        assert_eq!(ids, ["y", "z"]);
        let s = r.snapshot();
        assert_eq!((s.requests_kept, s.requests_evicted), (2, 1));

        let r = TimingRecorder::default();
        for i in 0..MAX_KEPT_REQUESTS + 2 {
            finished(&r, &i.to_string(), 0);
        }
        let kept = r.requests();
        assert_eq!(kept.len(), MAX_KEPT_REQUESTS);
        assert_eq!(kept[0].id, "2");
        assert_eq!(r.snapshot().requests_evicted, 2);
    }
}
