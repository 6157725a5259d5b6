//! `bench report RESULT...`: one self-contained HTML page of one or more result files or
//! sweep directories (`bench_study::html_report`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use super::serve_plots::ItlThresholds;
use bench_study::html_report::{self, Report};

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Result files (`bench serve --save-result`, vLLM's too; `--save-detailed` adds the
    /// latency distributions, the timeline and throughput over time), sweep output
    /// directories (every run=N.json under them) or `--record-file`s (read as `bench
    /// merge` reads them, marked interrupted when their run did not end). Several are shown side by side,
    /// differences taken from the first.
    #[arg(required = true, value_name = "RESULT")]
    pub results: Vec<PathBuf>,

    /// Where to write the page.
    #[arg(short, long, value_name = "FILE", default_value = "report.html")]
    pub output: PathBuf,

    /// The timeline's ITL thresholds in milliseconds, ascending, comma-separated: the
    /// gaps below the first, between them and above the last get their own colour.
    #[arg(long, value_name = "MS,MS", default_value = "25,50")]
    pub timeline_itl_thresholds: ItlThresholds,
}

pub fn run(args: ReportArgs) -> Result<ExitCode> {
    let mut runs = Vec::new();
    for path in &args.results {
        runs.extend(html_report::load(path)?);
    }
    let page = html_report::render(&Report {
        runs,
        itl_thresholds_ms: args.timeline_itl_thresholds.ms().to_vec(),
    })?;
    std::fs::write(&args.output, page)
        .with_context(|| format!("writing {}", args.output.display()))?;
    println!("Report: {}", args.output.display());
    Ok(ExitCode::SUCCESS)
}
