//! Reports of the hand-made run in `metrics::tests` (its numbers are worked out there).

use chrono::{Local, TimeZone};
use serde_json::{Value, json};

use super::*;
use crate::metrics::tests::{fixture, words};
use crate::metrics::{Goodput, Metrics, MetricsConfig, PercentileMetric, calculate};
use crate::pyjson;
use crate::schedule::{RampUp, RampUpStrategy, RpsChange};
use crate::side_reports::SideReports;

fn metrics_with(config: MetricsConfig) -> Metrics {
    calculate(fixture(), 10.0, Some(&words), &config).unwrap()
}

/// p50 and p99 of every metric, a TTFT SLO of 250 ms (two of three requests meet it).
fn full_metrics() -> Metrics {
    metrics_with(MetricsConfig {
        percentiles: vec![50.0, 99.0],
        percentile_metrics: PercentileMetric::ALL.to_vec(),
        goodput: Goodput {
            ttft_ms: Some(250.0),
            ..Goodput::default()
        },
        ..MetricsConfig::default()
    })
}

/// A run of the fixture's four requests at 2 req/s with at most 4 in flight (also the
/// console snapshots').
pub(super) fn run() -> RunInfo {
    let mut args = serde_json::Map::new();
    args.insert("model".into(), json!("meta-llama/Llama-3.1-8B"));
    args.insert("request_rate".into(), json!(2.0));
    RunInfo {
        date: Local.with_ymd_and_hms(2025, 3, 4, 5, 6, 7).unwrap(),
        started_at: Local.with_ymd_and_hms(2025, 3, 4, 5, 5, 0).unwrap(),
        backend: "openai".into(),
        label: None,
        model_id: "meta-llama/Llama-3.1-8B".into(),
        tokenizer_id: Some("meta-llama/Llama-3.1-8B".into()),
        num_prompts: 4,
        request_rate: 2.0,
        burstiness: 1.0,
        max_concurrency: Some(4),
        ramp_up: None,
        rps_change_events: vec![],
        metadata: vec![("tensor_parallel_size".into(), "2".into())],
        args,
        cancellation: None,
        endpoints: None,
        duration_limit_s: None,
    }
}

/// The result as a JSON tree, for looking values up.
fn result_json(m: &Metrics, run: &RunInfo, detailed: bool) -> Value {
    result_json_beside(m, &SideReports::default(), run, detailed)
}

/// [`result_json`] of a run with reports measured beside its records.
fn result_json_beside(m: &Metrics, side: &SideReports, run: &RunInfo, detailed: bool) -> Value {
    serde_json::to_value(result_doc(m, side, run, detailed)).unwrap()
}

/// `json.dump` of a value, as bytes.
fn python_bytes<T: serde::Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut out = Vec::new();
    pyjson::to_writer(&mut out, value).unwrap();
    out
}

#[test]
fn console_block_is_vllms_text() {
    // The vLLM part was checked against vLLM's own print statements fed the same numbers.
    let want = concat!(
        "Failed requests during benchmark run detected (capping to 10):\n",
        "Error 0: http-500: Internal Server Error\n",
        "============ Serving Benchmark Result ============\n",
        "Successful requests:                     3         \n",
        "Failed requests:                         1         \n",
        "Maximum request concurrency:             4         \n",
        "Request rate configured (RPS):           2.00      \n",
        "Benchmark duration (s):                  10.00     \n",
        "Total input tokens:                      180       \n",
        "Total generated tokens:                  9         \n",
        "Request throughput (req/s):              0.30      \n",
        "Request goodput (req/s):                 0.20      \n",
        "Output token throughput (tok/s):         0.90      \n",
        "Peak output token throughput (tok/s):    6.00      \n",
        "Peak concurrent requests:                2.00      \n",
        "Total token throughput (tok/s):          18.90     \n",
        "---------------Time to First Token----------------\n",
        "Mean TTFT (ms):                          233.33    \n",
        "Median TTFT (ms):                        200.00    \n",
        "P50 TTFT (ms):                           200.00    \n",
        "P99 TTFT (ms):                           396.00    \n",
        "-----Time per Output Token (excl. 1st token)------\n",
        "Mean TPOT (ms):                          100.00    \n",
        "Median TPOT (ms):                        100.00    \n",
        "P50 TPOT (ms):                           100.00    \n",
        "P99 TPOT (ms):                           149.00    \n",
        "---------------Inter-token Latency----------------\n",
        "Mean ITL (ms):                           83.33     \n",
        "Median ITL (ms):                         75.00     \n",
        "P50 ITL (ms):                            75.00     \n",
        "P99 ITL (ms):                            195.00    \n",
        "----------------End-to-end Latency----------------\n",
        "Mean E2EL (ms):                          400.00    \n",
        "Median E2EL (ms):                        300.00    \n",
        "P50 E2EL (ms):                           300.00    \n",
        "P99 E2EL (ms):                           692.00    \n",
        "---------------Client-side Queueing---------------\n",
        "Mean Client Queue Time (ms):             116.67    \n",
        "Median Client Queue Time (ms):           100.00    \n",
        "P50 Client Queue Time (ms):              100.00    \n",
        "P99 Client Queue Time (ms):              247.00    \n",
        "--------Queue-inclusive End-to-end Latency--------\n",
        "Mean E2EL incl. Client Queue (ms):       516.67    \n",
        "Median E2EL incl. Client Queue (ms):     300.00    \n",
        "P50 E2EL incl. Client Queue (ms):        300.00    \n",
        "P99 E2EL incl. Client Queue (ms):        937.00    \n",
        "==================================================\n",
        "Failures by kind: http-500: 1\n",
        "=============== Client Diagnostics ===============\n",
        "Requests sent:                           4         \n",
        "Achieved request rate (req/s):           0.30      \n",
        "Achieved send rate (req/s):              2.67      \n",
        "Mean schedule lag (ms):                  75.00     \n",
        "Median schedule lag (ms):                25.00     \n",
        "P99 schedule lag (ms):                   244.00    \n",
        "Max schedule lag (ms):                   250.00    \n",
        "Exact peak concurrent requests:          2         \n",
        "Output tokens (server usage):            6         \n",
        "Output tokens (tokenizer count):         7         \n",
        "Requests with differing counts:          1         \n",
        "Output token totals differ (%):          16.67     \n",
        "==================================================\n",
    );
    assert_eq!(
        console(&full_metrics(), &SideReports::default(), &run()),
        want
    );
}

