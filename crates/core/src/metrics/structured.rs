//! Structured output: how many completed responses were what their requests' output
//! constraints asked for (not in vLLM's result; its separate structured-output script
//! prints a `correct_rate(%)` that only parses the JSON).
//!
//! The rate is over the responses the host could check (JSON schemas, regular
//! expressions, choices); responses to grammars are counted apart, as sent but not
//! judged. Its 95% interval is Wilson's score interval, which stays inside [0, 1] and
//! keeps its width honest at rates near 0 or 1, where the normal approximation fails
//! (a server that gets 100 of 100 right is not shown as certain).

use crate::record::{OutputValidity, RequestRecord};

/// The structured-output figures of a run whose requests carried output constraints.
#[derive(Debug, Clone, PartialEq)]
pub struct StructuredStats {
    /// Completed requests that carried a constraint.
    pub requests: usize,
    pub valid: usize,
    pub invalid: usize,
    /// Completed requests whose constraint the host cannot check (grammars).
    pub unchecked: usize,
    /// Valid responses per second of the benchmark.
    pub valid_throughput: f64,
}

impl StructuredStats {
    /// Checked responses: valid and invalid ones.
    pub fn checked(&self) -> usize {
        self.valid + self.invalid
    }

    /// The share of checked responses that were valid; `None` when none were checked.
    pub fn valid_rate(&self) -> Option<f64> {
        (self.checked() > 0).then(|| self.valid as f64 / self.checked() as f64)
    }

    /// The rate's 95% Wilson score interval; `None` when none were checked.
    pub fn valid_rate_interval(&self) -> Option<(f64, f64)> {
        wilson_interval(self.valid, self.checked(), Z_95)
    }
}

/// The normal quantile of a two-sided 95% interval.
pub const Z_95: f64 = 1.959_963_984_540_054;

/// Wilson's score interval for `successes` of `n` trials at normal quantile `z`; `None`
/// for no trials.
pub fn wilson_interval(successes: usize, n: usize, z: f64) -> Option<(f64, f64)> {
    if n == 0 {
        return None;
    }
    let n = n as f64;
    let p = successes as f64 / n;
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = z / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    Some(((centre - half).max(0.0), (centre + half).min(1.0)))
}

/// The figures of `ordered`'s records, or `None` when no completed request carried a
/// constraint.
pub fn stats(ordered: &[RequestRecord], duration_s: f64) -> Option<StructuredStats> {
    let mut stats = StructuredStats {
        requests: 0,
        valid: 0,
        invalid: 0,
        unchecked: 0,
        valid_throughput: 0.0,
    };
    for validity in ordered.iter().filter_map(|r| r.output_validity.as_ref()) {
        stats.requests += 1;
        match validity {
            OutputValidity::Valid => stats.valid += 1,
            OutputValidity::Invalid { .. } => stats.invalid += 1,
            OutputValidity::Unchecked => stats.unchecked += 1,
        }
    }
    stats.valid_throughput = stats.valid as f64 / duration_s;
    (stats.requests > 0).then_some(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(validity: Option<OutputValidity>) -> RequestRecord {
        RequestRecord {
            output_validity: validity,
            ..Default::default()
        }
    }

    #[test]
    fn counts_each_kind_and_rates_only_the_checked() {
        let invalid = || {
            Some(OutputValidity::Invalid {
                reason: "not JSON".into(),
            })
        };
        let records = [
            record(Some(OutputValidity::Valid)),
            record(Some(OutputValidity::Valid)),
            record(Some(OutputValidity::Valid)),
            record(invalid()),
            record(Some(OutputValidity::Unchecked)),
            record(None),
        ];
        let s = stats(&records, 2.0).unwrap();
        assert_eq!((s.requests, s.valid, s.invalid, s.unchecked), (5, 3, 1, 1));
        assert_eq!(s.valid_rate(), Some(0.75));
        assert_eq!(s.valid_throughput, 1.5);
        assert_eq!(stats(&[record(None)], 1.0), None);
        let grammar_only = stats(&[record(Some(OutputValidity::Unchecked))], 1.0).unwrap();
        assert_eq!(
            (
                grammar_only.valid_rate(),
                grammar_only.valid_rate_interval()
            ),
            (None, None)
        );
    }

    #[test]
    fn wilson_intervals_match_the_textbook_values() {
        // Wilson's formula evaluated independently (Python's floats, 2026-11-30):
        // 81 of 263: (0.2553, 0.3662); 100 of 100: (0.9630, 1.0); 0 of 10: (0.0, 0.2775).
        let close = |(lo, hi): (f64, f64), (elo, ehi): (f64, f64)| {
            assert!(
                (lo - elo).abs() < 5e-5 && (hi - ehi).abs() < 5e-5,
                "{lo} {hi}"
            );
        };
        close(wilson_interval(81, 263, Z_95).unwrap(), (0.2553, 0.3662));
        close(wilson_interval(100, 100, Z_95).unwrap(), (0.9630, 1.0));
        close(wilson_interval(0, 10, Z_95).unwrap(), (0.0, 0.2775));
        assert_eq!(wilson_interval(0, 0, Z_95), None);
    }
}
