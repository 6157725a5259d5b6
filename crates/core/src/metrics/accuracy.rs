//! Accuracy under load: how many completed answers the dataset's grader judged right (not
//! in vLLM's serving result; vLLM's and SGLang's GSM8K scripts print an `accuracy` and an
//! `invalid_rate` of their own, computed as here).
//!
//! Accuracy is over the graded requests: those whose sample carried a reference and that
//! completed. A request that failed has no answer to judge; it is counted in `failed`, as
//! every failure is, and left out of the accuracy, so that an overloaded server's errors
//! and its wrong answers are told apart. Its 95% interval is Wilson's score interval, as
//! for structured output (see [`super::structured`]): it stays inside [0, 1] and honest
//! for small samples and rates near 0 or 1.

use super::structured::{Z_95, wilson_interval};
use crate::record::RequestRecord;

/// The accuracy figures of a run whose dataset graded its answers.
#[derive(Debug, Clone, PartialEq)]
pub struct AccuracyStats {
    /// Completed requests whose sample carried a reference.
    pub graded: usize,
    /// Graded requests the grader judged right.
    pub correct: usize,
    /// Graded requests in which the grader found no answer at all (vLLM's `invalid_rate`
    /// counts these): wrong, and counted apart because they say the model did not follow
    /// the format rather than that it got the answer wrong.
    pub invalid: usize,
    /// The mean of the grader's scores (equal to the accuracy for a right-or-wrong grader;
    /// graders with partial credit differ).
    pub mean_score: f64,
    /// Correct answers per second of the benchmark, beside goodput: the rate of useful
    /// answers, which a faster but less accurate configuration can lower.
    pub correct_throughput: f64,
}

impl AccuracyStats {
    /// The share of graded requests judged right.
    pub fn accuracy(&self) -> f64 {
        self.correct as f64 / self.graded as f64
    }

    /// The accuracy's 95% Wilson score interval.
    pub fn accuracy_interval(&self) -> (f64, f64) {
        wilson_interval(self.correct, self.graded, Z_95).expect("at least one graded request")
    }
}

/// The figures of `ordered`'s records, or `None` when no completed request was graded.
pub fn stats(ordered: &[RequestRecord], duration_s: f64) -> Option<AccuracyStats> {
    let mut graded = 0;
    let mut correct = 0;
    let mut invalid = 0;
    let mut score_sum = 0.0;
    for grade in ordered.iter().filter_map(|r| r.grade.as_ref()) {
        graded += 1;
        correct += usize::from(grade.correct);
        invalid += usize::from(grade.extracted.is_none());
        score_sum += grade.score;
    }
    (graded > 0).then(|| AccuracyStats {
        graded,
        correct,
        invalid,
        mean_score: score_sum / graded as f64,
        correct_throughput: correct as f64 / duration_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Graded;

    fn record(grade: Option<(bool, f64, Option<&str>)>) -> RequestRecord {
        RequestRecord {
            grade: grade.map(|(correct, score, extracted)| Graded {
                reference: "18".into(),
                correct,
                score,
                extracted: extracted.map(String::from),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn counts_the_graded_and_rates_the_right_ones() {
        let records = [
            record(Some((true, 1.0, Some("18")))),
            record(Some((true, 1.0, Some("18")))),
            record(Some((false, 0.0, Some("19")))),
            record(Some((false, 0.5, None))),
            record(None),
        ];
        let s = stats(&records, 4.0).unwrap();
        assert_eq!((s.graded, s.correct, s.invalid), (4, 2, 1));
        assert_eq!(s.accuracy(), 0.5);
        assert_eq!(s.mean_score, 0.625);
        assert_eq!(s.correct_throughput, 0.5);
        // Wilson's interval of 2 of 4 (Python's floats, 2026-12-01): (0.1500, 0.8500).
        let (lo, hi) = s.accuracy_interval();
        assert!(
            (lo - 0.1500).abs() < 5e-5 && (hi - 0.8500).abs() < 5e-5,
            "{lo} {hi}"
        );
        assert_eq!(stats(&[record(None)], 1.0), None);
    }
}
