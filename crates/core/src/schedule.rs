//! Request arrival times, computed before the clock starts.
//!
//! Semantics follow vLLM's `get_request` and its ramp-up handling in
//! `vllm/benchmarks/serve.py`, so that a run with the same rate, burstiness and ramp-up
//! offers the server the same kind of load:
//!
//! - Every request, the first included, waits a gap after the previous one (the first
//!   after the start of the run). The gap is 0 when the rate in force is infinite,
//!   exactly `1 / rate` when burstiness is infinite, and otherwise a gamma draw with
//!   shape `burstiness` and scale `1 / (rate * burstiness)`: mean `1 / rate`, coefficient
//!   of variation `1 / sqrt(burstiness)` (burstiness 1 is a Poisson process).
//! - Without ramp-up, the cumulative offsets are rescaled so that the last request lands
//!   exactly at `num_requests / request_rate`; vLLM does this to remove the 1-2% run-to-run
//!   spread a plain sum of draws has, which would otherwise show up as throughput noise
//!   between seeds. Nothing is rescaled when all offsets are 0 (rate inf).
//! - With ramp-up, request `i` of `n` runs at a rate interpolated from the start to the
//!   end rate with progress `i / max(n - 1, 1)`, linearly or geometrically, its gap is
//!   drawn at that rate, and nothing is rescaled.
//!
//! The draws are vLLM's own, draw for draw: vLLM seeds numpy's legacy global generator
//! with `--seed` (`np.random.seed`, serve.py:2013) and draws each gap with
//! `np.random.gamma` (serve.py:479); bench does the same through the SDK's port of
//! numpy's `RandomState`, so the same flags give the same offsets as `vllm bench serve`
//! (checked against vLLM's `get_request` in `tests/data/schedule`). The one exception is
//! a dataset that itself draws from numpy's global generator after seeding it
//! (`prefix_repetition`, datasets.py:4195/4221): vLLM's gaps then continue that
//! dataset's stream, while bench's arrivals do not depend on which dataset runs.

use anyhow::{Result, ensure};
use bench_sdk::rng::RandomState;

/// What shapes the arrival times of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleConfig {
    /// `--num-prompts`.
    pub num_requests: usize,
    /// `--request-rate` in requests/s; `f64::INFINITY` sends everything at once.
    pub request_rate: f64,
    /// `--burstiness`: the gamma shape; `f64::INFINITY` gives evenly spaced arrivals.
    pub burstiness: f64,
    /// `--ramp-up-strategy` with its start and end rates.
    pub ramp_up: Option<RampUp>,
    pub seed: u64,
}

/// `--ramp-up-strategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RampUpStrategy {
    /// `start + (end - start) * progress`.
    Linear,
    /// `start * (end / start) ^ progress`.
    Exponential,
}

/// A rate that moves from `start_rps` (first request) to `end_rps` (last request).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RampUp {
    pub strategy: RampUpStrategy,
    /// `--ramp-up-start-rps`; a whole number, as vLLM's flag is an integer.
    pub start_rps: f64,
    /// `--ramp-up-end-rps`; a whole number, as vLLM's flag is an integer.
    pub end_rps: f64,
}

impl RampUp {
    /// The rate in force for request `index` of `total`.
    fn rate_at(&self, index: usize, total: usize) -> f64 {
        self.rate_for(index as f64 / total.saturating_sub(1).max(1) as f64)
    }

    /// The rate in force `progress` (0 to 1) of the way along the ramp.
    fn rate_for(&self, progress: f64) -> f64 {
        match self.strategy {
            RampUpStrategy::Linear => self.start_rps + (self.end_rps - self.start_rps) * progress,
            RampUpStrategy::Exponential => {
                self.start_rps * (self.end_rps / self.start_rps).powf(progress)
            }
        }
    }
}

/// The moment the whole-number part of the ramped rate reached `rps`, as vLLM records it
/// in the result's `rps_change_events`. vLLM stamps the initial start rate when the run
/// starts, and every later whole rate with the wall-clock time at which the first request
/// running at or above it is dispatched; stamping `now` when `request` is sent reproduces
/// that exactly.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RpsChange {
    pub rps: u64,
    /// The request whose dispatch marks the change; `None` for the initial start rate.
    pub request: Option<usize>,
    /// That request's scheduled time in seconds from the start of the run (0 for the
    /// initial entry): the intended time of the change.
    pub offset: f64,
}