#[test]
fn console_follows_vllms_conditions() {
    // Defaults: p99 of TTFT/TPOT/ITL, no goodput, no concurrency cap, infinite rate.
    let m = metrics_with(MetricsConfig::default());
    let r = RunInfo {
        max_concurrency: None,
        request_rate: f64::INFINITY,
        ..run()
    };
    let text = console(&m, &SideReports::default(), &r);
    for absent in [
        "Maximum request concurrency:",
        "Request rate configured",
        "Request goodput",
        "End-to-end Latency",
        "Client Queue",
        "P50 ",
    ] {
        assert!(!text.contains(absent), "{absent:?} in\n{text}");
    }
    assert!(
        text.contains("P99 ITL (ms):                            195.00    \n"),
        "{text}"
    );

    // Without a tokenizer vLLM hides token counts, token throughputs and TTFT/TPOT/ITL.
    let config = MetricsConfig {
        percentile_metrics: PercentileMetric::ALL.to_vec(),
        ..MetricsConfig::default()
    };
    let m = calculate(fixture(), 10.0, None, &config).unwrap();
    let text = console(&m, &SideReports::default(), &r);
    for absent in [
        "Total generated tokens:",
        "tok/s",
        "TTFT",
        "TPOT",
        "ITL",
        "Output tokens (",
    ] {
        assert!(!text.contains(absent), "{absent:?} in\n{text}");
    }
    assert!(text.contains("Mean E2EL (ms):"), "{text}");
    assert!(
        text.contains("Peak concurrent requests:                2.00      \n"),
        "{text}"
    );
}

/// Every key vLLM's `main` writes for a generation run with `--save-detailed`, default
/// percentile metrics and a goodput SLO, in vLLM's order.
const VLLM_KEYS: [&str; 43] = [
    "date",
    "endpoint_type",
    "backend",
    "label",
    "model_id",
    "tokenizer_id",
    "num_prompts",
    "request_rate",
    "burstiness",
    "max_concurrency",
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "total_token_throughput",
    "input_lens",
    "output_lens",
    "ttfts",
    "itls",
    "latencies",
    "start_times",
    "queue_times",
    "generated_texts",
    "errors",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
    "rtfx",
    "mean_ttft_ms",
    "median_ttft_ms",
    "std_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "std_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "median_itl_ms",
    "std_itl_ms",
    "p99_itl_ms",
];

#[test]
fn result_json_has_every_vllm_key() {
    let m = metrics_with(MetricsConfig {
        goodput: Goodput {
            e2el_ms: Some(500.0),
            ..Goodput::default()
        },
        ..MetricsConfig::default()
    });
    let r = RunInfo {
        max_concurrency: None,
        metadata: vec![],
        ..run()
    };
    let detailed = result_json(&m, &r, true);
    let object = detailed.as_object().unwrap();
    for key in VLLM_KEYS {
        assert!(object.contains_key(key), "missing {key}");
    }
    // Nothing else of vLLM's: the remaining keys are our client diagnostics.
    let ours: Vec<&str> = object
        .keys()
        .map(String::as_str)
        .filter(|k| !VLLM_KEYS.contains(k))
        .collect();
    let mut ours_sorted = ours.clone();
    ours_sorted.sort();
    assert_eq!(
        ours_sorted,
        vec![
            "achieved_request_rate",
            "achieved_send_rate",
            "ci95",
            "ci95_method",
            "connection_retries",
            "failures_by_kind",
            "input_tokens_source",
            "output_token_count_mismatch",
            "output_token_count_mismatches",
            "output_tokens_server_usage",
            "output_tokens_tokenizer_count",
            "peak_concurrent_requests",
            "requests_sent",
            "requests_with_server_usage",
            "schedule_lag_ms_max",
            "schedule_lag_ms_mean",
            "schedule_lag_ms_median",
            "schedule_lag_ms_p99",
        ]
    );

    // Without --save-detailed vLLM drops seven lists but keeps latencies and queue_times.
    let summary = result_json(&m, &r, false);
    for key in json::DETAILED_KEYS {
        assert!(summary.get(key).is_none(), "{key} kept");
    }
    assert!(summary["latencies"].is_array() && summary["queue_times"].is_array());
}

