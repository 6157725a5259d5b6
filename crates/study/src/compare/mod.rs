//! `bench compare A.json B.json`: every measured figure the two results share, with the
//! difference and whether it is larger than the run-to-run noise, so that "B is 3% slower"
//! comes with "and that is (not) chance".
//!
//! The noise comes from the results themselves, the best source first:
//!
//! 1. `--num-runs` summaries ([`runs`]): the runs' own spread of the figure, Welch's t
//!    test on the run values (with one side a summary and the other a single result, the
//!    summary's spread stands for both);
//! 2. `--save-detailed` results, for the latency statistics: the per-request TTFTs,
//!    TPOTs, ITLs and E2ELs, Welch's test for a mean, distribution-free 95% intervals of
//!    the two percentiles for a median or percentile (apart when they do not overlap).
//!    This is the noise of sampling requests within one run; a server whose state moves
//!    between runs has more, which only runs can show;
//! 3. otherwise the noise is unknown, and a difference counts when it is larger than
//!    [`Thresholds::unknown_noise_pct`] percent.
//!
//! A difference the tests find real still has to be larger than
//! [`Thresholds::min_effect_pct`]: with thousands of requests a test finds a 0.3 ms shift
//! of a 20 ms TTFT "significant", which tells nobody anything.
//!
//! A difference is "faster" or "slower" where the figure has a direction (throughputs and
//! rates higher, latencies and the duration lower), "higher" or "lower" elsewhere.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Result;
use serde_json::{Map, Value, json};

use crate::runs::{self, RunsSummary};
use bench_core::metrics::confidence::percentile_interval;
use bench_core::metrics::significance::{Moments, t_two_sided, welch};
use bench_core::report::json::float;

/// The significance level of the noise tests.
const ALPHA: f64 = 0.05;

/// One side of a comparison, read from its file.
#[derive(Debug, Clone)]
pub struct Side {
    pub path: PathBuf,
    /// The measured figures, in the file's order (a summary: the runs' means).
    pub values: Vec<(String, f64)>,
    /// A `--num-runs` summary's spreads.
    pub runs: Option<RunsSummary>,
    /// A `--save-detailed` result's per-request latencies.
    pub requests: Option<Requests>,
    /// Those of the requests inside the run's steady-state window (found from the lists
    /// as the run found it), for the `steady_state_*` latencies.
    pub steady: Option<Requests>,
    /// Documents in the file besides the one compared (an appended file: the last one).
    pub skipped: usize,
}

/// The per-request latency samples of a detailed result, in seconds, successful
/// requests only.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Requests {
    pub ttft: Vec<f64>,
    pub tpot: Vec<f64>,
    pub itl: Vec<f64>,
    pub e2el: Vec<f64>,
}

impl Requests {
    /// The successful requests of `d` that `keep` keeps.
    fn of(d: &crate::results::Detailed, keep: impl Fn(usize) -> bool) -> Requests {
        let mut r = Requests::default();
        for i in 0..d.ttfts.len() {
            if !d.errors[i].is_empty() || !keep(i) {
                continue;
            }
            let latency = d.latency(i);
            r.ttft.push(d.ttfts[i]);
            r.e2el.push(latency);
            r.itl.extend_from_slice(&d.itls[i]);
            if d.output_lens[i] > 1 {
                r.tpot
                    .push((latency - d.ttfts[i]) / (d.output_lens[i] - 1) as f64);
            }
        }
        r
    }

    /// The successful requests of `d` that started and ended inside its steady-state
    /// window, `None` when the run had none. The window depends only on when requests
    /// started and ended, so it is the run's own, whatever the lists' clock origin.
    fn steady(d: &crate::results::Detailed) -> Option<Requests> {
        let records: Vec<bench_core::record::RequestRecord> = (0..d.ttfts.len())
            .map(|i| bench_core::record::RequestRecord {
                start_time: d.start_times[i],
                latency: d.latency(i),
                ..Default::default()
            })
            .collect();
        let window = bench_core::steady_state::window(&records).ok()?;
        Some(Requests::of(d, |i| {
            window.holds(d.start_times[i], d.start_times[i] + d.latency(i))
        }))
    }

    fn of_metric(&self, name: &str) -> Option<&[f64]> {
        match name {
            "ttft" => Some(&self.ttft),
            "tpot" => Some(&self.tpot),
            "itl" => Some(&self.itl),
            "e2el" => Some(&self.e2el),
            _ => None,
        }
    }
}

