//! How sure a run's figures are, against a mock whose TTFT distribution is known
//! (`--ttft-spread-ms`: uniform from --ttft-ms to --ttft-ms plus the spread): the `ci95`
//! intervals of every mean and percentile hold the true values about as often as their
//! level says over many seeded runs; `--num-runs` adds Student's t over runs;
//! `--until-confident` stops once a figure is known well enough, or says it was not.

use std::time::Duration;

use bench::mock::MockConfig;
use serde_json::Value;

use crate::common::*;

fn read(path: &std::path::Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn interval(result: &Value, key: &str) -> (Option<f64>, Option<f64>) {
    let pair = &result["ci95"][key];
    assert!(pair.is_array(), "no ci95.{key} in {}", result["ci95"]);
    (pair[0].as_f64(), pair[1].as_f64())
}

/// The mock of these tests: TTFT uniform on [20 ms, 220 ms), two tokens per answer.
fn spread_mock(seed: u64) -> Mock {
    mock(MockConfig {
        ttft: Duration::from_millis(20),
        ttft_spread: Duration::from_millis(200),
        latency_seed: seed,
        output_len: 2,
        ..MockConfig::default()
    })
}

/// The true TTFT quantile of [`spread_mock`] in ms, before the client's own overhead
/// (a fraction of a millisecond against intervals tens of milliseconds wide).
fn true_ttft_ms(q: f64) -> f64 {
    20.0 + 200.0 * q
}

/// Thirty seeded runs of 100 requests each: the 95% intervals of the mean, the median
/// and the p90 of TTFT each hold the true value in at least 24 of them (a binomial(30,
/// 0.95) count is below 24 with probability 0.0005), and their widths are what the
/// distribution implies (a t interval of a uniform's mean over 100 values is about 23 ms
/// wide), so an interval cannot pass by being huge.
#[test]
fn intervals_cover_the_known_ttft_distribution_near_their_level() {
    // The client's own overhead must stay small against the intervals: measured alone.
    let _alone = gate::exclusive();
    let m = spread_mock(7);
    let out = Bench::against(&m.url)
        .random(16, 2)
        .prompts(100)
        .args(["--num-runs", "30", "--metric-percentiles", "50,90,99"])
        .args(["--result-filename", "res.json"])
        .save_result()
        .run()
        .assert_success();
    let dir = out.result_dir();
    let mut covered = [0usize; 3];
    for run in 1..=30 {
        let r = read(&dir.join(format!("res-run{run}.json")));
        assert_eq!(r["completed"], 100, "{out}");
        let cases = [
            ("mean_ttft_ms", true_ttft_ms(0.5)),
            ("median_ttft_ms", true_ttft_ms(0.5)),
            ("p90_ttft_ms", true_ttft_ms(0.9)),
        ];
        for (i, (key, truth)) in cases.into_iter().enumerate() {
            let (lo, hi) = interval(&r, key);
            let (lo, hi) = (lo.unwrap(), hi.unwrap());
            let estimate = r[key].as_f64().unwrap();
            assert!(
                lo <= estimate && estimate <= hi,
                "run {run}: {key} {estimate} outside [{lo}, {hi}]"
            );
            covered[i] += usize::from(lo <= truth && truth <= hi);
        }
        let (lo, hi) = interval(&r, "mean_ttft_ms");
        let width = hi.unwrap() - lo.unwrap();
        assert!(
            (15.0..32.0).contains(&width),
            "run {run}: mean interval {width} ms wide"
        );
        // A p99 of 100 values has no upper order statistic to bound it.
        assert_eq!(interval(&r, "p99_ttft_ms").1, None, "run {run}");
    }
    for (name, c) in ["mean", "median", "p90"].iter().zip(covered) {
        assert!(
            c >= 24,
            "{name}: the interval held the true value in {c} of 30 runs"
        );
    }
    // Across runs: Student's t of each figure's mean over the 30 runs.
    let summary = read(&dir.join("res-summary.json"));
    let spread = &summary["metrics"]["mean_ttft_ms"];
    let values: Vec<f64> = spread["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let std = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    // scipy.stats.t.ppf(0.975, 29)
    let half = 2.045_229_642_132_703 * std / n.sqrt();
    let ci = &spread["ci95"];
    assert!(
        (ci[0].as_f64().unwrap() - (mean - half)).abs() < 1e-6,
        "{ci}"
    );
    assert!(
        (ci[1].as_f64().unwrap() - (mean + half)).abs() < 1e-6,
        "{ci}"
    );
    assert!(out.stdout.contains("Mean's 95% CI (t)"), "{out}");
}

#[test]
fn every_result_states_its_intervals_and_their_method() {
    let m = spread_mock(1);
    let out = Bench::against(&m.url)
        .random(16, 2)
        .prompts(10)
        .save_result()
        .run()
        .assert_success();
    let r = out.json();
    assert!(
        r["ci95_method"]
            .as_str()
            .unwrap()
            .contains("order-statistic")
    );
    // One interval per figure the result reports (vLLM's default metrics: not E2EL).
    for metric in ["ttft", "tpot", "itl"] {
        for stat in ["mean", "median", "p99"] {
            let key = format!("{stat}_{metric}_ms");
            assert!(
                r.get(&key).is_some() && r["ci95"].get(&key).is_some(),
                "{key}"
            );
        }
    }
    assert!(r.get("mean_e2el_ms").is_none() && r["ci95"].get("mean_e2el_ms").is_none());
    // Ten values: the median's interval is the 2nd to the 9th smallest TTFT, exactly.
    let mut ttfts: Vec<f64> = Vec::new();
    let detailed = Bench::against(&m.url)
        .random(16, 2)
        .prompts(10)
        .save_detailed()
        .run()
        .assert_success()
        .json();
    for t in detailed["ttfts"].as_array().unwrap() {
        ttfts.push(t.as_f64().unwrap() * 1000.0);
    }
    ttfts.sort_by(f64::total_cmp);
    let (lo, hi) = interval(&detailed, "median_ttft_ms");
    assert_eq!((lo.unwrap(), hi.unwrap()), (ttfts[1], ttfts[8]));
}

#[test]
fn until_confident_stops_once_the_figure_is_known_well_enough() {
    let m = spread_mock(3);
    let out = Bench::against(&m.url)
        .random(16, 2)
        .prompts(20_000)
        .args(["--max-concurrency", "64"])
        .args(["--until-confident", "median_ttft:10%"])
        // A percentile the result would not report (vLLM's default is the p99 alone):
        // reported because a goal names it.
        .args(["--until-confident", "p90_ttft:10%"])
        .save_result()
        .run()
        .assert_success();
    let r = out.json();
    let verdict = &r["until_confident"];
    assert_eq!(verdict["reached"], true, "{verdict}\n{out}");
    assert_eq!(verdict["ended_by"], "confident", "{verdict}");
    let completed = r["completed"].as_u64().unwrap();
    // It stopped early, and every request it sent was answered (none cut off).
    assert!((30..20_000).contains(&completed), "{completed}");
    assert_eq!(r["failed"], 0);
    assert_eq!(
        verdict["requests_not_sent"].as_u64().unwrap() + completed,
        20_000
    );
    assert_eq!(verdict["goals"][1]["figure"], "p90_ttft_ms");
    assert_eq!(verdict["goals"][1]["value"], r["p90_ttft_ms"], "{verdict}");
    assert_eq!(verdict["goals"][1]["reached"], true, "{verdict}");
    // The verdict is the result's own figure and interval.
    let goal = &verdict["goals"][0];
    assert_eq!(goal["figure"], "median_ttft_ms");
    assert_eq!(goal["value"], r["median_ttft_ms"]);
    assert_eq!(goal["ci95"], r["ci95"]["median_ttft_ms"]);
    let (lo, hi) = interval(&r, "median_ttft_ms");
    let median = r["median_ttft_ms"].as_f64().unwrap();
    assert!(median - lo.unwrap() <= 0.1 * median && hi.unwrap() - median <= 0.1 * median);
    // A run that met its goal is complete, not interrupted.
    assert!(r.get("interrupted").is_none(), "{r}");
    assert!(out.stdout.contains("Goals reached:"), "{out}");
}

#[test]
fn until_confident_says_when_its_goal_was_not_met() {
    let m = spread_mock(5);
    // The workload runs out first: 40 requests cannot pin a p99.
    let out = Bench::against(&m.url)
        .random(16, 2)
        .prompts(40)
        .args(["--until-confident", "p99_ttft:1%"])
        .save_result()
        .run()
        .assert_success();
    let verdict = &out.json()["until_confident"];
    assert_eq!(verdict["reached"], false, "{verdict}");
    assert_eq!(verdict["ended_by"], "workload_exhausted");
    assert_eq!(verdict["requests_not_sent"], 0);
    assert_eq!(verdict["goals"][0]["ci95"][1], Value::Null, "{verdict}");
    // The maximum duration passes first: a goal no sample reaches, one request at a time.
    let out = Bench::against(&m.url)
        .random(16, 2)
        .prompts(1000)
        .args([
            "--max-concurrency",
            "1",
            "--until-confident",
            "mean_ttft:0.01%",
        ])
        .args(["--until-confident-max-duration", "1"])
        .save_result()
        .run()
        .assert_success();
    let r = out.json();
    assert_eq!(r["until_confident"]["ended_by"], "max_duration", "{r}");
    assert_eq!(r["until_confident"]["reached"], false);
    assert!(r["completed"].as_u64().unwrap() < 1000);
}

#[test]
fn until_confident_refuses_what_it_cannot_judge() {
    let out = bench(&["--until-confident", "p99_fttt:5%"]).assert_failure();
    assert!(out.stderr.contains("--until-confident"), "{out}");
    assert!(out.stderr.contains("unknown latency"), "{out}");
    let out = bench(&["--until-confident-max-duration", "5"]).assert_failure();
    assert!(out.stderr.contains("--until-confident"), "{out}");
}
