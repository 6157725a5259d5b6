//! `bench serve --num-runs N`: the spread of every measured figure over runs of the same
//! benchmark (mean, sample standard deviation, coefficient of variation, min, max): the
//! run-to-run noise that a single run cannot show, and that `bench compare` uses to tell
//! a real difference from chance. Each run keeps its own result file with vLLM's keys;
//! the summary is a file of its own beside them ([`summary_path`]), marked with
//! [`SUMMARY_MARKER`] so that `bench compare` knows it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};

use bench_core::benchmark::{Outcome, ServeConfig, serve};
use bench_core::metrics::confidence::t_critical;
use bench_core::observer::{Event, Observer};
use bench_core::report::{self, json::float};

/// The key (with the format's version as its value) that marks a summary file.
pub const SUMMARY_MARKER: &str = "bench_runs_summary";

/// Result keys that are the run's settings, not what it measured.
const SETTINGS: [&str; 6] = [
    "num_prompts",
    "request_rate",
    "burstiness",
    "max_concurrency",
    "ramp_up_start_rps",
    "ramp_up_end_rps",
];

/// The measured figures of a result document, in its order: every number that is not
/// one of the run's settings (strings, lists, objects and booleans are left out).
pub fn measured(doc: &Map<String, Value>) -> Vec<(String, f64)> {
    doc.iter()
        .filter(|(key, _)| !SETTINGS.contains(&key.as_str()))
        .filter_map(|(key, value)| match value {
            Value::Number(n) => n.as_f64().map(|x| (key.clone(), x)),
            _ => None,
        })
        .collect()
}

/// One figure over the runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Spread {
    pub key: String,
    /// The figure of each run, in run order.
    pub values: Vec<f64>,
    pub mean: f64,
    /// The sample standard deviation (n - 1); 0 for one run.
    pub std: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    fn of(key: String, values: Vec<f64>) -> Spread {
        let m = bench_core::metrics::significance::Moments::of(&values);
        Spread {
            key,
            mean: m.mean,
            std: m.variance.sqrt(),
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            values,
        }
    }

    /// Student's t 95% confidence interval of the figure's mean over runs like these
    /// (`mean -+ t(0.975, n - 1) std / sqrt(n)`): where the figure of many more runs
    /// would settle, which one run's own intervals (`ci95`) cannot say, since they miss
    /// what changes between runs (the server's state, the machine's other work). `None`
    /// for fewer than two runs.
    pub fn ci95(&self) -> Option<(f64, f64)> {
        let n = self.values.len();
        if n < 2 {
            return None;
        }
        let dof = u32::try_from(n - 1).unwrap_or(u32::MAX);
        let half = t_critical(dof) * self.std / (n as f64).sqrt();
        Some((self.mean - half, self.mean + half))
    }

    /// The coefficient of variation (std / |mean|); `None` when the mean is 0.
    pub fn cv(&self) -> Option<f64> {
        (self.mean != 0.0).then(|| self.std / self.mean.abs())
    }
}

/// The summary of the finished runs of one benchmark.
#[derive(Debug, Clone, PartialEq)]
pub struct RunsSummary {
    /// The runs asked for.
    pub requested: usize,
    /// The result files of the runs summarised, in run order (empty when none was saved).
    pub run_files: Vec<PathBuf>,
    /// Every figure that all the summarised runs have, in the first run's order.
    pub metrics: Vec<Spread>,
    /// Runs summarised.
    pub runs: usize,
}

impl RunsSummary {
    /// The summary of `runs` (each run's [`measured`] figures).
    pub fn new(requested: usize, runs: &[Vec<(String, f64)>], run_files: Vec<PathBuf>) -> Self {
        let metrics = match runs.first() {
            None => Vec::new(),
            Some(first) => first
                .iter()
                .filter_map(|(key, _)| {
                    let values: Option<Vec<f64>> = runs
                        .iter()
                        .map(|run| run.iter().find(|(k, _)| k == key).map(|&(_, v)| v))
                        .collect();
                    values.map(|values| Spread::of(key.clone(), values))
                })
                .collect(),
        };
        RunsSummary {
            requested,
            run_files,
            metrics,
            runs: runs.len(),
        }
    }

    /// The spread of `key`, if every run had it.
    pub fn get(&self, key: &str) -> Option<&Spread> {
        self.metrics.iter().find(|s| s.key == key)
    }

