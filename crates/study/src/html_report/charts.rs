//! The report's charts, drawn by [`crate::plot`] as inline SVG: latency distributions
//! (histograms of one result; cumulative distributions, one line per result, of several),
//! the timeline of each result, throughput and concurrency over time, and for a sweep the
//! latency-throughput curves and the Pareto front.

use std::fmt::Write;
use std::path::PathBuf;

use anyhow::Result;

use super::html::escape;
use super::run::ReportRun;
use crate::plot::{self, Chart, PALETTE, RequestTimes, Scale, Series, SeriesStyle, XyChart, sweep};
use crate::results::number;

/// A chart's size in the page, in SVG pixels (the page scales it to its column).
const HALF: (u32, u32) = (620, 400);
const WIDE: (u32, u32) = (1240, 420);
/// Throughput over time: two panels, one above the other.
const TALL: (u32, u32) = (1240, 640);
/// Bins of each latency histogram.
const HISTOGRAM_BINS: usize = 40;
/// Points of each cumulative distribution line, at most (quantiles of the values).
const CDF_POINTS: usize = 400;

/// One figure of the page.
pub struct Figure {
    /// Its element id (`dist-ttft`, `timeline-0`, ...).
    pub id: String,
    pub caption: String,
    /// A note under the caption.
    pub note: String,
    /// The result it belongs to, when it shows one only: the page hides it with the
    /// result's checkbox.
    pub run: Option<usize>,
    /// Whether it spans the page's width.
    pub wide: bool,
    pub svg: String,
}

impl Figure {
    /// `chart` drawn `size` SVG pixels large.
    fn drawn(id: &str, caption: &str, chart: &Chart, size: (u32, u32)) -> Result<Figure> {
        Ok(Figure {
            id: id.into(),
            caption: caption.into(),
            note: String::new(),
            run: None,
            wide: size.0 > HALF.0,
            svg: chart.to_svg(size.0, size.1)?,
        })
    }

    fn of_run(mut self, run: usize, name: &str) -> Figure {
        self.run = Some(run);
        self.note = name.to_string();
        self
    }

    /// The figure's markup (the SVG is plotters' output, whose text it escapes).
    pub fn html(&self, out: &mut String) {
        let mut class = String::from("chart");
        if self.wide {
            class.push_str(" wide");
        }
        if let Some(run) = self.run {
            let _ = write!(class, " run-{run}");
        }
        // The chart draws its own title: the caption names it for screen readers and
        // shows only the note.
        let _ = write!(
            out,
            "<figure class=\"{class}\" id=\"{}\" aria-label=\"{}\">",
            escape(&self.id),
            escape(&self.caption),
        );
        if !self.note.is_empty() {
            let _ = write!(out, "<figcaption>{}</figcaption>", escape(&self.note));
        }
        let _ = write!(out, "{}</figure>", self.svg);
    }
}

/// A latency metric of the distributions: its id, name, and each request's values in
/// milliseconds (successful requests only, as vLLM's metrics).
struct Metric {
    id: &'static str,
    name: &'static str,
    values: fn(&[RequestTimes]) -> Vec<f64>,
}

const METRICS: [Metric; 4] = [
    Metric {
        id: "ttft",
        name: "Time to first token (ms)",
        values: ttfts,
    },
    Metric {
        id: "tpot",
        name: "Time per output token (ms)",
        values: tpots,
    },
    Metric {
        id: "itl",
        name: "Inter-token latency (ms)",
        values: itls,
    },
    Metric {
        id: "e2el",
        name: "End-to-end latency (ms)",
        values: e2els,
    },
];

fn ttfts(times: &[RequestTimes]) -> Vec<f64> {
    times
        .iter()
        .filter_map(|r| r.ttft)
        .map(|t| t * 1e3)
        .collect()
}

/// vLLM's TPOT: after the first token, the time per further output token, of requests
/// with more than one.
fn tpots(times: &[RequestTimes]) -> Vec<f64> {
    times
        .iter()
        .filter(|r| r.ok && r.output_len > 1)
        .filter_map(|r| Some((r.latency - r.ttft?) / f64::from(r.output_len - 1) * 1e3))
        .collect()
}

