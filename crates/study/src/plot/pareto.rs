//! The Pareto frontier of a sweep's runs (vLLM's `plot_pareto`): the runs no other run
//! beats on both tokens/s per user and tokens/s per GPU.

use anyhow::{Context, Result};
use serde_json::Value;

use super::sweep::Run;
use super::{Chart, PALETTE, Rgb, Scale, Series, SeriesStyle, XyChart, curves};
use crate::results::number;

/// How much lower a point's y may be than the best seen and still count as level with it
/// (vLLM's epsilon), so that float noise does not drop a point from the frontier.
const EPSILON: f64 = 1e-9;

/// vLLM's `plot_pareto` figure: every run as a grey point of (tokens/s per user, tokens/s
/// per GPU), and the Pareto frontier ([`frontier`]) as a line through its points.
pub fn chart(points: &[(f64, f64)]) -> Chart {
    let front = frontier(points);
    curves(XyChart {
        title: "Pareto frontier".into(),
        x_label: "Tokens/s/user".into(),
        y_label: "Tokens/s/GPU".into(),
        series: vec![
            Series {
                name: "All runs".into(),
                points: points.to_vec(),
                style: SeriesStyle::Markers,
                color: Some(Rgb(0x80, 0x80, 0x80)),
            },
            Series {
                name: "Pareto frontier".into(),
                points: front.iter().map(|&i| points[i]).collect(),
                style: SeriesStyle::LineMarkers,
                color: Some(PALETTE[0]),
            },
        ],
        x_scale: Scale::Linear,
        y_scale: Scale::Linear,
    })
}

/// The indices of the points on the Pareto frontier of maximising both x and y, in
/// ascending x. As vLLM computes it: the points sorted by x then y, both descending, and a
/// point kept when its y is at least the best y of the points before it (less
/// [`EPSILON`]). Points with a non-finite coordinate are left out.
pub fn frontier(points: &[(f64, f64)]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..points.len())
        .filter(|&i| points[i].0.is_finite() && points[i].1.is_finite())
        .collect();
    order.sort_by(|&a, &b| {
        let (pa, pb) = (points[a], points[b]);
        pb.0.total_cmp(&pa.0).then(pb.1.total_cmp(&pa.1))
    });
    let mut best = f64::NEG_INFINITY;
    let mut front = Vec::new();
    for i in order {
        let y = points[i].1;
        if y >= best - EPSILON {
            front.push(i);
            best = best.max(y);
        }
    }
    front.reverse();
    front
}

/// A run's place on the Pareto plot, with the counts it was divided by.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub tokens_per_user: f64,
    pub tokens_per_gpu: f64,
    pub user_count: f64,
    pub gpu_count: f64,
}

/// The first of `keys` that a run has, each also tried with `_` and `-` swapped (vLLM's
/// `_first_present`); `None` when it has none, or when that value is `null`.
fn first_present<'a>(run: &'a Run, keys: &[&str]) -> Option<&'a Value> {
    keys.iter().find_map(|key| {
        [
            key.to_string(),
            key.replace('_', "-"),
            key.replace('-', "_"),
        ]
        .into_iter()
        .find_map(|k| run.data.get(&k))
    })
}

/// The first present of `keys` as a number; `None` when absent, `null`, or (unless
/// `allow_zero`) 0. A value that is not a number is an error naming the keys and file.
fn numeric(run: &Run, keys: &[&str], allow_zero: bool) -> Result<Option<f64>> {
    let Some(value) = first_present(run, keys).filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let n = number(value).with_context(|| {
        format!(
            "{}: expected a number for one of {keys:?}, found {value}",
            run.source.display()
        )
    })?;
    Ok((allow_zero || n != 0.0).then_some(n))
}

/// The runs as Pareto points, as vLLM prepares them: `output_throughput` divided by the
/// user count (`user_count_var`, default `max_concurrency`, else `request_rate`, else the
/// observed `max_concurrent_requests`) and by the GPU count (`gpu_count_var`, else
/// tensor × pipeline × data parallel sizes, `tensor_parallel_size`/`tp` and so on, else
/// 1). Runs without a user count are skipped and counted.
pub fn prepare(
    runs: &[Run],
    user_count_var: Option<&str>,
    gpu_count_var: Option<&str>,
) -> Result<(Vec<Point>, usize)> {
    let mut points = Vec::new();
    let mut skipped = 0;
    for run in runs {
        let throughput = numeric(run, &["output_throughput"], true)?.with_context(|| {
            format!(
                "{}: a run has no throughput metric \"output_throughput\"",
                run.source.display()
            )
        })?;
        let mut user_keys: Vec<&str> = user_count_var.into_iter().collect();
        user_keys.push("request_rate");
        let users = match numeric(run, &user_keys, false)? {
            Some(u) => Some(u),
            None => numeric(run, &["max_concurrent_requests"], false)?,
        };
        let Some(user_count) = users else {
            skipped += 1;
            continue;
        };
        let direct: Vec<&str> = gpu_count_var.into_iter().collect();
        let gpu_count = match numeric(run, &direct, false)? {
            Some(g) => g,
            None => {
                let mut world = 1.0;
                for keys in [
                    ["tensor_parallel_size", "tp"],
                    ["pipeline_parallel_size", "pp"],
                    ["data_parallel_size", "dp"],
                ] {
                    if let Some(size) = numeric(run, &keys, false)? {
                        world *= size;
                    }
                }
                world
            }
        };
        points.push(Point {
            tokens_per_user: throughput / user_count,
            tokens_per_gpu: throughput / gpu_count,
            user_count,
            gpu_count,
        });
    }
    Ok((points, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(v: Value) -> Run {
        Run {
            source: "s/summary.json".into(),
            data: v.as_object().unwrap().clone(),
        }
    }

    #[test]
    fn points_divide_output_throughput_by_users_and_gpus() {
        let runs = [
            run(
                json!({"output_throughput": 1000.0, "max_concurrency": 10, "tp": 2, "pipeline-parallel-size": 2}),
            ),
            // No concurrency: the rate; rate null: the observed peak.
            run(
                json!({"output_throughput": 600.0, "max_concurrency": null, "max_concurrent_requests": 4}),
            ),
            run(json!({"output_throughput": 600.0, "request_rate": 3})),
            run(json!({"output_throughput": 1.0})),
            run(json!({"output_throughput": 800.0, "max_concurrency": 8, "num_gpus": 8})),
        ];
        let (points, skipped) = prepare(&runs, Some("max_concurrency"), None).unwrap();
        assert_eq!(skipped, 1);
        let got: Vec<_> = points
            .iter()
            .map(|p| (p.tokens_per_user, p.tokens_per_gpu))
            .collect();
        assert_eq!(
            got,
            [
                (100.0, 250.0),
                (150.0, 600.0),
                (200.0, 600.0),
                (100.0, 800.0)
            ]
        );
        let (points, _) = prepare(&runs[4..], Some("max_concurrency"), Some("num_gpus")).unwrap();
        assert_eq!(points[0].tokens_per_gpu, 100.0);
        let e = prepare(&[run(json!({"max_concurrency": 1}))], None, None).unwrap_err();
        assert!(e.to_string().contains("s/summary.json"), "{e}");
    }
}
