//! How sure a run's figures are: a 95% confidence interval for every mean, median and
//! percentile a result reports (key `ci95`), and the check `--until-confident` stops on.
//!
//! Two methods, one per kind of figure, both stated in the result (`ci95_method`):
//! - a mean: Student's t, `mean -+ t(0.975, n - 1) s / sqrt(n)` with the sample standard
//!   deviation `s`. It leans on the central limit theorem, so it needs tens of values
//!   from a skewed latency distribution before it holds its level;
//! - a median or percentile: the distribution-free order-statistic interval. The number
//!   of values below the population's q-quantile is binomial(n, q), so the order
//!   statistics at ranks `l` and `u`, with `P(B < l) <= 2.5%` and `P(B >= u) <= 2.5%`,
//!   bracket the quantile with at least 95% probability whatever the distribution. The
//!   binomial is summed exactly up to [`EXACT_BINOMIAL_MAX`] values and taken as normal
//!   beyond, where the two differ by less than one rank. With too few values for a tail
//!   percentile (a p99 of 100 requests) an end has no order statistic: it is `None`
//!   (`null` in the result), never a made-up bound.
//!
//! Both assume the values are independent draws. TTFT, TPOT and E2EL are one value per
//! request; ITL is one per token gap, and the gaps of one request move together, so its
//! intervals are narrower than the truth (stated in the docs).

use super::significance::t_upper_tail;

/// The two-sided level of every interval.
pub const LEVEL: f64 = 0.95;

/// Sample sizes up to which the binomial of the order-statistic interval is summed
/// exactly (its log-probabilities, one pass): beyond it the normal approximation is off
/// by less than a rank, and the exact sum would cost a pass over a million ITLs.
pub const EXACT_BINOMIAL_MAX: usize = 100_000;

/// A confidence interval; an end is `None` where the sample cannot bound it (too few
/// values for that tail, or fewer than two for a mean).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Interval {
    pub lo: Option<f64>,
    pub hi: Option<f64>,
}

impl Interval {
    /// Both ends, when both are bounded.
    pub fn bounded(self) -> Option<(f64, f64)> {
        Some((self.lo?, self.hi?))
    }

    /// Whether both ends lie within `rel` (a fraction) of `estimate`: what
    /// `--until-confident METRIC:REL` waits for. An unbounded end never does.
    pub fn within(self, estimate: f64, rel: f64) -> bool {
        self.bounded().is_some_and(|(lo, hi)| {
            let tolerance = rel * estimate.abs();
            estimate - lo <= tolerance && hi - estimate <= tolerance
        })
    }

    /// The interval cut at `floor`, the least value the quantity can take (a
    /// latency's 0): what lies below it cannot hold the true value, so the level stays.
    pub fn at_least(self, floor: f64) -> Interval {
        Interval {
            lo: self.lo.map(|v| v.max(floor)),
            hi: self.hi.map(|v| v.max(floor)),
        }
    }

    /// Both ends multiplied by `factor` (seconds to milliseconds).
    pub fn scaled(self, factor: f64) -> Interval {
        Interval {
            lo: self.lo.map(|v| v * factor),
            hi: self.hi.map(|v| v * factor),
        }
    }
}

