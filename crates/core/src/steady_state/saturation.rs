//! Over-saturation: whether waiting grew without bound while the run went on, which means
//! the load was above what the server sustains and every figure of the run depends on
//! how long it ran (a longer run would have reported a longer TTFT). The idea is
//! GuideLLM's over-saturation detector (a t test on the slope of TTFT, and of the number
//! of requests in the system, against time), applied after the run to its records:
//!
//! - the series are each successful request's TTFT, its client queue time (the wait for a
//!   `--max-concurrency` slot, where a client-side backlog shows), and the number of
//!   requests in the system when it was released (released and not yet answered, queued
//!   ones included), all against the time it was released;
//! - the first quarter of the requests is left out (the ramp-up), the rest cut into
//!   [`BINS`] groups of consecutive requests whose means are fitted with a line: requests
//!   released close together share their wait, so the groups, not the requests, are the
//!   independent points (GuideLLM caps its count of points at the run's seconds for the
//!   same reason);
//! - a series rises when its slope is positive at 95% confidence (one-sided t test,
//!   `BINS - 2` degrees of freedom) and the fitted growth over the run is large: at least half
//!   the series' median and at least a floor (10 ms, one request), so that a significant
//!   but tiny drift is not a warning;
//! - the run is over-saturated when the requests in the system rise and the TTFT or the
//!   client queue time rises with them.

use crate::metrics::significance::LineFit;
use crate::metrics::stats;
use crate::record::RequestRecord;

/// The groups of consecutive requests whose means are fitted.
pub const BINS: usize = 10;
/// Fewer successful requests than this after the first quarter are not assessed.
pub const MIN_REQUESTS: usize = 4 * BINS;
/// The significance level of the slope's test.
const ALPHA: f64 = 0.05;
/// The fitted growth over the run must be at least this share of the series' median.
const GROWTH_SHARE: f64 = 0.5;
/// ... and at least this much: 10 ms for the waits.
const WAIT_FLOOR_S: f64 = 0.010;
/// ... and one request for the requests in the system.
const CONCURRENCY_FLOOR: f64 = 1.0;

/// A series' trend over the run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trend {
    /// The fitted slope, in the series' unit per second of the run.
    pub slope: f64,
    /// The slope times the time the fitted groups span: how much the series grew.
    pub growth: f64,
    /// The series' median over the assessed requests.
    pub median: f64,
    /// The one-sided p-value of a positive slope.
    pub p_value: f64,
    floor: f64,
}

impl Trend {
    /// Positive at 95% confidence, and large (see the module documentation).
    pub fn rising(&self) -> bool {
        self.slope > 0.0
            && self.p_value < ALPHA
            && self.growth >= (GROWTH_SHARE * self.median).max(self.floor)
    }

    fn of(points: &[(f64, f64)], median: f64, floor: f64) -> Option<Trend> {
        let fit = LineFit::of(points)?;
        let span = points.last()?.0 - points.first()?.0;
        Some(Trend {
            slope: fit.slope,
            growth: fit.slope * span,
            median,
            p_value: fit.p_positive(),
            floor,
        })
    }
}

/// The run's trends, when it could be assessed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Saturation {
    /// TTFT, in seconds per second.
    pub ttft: Trend,
    /// Client queue time, in seconds per second.
    pub client_queue: Trend,
    /// Requests in the system, per second.
    pub concurrency: Trend,
}

impl Saturation {
    /// Requests piled up and their wait grew with them.
    pub fn oversaturated(&self) -> bool {
        self.concurrency.rising() && (self.ttft.rising() || self.client_queue.rising())
    }

    /// The warning for an over-saturated run, `None` for another.
    pub fn warning(&self) -> Option<String> {
        if !self.oversaturated() {
            return None;
        }
        let (what, trend) = if self.ttft.rising() {
            ("TTFT", self.ttft)
        } else {
            ("client queue time", self.client_queue)
        };
        Some(format!(
            "over-saturation: the requests in the system grew by {:.0} and their {what} by \
             {:.0} ms ({:.1} ms per second of the run) without levelling off: requests arrive \
             faster than they are served, so the run's latencies depend on how long it ran; \
             a lower --request-rate gives figures of a load that can be sustained",
            self.concurrency.growth,
            trend.growth * 1000.0,
            trend.slope * 1000.0
        ))
    }
}

/// The trends of a run's records (every sent request), or `None` when it cannot be
/// assessed: too few successful requests, or all released at once (no time axis).
pub fn assess(records: &[RequestRecord]) -> Option<Saturation> {
    let mut released: Vec<&RequestRecord> = records.iter().filter(|r| r.succeeded()).collect();
    released.sort_by(|a, b| a.dispatch_time.total_cmp(&b.dispatch_time));
    let assessed = &released[released.len() / 4..];
    if assessed.len() < MIN_REQUESTS {
        return None;
    }
    let in_system = InSystem::new(records);
    let series = |value: &dyn Fn(&RequestRecord) -> f64, floor: f64| {
        let values: Vec<f64> = assessed.iter().map(|r| value(r)).collect();
        Trend::of(&binned(assessed, &values), stats::median(&values), floor)
    };
    Some(Saturation {
        ttft: series(&|r| r.ttft, WAIT_FLOOR_S)?,
        client_queue: series(&|r| r.start_time - r.dispatch_time, WAIT_FLOOR_S)?,
        concurrency: series(&|r| in_system.at(r.dispatch_time) as f64, CONCURRENCY_FLOOR)?,
    })
}

