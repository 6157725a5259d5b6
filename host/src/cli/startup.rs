//! `bench startup` and `bench sweep startup`: cold and warm start times of a server command
//! (`--serve-cmd`) or of the native engine (`--model`), vLLM's `vllm bench startup` and
//! `vllm bench sweep startup`. The work is `bench_study::startup`; this module turns flags
//! into its configuration, prints its progress and results as vLLM's do, and stops the
//! server on Ctrl-C.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use bench_study::server_process::{join_command, split_command};
use bench_study::startup::server::{self, DEFAULT_CACHE_ENV, ServerStartupConfig};
use bench_study::startup::sweep::{self, SweepStartupConfig, SweepStep};
use bench_study::startup::{Iterations, MetricStats, Phase, StartupResult, Step, native};
use bench_study::sweep::params::{self, Params};
use clap::Args;

use super::engine_args::EngineArgs;
use super::interrupt::ServerInterrupt;
use crate::engine::{Device, EngineConfig};
use crate::tokenizer::hub_cache_roots_from_env;

/// How many starts of each kind (vLLM's flags and defaults).
#[derive(Args, Debug, Clone)]
pub struct IterationArgs {
    /// Number of cold starts: each with fresh, empty cache directories.
    #[arg(long, default_value_t = 3)]
    pub num_iters_cold: u32,

    /// Number of unmeasured starts before the warm ones; they fill the caches the warm
    /// starts use.
    #[arg(long, default_value_t = 1)]
    pub num_iters_warmup: u32,

    /// Number of warm starts.
    #[arg(long, default_value_t = 3)]
    pub num_iters_warm: u32,
}

impl IterationArgs {
    fn iterations(&self) -> Iterations {
        Iterations {
            cold: self.num_iters_cold,
            warmup: self.num_iters_warmup,
            warm: self.num_iters_warm,
        }
    }
}

/// How a server command's start is awaited, and which caches a cold start makes fresh.
#[derive(Args, Debug, Clone)]
pub struct ServerStartArgs {
    /// The URL that answers 2xx once the server is ready [default: /health at the server
    /// command's --host (localhost) and -p/--port (8000), as vLLM's sweep waits].
    #[arg(long, value_name = "URL")]
    pub ready_url: Option<String>,

    /// Longest wait for one start, from the spawn to a ready answer.
    #[arg(long, default_value_t = 600.0, value_name = "SECONDS")]
    pub ready_check_timeout_sec: f64,

    /// Time between ready checks: the resolution of the measured start times.
    #[arg(long, default_value_t = 50, value_name = "MS")]
    pub ready_check_interval_ms: u64,

    /// After a start, the server gets SIGTERM, then SIGKILL after this long.
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    pub server_stop_grace_sec: f64,

    /// A further environment variable naming a cache directory, which cold starts point at
    /// a fresh, empty directory (and warm starts at one the warm-ups filled); repeatable.
    /// The defaults are VLLM_CACHE_ROOT, TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR and
    /// CUDA_CACHE_PATH.
    #[arg(long = "cache-env", value_name = "VAR")]
    pub cache_env: Vec<String>,

    /// Make only the --cache-env variables fresh, not the defaults.
    #[arg(long)]
    pub no_default_cache_env: bool,
}

