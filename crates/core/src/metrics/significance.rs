//! The few tests of significance bench needs beyond vLLM's statistics: Student's t
//! distribution (its tail, for integer degrees of freedom, exactly), Welch's test of two
//! means, and the least-squares line with its slope's standard error (a quantile's
//! distribution-free interval is [`super::confidence::percentile_interval`]). Used by the
//! over-saturation check (`crate::steady_state::saturation`) and by `bench compare` (crate
//! `bench-study`).
//!
//! No statistics crate is pulled in for this: the t distribution with an integer number of
//! degrees of freedom has a closed form (Abramowitz and Stegun 26.7.3 and 26.7.4), which
//! is exact where the usual approximations are poor (the 2 to 4 degrees of freedom of a
//! handful of runs).

/// Degrees of freedom above which the t distribution is taken as this many (the
/// difference from the normal distribution is then below 0.1% of a p-value's size).
const MAX_DOF: u32 = 1000;

/// `P(|T| <= t)` for Student's t with `dof` degrees of freedom (at least 1; above
/// [`MAX_DOF`] taken as that many): Abramowitz and Stegun 26.7.3 (odd) and 26.7.4 (even),
/// with `theta = atan(t / sqrt(dof))`.
fn t_central(t: f64, dof: u32) -> f64 {
    let dof = dof.clamp(1, MAX_DOF);
    let t = t.abs();
    if t.is_infinite() {
        return 1.0;
    }
    let theta = (t / f64::from(dof).sqrt()).atan();
    let (s, c) = theta.sin_cos();
    let c2 = c * c;
    if dof % 2 == 1 {
        // (2/pi) (theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...)), dof - 3 the
        // last power.
        let mut term = 1.0;
        let mut sum = 0.0;
        if dof > 1 {
            sum = 1.0;
            let mut k = 2;
            while k < dof - 1 {
                term *= f64::from(k) / f64::from(k + 1) * c2;
                sum += term;
                k += 2;
            }
        }
        (2.0 / std::f64::consts::PI) * (theta + s * c * sum)
    } else {
        // sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...), dof - 2 the last power.
        let mut term = 1.0;
        let mut sum = 1.0;
        let mut k = 1;
        while k < dof - 1 {
            term *= f64::from(k) / f64::from(k + 1) * c2;
            sum += term;
            k += 2;
        }
        s * sum
    }
}

/// The one-sided p-value `P(T >= t)` of Student's t with `dof` degrees of freedom, taken
/// down to a whole number (which makes a test with Welch's fractional degrees of freedom
/// slightly conservative).
pub fn t_upper_tail(t: f64, dof: f64) -> f64 {
    let dof = dof.floor().clamp(1.0, f64::from(MAX_DOF)) as u32;
    let central = t_central(t, dof);
    if t >= 0.0 {
        (1.0 - central) / 2.0
    } else {
        (1.0 + central) / 2.0
    }
}

/// The two-sided p-value `P(|T| >= |t|)`.
pub fn t_two_sided(t: f64, dof: f64) -> f64 {
    2.0 * t_upper_tail(t.abs(), dof)
}

/// Mean, sample variance (n - 1) and count of a sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Moments {
    pub n: usize,
    pub mean: f64,
    /// The sample variance (divided by n - 1); 0 for fewer than two values.
    pub variance: f64,
}

impl Moments {
    pub fn of(values: &[f64]) -> Moments {
        let n = values.len();
        let mean = values.iter().sum::<f64>() / n.max(1) as f64;
        let variance = match n {
            0 | 1 => 0.0,
            _ => values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64,
        };
        Moments { n, mean, variance }
    }
}

/// Welch's t test of two means: the two-sided p-value that means this far apart came
/// from the same population; `None` when either sample has fewer than two values. Two
/// samples without any spread are "significantly" apart unless their means are equal.
pub fn welch(a: Moments, b: Moments) -> Option<f64> {
    if a.n < 2 || b.n < 2 {
        return None;
    }
    let (va, vb) = (a.variance / a.n as f64, b.variance / b.n as f64);
    let se2 = va + vb;
    let diff = b.mean - a.mean;
    if se2 <= 0.0 {
        return Some(if diff == 0.0 { 1.0 } else { 0.0 });
    }
    // Welch-Satterthwaite degrees of freedom.
    let dof = se2 * se2 / (va * va / (a.n - 1) as f64 + vb * vb / (b.n - 1) as f64);
    Some(t_two_sided(diff / se2.sqrt(), dof))
}

