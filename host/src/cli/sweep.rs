//! `bench sweep`: grids of runs, as vLLM's `bench sweep`. `serve`, `serve_sla` and
//! `serve_workload` are `bench_study::sweep`; this module turns their flags into its
//! configuration, runs each benchmark in process with `bench serve`'s own parser and
//! library (`benchmark::serve`), prints the progress as vLLM's scripts do, and stops the
//! server on Ctrl-C. `startup`, `plot` and `plot_pareto` live in their own modules.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use bench_study::server_process::{join_command, split_command};
use bench_study::sweep::{
    self, Driver, Event, ServerSettings, SlaVariable, SweepConfig, params, sla,
};
use clap::{Args, Subcommand, ValueEnum};

use super::interrupt::ServerInterrupt;
use super::plugin_flags::Parsed;
use super::serve::ServeArgs;
use crate::client::stop::StopSignal;
use indicatif::ProgressBar;

use crate::observer::{Event as RunEvent, Observer};

#[derive(Args, Debug)]
pub struct SweepArgs {
    #[command(subcommand)]
    pub command: SweepCommand,
}

#[derive(Subcommand, Debug)]
pub enum SweepCommand {
    /// Every combination of serve and bench parameters, each run --num-runs times.
    Serve(SweepServeArgs),
    /// The largest request rate or concurrency that meets every SLO.
    ///
    /// vLLM's search: one run with the variable unbounded estimates what the server
    /// sustains; from there the value doubles while every SLO holds, then a bisection
    /// between the largest passing and the smallest failing value narrows it to one.
    #[command(name = "serve_sla", alias = "serve-sla")]
    ServeSla(SweepSlaArgs),
    /// The latency-throughput trade-off: an even scan of request rates or concurrencies
    /// between serial and batch inference.
    ///
    /// One serial run (the variable and the concurrency 1) and one batch run (the variable
    /// the dataset's size, every request at once) measure what the server sustains at
    /// either end; --workload-iters levels in all are run, evenly spaced between them.
    #[command(name = "serve_workload", alias = "serve-workload")]
    ServeWorkload(SweepWorkloadArgs),
    /// Start times of a server command over serve parameters.
    Startup(super::startup::SweepStartupArgs),
    /// Curves of result keys against parameters.
    Plot(super::sweep_plot::PlotArgs),
    /// Tokens/s per user against tokens/s per GPU, the Pareto frontier marked.
    #[command(name = "plot_pareto", alias = "plot-pareto")]
    PlotPareto(super::sweep_plot::ParetoArgs),
}

/// vLLM's `bench sweep serve` flags, shared by the SLA search and the workload scan.
#[derive(Args, Debug)]
pub struct SweepServeArgs {
    /// The server command, e.g. 'vllm serve MODEL --port 8000' (any server). It is started
    /// once per --serve-params combination in a process group of its own, its output in a
    /// log file in the experiment folder, and stopped (SIGTERM, then SIGKILL after
    /// --server-stop-grace) when its benchmarks are done, when one fails and on Ctrl-C.
    /// Without it no server is managed: the benchmarks run against one already running.
    #[arg(long, value_name = "COMMAND", allow_hyphen_values = true)]
    pub serve_cmd: Option<String>,

    /// The benchmark: `bench serve` flags, e.g. '--model M --dataset-name random
    /// --num-prompts 100'; a leading 'bench serve', 'bench' or 'vllm bench serve' is
    /// dropped, so vLLM's command lines work as they are. Each run is `bench serve` in this
    /// process, its result saved in the combination's folder. Without --base-url, --host
    /// and --port it is sent to --serve-cmd's server (its --host and --port).
    #[arg(long, value_name = "COMMAND", allow_hyphen_values = true)]
    pub bench_cmd: String,

    /// Run this after each benchmark instead of resetting the server's caches (POST
    /// /reset_prefix_cache, /reset_mm_cache and /reset_encoder_cache on the server's
    /// address; an endpoint the server lacks is skipped).
    #[arg(long, value_name = "COMMAND", allow_hyphen_values = true)]
    pub after_bench_cmd: Option<String>,

    /// Show the output of --after-bench-cmd (discarded by default).
    #[arg(long)]
    pub show_stdout: bool,

    /// Seconds to wait for the server to become ready.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    pub server_ready_timeout: u64,

