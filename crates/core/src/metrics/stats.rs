//! Summary statistics with numpy's exact arithmetic.
//!
//! vLLM reports `np.mean`, `np.median`, `np.std` and `np.percentile` of Python lists. To
//! print the same digits (and write the same JSON floats) we reproduce numpy's operation
//! order, not just its formulas: float sums use numpy's pairwise summation, the median of
//! an even count is the numpy mean of the two middle values, the standard deviation is
//! the population one (`ddof = 0`) computed from the pairwise mean, and percentiles use
//! numpy's default `linear` method including its two-sided interpolation (`_lerp`).

use super::confidence::{Interval, mean_interval, percentile_interval};

/// Mean, median, population standard deviation and the selected percentiles of one
/// metric, all in milliseconds (vLLM's `mean_ttft_ms`, `percentiles_ttft_ms`, ...).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Summary {
    pub mean: f64,
    pub median: f64,
    pub std: f64,
    /// `(percentile, value)` pairs in the order the percentiles were requested.
    pub percentiles: Vec<(f64, f64)>,
    /// 95% confidence intervals of the mean, the median and each percentile (in the
    /// order of `percentiles`), in milliseconds ([`super::confidence`]).
    pub intervals: Intervals,
}

/// A [`Summary`]'s confidence intervals.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Intervals {
    pub mean: Interval,
    pub median: Interval,
    pub percentiles: Vec<Interval>,
}

impl Summary {
    /// Summarises values given in seconds, reporting milliseconds.
    ///
    /// Like vLLM's `np.mean(x or 0) * 1000`: an empty list summarises the scalar 0, so
    /// every statistic is 0 rather than NaN. The values are taken by value and sorted in
    /// place once, after the mean and standard deviation (which depend on numpy's
    /// summation order), for the median and every percentile: the ITLs of a long run are
    /// millions of values, and a sorted copy per statistic would double the memory.
    pub fn of_seconds(mut values: Vec<f64>, percentiles: &[f64]) -> Summary {
        let mean = mean(&values);
        let std = std_about(&values, mean);
        // Unstable sorting needs no buffer; values equal under `total_cmp` are identical bits.
        values.sort_unstable_by(f64::total_cmp);
        let intervals = Intervals {
            // Durations: a mean below 0 is impossible, so the interval stops at 0.
            mean: mean_interval(mean, std, values.len())
                .at_least(0.0)
                .scaled(1000.0),
            median: percentile_interval(&values, 50.0).scaled(1000.0),
            percentiles: percentiles
                .iter()
                .map(|&p| percentile_interval(&values, p).scaled(1000.0))
                .collect(),
        };
        Summary {
            intervals,
            mean: mean * 1000.0,
            median: median_of_sorted(&values) * 1000.0,
            std: std * 1000.0,
            percentiles: percentiles
                .iter()
                .map(|&p| (p, percentile_of_sorted(&values, p) * 1000.0))
                .collect(),
        }
    }
}

/// numpy's `pairwise_sum` for float64: blocks of fewer than 8 values are summed in order,
/// blocks of up to 128 with eight interleaved accumulators combined as a tree, larger
/// ones split in two at a multiple of 8. `np.add.reduce` adds that to its identity 0.0.
pub fn pairwise_sum(values: &[f64]) -> f64 {
    pairwise_sum_of(values, |v| v)
}

/// [`pairwise_sum`] of `f(value)` for each value, in the same order, without building the
/// mapped list (`np.std` sums the squared deviations this way).
fn pairwise_sum_of(values: &[f64], f: impl Fn(f64) -> f64 + Copy) -> f64 {
    /// numpy's `PW_BLOCKSIZE`.
    const BLOCK: usize = 128;
    let n = values.len();
    if n < 8 {
        values.iter().fold(0.0, |acc, &v| acc + f(v))
    } else if n <= BLOCK {
        let mut r: [f64; 8] = std::array::from_fn(|i| f(values[i]));
        let whole = n - n % 8;
        for chunk in values[8..whole].chunks_exact(8) {
            for (acc, &v) in r.iter_mut().zip(chunk) {
                *acc += f(v);
            }
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for &v in &values[whole..] {
            res += f(v);
        }
        res
    } else {
        let mut half = n / 2;
        half -= half % 8;
        pairwise_sum_of(&values[..half], f) + pairwise_sum_of(&values[half..], f)
    }
}

/// `np.mean(values or 0)`: the pairwise sum divided by the count; 0 for an empty list.
pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    (0.0 + pairwise_sum(values)) / values.len() as f64
}

