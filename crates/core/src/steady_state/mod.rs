//! The run's steady state: the stretch of time between the ramp-up (concurrency still
//! climbing to its plateau) and the drain (the last requests finishing with nothing sent
//! after them), found from the requests' own start and end times, and the figures of the
//! requests that lived inside it. A run's whole-run figures mix the three phases; a short
//! run's are mostly ramp-up and drain, so its throughput understates what the server
//! sustains. The window's figures are reported beside vLLM's, never instead of them.
//!
//! [`saturation`] is the other look at the run's time axis: whether waiting grew without
//! bound while it ran (the load was above what the server sustains).
//!
//! The window:
//!
//! - concurrency over time is the number of requests sent and not yet answered (every
//!   sent request, failed ones too: they held a slot), a step function of the records'
//!   `start_time` and `start_time + latency`;
//! - the plateau is the level concurrency holds for most of the sending time (its
//!   time-weighted median between the first and the last send; at least 1): under
//!   `--max-concurrency` above capacity that is the cap, at a Poisson rate the mean
//!   number in flight;
//! - the window starts when concurrency first reaches the plateau and ends when it last
//!   leaves it (after that it only drains);
//! - latency statistics count the successful requests that started and ended inside the
//!   window; the throughputs count the requests (and their output tokens) that ended
//!   inside it, per second of window.

pub mod saturation;

use std::fmt;

use crate::metrics::per_request::PerRequest;
use crate::metrics::stats::Summary;
use crate::record::RequestRecord;

/// Fewer successful requests than this inside the window make no steady state: their
/// statistics would say little.
pub const MIN_REQUESTS: usize = 10;

/// The window itself, in seconds since the benchmark started.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub start_s: f64,
    pub end_s: f64,
    /// The plateau's concurrency (requests in flight).
    pub concurrency: usize,
}

impl Window {
    pub fn duration_s(&self) -> f64 {
        self.end_s - self.start_s
    }

    /// Whether a request that started at `start` and ended at `end` lived inside.
    pub fn holds(&self, start: f64, end: f64) -> bool {
        start >= self.start_s && end <= self.end_s
    }
}

/// The steady state's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct SteadyState {
    pub window: Window,
    /// Successful requests that started and ended inside the window (the latencies').
    pub requests: usize,
    /// Successful requests that ended inside the window, per second of window.
    pub request_throughput: f64,
    /// Their output tokens per second of window.
    pub output_throughput: f64,
    pub ttft: Summary,
    /// Over the requests with more than one output token, as vLLM's TPOT.
    pub tpot: Summary,
    pub itl: Summary,
    pub e2el: Summary,
}

/// Why a run has no steady state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoSteadyState {
    /// Every request was sent at the same instant: concurrency jumps up, then drains.
    OneBurst,
    /// Too few successful requests started and ended inside the plateau.
    TooFewRequests { found: usize },
}

impl fmt::Display for NoSteadyState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoSteadyState::OneBurst => {
                f.write_str("every request was sent at once, so concurrency only drained")
            }
            NoSteadyState::TooFewRequests { found } => write!(
                f,
                "{found} successful requests started and ended inside the concurrency \
                 plateau, fewer than {MIN_REQUESTS}"
            ),
        }
    }
}

/// One step of concurrency: `level` requests in flight from `at` to the next step.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Step {
    at: f64,
    level: usize,
}

/// Concurrency over time: a step at every start and end (ends before starts at equal
/// times, so back-to-back requests do not overlap), one step per distinct time.
fn concurrency(records: &[RequestRecord]) -> Vec<Step> {
    let mut events: Vec<(f64, i64)> = records
        .iter()
        .flat_map(|r| [(r.start_time, 1), (r.start_time + r.latency.max(0.0), -1)])
        .collect();
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut steps: Vec<Step> = Vec::with_capacity(events.len());
    let mut level = 0i64;
    for (at, delta) in events {
        level += delta;
        let step = Step {
            at,
            level: level.max(0) as usize,
        };
        match steps.last_mut() {
            Some(last) if last.at == at => *last = step,
            _ => steps.push(step),
        }
    }
    steps
}

