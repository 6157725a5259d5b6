//! Command-line entry point: `serve` is the default subcommand, so the bare form
//! `bench --plugin sharegpt.wasm --backend openai-chat.wasm ...` runs a serving benchmark.

pub mod args;
mod console;
pub mod dataset;
mod interrupt;
pub mod limits;
pub mod plugin;
pub mod plugin_flags;
pub mod selfcheck;
pub mod serve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    /// An OpenAI-compatible server with known delays, for demos and tests.
    MockServer(crate::mock::MockServerArgs),
    /// List, inspect and export plugins.
    Plugin(plugin::PluginArgs),
    /// Sample a workload with a dataset plugin and write it as JSONL.
    Dataset(dataset::DatasetCommand),
    /// Measure this machine's client ceiling and timing error against the built-in mock server.
    Selfcheck(selfcheck::SelfcheckArgs),
}

pub fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BENCH_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        None => serve::run(cli.serve),
        Some(Command::Serve(args)) => serve::run(args),
        Some(Command::MockServer(args)) => run_mock(args),
        Some(Command::Plugin(args)) => plugin::run(args).map(|()| ExitCode::SUCCESS),
        Some(Command::Dataset(cmd)) => dataset::run(cmd).map(|()| ExitCode::SUCCESS),
        Some(Command::Selfcheck(args)) => selfcheck::run(args).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run_mock(args: crate::mock::MockServerArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(crate::mock::run(args))?;
    Ok(ExitCode::SUCCESS)
}
