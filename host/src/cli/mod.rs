//! Command-line entry point: `serve` is the default subcommand, so the bare form
//! `bench --plugin sharegpt.wasm --backend openai-chat.wasm ...` runs a serving benchmark.

pub mod args;
mod compare;
mod console;
mod dashboard;
pub mod dataset;
mod engine_args;
mod interrupt;
mod k8s;
pub mod limits;
mod merge;
pub mod offline;
mod otlp;
pub mod plugin;
pub mod plugin_flags;
mod report;
pub mod scenario;
pub mod selfcheck;
pub mod serve;
mod serve_plots;
mod startup;
mod sweep;
mod sweep_plot;
mod workers;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::runtime::{
    HostContext, PluginInfo, PluginKind, PluginRef, Runtime, RuntimeConfig, builtin_plugins,
};
use plugin_flags::Role;

#[derive(Parser, Debug)]
#[command(
    name = "bench",
    version,
    about = "Benchmark LLM inference servers; datasets and backends are WebAssembly plugins",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    /// With no subcommand, `bench` runs `serve` with these flags.
    #[command(flatten)]
    serve: serve::ServeArgs,
}

// Parsed once per process: the size of the larger variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Command {
    /// Online serving benchmark (the default): TTFT, TPOT, ITL, E2EL, throughput, goodput.
    Serve(serve::ServeArgs),
    /// Offline throughput (vLLM's `bench throughput`): the whole workload at once on the
    /// native engine (`--backend native`, the default) or a server; requests and tokens per
    /// second.
    Throughput(offline::ThroughputArgs),
    /// Offline latency (vLLM's `bench latency`): one batch run to completion, again and
    /// again, on the native engine or a server; latency percentiles.
    Latency(offline::LatencyArgs),
    /// An OpenAI-compatible server with known delays, for demos and tests.
    MockServer(crate::mock::MockServerArgs),
    /// List, inspect and export plugins.
    Plugin(plugin::PluginArgs),
    /// Sample a workload with a dataset plugin and write it as JSONL.
    Dataset(dataset::DatasetCommand),
    /// Measure this machine's client ceiling and timing error against the built-in mock server.
    Selfcheck(selfcheck::SelfcheckArgs),
    /// Grids of runs (vLLM's `bench sweep`): serve, SLA searches, startup, plots.
    Sweep(sweep::SweepArgs),
    /// Cold and warm start times of a server command or of the native engine (vLLM's
    /// `bench startup`).
    Startup(startup::StartupArgs),
    /// One self-contained HTML report of one or more result files.
    Report(report::ReportArgs),
    /// Two results side by side: each metric, the difference, and whether it exceeds the
    /// run-to-run noise.
    Compare(compare::CompareArgs),
    /// Sharded runs on Kubernetes: `render` writes the manifests (an Indexed Job) and the
    /// kubectl steps that run them and merge the shards.
    K8s(k8s::K8sArgs),
    /// The shards of one run (`bench serve --shard I/N`) into one result: every metric
    /// recomputed from all their per-request records, so percentiles are exact; or a
    /// run's `--record-file` into its result (also of a run killed midway).
    Merge(merge::MergeArgs),
}