/// When each request is due, computed up front so that nothing on the send path draws
/// random numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// Seconds from the start of the run at which request `i` is due; non-decreasing.
    pub offsets: Vec<f64>,
    /// The request rate in force for request `i` (constant without ramp-up).
    pub rates: Vec<f64>,
    /// One entry per whole requests/s the ramp passes through; empty without ramp-up.
    pub rps_change_events: Vec<RpsChange>,
}

/// Computes the arrival schedule, rejecting settings vLLM rejects, with the flag named.
pub fn build(cfg: &ScheduleConfig) -> Result<Schedule> {
    validate(cfg)?;
    let n = cfg.num_requests;
    let rates: Vec<f64> = match &cfg.ramp_up {
        Some(ramp) => (0..n).map(|i| ramp.rate_at(i, n)).collect(),
        None => vec![cfg.request_rate; n],
    };
    let mut rng = numpy_global(cfg.seed);
    let mut offsets = draw_gaps(&rates, cfg.burstiness, &mut rng);
    let mut elapsed = 0.0;
    for offset in &mut offsets {
        elapsed += *offset;
        *offset = elapsed;
    }
    if cfg.ramp_up.is_none() && elapsed != 0.0 {
        let factor = (n as f64 / cfg.request_rate) / elapsed;
        for offset in &mut offsets {
            *offset *= factor;
        }
    }
    let rps_change_events = match &cfg.ramp_up {
        Some(ramp) => rps_changes(ramp, &rates, &offsets),
        None => Vec::new(),
    };
    Ok(Schedule {
        offsets,
        rates,
        rps_change_events,
    })
}

/// vLLM's self-timed schedule (`--self-timed`, trace replay): each request is due at the
/// send time its dataset gave it (`send-at`, seconds from the start of the run) times
/// `time_scale` (0.5 replays twice as fast). As in vLLM, requests go in workload order: one
/// whose time has already passed when its turn comes is due at once, after the one before
/// it, so offsets stay non-decreasing; one without a time goes right after the one before.
/// There is no request rate (vLLM records 0 for each request).
pub fn timed(send_at: &[Option<f64>], time_scale: f64) -> Result<Schedule> {
    ensure!(
        !send_at.is_empty(),
        "--num-prompts must be at least 1: there are no requests to schedule"
    );
    ensure!(
        time_scale.is_finite() && time_scale > 0.0,
        "--time-scale must be a positive number, got {time_scale}"
    );
    let mut offsets = Vec::with_capacity(send_at.len());
    let mut last = 0.0f64;
    for (i, at) in send_at.iter().enumerate() {
        if let Some(at) = at {
            ensure!(
                at.is_finite() && *at >= 0.0,
                "the dataset gave request {i} the send time {at} s; a send time must be a \
                 non-negative number of seconds"
            );
            last = last.max(at * time_scale);
        }
        offsets.push(last);
    }
    Ok(Schedule {
        rates: vec![0.0; offsets.len()],
        offsets,
        rps_change_events: Vec::new(),
    })
}

/// The arrivals of a run bounded by time (`--duration`) rather than by its number of
/// requests: the same arrival process as [`build`]'s, or the same trace as [`timed`]'s, going
/// on until the run's time is up. Offsets are made one at a time, as the dispatcher asks
/// for them, so that an hour at thousands of requests a second holds no list of them.
///
/// What differs from a run of `--num-prompts` requests, and why:
/// - drawn gaps are not rescaled: vLLM rescales them so that its `n` requests end at
///   `n / rate`, and a run bounded by time has no `n` to land on. The draws themselves are
///   the same, from the same generator with the same seed, so the first `n` unscaled
///   offsets are a count run's before its rescaling;
/// - a ramp-up moves with the share of the duration that has passed (the previous
///   arrival's offset over the duration) instead of the share of the requests sent;
/// - a replayed trace starts over when it ends, one mean gap of the trace after its last
///   request (a trace of one request, or of requests all at one time, cannot repeat).
pub struct Arrivals {
    kind: ArrivalKind,
    /// How many offsets were made (the next one is for this position of the run).
    position: usize,
    /// A ramp-up's `rps_change_events`, stamped as the ramp passes each whole rate.
    changes: std::sync::Arc<std::sync::Mutex<Vec<RpsChange>>>,
}

