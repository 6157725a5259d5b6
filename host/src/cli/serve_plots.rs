//! `bench serve --plot-timeline` and `--plot-dataset-stats`: vLLM's figures of a run,
//! written beside its result file (`<result>.timeline.{png,svg}`,
//! `<result>.dataset_stats.{png,svg}`), as PNG and SVG where vLLM writes plotly HTML and a
//! matplotlib PNG. The charts are `bench_study::plot`'s. With the timeline, the console also
//! shows output throughput and requests in flight over the run as text charts.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{Result, bail};
use bench_study::plot::{self, Chart, terminal};
use clap::Args;

use crate::benchmark::{Outcome, ServeConfig};
use crate::report::SaveOptions;
use crate::report::save::result_path;

#[derive(Args, Debug, Clone, serde::Serialize)]
pub struct ServePlotArgs {
    /// Draw every request's timeline (send, first token, each output chunk coloured by
    /// its ITL band, end), one row per request, to <result>.timeline.png and .svg beside
    /// the result file (where the result would be saved, also without --save-result).
    /// vLLM writes an interactive HTML file; bench writes PNG and SVG.
    #[arg(long)]
    pub plot_timeline: bool,

    /// ITL thresholds in milliseconds for the timeline's colours, comma-separated and
    /// ascending: two give vLLM's three bands, below the first (green), between
    /// (orange), from the second (red); more thresholds give more bands.
    #[arg(long, value_name = "MS,MS", default_value = "25,50")]
    pub timeline_itl_thresholds: ItlThresholds,

    /// Draw the prompt, output and total token histograms and the tokens of each request
    /// (stacked) to <result>.dataset_stats.png and .svg beside the result file, as vLLM's
    /// figure (a PNG there).
    #[arg(long)]
    pub plot_dataset_stats: bool,
}

/// `--timeline-itl-thresholds`: positive, ascending milliseconds; kept as typed for the
/// run's recorded command line (vLLM records the string).
#[derive(Debug, Clone, PartialEq)]
pub struct ItlThresholds {
    text: String,
    ms: Vec<f64>,
}

impl FromStr for ItlThresholds {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let ms = s
            .split(',')
            .map(|v| match v.trim().parse::<f64>() {
                Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
                _ => Err(format!(
                    "expected positive milliseconds separated by commas, got {v:?}"
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        if ms.windows(2).any(|w| w[0] >= w[1]) {
            return Err(format!("the thresholds must ascend, got {s:?}"));
        }
        Ok(ItlThresholds {
            text: s.to_string(),
            ms,
        })
    }
}

impl ItlThresholds {
    /// The thresholds, ascending milliseconds.
    pub fn ms(&self) -> &[f64] {
        &self.ms
    }
}

impl serde::Serialize for ItlThresholds {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

/// Writes the figures the flags ask for, after the run's result was saved, and says where
/// each went. As in vLLM, a figure that cannot be drawn is a warning, not a failed run.
pub fn write(args: &ServePlotArgs, config: &ServeConfig, outcome: &Outcome) -> Result<()> {
    if !(args.plot_timeline || args.plot_dataset_stats) {
        return Ok(());
    }
    // vLLM places the figures by the result's file name whether or not it saves it.
    let options = SaveOptions {
        save_result: true,
        ..config.report.save.clone()
    };
    let Some(result) = result_path(&outcome.run, &options) else {
        bail!("no result file name to place the figures beside");
    };
    let requests = plot::request_times_from_records(&outcome.metrics.per_request);
    if requests.is_empty() {
        eprintln!("WARNING: no request was sent: no figures to draw");
        return Ok(());
    }
    let mut figures = Vec::new();
    if args.plot_timeline {
        figures.push((
            "Timeline plot",
            "timeline",
            plot::timeline(&requests, &args.timeline_itl_thresholds.ms),
        ));
    }
    if args.plot_dataset_stats {
        figures.push((
            "Dataset statistics plot",
            "dataset_stats",
            plot::dataset_stats(&requests),
        ));
    }
    if args.plot_timeline {
        // The run's shape in the console: throughput and concurrency over time, in about
        // 60 buckets (ramp-up and drain show as the slopes at either end).
        let span = requests
            .iter()
            .map(|r| r.start + r.latency)
            .fold(0.0, f64::max);
        let over_time = plot::throughput_over_time(&requests, (span / 60.0).max(1e-3));
        print!("{}", terminal::render(&over_time, 60, 8));
    }
    for (what, suffix, chart) in figures {
        for ext in ["png", "svg"] {
            let path = beside(&result, suffix, ext);
            match save(&chart, &path) {
                Ok(()) => println!("{what} saved to: {}", path.display()),
                Err(e) => eprintln!("WARNING: failed to generate the {what}: {e:#}"),
            }
        }
    }
    Ok(())
}

fn save(chart: &Chart, path: &Path) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let (w, h) = chart.default_size();
    chart.save(path, w, h)
}

/// `result.json` → `result.<suffix>.<ext>`: Python's `Path.with_suffix`, which replaces
/// the last extension (or adds one where there is none).
fn beside(result: &Path, suffix: &str, ext: &str) -> PathBuf {
    result.with_extension(format!("{suffix}.{ext}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_are_positive_and_ascending() {
        let t: ItlThresholds = "25,50".parse().unwrap();
        assert_eq!(t.ms, [25.0, 50.0]);
        assert_eq!("2, 5".parse::<ItlThresholds>().unwrap().ms, [2.0, 5.0]);
        assert!("50,25".parse::<ItlThresholds>().is_err());
        assert!("25,x".parse::<ItlThresholds>().is_err());
        assert!("0,5".parse::<ItlThresholds>().is_err());
    }

    #[test]
    fn figures_replace_the_result_extension() {
        assert_eq!(
            beside(Path::new("out/r-10.0qps.json"), "timeline", "png"),
            PathBuf::from("out/r-10.0qps.timeline.png")
        );
        assert_eq!(
            beside(Path::new("result"), "dataset_stats", "svg"),
            PathBuf::from("result.dataset_stats.svg")
        );
    }
}