impl Side {
    /// Reads a result or a `--num-runs` summary (the last document of an appended file).
    pub fn load(path: &Path) -> Result<Side> {
        let mut docs = crate::results::read(path)?;
        let skipped = docs.len() - 1;
        let doc = docs.pop().unwrap_or_default();
        let in_file = |e: anyhow::Error| e.context(format!("{}", path.display()));
        let summary = RunsSummary::from_json(&doc).map_err(in_file)?;
        let (values, requests, steady) = match &summary {
            Some(s) => (
                s.metrics.iter().map(|m| (m.key.clone(), m.mean)).collect(),
                None,
                None,
            ),
            None => {
                let detailed =
                    crate::results::detailed(&Value::Object(doc.clone())).map_err(in_file)?;
                (
                    runs::measured(&doc),
                    detailed.as_ref().map(|d| Requests::of(d, |_| true)),
                    detailed.as_ref().and_then(Requests::steady),
                )
            }
        };
        Ok(Side {
            path: path.to_path_buf(),
            values,
            runs: summary,
            requests,
            steady,
            skipped,
        })
    }

    fn value(&self, key: &str) -> Option<f64> {
        self.values.iter().find(|(k, _)| k == key).map(|&(_, v)| v)
    }
}

/// Which way is better for a figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    HigherIsFaster,
    LowerIsFaster,
    /// Neither (counts, settings the run reports, spreads, trends).
    Neither,
}

/// The direction of a result key, by its name.
pub fn direction(key: &str) -> Direction {
    let rate = key.contains("throughput")
        || key.contains("goodput")
        || key.starts_with("achieved_")
        || key == "max_output_tokens_per_s"
        || key == "rtfx";
    let latency = key.ends_with("_ms") && !key.contains("std_");
    if rate {
        Direction::HigherIsFaster
    } else if latency || key == "duration" {
        Direction::LowerIsFaster
    } else {
        Direction::Neither
    }
}

/// How a row's noise was judged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Noise {
    /// Welch's test on the `--num-runs` values (`p`: its two-sided p-value).
    Runs { p: f64 },
    /// Welch's test on the per-request values of a `--save-detailed` result.
    RequestMeans { p: f64 },
    /// Distribution-free 95% intervals of a per-request percentile (the exact
    /// order-statistic intervals of the result's `ci95`); `apart` when they do not
    /// overlap; `unbounded` when an end that could have told them apart is one the sample
    /// cannot bound (the p99 of fewer than 367 requests has no upper end): too few
    /// requests to tell.
    RequestPercentiles { apart: bool, unbounded: bool },
    /// No noise measured: `--threshold-pct`.
    Threshold { pct: f64 },
}

impl Noise {
    /// Whether the difference is larger than the noise (and, where the noise was
    /// measured, than `min_effect_pct`).
    fn exceeded(self, difference_pct: Option<f64>, min_effect_pct: f64) -> bool {
        let large = difference_pct.is_none_or(|d| d.abs() > min_effect_pct);
        match self {
            Noise::Runs { p } | Noise::RequestMeans { p } => p < ALPHA && large,
            Noise::RequestPercentiles { apart, .. } => apart && large,
            Noise::Threshold { pct } => difference_pct.is_some_and(|d| d.abs() > pct),
        }
    }

    /// The name written in the table and the JSON.
    pub fn method(self) -> &'static str {
        match self {
            Noise::Runs { .. } => "runs",
            Noise::RequestMeans { .. } => "per-request Welch",
            Noise::RequestPercentiles {
                unbounded: true, ..
            } => "per-request intervals: too few requests",
            Noise::RequestPercentiles { .. } => "per-request intervals",
            Noise::Threshold { .. } => "threshold",
        }
    }

    fn p_value(self) -> Option<f64> {
        match self {
            Noise::Runs { p } | Noise::RequestMeans { p } => Some(p),
            _ => None,
        }
    }
}

/// What a difference amounts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Same,
    WithinNoise,
    Faster,
    Slower,
    Higher,
    Lower,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Same => "same",
            Verdict::WithinNoise => "within noise",
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Higher => "higher",
            Verdict::Lower => "lower",
        }
    }
}

/// One figure of both results.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub key: String,
    pub a: f64,
    pub b: f64,
    /// `b - a`.
    pub difference: f64,
    /// The difference in percent of `a`; `None` when `a` is 0.
    pub difference_pct: Option<f64>,
    pub noise: Noise,
    pub verdict: Verdict,
}