enum ArrivalKind {
    Drawn {
        /// Boxed: numpy's state is 2.5 KB, the trace's variant a few words.
        rng: Box<RandomState>,
        rate: f64,
        burstiness: f64,
        ramp: Option<RampUp>,
        /// The run's duration, the ramp's length.
        horizon: f64,
        elapsed: f64,
        /// The last whole rate stamped in `changes`.
        last_rps: u64,
    },
    Trace {
        offsets: Vec<f64>,
        period: f64,
    },
}

impl Arrivals {
    /// `cfg`'s arrival process for `horizon` seconds (`cfg.num_requests` is not used).
    pub fn drawn(cfg: &ScheduleConfig, horizon: f64) -> Result<Arrivals> {
        validate(&ScheduleConfig {
            num_requests: 1,
            ..cfg.clone()
        })?;
        let mut changes = Vec::new();
        let mut last_rps = 0;
        if let Some(ramp) = &cfg.ramp_up {
            last_rps = ramp.start_rps as u64;
            changes.push(RpsChange {
                rps: last_rps,
                request: None,
                offset: 0.0,
            });
        }
        Ok(Arrivals {
            kind: ArrivalKind::Drawn {
                rng: Box::new(numpy_global(cfg.seed)),
                rate: cfg.request_rate,
                burstiness: cfg.burstiness,
                ramp: cfg.ramp_up,
                horizon,
                elapsed: 0.0,
                last_rps,
            },
            position: 0,
            changes: std::sync::Arc::new(std::sync::Mutex::new(changes)),
        })
    }

    /// A trace's send times ([`timed`]'s schedule of them), replayed again and again.
    pub fn trace(send_at: &[Option<f64>], time_scale: f64) -> Result<Arrivals> {
        let offsets = timed(send_at, time_scale)?.offsets;
        let (first, last) = (offsets[0], offsets[offsets.len() - 1]);
        ensure!(
            offsets.len() > 1 && last > first,
            "--duration: the dataset's trace cannot repeat: its {} request(s) are all due at              {last} s, so it has no length to start over after; run it without --duration",
            offsets.len()
        );
        let mean_gap = (last - first) / (offsets.len() - 1) as f64;
        Ok(Arrivals {
            kind: ArrivalKind::Trace {
                period: last + mean_gap,
                offsets,
            },
            position: 0,
            changes: Default::default(),
        })
    }

    /// Where a ramp-up's `rps_change_events` are stamped as the offsets are made: read it
    /// once the run is over.
    pub fn rps_changes(&self) -> std::sync::Arc<std::sync::Mutex<Vec<RpsChange>>> {
        self.changes.clone()
    }

    /// Whether every offset is 0 (an infinite rate): such a run is paced by its
    /// concurrency cap alone.
    pub fn unpaced(&self) -> bool {
        matches!(&self.kind, ArrivalKind::Drawn { rate, ramp: None, .. } if *rate == f64::INFINITY)
    }
}

impl Iterator for Arrivals {
    type Item = f64;

    fn next(&mut self) -> Option<f64> {
        let position = self.position;
        self.position += 1;
        match &mut self.kind {
            ArrivalKind::Trace { offsets, period } => {
                let n = offsets.len();
                Some(offsets[position % n] + (position / n) as f64 * *period)
            }
            ArrivalKind::Drawn {
                rng,
                rate,
                burstiness,
                ramp,
                horizon,
                elapsed,
                last_rps,
            } => {
                let rate = match ramp {
                    None => *rate,
                    Some(ramp) => ramp.rate_for((*elapsed / *horizon).min(1.0)),
                };
                let gap = draw_gaps(&[rate], *burstiness, rng)[0];
                *elapsed += gap;
                let current = rate as u64;
                if ramp.is_some() && current > *last_rps {
                    // Rare (once per whole rate): the lock is taken only then.
                    let mut changes = self
                        .changes
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    changes.extend((*last_rps + 1..=current).map(|rps| RpsChange {
                        rps,
                        request: Some(position),
                        offset: *elapsed,
                    }));
                    *last_rps = current;
                }
                Some(*elapsed)
            }
        }
    }
}

