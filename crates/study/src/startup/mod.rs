//! `bench startup` and `bench sweep startup`: how long a server, or the native engine,
//! takes to start, cold and warm (vLLM's `vllm bench startup` and `vllm bench sweep
//! startup`).
//!
//! vLLM's benchmark starts its in-process engine (`LLM(...)`) in a fresh subprocess per
//! iteration and times construction, which ends when the engine is ready to generate:
//! weights loaded, `torch.compile` done, CUDA graphs captured. Cold iterations run with
//! fresh, empty caches (a temporary `VLLM_CACHE_ROOT` and inductor's `fresh_cache`), then
//! `--num-iters-warmup` unmeasured starts fill the caches and `--num-iters-warm` starts are
//! measured with them. bench does the same for two kinds of target:
//!
//! - **A server command** ([`server`]): any command line (`vllm serve ...`, `llama-server
//!   ...`, `bench mock-server ...`). Each iteration spawns it (its own process group, its
//!   output in a log), times the spawn to the first 2xx answer of the ready check, and
//!   stops it. Cold iterations point every cache variable ([`server::DEFAULT_CACHE_ENV`]
//!   and the user's) at fresh, empty directories; the warm-ups and warm iterations share
//!   one set, which the warm-ups fill.
//! - **The native engine** ([`native`]): loads the model in this process and generates one
//!   token; see there for what cold and warm mean in one process.
//!
//! The results carry vLLM's keys (`avg_cold_startup_time`, `cold_startup_times`,
//! `cold_startup_percentiles`, the same for `warm`), with bench's extra keys after them.
//! [`sweep`] runs the server's benchmark over parameter combinations. Nothing here prints:
//! progress goes to a [`Step`] callback and the results come back typed.

pub mod native;
pub mod server;
pub mod sweep;

use std::path::Path;

use anyhow::{Context, Result};
use serde_json::{Map, Value, json};

use bench_core::metrics::stats;

/// The percentiles vLLM's startup benchmark reports.
pub const PERCENTAGES: [u32; 6] = [10, 25, 50, 75, 90, 99];

/// How many starts of each kind (vLLM's `--num-iters-cold`, `--num-iters-warmup`,
/// `--num-iters-warm`; defaults 3, 1, 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Iterations {
    pub cold: u32,
    pub warmup: u32,
    pub warm: u32,
}

impl Default for Iterations {
    fn default() -> Self {
        Iterations {
            cold: 3,
            warmup: 1,
            warm: 3,
        }
    }
}

impl Iterations {
    /// The starts in the order they run.
    fn schedule(self) -> impl Iterator<Item = (Phase, u32, u32)> {
        [
            (Phase::Cold, self.cold),
            (Phase::Warmup, self.warmup),
            (Phase::Warm, self.warm),
        ]
        .into_iter()
        .flat_map(|(phase, of)| (0..of).map(move |index| (phase, index, of)))
    }

    /// At least one measured start: a result with neither phase would hold no figure.
    fn check(self) -> Result<()> {
        if self.cold == 0 && self.warm == 0 {
            anyhow::bail!(
                "--num-iters-cold and --num-iters-warm are both 0: nothing would be measured"
            );
        }
        Ok(())
    }
}

/// Which kind of start an iteration is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Fresh, empty caches.
    Cold,
    /// Unmeasured: fills the caches the warm starts use.
    Warmup,
    /// With the caches the warm-ups filled.
    Warm,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Cold => "cold",
            Phase::Warmup => "warmup",
            Phase::Warm => "warm",
        }
    }
}

/// One start's times, in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StartTimes {
    /// From the start (a server's spawn, the engine's load call) to ready (the ready
    /// check's first 2xx answer, the engine's first generated token).
    pub startup: f64,
    /// The native engine's split of `startup`: loading the model, then the first token.
    pub engine: Option<EngineTimes>,
}

/// The two parts of the native engine's start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EngineTimes {
    /// `Engine::load`: reading the weights onto the device.
    pub load: f64,
    /// From the loaded engine to its first sampled token (one-token prompt).
    pub first_token: f64,
}

