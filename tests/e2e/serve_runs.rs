//! Beyond one run, against the mock server: `--num-runs` (a result file per run and a
//! summary with each figure's spread, which `bench compare` reads as the run-to-run
//! noise), the steady-state window (ramp-up and drain left out, checked against the
//! schedule), and the over-saturation warning (only for a load above the server's
//! capacity).

use std::time::Duration;

use bench::mock::MockConfig;
use serde_json::Value;

use crate::common::*;

fn read(path: &std::path::Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn num_runs_saves_every_run_and_a_summary_with_the_spread() {
    let m = mock(MockConfig {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(2),
        ..MockConfig::default()
    });
    let out = Bench::against(&m.url)
        .random(16, 8)
        .prompts(30)
        .args(["--max-concurrency", "4", "--num-runs", "3"])
        .args(["--result-filename", "res.json"])
        .save_result()
        .run()
        .assert_success();
    let dir = out.result_dir();
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "res-run1.json",
            "res-run1.pytorch.json",
            "res-run2.json",
            "res-run2.pytorch.json",
            "res-run3.json",
            "res-run3.pytorch.json",
            "res-summary.json",
        ],
        "{out}"
    );
    // Each run's own result, with vLLM's keys.
    let runs: Vec<Value> = (1..=3)
        .map(|i| read(&dir.join(format!("res-run{i}.json"))))
        .collect();
    for run in &runs {
        assert_eq!(run["completed"], 30);
        for key in VLLM_RESULT_KEYS {
            assert!(run.get(key).is_some(), "a run lacks {key}");
        }
    }
    let summary = read(&dir.join("res-summary.json"));
    assert_eq!(summary["runs"], 3);
    assert_eq!(summary["run_files"].as_array().unwrap().len(), 3);
    let ttft = &summary["metrics"]["mean_ttft_ms"];
    let values: Vec<f64> = runs
        .iter()
        .map(|r| r["mean_ttft_ms"].as_f64().unwrap())
        .collect();
    assert_eq!(ttft["values"], serde_json::json!(values));
    let mean = values.iter().sum::<f64>() / 3.0;
    let std = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 2.0).sqrt();
    assert!((ttft["mean"].as_f64().unwrap() - mean).abs() < 1e-9);
    assert!((ttft["cv"].as_f64().unwrap() - std / mean).abs() < 1e-9);
    // The mock's TTFT is 20 ms in every run: the runs agree to a few percent.
    assert!(ttft["cv"].as_f64().unwrap() < 0.2, "{ttft}");
    assert_eq!(summary["metrics"]["completed"]["cv"], 0.0);
    // Settings are not figures.
    assert!(summary["metrics"].get("max_concurrency").is_none());
    // The console table.
    assert!(out.stdout.contains("Summary of 3 runs"), "{out}");
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("mean_ttft_ms "))
        .unwrap();
    assert!(line.contains(&format!("{mean:.2}")), "{line}");
    assert!(out.stderr.contains("run 2 of 3"), "{out}");

    // bench compare reads the summary's spread as the noise.
    let one = dir.join("res-run1.json");
    let summary_path = dir.join("res-summary.json");
    let out = bench(&[
        "compare",
        summary_path.to_str().unwrap(),
        one.to_str().unwrap(),
    ])
    .assert_success();
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("mean_ttft_ms "))
        .unwrap();
    assert!(line.ends_with("(runs)"), "{out}");
}

