//! Charts as text for the console: a sweep's curves or the Pareto front as a grid of
//! characters, one marker per series, so the shape shows without opening a file.

use super::{Chart, Figure, Scale, XyChart};

/// The markers of the series in turn.
const MARKERS: [char; 6] = ['*', 'o', '+', 'x', '#', '@'];

/// The curves of `chart` as text, `width` by `height` characters of plot area per panel
/// (a grid's panels one after another); empty for charts that are not curves (timelines,
/// histograms).
pub fn render(chart: &Chart, width: usize, height: usize) -> String {
    match &chart.figure {
        Figure::Xy(c) => panel(c, width.max(8), height.max(4)),
        Figure::Grid { cells, .. } => cells
            .iter()
            .map(|c| render(c, width, height))
            .collect::<Vec<_>>()
            .concat(),
        _ => String::new(),
    }
}

fn axis(v: f64, scale: Scale) -> Option<f64> {
    match scale {
        Scale::Linear => v.is_finite().then_some(v),
        Scale::Log => (v.is_finite() && v > 0.0).then(|| v.log10()),
    }
}

fn panel(c: &XyChart, width: usize, height: usize) -> String {
    let series: Vec<Vec<(f64, f64)>> = c
        .series
        .iter()
        .map(|s| {
            s.points
                .iter()
                .filter_map(|&(x, y)| Some((axis(x, c.x_scale)?, axis(y, c.y_scale)?)))
                .collect()
        })
        .collect();
    let all = series.iter().flatten();
    let (x0, x1, y0, y1) = all.fold(
        (
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ),
        |(a, b, c, d), &(x, y)| (a.min(x), b.max(x), c.min(y), d.max(y)),
    );
    if x0 > x1 {
        return String::new();
    }
    let span = |lo: f64, hi: f64| if hi > lo { hi - lo } else { 1.0 };
    let (xs, ys) = (span(x0, x1), span(y0, y1));
    let col = |x: f64| (((x - x0) / xs) * (width - 1) as f64).round() as usize;
    let row = |y: f64| (height - 1) - (((y - y0) / ys) * (height - 1) as f64).round() as usize;
    let mut grid = vec![vec![' '; width]; height];
    for (i, points) in series.iter().enumerate() {
        let marker = MARKERS[i % MARKERS.len()];
        // The line between successive points in dots, then the points themselves.
        for w in points.windows(2) {
            let steps = col(w[1].0).abs_diff(col(w[0].0)).max(1);
            for k in 1..steps {
                let t = k as f64 / steps as f64;
                let (x, y) = (
                    w[0].0 + t * (w[1].0 - w[0].0),
                    w[0].1 + t * (w[1].1 - w[0].1),
                );
                let cell = &mut grid[row(y)][col(x)];
                if *cell == ' ' {
                    *cell = '.';
                }
            }
        }
        for &(x, y) in points {
            grid[row(y)][col(x)] = marker;
        }
    }
    let unscale = |v: f64, s: Scale| match s {
        Scale::Linear => v,
        Scale::Log => 10f64.powf(v),
    };
    let label = |v: f64| super::xy::number(v);
    let (top, bottom) = (label(unscale(y1, c.y_scale)), label(unscale(y0, c.y_scale)));
    let pad = top.len().max(bottom.len());
    let mut out = String::new();
    if !c.title.is_empty() {
        out.push_str(&format!("{}\n", c.title));
    }
    out.push_str(&format!("{} vs {}\n", c.y_label, c.x_label));
    for (r, line) in grid.iter().enumerate() {
        let tick = match r {
            0 => top.as_str(),
            r if r == height - 1 => bottom.as_str(),
            _ => "",
        };
        let text: String = line.iter().collect();
        out.push_str(&format!("{tick:>pad$} |{}\n", text.trim_end()));
    }
    let (left, right) = (label(unscale(x0, c.x_scale)), label(unscale(x1, c.x_scale)));
    out.push_str(&format!("{:pad$} +{}\n", "", "-".repeat(width)));
    out.push_str(&format!(
        "{:pad$}  {left}{right:>w$}\n",
        "",
        w = width.saturating_sub(left.len())
    ));
    for (i, s) in c.series.iter().enumerate() {
        out.push_str(&format!("  {} {}\n", MARKERS[i % MARKERS.len()], s.name));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::{Series, SeriesStyle, curves};
    use super::*;

    #[test]
    fn a_rising_curve_puts_its_last_point_top_right() {
        let chart = curves(XyChart {
            title: "t".into(),
            x_label: "rate".into(),
            y_label: "p99".into(),
            series: vec![Series {
                name: "a".into(),
                points: vec![(1.0, 10.0), (2.0, 20.0), (4.0, 40.0)],
                style: SeriesStyle::LineMarkers,
                color: None,
            }],
            x_scale: Scale::Linear,
            y_scale: Scale::Linear,
        });
        let text = render(&chart, 20, 5);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "t");
        assert!(
            lines[2].starts_with("40 |") && lines[2].ends_with('*'),
            "{text}"
        );
        assert!(lines[6].starts_with("10 |*"), "{text}");
        assert!(text.contains("  * a"), "{text}");
        assert_eq!(
            render(&super::super::histogram("h", "x", &[1.0], 3), 20, 5),
            ""
        );
    }
}
