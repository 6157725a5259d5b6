//! `bench serve --plot-timeline` and `--plot-dataset-stats` (SKELETON: owned by the plots
//! work).

use anyhow::Result;
use clap::Args;

use crate::benchmark::{Outcome, ServeConfig};

#[derive(Args, Debug, Clone, serde::Serialize)]
pub struct ServePlotArgs {}

/// Writes the figures the flags ask for, after the run's result was saved.
pub fn write(_args: &ServePlotArgs, _config: &ServeConfig, _outcome: &Outcome) -> Result<()> {
    Ok(())
}
