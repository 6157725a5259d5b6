//! Charts: a run's per-request timeline, its latency and length distributions, its
//! throughput over time, and a sweep's curves and Pareto front, as SVG or PNG.
//!
//! A [`Chart`] is plain data (what to draw), built by the functions below from
//! [`RequestTimes`] (a run's outcome, [`request_times_from_records`], or a detailed result
//! file, [`crate::results::request_times`]) or from a sweep's results ([`sweep`],
//! [`pareto::chart`]); [`Chart::to_svg`] and [`Chart::save`] draw it with `plotters`. Text is laid
//! out with an embedded DejaVu Sans (plotters' `ab_glyph` font path), so a PNG needs no
//! system fonts; SVG keeps text as `<text>` elements in the `sans-serif` family.

mod histogram;
pub mod pareto;
mod style;
pub mod sweep;
pub mod terminal;
mod timeline;
mod xy;

use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use plotters::coord::Shift;
use plotters::prelude::*;

pub use histogram::{Bins, bin};
pub use style::{PALETTE, Rgb};
pub use timeline::{TTFT_COLOR, itl_band, itl_band_colors, itl_band_labels};
pub use xy::{Scale, Series, SeriesStyle, XyChart};

use bench_core::metrics::PerRequest;
use style::{FONT, draw_err, register_font};

pub use crate::results::RequestTimes;

/// The charts' view of a run: one [`RequestTimes`] per request sent, in workload order,
/// lengths as the run's metrics counted them (`outcome.metrics.per_request`).
pub fn request_times_from_records(per_request: &PerRequest) -> Vec<RequestTimes> {
    let t0 = per_request
        .records
        .iter()
        .map(|r| r.start_time)
        .fold(f64::INFINITY, f64::min);
    per_request
        .records
        .iter()
        .zip(per_request.input_lens())
        .zip(&per_request.output_lens)
        .map(|((r, input_len), &output_len)| {
            // A request cancelled on purpose measured no answer either.
            let ok = r.succeeded();
            RequestTimes {
                start: r.start_time - t0,
                ttft: ok.then_some(r.ttft),
                itl: r.itl.clone(),
                latency: r.latency,
                ok,
                input_len: saturate(input_len),
                output_len: saturate(output_len),
            }
        })
        .collect()
}

fn saturate(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A figure ready to draw: see the module documentation.
#[derive(Debug, Clone)]
pub struct Chart {
    figure: Figure,
}

#[derive(Debug, Clone)]
enum Figure {
    Timeline(timeline::Timeline),
    Histogram(histogram::Histogram),
    StackedBars(histogram::StackedBars),
    Xy(XyChart),
    Grid {
        title: Option<String>,
        cols: usize,
        cells: Vec<Chart>,
    },
}

impl Chart {
    fn new(figure: Figure) -> Self {
        Chart { figure }
    }

    /// The chart as an SVG document of `width` by `height` pixels.
    pub fn to_svg(&self, width: u32, height: u32) -> Result<String> {
        register_font();
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
            root.fill(&WHITE).map_err(draw_err)?;
            self.draw(&root)?;
            root.present().map_err(draw_err)?;
        }
        Ok(svg)
    }

    /// Writes the chart to `path`, as SVG or PNG by its extension (`.svg`, `.png`).
    pub fn save(&self, path: &Path, width: u32, height: u32) -> Result<()> {
        register_font();
        match path.extension().and_then(|e| e.to_str()) {
            Some("svg") => {
                let svg = self.to_svg(width, height)?;
                std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))
            }
            Some("png") => {
                let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
                root.fill(&WHITE).map_err(draw_err)?;
                self.draw(&root)?;
                root.present()
                    .map_err(|e| anyhow!("writing {}: {e}", path.display()))
            }
            _ => bail!(
                "{}: a chart is saved as .svg or .png, not {:?}",
                path.display(),
                path.extension().unwrap_or_default()
            ),
        }
    }

    /// A size in pixels that suits the chart (a timeline grows with its requests, a grid
    /// with its cells), for callers with no size of their own.
    pub fn default_size(&self) -> (u32, u32) {
        match &self.figure {
            Figure::Timeline(t) => (1400, timeline::height_for(t)),
            Figure::Grid { cells, cols, .. } => {
                let cols = (*cols).max(1);
                let rows = cells.len().div_ceil(cols).max(1);
                let (w, h) = cells.first().map_or((640, 480), Chart::default_size);
                (
                    (w * cols as u32).min(3200),
                    (h * rows as u32 + 40).min(3200),
                )
            }
            _ => (900, 560),
        }
    }

    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<()> {
        match &self.figure {
            Figure::Timeline(t) => timeline::draw(t, area),
            Figure::Histogram(h) => histogram::draw(h, area),
            Figure::StackedBars(b) => histogram::draw_stacked(b, area),
            Figure::Xy(c) => xy::draw(c, area),
            Figure::Grid { title, cols, cells } => {
                let area = match title {
                    Some(t) => area.titled(t, (FONT, 22)).map_err(draw_err)?,
                    None => area.clone(),
                };
                let cols = (*cols).max(1);
                let rows = cells.len().div_ceil(cols).max(1);
                for (cell, sub) in cells.iter().zip(area.split_evenly((rows, cols))) {
                    cell.draw(&sub)?;
                }
                Ok(())
            }
        }
    }
}

/// vLLM's `--plot-timeline` figure: one row per request (the first sent at the top), from
/// its send to its first token (TTFT), then one segment per output chunk coloured by
/// which band of `itl_thresholds_ms` (ascending, milliseconds) its gap falls in; a failed
/// request is one grey bar from send to its end.
pub fn timeline(requests: &[RequestTimes], itl_thresholds_ms: &[f64]) -> Chart {
    Chart::new(Figure::Timeline(timeline::Timeline::build(
        requests,
        itl_thresholds_ms,
    )))
}

