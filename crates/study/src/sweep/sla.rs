//! SLA criteria (vLLM's `--sla-params`: `{"p99_ttft_ms": "<=200"}`), the search for the
//! largest request rate or concurrency that meets them (`serve_sla`), and the even scan of
//! `serve_workload`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// What a search or scan varies: a flag of `bench serve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlaVariable {
    RequestRate,
    MaxConcurrency,
}

impl SlaVariable {
    /// The key in parameters and results (and, with `-`, the flag).
    pub fn key(self) -> &'static str {
        match self {
            SlaVariable::RequestRate => "request_rate",
            SlaVariable::MaxConcurrency => "max_concurrency",
        }
    }

    /// The value a run supports, estimated from its result: the request throughput for a
    /// rate; for a concurrency, Little's law (throughput times mean end-to-end latency).
    pub fn estimate(self, run: &serde_json::Map<String, Value>) -> Result<f64> {
        let throughput = result_number(run, "request_throughput")?;
        Ok(match self {
            SlaVariable::RequestRate => throughput,
            SlaVariable::MaxConcurrency => {
                throughput * result_number(run, "mean_e2el_ms")? / 1000.0
            }
        })
    }
}

/// A number from a result document; the error names the key.
pub fn result_number(run: &serde_json::Map<String, Value>, key: &str) -> Result<f64> {
    run.get(key)
        .and_then(Value::as_f64)
        .with_context(|| format!("the result has no number {key:?}"))
}

/// Margins within this count as equal, so that `<` and `>` fail on equality.
const EPS: f64 = 1e-8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    fn text(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }
}

/// One SLO on one result key.
#[derive(Debug, Clone, PartialEq)]
pub struct Criterion {
    pub key: String,
    pub op: Op,
    pub target: f64,
}

impl Criterion {
    /// Parses `"<=200"` for `key`; longer operators first, as vLLM matches them.
    pub fn parse(key: &str, text: &str) -> Result<Criterion> {
        let ops = [("<=", Op::Le), (">=", Op::Ge), ("<", Op::Lt), (">", Op::Gt)];
        let Some((op, rest)) = ops
            .iter()
            .find_map(|(p, op)| text.strip_prefix(p).map(|rest| (*op, rest)))
        else {
            bail!(
                "invalid operator for SLA constraint '{key}={text}': valid operators are \
                 <=, >=, <, >"
            );
        };
        let target: f64 = rest
            .trim()
            .parse()
            .with_context(|| format!("SLA constraint '{key}={text}': {rest:?} is not a number"))?;
        Ok(Criterion {
            key: key.to_owned(),
            op,
            target,
        })
    }

    /// Zero or less when met; else how far the value is from the target.
    pub fn margin(&self, actual: f64) -> f64 {
        match self.op {
            Op::Lt => actual + EPS - self.target,
            Op::Le => actual - self.target,
            Op::Gt => self.target - actual + EPS,
            Op::Ge => self.target - actual,
        }
    }

    /// `p99_ttft_ms<=200.00`, vLLM's text (names of files and messages).
    pub fn text(&self) -> String {
        format!("{}{}{:.2}", self.key, self.op.text(), self.target)
    }
}

/// One item of `--sla-params`: every criterion must be met.
#[derive(Debug, Clone, PartialEq)]
pub struct Sla(pub Vec<Criterion>);

impl Sla {
    /// The criteria's texts joined by `sep`.
    pub fn text(&self, sep: &str) -> String {
        self.0
            .iter()
            .map(Criterion::text)
            .collect::<Vec<_>>()
            .join(sep)
    }

    /// The largest margin over the criteria, on the runs' mean of each key.
    pub fn margin(&self, runs: &[serde_json::Map<String, Value>]) -> Result<f64> {
        if runs.is_empty() {
            bail!("no runs to check the SLA on");
        }
        let mut worst = f64::NEG_INFINITY;
        for c in &self.0 {
            let mut sum = 0.0;
            for run in runs {
                sum += result_number(run, &c.key).with_context(|| format!("SLA {}", c.text()))?;
            }
            worst = worst.max(c.margin(sum / runs.len() as f64));
        }
        Ok(worst)
    }
}

