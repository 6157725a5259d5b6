//! `bench compare A.json B.json`: every measured figure of two results (or `--num-runs`
//! summaries) side by side, with the difference and whether it exceeds the run-to-run
//! noise (`bench_study::compare`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;

use bench_study::compare::{self, Side};

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The baseline: a result file of bench serve or vllm bench serve, or a --num-runs
    /// summary (<name>-summary.json). The last result of an appended file is compared.
    #[arg(value_name = "A.json")]
    pub a: PathBuf,

    /// The result compared with the baseline (the same kinds of file).
    #[arg(value_name = "B.json")]
    pub b: PathBuf,

    /// Where neither file measures the noise (no --num-runs summary, and for latencies no
    /// --save-detailed lists), a difference counts when it is larger than this percentage
    /// of A's value.
    #[arg(
        long,
        value_name = "PERCENT",
        default_value_t = 5.0,
        allow_negative_numbers = true
    )]
    pub threshold_pct: f64,

    /// Where the files do measure the noise, a difference beyond it still counts only when
    /// it is larger than this percentage of A's value (with many requests a negligible
    /// shift is statistically real).
    #[arg(
        long,
        value_name = "PERCENT",
        default_value_t = 2.0,
        allow_negative_numbers = true
    )]
    pub min_effect_pct: f64,

    /// Exit with status 1 when B is slower than A beyond the noise on any figure (by
    /// default the exit status is 0 whatever the verdicts).
    #[arg(long)]
    pub fail_on_regression: bool,

    /// Also write the comparison as JSON to this file.
    #[arg(long, value_name = "PATH")]
    pub output_json: Option<PathBuf>,
}

pub fn run(args: CompareArgs) -> Result<ExitCode> {
    for (flag, pct) in [
        ("--threshold-pct", args.threshold_pct),
        ("--min-effect-pct", args.min_effect_pct),
    ] {
        if !(pct.is_finite() && pct >= 0.0) {
            bail!("{flag} must be a number of percent, 0 or more, got {pct}");
        }
    }
    let a = Side::load(&args.a).with_context(|| format!("A: {}", args.a.display()))?;
    let b = Side::load(&args.b).with_context(|| format!("B: {}", args.b.display()))?;
    let thresholds = compare::Thresholds {
        unknown_noise_pct: args.threshold_pct,
        min_effect_pct: args.min_effect_pct,
    };
    let comparison = compare::compare(&a, &b, thresholds);
    if comparison.rows.is_empty() {
        bail!(
            "{} and {} share no measured figure to compare",
            args.a.display(),
            args.b.display()
        );
    }
    print!("{}", comparison.table());
    if let Some(path) = &args.output_json {
        let text = serde_json::to_string_pretty(&comparison.to_json())?;
        std::fs::write(path, text + "\n")
            .with_context(|| format!("--output-json {}: cannot write it", path.display()))?;
    }
    let regressions: Vec<&str> = comparison.regressions().map(|r| r.key.as_str()).collect();
    if args.fail_on_regression && !regressions.is_empty() {
        eprintln!(
            "error: B is slower than A beyond the noise on {}",
            regressions.join(", ")
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