/// What the benchmark reports as it goes.
#[derive(Debug)]
pub enum Step<'a> {
    /// A start begins (`index` of `of` in its phase).
    Starting { phase: Phase, index: u32, of: u32 },
    /// A server command was spawned, in its own process group led by `pid`: the caller
    /// can stop it on Ctrl-C (the ready check then fails at once).
    Spawned { pid: u32 },
    /// A start ended.
    Finished {
        phase: Phase,
        index: u32,
        of: u32,
        times: &'a StartTimes,
    },
    /// Something the user should know that does not stop the run.
    Note(&'a str),
}

/// The measured starts and what they started.
#[derive(Debug, Clone, PartialEq)]
pub struct StartupResult {
    pub cold: Vec<StartTimes>,
    pub warmup: Vec<StartTimes>,
    pub warm: Vec<StartTimes>,
    /// What was started, as extra result keys (`serve_cmd`, `ready_url`, `cache_env`; or
    /// `model`, `engine_device`, ...).
    pub target: Map<String, Value>,
}

/// One figure of one phase over its iterations, as vLLM's `MetricStats`.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricStats {
    /// `cold_startup`, `warm_load`, ...
    pub key: String,
    /// `Startup time`, ...
    pub display_name: &'static str,
    pub values: Vec<f64>,
    pub avg: f64,
    pub median: f64,
    pub std: f64,
    /// numpy's linear percentiles at [`PERCENTAGES`].
    pub percentiles: Vec<(u32, f64)>,
}

impl MetricStats {
    fn new(phase: Phase, suffix: &str, display_name: &'static str, values: Vec<f64>) -> Self {
        MetricStats {
            key: format!("{}_{suffix}", phase.name()),
            display_name,
            avg: stats::mean(&values),
            median: stats::median(&values),
            std: stats::std(&values),
            percentiles: PERCENTAGES
                .iter()
                .map(|&p| (p, stats::percentile(&values, f64::from(p))))
                .collect(),
            values,
        }
    }
}

/// A figure of a start, if the start has it.
type Figure = fn(&StartTimes) -> Option<f64>;

/// The figures of one start (result-key suffix, display name, value): vLLM's `startup`,
/// then the native engine's parts.
const FIGURES: [(&str, &str, Figure); 3] = [
    ("startup", "Startup time", |t| Some(t.startup)),
    ("load", "Load time", |t| t.engine.map(|e| e.load)),
    ("first_token", "First token time", |t| {
        t.engine.map(|e| e.first_token)
    }),
];

impl StartupResult {
    /// The statistics of each measured phase that ran (cold, then warm), each figure the
    /// starts have, as vLLM's `_collect_phase_metrics`.
    pub fn metrics(&self) -> Vec<MetricStats> {
        let mut out = Vec::new();
        for (phase, starts) in [(Phase::Cold, &self.cold), (Phase::Warm, &self.warm)] {
            if starts.is_empty() {
                continue;
            }
            for (suffix, display, figure) in FIGURES {
                let values: Option<Vec<f64>> = starts.iter().map(figure).collect();
                if let Some(values) = values {
                    out.push(MetricStats::new(phase, suffix, display, values));
                }
            }
        }
        out
    }

    /// The result file: per figure vLLM's `avg_<key>_time`, `<key>_times` and
    /// `<key>_percentiles` (cold figures first, as vLLM writes them), then bench's:
    /// `median_<key>_time`, `std_<key>_time`, the iteration counts, the warm-ups' times,
    /// and what was started.
    pub fn to_json(&self) -> Map<String, Value> {
        let metrics = self.metrics();
        let mut doc = Map::new();
        for m in &metrics {
            doc.insert(format!("avg_{}_time", m.key), json!(m.avg));
            doc.insert(format!("{}_times", m.key), json!(m.values));
            let percentiles: Map<String, Value> = m
                .percentiles
                .iter()
                .map(|(p, v)| (p.to_string(), json!(v)))
                .collect();
            doc.insert(format!("{}_percentiles", m.key), Value::Object(percentiles));
        }
        for m in &metrics {
            doc.insert(format!("median_{}_time", m.key), json!(m.median));
            doc.insert(format!("std_{}_time", m.key), json!(m.std));
        }
        doc.insert("num_iters_cold".into(), json!(self.cold.len()));
        doc.insert("num_iters_warmup".into(), json!(self.warmup.len()));
        doc.insert("num_iters_warm".into(), json!(self.warm.len()));
        let warmup: Vec<f64> = self.warmup.iter().map(|t| t.startup).collect();
        doc.insert("warmup_startup_times".into(), json!(warmup));
        doc.extend(self.target.clone());
        doc
    }
}