/// The level concurrency holds for most of `[from, to]` (the time-weighted median).
fn plateau(steps: &[Step], from: f64, to: f64) -> usize {
    let mut time_at: Vec<(usize, f64)> = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let next = steps.get(i + 1).map_or(step.at, |s| s.at);
        let held = next.min(to) - step.at.max(from);
        if held > 0.0 {
            time_at.push((step.level, held));
        }
    }
    time_at.sort_by_key(|&(level, _)| level);
    let total: f64 = time_at.iter().map(|&(_, t)| t).sum();
    let mut cumulative = 0.0;
    for (level, held) in time_at {
        cumulative += held;
        if cumulative >= total / 2.0 {
            return level;
        }
    }
    0
}

/// The steady-state window of a run's records (every sent request), or why it has none.
pub fn window(records: &[RequestRecord]) -> Result<Window, NoSteadyState> {
    let first_send = records.iter().map(|r| r.start_time).reduce(f64::min);
    let last_send = records.iter().map(|r| r.start_time).reduce(f64::max);
    let (Some(first_send), Some(last_send)) = (first_send, last_send) else {
        return Err(NoSteadyState::TooFewRequests { found: 0 });
    };
    if last_send <= first_send {
        return Err(NoSteadyState::OneBurst);
    }
    let steps = concurrency(records);
    let level = plateau(&steps, first_send, last_send).max(1);
    let start = steps.iter().find(|s| s.level >= level).map(|s| s.at);
    // The end of the last step at or above the plateau: the next step's time.
    let end = steps
        .windows(2)
        .rev()
        .find(|w| w[0].level >= level)
        .map(|w| w[1].at);
    match (start, end) {
        (Some(start_s), Some(end_s)) if end_s > start_s => Ok(Window {
            start_s,
            end_s,
            concurrency: level,
        }),
        _ => Err(NoSteadyState::TooFewRequests { found: 0 }),
    }
}

