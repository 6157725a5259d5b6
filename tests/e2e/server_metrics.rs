//! End-to-end: what the server's own `/metrics` says, read by `bench serve` against the
//! mock exposing a server family's metrics with values that follow its load by known
//! rules (`--server-metrics FAMILY`, see `crates/mock/src/server_metrics.rs`): the
//! reported deltas and peaks are derived from the mock's configuration and the run.

use std::time::Duration;

use bench::mock::{MockConfig, ServerFamily, ServerMetrics};

use crate::common::*;

fn family(family: ServerFamily, config: ServerMetrics) -> MockConfig {
    MockConfig {
        server_metrics: ServerMetrics {
            family: Some(family),
            ..config
        },
        ..MockConfig::default()
    }
}

/// vLLM's family: its speculative-decoding keys and console lines computed as vLLM
/// computes them, preemptions and the mean queue time, from the run's own requests.
#[test]
fn vllm_spec_decode_preemptions_and_queue_time_are_the_runs() {
    let m = mock(family(
        ServerFamily::Vllm,
        ServerMetrics {
            spec_tokens: 3,
            spec_accepted: 2,
            queue_ms: 40,
            preempt_every: 2,
            ..ServerMetrics::default()
        },
    ));
    let out = Bench::against(&m.url)
        .backend("openai")
        .random(16, 8)
        .prompts(10)
        .args(["--num-warmups", "2"])
        .save_detailed()
        .run()
        .assert_success();
    let r = out.json();
    assert_eq!(r["completed"], 10, "{out}");
    // Each request of n tokens made ceil(n / 3) drafts of 3 tokens, 2 accepted each; the
    // ready check and warm-ups finished before the first scrape and do not count.
    let drafts: u64 = r["output_lens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap().div_ceil(3))
        .sum();
    assert!(drafts > 0);
    assert_eq!(r["spec_decode_num_drafts"], drafts, "{r}");
    assert_eq!(r["spec_decode_draft_tokens"], 3 * drafts);
    assert_eq!(r["spec_decode_accepted_tokens"], 2 * drafts);
    let rate = r["spec_decode_acceptance_rate"].as_f64().unwrap();
    assert!((rate - 200.0 / 3.0).abs() < 1e-9, "{rate}");
    assert_eq!(r["spec_decode_acceptance_length"], 3.0);
    assert_eq!(
        r["spec_decode_per_position_acceptance_rates"],
        serde_json::json!([1.0, 1.0, 0.0])
    );
    assert_eq!(r["server_metrics_source"], "vllm");
    assert_eq!(r["server_preemptions"], 5);
    assert_eq!(r["server_queue_time_requests"], 10);
    let queue = r["server_mean_queue_time_ms"].as_f64().unwrap();
    assert!((queue - 40.0).abs() < 1e-6, "{queue}");
    let text = out.to_string();
    for expected in [
        format!(
            "\n{}Speculative Decoding{}\n",
            "-".repeat(15),
            "-".repeat(15)
        ),
        format!("{:<40} {:<10}\n", "Acceptance rate (%):", "66.67"),
        format!("{:<40} {:<10}\n", "Acceptance length:", "3.00"),
        format!("{:<40} {:<10}\n", "Drafts:", drafts),
        "Per-position acceptance (%):\n".to_owned(),
        format!("{:<40} {:<10}\n", "  Position 2:", "0.00"),
        format!("{:<40} {:<10}\n", "Preemptions:", 5),
        format!("{:<40} {:<10}\n", "Mean server queue time (ms):", "40.00"),
    ] {
        assert!(text.contains(&expected), "{expected:?} not in\n{text}");
    }
    // Without an interval, no peak and a note saying what gives one.
    assert!(r.get("server_kv_cache_usage_peak").is_none(), "{r}");
    assert!(text.contains("--server-metrics-interval"), "{text}");
}

/// Another family (SGLang's names), read during the run: the KV-cache usage peak is the
/// concurrency cap over the mock's capacity, the running peak the cap, and the timeline
/// is in the result.
#[test]
fn an_interval_scrape_gives_the_peaks_of_sglangs_gauges() {
    let mut config = family(
        ServerFamily::Sglang,
        ServerMetrics {
            kv_capacity: 8,
            queue_ms: 5,
            ..ServerMetrics::default()
        },
    );
    config.ttft = Duration::from_millis(50);
    config.itl = Duration::from_millis(20);
    let m = mock(config);
    let out = Bench::against(&m.url)
        .backend("openai")
        .random(16, 16)
        .prompts(8)
        .args([
            "--max-concurrency",
            "4",
            "--server-metrics-interval",
            "0.03",
        ])
        .save_result()
        .run()
        .assert_success();
    let r = out.json();
    assert_eq!(r["completed"], 8, "{out}");
    assert_eq!(r["server_metrics_source"], "sglang");
    assert_eq!(r["server_kv_cache_usage_peak"], 0.5, "{r}");
    assert_eq!(r["server_requests_running_peak"], 4.0);
    assert_eq!(r["server_requests_waiting_peak"], 0.0);
    assert_eq!(r["server_queue_time_requests"], 8);
    let timeline = r["server_metrics_timeline"].as_array().unwrap();
    // About 2 x 350 ms of requests read every 30 ms.
    assert!(timeline.len() >= 5, "{timeline:?}");
    let times: Vec<f64> = timeline.iter().map(|p| p["t"].as_f64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
    assert!(
        timeline
            .iter()
            .all(|p| p["sglang:token_usage"].as_f64().unwrap() <= 0.5)
    );
    let text = out.to_string();
    assert!(
        text.contains(&format!(
            "{:<40} {:<10}\n",
            "Peak KV-cache usage (%):", "50.00"
        )),
        "{text}"
    );
    assert!(!text.contains("Speculative Decoding"), "{text}");
    // SGLang's prefix-cache counters are not in the mock's text: one note says so.
    assert!(
        text.contains("not in the server's /metrics (sglang): prefix-cache counters"),
        "{text}"
    );
}

/// A server without `/metrics` (404): a note, a normal result without server keys; and
/// `--no-server-metrics` does not ask.
#[test]
fn a_server_without_metrics_gives_a_note_and_a_normal_result() {
    let m = mock(family(ServerFamily::None, ServerMetrics::default()));
    let out = Bench::against(&m.url)
        .backend("openai")
        .random(16, 4)
        .prompts(4)
        .args(["--server-metrics-interval", "0.05"])
        .save_result()
        .run()
        .assert_success();
    let r = out.json();
    assert_eq!(r["completed"], 4, "{out}");
    assert!(r.get("server_metrics_source").is_none(), "{r}");
    assert!(r.get("server_metrics_timeline").is_none(), "{r}");
    let text = out.to_string();
    assert!(text.contains("no server metrics ("), "{text}");
    assert!(text.contains("404"), "{text}");
    assert!(!text.contains("Server Metrics"), "{text}");

    let m = mock(family(
        ServerFamily::Vllm,
        ServerMetrics {
            preempt_every: 1,
            ..ServerMetrics::default()
        },
    ));
    let out = Bench::against(&m.url)
        .backend("openai")
        .random(16, 4)
        .prompts(4)
        .arg("--no-server-metrics")
        .save_result()
        .run()
        .assert_success();
    let r = out.json();
    assert_eq!(r["completed"], 4, "{out}");
    assert!(r.get("server_metrics_source").is_none(), "{r}");
    let text = out.to_string();
    assert!(
        !text.contains("server metrics") && !text.contains("/metrics"),
        "{text}"
    );
}
