//! Line and scatter charts of (x, y) points: a sweep's curves, the Pareto front,
//! throughput over time.

use std::ops::Range;

use anyhow::Result;
use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

use super::style::{FONT, PALETTE, Rgb, draw_err, draw_legend};

/// How an axis maps values (vLLM's `--scale-x`/`--scale-y`: `linear` or `log`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scale {
    #[default]
    Linear,
    /// Base-10 logarithmic; points at or below 0 are left out.
    Log,
}

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeriesStyle {
    Line,
    Markers,
    LineMarkers,
    /// A line that holds each value until the next point (values per bucket).
    Step,
}

/// One named series of points, drawn in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub style: SeriesStyle,
    /// `None`: the series' turn in [`PALETTE`].
    pub color: Option<Rgb>,
}

/// A panel of series on one pair of axes.
#[derive(Debug, Clone, PartialEq)]
pub struct XyChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    pub x_scale: Scale,
    pub y_scale: Scale,
}

/// The range an axis shows: the values' own, padded by 5% (on a log axis, by a factor),
/// from 0 on a linear axis whose values are all positive and near it.
fn axis_range(values: impl Iterator<Item = f64>, scale: Scale) -> Range<f64> {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && (scale == Scale::Linear || *v > 0.0))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    match scale {
        _ if lo > hi => match scale {
            Scale::Linear => 0.0..1.0,
            Scale::Log => 1.0..10.0,
        },
        Scale::Linear => {
            let pad = if hi > lo {
                (hi - lo) * 0.05
            } else {
                hi.abs().max(1.0) * 0.05
            };
            let lo = if lo >= 0.0 && lo <= (hi - lo) {
                0.0
            } else {
                lo - pad
            };
            lo..hi + pad
        }
        Scale::Log => lo / 1.25..hi * 1.25,
    }
}

pub(super) fn draw<DB: DrawingBackend>(c: &XyChart, area: &DrawingArea<DB, Shift>) -> Result<()> {
    let xs = axis_range(
        c.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)),
        c.x_scale,
    );
    let ys = axis_range(
        c.series.iter().flat_map(|s| s.points.iter().map(|p| p.1)),
        c.y_scale,
    );
    let labels = (
        Labels::for_axis(&xs, c.x_scale),
        Labels::for_axis(&ys, c.y_scale),
    );
    match (c.x_scale, c.y_scale) {
        (Scale::Linear, Scale::Linear) => draw_on(c, area, xs, ys, labels),
        (Scale::Linear, Scale::Log) => draw_on(c, area, xs, ys.log_scale(), labels),
        (Scale::Log, Scale::Linear) => draw_on(c, area, xs.log_scale(), ys, labels),
        (Scale::Log, Scale::Log) => draw_on(c, area, xs.log_scale(), ys.log_scale(), labels),
    }
}

/// How an axis writes its tick labels: with as many decimals as its tick spacing needs,
/// so that neighbouring ticks never read the same (a narrow range around 13,100 gave
/// nine `13.1k`s when the value alone chose the digits).
#[derive(Debug, Clone, Copy)]
pub(super) struct Labels {
    /// About the spacing of plotters' ticks (it aims at ten per axis); `None` on a log
    /// axis, whose ticks are decades apart.
    step: Option<f64>,
}

impl Labels {
    pub(super) fn for_axis(range: &Range<f64>, scale: Scale) -> Labels {
        let span = range.end - range.start;
        Labels {
            step: (scale == Scale::Linear && span > 0.0).then(|| span / 10.0),
        }
    }

    pub(super) fn format(self, v: f64) -> String {
        let Some(step) = self.step else {
            return number(v);
        };
        let decimals = |unit: f64| (-(step / unit).log10().floor()).clamp(0.0, 9.0) as usize;
        if v.abs() >= 10_000.0 && step >= 100.0 {
            format!("{:.*}k", decimals(1000.0), v / 1000.0)
        } else {
            format!("{:.*}", decimals(1.0), v)
        }
    }
}

fn draw_on<DB, X, Y>(
    c: &XyChart,
    area: &DrawingArea<DB, Shift>,
    x: X,
    y: Y,
    (x_labels, y_labels): (Labels, Labels),
) -> Result<()>
where
    DB: DrawingBackend,
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .caption(&c.title, (FONT, 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(x, y)
        .map_err(draw_err)?;
    chart
        .configure_mesh()
        .x_desc(c.x_label.as_str())
        .y_desc(c.y_label.as_str())
        .label_style((FONT, 12))
        .x_label_formatter(&|v: &f64| x_labels.format(*v))
        .y_label_formatter(&|v: &f64| y_labels.format(*v))
        .draw()
        .map_err(draw_err)?;
    let keep = |(x, y): &(f64, f64)| {
        x.is_finite()
            && y.is_finite()
            && (c.x_scale == Scale::Linear || *x > 0.0)
            && (c.y_scale == Scale::Linear || *y > 0.0)
    };
    for (i, s) in c.series.iter().enumerate() {
        let color = s.color.unwrap_or(PALETTE[i % PALETTE.len()]).rgb();
        let style = s.style;
        let points: Vec<(f64, f64)> = s.points.iter().copied().filter(keep).collect();
        let line = match s.style {
            SeriesStyle::Step => step_points(&points),
            _ => points.clone(),
        };
        if matches!(
            s.style,
            SeriesStyle::Line | SeriesStyle::LineMarkers | SeriesStyle::Step
        ) {
            chart
                .draw_series(LineSeries::new(line, color.stroke_width(2)))
                .map_err(draw_err)?;
        }
        if matches!(s.style, SeriesStyle::Markers | SeriesStyle::LineMarkers) {
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))
                .map_err(draw_err)?;
        }
        // One legend entry per series, drawn as an empty series carrying the label.
        chart
            .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
            .map_err(draw_err)?
            .label(s.name.as_str())
            .legend(move |(x, y)| -> DynElement<'static, DB, (i32, i32)> {
                match style {
                    SeriesStyle::Markers => Circle::new((x + 8, y), 4, color.filled()).into_dyn(),
                    _ => PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                        .into_dyn(),
                }
            });
    }
    if c.series.len() > 1 {
        draw_legend(&mut chart.configure_series_labels(), 12)?;
    }
    Ok(())
}

/// The corners of a step line through `points` (each value held until the next x); the
/// last value is held for one more step of the last gap.
fn step_points(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2);
    for (i, &(x, y)) in points.iter().enumerate() {
        let next = match points.get(i + 1) {
            Some(&(nx, _)) => nx,
            None if i > 0 => x + (x - points[i - 1].0),
            None => x + 1.0,
        };
        out.push((x, y));
        out.push((next, y));
    }
    out
}

/// An axis label: few digits, no trailing zeros, thousands as `k`.
pub(super) fn number(v: f64) -> String {
    let a = v.abs();
    let s = if a >= 10_000.0 {
        format!("{:.1}k", v / 1000.0)
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    };
    if s.contains('.') && !s.ends_with('k') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}