/// A linear ramp-up from 1 to 5 requests/s.
fn linear_ramp_up() -> RampUp {
    RampUp {
        strategy: RampUpStrategy::Linear,
        start_rps: 1.0,
        end_rps: 5.0,
    }
}

/// Rate changes at the start, at request 3 and at request 9.
fn rps_changes() -> Vec<RpsChange> {
    vec![
        RpsChange {
            rps: 1,
            request: None,
            offset: 0.0,
        },
        // Request 3 was due at 1.0 s but sent at 1.5 s (in the fixtures using this): the
        // send time counts.
        RpsChange {
            rps: 2,
            request: Some(3),
            offset: 1.0,
        },
        // A request without a record falls back to its scheduled time.
        RpsChange {
            rps: 3,
            request: Some(9),
            offset: 2.0,
        },
    ]
}

#[test]
fn result_json_values_have_vllms_types() {
    let r = RunInfo {
        request_rate: f64::INFINITY,
        ramp_up: Some(linear_ramp_up()),
        rps_change_events: rps_changes(),
        ..run()
    };
    let v = result_json(&full_metrics(), &r, true);
    assert_eq!(v["request_rate"], json!("inf"));
    assert_eq!(v["burstiness"], json!(1.0));
    assert_eq!(v["label"], Value::Null);
    assert_eq!(v["tensor_parallel_size"], json!("2"));
    assert_eq!(v["ramp_up_strategy"], json!("linear"));
    assert_eq!(
        (
            v["ramp_up_start_rps"].as_u64(),
            v["ramp_up_end_rps"].as_u64()
        ),
        (Some(1), Some(5))
    );
    assert_eq!(
        v["rps_change_events"],
        json!([
            {"rps": 1, "timestamp": "2025-03-04T05:05:00"},
            {"rps": 2, "timestamp": "2025-03-04T05:05:01.500000"},
            {"rps": 3, "timestamp": "2025-03-04T05:05:02"},
        ])
    );
    assert_eq!(v["completed"], json!(3));
    assert!(v["completed"].is_u64() && v["max_concurrent_requests"].is_u64());
    assert!(v["duration"].is_f64() && v["max_output_tokens_per_s"].is_f64());
    assert_eq!(v["request_goodput"], json!(0.2));
    assert_eq!(v["output_lens"], json!([5, 1, 0, 3]));
    assert_eq!(v["errors"][2], json!("http-500: Internal Server Error"));
    assert_eq!(v["itls"][1], json!([]));
    assert_eq!(v["p99_ttft_ms"], json!(396.0));
    assert!(v.get("p50_e2el_ms").is_some());
    // Infinite rate: no queue-inclusive E2EL section (vLLM needs a finite rate for it).
    assert!(v.get("mean_e2el_including_client_queue_ms").is_none());
    assert!(v.get("mean_client_queue_time_ms").is_some());
    assert_eq!(v["schedule_lag_ms_max"], json!(250.0));
    assert_eq!(v["output_token_count_mismatches"], json!(1));
    // No SLO: vLLM writes null.
    let plain = result_json(&metrics_with(MetricsConfig::default()), &r, false);
    assert_eq!(plain["request_goodput"], Value::Null);
}

#[test]
fn default_file_names_follow_vllm() {
    let save = SaveOptions {
        save_result: true,
        ..SaveOptions::default()
    };
    assert_eq!(
        result_path(&run(), &save).unwrap(),
        std::path::PathBuf::from("openai-2.0qps-concurrency4-Llama-3.1-8B-20250304-050607.json")
    );
    let r = RunInfo {
        label: Some("mine".into()),
        request_rate: f64::INFINITY,
        max_concurrency: None,
        ..run()
    };
    assert_eq!(
        result_path(&r, &save).unwrap().to_str(),
        Some("mine-infqps-Llama-3.1-8B-20250304-050607.json")
    );
    let ramp = RunInfo {
        ramp_up: Some(RampUp {
            strategy: RampUpStrategy::Exponential,
            start_rps: 2.0,
            end_rps: 8.0,
        }),
        ..run()
    };
    assert_eq!(
        result_path(&ramp, &save).unwrap().to_str(),
        Some("openai-ramp-up-exponential-2qps-8qps-concurrency4-Llama-3.1-8B-20250304-050607.json")
    );
    let named = SaveOptions {
        result_dir: Some("out".into()),
        result_filename: Some("x.json".into()),
        ..save.clone()
    };
    assert_eq!(
        result_path(&run(), &named).unwrap(),
        std::path::Path::new("out").join("x.json")
    );
    assert_eq!(result_path(&run(), &SaveOptions::default()), None);
}