fn itls(times: &[RequestTimes]) -> Vec<f64> {
    times
        .iter()
        .filter(|r| r.ok)
        .flat_map(|r| r.itl.iter().map(|t| t * 1e3))
        .collect()
}

fn e2els(times: &[RequestTimes]) -> Vec<f64> {
    times
        .iter()
        .filter(|r| r.ok)
        .map(|r| r.latency * 1e3)
        .collect()
}

/// The colour of result `i`, as the page's swatches show it.
pub fn color(i: usize) -> plot::Rgb {
    PALETTE[i % PALETTE.len()]
}

/// The empirical cumulative distribution of `values`: at most [`CDF_POINTS`] points
/// (value, share of values at or below it).
fn cdf(mut values: Vec<f64>) -> Vec<(f64, f64)> {
    values.retain(|v| v.is_finite());
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return Vec::new();
    }
    let step = n.div_ceil(CDF_POINTS).max(1);
    let mut points: Vec<(f64, f64)> = (step - 1..n)
        .step_by(step)
        .map(|i| (values[i], (i + 1) as f64 / n as f64))
        .collect();
    if points.last().is_some_and(|p| p.1 < 1.0) {
        points.push((values[n - 1], 1.0));
    }
    points.insert(0, (values[0], 0.0));
    points
}

/// The latency distributions of the results that have per-request times: a histogram
/// of each metric for one, one cumulative line per result for several.
pub fn distributions(runs: &[(usize, &ReportRun, &[RequestTimes])]) -> Result<Vec<Figure>> {
    let mut figures = Vec::new();
    for metric in &METRICS {
        let id = format!("dist-{}", metric.id);
        let figure = match runs {
            [(i, run, times)] => {
                let values = (metric.values)(times);
                let chart = plot::histogram(metric.name, metric.name, &values, HISTOGRAM_BINS);
                Figure::drawn(&id, metric.name, &chart, HALF)?.of_run(*i, &run.name)
            }
            _ => {
                let series = runs
                    .iter()
                    .map(|(i, run, times)| Series {
                        name: run.name.clone(),
                        points: cdf((metric.values)(times)),
                        style: SeriesStyle::Line,
                        color: Some(color(*i)),
                    })
                    .collect();
                let chart = plot::curves(XyChart {
                    title: metric.name.into(),
                    x_label: metric.name.into(),
                    y_label: "Share of requests at or below".into(),
                    series,
                    x_scale: Scale::Linear,
                    y_scale: Scale::Linear,
                });
                let mut f = Figure::drawn(&id, metric.name, &chart, HALF)?;
                f.note = "cumulative, one line per result".into();
                f
            }
        };
        figures.push(figure);
    }
    Ok(figures)
}

/// Each result's timeline (vLLM's `--plot-timeline`), with the ITL bands of
/// `itl_thresholds_ms`.
pub fn timelines(
    runs: &[(usize, &ReportRun, &[RequestTimes])],
    itl_thresholds_ms: &[f64],
) -> Result<Vec<Figure>> {
    runs.iter()
        .map(|(i, run, times)| {
            let chart = plot::timeline(times, itl_thresholds_ms);
            let size = chart.default_size();
            Ok(
                Figure::drawn(&format!("timeline-{i}"), "Timeline", &chart, size)?
                    .of_run(*i, &run.name),
            )
        })
        .collect()
}

/// About this many buckets over the longest run, of a round width.
const BUCKETS: f64 = 60.0;

/// The bucket width of throughput over time: the round width (1, 2 or 5 times a power
/// of ten seconds) that gives [`BUCKETS`] buckets or fewer over `seconds`.
fn bucket_width(seconds: f64) -> f64 {
    let raw = (seconds / BUCKETS).max(1e-3);
    let decade = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * decade)
        .find(|w| *w >= raw)
        .unwrap_or(10.0 * decade)
}

