//! `bench sweep startup`: the server's startup benchmark over parameter combinations, as
//! vLLM's `vllm bench sweep startup`.
//!
//! `--serve-params` and `--startup-params` are JSON files listing combinations (a list of
//! objects, or an object of named objects, vLLM's `ParameterSweep`); every serve
//! combination is run with every startup combination, `num_runs` times each. A serve
//! combination's keys become flags of the server command ([`params::apply_to_cmd`]); a
//! startup combination's keys set the benchmark's own settings ([`STARTUP_KEYS`]); keys it
//! does not know are ignored with a message, or refused with `strict_params`, as vLLM's.
//!
//! Results land where vLLM's do: `<experiment>/SERVE--<name>-STARTUP--<name>/run=<n>.json`
//! (the startup result with `run_number` and the combination's parameters added), each
//! combination's `summary.json` (its runs), and the experiment's `summary.csv` (every run,
//! one row each). Each run's server logs stay beside its result, in `run=<n>/`.
//!
//! The parameter files and flags are `bench sweep serve`'s ([`crate::sweep::params`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value};

use super::server::{self, ServerStartupConfig};
use super::{StartupResult, Step};
use crate::sweep::params::{self, NAME_KEY, Params};

/// The startup settings a `--startup-params` combination may set (JSON keys; `-` and `_`
/// alike).
pub const STARTUP_KEYS: [&str; 5] = [
    "num_iters_cold",
    "num_iters_warmup",
    "num_iters_warm",
    "ready_check_timeout_sec",
    "ready_url",
];

/// `bench sweep startup`'s configuration.
#[derive(Debug, Clone)]
pub struct SweepStartupConfig {
    /// The benchmark as the command line set it; `work_dir` is replaced per run, `argv`
    /// and `ready_url` are the base the serve parameters change.
    pub base: ServerStartupConfig,
    /// Whether `base.ready_url` was given (else it follows each combination's command).
    pub ready_url_given: bool,
    /// `[{}]` when no file was given.
    pub serve_params: Vec<Params>,
    pub startup_params: Vec<Params>,
    /// Unknown startup keys are an error instead of a message.
    pub strict_params: bool,
    /// `<output-dir>/<experiment-name>`, checked against `--resume` by
    /// [`crate::sweep::experiment_dir`]: runs whose result file is there are read back.
    pub experiment_dir: PathBuf,
    pub num_runs: u32,
}

/// One run of the sweep, resolved.
#[derive(Debug, Clone)]
pub struct PlannedRun {
    pub serve: Params,
    pub startup: Params,
    pub run_number: u32,
    /// `run=<n>.json`.
    pub output: PathBuf,
    /// The benchmark with the parameters applied; its `work_dir` is `run=<n>/`.
    pub config: ServerStartupConfig,
}

/// Every run, grouped by combination.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Each combination's directory and runs, in order.
    pub combinations: Vec<(PathBuf, Vec<PlannedRun>)>,
    /// What the startup parameters set that the benchmark does not know (ignored).
    pub ignored: Vec<String>,
}

/// Resolves every run: commands, settings and paths.
pub fn plan(config: &SweepStartupConfig) -> Result<Plan> {
    if config.num_runs == 0 {
        bail!("--num-runs must be at least 1");
    }
    let mut ignored = Vec::new();
    let mut combinations = Vec::new();
    for serve in &config.serve_params {
        for startup in &config.startup_params {
            let mut settings = config.base.clone();
            settings.argv = params::apply_to_cmd(serve, &config.base.argv);
            if !config.ready_url_given {
                settings.ready_url = server::default_ready_url(&settings.argv);
            }
            let unknown = apply_startup(startup, &mut settings)?;
            if !unknown.is_empty() {
                let message = format!(
                    "ignoring unsupported startup params for {}: {}",
                    params::name(startup),
                    unknown.join(", ")
                );
                if config.strict_params {
                    bail!("--strict-params: {message}");
                }
                ignored.push(message);
            }
            let base = config.experiment_dir.join(combination_dir(serve, startup));
            let runs = (0..config.num_runs)
                .map(|run_number| PlannedRun {
                    serve: serve.clone(),
                    startup: startup.clone(),
                    run_number,
                    output: base.join(format!("run={run_number}.json")),
                    config: ServerStartupConfig {
                        work_dir: base.join(format!("run={run_number}")),
                        ..settings.clone()
                    },
                })
                .collect();
            combinations.push((base, runs));
        }
    }
    Ok(Plan {
        combinations,
        ignored,
    })
}

/// vLLM's `_get_comb_base_path`: `SERVE--<name>` and `STARTUP--<name>` for the parameter
/// sets that have any, joined with `-`, `/` and `..` made harmless.
fn combination_dir(serve: &Params, startup: &Params) -> String {
    let mut parts = Vec::new();
    for (label, comb) in [("SERVE-", serve), ("STARTUP-", startup)] {
        if !comb.is_empty() {
            parts.push(label.to_owned());
            parts.push(params::name(comb));
        }
    }
    let name = params::sanitize_filename(&parts.join("-"));
    if name.is_empty() { "base".into() } else { name }
}

