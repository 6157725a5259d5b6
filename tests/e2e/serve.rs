//! End-to-end: the real `bench` binary against the built-in mock server on loopback.

use crate::common::*;

#[test]
fn failed_requests_are_counted_with_their_error_and_the_rest_measured() {
    let m = mock(bench::mock::MockConfig {
        fail_rate: 0.25,
        ..Default::default()
    });
    let out = Bench::against(&m.url)
        .backend("openai-chat")
        .random(16, 8)
        .prompts(40)
        .save_detailed()
        .run()
        .assert_success();
    let r = out.json();
    assert_eq!(r["completed"], 30, "{out}");
    assert_eq!(r["failed"], 10);
    assert_eq!(r["total_output_tokens"], 30 * 8);
    let errors = r["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 40);
    let failed: Vec<_> = errors
        .iter()
        .filter(|e| !e.as_str().unwrap().is_empty())
        .collect();
    assert_eq!(failed.len(), 10);
    assert!(
        failed
            .iter()
            .all(|e| e.as_str().unwrap().starts_with("http-500")),
        "{failed:?}"
    );
    assert!(
        out.stdout
            .contains("Failed requests:                         10"),
        "{out}"
    );
}

#[test]
fn a_run_where_every_request_failed_exits_non_zero() {
    let m = mock(bench::mock::MockConfig {
        fail_rate: 1.0,
        ..Default::default()
    });
    let out = Bench::against(&m.url)
        .backend("openai")
        .random(8, 4)
        .prompts(5)
        .run()
        .assert_failure();
    assert!(out.stderr.contains("every request failed"), "{out}");
}

#[test]
fn bare_form_with_exported_wasm_files_and_default_endpoint() {
    let m = mock(Default::default());
    let plugins = tempfile::tempdir().unwrap();
    bench(&["plugin", "export", "all", plugins.path().to_str().unwrap()]).assert_success();
    let sharegpt_wasm = plugins.path().join("sharegpt.wasm");
    let chat_wasm = plugins.path().join("openai-chat.wasm");
    assert!(sharegpt_wasm.exists() && chat_wasm.exists());
    // No --endpoint: the openai-chat backend posts to /v1/chat/completions by itself.
    let out = Bench::against(&m.url)
        .arg("--plugin")
        .arg(&sharegpt_wasm)
        .arg("--backend")
        .arg(&chat_wasm)
        .args(["--dataset-path", &sharegpt(), "--sharegpt-output-len", "5"])
        .prompts(20)
        .save_result()
        .run()
        .assert_success();
    let r = out.json();
    assert_eq!(r["completed"], 20, "{out}");
    assert_eq!(r["total_output_tokens"], 100);
    assert_eq!(r["backend"], "openai-chat");
}

#[test]
fn plugin_list_shows_every_first_party_plugin() {
    let out = bench(&["plugin", "list"]).assert_success();
    let s = &out.stdout;
    for (name, kind) in [
        ("random", "dataset"),
        ("sharegpt", "dataset"),
        ("custom", "dataset"),
        ("openai", "backend"),
        ("openai-chat", "backend"),
    ] {
        let line = s
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} missing:\n{s}"));
        assert!(
            line.contains(kind)
                && line.contains("0.1.0")
                && line.contains(bench::runtime::API_VERSION),
            "{line}"
        );
    }
}

#[test]
fn bad_flags_fail_before_any_work_naming_the_flag() {
    for (args, needle) in [
        (vec!["--burstiness", "0"], "--burstiness"),
        (vec!["--request-rate", "-1"], "--request-rate"),
        (vec!["--max-concurrency", "0"], "--max-concurrency"),
        (vec!["--goodput", "ttft=5"], "--goodput"),
        (
            vec!["--percentile-metrics", "ttft,nope"],
            "--percentile-metrics",
        ),
        (
            vec!["--ramp-up-strategy", "linear", "--ramp-up-start-rps", "1"],
            "--ramp-up-end-rps",
        ),
        (
            vec![
                "--ramp-up-strategy",
                "linear",
                "--ramp-up-start-rps",
                "1",
                "--ramp-up-end-rps",
                "2",
                "--request-rate",
                "5",
            ],
            "--request-rate",
        ),
        (vec!["--dataset-path", "x.json"], "--dataset-path"),
    ] {
        let out = bench(
            &[
                &["--model", "m", "--base-url", "http://127.0.0.1:9"],
                &args[..],
            ]
            .concat(),
        );
        assert!(!out.success(), "{args:?} should fail");
        assert!(out.stderr.contains(needle), "{args:?}: {out}");
    }
}

#[test]
fn selfcheck_prints_the_ceiling_and_the_timing_error_per_level() {
    // The mock server in selfcheck's process keeps its delays only when its timer is on
    // time: alone in this binary, and repeated when it ran late all the same.
    // Every check of the report runs on every attempt; a server TTFT off its setting is
    // tried again under the measured load rule, and fails on a quiet machine.
    let _alone = gate::exclusive();
    within_bounds("the selfcheck server's TTFT against its setting", || {
        selfcheck_once().map_or(Ok(()), |late| {
            Err(format!("the mock server ran late:\n{late}"))
        })
    });
}