/// The steady state of a run: its [`window`] and the figures of the requests inside it.
/// `per_request` holds the records with their output token counts (as the metrics counted
/// them); `percentiles` are the run's `--metric-percentiles`.
pub fn of_run(per_request: &PerRequest, percentiles: &[f64]) -> Result<SteadyState, NoSteadyState> {
    let records = &per_request.records;
    let window = window(records)?;
    let (mut ttfts, mut tpots, mut itls, mut e2els) = (vec![], vec![], vec![], vec![]);
    let (mut ended, mut ended_tokens) = (0usize, 0u64);
    for (record, &output_len) in records.iter().zip(&per_request.output_lens) {
        let end = record.start_time + record.latency;
        if !record.succeeded() || end < window.start_s || end > window.end_s {
            continue;
        }
        ended += 1;
        ended_tokens += output_len;
        if !window.holds(record.start_time, end) {
            continue;
        }
        e2els.push(record.latency);
        if record.pooled_results.is_some() {
            continue;
        }
        ttfts.push(record.ttft);
        itls.extend_from_slice(&record.itl);
        if output_len > 1 {
            tpots.push((record.latency - record.ttft) / (output_len - 1) as f64);
        }
    }
    if e2els.len() < MIN_REQUESTS {
        return Err(NoSteadyState::TooFewRequests { found: e2els.len() });
    }
    let seconds = window.duration_s();
    Ok(SteadyState {
        window,
        requests: e2els.len(),
        request_throughput: ended as f64 / seconds,
        output_throughput: ended_tokens as f64 / seconds,
        ttft: Summary::of_seconds(ttfts, percentiles),
        tpot: Summary::of_seconds(tpots, percentiles),
        itl: Summary::of_seconds(itls, percentiles),
        e2el: Summary::of_seconds(e2els, percentiles),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A successful request sent at `start`, answered `latency` later, with a first token
    /// after a tenth of it and one gap per later token.
    pub(crate) fn request(index: usize, dispatch: f64, start: f64, latency: f64) -> RequestRecord {
        RequestRecord {
            index,
            start_time: start,
            dispatch_time: dispatch,
            intended_start_time: dispatch,
            concurrency_wait: start - dispatch,
            latency,
            ttft: latency / 10.0,
            itl: vec![latency * 0.9 / 3.0; 3],
            ..RequestRecord::default()
        }
    }

    fn per_request(records: Vec<RequestRecord>) -> PerRequest {
        PerRequest {
            output_lens: vec![4; records.len()],
            records,
            ..PerRequest::default()
        }
    }

    /// A closed loop of `slots` workers, each sending its next request as soon as the
    /// last one is answered, `latency` each, the workers' first sends `stagger` apart: a
    /// ramp-up of `(slots - 1) * stagger`, a plateau of `slots`, then a drain.
    pub(crate) fn closed_loop(
        slots: usize,
        per_slot: usize,
        latency: f64,
        stagger: f64,
    ) -> Vec<RequestRecord> {
        let mut records = Vec::new();
        for slot in 0..slots {
            for k in 0..per_slot {
                let start = slot as f64 * stagger + k as f64 * latency;
                records.push(request(records.len(), start, start, latency));
            }
        }
        records
    }

    #[test]
    fn the_window_excludes_the_ramp_up_and_the_drain() {
        // 4 workers starting 0.5 s apart, 20 requests of 1 s each: concurrency climbs
        // 1, 2, 3, 4 until 1.5 s, holds 4 until worker 0 stops at 20 s, then drains to
        // 21.5 s.
        let records = closed_loop(4, 20, 1.0, 0.5);
        let w = window(&records).unwrap();
        assert_eq!(w.concurrency, 4);
        assert_eq!(w.start_s, 1.5);
        assert_eq!(w.end_s, 20.0);
        let s = of_run(&per_request(records), &[99.0]).unwrap();
        // Requests inside [1.5, 20]: worker 0's 2nd to 20th (1-20 s: starts 1..=19) minus
        // the one starting at 1.0 -> starts 2..=19 (18); worker 1 (0.5 + k): 1.5..=19.5
        // ending <= 20 -> starts 1.5..=18.5 (18); worker 2: 2.0..=19.0 (18); worker 3:
        // 1.5..=18.5 (18) -> 72.
        assert_eq!(s.requests, 72);
        // Ended inside: every request ending in [1.5, 20]: 4 per second over 18.5 s,
        // counting exact ends: worker 0 ends 2..=20 (19), 1: 1.5..=19.5 (19), 2: 2..=20
        // (19), 3: 2.5..=19.5 (18) -> 75.
        assert!((s.request_throughput - 75.0 / 18.5).abs() < 1e-9, "{s:?}");
        assert!((s.output_throughput - 4.0 * 75.0 / 18.5).abs() < 1e-9);
        assert!((s.e2el.mean - 1000.0).abs() < 1e-9);
        assert!((s.ttft.mean - 100.0).abs() < 1e-9);
        assert!((s.tpot.mean - 300.0).abs() < 1e-9);
    }

    #[test]
    fn a_poisson_like_run_keeps_most_of_its_sending_time() {
        // A request every 0.1 s taking 1 s: concurrency climbs to 10 by 0.9 s (at 1.0 s
        // the first ends as the eleventh starts), holds 10 until the last send at 9.9 s,
        // then drains from 10.0 s.
        let records: Vec<RequestRecord> = (0..100)
            .map(|i| {
                let t = f64::from(i) * 0.1;
                request(i as usize, t, t, 1.0)
            })
            .collect();
        let w = window(&records).unwrap();
        assert_eq!(w.concurrency, 10);
        assert!((w.start_s - 0.9).abs() < 1e-9, "{w:?}");
        assert!((w.end_s - 10.0).abs() < 1e-9, "{w:?}");
    }

    #[test]
    fn bursts_and_short_runs_have_no_steady_state() {
        let burst: Vec<RequestRecord> = (0..50).map(|i| request(i, 0.0, 0.0, 1.0)).collect();
        assert_eq!(window(&burst), Err(NoSteadyState::OneBurst));
        let few = closed_loop(2, 4, 1.0, 0.5);
        assert!(window(&few).is_ok());
        assert_eq!(
            of_run(&per_request(few), &[99.0]),
            Err(NoSteadyState::TooFewRequests { found: 6 })
        );
        assert_eq!(window(&[]), Err(NoSteadyState::TooFewRequests { found: 0 }));
    }
}