/// Reads `--sla-params`: a JSON list of objects of `"KEY": "OPVALUE"`.
pub fn read_slas(path: &Path) -> Result<Vec<Sla>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let value: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON", path.display()))?;
    slas_from_value(&value).with_context(|| format!("{}", path.display()))
}

pub fn slas_from_value(value: &Value) -> Result<Vec<Sla>> {
    let Value::Array(items) = value else {
        bail!("the SLA sweep should be a list of objects");
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let Value::Object(map) = item else {
                bail!("item {} of the SLA sweep should be an object", i + 1);
            };
            map.iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Criterion::parse(k, s),
                    other => {
                        bail!("SLA constraint {k:?}: {other} should be a string like \"<=200\"")
                    }
                })
                .collect::<Result<Vec<_>>>()
                .map(Sla)
        })
        .collect()
}

/// What measuring one value of the variable told the search.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Probe {
    /// The SLA's margin there (met when zero or less).
    pub margin: f64,
    /// The value the server actually sustained there (see [`SlaVariable::estimate`]).
    pub estimate: f64,
}

/// The outcome of a search.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The largest value that met the SLA; 0 when none did.
    pub value: u64,
    /// Every value measured, in order, with its margin.
    pub history: Vec<(u64, f64)>,
}

/// vLLM's SLA search: one run at `inf` (the value that stands for an unbounded rate or
/// concurrency; when it meets the SLA, that is the answer) estimates what the server
/// sustains; from there the value doubles while
/// the SLA holds, and a bisection between the largest passing and the smallest failing
/// value ends when they are one apart. `measure` runs (or reads back) one value; a value
/// measured before is not measured again.
///
/// One difference from vLLM: when even the first value fails, the bisection stops at 1
/// instead of measuring 0.
pub fn search(inf: u64, mut measure: impl FnMut(u64) -> Result<Probe>) -> Result<Found> {
    let mut seen: BTreeMap<u64, Probe> = BTreeMap::new();
    let mut history = Vec::new();
    let mut probe = |val: u64, history: &mut Vec<(u64, f64)>| -> Result<Probe> {
        if let Some(p) = seen.get(&val) {
            return Ok(*p);
        }
        let p = measure(val)?;
        seen.insert(val, p);
        history.push((val, p.margin));
        Ok(p)
    };
    let at_inf = probe(inf, &mut history)?;
    if at_inf.margin <= 0.0 {
        // Met even unbounded: nothing larger to find (vLLM's loop ends here too).
        return Ok(Found {
            value: inf,
            history,
        });
    }
    let init = (at_inf.estimate.ceil() as u64).clamp(1, inf);
    // Bounds: double while the SLA holds.
    let mut passing = 0;
    let mut failing = inf;
    let mut val = init;
    loop {
        if probe(val, &mut history)?.margin <= 0.0 {
            passing = passing.max(val);
            val = val.saturating_mul(2);
        } else {
            failing = failing.min(val);
            break;
        }
        if val >= inf {
            break;
        }
    }
    // Bisection.
    let (mut left, mut right) = (passing, failing);
    while right - left > 1 {
        let mid = (left + right) / 2;
        if probe(mid, &mut history)?.margin <= 0.0 {
            left = mid;
        } else {
            right = mid;
        }
    }
    Ok(Found {
        value: left,
        history,
    })
}

