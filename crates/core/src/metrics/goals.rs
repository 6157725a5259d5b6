//! `--until-confident FIGURE:REL`'s goals and verdicts: which figure must be known how
//! well, how a goal is judged on the run's live figures ([`crate::client::live`]) and on
//! the result's own, and what the result says (key `until_confident`). The task that
//! watches a run and stops it is `crate::until_confident`.
//!
//! A goal is met when the 95% confidence interval of its figure ([`super::confidence`])
//! lies within REL of the figure. The live check waits for [`MIN_REQUESTS`] completed
//! requests: below that a t interval of a skewed latency's mean does not hold its level,
//! and one lucky look could end the run. The result's verdict ([`Verdicts`]) is computed
//! from the result's own exact figures and intervals, over every request the run
//! completed, so it says whether the goal holds for the figures the result reports.
//! Looking repeatedly and stopping at the first look that passes makes a narrow interval
//! slightly likelier than its level says (optional stopping); the requests that finish
//! after the stop, and the verdict on all of them, temper that.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde_json::{Value, json};

use super::confidence::{Interval, mean_interval, quantile_ranks};
use super::config::PercentileMetric;
use super::config::percentile_word;
use super::stats::Summary;
use crate::client::live::{LiveMetric, LiveSnapshot};

/// Completed requests before a goal may be judged met.
pub const MIN_REQUESTS: u64 = 30;

/// Which statistic of a latency a goal is about.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Statistic {
    Mean,
    Median,
    /// A percentile, 0 < p < 100.
    Percentile(f64),
}

/// One `FIGURE:REL`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Goal {
    pub statistic: Statistic,
    pub metric: LiveMetric,
    /// The interval's ends must lie within this fraction of the figure.
    pub rel: f64,
}

/// A `FIGURE:REL` that does not parse; the message says what is expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct GoalError(String);

impl FromStr for Goal {
    type Err = GoalError;

    fn from_str(s: &str) -> Result<Goal, GoalError> {
        let err = |what: &str| {
            GoalError(format!(
                "{what} in `{s}`: expected FIGURE:REL, FIGURE one of mean_, median_ or pNN_ \
                 followed by ttft, tpot, itl or e2el (p99_ttft), and REL a percentage or a \
                 fraction above 0 (5% or 0.05)"
            ))
        };
        let (figure, rel) = s.split_once(':').ok_or_else(|| err("no `:`"))?;
        let (statistic, metric) = figure.split_once('_').ok_or_else(|| err("no statistic"))?;
        let metric = LiveMetric::ALL
            .into_iter()
            .find(|m| m.name() == metric)
            .ok_or_else(|| err("unknown latency"))?;
        let statistic = match statistic {
            "mean" => Statistic::Mean,
            "median" => Statistic::Median,
            p => {
                let p: f64 = p
                    .strip_prefix('p')
                    .and_then(|p| p.parse().ok())
                    .ok_or_else(|| err("unknown statistic"))?;
                if !(p > 0.0 && p < 100.0) {
                    return Err(err("a percentile must be above 0 and below 100"));
                }
                Statistic::Percentile(p)
            }
        };
        let rel = match rel.strip_suffix('%') {
            Some(pct) => pct.trim().parse::<f64>().map(|v| v / 100.0),
            None => rel.trim().parse::<f64>(),
        }
        .ok()
        .filter(|r| r.is_finite() && *r > 0.0)
        .ok_or_else(|| err("REL is not a number above 0"))?;
        Ok(Goal {
            statistic,
            metric,
            rel,
        })
    }
}

impl fmt::Display for Goal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} within {}%", self.key(), self.rel * 100.0)
    }
}

impl Goal {
    /// The result key of the figure (`p99_ttft_ms`), as vLLM names it.
    pub fn key(&self) -> String {
        let name = self.metric.name();
        match self.statistic {
            Statistic::Mean => format!("mean_{name}_ms"),
            Statistic::Median => format!("median_{name}_ms"),
            Statistic::Percentile(p) => {
                format!("p{}_{name}_ms", percentile_word(p))
            }
        }
    }

    /// The figure and its interval from the live histograms (microseconds), where the
    /// run has completed enough requests.
    pub fn live(&self, snapshot: &LiveSnapshot) -> Option<(f64, Interval)> {
        if snapshot.completed < MIN_REQUESTS {
            return None;
        }
        let h = snapshot.histogram(self.metric);
        let n = usize::try_from(h.len()).ok()?;
        if n == 0 {
            return None;
        }
        Some(match self.statistic {
            Statistic::Mean => (h.mean(), mean_interval(h.mean(), h.stdev(), n)),
            Statistic::Median | Statistic::Percentile(_) => {
                let q = self.quantile();
                let at_rank = |r: usize| h.value_at_quantile(r as f64 / n as f64) as f64;
                let (l, u) = quantile_ranks(n, q);
                (
                    h.value_at_quantile(q) as f64,
                    Interval {
                        lo: l.map(at_rank),
                        hi: u.map(at_rank),
                    },
                )
            }
        })
    }

    fn quantile(&self) -> f64 {
        match self.statistic {
            Statistic::Mean | Statistic::Median => 0.5,
            Statistic::Percentile(p) => p / 100.0,
        }
    }

