//! `bench sweep`: grids of runs, as vLLM's `bench sweep` (SKELETON: owned by the sweep work).

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};

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
    #[command(name = "serve_sla", alias = "serve-sla")]
    ServeSla(SweepServeArgs),
    /// Start times of a server command over serve parameters.
    Startup(super::startup::SweepStartupArgs),
    /// Curves of result keys against parameters.
    Plot(super::sweep_plot::PlotArgs),
    /// Tokens/s per user against tokens/s per GPU, the Pareto frontier marked.
    #[command(name = "plot_pareto", alias = "plot-pareto")]
    PlotPareto(super::sweep_plot::ParetoArgs),
}

#[derive(Args, Debug)]
pub struct SweepServeArgs {}

pub fn run(args: SweepArgs) -> Result<ExitCode> {
    match args.command {
        SweepCommand::Startup(a) => super::startup::run_sweep(a),
        SweepCommand::Plot(a) => super::sweep_plot::run_plot(a),
        SweepCommand::PlotPareto(a) => super::sweep_plot::run_pareto(a),
        SweepCommand::Serve(_) | SweepCommand::ServeSla(_) => bail!("not built yet"),
    }
}
