//! `bench sweep plot` and `bench sweep plot_pareto`: vLLM's figures of a sweep's results
//! (every `summary.json` under OUTPUT_DIR), drawn by `bench_study::plot`, with vLLM's flags
//! and its `[BEGIN FIGURE]` ... `[END FIGURE]` lines.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use bench_study::plot::sweep::{self, FigFormat, Group, PlotSpec};
use bench_study::plot::{self, Chart, Scale, pareto, terminal};
use clap::{Args, ValueEnum};

#[derive(Args, Debug)]
pub struct PlotArgs {
    /// The directory holding the sweep's results (the sweep's --output-dir): every
    /// summary.json under it is read.
    #[arg(value_name = "OUTPUT_DIR")]
    pub output_dir: PathBuf,

    /// Where to save the figures, relative to OUTPUT_DIR (default: OUTPUT_DIR itself).
    #[arg(long)]
    pub fig_dir: Option<PathBuf>,

    /// Comma-separated variables: one figure per combination of their values.
    #[arg(long)]
    pub fig_by: Option<String>,

    /// Comma-separated variables: one row of panels per combination of their values.
    #[arg(long)]
    pub row_by: Option<String>,

    /// Comma-separated variables: one column of panels per combination of their values.
    #[arg(long)]
    pub col_by: Option<String>,

    /// Comma-separated variables: one curve per combination of their values.
    #[arg(long)]
    pub curve_by: Option<String>,

    /// The variable on the x-axis (any key of the runs: a parameter or a result).
    #[arg(long, default_value = "request_throughput")]
    pub var_x: String,

    /// The variable on the y-axis (any result key); runs at the same x on one curve are
    /// drawn at their mean.
    #[arg(long, default_value = "p99_e2el_ms")]
    pub var_y: String,

    /// Comma-separated conditions a run must meet to be plotted, with ==, !=, <=, >=, <, >
    /// (e.g. `max_concurrency<1000,max_num_batched_tokens<=4096`).
    #[arg(long)]
    pub filter_by: Option<String>,

    /// Comma-separated VAR%SIZE: round VAR down to a multiple of SIZE, so that close
    /// points fall together (e.g. `request_throughput%1`).
    #[arg(long)]
    pub bin_by: Option<String>,

    /// The x-axis scale (vLLM also takes seaborn's other scales; bench draws linear and
    /// log).
    #[arg(long, value_enum)]
    pub scale_x: Option<AxisScale>,

    /// The y-axis scale.
    #[arg(long, value_enum)]
    pub scale_y: Option<AxisScale>,

    /// The figures' file name prefix; the figure's group follows it.
    #[arg(long, default_value = "FIGURE")]
    pub fig_name: String,

    #[command(flatten)]
    pub output: FigureOutput,
}

/// The flags both commands share: the formats and `--dry-run`.
#[derive(Args, Debug)]
pub struct FigureOutput {
    /// The figures' formats, comma-separated (vLLM writes PNG only).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "png,svg")]
    pub fig_format: Vec<FigFormatArg>,

    /// Print the figures that would be drawn (group, grid, files), and draw none.
    #[arg(long)]
    pub dry_run: bool,