#[test]
fn save_writes_appends_and_adds_pytorch_records() {
    let dir = tempfile::tempdir().unwrap();
    let options = SaveOptions {
        save_result: true,
        result_dir: Some(dir.path().join("nested")),
        result_filename: Some("result.json".into()),
        pytorch_format: true,
        ..SaveOptions::default()
    };
    let m = full_metrics();
    let path = save(&m, &SideReports::default(), &run(), &options)
        .unwrap()
        .unwrap();
    assert_eq!(path, dir.path().join("nested").join("result.json"));
    let text = std::fs::read_to_string(&path).unwrap();
    // Python json.dump formatting: ", " and ": " separators, floats as repr.
    assert!(text.contains("\"date\": \"20250304-050607\", "), "{text}");
    assert!(text.contains("\"p99_ttft_ms\": 396.0"), "{text}");
    let want = python_bytes(&result_doc(&m, &SideReports::default(), &run(), false));
    assert_eq!(text.as_bytes(), want);

    // Appending adds a newline and a second document.
    let append = SaveOptions {
        save_result: false,
        append_result: true,
        ..options.clone()
    };
    save(&m, &SideReports::default(), &run(), &append).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let docs: Vec<&str> = text.split('\n').collect();
    assert_eq!(docs.len(), 2);
    assert_eq!(docs[0], docs[1]);

    // Saving again without append replaces the file.
    save(&m, &SideReports::default(), &run(), &options).unwrap();
    assert!(!std::fs::read_to_string(&path).unwrap().contains('\n'));

    // One PyTorch record per TTFT/TPOT/ITL statistic vLLM exports (mean, median, std,
    // p99), in vLLM's order; p50 is not among them and stays in `extra_info`.
    let records: Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("nested/result.pytorch.json")).unwrap(),
    )
    .unwrap();
    let records = records.as_array().unwrap();
    let names: Vec<&str> = records
        .iter()
        .map(|r| r["metric"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, VLLM_PYTORCH_METRICS);
    let first = &records[0];
    assert_eq!(first["benchmark"]["name"], json!("vLLM benchmark"));
    assert_eq!(first["model"]["name"], json!("meta-llama/Llama-3.1-8B"));
    assert_eq!(first["metric"]["benchmark_values"], json!([200.0]));
    // The tensor-parallel size comes from --metadata when the args lack it.
    assert_eq!(
        first["benchmark"]["extra_info"]["args"]["tensor_parallel_size"],
        json!("2")
    );
    let extra = first["metric"]["extra_info"].as_object().unwrap();
    assert!(extra.contains_key("p50_ttft_ms") && extra.contains_key("latencies"));
    assert!(!extra.contains_key("median_ttft_ms"));
}

#[test]
fn nothing_is_saved_without_a_save_flag() {
    let dir = tempfile::tempdir().unwrap();
    let options = SaveOptions {
        result_dir: Some(dir.path().join("never")),
        ..SaveOptions::default()
    };
    assert_eq!(
        save(&full_metrics(), &SideReports::default(), &run(), &options).unwrap(),
        None
    );
    assert!(!dir.path().join("never").exists());
}

#[test]
fn resent_requests_and_server_prompt_counts_are_reported_when_there_are_some() {
    let mut m = full_metrics();
    let quiet = console(&m, &SideReports::default(), &run());
    assert!(
        !quiet.contains("Resent") && !quiet.contains("Input tokens ("),
        "{quiet}"
    );
    let v = result_json(&m, &run(), false);
    assert_eq!(v["connection_retries"], json!(0));
    assert!(v.get("input_tokens_server_usage").is_none());

    m.client.connection_retries = 2;
    m.client.prompt_tokens = Some(crate::metrics::PromptTokenCheck {
        requests_with_usage: 3,
        server_tokens: 190,
        dataset_tokens: 180,
        mismatched_requests: 1,
        constant_offset: None,
    });
    let text = console(&m, &SideReports::default(), &run());
    let line = |label: &str, value: &str| format!("{label:<40} {value:<10}\n");
    assert!(
        text.contains(&line("Resent on a fresh connection:", "2")),
        "{text}"
    );
    assert!(
        text.contains(&line("Input tokens (server usage):", "190")),
        "{text}"
    );
    assert!(
        text.contains(&line("Input tokens (dataset count):", "180")),
        "{text}"
    );
    let v = result_json(&m, &run(), false);
    assert_eq!(v["connection_retries"], json!(2));
    assert_eq!(v["input_tokens_server_usage"], json!(190));
    assert_eq!(v["input_tokens_dataset_count"], json!(180));
    assert_eq!(v["requests_with_server_prompt_usage"], json!(3));
    assert_eq!(v["input_token_count_mismatches"], json!(1));
    assert!(v.get("input_token_count_offset").is_none());
    // Every request counted 3 more by the server (a template's tokens).
    m.client.prompt_tokens = Some(crate::metrics::PromptTokenCheck {
        requests_with_usage: 3,
        server_tokens: 189,
        dataset_tokens: 180,
        mismatched_requests: 3,
        constant_offset: Some(3),
    });
    assert_eq!(
        result_json(&m, &run(), false)["input_token_count_offset"],
        json!(3)
    );
}

