//! `bench compare A.json B.json` (SKELETON: owned by the compare work).

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;

#[derive(Args, Debug)]
pub struct CompareArgs {}

pub fn run(_args: CompareArgs) -> Result<ExitCode> {
    bail!("not built yet")
}