fn validate(cfg: &ScheduleConfig) -> Result<()> {
    ensure!(
        cfg.num_requests > 0,
        "--num-prompts must be at least 1: there are no requests to schedule"
    );
    // A comparison with NaN is false, so NaN is rejected too.
    ensure!(
        cfg.burstiness > 0.0,
        "--burstiness must be greater than 0, got {}",
        cfg.burstiness
    );
    let Some(ramp) = &cfg.ramp_up else {
        ensure!(
            cfg.request_rate > 0.0,
            "--request-rate must be greater than 0 (or inf to send everything at once), got {}",
            cfg.request_rate
        );
        return Ok(());
    };
    ensure!(
        cfg.request_rate == f64::INFINITY,
        "--request-rate cannot be combined with --ramp-up-strategy: the rate is set by \
         --ramp-up-start-rps and --ramp-up-end-rps; remove --request-rate"
    );
    for (flag, rps) in [
        ("--ramp-up-start-rps", ramp.start_rps),
        ("--ramp-up-end-rps", ramp.end_rps),
    ] {
        ensure!(
            rps.is_finite() && rps >= 0.0 && rps.fract() == 0.0,
            "{flag} must be a non-negative whole number of requests/s, got {rps}"
        );
    }
    ensure!(
        ramp.start_rps <= ramp.end_rps,
        "--ramp-up-start-rps ({}) must not be greater than --ramp-up-end-rps ({})",
        ramp.start_rps,
        ramp.end_rps
    );
    // vLLM accepts a linear ramp from 0 but then fails on the first request, which would
    // be sent at rate 0; say so before any work.
    ensure!(
        ramp.start_rps > 0.0,
        "--ramp-up-start-rps must be greater than 0: the first request is sent at the start \
         rate, and a rate of 0 never sends it"
    );
    Ok(())
}

/// numpy's global generator after `np.random.seed(seed)`. numpy takes seeds below 2^32 as
/// they are (vLLM's `--seed` must be one); a wider seed, which vLLM rejects, is seeded
/// as numpy seeds the array `[low 32 bits, high 32 bits]`, so it still gives its own
/// arrivals.
fn numpy_global(seed: u64) -> RandomState {
    match u32::try_from(seed) {
        Ok(seed) => RandomState::new(seed),
        Err(_) => RandomState::from_key(&[seed as u32, (seed >> 32) as u32]),
    }
}

/// Draws the gap before each request at the rate in force for it, as vLLM's
/// `get_request` does: `np.random.gamma(shape=burstiness, scale=1 / (rate * burstiness))`.
fn draw_gaps(rates: &[f64], burstiness: f64, rng: &mut RandomState) -> Vec<f64> {
    rates
        .iter()
        .map(|&rate| {
            if rate == f64::INFINITY {
                0.0
            } else if burstiness == f64::INFINITY {
                1.0 / rate
            } else {
                rng.gamma(burstiness, 1.0 / (rate * burstiness))
            }
        })
        .collect()
}