    /// The console table: one line per figure with its mean, std, CV, min and max.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let title = format!(" Summary of {} runs ", self.runs);
        let _ = writeln!(out, "{title:=^122}");
        if self.runs < self.requested {
            let _ = writeln!(
                out,
                "Stopped after {} of {} runs; the interrupted run is not counted.",
                self.runs, self.requested
            );
        }
        let _ = writeln!(
            out,
            "{:<40} {:>12} {:>10} {:>7} {:>11} {:>11} {:>25}",
            "Metric", "Mean", "Std", "CV %", "Min", "Max", "Mean's 95% CI (t)"
        );
        for s in &self.metrics {
            let cv = s
                .cv()
                .map_or("-".to_string(), |cv| format!("{:.2}", cv * 100.0));
            let ci = s
                .ci95()
                .map_or("-".to_string(), |(lo, hi)| format!("{lo:.2} to {hi:.2}"));
            let _ = writeln!(
                out,
                "{:<40} {:>12.2} {:>10.2} {:>7} {:>11.2} {:>11.2} {:>25}",
                s.key, s.mean, s.std, cv, s.min, s.max, ci
            );
        }
        let _ = writeln!(out, "{}", "=".repeat(122));
        out
    }

    /// The summary file's document.
    pub fn to_json(&self) -> Value {
        let metrics: Map<String, Value> = self
            .metrics
            .iter()
            .map(|s| {
                let spread = json!({
                    "mean": float(s.mean),
                    "std": float(s.std),
                    "cv": s.cv().map_or(Value::Null, float),
                    "min": float(s.min),
                    "max": float(s.max),
                    "ci95": s.ci95().map_or(Value::Null, |(lo, hi)| json!([float(lo), float(hi)])),
                    "values": s.values.iter().map(|&v| float(v)).collect::<Vec<_>>(),
                });
                (s.key.clone(), spread)
            })
            .collect();
        json!({
            SUMMARY_MARKER: 1,
            "runs": self.runs,
            "requested_runs": self.requested,
            "run_files": self.run_files.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "metrics": metrics,
        })
    }

    /// A summary read back from its document; `None` when `doc` is not one.
    pub fn from_json(doc: &Map<String, Value>) -> Result<Option<RunsSummary>> {
        if !doc.contains_key(SUMMARY_MARKER) {
            return Ok(None);
        }
        let Some(Value::Object(metrics)) = doc.get("metrics") else {
            bail!("a runs summary without its \"metrics\" object");
        };
        let metrics = metrics
            .iter()
            .map(|(key, spread)| {
                let values = spread
                    .get("values")
                    .and_then(Value::as_array)
                    .with_context(|| format!("metrics.{key}: no \"values\" list"))?
                    .iter()
                    .map(|v| {
                        crate::results::number(v)
                            .with_context(|| format!("metrics.{key}.values: {v} is not a number"))
                    })
                    .collect::<Result<Vec<f64>>>()?;
                Ok(Spread::of(key.clone(), values))
            })
            .collect::<Result<Vec<_>>>()?;
        let count = |key: &str| doc.get(key).and_then(Value::as_u64).unwrap_or(0) as usize;
        let run_files = doc
            .get("run_files")
            .and_then(Value::as_array)
            .map(|files| {
                files
                    .iter()
                    .filter_map(Value::as_str)
                    .map(PathBuf::from)
                    .collect()
            })
            .unwrap_or_default();
        Ok(Some(RunsSummary {
            requested: count("requested_runs"),
            run_files,
            metrics,
            runs: count("runs"),
        }))
    }
}

/// The suffix of run `index` (from 1) of a `--num-runs` benchmark's result files.
pub fn run_suffix(index: usize) -> String {
    format!("-run{index}")
}

/// Where the summary of runs whose first result file is `first_run` goes: that name with
/// `-summary` in place of the run's suffix.
pub fn summary_path(first_run: &Path) -> PathBuf {
    let name = first_run
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let suffix = run_suffix(1);
    let base = match name.strip_suffix(".json") {
        Some(stem) => stem.strip_suffix(&suffix).unwrap_or(stem).to_string(),
        None => name.strip_suffix(&suffix).unwrap_or(&name).to_string(),
    };
    first_run.with_file_name(format!("{base}-summary.json"))
}

/// Writes the summary to `path` (atomically, as result files are).
pub fn save(summary: &RunsSummary, path: &Path) -> Result<()> {
    bench_core::report::save::write_atomically_with(path, |out| {
        bench_core::pyjson::to_writer_indented(out, &summary.to_json(), 4)
            .context("serialising the runs summary")
    })
    .with_context(|| format!("writing the runs summary to {}", path.display()))
}

/// What [`serve_runs`] returns: the last run's outcome and the summary of the finished
/// runs.
#[derive(Debug)]
pub struct Runs {
    /// The last run's outcome: the one that ended the series early, if one did.
    pub last: Outcome,
    /// The spread of every measured figure over the finished runs.
    pub summary: RunsSummary,
    /// Where the summary was written: beside the runs' result files, when they were
    /// saved and there was more than one run.
    pub summary_saved: Option<PathBuf>,
}