/// [`BINS`] groups of consecutive requests (sizes differing by one at most): each group's
/// mean release time and mean value.
fn binned(requests: &[&RequestRecord], values: &[f64]) -> Vec<(f64, f64)> {
    let n = requests.len();
    (0..BINS)
        .map(|b| {
            let range = b * n / BINS..(b + 1) * n / BINS;
            let len = range.len() as f64;
            let x = requests[range.clone()]
                .iter()
                .map(|r| r.dispatch_time)
                .sum::<f64>();
            let y = values[range].iter().sum::<f64>();
            (x / len, y / len)
        })
        .collect()
}

/// The requests in the system at a time: released at or before it, not answered yet.
struct InSystem {
    released: Vec<f64>,
    answered: Vec<f64>,
}

impl InSystem {
    fn new(records: &[RequestRecord]) -> InSystem {
        let mut released: Vec<f64> = records.iter().map(|r| r.dispatch_time).collect();
        let mut answered: Vec<f64> = records.iter().map(|r| r.start_time + r.latency).collect();
        released.sort_by(f64::total_cmp);
        answered.sort_by(f64::total_cmp);
        InSystem { released, answered }
    }

    fn at(&self, t: f64) -> usize {
        let released = self.released.partition_point(|&x| x <= t);
        let answered = self.answered.partition_point(|&x| x <= t);
        released.saturating_sub(answered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steady_state::tests::request;

    /// `n` requests released `gap` apart to a server that answers each in `service`
    /// seconds, `slots` at a time (the client's `--max-concurrency`): each waits for the
    /// first free slot.
    fn queueing(n: usize, gap: f64, service: f64, slots: usize) -> Vec<RequestRecord> {
        let mut free = vec![0.0f64; slots];
        (0..n)
            .map(|i| {
                let dispatch = i as f64 * gap;
                let slot = (0..slots)
                    .min_by(|&a, &b| free[a].total_cmp(&free[b]))
                    .unwrap();
                let start = dispatch.max(free[slot]);
                free[slot] = start + service;
                request(i, dispatch, start, service)
            })
            .collect()
    }

    #[test]
    fn a_load_above_capacity_is_over_saturated() {
        // Two slots of 20 ms: 100 requests/s at most; 200 arrive per second.
        let s = assess(&queueing(200, 0.005, 0.020, 2)).unwrap();
        assert!(s.concurrency.rising(), "{s:?}");
        assert!(s.client_queue.rising(), "{s:?}");
        // The backlog grows by 100 requests per second and drains at 100 per second: a
        // request released a second later waits a second longer.
        assert!((s.client_queue.slope - 1.0).abs() < 0.05, "{s:?}");
        assert!((s.concurrency.slope - 100.0).abs() < 5.0, "{s:?}");
        assert!(!s.ttft.rising());
        assert!(s.oversaturated());
        assert!(s.warning().unwrap().contains("client queue time"));
    }

    #[test]
    fn a_load_below_capacity_is_not() {
        // 50 requests/s to the same two slots: nobody waits.
        let s = assess(&queueing(200, 0.020, 0.020, 2)).unwrap();
        assert!(!s.oversaturated(), "{s:?}");
        assert_eq!(s.client_queue.median, 0.0);
        assert_eq!(s.warning(), None);
        // A server whose TTFT wobbles but does not grow.
        let wobbling: Vec<RequestRecord> = (0..200)
            .map(|i| {
                let t = i as f64 * 0.02;
                let mut r = request(i, t, t, 0.1);
                r.ttft = if i % 3 == 0 { 0.05 } else { 0.03 };
                r
            })
            .collect();
        assert!(!assess(&wobbling).unwrap().oversaturated());
    }

    #[test]
    fn a_server_whose_ttft_grows_is_over_saturated() {
        // No client cap: every request is sent on time, and the server's queue shows in
        // TTFT (and in the requests in flight, which live ever longer).
        let records: Vec<RequestRecord> = (0..300)
            .map(|i| {
                let t = i as f64 * 0.01;
                let ttft = 0.02 + 0.5 * t;
                let mut r = request(i, t, t, ttft + 0.05);
                r.ttft = ttft;
                r
            })
            .collect();
        let s = assess(&records).unwrap();
        assert!(s.ttft.rising() && s.concurrency.rising(), "{s:?}");
        assert!(s.warning().unwrap().contains("TTFT"));
    }

    #[test]
    fn bursts_and_short_runs_are_not_assessed() {
        let burst: Vec<RequestRecord> = (0..100).map(|i| request(i, 0.0, 0.0, 1.0)).collect();
        assert_eq!(assess(&burst), None);
        assert_eq!(assess(&queueing(50, 0.005, 0.020, 2)), None);
    }
}