#[test]
fn the_servers_cache_counters_are_reported_when_it_has_them() {
    let m = full_metrics();
    let quiet = console(&m, &SideReports::default(), &run());
    assert!(!quiet.contains("Server Metrics"), "{quiet}");
    assert!(
        result_json(&m, &run(), false)
            .get("server_cached_prompt_tokens")
            .is_none()
    );

    let side = SideReports {
        server_metrics: Some(crate::server_metrics::ServerReport {
            server: "llama.cpp",
            cache: Some(crate::server_metrics::ServerCache {
                server: "llama.cpp",
                cached_prompt_tokens: 900,
                queried_prompt_tokens: 1000,
            }),
            ..Default::default()
        }),
        ..SideReports::default()
    };
    let text = console(&m, &side, &run());
    let line = |label: &str, value: &str| format!("{label:<40} {value:<10}\n");
    assert!(
        text.contains("=========== Server Metrics (/metrics) ============\n"),
        "{text}"
    );
    assert!(
        text.contains(&line("Server counters:", "llama.cpp")),
        "{text}"
    );
    assert!(
        text.contains(&line("Prompt tokens served from the cache:", "900")),
        "{text}"
    );
    assert!(
        text.contains(&line("Prefix cache hit rate (%):", "90.00")),
        "{text}"
    );
    let v = result_json_beside(&m, &side, &run(), false);
    assert_eq!(v["server_metrics_source"], json!("llama.cpp"));
    assert_eq!(v["server_cached_prompt_tokens"], json!(900));
    assert_eq!(v["server_queried_prompt_tokens"], json!(1000));
    assert_eq!(v["server_prefix_cache_hit_rate"], json!(0.9));
}

/// vLLM's speculative-decoding lines inside its block and its keys before the metric
/// sections; the other servers' figures in the server block and `server_*` keys.
#[test]
fn speculative_decoding_and_server_gauges_are_reported_as_found() {
    use crate::server_metrics::ServerReport;
    use crate::server_metrics::report::{Peak, QueueTime, SpecGauges, TimelinePoint};
    use crate::server_metrics::spec_decode::SpecDecodeStats;
    let m = full_metrics();
    let spec = SpecDecodeStats {
        num_drafts: 200,
        draft_tokens: 600,
        accepted_tokens: 300,
        acceptance_rate: 50.0,
        acceptance_length: 2.5,
        per_position_acceptance_rates: vec![0.8, 0.5, 0.2],
    };
    let mut side = SideReports {
        server_metrics: Some(ServerReport {
            server: "vllm",
            spec_decode: Some(spec),
            preemptions: Some(5),
            queue_time: Some(QueueTime {
                requests: 10,
                mean_ms: 250.0,
            }),
            kv_cache_usage: Some(Peak {
                metric: "vllm:kv_cache_usage_perc",
                peak: 0.75,
            }),
            timeline: vec![TimelinePoint {
                t: 0.5,
                values: vec![("vllm:kv_cache_usage_perc", 0.75)],
            }],
            ..ServerReport::default()
        }),
        ..SideReports::default()
    };
    let text = console(&m, &side, &run());
    let vllm_part = &text[..text.find("=== Client Diagnostics").unwrap()];
    let row = |label: &str, value: &str| format!("{label:<40} {value:<10}\n");
    let expected = [
        format!("{}Speculative Decoding{}\n", "-".repeat(15), "-".repeat(15)),
        row("Acceptance rate (%):", "50.00"),
        row("Acceptance length:", "2.50"),
        row("Drafts:", "200"),
        row("Draft tokens:", "600"),
        row("Accepted tokens:", "300"),
        "Per-position acceptance (%):\n".to_owned(),
        row("  Position 0:", "80.00"),
        row("  Position 1:", "50.00"),
        row("  Position 2:", "20.00"),
        format!("{}\n", "=".repeat(50)),
    ]
    .concat();
    // Inside vLLM's block: its closing line right after the last position.
    assert!(vllm_part.contains(&expected), "{text}");
    let line = |label: &str, value: &str| format!("{label:<40} {value:<10}\n");
    assert!(
        text.contains(&line("Peak KV-cache usage (%):", "75.00")),
        "{text}"
    );
    assert!(text.contains(&line("Preemptions:", "5")), "{text}");
    assert!(
        text.contains(&line("Mean server queue time (ms):", "250.00")),
        "{text}"
    );
    assert!(!text.contains("Prefix cache hit rate (%)"), "{text}");

    let v = result_json_beside(&m, &side, &run(), false);
    assert_eq!(v["spec_decode_acceptance_rate"], json!(50.0));
    assert_eq!(v["spec_decode_acceptance_length"], json!(2.5));
    assert_eq!(v["spec_decode_num_drafts"], json!(200));
    assert_eq!(v["spec_decode_draft_tokens"], json!(600));
    assert_eq!(v["spec_decode_accepted_tokens"], json!(300));
    assert_eq!(
        v["spec_decode_per_position_acceptance_rates"],
        json!([0.8, 0.5, 0.2])
    );
    // vLLM's keys come before its metric sections, as vLLM adds them.
    let doc = super::json::result_doc(&m, &side, &run(), false);
    let keys: Vec<&str> = doc.keys().collect();
    let at = |k: &str| keys.iter().position(|x| *x == k).unwrap();
    assert!(at("spec_decode_acceptance_rate") < at("mean_ttft_ms"));
    assert_eq!(v["server_metrics_source"], json!("vllm"));
    assert_eq!(v["server_kv_cache_usage_peak"], json!(0.75));
    assert_eq!(v["server_preemptions"], json!(5));
    assert_eq!(v["server_mean_queue_time_ms"], json!(250.0));
    assert_eq!(v["server_queue_time_requests"], json!(10));
    assert_eq!(
        v["server_metrics_timeline"],
        json!([{"t": 0.5, "vllm:kv_cache_usage_perc": 0.75}])
    );
    assert!(v.get("server_cached_prompt_tokens").is_none());
    assert!(v.get("server_spec_decode_acceptance_rate").is_none());

    // SGLang's gauges go in the server block, not vLLM's lines.
    side.server_metrics = Some(ServerReport {
        server: "sglang",
        spec_gauges: Some(SpecGauges {
            acceptance_rate: 60.0,
            acceptance_length: 2.8,
        }),
        ..ServerReport::default()
    });
    let text = console(&m, &side, &run());
    assert!(!text.contains("Speculative Decoding"), "{text}");
    assert!(
        text.contains(&line("Spec. decode acceptance length:", "2.80")),
        "{text}"
    );
    let v = result_json_beside(&m, &side, &run(), false);
    assert!(v.get("spec_decode_acceptance_rate").is_none());
    assert_eq!(v["server_spec_decode_acceptance_rate"], json!(60.0));
}