/// `bench serve --num-runs N`: [`serve`] `runs` times in a row, the same configuration
/// each time, each run's result saved to its own file (`-run1`, `-run2`, ... before
/// `.json`; one run keeps the plain name and has no summary file). `after_each` sees every
/// run's configuration (its file names) and outcome as it ends (the CLI writes its
/// figures). A run that was stopped (a
/// signal, a part of the run that could not go on) or where every request failed ends the
/// series and is not summarised; the runs before it are (the summary file is rewritten
/// after each finished run).
pub fn serve_runs(
    config: &ServeConfig,
    runs: usize,
    observer: &mut dyn Observer,
    mut after_each: impl FnMut(&ServeConfig, &Outcome) -> Result<()>,
) -> Result<Runs> {
    anyhow::ensure!(runs >= 1, "--num-runs must be at least 1");
    let mut figures = Vec::new();
    let mut files = Vec::new();
    let mut last = None;
    let mut summary = RunsSummary::new(runs, &[], Vec::new());
    let mut summary_saved = None;
    for index in 1..=runs {
        let mut run_config = config.clone();
        if runs > 1 {
            run_config.report.save.run_suffix = Some(run_suffix(index));
            observer.event(Event::Note(&format!("run {index} of {runs}")));
        }
        let outcome = serve(&run_config, observer)?;
        after_each(&run_config, &outcome)?;
        let finished =
            outcome.interrupted.is_none() && outcome.signal.is_none() && !outcome.all_failed();
        if finished {
            let doc = report::result_doc(&outcome.metrics, &outcome.side, &outcome.run, false);
            let serde_json::Value::Object(doc) =
                serde_json::to_value(&doc).context("the run's result as JSON")?
            else {
                bail!("a result did not serialise to an object");
            };
            figures.push(measured(&doc));
            files.extend(outcome.saved.clone());
            summary = RunsSummary::new(runs, &figures, files.clone());
            // Rewritten after every finished run, so that the runs so far stay summarised
            // whatever ends the series (a second Ctrl-C quits at once, without saving).
            if let Some(first) = files.first().filter(|_| runs > 1) {
                let path = summary_path(first);
                save(&summary, &path)?;
                summary_saved = Some(path);
            }
        }
        last = Some(outcome);
        if !finished {
            break;
        }
    }
    Ok(Runs {
        last: last.context("no run was made")?,
        summary,
        summary_saved,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(ttft: f64, throughput: f64) -> Vec<(String, f64)> {
        let doc = json!({
            "date": "20250101-000000", "num_prompts": 100, "request_rate": 10.0,
            "completed": 100, "request_throughput": throughput, "mean_ttft_ms": ttft,
            "ttfts": [0.1], "oversaturated": false,
        });
        measured(doc.as_object().unwrap())
    }

    #[test]
    fn the_mean_over_runs_gets_student_t_interval() {
        let runs: Vec<_> = [1.0, 2.0, 3.0, 4.0, 5.0].map(|t| run(t, 1.0)).into();
        let s = RunsSummary::new(5, &runs, vec![]);
        // mean 3, sample std sqrt(2.5), t(0.975, 4) = 2.776445105197793.
        let half = 2.776_445_105_197_793 * 2.5f64.sqrt() / 5f64.sqrt();
        let (lo, hi) = s.get("mean_ttft_ms").unwrap().ci95().unwrap();
        assert!((lo - (3.0 - half)).abs() < 1e-9 && (hi - (3.0 + half)).abs() < 1e-9);
        assert_eq!(
            RunsSummary::new(1, &runs[..1], vec![]).metrics[0].ci95(),
            None
        );
        assert!(s.table().contains("Mean's 95% CI (t)"));
    }

    #[test]
    fn the_summary_spreads_every_measured_figure() {
        let runs = [run(20.0, 9.0), run(22.0, 10.0), run(24.0, 11.0)];
        let s = RunsSummary::new(3, &runs, vec![]);
        let keys: Vec<&str> = s.metrics.iter().map(|m| m.key.as_str()).collect();
        // Settings, strings, lists and booleans are not measured figures.
        assert_eq!(keys, ["completed", "request_throughput", "mean_ttft_ms"]);
        let ttft = s.get("mean_ttft_ms").unwrap();
        assert_eq!(
            (ttft.mean, ttft.std, ttft.min, ttft.max),
            (22.0, 2.0, 20.0, 24.0)
        );
        assert!((ttft.cv().unwrap() - 2.0 / 22.0).abs() < 1e-12);
        assert_eq!(s.get("completed").unwrap().cv(), Some(0.0));
        let table = s.table();
        assert!(table.contains("mean_ttft_ms"), "{table}");
        assert!(
            table.lines().any(|l| l.starts_with("mean_ttft_ms")
                && l.contains("22.00")
                && l.contains("9.09"))
        );
        let back = RunsSummary::from_json(s.to_json().as_object().unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn the_summary_file_sits_beside_the_runs() {
        assert_eq!(
            summary_path(Path::new("out/vllm-10.0qps-m-20250101-000000-run1.json")),
            Path::new("out/vllm-10.0qps-m-20250101-000000-summary.json")
        );
        assert_eq!(
            summary_path(Path::new("res-run1")),
            Path::new("res-summary.json")
        );
    }
}