/// `np.std(values or 0)`: the population standard deviation, computed as numpy's `_var`
/// does (squared deviations from the pairwise mean, summed pairwise, divided by n).
pub fn std(values: &[f64]) -> f64 {
    std_about(values, mean(values))
}

/// [`std`] given the values' [`mean`].
fn std_about(values: &[f64], mean: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let squared_deviation = |v: f64| {
        let d = v - mean;
        d * d
    };
    ((0.0 + pairwise_sum_of(values, squared_deviation)) / values.len() as f64).sqrt()
}

/// `np.median(values or 0)`: the middle value, or for an even count `np.mean` of the two
/// middle values (which is `(a + b) / 2`).
pub fn median(values: &[f64]) -> f64 {
    median_of_sorted(&sorted(values))
}

/// [`median`] of values sorted ascending.
fn median_of_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        sorted[n / 2]
    } else {
        mean(&sorted[n / 2 - 1..=n / 2])
    }
}

/// `np.percentile(values or 0, p)` with the default `linear` method, `p` in [0, 100].
///
/// numpy divides `p` by 100, places the virtual index at `(n - 1) * q`, takes the last
/// value when that index reaches `n - 1`, and otherwise interpolates between the two
/// neighbours from whichever side is nearer (`_lerp` computes `b - (b - a) * (1 - t)`
/// when `t >= 0.5`), which can differ from the one-sided formula in the last bit.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    percentile_of_sorted(&sorted(values), p)
}

/// [`percentile`] of values sorted ascending.
fn percentile_of_sorted(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return 0.0;
    }
    let q = p / 100.0;
    let virtual_index = (n - 1) as f64 * q;
    if virtual_index >= (n - 1) as f64 {
        return sorted[n - 1];
    }
    let below = virtual_index.floor();
    let t = virtual_index - below;
    let lo = below as usize;
    let (a, b) = (sorted[lo], sorted[lo + 1]);
    let diff = b - a;
    if t >= 0.5 {
        b - diff * (1.0 - t)
    } else {
        a + diff * t
    }
}

/// The largest value, 0 for an empty list (used for the schedule-lag maximum).
pub fn max(values: &[f64]) -> f64 {
    values.iter().copied().reduce(f64::max).unwrap_or(0.0)
}

fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v = values.to_vec();
    v.sort_unstable_by(f64::total_cmp);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_lists_summarise_as_zero_like_np_mean_of_0() {
        let s = Summary::of_seconds(Vec::new(), &[50.0, 99.0]);
        assert_eq!(s.mean, 0.0);
        assert_eq!(s.median, 0.0);
        assert_eq!(s.std, 0.0);
        assert_eq!(s.percentiles, vec![(50.0, 0.0), (99.0, 0.0)]);
    }

    #[test]
    fn single_value_is_every_statistic() {
        assert_eq!(mean(&[0.25]), 0.25);
        assert_eq!(median(&[0.25]), 0.25);
        assert_eq!(std(&[0.25]), 0.0);
        for p in [0.0, 1.0, 50.0, 99.0, 99.9, 100.0] {
            assert_eq!(percentile(&[0.25], p), 0.25, "p{p}");
        }
    }

    #[test]
    fn two_values_interpolate_linearly() {
        let v = [3.0, 1.0];
        // virtual index = (2 - 1) * p / 100; value = 1 + (3 - 1) * index.
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&v, 25.0), 1.5);
        assert_eq!(percentile(&v, 50.0), 2.0);
        // t = 0.99 >= 0.5: numpy computes b - (b - a) * (1 - t) = 3 - 2 * 0.01 = 2.98.
        assert_eq!(percentile(&v, 99.0), 3.0 - 2.0 * (1.0 - 0.99));
        assert_eq!(percentile(&v, 100.0), 3.0);
        assert_eq!(median(&v), 2.0);
        // population std: deviations +-1, variance 1.
        assert_eq!(std(&v), 1.0);
    }

    #[test]
    fn percentile_edges_on_five_values() {
        let v = [5.0, 1.0, 4.0, 2.0, 3.0];
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&v, 100.0), 5.0);
        // index 4 * 0.999 = 3.996 -> 4 + (5 - 4) * 0.996, computed from the upper side.
        let t = 4.0 * (99.9 / 100.0) - 3.0;
        assert_eq!(percentile(&v, 99.9), 5.0 - (5.0 - 4.0) * (1.0 - t));
        assert!((percentile(&v, 99.9) - 4.996).abs() < 1e-12);
        // index 4 * 0.99 = 3.96.
        assert!((percentile(&v, 99.0) - 4.96).abs() < 1e-12);
        // index 4 * 0.1 = 0.4 (t < 0.5): 1 + (2 - 1) * 0.4, computed from the lower side.
        assert_eq!(percentile(&v, 10.0), 1.0 + 1.0 * (4.0 * 0.1));
        assert_eq!(median(&v), 3.0);
    }

    #[test]
    fn std_is_population_std() {
        // mean 5; squared deviations 9, 1, 1, 1, 0, 0, 4, 16 sum to 32; 32 / 8 = 4.
        let v = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert_eq!(mean(&v), 5.0);
        assert_eq!(std(&v), 2.0);
        assert_eq!(median(&v), 4.5);
    }

    #[test]
    fn pairwise_sum_follows_numpy_blocking() {
        // Below 8 values: plain left-to-right sum.
        let small = [0.1, 0.2, 0.3];
        assert_eq!(pairwise_sum(&small), (0.1 + 0.2) + 0.3);
        // 10 values: eight accumulators seeded by the first 8 (no full second block),
        // tree-combined, then the two leftovers added in order.
        let v: Vec<f64> = (1..=10).map(|i| i as f64 * 0.1).collect();
        let tree = ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
        assert_eq!(pairwise_sum(&v), tree + v[8] + v[9]);
        // 300 values split at 144 (150 rounded down to a multiple of 8), then 156 splits
        // into 72 + 84; each part is an unrolled block.
        let big: Vec<f64> = (0..300).map(|i| (i as f64) * 0.01 + 1.0 / 3.0).collect();
        let expected =
            pairwise_sum(&big[..144]) + (pairwise_sum(&big[144..216]) + pairwise_sum(&big[216..]));
        assert_eq!(pairwise_sum(&big), expected);
    }

    /// Bit-exact agreement with numpy 2.4 on 1000 values, produced by
    /// `x = [((i * 7919) % 1000) / 7.0 + i * 1e-3 for i in range(1000)]` and
    /// `[np.mean(x), np.std(x), np.median(x), np.percentile(x, 99), np.percentile(x, 99.9),
    ///   np.percentile(x, 37.5)]` printed with `float.hex`.
    #[test]
    fn matches_numpy_bit_for_bit() {
        let x: Vec<f64> = (0..1000u64)
            .map(|i| ((i * 7919) % 1000) as f64 / 7.0 + i as f64 * 1e-3)
            .collect();
        let got = [
            mean(&x),
            std(&x),
            median(&x),
            percentile(&x, 99.0),
            percentile(&x, 99.9),
            percentile(&x, 37.5),
        ];
        let want = NUMPY_REFERENCE.map(f64::from_bits);
        assert_eq!(got, want);
    }

    /// `Summary::of_seconds`, which sorts its own list once and sums squared deviations
    /// without a list of them, gives the very bits of the single statistics above.
    #[test]
    fn summary_matches_the_single_statistics_bit_for_bit() {
        let x: Vec<f64> = (0..1000u64)
            .map(|i| ((i * 7919) % 1000) as f64 / 7.0 + i as f64 * 1e-3)
            .collect();
        let s = Summary::of_seconds(x.clone(), &[99.0, 99.9, 37.5]);
        let want = NUMPY_REFERENCE.map(|bits| f64::from_bits(bits) * 1000.0);
        assert_eq!([s.mean, s.std, s.median], [want[0], want[1], want[2]]);
        assert_eq!(
            s.percentiles,
            vec![(99.0, want[3]), (99.9, want[4]), (37.5, want[5])]
        );
        // An even count takes the median between the two middle values.
        assert_eq!(
            Summary::of_seconds(x[..10].to_vec(), &[]).median,
            median(&x[..10]) * 1000.0
        );
    }

    const NUMPY_REFERENCE: [u64; 6] = [
        0x4051f6d33c8ff1f5, // mean 71.85664285714286 (a plain left-to-right sum differs)
        0x40449ebe2517fd44, // std 41.24017776175836
        0x4051f5ba5e353f7d, // median 71.8395
        0x4061ba311dec98bf, // p99 141.81849571428572
        0x4061e6d5ddbf8206, // p99.9 143.21360671428573
        0x404b10978d4fdf3b, // p37.5 54.129625
    ];
}
