//! The per-request timeline (vLLM's `--plot-timeline`): rows of segments, coloured by
//! what each segment is (time to first token, a chunk's gap in an ITL band, a failure).

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::style::{FONT, Rgb, draw_err, draw_legend};
use crate::results::RequestTimes;

/// vLLM's colour of the TTFT segments (plotly's first colour).
pub const TTFT_COLOR: Rgb = Rgb(0x63, 0x6e, 0xfa);
/// vLLM's colours of the ITL bands (green, orange, red), then more for extra thresholds.
const BAND_COLORS: [Rgb; 5] = [
    Rgb(0x10, 0x96, 0x18),
    Rgb(0xff, 0x7f, 0x0e),
    Rgb(0xd6, 0x27, 0x28),
    Rgb(0x94, 0x67, 0xbd),
    Rgb(0x00, 0x00, 0x00),
];
/// A failed request's bar.
const FAILED_COLOR: Rgb = Rgb(0x9e, 0x9e, 0x9e);
/// Above this many segments (after merging adjacent ones of the same band) the timeline
/// is coarsened into cells of time (see [`coarsen`]): segments are narrower than a pixel
/// by then, and an SVG of every token would run to tens of megabytes.
const MAX_SEGMENTS: usize = 50_000;

/// The band of an inter-token gap of `itl_s` seconds: how many of the thresholds
/// (ascending, milliseconds) it reaches. With vLLM's 25 and 50: 0 below 25 ms, 1 from 25
/// to below 50 ms, 2 from 50 ms.
pub fn itl_band(itl_s: f64, thresholds_ms: &[f64]) -> usize {
    thresholds_ms
        .iter()
        .take_while(|&&t| itl_s * 1000.0 >= t)
        .count()
}

/// The legend labels of the bands, as vLLM writes them (`ITL < 25ms`, `25ms ≤ ITL < 50ms`,
/// `ITL ≥ 50ms`).
pub fn itl_band_labels(thresholds_ms: &[f64]) -> Vec<String> {
    let ms = |t: f64| format!("{}ms", trim(t));
    let mut labels = Vec::with_capacity(thresholds_ms.len() + 1);
    for (i, &t) in thresholds_ms.iter().enumerate() {
        labels.push(match i {
            0 => format!("ITL < {}", ms(t)),
            _ => format!("{} ≤ ITL < {}", ms(thresholds_ms[i - 1]), ms(t)),
        });
    }
    match thresholds_ms.last() {
        Some(&t) => labels.push(format!("ITL ≥ {}", ms(t))),
        None => labels.push("ITL".into()),
    }
    labels
}

/// The colour of each band (one more than the thresholds).
pub fn itl_band_colors(thresholds_ms: &[f64]) -> Vec<Rgb> {
    (0..=thresholds_ms.len())
        .map(|i| BAND_COLORS[i.min(BAND_COLORS.len() - 1)])
        .collect()
}