/// The comparison of two results.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub a: PathBuf,
    pub b: PathBuf,
    pub rows: Vec<Row>,
    /// What the reader should know about how the noise was judged.
    pub notes: Vec<String>,
}

/// What makes a difference count (`bench compare`'s `--threshold-pct` and
/// `--min-effect-pct`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// Where the results measure no noise: a difference counts above this percentage.
    pub unknown_noise_pct: f64,
    /// Where they do: a difference beyond the noise counts above this percentage.
    pub min_effect_pct: f64,
}

/// Compares `b` with `a`, figure by figure in `a`'s order (vLLM's keys first, as result
/// files hold them).
pub fn compare(a: &Side, b: &Side, thresholds: Thresholds) -> Comparison {
    let threshold_pct = thresholds.unknown_noise_pct;
    let rows: Vec<Row> =
        a.values
            .iter()
            .filter_map(|(key, va)| {
                let vb = b.value(key)?;
                let difference = vb - va;
                let difference_pct = (*va != 0.0).then(|| 100.0 * difference / va.abs());
                let noise = noise(a, b, key, threshold_pct);
                let verdict =
                    if difference == 0.0 {
                        Verdict::Same
                    } else if !noise.exceeded(difference_pct, thresholds.min_effect_pct) {
                        Verdict::WithinNoise
                    } else {
                        match (direction(key), difference > 0.0) {
                            (Direction::HigherIsFaster, true)
                            | (Direction::LowerIsFaster, false) => Verdict::Faster,
                            (Direction::HigherIsFaster, false)
                            | (Direction::LowerIsFaster, true) => Verdict::Slower,
                            (Direction::Neither, true) => Verdict::Higher,
                            (Direction::Neither, false) => Verdict::Lower,
                        }
                    };
                Some(Row {
                    key: key.clone(),
                    a: *va,
                    b: vb,
                    difference,
                    difference_pct,
                    noise,
                    verdict,
                })
            })
            .collect();
    let mut notes = Vec::new();
    for side in [a, b] {
        if side.skipped > 0 {
            notes.push(format!(
                "{} holds {} results; the last one is compared",
                side.path.display(),
                side.skipped + 1
            ));
        }
    }
    if rows
        .iter()
        .any(|r| !matches!(r.noise, Noise::Threshold { .. }))
    {
        notes.push(format!(
            "a difference beyond the measured noise counts when it is larger than {}% \
             (--min-effect-pct)",
            thresholds.min_effect_pct
        ));
    }
    if rows
        .iter()
        .any(|r| matches!(r.noise, Noise::Threshold { .. }))
    {
        let sources = "(--num-runs summaries, or --save-detailed results for the latencies)";
        notes.push(format!(
            "where the results do not measure the noise {sources}, a difference counts \
             beyond {threshold_pct}% (--threshold-pct)"
        ));
    }
    Comparison {
        a: a.path.clone(),
        b: b.path.clone(),
        rows,
        notes,
    }
}

/// How the noise of `key` is judged between `a` and `b` (see the module documentation).
fn noise(a: &Side, b: &Side, key: &str, threshold_pct: f64) -> Noise {
    let spread = |side: &Side| side.runs.as_ref().and_then(|r| r.get(key)).cloned();
    match (spread(a), spread(b)) {
        (Some(sa), Some(sb)) => {
            if let Some(p) = welch(Moments::of(&sa.values), Moments::of(&sb.values)) {
                return Noise::Runs { p };
            }
        }
        (Some(s), None) | (None, Some(s)) if s.values.len() >= 2 => {
            // One summary and one run: the summary's spread stands for both, and the run
            // is one more draw (t with n - 1 degrees of freedom).
            let (va, vb) = (a.value(key), b.value(key));
            if let (Some(va), Some(vb)) = (va, vb) {
                let n = s.values.len() as f64;
                let se = s.std * (1.0 + 1.0 / n).sqrt();
                let p = match se > 0.0 {
                    true => t_two_sided((vb - va) / se, n - 1.0),
                    false => f64::from(u8::from(va == vb)),
                };
                return Noise::Runs { p };
            }
        }
        _ => {}
    }
    let requests = match key.strip_prefix("steady_state_") {
        Some(key) => a.steady.as_ref().zip(b.steady.as_ref()).map(|r| (r, key)),
        None => a
            .requests
            .as_ref()
            .zip(b.requests.as_ref())
            .map(|r| (r, key)),
    };
    if let Some(((ra, rb), key)) = requests
        && let Some(noise) = request_noise(ra, rb, key)
    {
        return noise;
    }
    Noise::Threshold { pct: threshold_pct }
}