/// vLLM's `rps_change_events`: the start rate at time 0, then every whole requests/s the
/// ramp reaches, each stamped with the first request that runs at or above it.
fn rps_changes(ramp: &RampUp, rates: &[f64], offsets: &[f64]) -> Vec<RpsChange> {
    // Validation made the rates finite and the start a whole number, so the casts are
    // exact truncations, as Python's `int()`.
    let mut last = ramp.start_rps as u64;
    let mut events = vec![RpsChange {
        rps: last,
        request: None,
        offset: 0.0,
    }];
    for (i, (&rate, &offset)) in rates.iter().zip(offsets).enumerate() {
        let current = rate as u64;
        if current > last {
            events.extend((last + 1..=current).map(|rps| RpsChange {
                rps,
                request: Some(i),
                offset,
            }));
            last = current;
        }
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timed_schedules_follow_the_dataset_scaled_and_in_order() {
        let s = timed(&[Some(0.5), None, Some(2.0), Some(1.0), Some(3.0)], 0.5).unwrap();
        // Scaled by 0.5; the untimed request and the late one go after their predecessor.
        assert_eq!(s.offsets, [0.25, 0.25, 1.0, 1.0, 1.5]);
        assert_eq!(s.rates, [0.0; 5]);
        assert!(s.rps_change_events.is_empty());
        let err = timed(&[Some(f64::NAN)], 1.0).unwrap_err().to_string();
        assert!(
            err.contains("request 0") && err.contains("send time"),
            "{err}"
        );
        let err = timed(&[Some(1.0)], 0.0).unwrap_err().to_string();
        assert!(err.contains("--time-scale"), "{err}");
        assert!(timed(&[], 1.0).is_err());
    }

    fn constant(
        num_requests: usize,
        request_rate: f64,
        burstiness: f64,
        seed: u64,
    ) -> ScheduleConfig {
        ScheduleConfig {
            num_requests,
            request_rate,
            burstiness,
            ramp_up: None,
            seed,
        }
    }

    fn ramped(
        num_requests: usize,
        strategy: RampUpStrategy,
        start_rps: f64,
        end_rps: f64,
    ) -> ScheduleConfig {
        ScheduleConfig {
            num_requests,
            request_rate: f64::INFINITY,
            burstiness: 1.0,
            ramp_up: Some(RampUp {
                strategy,
                start_rps,
                end_rps,
            }),
            seed: 7,
        }
    }

    fn mean_and_cv(xs: &[f64]) -> (f64, f64) {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        (mean, var.sqrt() / mean)
    }

    fn gaps(offsets: &[f64]) -> Vec<f64> {
        let mut previous = 0.0;
        offsets
            .iter()
            .map(|&o| {
                let gap = o - previous;
                previous = o;
                gap
            })
            .collect()
    }

    fn cumulative(xs: &[f64]) -> Vec<f64> {
        let mut sum = 0.0;
        xs.iter()
            .map(|x| {
                sum += x;
                sum
            })
            .collect()
    }

    fn assert_close(actual: f64, expected: f64, rel: f64, what: &str) {
        assert!(
            (actual - expected).abs() <= rel * expected.abs(),
            "{what}: {actual} is not within {rel} of {expected}"
        );
    }

    #[test]
    fn gamma_gaps_have_the_configured_mean_and_spread() {
        // 20,000 draws: the standard error of the mean is below 1% and of the CV about 1.3%
        // for the widest case (burstiness 0.5), so 4% and 5% are several standard errors.
        let rate = 12.5;
        for burstiness in [0.5, 1.0, 4.0] {
            let rates = vec![rate; 20_000];
            let mut rng = numpy_global(2024);
            let draws = draw_gaps(&rates, burstiness, &mut rng);
            let (mean, cv) = mean_and_cv(&draws);
            assert_close(
                mean,
                1.0 / rate,
                0.04,
                &format!("mean gap, burstiness {burstiness}"),
            );
            assert_close(
                cv,
                1.0 / burstiness.sqrt(),
                0.05,
                &format!("gap CV, burstiness {burstiness}"),
            );
            assert!(draws.iter().all(|&g| g > 0.0));
        }
    }

    #[test]
    fn constant_rate_is_rescaled_to_end_at_n_over_rate() {
        for burstiness in [0.5, 1.0, 4.0] {
            let cfg = constant(20_000, 12.5, burstiness, 99);
            let schedule = build(&cfg).unwrap();
            let last = *schedule.offsets.last().unwrap();
            assert_close(last, 20_000.0 / 12.5, 1e-12, "last offset");
            // The first request also waits a (rescaled) gap, as in vLLM.
            assert!(schedule.offsets[0] > 0.0);
            assert!(schedule.offsets.windows(2).all(|w| w[0] <= w[1]));
            assert!(schedule.rates.iter().all(|&r| r == 12.5));
            assert!(schedule.rps_change_events.is_empty());

            // Rescaling is a pure change of scale of the same draws, so the spread stays.
            let mut rng = numpy_global(99);
            let draws = cumulative(&draw_gaps(&schedule.rates, burstiness, &mut rng));
            let factor = last / draws.last().unwrap();
            assert_ne!(factor, 1.0, "the raw sum is never exactly n / rate");
            for (offset, raw) in schedule.offsets.iter().zip(&draws) {
                assert_close(*offset, raw * factor, 1e-12, "rescaled offset");
            }
            let (_, cv) = mean_and_cv(&gaps(&schedule.offsets));
            assert_close(cv, 1.0 / burstiness.sqrt(), 0.05, "gap CV after rescaling");
        }
    }

    #[test]
    fn infinite_rate_sends_everything_at_zero() {
        let schedule = build(&constant(50, f64::INFINITY, 1.0, 1)).unwrap();
        assert_eq!(schedule.offsets, vec![0.0; 50]);
        assert!(schedule.rates.iter().all(|r| r.is_infinite()));
    }

    #[test]
    fn infinite_burstiness_spaces_requests_evenly() {
        let schedule = build(&constant(8, 4.0, f64::INFINITY, 1)).unwrap();
        for (i, offset) in schedule.offsets.iter().enumerate() {
            assert_close(*offset, (i + 1) as f64 / 4.0, 1e-12, "even offset");
        }
    }

    #[test]
    fn linear_ramp_rates_and_offsets() {
        let schedule = build(&ramped(11, RampUpStrategy::Linear, 2.0, 12.0)).unwrap();
        // progress i / 10, so the rate goes up by exactly 1 per request.
        assert_close(schedule.rates[0], 2.0, 1e-12, "first rate");
        assert_close(schedule.rates[5], 7.0, 1e-12, "middle rate");
        assert_close(schedule.rates[10], 12.0, 1e-12, "last rate");
        // Each gap is drawn at the rate in force and nothing is rescaled.
        let mut rng = numpy_global(7);
        let raw = cumulative(&draw_gaps(&schedule.rates, 1.0, &mut rng));
        assert_eq!(schedule.offsets, raw);
    }

    #[test]
    fn exponential_ramp_rates() {
        let schedule = build(&ramped(5, RampUpStrategy::Exponential, 1.0, 16.0)).unwrap();
        for (rate, expected) in schedule.rates.iter().zip([1.0, 2.0, 4.0, 8.0, 16.0]) {
            assert_close(*rate, expected, 1e-12, "exponential rate");
        }
        let schedule = build(&ramped(101, RampUpStrategy::Exponential, 3.0, 300.0)).unwrap();
        assert_close(schedule.rates[0], 3.0, 1e-12, "first rate");
        assert_close(
            schedule.rates[50],
            30.0,
            1e-12,
            "middle rate (geometric mean)",
        );
        assert_close(schedule.rates[100], 300.0, 1e-12, "last rate");
    }

    #[test]
    fn single_request_ramp_runs_at_the_start_rate() {
        let schedule = build(&ramped(1, RampUpStrategy::Linear, 3.0, 9.0)).unwrap();
        assert_eq!(schedule.rates, [3.0]);
    }

    #[test]
    fn ramp_up_with_many_requests_approaches_the_configured_mean_gap() {
        // Start = end: a ramp that stays at one rate draws unrescaled gaps at that rate.
        let mut cfg = ramped(20_000, RampUpStrategy::Linear, 20.0, 20.0);
        cfg.burstiness = 4.0;
        let schedule = build(&cfg).unwrap();
        let (mean, cv) = mean_and_cv(&gaps(&schedule.offsets));
        assert_close(mean, 1.0 / 20.0, 0.04, "mean gap");
        assert_close(cv, 0.5, 0.05, "gap CV");
    }

    /// The events as (rps, request, offset) triples.
    fn changes(schedule: &Schedule) -> Vec<(u64, Option<usize>, f64)> {
        schedule
            .rps_change_events
            .iter()
            .map(|e| (e.rps, e.request, e.offset))
            .collect()
    }

    #[test]
    fn rps_change_events_follow_whole_rates() {
        let schedule = build(&ramped(4, RampUpStrategy::Linear, 1.0, 4.0)).unwrap();
        let o = &schedule.offsets;
        assert_eq!(
            changes(&schedule),
            [
                (1, None, 0.0),
                (2, Some(1), o[1]),
                (3, Some(2), o[2]),
                (4, Some(3), o[3]),
            ]
        );

        // A jump past several whole rates records each of them at the same request.
        let schedule = build(&ramped(3, RampUpStrategy::Linear, 1.0, 10.0)).unwrap();
        let o = &schedule.offsets;
        let mut expected = vec![(1, None, 0.0)];
        expected.extend((2..=5).map(|rps| (rps, Some(1), o[1])));
        expected.extend((6..=10).map(|rps| (rps, Some(2), o[2])));
        assert_eq!(changes(&schedule), expected);

        // A fractional rate counts by its whole part (5.5 -> 5).
        let schedule = build(&ramped(3, RampUpStrategy::Linear, 4.0, 7.0)).unwrap();
        let o = &schedule.offsets;
        assert_eq!(
            changes(&schedule),
            [
                (4, None, 0.0),
                (5, Some(1), o[1]),
                (6, Some(2), o[2]),
                (7, Some(2), o[2]),
            ]
        );
    }

    /// The offsets and rates of vLLM 0.32's own `get_request`, written by
    /// `scripts/vllm_reference_schedule.py`: equal to the last bit, as bench makes the same
    /// draws and the same arithmetic in the same order.
    #[test]
    fn offsets_and_rates_are_vllms_draw_for_draw() {
        let fixture: serde_json::Value = serde_json::from_str(include_str!(
            "../../../tests/data/schedule/vllm-arrivals.json"
        ))
        .unwrap();
        let cases = fixture["cases"].as_array().unwrap();
        assert_eq!(cases.len(), 6);
        let floats = |v: &serde_json::Value| -> Vec<f64> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect()
        };
        for case in cases {
            let ramp_up = case.get("ramp_up").map(|r| RampUp {
                strategy: serde_json::from_value(r["strategy"].clone()).unwrap(),
                start_rps: r["start_rps"].as_f64().unwrap(),
                end_rps: r["end_rps"].as_f64().unwrap(),
            });
            let cfg = ScheduleConfig {
                num_requests: case["num_requests"].as_u64().unwrap() as usize,
                request_rate: case["request_rate"].as_f64().unwrap_or(f64::INFINITY),
                burstiness: case["burstiness"].as_f64().unwrap(),
                ramp_up,
                seed: case["seed"].as_u64().unwrap(),
            };
            let schedule = build(&cfg).unwrap();
            assert_eq!(schedule.offsets, floats(&case["offsets"]), "{cfg:?}");
            assert_eq!(schedule.rates, floats(&case["rates"]), "{cfg:?}");
        }
    }

    #[test]
    fn a_seed_wider_than_numpy_takes_gets_its_own_arrivals() {
        // numpy rejects np.random.seed(2**32); bench seeds the words [0, 1] instead, which
        // is neither seed 0 nor seed 1.
        let wide = build(&constant(50, 10.0, 1.0, 1 << 32)).unwrap();
        for narrow in [0, 1] {
            assert_ne!(wide, build(&constant(50, 10.0, 1.0, narrow)).unwrap());
        }
    }

    #[test]
    fn seed_determines_the_schedule() {
        let a = build(&constant(200, 10.0, 1.0, 5)).unwrap();
        let b = build(&constant(200, 10.0, 1.0, 5)).unwrap();
        let c = build(&constant(200, 10.0, 1.0, 6)).unwrap();
        assert_eq!(a, b);
        assert_ne!(a.offsets, c.offsets);
    }

    fn error_of(cfg: &ScheduleConfig) -> String {
        format!("{:#}", build(cfg).unwrap_err())
    }

    #[test]
    fn invalid_settings_name_the_flag() {
        assert!(error_of(&constant(0, 1.0, 1.0, 0)).contains("--num-prompts"));
        for burstiness in [0.0, -1.0, f64::NAN] {
            assert!(error_of(&constant(5, 1.0, burstiness, 0)).contains("--burstiness"));
        }
        for rate in [0.0, -2.0, f64::NAN] {
            assert!(error_of(&constant(5, rate, 1.0, 0)).contains("--request-rate"));
        }

        let mut cfg = ramped(5, RampUpStrategy::Linear, 1.0, 5.0);
        cfg.request_rate = 10.0;
        let msg = error_of(&cfg);
        assert!(
            msg.contains("--request-rate") && msg.contains("--ramp-up-strategy"),
            "{msg}"
        );

        let msg = error_of(&ramped(5, RampUpStrategy::Linear, 6.0, 5.0));
        assert!(
            msg.contains("--ramp-up-start-rps") && msg.contains("--ramp-up-end-rps"),
            "{msg}"
        );
        assert!(
            error_of(&ramped(5, RampUpStrategy::Linear, -1.0, 5.0)).contains("--ramp-up-start-rps")
        );
        assert!(
            error_of(&ramped(5, RampUpStrategy::Linear, 1.5, 5.0)).contains("--ramp-up-start-rps")
        );
        assert!(
            error_of(&ramped(5, RampUpStrategy::Linear, 1.0, f64::INFINITY))
                .contains("--ramp-up-end-rps")
        );
        for strategy in [RampUpStrategy::Linear, RampUpStrategy::Exponential] {
            assert!(error_of(&ramped(5, strategy, 0.0, 5.0)).contains("--ramp-up-start-rps"));
        }
    }

    #[test]
    fn a_timed_runs_arrivals_are_the_count_runs_draws_unscaled() {
        for burstiness in [0.5, 1.0, f64::INFINITY] {
            let cfg = constant(500, 40.0, burstiness, 11);
            let mut rng = numpy_global(11);
            let draws = cumulative(&draw_gaps(&[40.0; 500], burstiness, &mut rng));
            let arrivals: Vec<f64> = Arrivals::drawn(&cfg, 3600.0).unwrap().take(500).collect();
            assert_eq!(arrivals, draws, "burstiness {burstiness}");
            // And they go on past any count: 5,000 arrivals at 40/s span about 125 s.
            let last = Arrivals::drawn(&cfg, 3600.0).unwrap().nth(4999).unwrap();
            assert_close(last, 5000.0 / 40.0, 0.1, "the 5000th arrival");
        }
        let unpaced = Arrivals::drawn(&constant(1, f64::INFINITY, 1.0, 0), 10.0).unwrap();
        assert!(unpaced.unpaced());
        assert!(unpaced.take(1000).all(|o| o == 0.0));
        assert!(
            !Arrivals::drawn(&constant(1, 5.0, 1.0, 0), 10.0)
                .unwrap()
                .unpaced()
        );
        // Settings vLLM refuses are refused here too.
        assert!(Arrivals::drawn(&constant(1, 5.0, 0.0, 0), 10.0).is_err());
    }

    #[test]
    fn a_timed_ramp_moves_with_the_time_passed_and_stamps_each_whole_rate() {
        let cfg = ramped(1, RampUpStrategy::Linear, 10.0, 50.0);
        let mut arrivals = Arrivals::drawn(&cfg, 20.0).unwrap();
        let changes = arrivals.rps_changes();
        let offsets: Vec<f64> = arrivals.by_ref().take_while(|&o| o < 20.0).collect();
        // The rate goes from 10 to 50 over 20 s: about (10 + 50) / 2 * 20 = 600 requests.
        assert_close(offsets.len() as f64, 600.0, 0.1, "requests in 20 s");
        assert!(offsets.windows(2).all(|w| w[0] <= w[1]));
        let changes = changes.lock().unwrap().clone();
        assert_eq!(changes[0].rps, 10);
        assert_eq!(changes[0].request, None);
        // Each whole rate once, in order, stamped with the request drawn at it: its rate
        // is the one in force at the offset before it.
        let rates: Vec<u64> = changes.iter().map(|c| c.rps).collect();
        assert_eq!(rates, (10..10 + changes.len() as u64).collect::<Vec<_>>());
        assert!(*rates.last().unwrap() >= 48, "{rates:?}");
        for change in &changes[1..] {
            let i = change.request.unwrap();
            let before = if i == 0 { 0.0 } else { offsets[i - 1] };
            let rate = 10.0 + 40.0 * before / 20.0;
            assert!(rate as u64 >= change.rps, "{change:?} at rate {rate}");
            assert_eq!(change.offset, offsets[i]);
        }
    }

    #[test]
    fn a_timed_trace_starts_over_one_mean_gap_after_its_end() {
        let send_at = [Some(0.1), None, Some(0.3), Some(0.5)];
        let offsets: Vec<f64> = Arrivals::trace(&send_at, 2.0).unwrap().take(9).collect();
        // Scaled by 2: 0.2, 0.2, 0.6, 1.0; the mean gap (1.0 - 0.2) / 3, the period 1.0
        // plus that.
        let period = 1.0 + 0.8 / 3.0;
        let want: Vec<f64> = [0.2, 0.2, 0.6, 1.0]
            .iter()
            .cycle()
            .take(9)
            .enumerate()
            .map(|(k, o)| o + (k / 4) as f64 * period)
            .collect();
        assert_eq!(offsets, want);
        for cannot in [&[Some(1.0)][..], &[Some(1.0), Some(1.0)][..]] {
            let err = Arrivals::trace(cannot, 1.0).err().unwrap().to_string();
            assert!(err.contains("cannot repeat"), "{err}");
        }
    }
}