#[test]
fn client_cpu_and_http_client_are_reported_when_measured() {
    let m = full_metrics();
    let quiet = console(&m, &SideReports::default(), &run());
    assert!(!quiet.contains("CPU") && !quiet.contains("HTTP client"));
    let v = result_json(&m, &run(), false);
    assert!(v.get("client_cpu_seconds").is_none() && v.get("http_client").is_none());

    let side = measured_client();
    let text = console(&m, &side, &run());
    let line = |label: &str, value: &str| format!("{label:<40} {value:<10}\n");
    assert!(text.contains(&line("HTTP client:", "h1")), "{text}");
    assert!(
        text.contains(&line("Client CPU time (s):", "4.00")),
        "{text}"
    );
    // 4 s of CPU over the fixture's 10 s run.
    assert!(
        text.contains(&line("Client CPU busy (% of one core):", "40.00")),
        "{text}"
    );
    assert!(
        text.contains(&line("Decode share of client CPU (%):", "25.00")),
        "{text}"
    );
    let v = result_json_beside(&m, &side, &run(), false);
    assert_eq!(v["http_client"], json!("h1"));
    assert_eq!(v["client_cpu_seconds"], json!(4.0));
    assert_eq!(v["decode_cpu_seconds"], json!(1.0));
    assert_eq!(v["decode_cpu_share"], json!(0.25));
}

/// What the client measured of itself: the HTTP client, and 4 s of CPU, 1 s of it decoding.
fn measured_client() -> SideReports {
    SideReports {
        http_client: Some("h1"),
        client_cpu: Some(crate::metrics::ClientCpu {
            total_s: 4.0,
            decode_s: 1.0,
        }),
        ..SideReports::default()
    }
}

/// A run that takes every branch of the result: metadata (one key, `completed`, that the
/// benchmark's own key overrides in place, as in vLLM's dict merge), a ramp-up with rate
/// changes, a finite rate with a concurrency cap (the queue-inclusive section), the
/// client's CPU and HTTP client, and an interruption.
fn golden_run() -> (Metrics, SideReports, RunInfo, SaveOptions) {
    let m = full_metrics();
    let side = measured_client();
    let r = RunInfo {
        label: Some("mine".into()),
        request_rate: 8.0,
        ramp_up: Some(linear_ramp_up()),
        rps_change_events: rps_changes(),
        metadata: vec![
            ("tensor_parallel_size".into(), "2".into()),
            ("completed".into(), "overridden".into()),
        ],
        ..run()
    };
    let options = SaveOptions {
        save_result: true,
        result_filename: Some("result.json".into()),
        pytorch_format: true,
        interrupted: Some(save::Interruption {
            reason: "SIGINT received".into(),
            not_sent: 7,
            cancelled: 2,
        }),
        ..SaveOptions::default()
    };
    (m, side, r, options)
}

/// The streamed result is byte for byte the file the JSON-tree writer it replaced
/// produced for [`golden_run`] (`testdata/result-detailed.json` was written by that
/// writer). Without `--save-detailed` the golden is that file with vLLM's seven lists
/// deleted by Python (`del`, which keeps the other keys' order;
/// `testdata/result-summary.json`).
#[test]
fn saved_result_matches_the_golden_files() {
    let (m, side, r, options) = golden_run();
    for (detailed, golden) in [
        (true, include_str!("testdata/result-detailed.json")),
        (false, include_str!("testdata/result-summary.json")),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let options = SaveOptions {
            save_detailed: detailed,
            result_dir: Some(dir.path().to_path_buf()),
            ..options.clone()
        };
        let path = save(&m, &side, &r, &options).unwrap().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, golden, "detailed: {detailed}");
        // The PyTorch records are vLLM's, built from the result as vLLM builds them. (The
        // result is taken as a tree, not parsed from the golden text: serde_json's parser
        // may round a float's last bit differently.)
        let records = std::fs::read(dir.path().join("result.pytorch.json")).unwrap();
        let mut doc = result_doc(&m, &side, &r, detailed);
        options.interrupted.as_ref().unwrap().mark(&mut doc);
        let Value::Object(result) = serde_json::to_value(&doc).unwrap() else {
            unreachable!("the result is an object")
        };
        assert_eq!(python_bytes(&result), golden.as_bytes());
        let want = python_bytes(&vllm_pytorch_records(&result, &r.args));
        assert_eq!(
            String::from_utf8(records).unwrap(),
            String::from_utf8(want).unwrap(),
            "detailed: {detailed}"
        );
    }
}

