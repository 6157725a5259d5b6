//! `bench startup` and `bench sweep startup` (SKELETON: owned by the startup work).

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;

#[derive(Args, Debug)]
pub struct StartupArgs {}

#[derive(Args, Debug)]
pub struct SweepStartupArgs {}

pub fn run(_args: StartupArgs) -> Result<ExitCode> {
    bail!("not built yet")
}

pub fn run_sweep(_args: SweepStartupArgs) -> Result<ExitCode> {
    bail!("not built yet")
}
