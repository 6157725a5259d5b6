//! `bench report RESULT...` (SKELETON: owned by the report work).

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;

#[derive(Args, Debug)]
pub struct ReportArgs {}

pub fn run(_args: ReportArgs) -> Result<ExitCode> {
    bail!("not built yet")
}