/// The two-sided 95% critical value of Student's t with `dof` degrees of freedom (at
/// least 1), by bisection on the exact tail of `significance` (to 1e-12).
pub fn t_critical(dof: u32) -> f64 {
    let target = (1.0 - LEVEL) / 2.0;
    let dof = f64::from(dof.max(1));
    // t(0.975, 1) is 12.7; the tail falls monotonically in t.
    let (mut lo, mut hi) = (0.0_f64, 20.0_f64);
    while hi - lo > 1e-12 {
        let mid = 0.5 * (lo + hi);
        if t_upper_tail(mid, dof) > target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Student's t interval of a mean from the sample's mean, its population standard
/// deviation (numpy's `ddof = 0`, what the result reports) and its size.
pub fn mean_interval(mean: f64, population_std: f64, n: usize) -> Interval {
    if n < 2 {
        return Interval::default();
    }
    let nf = n as f64;
    let sample_std = population_std * (nf / (nf - 1.0)).sqrt();
    let half = t_critical((n - 1).min(u32::MAX as usize) as u32) * sample_std / nf.sqrt();
    Interval {
        lo: Some(mean - half),
        hi: Some(mean + half),
    }
}

/// The 1-based ranks `(l, u)` of the order statistics that bracket the `q`-quantile
/// (0 < q < 1) of the population with at least 95% probability, from a sample of `n`;
/// `None` for an end no rank in 1..=n can bound.
pub fn quantile_ranks(n: usize, q: f64) -> (Option<usize>, Option<usize>) {
    if n == 0 || q <= 0.0 || q >= 1.0 {
        return (None, None);
    }
    if n > EXACT_BINOMIAL_MAX {
        normal_ranks(n, q)
    } else {
        exact_ranks(n, q)
    }
}

/// [`quantile_ranks`] from the binomial's own sums.
fn exact_ranks(n: usize, q: f64) -> (Option<usize>, Option<usize>) {
    let tail = (1.0 - LEVEL) / 2.0;
    let cdf = binomial_cdf(n, q);
    // Largest l with P(B <= l - 1) <= tail; smallest u with P(B >= u) <= tail.
    let l = (1..=n).take_while(|&l| cdf[l - 1] <= tail).last();
    let u = (1..=n).find(|&u| 1.0 - cdf[u - 1] <= tail);
    (l, u)
}

/// [`quantile_ranks`] from the binomial's normal approximation, one rank wider above
/// (the binomial's skew pushes its upper tail out).
fn normal_ranks(n: usize, q: f64) -> (Option<usize>, Option<usize>) {
    let nf = n as f64;
    let half = super::significance::Z95 * (nf * q * (1.0 - q)).sqrt();
    let l = (nf * q - half).floor();
    let u = (nf * q + half).ceil() + 1.0;
    (
        (l >= 1.0).then_some(l as usize),
        (u <= nf).then_some(u as usize),
    )
}

/// `P(B <= k)` for `k` in `0..=n`, `B` binomial(n, q), from the log-probabilities
/// (`C(n, k) q^k (1-q)^(n-k)` underflows for large `n`), scaled by their largest.
fn binomial_cdf(n: usize, q: f64) -> Vec<f64> {
    let step = (q / (1.0 - q)).ln();
    let mut log_pmf = Vec::with_capacity(n + 1);
    let mut current = n as f64 * (1.0 - q).ln();
    log_pmf.push(current);
    for k in 0..n {
        current += ((n - k) as f64 / (k + 1) as f64).ln() + step;
        log_pmf.push(current);
    }
    let top = log_pmf.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut cdf: Vec<f64> = log_pmf.iter().map(|l| (l - top).exp()).collect();
    let mut sum = 0.0;
    for p in &mut cdf {
        sum += *p;
        *p = sum;
    }
    for p in &mut cdf {
        *p /= sum;
    }
    cdf
}

/// The order-statistic interval of the `p`-th percentile (0 to 100) of the population
/// the ascending `sorted` sample was drawn from.
pub fn percentile_interval(sorted: &[f64], p: f64) -> Interval {
    let (l, u) = quantile_ranks(sorted.len(), p / 100.0);
    Interval {
        lo: l.map(|r| sorted[r - 1]),
        hi: u.map(|r| sorted[r - 1]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    #[test]
    fn t_critical_values_match_the_tables() {
        // scipy.stats.t.ppf(0.975, dof).
        for (dof, want) in [
            (1, 12.706_204_736_174_694),
            (2, 4.302_652_729_749_462),
            (9, 2.262_157_162_798_205),
            (30, 2.042_272_456_301_237_8),
            (1000, 1.962_339_080_826_408_3),
        ] {
            let got = t_critical(dof);
            assert!((got - want).abs() < 1e-8, "dof {dof}: {got} != {want}");
        }
    }

    #[test]
    fn exact_ranks_match_the_binomial_tables() {
        // The classic distribution-free median interval of 10 values is (x(2), x(9)),
        // 97.9%; of 100 values (x(40), x(61)). A p99 of 100 values has no upper bound.
        assert_eq!(quantile_ranks(10, 0.5), (Some(2), Some(9)));
        assert_eq!(quantile_ranks(100, 0.5), (Some(40), Some(61)));
        assert_eq!(quantile_ranks(100, 0.99).1, None);
        assert_eq!(quantile_ranks(5, 0.5), (None, None));
        assert_eq!(quantile_ranks(0, 0.5), (None, None));
        assert_eq!(quantile_ranks(100, 1.0), (None, None));
        // Around the switch to the normal approximation the ranks agree within one.
        for q in [0.5, 0.9, 0.99] {
            let exact = exact_ranks(EXACT_BINOMIAL_MAX, q);
            let normal = normal_ranks(EXACT_BINOMIAL_MAX, q);
            assert!(exact.0.unwrap().abs_diff(normal.0.unwrap()) <= 1, "{q}");
            assert!(exact.1.unwrap().abs_diff(normal.1.unwrap()) <= 1, "{q}");
        }
    }

    #[test]
    fn within_needs_both_ends_near_the_estimate() {
        let i = Interval {
            lo: Some(95.0),
            hi: Some(104.0),
        };
        assert!(i.within(100.0, 0.05));
        assert!(!i.within(100.0, 0.04));
        assert!(
            !Interval {
                lo: Some(99.0),
                hi: None
            }
            .within(100.0, 0.5)
        );
    }

    /// Coverage, the property the intervals promise: over many seeded samples from known
    /// distributions (exponential, as latencies are skewed; uniform), the interval holds
    /// the population's true mean and quantiles about 95% of the time. The
    /// order-statistic interval is conservative (at least 95%, less than 99%); the t
    /// interval of a skewed mean is a little under its level at small n.
    #[test]
    fn intervals_cover_the_true_value_at_their_level() {
        let mut rng = StdRng::seed_from_u64(33);
        let trials = 2000;
        for n in [50usize, 400] {
            let mut covered = [0usize; 4];
            for _ in 0..trials {
                // Exponential with mean 1: quantile q is -ln(1 - q).
                let mut x: Vec<f64> = (0..n).map(|_| -(1.0 - rng.random::<f64>()).ln()).collect();
                let mean = x.iter().sum::<f64>() / n as f64;
                let std = (x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
                x.sort_by(f64::total_cmp);
                let hold = |i: Interval, truth: f64| {
                    i.bounded()
                        .is_some_and(|(lo, hi)| lo <= truth && truth <= hi)
                };
                covered[0] += usize::from(hold(mean_interval(mean, std, n), 1.0));
                covered[1] += usize::from(hold(percentile_interval(&x, 50.0), 2f64.ln()));
                covered[2] += usize::from(hold(percentile_interval(&x, 90.0), 10f64.ln()));
                if n >= 400 {
                    covered[3] += usize::from(hold(percentile_interval(&x, 99.0), 100f64.ln()));
                }
            }
            let rate = |c: usize| c as f64 / trials as f64;
            assert!(
                (0.92..=0.97).contains(&rate(covered[0])),
                "mean, n {n}: {}",
                rate(covered[0])
            );
            for (name, c) in [("p50", covered[1]), ("p90", covered[2])] {
                assert!(
                    (0.94..=0.99).contains(&rate(c)),
                    "{name}, n {n}: {}",
                    rate(c)
                );
            }
            if n >= 400 {
                assert!(
                    (0.94..=0.99).contains(&rate(covered[3])),
                    "p99: {}",
                    rate(covered[3])
                );
            }
        }
    }
}