/// `serve_workload`'s values between the serial and the batch run's estimates: `iters`
/// evenly spaced (ends included, as `numpy.linspace`), the ends dropped, rounded half to
/// even as Python's `round`, without repeats, ascending.
pub fn workload_values(serial: f64, batch: f64, iters: usize) -> Vec<u64> {
    let serial = serial.ceil();
    let batch = batch.floor();
    if iters < 2 {
        return Vec::new();
    }
    let step = (batch - serial) / (iters - 1) as f64;
    let mut values: Vec<u64> = (1..iters - 1)
        .map(|i| (serial + step * i as f64).round_ties_even().max(0.0) as u64)
        .collect();
    values.sort_unstable();
    values.dedup();
    values
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn criteria_parse_and_compute_margins_as_vllm() {
        let slas = slas_from_value(&json!([{"p99_ttft_ms": "<=75", "request_throughput": ">2.5"}]))
            .unwrap();
        let sla = &slas[0];
        assert_eq!(sla.text("-"), "p99_ttft_ms<=75.00-request_throughput>2.50");
        assert_eq!(sla.0[0].margin(70.0), -5.0);
        assert_eq!(sla.0[0].margin(75.0), 0.0);
        assert!(sla.0[1].margin(2.5) > 0.0, "> fails on equality");
        assert!(Criterion::parse("k", ">=1").unwrap().margin(1.0) <= 0.0);
        assert!(Criterion::parse("k", "<1").unwrap().margin(1.0) > 0.0);
        let err = Criterion::parse("p99_ttft_ms", "=75")
            .unwrap_err()
            .to_string();
        assert!(err.contains("invalid operator"), "{err}");
        assert!(slas_from_value(&json!([{"k": 5}])).is_err());
        let runs: Vec<_> = [60.0, 80.0]
            .iter()
            .map(|t| {
                json!({"p99_ttft_ms": t, "request_throughput": 3.0})
                    .as_object()
                    .unwrap()
                    .clone()
            })
            .collect();
        // Mean 70 against <=75, throughput 3 against >2.5: the worst margin is -0.5.
        assert!((sla.margin(&runs).unwrap() + 0.5).abs() < 1e-6);
    }

    /// A server whose SLA holds up to `capacity`, sustaining `estimate` when unbounded.
    fn server(capacity: u64, estimate: f64) -> impl FnMut(u64) -> Result<Probe> {
        move |val| {
            Ok(Probe {
                margin: val as f64 - capacity as f64,
                estimate: if val >= 65536 { estimate } else { val as f64 },
            })
        }
    }

    #[test]
    fn search_finds_the_capacity_in_few_runs() {
        for (capacity, estimate) in [(5, 10.5), (5, 2.0), (1, 30.0), (40, 3.0), (1000, 999.9)] {
            let mut runs = 0;
            let mut measure = server(capacity, estimate);
            let found = search(65536, |v| {
                runs += 1;
                measure(v)
            })
            .unwrap();
            assert_eq!(found.value, capacity, "estimate {estimate}");
            // One run at inf, a doubling and a bisection: logarithmic in the values.
            let bits = 64 - capacity.max(estimate as u64).leading_zeros() as usize;
            assert!(runs <= 3 + 2 * bits, "{runs} runs for capacity {capacity}");
            assert_eq!(found.history.len(), runs);
            let mut values: Vec<_> = found.history.iter().map(|(v, _)| *v).collect();
            values.sort_unstable();
            values.dedup();
            assert_eq!(values.len(), runs, "no value measured twice");
        }
    }

    #[test]
    fn search_ends_at_once_when_even_unbounded_load_meets_the_sla() {
        let mut runs = 0;
        let found = search(65536, |_| {
            runs += 1;
            Ok(Probe {
                margin: -1.0,
                estimate: 29.0,
            })
        })
        .unwrap();
        assert_eq!((found.value, runs), (65536, 1));
    }

    #[test]
    fn search_reports_zero_when_nothing_passes() {
        let found = search(65536, |_| {
            Ok(Probe {
                margin: 1.0,
                estimate: 4.0,
            })
        })
        .unwrap();
        assert_eq!(found.value, 0);
        assert!(found.history.iter().all(|(v, _)| *v >= 1));
    }

    #[test]
    fn workload_values_are_evenly_spaced_like_linspace() {
        // np.linspace(1, 20, 5)[1:-1] = [5.75, 10.5, 15.25] -> round: 6, 10, 15.
        assert_eq!(workload_values(0.2, 20.9, 5), [6, 10, 15]);
        // A narrow range collapses to distinct values.
        assert_eq!(workload_values(1.0, 3.0, 10), [1, 2, 3]);
        assert!(workload_values(1.0, 9.0, 2).is_empty());
    }
}