    /// Do not print the figures as text charts in the console after drawing them.
    #[arg(long)]
    pub no_terminal_plot: bool,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum FigFormatArg {
    Png,
    Svg,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum AxisScale {
    Linear,
    Log,
}

#[derive(Args, Debug)]
pub struct ParetoArgs {
    /// The directory holding the sweep's results: every summary.json under it is read.
    /// The figure goes to OUTPUT_DIR/pareto/PARETO.png (and .svg).
    #[arg(value_name = "OUTPUT_DIR")]
    pub output_dir: PathBuf,

    /// The result key holding the number of concurrent users; without it in a run,
    /// request_rate, then the observed max_concurrent_requests.
    #[arg(long, default_value = "max_concurrency")]
    pub user_count_var: String,

    /// The result key holding the GPU count; without it, tensor_parallel_size (tp) ×
    /// pipeline_parallel_size (pp) × data_parallel_size (dp), each 1 where absent.
    #[arg(long)]
    pub gpu_count_var: Option<String>,

    #[command(flatten)]
    pub output: FigureOutput,
}

impl FigureOutput {
    fn formats(&self) -> Vec<FigFormat> {
        self.fig_format
            .iter()
            .map(|f| match f {
                FigFormatArg::Png => FigFormat::Png,
                FigFormatArg::Svg => FigFormat::Svg,
            })
            .collect()
    }
}

fn split(list: &Option<String>) -> Vec<String> {
    list.as_deref()
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn scale(s: Option<AxisScale>) -> Scale {
    match s {
        Some(AxisScale::Log) => Scale::Log,
        _ => Scale::Linear,
    }
}

/// A group as vLLM prints it (a Python dict): `{'model': 'a', 'tp': '2'}`.
fn py_dict(group: &Group) -> String {
    let items: Vec<String> = group.iter().map(|(k, v)| format!("'{k}': '{v}'")).collect();
    format!("{{{}}}", items.join(", "))
}

/// Writes `chart` to each path (creating the directory), at its default size.
fn save_all(chart: &Chart, paths: &[PathBuf]) -> Result<()> {
    for path in paths {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("creating the figure directory {}", dir.display()))?;
        }
        let (w, h) = chart.default_size();
        chart.save(path, w, h)?;
    }
    Ok(())
}

pub fn run_plot(args: PlotArgs) -> Result<ExitCode> {
    let spec = PlotSpec {
        fig_dir: match &args.fig_dir {
            Some(d) => args.output_dir.join(d),
            None => args.output_dir.clone(),
        },
        fig_by: split(&args.fig_by),
        row_by: split(&args.row_by),
        col_by: split(&args.col_by),
        curve_by: split(&args.curve_by),
        var_x: args.var_x,
        var_y: args.var_y,
        filter_by: sweep::parse_list(args.filter_by.as_deref().unwrap_or_default())?,
        bin_by: sweep::parse_list(args.bin_by.as_deref().unwrap_or_default())?,
        scale_x: scale(args.scale_x),
        scale_y: scale(args.scale_y),
        fig_name: args.fig_name,
        formats: args.output.formats(),
    };
    let runs = sweep::load_runs(&args.output_dir)?;
    for figure in sweep::plan(&runs, &spec)? {
        println!("[BEGIN FIGURE]");
        println!("Group: {}", py_dict(&figure.group));
        println!("Grid: {} rows x {} cols", figure.rows, figure.cols);
        for path in &figure.paths {
            println!("Output file: {}", path.display());
        }
        if !args.output.dry_run {
            let chart = sweep::chart(&figure, &spec)?;
            save_all(&chart, &figure.paths)?;
            if !args.output.no_terminal_plot {
                print!("{}", terminal::render(&chart, 72, 18));
            }
        }
        println!("[END FIGURE]");
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_pareto(args: ParetoArgs) -> Result<ExitCode> {
    let runs = sweep::load_runs(&args.output_dir)?;
    let (points, skipped) = pareto::prepare(
        &runs,
        Some(&args.user_count_var),
        args.gpu_count_var.as_deref(),
    )?;
    if skipped > 0 {
        println!(
            "Skipped {skipped} runs without a user count ({} or max_concurrent_requests).",
            args.user_count_var
        );
    }
    anyhow::ensure!(
        !points.is_empty(),
        "no run under {} has both a throughput and a user count to plot a Pareto frontier",
        args.output_dir.display()
    );
    let paths = pareto_paths(&args.output_dir, &args.output.formats());
    println!("[BEGIN FIGURE]");
    println!("Group: {{}}");
    for path in &paths {
        println!("Output file: {}", path.display());
    }
    if !args.output.dry_run {
        let xy: Vec<(f64, f64)> = points
            .iter()
            .map(|p| (p.tokens_per_user, p.tokens_per_gpu))
            .collect();
        let chart = plot::pareto::chart(&xy);
        save_all(&chart, &paths)?;
        if !args.output.no_terminal_plot {
            print!("{}", terminal::render(&chart, 72, 18));
        }
        println!(
            "Plotted {} points; Pareto frontier size: {}.",
            xy.len(),
            pareto::frontier(&xy).len()
        );
    }
    println!("[END FIGURE]");
    Ok(ExitCode::SUCCESS)
}

/// vLLM's place for the Pareto figure: `OUTPUT_DIR/pareto/PARETO.<ext>`.
fn pareto_paths(output_dir: &Path, formats: &[FigFormat]) -> Vec<PathBuf> {
    formats
        .iter()
        .map(|f| {
            output_dir
                .join("pareto")
                .join(format!("PARETO.{}", f.extension()))
        })
        .collect()
}