/// Sets what a startup combination names; returns the keys it does not know.
fn apply_startup(comb: &Params, config: &mut ServerStartupConfig) -> Result<Vec<String>> {
    let mut unknown = Vec::new();
    for (key, value) in comb.iter().filter(|(k, _)| *k != NAME_KEY) {
        let normalized = key.replace('-', "_");
        let count = || -> Result<u32> {
            value
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .with_context(|| format!("startup param {key}: {value} is not a count"))
        };
        match normalized.as_str() {
            "num_iters_cold" => config.iterations.cold = count()?,
            "num_iters_warmup" => config.iterations.warmup = count()?,
            "num_iters_warm" => config.iterations.warm = count()?,
            "ready_check_timeout_sec" => {
                let secs = value
                    .as_f64()
                    .filter(|s| *s > 0.0)
                    .with_context(|| format!("startup param {key}: {value} is not seconds"))?;
                config.ready_timeout = Duration::from_secs_f64(secs);
            }
            "ready_url" => {
                config.ready_url = value
                    .as_str()
                    .with_context(|| format!("startup param {key}: {value} is not a URL"))?
                    .to_owned();
            }
            _ => unknown.push(key.clone()),
        }
    }
    Ok(unknown)
}

/// What the sweep reports as it goes.
#[derive(Debug)]
pub enum SweepStep<'a> {
    /// A run begins.
    Run(&'a PlannedRun),
    /// A run's result file exists (`resume`): read back, not run again.
    Existing(&'a PlannedRun),
    /// The startup benchmark's own progress.
    Startup(Step<'a>),
    /// A file was written.
    Saved(&'a Path),
}

/// What a finished sweep wrote.
#[derive(Debug, Clone)]
pub struct SweepOutcome {
    /// Every run's result with its parameters, in order.
    pub runs: Vec<Map<String, Value>>,
    pub summary_csv: PathBuf,
}

/// Runs the plan: each run's result, each combination's `summary.json`, the experiment's
/// `summary.csv`. A failed run ends the sweep (its error names the run); `resume` picks up
/// from there.
pub fn run(
    config: &SweepStartupConfig,
    plan: &Plan,
    on_step: &mut dyn FnMut(SweepStep<'_>),
) -> Result<SweepOutcome> {
    let mut all = Vec::new();
    for (base, runs) in &plan.combinations {
        let mut combination = Vec::new();
        for planned in runs {
            let data = if planned.output.is_file() {
                on_step(SweepStep::Existing(planned));
                let text = std::fs::read(&planned.output)
                    .with_context(|| format!("reading {}", planned.output.display()))?;
                let doc: Map<String, Value> = serde_json::from_slice(&text)
                    .with_context(|| format!("parsing {}", planned.output.display()))?;
                with_parameters(doc, planned)
            } else {
                on_step(SweepStep::Run(planned));
                let result: StartupResult =
                    server::run(&planned.config, &mut |s| on_step(SweepStep::Startup(s)))
                        .with_context(|| {
                            format!(
                                "run {} of {}",
                                planned.run_number,
                                base.file_name().unwrap_or_default().to_string_lossy()
                            )
                        })?;
                let data = with_parameters(result.to_json(), planned);
                super::save(&planned.output, &data)?;
                on_step(SweepStep::Saved(&planned.output));
                data
            };
            combination.push(Value::Object(data.clone()));
            all.push(data);
        }
        let summary = base.join("summary.json");
        super::save_value(&summary, &Value::Array(combination))?;
        on_step(SweepStep::Saved(&summary));
    }
    std::fs::create_dir_all(&config.experiment_dir)
        .with_context(|| format!("creating {}", config.experiment_dir.display()))?;
    let summary_csv = config.experiment_dir.join("summary.csv");
    crate::sweep::write_summary_csv(&summary_csv, &all)?;
    on_step(SweepStep::Saved(&summary_csv));
    Ok(SweepOutcome {
        runs: all,
        summary_csv,
    })
}

/// vLLM's `_update_run_data`: the run number, then the serve and startup parameters.
fn with_parameters(mut doc: Map<String, Value>, planned: &PlannedRun) -> Map<String, Value> {
    doc.insert("run_number".into(), Value::from(planned.run_number));
    doc.extend(planned.serve.clone());
    doc.extend(planned.startup.clone());
    doc
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(v: Value) -> Params {
        v.as_object().unwrap().clone()
    }

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn combination_dirs_and_csv_follow_vllm() {
        let serve = params(json!({"max_num_seqs": 32}));
        let startup = params(json!({"num_iters_cold": 1}));
        assert_eq!(
            combination_dir(&serve, &Params::new()),
            "SERVE--max_num_seqs=32"
        );
        assert_eq!(
            combination_dir(&serve, &startup),
            "SERVE--max_num_seqs=32-STARTUP--num_iters_cold=1"
        );
        assert_eq!(
            combination_dir(&params(json!({"model": "a/../b"})), &Params::new()),
            "SERVE--model=a____b"
        );
        let rows = vec![
            params(json!({"x": 1.0, "t": [1.0, 2.0]})),
            params(json!({"x": 2, "s": "a,b"})),
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("summary.csv");
        crate::sweep::write_summary_csv(&path, &rows).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            ",x,t,s\n0,1.0,\"[1.0,2.0]\",\n1,2,,\"a,b\"\n"
        );
    }

    #[test]
    fn startup_params_set_the_settings_and_name_unknown_keys() {
        let mut config = ServerStartupConfig {
            argv: argv("srv --port 1"),
            ready_url: "http://localhost:1/health".into(),
            ready_timeout: Duration::from_secs(1),
            poll: Duration::from_millis(10),
            stop_grace: Duration::from_secs(1),
            cache_env: vec![],
            work_dir: PathBuf::new(),
            iterations: super::super::Iterations::default(),
        };
        let p = params(json!({"num-iters-cold": 5, "num_iters_warm": 0, "tp": 2}));
        let unknown = apply_startup(&p, &mut config).unwrap();
        assert_eq!(unknown, ["tp"]);
        assert_eq!((config.iterations.cold, config.iterations.warm), (5, 0));
        let bad = params(json!({"num_iters_cold": -1}));
        let err = apply_startup(&bad, &mut config).unwrap_err().to_string();
        assert!(err.contains("num_iters_cold"), "{err}");
    }
}