    /// The URL that answers 2xx once the server is ready [default: /health at the server
    /// command's --host (localhost) and -p/--port (8000), as vLLM's sweep finds it; the
    /// cache resets go to the same address].
    #[arg(long, value_name = "URL")]
    pub server_ready_url: Option<String>,

    /// Seconds between SIGTERM and SIGKILL when the server is stopped.
    #[arg(long, default_value = "10", value_name = "SECONDS", value_parser = parse_seconds)]
    pub server_stop_grace: Duration,

    /// JSON file of server parameter combinations: a list of objects (or an object of
    /// named objects), each key a flag of --serve-cmd (`max_num_seqs` sets
    /// --max-num-seqs; true and false set --flag and --no-flag; `_benchmark_name` names
    /// the combination). With --bench-params, their Cartesian product runs.
    #[arg(long, value_name = "PATH")]
    pub serve_params: Option<PathBuf>,

    /// JSON file of benchmark parameter combinations, as --serve-params, each key a flag
    /// of `bench serve`.
    #[arg(long, value_name = "PATH")]
    pub bench_params: Option<PathBuf>,

    /// Serve and bench keys whose values must agree for a combination to run, e.g.
    /// 'max_num_seqs=max_concurrency'.
    #[arg(long, value_name = "SERVE=BENCH,...")]
    pub link_vars: Option<String>,

    /// The folder the experiments are written under.
    #[arg(short = 'o', long, default_value = "results", value_name = "DIR")]
    pub output_dir: PathBuf,

    /// The experiment's folder under --output-dir [default: the time now,
    /// YYYYMMDD_HHMMSS].
    #[arg(short = 'e', long, value_name = "NAME")]
    pub experiment_name: Option<String>,

    /// Runs of each parameter combination.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub num_runs: u32,

    /// Requests of one unmeasured warm-up run before each combination's runs (saved as
    /// warmup.json, left out of the summaries); 0: none.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub warmup_num_prompts: u64,

    /// Record a failed run (run=N.failure.json) or server combination
    /// (SERVE-<name>-failure.json) and go on with the next, instead of ending the sweep.
    #[arg(long)]
    pub continue_on_error: bool,

    /// Print the commands that would run, then exit without running them.
    #[arg(long)]
    pub dry_run: bool,

    /// Continue the experiment in --output-dir/--experiment-name: combinations whose
    /// results are there are read back, not run again.
    #[arg(long, requires = "experiment_name")]
    pub resume: bool,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
#[value(rename_all = "snake_case")]
pub enum VariableArg {
    RequestRate,
    MaxConcurrency,
}

impl From<VariableArg> for SlaVariable {
    fn from(v: VariableArg) -> SlaVariable {
        match v {
            VariableArg::RequestRate => SlaVariable::RequestRate,
            VariableArg::MaxConcurrency => SlaVariable::MaxConcurrency,
        }
    }
}

#[derive(Args, Debug)]
pub struct SweepSlaArgs {
    #[command(flatten)]
    pub sweep: SweepServeArgs,

    /// JSON file: a list of SLAs, each an object of result keys and bounds, e.g.
    /// [{"p99_ttft_ms": "<=200", "p99_tpot_ms": "<50"}] (operators <=, >=, <, >, on the
    /// mean over the runs). Each is searched for on its own; a value measured for one is
    /// read back for the next.
    #[arg(long, value_name = "PATH", help_heading = "SLA options")]
    pub sla_params: PathBuf,

    /// What the search varies.
    #[arg(
        long,
        value_enum,
        default_value = "request_rate",
        help_heading = "SLA options"
    )]
    pub sla_variable: VariableArg,
}

#[derive(Args, Debug)]
pub struct SweepWorkloadArgs {
    #[command(flatten)]
    pub sweep: SweepServeArgs,

    /// What the scan varies.
    #[arg(
        long,
        alias = "sla-variable",
        value_enum,
        default_value = "request_rate",
        help_heading = "Workload options"
    )]
    pub workload_var: VariableArg,

    /// Workload levels to run, the serial and the batch run included (at least 2).
    #[arg(
        long,
        alias = "sla-iters",
        default_value_t = 10,
        value_parser = clap::value_parser!(u32).range(2..),
        help_heading = "Workload options"
    )]
    pub workload_iters: u32,
}