impl ServerStartArgs {
    /// The benchmark of `argv`, its logs and caches under `work_dir`.
    fn config(
        &self,
        argv: Vec<String>,
        iterations: Iterations,
        work_dir: PathBuf,
    ) -> Result<ServerStartupConfig> {
        let seconds = |value: f64, flag: &str| -> Result<Duration> {
            if !(value.is_finite() && value >= 0.0) {
                bail!("{flag} must be a number of seconds, not {value}");
            }
            Ok(Duration::from_secs_f64(value))
        };
        let mut cache_env: Vec<String> = if self.no_default_cache_env {
            Vec::new()
        } else {
            DEFAULT_CACHE_ENV.iter().map(|v| v.to_string()).collect()
        };
        for var in &self.cache_env {
            if var.is_empty() || var.contains(['=', '\0']) {
                bail!("--cache-env {var:?}: not an environment variable name");
            }
            if !cache_env.contains(var) {
                cache_env.push(var.clone());
            }
        }
        if self.ready_check_interval_ms == 0 {
            bail!("--ready-check-interval-ms must be at least 1");
        }
        Ok(ServerStartupConfig {
            ready_url: self
                .ready_url
                .clone()
                .unwrap_or_else(|| server::default_ready_url(&argv)),
            argv,
            ready_timeout: seconds(self.ready_check_timeout_sec, "--ready-check-timeout-sec")?,
            poll: Duration::from_millis(self.ready_check_interval_ms),
            stop_grace: seconds(self.server_stop_grace_sec, "--server-stop-grace-sec")?,
            cache_env,
            work_dir,
            iterations,
        })
    }
}

/// `bench startup`'s flags: vLLM's `vllm bench startup`, for a server command or the
/// native engine.
#[derive(Args, Debug)]
// The engine's flags are `throughput`'s; here they go with --model, not --backend.
#[command(mut_args(|arg| match arg.get_help_heading() {
    Some(h) if h.starts_with("Native engine") => arg.help_heading("Native engine (--model)"),
    _ => arg,
}))]
pub struct StartupArgs {
    /// The server command to start (any server, e.g. "vllm serve MODEL --port 8000"),
    /// split as a POSIX shell would; each start is timed from the spawn to its first ready
    /// answer.
    #[arg(
        long,
        value_name = "COMMAND",
        conflicts_with = "model",
        required_unless_present = "model"
    )]
    pub serve_cmd: Option<String>,

    /// Time the native engine instead: a Hugging Face model directory, a .gguf file, or a
    /// hub id in the local cache; each start is timed from the load to its first token.
    #[arg(long)]
    pub model: Option<String>,

    #[command(flatten)]
    pub iterations: IterationArgs,

    /// Path to save the startup times in JSON format (vLLM's keys, then bench's).
    #[arg(long, value_name = "PATH")]
    pub output_json: Option<PathBuf>,

    /// Where each start's server log and the cache directories go [default: a new
    /// temporary directory, removed after a successful run and kept after a failed one].
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,

    #[command(flatten)]
    pub server: ServerStartArgs,

    #[command(flatten)]
    pub engine: EngineArgs,
}

/// `bench sweep startup`'s flags: vLLM's `vllm bench sweep startup`, whose `--startup-cmd`
/// is bench's own startup benchmark, run in this process with the flags below.
#[derive(Args, Debug)]
pub struct SweepStartupArgs {
    /// The server command; each serve-params combination adds or replaces its flags.
    #[arg(long, value_name = "COMMAND")]
    pub serve_cmd: String,

    /// JSON file of parameter combinations for the server command: a list of objects, or
    /// an object of named objects; each key becomes a flag (`max_num_seqs` is
    /// --max-num-seqs, true a bare flag, false --no-FLAG).
    #[arg(long, value_name = "PATH")]
    pub serve_params: Option<PathBuf>,

    /// JSON file of combinations of the startup benchmark's own settings (num_iters_cold,
    /// num_iters_warmup, num_iters_warm, ready_check_timeout_sec, ready_url).
    #[arg(long, value_name = "PATH")]
    pub startup_params: Option<PathBuf>,

    /// Unknown keys in --startup-params are an error instead of being ignored.
    #[arg(long)]
    pub strict_params: bool,

    /// The main directory results are written to.
    #[arg(short = 'o', long, default_value = "results", value_name = "DIR")]
    pub output_dir: PathBuf,

    /// The name of this experiment: results go to OUTPUT_DIR/EXPERIMENT_NAME [default: the
    /// current time, YYYYmmdd_HHMMSS].
    #[arg(short = 'e', long, value_name = "NAME")]
    pub experiment_name: Option<String>,

