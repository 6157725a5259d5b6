//! `bench sweep plot` and `bench sweep plot_pareto` (SKELETON: owned by the plots work).

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;

#[derive(Args, Debug)]
pub struct PlotArgs {}

#[derive(Args, Debug)]
pub struct ParetoArgs {}

pub fn run_plot(_args: PlotArgs) -> Result<ExitCode> {
    bail!("not built yet")
}

pub fn run_pareto(_args: ParetoArgs) -> Result<ExitCode> {
    bail!("not built yet")
}