/// The per-request noise of a latency statistic (`mean_ttft_ms`, `median_itl_ms`,
/// `p99_e2el_ms`, ..., and the same of the steady state's requests); `None` for another
/// key.
fn request_noise(a: &Requests, b: &Requests, key: &str) -> Option<Noise> {
    let stat = key.strip_suffix("_ms")?;
    let (stat, metric) = stat.split_once('_')?;
    let (sa, sb) = (a.of_metric(metric)?, b.of_metric(metric)?);
    let percentile = match stat {
        "mean" => {
            let p = welch(Moments::of(sa), Moments::of(sb))?;
            return Some(Noise::RequestMeans { p });
        }
        "median" => 50.0,
        _ => stat.strip_prefix('p')?.parse::<f64>().ok()?,
    };
    let sorted = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v
    };
    if sa.is_empty() || sb.is_empty() {
        return None;
    }
    let (ia, ib) = (
        percentile_interval(&sorted(sa), percentile),
        percentile_interval(&sorted(sb), percentile),
    );
    // Apart when one's upper end lies below the other's lower end; an end the sample
    // cannot bound never does.
    let below = |hi: Option<f64>, lo: Option<f64>| match (hi, lo) {
        (Some(hi), Some(lo)) => Some(hi < lo),
        _ => None,
    };
    let (a_below, b_below) = (below(ia.hi, ib.lo), below(ib.hi, ia.lo));
    let apart = a_below == Some(true) || b_below == Some(true);
    Some(Noise::RequestPercentiles {
        apart,
        unbounded: !apart && (a_below.is_none() || b_below.is_none()),
    })
}

impl Comparison {
    /// The rows where B is slower than A beyond the noise.
    pub fn regressions(&self) -> impl Iterator<Item = &Row> {
        self.rows.iter().filter(|r| r.verdict == Verdict::Slower)
    }