/// `bench serve`'s default `--num-prompts` (vLLM's), the batch run's size when the bench
/// command and parameters set none.
const DEFAULT_NUM_PROMPTS: u64 = 1000;

fn parse_seconds(s: &str) -> Result<Duration, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(Duration::from_secs_f64(x)),
        _ => Err(format!("expected a number of seconds, got {s:?}")),
    }
}

/// A `bench serve` command line parsed by the whole command line's parser, plugins' own
/// flags included (the caller's: this module sits below the parser).
pub type ParseServe<'a> = &'a dyn Fn(&[String]) -> Result<(ServeArgs, Parsed)>;

pub fn run(args: SweepArgs, parse_serve: ParseServe<'_>) -> Result<ExitCode> {
    match args.command {
        SweepCommand::Serve(a) => run_sweep(&a, parse_serve, |cfg, driver| {
            sweep::serve(cfg, driver).map(drop)
        }),
        SweepCommand::ServeSla(a) => {
            let slas = sla::read_slas(&a.sla_params).context("--sla-params")?;
            if slas.is_empty() {
                bail!("--sla-params {}: no SLA in it", a.sla_params.display());
            }
            run_sweep(&a.sweep, parse_serve, |cfg, driver| {
                sweep::serve_sla(cfg, a.sla_variable.into(), &slas, driver).map(drop)
            })
        }
        SweepCommand::ServeWorkload(a) => run_sweep(&a.sweep, parse_serve, |cfg, driver| {
            sweep::serve_workload(
                cfg,
                a.workload_var.into(),
                a.workload_iters as usize,
                DEFAULT_NUM_PROMPTS,
                driver,
            )
            .map(drop)
        }),
        SweepCommand::Startup(a) => super::startup::run_sweep(a),
        SweepCommand::Plot(a) => super::sweep_plot::run_plot(a),
        SweepCommand::PlotPareto(a) => super::sweep_plot::run_pareto(a),
    }
}

/// The bench command's words without a leading `bench serve`, `bench` or `vllm bench
/// serve` (any path to the program).
fn bench_flags(cmd: &str) -> Result<Vec<String>> {
    let mut words = split_command(cmd).context("--bench-cmd")?;
    let program = words
        .first()
        .and_then(|w| std::path::Path::new(w).file_name())
        .and_then(|n| n.to_str());
    if matches!(program, Some("vllm" | "bench")) {
        words.remove(0);
        if words.first().is_some_and(|w| w == "bench") {
            words.remove(0);
        }
        if words.first().is_some_and(|w| w == "serve") {
            words.remove(0);
        }
    }
    Ok(words)
}

fn config(args: &SweepServeArgs) -> Result<SweepConfig> {
    let serve_cmd = args
        .serve_cmd
        .as_deref()
        .map(|c| split_command(c).context("--serve-cmd"))
        .transpose()?;
    let read = |path: &Option<PathBuf>, flag: &str| match path {
        Some(p) => params::read(p).with_context(|| flag.to_owned()),
        None => Ok(vec![params::Params::new()]),
    };
    let serve_params = read(&args.serve_params, "--serve-params")?;
    if serve_cmd.is_none() && args.serve_params.is_some() {
        bail!("--serve-params needs --serve-cmd: without it no server is started");
    }
    let after_bench_cmd = args
        .after_bench_cmd
        .as_deref()
        .map(|c| split_command(c).context("--after-bench-cmd"))
        .transpose()?;
    Ok(SweepConfig {
        serve_cmd,
        bench_cmd: bench_flags(&args.bench_cmd)?,
        after_bench_cmd,
        show_stdout: args.show_stdout,
        server: ServerSettings {
            ready_url: args.server_ready_url.clone(),
            ready_timeout: Duration::from_secs(args.server_ready_timeout),
            ready_poll: Duration::from_millis(250),
            stop_grace: args.server_stop_grace,
        },
        serve_params,
        bench_params: read(&args.bench_params, "--bench-params")?,
        link_vars: params::parse_link_vars(args.link_vars.as_deref().unwrap_or_default())
            .context("--link-vars")?,
        experiment_dir: sweep::experiment_dir(
            &args.output_dir,
            args.experiment_name.as_deref(),
            args.resume,
        )?,
        num_runs: args.num_runs as usize,
        dry_run: args.dry_run,
        warmup_num_prompts: args.warmup_num_prompts,
        continue_on_error: args.continue_on_error,
    })
}

