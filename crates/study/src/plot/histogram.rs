//! Histograms (equal bins over the values' range, as numpy's) and stacked bars.

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::style::{FONT, PALETTE, Rgb, draw_err, draw_legend};
use super::xy::{Labels, Scale, number};

/// Counts of values in equal bins: bin `i` is `[lo + i·w, lo + (i+1)·w)` with `w = (hi -
/// lo) / counts.len()`, the last bin closed (numpy's `histogram`).
#[derive(Debug, Clone, PartialEq)]
pub struct Bins {
    pub lo: f64,
    pub hi: f64,
    pub counts: Vec<u64>,
}

impl Bins {
    pub fn width(&self) -> f64 {
        (self.hi - self.lo) / self.counts.len().max(1) as f64
    }
}

/// Bins the finite `values` into `bins` (at least 1) equal bins over their range; when
/// they are all equal the range is the value ± 0.5 (numpy's), with none it is 0 to 1.
pub fn bin(values: &[f64], bins: usize) -> Bins {
    let bins = bins.max(1);
    let finite = values.iter().copied().filter(|v| v.is_finite());
    let (min, max) = finite
        .clone()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    let (lo, hi) = match (min, max) {
        (lo, hi) if lo > hi => (0.0, 1.0),
        (lo, hi) if lo == hi => (lo - 0.5, hi + 0.5),
        range => range,
    };
    let mut counts = vec![0; bins];
    let width = (hi - lo) / bins as f64;
    for v in finite {
        let i = (((v - lo) / width) as usize).min(bins - 1);
        counts[i] += 1;
    }
    Bins { lo, hi, counts }
}

#[derive(Debug, Clone)]
pub(super) struct Histogram {
    pub(super) title: String,
    pub(super) x_label: String,
    pub(super) bins: Bins,
    pub(super) color: Rgb,
}

/// One bar per item, its two parts stacked (prompt then output tokens).
#[derive(Debug, Clone)]
pub(super) struct StackedBars {
    pub(super) title: String,
    pub(super) bars: Vec<(f64, f64)>,
}

pub(super) fn draw<DB: DrawingBackend>(h: &Histogram, area: &DrawingArea<DB, Shift>) -> Result<()> {
    let top = h.bins.counts.iter().copied().max().unwrap_or(0).max(1) as f64 * 1.05;
    let x_labels = Labels::for_axis(&(h.bins.lo..h.bins.hi), Scale::Linear);
    let y_labels = Labels::for_axis(&(0.0..top), Scale::Linear);
    let mut chart = ChartBuilder::on(area)
        .caption(&h.title, (FONT, 18))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(50)
        .build_cartesian_2d(h.bins.lo..h.bins.hi, 0.0..top)
        .map_err(draw_err)?;
    chart
        .configure_mesh()
        .x_desc(h.x_label.as_str())
        .y_desc("Frequency")
        .label_style((FONT, 12))
        .x_label_formatter(&|v: &f64| x_labels.format(*v))
        .y_label_formatter(&|v: &f64| y_labels.format(*v))
        .draw()
        .map_err(draw_err)?;
    let w = h.bins.width();
    let color = h.color.rgb();
    chart
        .draw_series(
            h.bins
                .counts
                .iter()
                .enumerate()
                .filter(|(_, c)| **c > 0)
                .map(|(i, &c)| {
                    let x0 = h.bins.lo + i as f64 * w;
                    Rectangle::new(
                        [(x0 + w * 0.04, 0.0), (x0 + w * 0.96, c as f64)],
                        color.filled(),
                    )
                }),
        )
        .map_err(draw_err)?;
    Ok(())
}

pub(super) fn draw_stacked<DB: DrawingBackend>(
    b: &StackedBars,
    area: &DrawingArea<DB, Shift>,
) -> Result<()> {
    let top = b
        .bars
        .iter()
        .map(|(p, o)| p + o)
        .fold(0.0, f64::max)
        .max(1.0)
        * 1.05;
    let n = b.bars.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(&b.title, (FONT, 18))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(50)
        .build_cartesian_2d(-0.5..n - 0.5, 0.0..top)
        .map_err(draw_err)?;
    chart
        .configure_mesh()
        .x_desc("Request ID")
        .y_desc("Tokens")
        .label_style((FONT, 12))
        .x_label_formatter(&|v: &f64| number(*v))
        .y_label_formatter(&|v: &f64| number(*v))
        .draw()
        .map_err(draw_err)?;
    let parts = [("Prompt Tokens", PALETTE[0]), ("Output Tokens", PALETTE[1])];
    for (part, (label, color)) in parts.into_iter().enumerate() {
        let color = color.rgb();
        chart
            .draw_series(b.bars.iter().enumerate().map(|(i, &(p, o))| {
                let (y0, y1) = if part == 0 { (0.0, p) } else { (p, p + o) };
                let x = i as f64;
                Rectangle::new([(x - 0.4, y0), (x + 0.4, y1)], color.filled())
            }))
            .map_err(draw_err)?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    draw_legend(&mut chart.configure_series_labels(), 12)
}