/// One `bench selfcheck` with every check of its report; `Some(rows)` when a level's
/// server TTFT (what the server measured itself) was 5 ms or more off its setting.
fn selfcheck_once() -> Option<String> {
    let out = bench(&[
        "selfcheck",
        "--levels",
        "2,4",
        "--requests",
        "8",
        "--ceiling-requests",
        "50",
        "--ttft-ms",
        "20",
        "--itl-ms",
        "5",
        "--output-len",
        "4",
    ])
    .assert_success();
    let s = &out.stdout;
    assert!(s.contains("Ceiling (zero-delay server"), "{s}");
    let mut late = Vec::new();
    for level in ["2", "4"] {
        let row = s
            .lines()
            .find(|l| {
                l.split_whitespace().next() == Some(level)
                    && l.split_whitespace().nth(1) == Some("8")
            })
            .unwrap_or_else(|| panic!("no row for level {level}:\n{s}"));
        let verdict = row.split_whitespace().last().unwrap();
        assert!(verdict == "ok" || verdict == "distorted", "{row}");
        // The server's recorded TTFT is near its configured 20 ms.
        let server_ttft: f64 = row.split_whitespace().nth(6).unwrap().parse().unwrap();
        if (server_ttft - 20.0).abs() >= 5.0 {
            late.push(row.to_owned());
        }
    }
    assert!(
        s.contains("can be trusted") || s.contains("treat timings"),
        "{s}"
    );
    (!late.is_empty()).then(|| late.join("\n"))
}

/// A warm prefix cache is reported: the same workload twice against a server with a
/// prefix cache (the mock's stand-in, counted in its `/metrics` under vLLM's names); the
/// first run finds the cache cold, the second takes every prompt token from it, and bench
/// says so.
#[test]
fn a_warm_prefix_cache_is_reported_from_the_servers_metrics() {
    let m = mock(bench::mock::MockConfig {
        prefix_cache: true,
        ..Default::default()
    });
    let run = || {
        let out = Bench::against(&m.url)
            .backend("openai")
            .random(32, 4)
            .prompts(8)
            .args(["--seed", "3"])
            .save_result()
            .run()
            .assert_success();
        (out.json(), out.to_string())
    };
    let (cold, cold_out) = run();
    let (warm, warm_out) = run();
    let queried = cold["server_queried_prompt_tokens"].as_u64().unwrap();
    assert!(queried > 0, "{cold}");
    assert_eq!(cold["server_metrics_source"], "vllm");
    assert_eq!(cold["server_cached_prompt_tokens"], 0, "{cold}");
    assert!(!cold_out.contains("from its prefix cache"), "{cold_out}");
    assert_eq!(warm["server_queried_prompt_tokens"], queried, "{warm}");
    assert_eq!(warm["server_cached_prompt_tokens"], queried, "{warm}");
    assert_eq!(warm["server_prefix_cache_hit_rate"], 1.0);
    assert!(
        warm_out.contains("Prompt tokens served from the cache:"),
        "{warm_out}"
    );
    assert!(
        warm_out.contains(&format!(
            "note: the server served {queried} of {queried} prompt tokens (100.0%) from its prefix cache"
        )),
        "{warm_out}"
    );
}

#[test]
fn under_a_concurrency_cap_requests_are_sent_in_workload_order() {
    // vLLM's client sends in workload order under `--max-concurrency`: each request starts
    // after the one before it, also when several permits free up at once (a zero-delay
    // server answers requests in bursts).
    let m = mock(bench::mock::MockConfig::default());
    let out = Bench::against(&m.url)
        .backend("openai")
        .random(8, 2)
        .prompts(200)
        .args(["--max-concurrency", "4"])
        .save_detailed()
        .run()
        .assert_success();
    let r = out.json();
    assert_eq!(r["completed"], 200, "{out}");
    let starts: Vec<f64> = r["start_times"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_f64().unwrap())
        .collect();
    assert_eq!(starts.len(), 200);
    for (i, w) in starts.windows(2).enumerate() {
        assert!(w[0] < w[1], "request {} started before request {i}", i + 1);
    }
}

/// `bench` with 20 `random` prompts of 32 tokens against `m`, saving the result.
fn random_run(m: &Mock) -> Run {
    Bench::against(&m.url)
        .backend("openai")
        .random(32, 2)
        .prompts(20)
        .save_result()
        .run()
        .assert_success()
}

#[test]
fn random_prompts_are_realigned_to_a_server_tokenizer_that_disagrees() {
    // The mock's /tokenize counts characters: every 32-token prompt is longer than 32 of
    // them, so vLLM's rule cuts each to its first 32 characters and keeps prompt_len.
    let m = mock(bench::mock::MockConfig {
        tokenize: true,
        ..Default::default()
    });
    let out = random_run(&m);
    let stdout = &out.stdout;
    assert!(
        stdout.contains("WARNING: tokenizer mismatch (server=")
            && stdout.contains(", expected=32), re-aligning prompts.")
            && stdout.contains("Re-aligned prompts: 20 cut to their prompt_len"),
        "{out}"
    );
    let r = out.json();
    assert_eq!(r["completed"], 20);
    assert_eq!(
        r["input_tokens_dataset_count"],
        20 * 32,
        "the dataset's prompt_len stays"
    );
    // The mock counts words: 32 characters hold at most 16.
    let server = r["input_tokens_server_usage"].as_u64().unwrap();
    assert!(server <= 20 * 16, "prompts were not cut: {server} words");
}

#[test]
fn without_a_tokenize_endpoint_prompts_stay_as_sampled() {
    let m = mock(bench::mock::MockConfig::default());
    let out = random_run(&m);
    assert!(
        out.stdout
            .contains("WARNING: /tokenize unavailable, skipping alignment."),
        "{out}"
    );
    let r = out.json();
    // 32 GPT-2 tokens of random text are well over 16 words each.
    let server = r["input_tokens_server_usage"].as_u64().unwrap();
    assert!(server > 20 * 16, "{server} words");
}