/// Checks every bench combination's command line with `bench serve`'s parser before any
/// server starts (a typo then costs no server start).
fn check_bench_cmds(cfg: &SweepConfig, parse_serve: ParseServe<'_>) -> Result<()> {
    for bench in &cfg.bench_params {
        let argv = serve_argv(&params::apply_to_cmd(bench, &cfg.bench_cmd));
        parse_serve(&argv)
            .with_context(|| format!("--bench-cmd with --bench-params {}", params::name(bench)))?;
    }
    Ok(())
}

fn serve_argv(flags: &[String]) -> Vec<String> {
    ["bench", "serve"]
        .into_iter()
        .map(str::to_owned)
        .chain(flags.iter().cloned())
        .collect()
}

fn run_sweep(
    args: &SweepServeArgs,
    parse_serve: ParseServe<'_>,
    sweep: impl FnOnce(&SweepConfig, &mut dyn Driver) -> Result<()>,
) -> Result<ExitCode> {
    let cfg = config(args)?;
    check_bench_cmds(&cfg, parse_serve)?;
    if let Err(e) = super::limits::raise_open_file_limit() {
        eprintln!("WARNING: cannot read the open-file limit: {e}");
    }
    let interrupt = ServerInterrupt::install(format!(
        "the benchmark and the server (SIGKILL after {:.1} s)",
        cfg.server.stop_grace.as_secs_f64()
    ))?;
    let mut driver = CliDriver {
        interrupt: &interrupt,
        dry_run: cfg.dry_run,
        parse_serve,
    };
    let result = sweep(&cfg, &mut driver);
    if interrupt.interrupted() {
        bail!(
            "the sweep was interrupted; run it again with --resume --experiment-name {} to \
             continue it",
            experiment_name(&cfg)
        );
    }
    result.with_context(|| {
        format!(
            "the sweep stopped early; run it again with --resume --experiment-name {} to \
             continue from its last finished run",
            experiment_name(&cfg)
        )
    })?;
    Ok(ExitCode::SUCCESS)
}

fn experiment_name(cfg: &SweepConfig) -> String {
    cfg.experiment_dir
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// Runs each benchmark in this process and prints the sweep's progress.
struct CliDriver<'a> {
    interrupt: &'a ServerInterrupt,
    dry_run: bool,
    parse_serve: ParseServe<'a>,
}

