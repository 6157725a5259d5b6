//! End-to-end: the real `bench` binary against the built-in mock server on loopback.

use crate::common::*;

#[test]
fn failed_requests_are_counted_with_their_error_and_the_rest_measured() {
    let m = mock(bench::mock::MockConfig {
        fail_rate: 0.25,
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let out = bench(&[
        "--backend",
        "openai-chat",
        "--model",
        "mock",
        "--tokenizer",
        &gpt2(),
        "--base-url",
        &m.url,
        "--random-input-len",
        "16",
        "--random-output-len",
        "8",
        "--num-prompts",
        "40",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        dir.path().to_str().unwrap(),
        "--disable-tqdm",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let r = result_json(dir.path());
    assert_eq!(r["completed"], 30, "{}", text(&out));
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
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Failed requests:                         10"),
        "{stdout}"
    );
}

#[test]
fn a_run_where_every_request_failed_exits_non_zero() {
    let m = mock(bench::mock::MockConfig {
        fail_rate: 1.0,
        ..Default::default()
    });
    let out = bench(&[
        "--backend",
        "openai",
        "--model",
        "mock",
        "--tokenizer",
        &gpt2(),
        "--base-url",
        &m.url,
        "--random-input-len",
        "8",
        "--random-output-len",
        "4",
        "--num-prompts",
        "5",
        "--disable-tqdm",
    ]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("every request failed"),
        "{}",
        text(&out)
    );
}

#[test]
fn bare_form_with_exported_wasm_files_and_default_endpoint() {
    let m = mock(Default::default());
    let plugins = tempfile::tempdir().unwrap();
    let out = bench(&["plugin", "export", "all", plugins.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let sharegpt_wasm = plugins.path().join("sharegpt.wasm");
    let chat_wasm = plugins.path().join("openai-chat.wasm");
    assert!(sharegpt_wasm.exists() && chat_wasm.exists());
    let dir = tempfile::tempdir().unwrap();
    // No --endpoint: the openai-chat backend posts to /v1/chat/completions by itself.
    let out = bench(&[
        "--plugin",
        sharegpt_wasm.to_str().unwrap(),
        "--backend",
        chat_wasm.to_str().unwrap(),
        "--model",
        "mock",
        "--tokenizer",
        &gpt2(),
        "--dataset-path",
        &sharegpt(),
        "--sharegpt-output-len",
        "5",
        "--num-prompts",
        "20",
        "--base-url",
        &m.url,
        "--save-result",
        "--result-dir",
        dir.path().to_str().unwrap(),
        "--disable-tqdm",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let r = result_json(dir.path());
    assert_eq!(r["completed"], 20, "{}", text(&out));
    assert_eq!(r["total_output_tokens"], 100);
    assert_eq!(r["backend"], "openai-chat");
}

#[test]
fn plugin_list_shows_every_first_party_plugin() {
    let out = bench(&["plugin", "list"]);
    assert!(out.status.success(), "{}", text(&out));
    let s = String::from_utf8_lossy(&out.stdout);
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
        assert!(!out.status.success(), "{args:?} should fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn selfcheck_prints_the_ceiling_and_the_timing_error_per_level() {
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
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("Ceiling (zero-delay server"), "{s}");
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
        assert!((server_ttft - 20.0).abs() < 5.0, "{row}");
    }
    assert!(
        s.contains("can be trusted") || s.contains("treat timings"),
        "{s}"
    );
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
        let dir = tempfile::tempdir().unwrap();
        let out = bench(&[
            "--backend",
            "openai",
            "--model",
            "mock",
            "--tokenizer",
            &gpt2(),
            "--base-url",
            &m.url,
            "--random-input-len",
            "32",
            "--random-output-len",
            "4",
            "--num-prompts",
            "8",
            "--seed",
            "3",
            "--save-result",
            "--result-dir",
            dir.path().to_str().unwrap(),
            "--disable-tqdm",
        ]);
        assert!(out.status.success(), "{}", text(&out));
        (result_json(dir.path()), text(&out))
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
    let dir = tempfile::tempdir().unwrap();
    let out = bench(&[
        "--backend",
        "openai",
        "--model",
        "mock",
        "--tokenizer",
        &gpt2(),
        "--base-url",
        &m.url,
        "--random-input-len",
        "8",
        "--random-output-len",
        "2",
        "--num-prompts",
        "200",
        "--max-concurrency",
        "4",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        dir.path().to_str().unwrap(),
        "--disable-tqdm",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let r = result_json(dir.path());
    assert_eq!(r["completed"], 200, "{}", text(&out));
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

/// `bench` with `random` prompts of 32 tokens against `m`, saving the result in `dir`.
fn random_run(m: &Mock, dir: &std::path::Path) -> std::process::Output {
    bench(&[
        "--backend",
        "openai",
        "--model",
        "mock",
        "--tokenizer",
        &gpt2(),
        "--base-url",
        &m.url,
        "--random-input-len",
        "32",
        "--random-output-len",
        "2",
        "--num-prompts",
        "20",
        "--save-result",
        "--result-dir",
        dir.to_str().unwrap(),
        "--disable-tqdm",
    ])
}

#[test]
fn random_prompts_are_realigned_to_a_server_tokenizer_that_disagrees() {
    // The mock's /tokenize counts characters: every 32-token prompt is longer than 32 of
    // them, so vLLM's rule cuts each to its first 32 characters and keeps prompt_len.
    let m = mock(bench::mock::MockConfig {
        tokenize: true,
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let out = random_run(&m, dir.path());
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("WARNING: tokenizer mismatch (server=")
            && stdout.contains(", expected=32), re-aligning prompts.")
            && stdout.contains("Re-aligned prompts: 20 cut to their prompt_len"),
        "{stdout}"
    );
    let r = result_json(dir.path());
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
    let dir = tempfile::tempdir().unwrap();
    let out = random_run(&m, dir.path());
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("WARNING: /tokenize unavailable, skipping alignment."),
        "{stdout}"
    );
    let r = result_json(dir.path());
    // 32 GPT-2 tokens of random text are well over 16 words each.
    let server = r["input_tokens_server_usage"].as_u64().unwrap();
    assert!(server > 20 * 16, "{server} words");
}