    /// The result's section of the goal's latency.
    fn percentile_metric(&self) -> PercentileMetric {
        match self.metric {
            LiveMetric::Ttft => PercentileMetric::Ttft,
            LiveMetric::Tpot => PercentileMetric::Tpot,
            LiveMetric::Itl => PercentileMetric::Itl,
            LiveMetric::E2el => PercentileMetric::E2el,
        }
    }

    /// The figure and its interval as the result reports them (milliseconds); `None`
    /// when the result does not report this latency or percentile.
    fn reported<'m>(
        &self,
        summary: impl Fn(PercentileMetric) -> &'m Summary,
    ) -> Option<(f64, Interval)> {
        let s = summary(self.percentile_metric());
        match self.statistic {
            Statistic::Mean => Some((s.mean, s.intervals.mean)),
            Statistic::Median => Some((s.median, s.intervals.median)),
            Statistic::Percentile(p) => s
                .percentiles
                .iter()
                .zip(&s.intervals.percentiles)
                .find(|((q, _), _)| *q == p)
                .map(|((_, value), interval)| (*value, *interval)),
        }
    }
}

/// `--until-confident`'s goals and their deadline.
#[derive(Debug, Clone, PartialEq)]
pub struct UntilConfident {
    pub goals: Vec<Goal>,
    /// The run stops here whether or not the goals are met.
    pub max_duration: Duration,
}

impl UntilConfident {
    /// Makes the result report every goal's figure: its latency's section
    /// (`--percentile-metrics`) and its percentile (`--metric-percentiles`), added where
    /// the flags left them out, so that the verdict has a figure to judge.
    pub fn report_in(&self, config: &mut super::config::MetricsConfig) {
        for goal in &self.goals {
            let metric = goal.percentile_metric();
            if !config.percentile_metrics.contains(&metric) {
                config.percentile_metrics.push(metric);
            }
            if let Statistic::Percentile(p) = goal.statistic
                && !config.percentiles.contains(&p)
            {
                config.percentiles.push(p);
            }
        }
    }
}

/// Why a run with goals ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Every goal was met on the live figures.
    Confident,
    /// The maximum duration passed first.
    MaxDuration,
    /// The workload (`--num-prompts`) ran out first, or something else stopped the run.
    Workload,
}

impl Ended {
    /// As the result's `ended_by` says it.
    pub fn name(self) -> &'static str {
        match self {
            Ended::Confident => "confident",
            Ended::MaxDuration => "max_duration",
            Ended::Workload => "workload_exhausted",
        }
    }
}

/// What the result says of a run with goals (key `until_confident`).
#[derive(Debug, Clone, PartialEq)]
pub struct Verdicts {
    pub ended: Ended,
    pub max_duration: Duration,
    /// Requests of the workload never sent because the run stopped first.
    pub not_sent: usize,
    pub goals: Vec<(Goal, Option<(f64, Interval)>)>,
}

impl Verdicts {
    /// The verdicts on the result's figures, which `summary` gives by latency (the
    /// result's `Metrics::summary`).
    pub fn new<'m>(
        config: &UntilConfident,
        ended: Ended,
        not_sent: usize,
        summary: impl Fn(PercentileMetric) -> &'m Summary + Copy,
    ) -> Verdicts {
        Verdicts {
            ended,
            not_sent,
            max_duration: config.max_duration,
            goals: config
                .goals
                .iter()
                .map(|g| (*g, g.reported(summary)))
                .collect(),
        }
    }

    /// Whether every goal holds for the result's own figures.
    pub fn reached(&self) -> bool {
        self.goals.iter().all(|(goal, figure)| {
            figure.is_some_and(|(estimate, interval)| interval.within(estimate, goal.rel))
        })
    }

    /// The result's `until_confident` object.
    pub fn to_json(&self) -> Value {
        let goals: Vec<Value> = self
            .goals
            .iter()
            .map(|(goal, figure)| {
                let reached = figure.is_some_and(|(e, i)| i.within(e, goal.rel));
                let (value, interval) = match figure {
                    Some((e, i)) => (json!(e), json!([i.lo, i.hi])),
                    None => (Value::Null, Value::Null),
                };
                json!({
                    "figure": goal.key(),
                    "rel": goal.rel,
                    "value": value,
                    "ci95": interval,
                    "reached": reached,
                })
            })
            .collect();
        json!({
            "reached": self.reached(),
            "ended_by": self.ended.name(),
            "max_duration_s": self.max_duration.as_secs_f64(),
            "requests_not_sent": self.not_sent,
            "goals": goals,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goals_parse_as_the_result_names_figures() {
        let g: Goal = "p99_ttft:5%".parse().unwrap();
        assert_eq!(g.statistic, Statistic::Percentile(99.0));
        assert_eq!(g.metric, LiveMetric::Ttft);
        assert!((g.rel - 0.05).abs() < 1e-15);
        assert_eq!(g.key(), "p99_ttft_ms");
        assert_eq!(
            "mean_tpot:0.02".parse::<Goal>().unwrap().key(),
            "mean_tpot_ms"
        );
        assert_eq!(
            "median_e2el:1%".parse::<Goal>().unwrap().key(),
            "median_e2el_ms"
        );
        assert_eq!(
            "p99.9_itl:10%".parse::<Goal>().unwrap().key(),
            "p99.9_itl_ms"
        );
        for bad in [
            "p99_ttft",
            "p99_foo:5%",
            "p100_ttft:5%",
            "max_ttft:5%",
            "p99_ttft:0",
            "p99_ttft:x%",
        ] {
            let e = bad.parse::<Goal>().unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
    }
}