/// The distribution of `values` in `bins` equal bins over their range.
pub fn histogram(title: &str, x_label: &str, values: &[f64], bins: usize) -> Chart {
    colored_histogram(title, x_label, values, bins, PALETTE[0])
}

fn colored_histogram(title: &str, x_label: &str, values: &[f64], bins: usize, color: Rgb) -> Chart {
    Chart::new(Figure::Histogram(histogram::Histogram {
        title: title.to_string(),
        x_label: x_label.to_string(),
        bins: bin(values, bins),
        color,
    }))
}

/// vLLM's `--plot-dataset-stats` figure: the prompt, output and total token histograms
/// (30 bins each, as vLLM's; blue, orange and green) and the tokens of each request
/// stacked (prompt blue, output orange).
pub fn dataset_stats(requests: &[RequestTimes]) -> Chart {
    let prompt: Vec<f64> = requests.iter().map(|r| f64::from(r.input_len)).collect();
    let output: Vec<f64> = requests.iter().map(|r| f64::from(r.output_len)).collect();
    let total: Vec<f64> = prompt.iter().zip(&output).map(|(p, o)| p + o).collect();
    let stacked = histogram::StackedBars {
        title: "Tokens per Request (Stacked)".into(),
        bars: requests
            .iter()
            .map(|r| (f64::from(r.input_len), f64::from(r.output_len)))
            .collect(),
    };
    grid(
        Some("Dataset statistics"),
        2,
        vec![
            histogram(
                "Prompt Tokens Distribution",
                "Prompt Tokens",
                &prompt,
                DATASET_BINS,
            ),
            colored_histogram(
                "Output Tokens Distribution",
                "Output Tokens",
                &output,
                DATASET_BINS,
                PALETTE[1],
            ),
            colored_histogram(
                "Total Tokens Distribution",
                "Total Tokens (Prompt + Output)",
                &total,
                DATASET_BINS,
                PALETTE[2],
            ),
            Chart::new(Figure::StackedBars(stacked)),
        ],
    )
}

/// The bins of each `--plot-dataset-stats` histogram (vLLM's).
pub const DATASET_BINS: usize = 30;

/// Output tokens per second and requests in flight over the run, in buckets of
/// `bucket_s` seconds: two panels sharing the time axis.
pub fn throughput_over_time(requests: &[RequestTimes], bucket_s: f64) -> Chart {
    let (tokens, in_flight) = throughput_series(requests, bucket_s);
    let panel = |title: &str, y_label: &str, points: Vec<(f64, f64)>, color: Rgb| {
        Chart::new(Figure::Xy(XyChart {
            title: title.to_string(),
            x_label: "Seconds since the first request".into(),
            y_label: y_label.to_string(),
            series: vec![Series {
                name: y_label.to_string(),
                points,
                style: SeriesStyle::Step,
                color: Some(color),
            }],
            x_scale: Scale::Linear,
            y_scale: Scale::Linear,
        }))
    };
    grid(
        None,
        1,
        vec![
            panel("Output throughput", "Output tokens/s", tokens, PALETTE[0]),
            panel("Concurrency", "Requests in flight", in_flight, PALETTE[1]),
        ],
    )
}

/// Points of a series, (x, y).
pub type Points = Vec<(f64, f64)>;

/// The two series of [`throughput_over_time`], one point per bucket at its start:
/// output tokens per second (each chunk of a successful request carries an equal share
/// of its output tokens, at the time it arrived) and the mean number of requests in
/// flight over the bucket.
pub fn throughput_series(requests: &[RequestTimes], bucket_s: f64) -> (Points, Points) {
    let bucket_s = if bucket_s > 0.0 { bucket_s } else { 1.0 };
    let end = requests
        .iter()
        .map(|r| r.start + r.latency.max(0.0))
        .fold(0.0, f64::max);
    let n = ((end / bucket_s).ceil() as usize).max(1);
    let mut tokens = vec![0.0; n];
    let mut busy = vec![0.0; n];
    let bucket_of = |t: f64| ((t / bucket_s) as usize).min(n - 1);
    for r in requests {
        if let Some(ttft) = r.ttft.filter(|_| r.ok) {
            let per_chunk = f64::from(r.output_len) / (r.itl.len() + 1) as f64;
            let mut t = r.start + ttft;
            tokens[bucket_of(t)] += per_chunk;
            for gap in &r.itl {
                t += gap;
                tokens[bucket_of(t)] += per_chunk;
            }
        }
        // The request's share of each bucket it overlaps.
        let (from, to) = (r.start, r.start + r.latency.max(0.0));
        for (i, b) in busy.iter_mut().enumerate().skip(bucket_of(from)) {
            let (lo, hi) = (i as f64 * bucket_s, (i + 1) as f64 * bucket_s);
            if lo >= to {
                break;
            }
            *b += (hi.min(to) - lo.max(from)).max(0.0) / bucket_s;
        }
    }
    let at = |i: usize| i as f64 * bucket_s;
    (
        tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (at(i), t / bucket_s))
            .collect(),
        busy.iter().enumerate().map(|(i, b)| (at(i), *b)).collect(),
    )
}

/// One panel of curves: `y` against `x`, one [`Series`] per group (a sweep plot's cell).
pub fn curves(chart: XyChart) -> Chart {
    Chart::new(Figure::Xy(chart))
}

/// Charts laid out in a grid of `cols` columns, under an optional title.
pub fn grid(title: Option<&str>, cols: usize, cells: Vec<Chart>) -> Chart {
    Chart::new(Figure::Grid {
        title: title.map(str::to_string),
        cols,
        cells,
    })
}

#[cfg(test)]
mod tests;