/// A least-squares line `y = intercept + slope * x` with its slope's standard error.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LineFit {
    pub slope: f64,
    pub intercept: f64,
    /// The slope's standard error, from the residuals (n - 2 degrees of freedom).
    pub slope_se: f64,
    pub n: usize,
}

impl LineFit {
    /// The least-squares line through the points; `None` with fewer than three points or
    /// when every `x` is the same (no slope to speak of).
    pub fn of(points: &[(f64, f64)]) -> Option<LineFit> {
        let n = points.len();
        if n < 3 {
            return None;
        }
        let mx = points.iter().map(|p| p.0).sum::<f64>() / n as f64;
        let my = points.iter().map(|p| p.1).sum::<f64>() / n as f64;
        let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
        let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        if sxx <= 0.0 {
            return None;
        }
        let slope = sxy / sxx;
        let intercept = my - slope * mx;
        let rss: f64 = points
            .iter()
            .map(|p| (p.1 - intercept - slope * p.0).powi(2))
            .sum();
        let slope_se = (rss / (n - 2) as f64 / sxx).sqrt();
        Some(LineFit {
            slope,
            intercept,
            slope_se,
            n,
        })
    }

    /// The one-sided p-value of "the slope is positive" (t test on the slope, n - 2
    /// degrees of freedom). A perfect line with a positive slope gives 0.
    pub fn p_positive(&self) -> f64 {
        if self.slope_se == 0.0 {
            return if self.slope > 0.0 { 0.0 } else { 1.0 };
        }
        t_upper_tail(self.slope / self.slope_se, (self.n - 2) as f64)
    }
}

/// The two-sided 95% normal quantile.
pub const Z95: f64 = 1.959_963_984_540_054;

#[cfg(test)]
mod tests {
    use super::*;

    /// `scipy.stats.t.sf(t, dof)` for a few (t, dof) (the tables' critical values, and
    /// numerical integrals of the density), to 1e-9.
    #[test]
    fn t_tails_match_scipy() {
        let cases = [
            (2.0, 1, 0.147_583_617_650_433_3),
            (4.302_652_729_911_275, 2, 0.025),
            (2.776_445_105_197_793, 4, 0.025),
            (2.306_004_135_204_166, 8, 0.025),
            (1.0, 7, 0.175_308_331_410_334_6),
            (1.959_963_984_540_054, 1000, 0.025_138_700_516_352_5),
        ];
        for (t, dof, want) in cases {
            let got = t_upper_tail(t, f64::from(dof));
            assert!(
                (got - want).abs() < 1e-9,
                "t={t} dof={dof}: {got} != {want}"
            );
            assert!((t_upper_tail(-t, f64::from(dof)) - (1.0 - want)).abs() < 1e-9);
        }
        assert_eq!(t_upper_tail(0.0, 5.0), 0.5);
        assert_eq!(t_two_sided(f64::INFINITY, 3.0), 0.0);
    }

    #[test]
    fn welch_tells_apart_separated_means_only() {
        let a: Vec<f64> = (0..50).map(|i| 20.0 + f64::from(i % 5) * 0.1).collect();
        let same: Vec<f64> = (0..50)
            .map(|i| 20.0 + f64::from((i + 2) % 5) * 0.1)
            .collect();
        let slower: Vec<f64> = a.iter().map(|v| v + 40.0).collect();
        assert!(welch(Moments::of(&a), Moments::of(&same)).unwrap() > 0.5);
        assert!(welch(Moments::of(&a), Moments::of(&slower)).unwrap() < 1e-9);
        assert_eq!(welch(Moments::of(&a[..1]), Moments::of(&a)), None);
    }

    #[test]
    fn a_line_fit_finds_slope_and_its_significance() {
        let rising: Vec<(f64, f64)> = (0..10)
            .map(|i| {
                (
                    f64::from(i),
                    2.0 * f64::from(i) + if i % 2 == 0 { 0.1 } else { -0.1 },
                )
            })
            .collect();
        let fit = LineFit::of(&rising).unwrap();
        assert!((fit.slope - 2.0).abs() < 0.05, "{fit:?}");
        assert!(fit.p_positive() < 1e-6);
        let flat: Vec<(f64, f64)> = (0..10)
            .map(|i| (f64::from(i), if i % 2 == 0 { 1.0 } else { -1.0 }))
            .collect();
        assert!(LineFit::of(&flat).unwrap().p_positive() > 0.2);
        assert_eq!(LineFit::of(&[(1.0, 1.0), (1.0, 2.0), (1.0, 3.0)]), None);
    }
}