    /// The console table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "A: {}", self.a.display());
        let _ = writeln!(out, "B: {}", self.b.display());
        for note in &self.notes {
            let _ = writeln!(out, "note: {note}");
        }
        let _ = writeln!(
            out,
            "{:<40} {:>12} {:>12} {:>12} {:>8}  Verdict (noise)",
            "Metric", "A", "B", "B - A", "%"
        );
        for r in &self.rows {
            let pct = r
                .difference_pct
                .map_or("-".to_string(), |p| format!("{p:+.1}"));
            // Equal values need no noise to judge them.
            let verdict = match r.verdict {
                Verdict::Same => Verdict::Same.name().to_string(),
                v => format!("{} ({})", v.name(), r.noise.method()),
            };
            let _ = writeln!(
                out,
                "{:<40} {:>12.2} {:>12.2} {:>+12.2} {:>8}  {verdict}",
                r.key, r.a, r.b, r.difference, pct,
            );
        }
        out
    }

    /// The comparison as JSON (`--output-json`).
    pub fn to_json(&self) -> Value {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                let mut o = Map::new();
                o.insert("key".into(), json!(r.key));
                o.insert("a".into(), float(r.a));
                o.insert("b".into(), float(r.b));
                o.insert("difference".into(), float(r.difference));
                o.insert(
                    "difference_pct".into(),
                    r.difference_pct.map_or(Value::Null, float),
                );
                o.insert("verdict".into(), json!(r.verdict.name()));
                o.insert("noise".into(), json!(r.noise.method()));
                if let Some(p) = r.noise.p_value() {
                    o.insert("p_value".into(), float(p));
                }
                if let Noise::Threshold { pct } = r.noise {
                    o.insert("threshold_pct".into(), float(pct));
                }
                Value::Object(o)
            })
            .collect();
        json!({
            "a": self.a.display().to_string(),
            "b": self.b.display().to_string(),
            "notes": self.notes,
            "metrics": rows,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(values: &[(&str, f64)]) -> Side {
        Side {
            path: PathBuf::from("x.json"),
            values: values.iter().map(|&(k, v)| (k.to_string(), v)).collect(),
            runs: None,
            requests: None,
            steady: None,
            skipped: 0,
        }
    }

    fn th(unknown_noise_pct: f64) -> Thresholds {
        Thresholds {
            unknown_noise_pct,
            min_effect_pct: 1.0,
        }
    }

    fn row<'c>(c: &'c Comparison, key: &str) -> &'c Row {
        c.rows.iter().find(|r| r.key == key).unwrap()
    }

    /// The report's own detailed result file (its keys and lists as bench writes them),
    /// kept beside the core's report tests that write it.
    #[test]
    fn a_detailed_result_reads_its_requests_and_equals_itself() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../core/src/report/testdata/result-detailed.json");
        let side = Side::load(&path).unwrap();
        let requests = side.requests.as_ref().unwrap();
        // Four requests, one failed.
        assert_eq!((requests.ttft.len(), requests.e2el.len()), (3, 3));
        assert!(side.value("num_prompts").is_none() && side.value("duration") == Some(10.0));
        let c = compare(&side, &side, th(5.0));
        assert!(!c.rows.is_empty());
        assert!(
            c.rows.iter().all(|r| r.verdict == Verdict::Same),
            "{:?}",
            c.rows
        );
    }

    #[test]
    fn directions_follow_the_keys_meaning() {
        assert_eq!(direction("output_throughput"), Direction::HigherIsFaster);
        assert_eq!(direction("request_goodput"), Direction::HigherIsFaster);
        assert_eq!(direction("p99_ttft_ms"), Direction::LowerIsFaster);
        assert_eq!(
            direction("steady_state_mean_itl_ms"),
            Direction::LowerIsFaster
        );
        assert_eq!(direction("duration"), Direction::LowerIsFaster);
        assert_eq!(direction("std_ttft_ms"), Direction::Neither);
        assert_eq!(direction("completed"), Direction::Neither);
        assert_eq!(direction("ttft_slope_ms_per_s"), Direction::Neither);
    }

    #[test]
    fn without_noise_the_threshold_decides() {
        let a = side(&[
            ("mean_ttft_ms", 20.0),
            ("output_throughput", 100.0),
            ("completed", 10.0),
        ]);
        let b = side(&[
            ("mean_ttft_ms", 21.0),
            ("output_throughput", 80.0),
            ("only_b", 1.0),
        ]);
        let c = compare(&a, &b, th(5.0));
        // Keys both share, in A's order.
        let keys: Vec<&str> = c.rows.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["mean_ttft_ms", "output_throughput"]);
        assert_eq!(row(&c, "mean_ttft_ms").verdict, Verdict::WithinNoise);
        assert_eq!(row(&c, "output_throughput").verdict, Verdict::Slower);
        assert_eq!(row(&c, "output_throughput").difference_pct, Some(-20.0));
        assert_eq!(c.regressions().count(), 1);
        assert!(c.notes.iter().any(|n| n.contains("--threshold-pct")));
    }

    #[test]
    fn per_request_lists_measure_the_latencies_noise() {
        // 1,000 requests: enough for the p99's interval to have both ends.
        let spread = |base: f64| -> Vec<f64> {
            (0..1000)
                .map(|i| base + f64::from(i % 10) * 0.001)
                .collect()
        };
        let mut a = side(&[("mean_ttft_ms", 24.5), ("p99_ttft_ms", 29.0)]);
        let mut b = side(&[("mean_ttft_ms", 64.5), ("p99_ttft_ms", 69.0)]);
        let mut same = side(&[("mean_ttft_ms", 24.6), ("p99_ttft_ms", 29.0)]);
        a.requests = Some(Requests {
            ttft: spread(0.020),
            ..Requests::default()
        });
        b.requests = Some(Requests {
            ttft: spread(0.060),
            ..Requests::default()
        });
        same.requests = Some(Requests {
            ttft: spread(0.0201),
            ..Requests::default()
        });
        let c = compare(&a, &b, th(5.0));
        assert_eq!(row(&c, "mean_ttft_ms").verdict, Verdict::Slower);
        assert!(matches!(row(&c, "mean_ttft_ms").noise, Noise::RequestMeans { p } if p < 1e-9));
        assert_eq!(row(&c, "p99_ttft_ms").verdict, Verdict::Slower);
        let c = compare(&a, &same, th(5.0));
        assert_eq!(row(&c, "mean_ttft_ms").verdict, Verdict::WithinNoise);
        assert_eq!(row(&c, "p99_ttft_ms").verdict, Verdict::Same);
        assert!(
            c.notes.iter().all(|n| !n.contains("--threshold-pct")),
            "{:?}",
            c.notes
        );
    }

    #[test]
    fn a_percentile_too_few_requests_can_bound_is_never_judged_apart() {
        // 60 requests each: the p99's interval has no upper end (it needs 367: 0.99^n <= 2.5%),
        // so however the samples' top values fall, neither run is slower by it; the mean
        // (Welch) still tells them apart.
        let values =
            |base: f64| -> Vec<f64> { (0..60).map(|i| base + f64::from(i) * 1e-4).collect() };
        let mut a = side(&[("mean_ttft_ms", 22.95), ("p99_ttft_ms", 25.9)]);
        let mut b = side(&[("mean_ttft_ms", 52.95), ("p99_ttft_ms", 55.9)]);
        a.requests = Some(Requests {
            ttft: values(0.020),
            ..Requests::default()
        });
        b.requests = Some(Requests {
            ttft: values(0.050),
            ..Requests::default()
        });
        let c = compare(&a, &b, th(5.0));
        let p99 = row(&c, "p99_ttft_ms");
        assert!(
            matches!(
                p99.noise,
                Noise::RequestPercentiles {
                    apart: false,
                    unbounded: true
                }
            ),
            "{p99:?}"
        );
        assert_eq!(p99.verdict, Verdict::WithinNoise);
        assert_eq!(
            p99.noise.method(),
            "per-request intervals: too few requests"
        );
        assert_eq!(row(&c, "mean_ttft_ms").verdict, Verdict::Slower);
        // The median of 60 is bounded on both sides: told apart.
        let mut a = side(&[("median_ttft_ms", 22.95)]);
        let mut b = side(&[("median_ttft_ms", 52.95)]);
        a.requests = Some(Requests {
            ttft: values(0.020),
            ..Requests::default()
        });
        b.requests = Some(Requests {
            ttft: values(0.050),
            ..Requests::default()
        });
        let median = compare(&a, &b, th(5.0));
        assert_eq!(row(&median, "median_ttft_ms").verdict, Verdict::Slower);
    }

    #[test]
    fn the_steady_state_latencies_are_judged_on_the_steady_requests() {
        // Whole-run lists say nothing about the steady_state_* keys; the steady state's own
        // requests do (here its ITLs are alike, so a 6% move of a p99 is within noise,
        // where the threshold alone would call it slower).
        let itls =
            |base: f64| -> Vec<f64> { (0..400).map(|i| base + f64::from(i) * 0.000_002).collect() };
        let mut a = side(&[("steady_state_p99_itl_ms", 2.67)]);
        let mut b = side(&[("steady_state_p99_itl_ms", 2.83)]);
        assert_eq!(
            row(&compare(&a, &b, th(5.0)), "steady_state_p99_itl_ms").verdict,
            Verdict::Slower
        );
        a.steady = Some(Requests {
            itl: itls(0.0020),
            ..Requests::default()
        });
        b.steady = Some(Requests {
            itl: itls(0.002_001),
            ..Requests::default()
        });
        let c = compare(&a, &b, th(5.0));
        let steady = row(&c, "steady_state_p99_itl_ms");
        assert!(
            matches!(steady.noise, Noise::RequestPercentiles { apart: false, .. }),
            "{steady:?}"
        );
        assert_ne!(steady.verdict, Verdict::Slower);
    }

    #[test]
    fn runs_measure_the_run_to_run_noise() {
        let summary = |values: &[f64]| {
            let runs: Vec<Vec<(String, f64)>> = values
                .iter()
                .map(|&v| vec![("output_throughput".to_string(), v)])
                .collect();
            RunsSummary::new(runs.len(), &runs, vec![])
        };
        let with_runs = |values: &[f64]| {
            let s = summary(values);
            let mut side = side(&[("output_throughput", s.metrics[0].mean)]);
            side.runs = Some(s);
            side
        };
        // A 10% drop against runs that wobble by 10%: chance.
        let a = with_runs(&[90.0, 100.0, 110.0]);
        let b = with_runs(&[80.0, 90.0, 100.0]);
        assert_eq!(
            compare(&a, &b, th(1.0)).rows[0].verdict,
            Verdict::WithinNoise
        );
        // The same drop against runs within 1%: real.
        let a = with_runs(&[99.0, 100.0, 101.0]);
        let b = with_runs(&[89.0, 90.0, 91.0]);
        assert_eq!(compare(&a, &b, th(50.0)).rows[0].verdict, Verdict::Slower);
        // One run against a summary: the summary's spread stands for both.
        let one = side(&[("output_throughput", 90.0)]);
        let r = &compare(&a, &one, th(50.0)).rows[0];
        assert_eq!((r.verdict, r.noise.method()), (Verdict::Slower, "runs"));
    }
}