/// Output tokens per second and requests in flight over time: the two panels of one
/// result, or each overlaid with one line per result.
pub fn throughput(runs: &[(usize, &ReportRun, &[RequestTimes])]) -> Result<Vec<Figure>> {
    let longest = runs
        .iter()
        .flat_map(|(_, _, times)| times.iter().map(|r| r.start + r.latency.max(0.0)))
        .fold(0.0, f64::max);
    let bucket = bucket_width(longest);
    let caption = "Throughput over time";
    let note = format!("{} s buckets", plot_number(bucket));
    if let [(i, run, times)] = runs {
        let chart = plot::throughput_over_time(times, bucket);
        let mut f = Figure::drawn("throughput", caption, &chart, TALL)?.of_run(*i, &run.name);
        f.note = format!("{}, {note}", f.note);
        return Ok(vec![f]);
    }
    let (mut tokens, mut in_flight) = (Vec::new(), Vec::new());
    for (i, run, times) in runs {
        let series = |points| Series {
            name: run.name.clone(),
            points,
            style: SeriesStyle::Step,
            color: Some(color(*i)),
        };
        let (t, c) = plot::throughput_series(times, bucket);
        tokens.push(series(t));
        in_flight.push(series(c));
    }
    let panel = |id: &str, title: &str, y_label: &str, series: Vec<Series>| -> Result<Figure> {
        let chart = plot::curves(XyChart {
            title: title.into(),
            x_label: "Seconds since the first request".into(),
            y_label: y_label.into(),
            series,
            x_scale: Scale::Linear,
            y_scale: Scale::Linear,
        });
        let mut f = Figure::drawn(id, title, &chart, WIDE)?;
        f.note = note.clone();
        Ok(f)
    };
    Ok(vec![
        panel(
            "throughput",
            "Output throughput over time",
            "Output tokens/s",
            tokens,
        )?,
        panel(
            "concurrency",
            "Concurrency over time",
            "Requests in flight",
            in_flight,
        )?,
    ])
}

/// A number as an axis shows it: no trailing zeros.
fn plot_number(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The curves' x axis: the measured request throughput (vLLM's `sweep plot` default).
const CURVE_X: &str = "request_throughput";
/// The curves' y axes, the first [`MAX_CURVES`] every result holds (vLLM's default first).
const CURVE_Y: [(&str, &str); 6] = [
    ("p99_e2el_ms", "P99 E2EL (ms)"),
    ("p99_ttft_ms", "P99 TTFT (ms)"),
    ("median_ttft_ms", "Median TTFT (ms)"),
    ("p99_tpot_ms", "P99 TPOT (ms)"),
    ("median_tpot_ms", "Median TPOT (ms)"),
    ("p99_itl_ms", "P99 ITL (ms)"),
];
const MAX_CURVES: usize = 4;

/// The results as `bench sweep plot` reads a sweep's runs: their single values (the
/// per-request lists left out), named by their source.
fn sweep_runs(runs: &[ReportRun]) -> Vec<sweep::Run> {
    runs.iter()
        .map(|r| sweep::Run {
            source: PathBuf::from(&r.source),
            data: r
                .result
                .iter()
                .filter(|(_, v)| !v.is_array() && !v.is_object())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        })
        .collect()
}

/// A sweep's latency-throughput curves, drawn as `bench sweep plot` draws them: each y
/// metric every result holds against the measured request throughput, one line per
/// combination of `curve_by` (the parameters every result holds).
pub fn curves(runs: &[ReportRun], curve_by: &[String]) -> Result<Vec<Figure>> {
    let sweep_runs = sweep_runs(runs);
    let everywhere = |key: &str| {
        sweep_runs.iter().all(|r| {
            r.data
                .get(key)
                .and_then(number)
                .is_some_and(|v| !v.is_nan())
        })
    };
    if !everywhere(CURVE_X) {
        return Ok(Vec::new());
    }
    let curve_by: Vec<String> = curve_by
        .iter()
        .filter(|k| sweep_runs.iter().all(|r| r.data.contains_key(*k)))
        .cloned()
        .collect();
    let mut figures = Vec::new();
    for (key, label) in CURVE_Y
        .iter()
        .filter(|(key, _)| everywhere(key))
        .take(MAX_CURVES)
    {
        let spec = sweep::PlotSpec {
            fig_dir: PathBuf::new(),
            fig_by: Vec::new(),
            row_by: Vec::new(),
            col_by: Vec::new(),
            curve_by: curve_by.clone(),
            var_x: CURVE_X.into(),
            var_y: (*key).into(),
            filter_by: Vec::new(),
            bin_by: Vec::new(),
            scale_x: Scale::Linear,
            scale_y: Scale::Linear,
            fig_name: String::new(),
            formats: Vec::new(),
        };
        for plan in sweep::plan(&sweep_runs, &spec)? {
            let chart = sweep::chart(&plan, &spec)?;
            let mut f = Figure::drawn(&format!("curve-{key}"), label, &chart, HALF)?;
            f.note = format!("{label} against request throughput (req/s)");
            figures.push(f);
        }
    }
    Ok(figures)
}