/// A threshold as a label writes it: `25`, `2.5`.
fn trim(t: f64) -> String {
    let s = format!("{t:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// What a segment is; bands order by latency (a higher band is a slower gap).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Kind {
    Ttft,
    Band(usize),
    Failed,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Segment {
    pub(super) start: f64,
    pub(super) end: f64,
    pub(super) kind: Kind,
}

#[derive(Debug, Clone)]
pub(super) struct Timeline {
    /// One row per request, in workload order.
    pub(super) rows: Vec<Vec<Segment>>,
    pub(super) labels: Vec<String>,
    pub(super) colors: Vec<Rgb>,
    /// The latest segment end, seconds.
    pub(super) end: f64,
}

impl Timeline {
    pub(super) fn build(requests: &[RequestTimes], thresholds_ms: &[f64]) -> Self {
        let mut rows: Vec<Vec<Segment>> = requests
            .iter()
            .map(|r| segments(r, thresholds_ms))
            .collect();
        // Adjacent gaps in the same band draw as one bar whether merged or not; merged,
        // a steady run's SVG holds a few rects per request instead of one per token.
        rows.iter_mut().for_each(|row| coarsen(row, 0.0));
        let count = |rows: &[Vec<Segment>]| rows.iter().map(Vec::len).sum::<usize>();
        if count(&rows) > MAX_SEGMENTS {
            // Cells so wide that the rows' chunks fit the budget whatever their bands.
            let span: f64 = rows
                .iter()
                .filter_map(|r| Some(r.last()?.end - r.first()?.start))
                .sum();
            let cell = span / (MAX_SEGMENTS - rows.len()).max(1) as f64;
            rows.iter_mut().for_each(|row| coarsen(row, cell));
        }
        let end = rows.iter().flatten().map(|s| s.end).fold(0.0, f64::max);
        Timeline {
            rows,
            labels: itl_band_labels(thresholds_ms),
            colors: itl_band_colors(thresholds_ms),
            end,
        }
    }
}

/// A request's segments: send to first token, then one per chunk gap.
fn segments(r: &RequestTimes, thresholds_ms: &[f64]) -> Vec<Segment> {
    let Some(ttft) = r.ttft.filter(|_| r.ok) else {
        return vec![Segment {
            start: r.start,
            end: r.start + r.latency.max(0.0),
            kind: Kind::Failed,
        }];
    };
    let mut out = Vec::with_capacity(r.itl.len() + 1);
    let mut t = r.start + ttft;
    out.push(Segment {
        start: r.start,
        end: t,
        kind: Kind::Ttft,
    });
    for &gap in &r.itl {
        out.push(Segment {
            start: t,
            end: t + gap,
            kind: Kind::Band(itl_band(gap, thresholds_ms)),
        });
        t += gap;
    }
    out
}

/// Merges a row's chunk segments: adjacent ones of the same kind always, and all those
/// that start in the same `cell` seconds (0: no cells) into one of the worst band among
/// them, so that a slow token stays visible however coarse the drawing.
fn coarsen(row: &mut Vec<Segment>, cell: f64) {
    let cell_of = |s: &Segment| match cell > 0.0 {
        true => Some((s.start / cell) as u64),
        false => None,
    };
    let mut merged: Vec<Segment> = Vec::with_capacity(row.len());
    for s in row.drain(..) {
        match merged.last_mut() {
            Some(last) if last.kind == s.kind => last.end = s.end,
            Some(last)
                if matches!((last.kind, s.kind), (Kind::Band(_), Kind::Band(_)))
                    && cell_of(last).is_some_and(|c| Some(c) == cell_of(&s)) =>
            {
                last.end = s.end;
                last.kind = last.kind.max(s.kind);
            }
            _ => merged.push(s),
        }
    }
    *row = merged;
}

/// The height in pixels that gives each row a few pixels, within reason.
pub(super) fn height_for(t: &Timeline) -> u32 {
    (160 + 14 * t.rows.len() as u32).clamp(480, 3000)
}

pub(super) fn draw<DB: DrawingBackend>(t: &Timeline, area: &DrawingArea<DB, Shift>) -> Result<()> {
    let n = t.rows.len().max(1) as f64;
    let x_end = if t.end > 0.0 { t.end * 1.02 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption("Request timeline", (FONT, 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_end, 0.0..n)
        .map_err(draw_err)?;
    let rows = t.rows.len();
    chart
        .configure_mesh()
        .x_desc("Time (s)")
        .y_desc("Request")
        .label_style((FONT, 13))
        .y_label_formatter(&|v: &f64| {
            // Row i spans [n - i - 1, n - i]: the first request is at the top.
            let i = (rows as f64 - v).round();
            if i >= 0.0 {
                format!("{i}")
            } else {
                String::new()
            }
        })
        .disable_y_mesh()
        .draw()
        .map_err(draw_err)?;

    let mut kinds = vec![Kind::Ttft];
    kinds.extend((0..t.colors.len()).map(Kind::Band));
    kinds.push(Kind::Failed);
    for kind in kinds {
        let (color, label) = match kind {
            Kind::Ttft => (TTFT_COLOR, "TTFT".to_string()),
            Kind::Band(b) => (t.colors[b], t.labels[b].clone()),
            Kind::Failed => (FAILED_COLOR, "failed".to_string()),
        };
        let rects: Vec<_> = t
            .rows
            .iter()
            .enumerate()
            .flat_map(|(i, row)| {
                let y0 = n - i as f64 - 1.0;
                row.iter().filter(move |s| s.kind == kind).map(move |s| {
                    Rectangle::new(
                        [(s.start, y0 + 0.1), (s.end, y0 + 0.9)],
                        color.rgb().filled(),
                    )
                })
            })
            .collect();
        if rects.is_empty() {
            continue;
        }
        chart
            .draw_series(rects)
            .map_err(draw_err)?
            .label(label)
            .legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.rgb().filled())
            });
    }
    draw_legend(
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight),
        13,
    )
}