/// Writes `doc` to `path` as vLLM's `json.dump(results, f, indent=4)` does.
pub fn save(path: &Path, doc: &Map<String, Value>) -> Result<()> {
    save_value(path, doc)
}

/// [`save`] for any JSON value (a sweep's `summary.json` is a list), creating the
/// directory.
fn save_value<T: serde::Serialize + ?Sized>(path: &Path, doc: &T) -> Result<()> {
    let mut text = Vec::new();
    bench_core::pyjson::to_writer_indented(&mut text, doc, 4)?;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    bench_core::report::save::write_atomically(path, &[&text])
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(startup: f64) -> StartTimes {
        StartTimes {
            startup,
            engine: None,
        }
    }

    #[test]
    fn schedule_runs_cold_then_warmup_then_warm() {
        let it = Iterations {
            cold: 2,
            warmup: 1,
            warm: 1,
        };
        let order: Vec<_> = it.schedule().collect();
        assert_eq!(
            order,
            [
                (Phase::Cold, 0, 2),
                (Phase::Cold, 1, 2),
                (Phase::Warmup, 0, 1),
                (Phase::Warm, 0, 1)
            ]
        );
        let none = Iterations {
            cold: 0,
            warmup: 1,
            warm: 0,
        };
        assert!(none.check().unwrap_err().to_string().contains("nothing"));
    }

    #[test]
    fn json_has_vllms_keys_and_numpys_statistics() {
        let result = StartupResult {
            // numpy: np.percentile([4, 1, 3, 2, 10], [10, 25, 50, 75, 90, 99])
            //   -> [1.4, 2.0, 3.0, 4.0, 7.6, 9.76]
            cold: [4.0, 1.0, 3.0, 2.0, 10.0].map(start).to_vec(),
            warmup: vec![start(9.0)],
            warm: vec![start(0.5), start(1.5)],
            target: Map::from_iter([("serve_cmd".to_string(), json!("x"))]),
        };
        let doc = result.to_json();
        let keys: Vec<&str> = doc.keys().map(String::as_str).collect();
        assert_eq!(
            &keys[..6],
            [
                "avg_cold_startup_time",
                "cold_startup_times",
                "cold_startup_percentiles",
                "avg_warm_startup_time",
                "warm_startup_times",
                "warm_startup_percentiles"
            ]
        );
        assert_eq!(doc["avg_cold_startup_time"], json!(4.0));
        assert_eq!(doc["cold_startup_times"], json!([4.0, 1.0, 3.0, 2.0, 10.0]));
        let p = &doc["cold_startup_percentiles"];
        for (k, want) in [
            ("10", 1.4),
            ("25", 2.0),
            ("50", 3.0),
            ("90", 7.6),
            ("99", 9.76),
        ] {
            assert!((p[k].as_f64().unwrap() - want).abs() < 1e-12, "{k}: {p}");
        }
        assert_eq!(doc["median_cold_startup_time"], json!(3.0));
        assert_eq!(doc["avg_warm_startup_time"], json!(1.0));
        assert_eq!(doc["std_warm_startup_time"], json!(0.5));
        assert_eq!(doc["num_iters_warmup"], json!(1));
        assert_eq!(doc["warmup_startup_times"], json!([9.0]));
        assert_eq!(doc["serve_cmd"], json!("x"));
        // Server starts have no engine split.
        assert!(!doc.contains_key("avg_cold_load_time"));
    }

    #[test]
    fn engine_starts_report_their_parts_and_an_empty_phase_reports_nothing() {
        let t = StartTimes {
            startup: 3.0,
            engine: Some(EngineTimes {
                load: 2.0,
                first_token: 1.0,
            }),
        };
        let result = StartupResult {
            cold: vec![t],
            warmup: vec![],
            warm: vec![],
            target: Map::new(),
        };
        let doc = result.to_json();
        assert_eq!(doc["avg_cold_load_time"], json!(2.0));
        assert_eq!(doc["cold_first_token_times"], json!([1.0]));
        assert!(!doc.contains_key("avg_warm_startup_time"));
    }
}