/// The Pareto front of the results, as `bench sweep plot_pareto` finds it (vLLM's
/// `plot_pareto`: users from `max_concurrency`, GPUs from the parallel sizes): output
/// tokens per second per user against per GPU, every result a point, the front a line.
/// `None` when fewer than two results have the figures.
pub fn pareto(runs: &[ReportRun]) -> Result<Option<Figure>> {
    let (points, _) = plot::pareto::prepare(&sweep_runs(runs), Some("max_concurrency"), None)?;
    if points.len() < 2 {
        return Ok(None);
    }
    let points: Vec<(f64, f64)> = points
        .iter()
        .map(|p| (p.tokens_per_user, p.tokens_per_gpu))
        .collect();
    let chart = plot::pareto::chart(&points);
    let mut f = Figure::drawn("pareto", "Pareto front", &chart, HALF)?;
    f.note = "output tokens/s per user against per GPU".into();
    Ok(Some(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(ttft: f64, itl: &[f64], output_len: u32) -> RequestTimes {
        RequestTimes {
            start: 0.0,
            ttft: Some(ttft),
            itl: itl.to_vec(),
            latency: ttft + itl.iter().sum::<f64>(),
            ok: true,
            input_len: 8,
            output_len,
        }
    }

    #[test]
    fn the_distributions_take_vllms_definitions() {
        let mut failed = request(0.5, &[], 0);
        failed.ok = false;
        failed.ttft = None;
        let times = [request(0.1, &[0.02, 0.04], 3), request(0.2, &[], 1), failed];
        assert_eq!(ttfts(&times), [100.0, 200.0]);
        // TPOT of requests with more than one token: (latency - ttft) / (tokens - 1).
        assert_eq!(tpots(&times).len(), 1);
        assert!((tpots(&times)[0] - 30.0).abs() < 1e-9);
        assert_eq!(itls(&times).len(), 2);
        assert_eq!(e2els(&times).len(), 2);
    }

    #[test]
    fn a_cumulative_line_rises_from_0_to_1_over_the_values() {
        let points = cdf(vec![3.0, 1.0, f64::NAN, 2.0]);
        assert_eq!(
            points,
            [(1.0, 0.0), (1.0, 1.0 / 3.0), (2.0, 2.0 / 3.0), (3.0, 1.0)]
        );
        let many = cdf((0..10_000).map(f64::from).collect());
        assert!(many.len() <= CDF_POINTS + 2, "{}", many.len());
        assert_eq!(many.last(), Some(&(9999.0, 1.0)));
        assert!(
            many.windows(2)
                .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1)
        );
        assert!(cdf(Vec::new()).is_empty());
    }

    #[test]
    fn throughput_buckets_are_round_and_at_most_60_over_the_run() {
        for (seconds, width) in [
            (26.0, 0.5),
            (39.0, 1.0),
            (0.5, 0.01),
            (600.0, 10.0),
            (61.0, 2.0),
        ] {
            assert_eq!(bucket_width(seconds), width, "{seconds} s");
            assert!(seconds / width <= BUCKETS);
        }
    }

    #[test]
    fn a_figure_of_one_result_is_hidden_with_it_and_its_note_escaped() {
        let chart = plot::histogram("t", "x", &[1.0, 2.0], 2);
        let figure = Figure::drawn("dist-ttft", "TTFT", &chart, HALF)
            .unwrap()
            .of_run(3, "<b>run</b>");
        let mut html = String::new();
        figure.html(&mut html);
        assert!(
            html.starts_with("<figure class=\"chart run-3\" id=\"dist-ttft\" aria-label=\"TTFT\">")
        );
        assert!(html.contains("<figcaption>&lt;b&gt;run&lt;/b&gt;</figcaption><svg"));
        assert!(html.ends_with("</svg>\n</figure>"), "{html}");
    }
}