/// The statistics vLLM exports as PyTorch benchmark records, in its order. Written out
/// here, not taken from `report::json`, because it is the reference the streamed records
/// are checked against.
const VLLM_PYTORCH_METRICS: [&str; 12] = [
    "median_ttft_ms",
    "mean_ttft_ms",
    "std_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "std_tpot_ms",
    "p99_tpot_ms",
    "median_itl_ms",
    "mean_itl_ms",
    "std_itl_ms",
    "p99_itl_ms",
];

/// vLLM's `save_to_pytorch_benchmark_format` and `convert_to_pytorch_benchmark_format`
/// over a parsed result, written plainly as a reference for the streamed records.
fn vllm_pytorch_records(
    result: &serde_json::Map<String, Value>,
    args: &serde_json::Map<String, Value>,
) -> Vec<Value> {
    const IGNORED: [&str; 4] = ["ttfts", "itls", "generated_texts", "errors"];
    let extra_info: serde_json::Map<String, Value> = result
        .iter()
        .filter(|(k, _)| {
            !VLLM_PYTORCH_METRICS.contains(&k.as_str()) && !IGNORED.contains(&k.as_str())
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut args = args.clone();
    let mut records = Vec::new();
    for name in VLLM_PYTORCH_METRICS {
        let Some(value) = result.get(name) else {
            continue;
        };
        if args.get("tensor_parallel_size").is_none()
            && let Some(tp) = extra_info.get("tensor_parallel_size")
        {
            args.insert("tensor_parallel_size".into(), tp.clone());
        }
        records.push(json!({
            "benchmark": {"name": "vLLM benchmark", "extra_info": {"args": args}},
            "model": {"name": args["model"]},
            "metric": {"name": name, "benchmark_values": [value], "extra_info": extra_info},
        }));
    }
    records
}

/// Appending streams the earlier results into the new file unchanged, byte for byte,
/// whatever they hold (here a document that is not even ours), then a newline and the
/// new result.
#[test]
fn append_keeps_earlier_results_byte_for_byte() {
    let (m, side, r, options) = golden_run();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("result.json");
    let earlier = "{\"run\": 0, \"text\": \"caf\u{e9}\"}\n\n{\"x\": 1e-05}";
    std::fs::write(&path, earlier).unwrap();
    let append = SaveOptions {
        save_result: false,
        append_result: true,
        save_detailed: true,
        result_dir: Some(dir.path().to_path_buf()),
        ..options
    };
    save(&m, &side, &r, &append).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let golden = include_str!("testdata/result-detailed.json");
    assert_eq!(text, format!("{earlier}\n{golden}"));
}

#[test]
fn turns_and_reported_cache_hits_are_extra_keys_and_a_block() {
    let plain = full_metrics();
    assert!(!console(&plain, &SideReports::default(), &run()).contains("Conversations"));
    let v = result_json(&plain, &run(), false);
    for key in ["per_turn", "prefix_cache_hit_rate", "cached_prompt_tokens"] {
        assert!(v.get(key).is_none(), "{key}");
    }

    // The fixture's requests as turns 0, 1, 0, 1 of two conversations; two report
    // cached tokens.
    let mut records = fixture();
    for (i, r) in records.iter_mut().enumerate() {
        r.turn = Some(i as u32 % 2);
    }
    records[1].cached_prompt_tokens = Some(25);
    records[3].cached_prompt_tokens = Some(0);
    let config = full_metrics().config;
    let m = calculate(records, 10.0, Some(&words), &config).unwrap();
    let v = result_json(&m, &run(), false);
    // vLLM's keys are unchanged.
    for (key, value) in result_json(&plain, &run(), false).as_object().unwrap() {
        assert_eq!(&v[key], value, "{key}");
    }
    let turns = v["per_turn"].as_array().unwrap();
    assert_eq!(turns.len(), 2);
    assert_eq!(
        (
            &turns[0]["turn"],
            &turns[0]["completed"],
            &turns[0]["failed"]
        ),
        (&json!(0), &json!(1), &json!(1))
    );
    assert_eq!(
        (
            &turns[1]["turn"],
            &turns[1]["completed"],
            &turns[1]["failed"]
        ),
        (&json!(1), &json!(2), &json!(0))
    );
    // Turn 0's one success is the fixture's request 0: TTFT 100 ms.
    assert_eq!(turns[0]["mean_ttft_ms"], json!(100.0));
    assert_eq!(turns[0]["p99_ttft_ms"], json!(100.0));
    // Turn 1: requests 1 and 3, TTFT 200 and 400 ms; ITL only request 3's 200 and 100.
    let near = |v: &Value, want: f64| (v.as_f64().unwrap() - want).abs() < 1e-9;
    assert!(near(&turns[1]["median_ttft_ms"], 300.0), "{turns:?}");
    assert!(near(&turns[1]["mean_itl_ms"], 150.0), "{turns:?}");
    for key in ["mean_tpot_ms", "p50_e2el_ms", "p99_itl_ms"] {
        assert!(turns[1].get(key).is_some(), "{key}");
    }
    assert_eq!(v["requests_with_cached_tokens"], json!(2));
    assert_eq!(v["cached_prompt_tokens"], json!(25));
    assert_eq!(v["prompt_tokens_of_cache_reports"], json!(50 + 30));

    let text = console(&m, &SideReports::default(), &run());
    assert!(text.contains(" Conversations and Prefix Cache "), "{text}");
    let line = |label: &str, value: &str| format!("{label:<40} {value:<10}\n");
    assert!(
        text.contains(&line("Prefix cache hit rate, reported (%):", "31.25")),
        "{text}"
    );
    assert!(text.contains("Turn Completed"), "{text}");
}

#[test]
fn rtfx_is_written_and_printed_only_for_audio() {
    let mut m = full_metrics();
    let r = run();
    assert_eq!(result_json(&m, &r, false)["rtfx"], json!(0.0));
    assert!(!console(&m, &SideReports::default(), &r).contains("RTFx"));
    // The fixture's successful requests (0, 1, 3) uploaded 4 s of audio in its 10 s.
    m.set_rtfx(&[1.5, 2.0, 7.0, 0.5], None);
    let doc = result_json(&m, &r, false);
    assert_eq!(doc["rtfx"], json!(0.4));
    // vLLM's key order: right after max_concurrent_requests.
    let keys: Vec<&String> = doc.as_object().unwrap().keys().collect();
    let at = keys.iter().position(|k| *k == "rtfx").unwrap();
    assert_eq!(keys[at - 1], "max_concurrent_requests");
    let text = console(&m, &SideReports::default(), &r);
    let line = "RTFx (Inverse Real-Time Factor):         0.40      \n";
    let peak = text.find("Peak concurrent requests:").unwrap();
    let at = text.find(line).unwrap_or_else(|| panic!("{text}"));
    assert!(peak < at && at < text.find("Total token throughput").unwrap());
}

/// The server's per-request timing (vLLM's `--enable-per-request-metrics`) on two of the
/// three successful requests: extra keys (p99 whatever the run's percentiles), the
/// per-request lists in seconds with `null` where a request had none (with
/// `--save-detailed` only), and a console block; none of it without.
#[test]
fn the_servers_per_request_timing_is_reported_when_responses_carried_it() {
    let quiet = metrics_with(MetricsConfig::default());
    let v = result_json(&quiet, &run(), true);
    for key in [
        "server_timing_requests",
        "mean_server_ttft_ms",
        "server_ttfts",
    ] {
        assert!(v.get(key).is_none(), "{key}");
    }
    assert!(!console(&quiet, &SideReports::default(), &run()).contains("Server Timing"));

    let timed = |queue: f64, ttft: f64| crate::record::ServerTiming {
        queue: Some(queue),
        ttft: Some(ttft),
        generation: None,
        mean_itl: None,
    };
    let mut records = fixture();
    records[0].server_timing = Some(timed(0.025, 0.05));
    records[3].server_timing = Some(timed(0.1, 0.2));
    let config = MetricsConfig {
        percentiles: vec![50.0],
        ..MetricsConfig::default()
    };
    let m = calculate(records, 10.0, Some(&words), &config).unwrap();
    let v = result_json(&m, &run(), true);
    let ms = |key: &str| v[key].as_f64().unwrap_or_else(|| panic!("{key}: {v:#}"));
    assert_eq!(v["server_timing_requests"], json!(2));
    assert!((ms("mean_server_ttft_ms") - 125.0).abs() < 1e-9);
    assert!((ms("median_server_ttft_ms") - 125.0).abs() < 1e-9);
    assert!(ms("p50_server_ttft_ms") > 0.0 && ms("p99_server_ttft_ms") > 0.0);
    assert!((ms("mean_server_queue_ms") - 62.5).abs() < 1e-9);
    // TTFT 0.1 s less 0.025 and 0.05; 0.4 s less 0.1 and 0.2.
    assert!((ms("mean_client_overhead_ms") - 62.5).abs() < 1e-9);
    assert_eq!(v["server_ttfts"], json!([0.05, null, null, 0.2]));
    assert_eq!(v["server_queue_times"], json!([0.025, null, null, 0.1]));
    let summary = result_json(&m, &run(), false);
    assert!(summary.get("server_ttfts").is_none() && summary.get("server_queue_times").is_none());
    assert_eq!(summary["mean_server_ttft_ms"], v["mean_server_ttft_ms"]);
    let text = console(&m, &SideReports::default(), &run());
    let line = |label: &str, value: &str| format!("{label:<40} {value:<10}\n");
    assert!(
        text.contains(&line("Requests with server timing:", "2")),
        "{text}"
    );
    assert!(
        text.contains(&line("Mean client overhead (ms):", "62.50")),
        "{text}"
    );
}

/// `--cost-per-hour` on a run where every request failed: the price and the run's cost
/// are there, each figure with nothing to divide it by is `null`, not an infinity.
#[test]
fn cost_keys_are_null_where_nothing_divides_them() {
    let failed = fixture().into_iter().filter(|r| !r.succeeded()).collect();
    let config = MetricsConfig {
        cost_per_hour_usd: Some(3.5),
        ..MetricsConfig::default()
    };
    let m = calculate(failed, 10.0, Some(&words), &config).unwrap();
    let v = result_json(&m, &run(), false);
    assert_eq!(v["cost_per_hour_usd"], json!(3.5));
    assert_eq!(v["run_cost_usd"], json!(3.5 * 10.0 / 3600.0));
    for key in [
        "cost_per_million_input_tokens_usd",
        "cost_per_million_output_tokens_usd",
        "cost_per_million_tokens_usd",
        "cost_per_request_usd",
    ] {
        assert_eq!(v[key], Value::Null, "{key}");
    }
}