    /// Number of runs per parameter combination.
    #[arg(long, default_value_t = 1)]
    pub num_runs: u32,

    /// Print the runs (server commands and settings) and exit without running them.
    #[arg(long)]
    pub dry_run: bool,

    /// Continue an experiment: only the runs without a result file run.
    #[arg(long)]
    pub resume: bool,

    #[command(flatten)]
    pub iterations: IterationArgs,

    #[command(flatten)]
    pub server: ServerStartArgs,
}

pub fn run(args: StartupArgs) -> Result<ExitCode> {
    let iterations = args.iterations.iterations();
    let result = match (&args.serve_cmd, &args.model) {
        (Some(cmd), _) => {
            let argv = split_command(cmd).context("--serve-cmd")?;
            let (work_dir, temporary) = match &args.work_dir {
                Some(dir) => (dir.clone(), false),
                None => (temporary_work_dir()?, true),
            };
            let config = args.server.config(argv, iterations, work_dir.clone())?;
            let result = run_server(&config);
            match (&result, temporary) {
                (Ok(_), true) => {
                    let _ = std::fs::remove_dir_all(&work_dir);
                }
                (Err(_), _) => eprintln!("server logs: {}", work_dir.display()),
                _ => {}
            }
            result?
        }
        (None, Some(model)) => {
            let path =
                bench_core::targets::engine::resolve_model(model, &hub_cache_roots_from_env())?;
            let engine = &args.engine;
            let device: Device = engine
                .device
                .parse()
                .map_err(|e| anyhow::anyhow!("--device {}: {e}", engine.device))?;
            let config = native::NativeStartupConfig {
                engine: EngineConfig {
                    model: path,
                    device,
                    max_num_seqs: engine.max_num_seqs,
                    max_num_batched_tokens: engine.max_num_batched_tokens,
                    max_model_len: engine.max_model_len,
                    threads: engine.threads,
                    requantize: !engine.no_requantize,
                    ..EngineConfig::default()
                },
                model: model.clone(),
                iterations,
            };
            eprintln!("Measuring the native engine's start ({model})...");
            native::run(&config, &mut |step| print_step(&step))?
        }
        (None, None) => bail!("give --serve-cmd or --model"),
    };
    print_results(&result);
    if let Some(path) = &args.output_json {
        bench_study::startup::save(path, &result.to_json())
            .with_context(|| format!("--output-json {}", path.display()))?;
        println!("Results saved to {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_sweep(args: SweepStartupArgs) -> Result<ExitCode> {
    let argv = split_command(&args.serve_cmd).context("--serve-cmd")?;
    let read = |path: &Option<PathBuf>, flag: &str| -> Result<Vec<Params>> {
        match path {
            Some(p) => params::read(p).with_context(|| flag.to_owned()),
            None => Ok(vec![Params::new()]),
        }
    };
    let experiment_dir = bench_study::sweep::experiment_dir(
        &args.output_dir,
        args.experiment_name.as_deref(),
        args.resume,
    )?;
    let config = SweepStartupConfig {
        base: args
            .server
            .config(argv, args.iterations.iterations(), PathBuf::new())?,
        ready_url_given: args.server.ready_url.is_some(),
        serve_params: read(&args.serve_params, "--serve-params")?,
        startup_params: read(&args.startup_params, "--startup-params")?,
        strict_params: args.strict_params,
        experiment_dir,
        num_runs: args.num_runs,
    };
    let plan = sweep::plan(&config)?;
    for message in &plan.ignored {
        eprintln!("{message}");
    }
    if args.dry_run {
        for run in plan.combinations.iter().flat_map(|(_, runs)| runs) {
            print_run(run);
        }
        println!(
            "Experiment will be saved at: {}",
            config.experiment_dir.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let interrupt = ServerInterrupt::install("the server".into())?;
    let outcome = sweep::run(&config, &plan, &mut |step| match step {
        SweepStep::Run(run) => print_run(run),
        SweepStep::Existing(run) => {
            println!("Found existing results: {}", run.output.display());
        }
        SweepStep::Startup(step) => {
            observe(&interrupt, &step);
            print_step(&step);
        }
        SweepStep::Saved(path) => println!("Saved {}", path.display()),
    });
    let outcome = interrupt.result(outcome).map_err(|e| {
        e.context(format!(
            "the sweep stopped early; `--resume -e {}` continues it",
            config
                .experiment_dir
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
        ))
    })?;
    println!(
        "{} runs; experiment saved at {} ({})",
        outcome.runs.len(),
        config.experiment_dir.display(),
        outcome.summary_csv.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Runs the server's benchmark with Ctrl-C stopping the server.
fn run_server(config: &ServerStartupConfig) -> Result<StartupResult> {
    let interrupt = ServerInterrupt::install("the server".into())?;
    eprintln!(
        "Measuring the start of `{}` (ready: {})...",
        join_command(&config.argv),
        config.ready_url
    );
    let result = server::run(config, &mut |step| {
        observe(&interrupt, &step);
        print_step(&step);
    });
    interrupt.result(result)
}

/// A new directory under the system's temporary directory for one run's logs and caches.
fn temporary_work_dir() -> Result<PathBuf> {
    let base = std::env::temp_dir();
    for n in 0..1000 {
        let dir = base.join(format!("bench-startup-{}-{n}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
        }
    }
    bail!("no free work directory name under {}", base.display())
}

/// Follows the running server for Ctrl-C (see [`ServerInterrupt`]).
fn observe(interrupt: &ServerInterrupt, step: &Step<'_>) {
    match step {
        Step::Spawned { pid } => interrupt.server_spawned(*pid),
        Step::Finished { .. } => interrupt.server_stopped(),
        _ => {}
    }
}

fn print_step(step: &Step<'_>) {
    match step {
        Step::Starting { .. } | Step::Spawned { .. } => {}
        Step::Finished {
            phase,
            index,
            of,
            times,
        } => {
            let what = match phase {
                Phase::Cold => "Cold start",
                Phase::Warmup => "Warm-up start",
                Phase::Warm => "Warm start",
            };
            eprintln!("{what} {}/{of}: {:.3} s", index + 1, times.startup);
        }
        Step::Note(note) => eprintln!("note: {note}"),
    }
}

fn print_run(run: &sweep::PlannedRun) {
    println!("[BEGIN BENCHMARK]");
    println!("Serve overrides: {}", params::as_text(&run.serve, ", "));
    println!("Startup overrides: {}", params::as_text(&run.startup, ", "));
    println!("Run Number: {}", run.run_number);
    println!("Server command: {}", join_command(&run.config.argv));
    let it = run.config.iterations;
    println!(
        "Startup settings: --ready-url {} --num-iters-cold {} --num-iters-warmup {} \
         --num-iters-warm {}",
        run.config.ready_url, it.cold, it.warmup, it.warm
    );
    println!("Output file: {}", run.output.display());
}

/// vLLM's results block.
fn print_results(result: &StartupResult) {
    let rule = "=".repeat(60);
    println!("\n{rule}\nSTARTUP TIME BENCHMARK RESULTS\n{rule}");
    let metrics = result.metrics();
    for (title, phase) in [("COLD STARTUP", "cold_"), ("WARM STARTUP", "warm_")] {
        let of_phase: Vec<&MetricStats> = metrics
            .iter()
            .filter(|m| m.key.starts_with(phase))
            .collect();
        if of_phase.is_empty() {
            continue;
        }
        println!("\n{title}:");
        for m in &of_phase {
            println!(
                "Avg {}: {:.2} seconds",
                m.display_name.to_lowercase(),
                m.avg
            );
        }
        for m in &of_phase {
            println!("{} percentiles:", m.display_name);
            for (p, v) in &m.percentiles {
                println!("  {p}%: {v:.2} seconds");
            }
        }
    }
    println!("{rule}");
}