impl Driver for CliDriver<'_> {
    fn bench(&mut self, argv: &[String]) -> Result<()> {
        if self.interrupt.interrupted() {
            bail!("interrupted");
        }
        let (args, parsed) = (self.parse_serve)(&serve_argv(argv))?;
        args.model.check_tokenizer_mode()?;
        let resolved = super::serve::resolve(&args, &parsed)?;
        for w in &resolved.warnings {
            eprintln!("WARNING: {w}");
        }
        let otlp = super::otlp::exporter(&args.otlp)?;
        let mut observer = SweepObserver {
            console: super::console::Console::new(
                !args.disable_tqdm,
                resolved.config.load.shutdown_grace,
            )
            .with_ui(args.ui),
            run: self.interrupt.run_slot(),
        };
        let outcome = crate::benchmark::serve(&resolved.config, &mut observer);
        *self
            .interrupt
            .run_slot()
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        let outcome = outcome?;
        super::otlp::export(otlp.as_ref(), &resolved.config, &outcome);
        if self.interrupt.interrupted() || outcome.signal.is_some() {
            bail!("interrupted");
        }
        if let Some(i) = &outcome.interrupted {
            bail!("the benchmark was stopped early: {}", i.reason);
        }
        if outcome.all_failed() {
            bail!(
                "every request of the benchmark failed; first error: {}",
                outcome
                    .first_failure()
                    .map(ToString::to_string)
                    .unwrap_or_default()
            );
        }
        super::serve_plots::write(&args.plots, &resolved.config, &outcome)
    }

    fn stopped(&self) -> bool {
        self.interrupt.interrupted()
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Server {
                params,
                command,
                log,
            } => {
                println!("[BEGIN SERVER]");
                let overrides = params::as_text(params, ", ");
                println!(
                    "Server overrides: {}",
                    if overrides.is_empty() {
                        "(none)"
                    } else {
                        &overrides
                    }
                );
                match command {
                    Some(c) => println!("Server command: {c}"),
                    None => println!("No server command: the benchmarks use a running server"),
                }
                if let Some(log) = log {
                    println!("Server log: {}", log.display());
                }
            }
            Event::ServerNotNeeded => {
                println!("Every result for these server parameters is there: not started.");
            }
            Event::ServerSpawned { pid } => {
                self.interrupt.server_spawned(pid);
            }
            Event::ServerReady { after } => {
                println!("Server ready after {:.1} s", after.as_secs_f64());
            }
            Event::ServerStopped { status } => {
                self.interrupt.server_stopped();
                println!("[END SERVER] ({status})");
            }
            Event::Benchmark { argv, output, run } => {
                println!("[BEGIN BENCHMARK]");
                match run {
                    Some(run) => println!("Run Number: {run}"),
                    None => println!("Warm-up run (not measured)"),
                }
                println!("Benchmark command: bench serve {}", join_command(argv));
                println!("Output file: {}", output.display());
            }
            Event::Skipped { .. } => {
                println!("Found existing results.");
                println!("[SKIPPED BENCHMARK]");
            }
            Event::Failed { error, record } => {
                println!("[FAILED] {error:#}");
                println!("Failure details: {}", record.display());
            }
            Event::NoSuccessfulRuns { dir } => println!(
                "[NO SUCCESSFUL MEASURED RUNS] {} stays to be run again with --resume",
                dir.display()
            ),
            Event::Reset { endpoint, done } => {
                if done {
                    println!("Reset the server's cache: {endpoint}");
                }
            }
            Event::Testing { variable, value } => {
                println!("Testing {}: {value}", variable.key());
            }
            Event::SlaChecked { sla, value, margin } => println!(
                "SLA {} at {value}: {} (margin {margin:.2})",
                sla.text(", "),
                if margin <= 0.0 { "met" } else { "not met" }
            ),
            Event::SlaFound {
                sla,
                variable,
                value,
                measured,
            } => println!(
                "Maximum {} for SLA {}: {value} ({measured} values measured)",
                variable.key(),
                sla.text(", ")
            ),
            Event::WorkloadRange {
                variable,
                serial,
                batch,
            } => {
                println!("Serial inference: {}={serial}", variable.key());
                println!("Batch inference: {}={batch}", variable.key());
            }
            Event::Saved { dir } => {
                if self.dry_run {
                    println!("Experiment will be saved at: {}", dir.display());
                } else {
                    println!("Experiment has been saved at: {}", dir.display());
                }
            }
        }
    }
}

/// `bench serve`'s console, except that a stop signal goes to the sweep's own handler
/// (which also stops the server) instead of `serve`'s.
struct SweepObserver<'a> {
    console: super::console::Console,
    run: &'a Mutex<Option<Arc<StopSignal>>>,
}

impl Observer for SweepObserver<'_> {
    fn event(&mut self, event: RunEvent<'_>) {
        self.console.event(event);
    }

    fn progress_bar(&mut self, requests: u64) -> ProgressBar {
        self.console.progress_bar(requests)
    }

    fn arm_stop(&mut self, stop: &Arc<StopSignal>) -> Result<()> {
        *self.run.lock().unwrap_or_else(PoisonError::into_inner) = Some(stop.clone());
        Ok(())
    }

    /// `--ui dashboard` in `--bench-cmd`: each run of the sweep on the dashboard.
    fn live_stats(&mut self) -> Option<Arc<crate::client::live::LiveStats>> {
        self.console.live_stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_flags_take_values_that_start_with_a_dash() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            sweep: SweepServeArgs,
        }
        let cli = Cli::try_parse_from([
            "sweep",
            "--bench-cmd",
            "--model m",
            "--serve-cmd",
            "-x",
            "--after-bench-cmd",
            "--y",
        ])
        .unwrap();
        assert_eq!(cli.sweep.bench_cmd, "--model m");
        assert_eq!(cli.sweep.serve_cmd.as_deref(), Some("-x"));
        assert_eq!(cli.sweep.after_bench_cmd.as_deref(), Some("--y"));
    }

    #[test]
    fn bench_cmd_drops_a_leading_bench_serve() {
        for cmd in [
            "vllm bench serve --model m",
            "bench serve --model m",
            "/usr/bin/bench --model m",
            "--model m",
        ] {
            assert_eq!(bench_flags(cmd).unwrap(), ["--model", "m"], "{cmd}");
        }
    }
}