pub fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            // Plugins' info (what a dataset filtered out, as vLLM prints it) is shown.
            tracing_subscriber::EnvFilter::try_from_env("BENCH_LOG").unwrap_or_else(|_| {
                format!("warn,{}=info", crate::runtime::PLUGIN_LOG_TARGET).into()
            }),
        )
        .with_writer(std::io::stderr)
        .with_ansi(console::stderr_colour())
        .with_target(false)
        .init();
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let result = parse(&argv).and_then(|(cli, parsed)| match cli.command {
        None => run_serve(cli.serve, &parsed),
        Some(Command::Serve(args)) => run_serve(args, &parsed),
        Some(Command::Throughput(args)) => offline::run_throughput(args, &parsed),
        Some(Command::Latency(args)) => offline::run_latency(args, &parsed),
        Some(Command::MockServer(args)) => run_mock(args),
        Some(Command::Plugin(args)) => plugin::run(args).map(|()| ExitCode::SUCCESS),
        Some(Command::Dataset(cmd)) => dataset::run(cmd, &parsed).map(|()| ExitCode::SUCCESS),
        Some(Command::Selfcheck(args)) => selfcheck::run(args).map(|()| ExitCode::SUCCESS),
        Some(Command::Sweep(args)) => sweep::run(args, &parse_serve),
        Some(Command::Startup(args)) => startup::run(args),
        Some(Command::Report(args)) => report::run(args),
        Some(Command::Compare(args)) => compare::run(args),
        Some(Command::K8s(args)) => k8s::run(args),
        Some(Command::Merge(args)) => merge::run(args),
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            // A plugin's own output in the message (a fault's stderr, a traceback) may carry
            // colour codes: anstream drops them where stderr takes no colour.
            anstream::eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Parses the command line with the flags of the plugins it names (see `plugin_flags`):
/// clap's errors and `--help` exit the process; a plugin that cannot be loaded to learn its
/// flags is an error naming the flag that chose it.
fn parse(argv: &[String]) -> anyhow::Result<(Cli, plugin_flags::Parsed)> {
    let mut runtime: Option<Runtime> = None;
    let mut describe = |role: Role, name: &str| -> anyhow::Result<PluginInfo> {
        let flag = match role {
            Role::Dataset => "--dataset-name",
            Role::Backend => "--backend",
        };
        let plugin = PluginRef::parse(name).map_err(|e| e.context(format!("{flag} {name}")))?;
        let runtime = match &mut runtime {
            Some(r) => r,
            None => runtime.insert(Runtime::new(RuntimeConfig {
                cache_dir: crate::runtime::cache_dir_from_env(),
                on_compile: Some(plugin::compile_notice()),
                ..RuntimeConfig::default()
            })?),
        };
        let info = match role {
            Role::Dataset => runtime
                .load_dataset(&plugin, HostContext::default(), None)
                .and_then(|mut d| Ok(d.describe()?)),
            Role::Backend => runtime
                .load_backend(&plugin, HostContext::default())
                .and_then(|mut b| Ok(b.describe()?)),
        };
        info.map_err(|e| e.context(format!("{flag} {name}")))
    };
    let builtins: Vec<(Role, &'static str)> = builtin_plugins()
        .iter()
        .map(|p| {
            let role = match p.kind {
                PluginKind::Dataset => Role::Dataset,
                PluginKind::Backend => Role::Backend,
            };
            (role, p.name)
        })
        .collect();
    // The offline benchmarks run the native engine by default, as vLLM's run its
    // in-process engine.
    let command = Cli::command()
        .mut_subcommand("throughput", offline_flags)
        .mut_subcommand("latency", offline_flags);
    // `--config`: the scenario file's flags join the command line before anything reads it.
    let serve = command
        .find_subcommand("serve")
        .expect("bench has a serve subcommand");
    let expanded = scenario::expand(argv, serve, &mut describe, &builtins)?;
    let parsed = plugin_flags::parse(command, &expanded.argv, &mut describe, &builtins)?;
    let mut cli = Cli::from_arg_matches(&parsed.matches).unwrap_or_else(|e| e.exit());
    match &mut cli.command {
        None => cli.serve.scenario.resolution = expanded.resolution,
        Some(Command::Serve(args)) => args.scenario.resolution = expanded.resolution,
        Some(Command::Throughput(offline::ThroughputArgs { offline, .. }))
        | Some(Command::Latency(offline::LatencyArgs { offline, .. }))
            if offline.serve.scenario.config.is_some() || offline.serve.scenario.dry_run =>
        {
            anyhow::bail!("--config and --dry-run are `bench serve`'s flags")
        }
        Some(_) => {}
    }
    Ok((cli, parsed))
}

/// A `bench serve` command line (a sweep's `--bench-cmd`), parsed as the command line is.
fn parse_serve(argv: &[String]) -> anyhow::Result<(serve::ServeArgs, plugin_flags::Parsed)> {
    let (cli, parsed) = parse(argv)?;
    match cli.command {
        Some(Command::Serve(args)) => Ok((args, parsed)),
        _ => anyhow::bail!("--bench-cmd did not parse as `bench serve`"),
    }
}

/// The offline commands' flags are serve's, but for the backend's default and
/// `--num-runs`, `--until-confident`, `--cost-per-hour`, `--metrics-port`, the OTLP
/// export, `--ui`, the
/// scaling-out flags (refused or ignored there: see `offline::resolve`) and the scenario
/// flags (refused by `parse`), which their help leaves out.
fn offline_flags(cmd: clap::Command) -> clap::Command {
    [
        "num_runs",
        "until_confident",
        "until_confident_max_duration",
        "duration",
        "duration_grace",
        "cost_per_hour",
        "metrics_port",
        "metrics_host",
        "record_file",
        "otlp_endpoint",
        "otlp_header",
        "otlp_timeout",
        "ui",
        "shard",
        "start_at",
        "shard_output",
        "workers",
        "config",
        "dry_run",
    ]
    .into_iter()
    .fold(cmd, |cmd, flag| cmd.mut_arg(flag, |a| a.hide(true)))
    .mut_arg("backend", |a| {
        a.default_value(plugin_flags::NATIVE_BACKEND).help(
            "`native` (the default: the model runs in this process), or a backend plugin \
             for a server: a first-party name (openai, openai-chat, ...) or a .wasm file",
        )
    })
}

/// `bench serve`: one run in this process, or (`--workers N`) as N client processes
/// merged here.
fn run_serve(args: serve::ServeArgs, parsed: &plugin_flags::Parsed) -> anyhow::Result<ExitCode> {
    if args.scenario.dry_run {
        // Parsed and checked by clap like a run's flags, but nothing is loaded or sent.
        let resolution = args.scenario.resolution.unwrap_or_default();
        print!("{}", resolution.to_toml());
        return Ok(ExitCode::SUCCESS);
    }
    args.model.check_tokenizer_mode()?;
    if args.workers > 1 && args.metrics_port.is_some() {
        anyhow::bail!(
            "--metrics-port with --workers: each client process sees only its share of the \
             run, and all would take the one port; serve it from processes of their own \
             (--shard I/N, one per machine)"
        );
    }
    if args.record_file.is_some() && (args.workers > 1 || args.num_runs > 1) {
        anyhow::bail!(
            "--record-file holds one run of one process: with --workers, each client process \
             writes its records for the merge already; with --num-runs, run each run with a \
             file of its own"
        );
    }
    if args.workers > 1 && args.ui == dashboard::Ui::Dashboard {
        anyhow::bail!(
            "--ui dashboard with --workers: each client process sees only its share of the \
             run; use the console (--ui console, the default)"
        );
    }
    if args.workers > 1 && !serve::is_worker() {
        return workers::run(args, parsed);
    }
    serve::run(args, parsed)
}

fn run_mock(args: crate::mock::MockServerArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(crate::mock::run(args))?;
    Ok(ExitCode::SUCCESS)
}
