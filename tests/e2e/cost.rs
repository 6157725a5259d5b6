//! `--cost-per-hour`: the run's cost and its prices per token and request, checked against
//! the same result file's own duration and totals, against the mock server on loopback.

use crate::common::*;

const PRICE: f64 = 3.5;

/// A short run against a fresh mock server, with `extra` flags, its result saved.
fn run_with(extra: &[&str]) -> Run {
    let m = mock(Default::default());
    Bench::against(&m.url)
        .backend("openai")
        .random(16, 8)
        .prompts(20)
        .args(extra)
        .save_result()
        .run()
        .assert_success()
}

/// Every cost key of `r` is the price over the result's own `duration`, token totals and
/// completed requests, recomputed here (to 1e-12, the rounding of two divisions).
#[track_caller]
fn assert_cost_follows_the_result(r: &serde_json::Value) {
    let number = |key: &str| {
        r[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{key} is not a number: {r:#}"))
    };
    let run_cost = PRICE * number("duration") / 3600.0;
    let input = number("total_input_tokens");
    let output = number("total_output_tokens");
    assert!(input > 0.0 && output > 0.0, "{r:#}");
    for (key, want) in [
        ("cost_per_hour_usd", PRICE),
        ("run_cost_usd", run_cost),
        ("cost_per_million_input_tokens_usd", run_cost / input * 1e6),
        (
            "cost_per_million_output_tokens_usd",
            run_cost / output * 1e6,
        ),
        (
            "cost_per_million_tokens_usd",
            run_cost / (input + output) * 1e6,
        ),
        ("cost_per_request_usd", run_cost / number("completed")),
    ] {
        let got = number(key);
        assert!(
            (got - want).abs() <= 1e-12 * want.abs(),
            "{key}: {got} != {want}"
        );
    }
}

#[test]
fn cost_keys_are_the_price_over_the_results_own_duration_and_totals() {
    let out = run_with(&["--cost-per-hour", &PRICE.to_string()]);
    let r = out.json();
    assert_eq!(r["completed"], 20, "{out}");
    assert_cost_follows_the_result(&r);
    // The console's block, in the result block, before the metric sections.
    let block = out.stdout.split("Time to First Token").next().unwrap();
    for label in [
        "-----------------------Cost-----------------------",
        "Price (USD/hour):                        3.50",
        "Cost per 1M output tokens (USD):",
        "Cost per request (USD):",
    ] {
        assert!(block.contains(label), "{label:?} missing: {out}");
    }
}

#[test]
fn cost_keys_and_block_are_absent_without_a_price() {
    let out = run_with(&[]);
    let r = out.json();
    let costs: Vec<&String> = r
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.contains("cost"))
        .collect();
    assert!(costs.is_empty(), "{costs:?}");
    assert!(!out.stdout.contains("Cost"), "{out}");
}

#[test]
fn a_price_that_is_not_dollars_is_refused_naming_the_flag() {
    for bad in ["-1", "NaN", "inf", "three"] {
        // Refused by the flag's parser: no server is needed, none is reached.
        let out = Bench::against("http://127.0.0.1:9")
            .args(["--cost-per-hour", bad])
            .run()
            .assert_failure();
        assert!(out.stderr.contains("--cost-per-hour"), "{bad}: {out}");
        assert!(!out.stderr.contains("connect"), "{bad}: {out}");
    }
}

/// A run of two client processes is merged from their records: its cost is the merged
/// run's, from its duration and totals, not a shard's.
#[test]
fn a_merged_runs_cost_is_its_merged_duration_and_totals() {
    let out = run_with(&["--workers", "2", "--cost-per-hour", &PRICE.to_string()]);
    let r = out.json();
    assert_eq!(r["shards"].as_array().map(Vec::len), Some(2), "{out}");
    assert_eq!(r["completed"], 20);
    assert_cost_follows_the_result(&r);
}

/// A sweep's `--bench-cmd` carrying the price: every run's result has the cost keys, and
/// the sweep's summary its columns.
#[test]
fn a_sweep_runs_results_carry_the_cost() {
    let m = mock(Default::default());
    let out = tempfile::tempdir().unwrap();
    let bench_cmd = format!(
        "bench serve --model mock --tokenizer {} --base-url {} --dataset-name random \
         --random-input-len 16 --random-output-len 8 --num-prompts 10 --disable-tqdm \
         --cost-per-hour {PRICE}",
        gpt2(),
        m.url
    );
    let run = Bench::new()
        .args([
            "sweep",
            "serve",
            "-e",
            "exp",
            "--bench-cmd",
            &bench_cmd,
            "-o",
        ])
        .arg(out.path())
        .run()
        .assert_success();
    let exp = out.path().join("exp");
    let results: Vec<serde_json::Value> = walk(&exp)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "run=0.json"))
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect();
    assert_eq!(results.len(), 1, "{run}");
    assert_cost_follows_the_result(&results[0]);
    let csv = std::fs::read_to_string(exp.join("summary.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    assert!(
        header.contains("cost_per_million_output_tokens_usd"),
        "{header}"
    );
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}