#[test]
fn the_steady_state_window_leaves_out_ramp_up_and_drain() {
    // 40 requests a second, evenly spaced, each 100 ms to the first token and 7 more 10 ms
    // apart: 170 ms each, so about 7 in flight once the first ones are answered.
    let m = mock(MockConfig {
        ttft: Duration::from_millis(100),
        itl: Duration::from_millis(10),
        ..MockConfig::default()
    });
    let out = Bench::against(&m.url)
        .random(16, 8)
        .prompts(80)
        .args(["--request-rate", "40", "--burstiness", "1000"])
        .save_detailed()
        .run()
        .assert_success();
    let r = out.json();
    let starts: Vec<f64> = r["start_times"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let first = starts.iter().copied().fold(f64::INFINITY, f64::min);
    let last_send = starts.iter().copied().fold(f64::NEG_INFINITY, f64::max) - first;
    let (start, end) = (
        r["steady_state_start_s"].as_f64().unwrap(),
        r["steady_state_end_s"].as_f64().unwrap(),
    );
    let duration = r["duration"].as_f64().unwrap();
    // Ramp-up: nothing is answered before 170 ms, so concurrency climbs until then.
    assert!(
        (0.1..0.5).contains(&start),
        "window starts at {start}\n{out}"
    );
    // Drain: after the last send concurrency only falls, for another 170 ms.
    assert!(
        end > last_send - 0.3 && end < last_send + 0.1 && end < duration - 0.1,
        "window ends at {end}, last send at {last_send}, run ends at {duration}\n{out}"
    );
    let level = r["steady_state_concurrency"].as_u64().unwrap();
    assert!((5..=9).contains(&level), "plateau {level}");
    let inside = r["steady_state_requests"].as_u64().unwrap();
    assert!((40..80).contains(&inside), "{inside} requests inside");
    // Inside the window the server is as fast as ever.
    let ttft = r["steady_state_mean_ttft_ms"].as_f64().unwrap();
    assert!((95.0..200.0).contains(&ttft), "{ttft}");
    let throughput = r["steady_state_request_throughput"].as_f64().unwrap();
    assert!((30.0..50.0).contains(&throughput), "{throughput}");
    assert!(
        out.stdout
            .contains(&format!("Steady state ({start:.2}-{end:.2} s)")),
        "{out}"
    );
    assert_eq!(r["oversaturated"], false);
    assert!(!out.stderr.contains("over-saturation"), "{out}");
}

#[test]
fn only_a_load_above_capacity_is_over_saturated() {
    // Two requests at a time, about 25 ms each: 80 requests a second at most.
    let m = mock(MockConfig {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(1),
        ..MockConfig::default()
    });
    let run = |rate: &str, prompts: u64| {
        Bench::against(&m.url)
            .random(16, 4)
            .prompts(prompts)
            .args(["--max-concurrency", "2", "--request-rate", rate])
            .args(["--burstiness", "1000"])
            .save_result()
            .run()
            .assert_success()
    };
    let over = run("400", 200);
    let r = over.json();
    assert_eq!(r["oversaturated"], true, "{over}");
    assert!(r["client_queue_slope_ms_per_s"].as_f64().unwrap() > 100.0);
    assert!(over.stderr.contains("WARNING: over-saturation"), "{over}");
    assert!(
        over.stdout
            .contains("Over-saturated:                          yes")
    );

    let under = run("20", 80);
    let r = under.json();
    assert_eq!(r["oversaturated"], false, "{under}");
    assert!(!under.stderr.contains("over-saturation"), "{under}");
}

#[test]
fn a_stopped_run_ends_the_series_and_the_summary_keeps_the_finished_ones() {
    let m = mock(MockConfig {
        ttft: Duration::from_millis(20),
        ..MockConfig::default()
    });
    // Three runs of 3 s each (30 requests at 10 a second).
    let run = Bench::against(&m.url)
        .random(16, 4)
        .prompts(30)
        .args([
            "--request-rate",
            "10",
            "--burstiness",
            "1000",
            "--num-runs",
            "3",
        ])
        .args(["--result-filename", "res.json"])
        .save_result()
        .spawn();
    run.wait_for_line("Starting main benchmark run", Duration::from_secs(60));
    run.wait_for_line("Starting main benchmark run", Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(500));
    run.signal(libc::SIGINT);
    let out = run.wait(Duration::from_secs(60));
    assert_eq!(out.code(), Some(130), "{out}");
    let dir = out.result_dir();
    // The second run's result is saved, marked as interrupted; there is no third.
    assert_eq!(read(&dir.join("res-run2.json"))["interrupted"], true);
    assert!(!dir.join("res-run3.json").exists());
    let summary = read(&dir.join("res-summary.json"));
    assert_eq!(summary["runs"], 1, "{summary}");
    assert_eq!(summary["requested_runs"], 3);
    assert_eq!(summary["run_files"].as_array().unwrap().len(), 1);
    assert_eq!(
        summary["metrics"]["completed"]["values"],
        serde_json::json!([30.0])
    );
    assert!(out.stdout.contains("Stopped after 1 of 3 runs"), "{out}");
}

/// A Ctrl-C between two runs (here as the second one starts, while it loads) is not
/// lost: the second run is stopped as soon as it would start sending, and the series ends.
#[test]
fn a_signal_between_runs_ends_the_series() {
    let m = mock(MockConfig {
        ttft: Duration::from_millis(20),
        ..MockConfig::default()
    });
    let run = Bench::against(&m.url)
        .random(16, 4)
        .prompts(20)
        .args(["--request-rate", "20", "--num-runs", "3"])
        .args(["--result-filename", "res.json"])
        .save_result()
        .spawn();
    run.wait_for_stderr_line("run 2 of 3", Duration::from_secs(60));
    run.signal(libc::SIGINT);
    let out = run.wait(Duration::from_secs(60));
    assert_eq!(out.code(), Some(130), "{out}");
    let dir = out.result_dir();
    assert!(!dir.join("res-run3.json").exists(), "{out}");
    let second = read(&dir.join("res-run2.json"));
    assert_eq!(second["interrupted"], true, "{out}");
    assert!(second["completed"].as_u64().unwrap() < 20, "{second}");
    let summary = read(&dir.join("res-summary.json"));
    assert_eq!(summary["runs"], 1, "{summary}");
}

#[test]
fn a_server_whose_ttft_grows_with_its_queue_is_over_saturated() {
    // TTFT is 10 ms plus 5 ms per request running when one arrives: above 200 requests a
    // second the running requests, and with them TTFT, grow without bound.
    let m = mock(MockConfig {
        ttft: Duration::from_millis(10),
        ttft_per_running: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        ..MockConfig::default()
    });
    let run = |rate: &str, prompts: u64| {
        Bench::against(&m.url)
            .random(16, 4)
            .prompts(prompts)
            .args(["--request-rate", rate, "--burstiness", "1000"])
            .save_result()
            .run()
            .assert_success()
    };
    let over = run("400", 300);
    let r = over.json();
    assert_eq!(r["oversaturated"], true, "{over}");
    assert!(r["ttft_slope_ms_per_s"].as_f64().unwrap() > 100.0, "{over}");
    // Nothing waited at the client: the queue is the server's.
    assert!(
        r["client_queue_slope_ms_per_s"].as_f64().unwrap().abs() < 5.0,
        "{over}"
    );
    assert!(over.stderr.contains("and their TTFT by"), "{over}");

    let under = run("50", 100);
    let r = under.json();
    assert_eq!(r["oversaturated"], false, "{under}");
    assert!(!under.stderr.contains("over-saturation"), "{under}");
}

#[test]
fn num_runs_must_be_at_least_one() {
    let out = bench(&["--model", "m", "--num-runs", "0"]).assert_failure();
    assert!(out.stderr.contains("--num-runs"), "{out}");
}
