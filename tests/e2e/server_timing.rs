//! vLLM's per-request timing (`--enable-per-request-metrics`) through the first-party
//! OpenAI backends, against the mock's `--per-request-metrics`: bench's per-request server
//! TTFT and queue time are exactly what the mock sent (its record at `/mock/requests`),
//! streamed and whole, in a run of one process and in the merge of its shards; the server's
//! TTFT, which starts at scheduling, is never more than bench's; and nothing of it appears
//! when the server sends none, or when the backend was built for a contract without it.

use std::path::Path;
use std::time::Duration;

use bench::mock::MockConfig;
use bench::mock::timing::RequestTiming;
use serde_json::Value;

use crate::common::*;

const PROMPTS: usize = 12;

/// The result keys that exist only when responses carried the server's timing.
const KEYS: [&str; 8] = [
    "server_timing_requests",
    "mean_server_ttft_ms",
    "median_server_ttft_ms",
    "p99_server_ttft_ms",
    "mean_server_queue_ms",
    "mean_client_overhead_ms",
    "server_ttfts",
    "server_queue_times",
];

/// A mock whose requests wait for the ones running (a queue time the mock reports) when
/// `per_request_metrics` is on.
fn server(per_request_metrics: bool) -> Mock {
    mock(MockConfig {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(2),
        ttft_per_running: Duration::from_millis(3),
        per_request_metrics,
        ..MockConfig::default()
    })
}

/// The run's requests, 4 at a time, each named `prefix` and its index.
fn workload(url: &str, prefix: &str) -> Bench {
    Bench::against(url)
        .random(16, 8)
        .prompts(PROMPTS as u64)
        .args(["--max-concurrency", "4", "--request-id-prefix", prefix])
}

/// A run of the workload through `backend`, streamed or not, with the per-request lists;
/// its result and the result file's text.
fn run(m: &Mock, backend: &str, stream: bool, prefix: &str) -> (Value, String) {
    let mut bench = workload(&m.url, prefix).backend(backend);
    if !stream {
        bench = bench.args(["--backend-option", "stream=false"]);
    }
    let out = bench.save_detailed().run().assert_success();
    let text = std::fs::read_to_string(result_file(out.result_dir())).unwrap();
    (out.json(), text)
}

/// The per-request list `key` of a result file's `text`, each number read from its own
/// digits (the shortest that read back as the value written, so `str::parse` gives that
/// value exactly, where `serde_json` may be a bit off); `None` for `null`.
fn exact_list(text: &str, key: &str) -> Vec<Option<f64>> {
    let quoted = format!("\"{key}\":");
    let at = text
        .find(&quoted)
        .unwrap_or_else(|| panic!("no {key} in the result"))
        + quoted.len();
    let list = text[at..].trim_start().strip_prefix('[').unwrap();
    let list = &list[..list.find(']').unwrap()];
    list.split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(|v| (v != "null").then(|| v.parse().unwrap()))
        .collect()
}

/// What the mock sent for request `id` (its last record of it).
fn sent(records: &[RequestTiming], id: &str) -> bench::mock::timing::SentMetrics {
    records
        .iter()
        .rfind(|r| r.id == id)
        .unwrap_or_else(|| panic!("the mock has no record of {id}"))
        .metrics
        .unwrap_or_else(|| panic!("the mock sent no metrics for {id}"))
}

/// Bench's per-request server TTFTs and queue times in `text` are, in seconds, exactly
/// what the mock sent for requests `prefix` 0..PROMPTS, and the server's TTFT is above 0
/// and at most bench's; the summary keys are there and the mean is the lists'.
fn check_exact(m: &Mock, result: &Value, text: &str, prefix: &str, what: &str) {
    let records = m.server.as_ref().unwrap().requests();
    let server_ttfts = exact_list(text, "server_ttfts");
    let queues = exact_list(text, "server_queue_times");
    let ttfts = exact_list(text, "ttfts");
    assert_eq!(server_ttfts.len(), PROMPTS, "{what}");
    for i in 0..PROMPTS {
        let metrics = sent(&records, &format!("{prefix}{i}"));
        let server_ttft = server_ttfts[i].unwrap();
        assert_eq!(
            server_ttft,
            metrics.time_to_first_token_ms / 1000.0,
            "{what}: request {i}"
        );
        assert_eq!(
            queues[i],
            Some(metrics.queue_time_ms / 1000.0),
            "{what}: request {i}"
        );
        let ttft = ttfts[i].unwrap();
        assert!(
            0.0 < server_ttft && server_ttft <= ttft,
            "{what}: request {i}: server TTFT {server_ttft} s, bench's {ttft} s"
        );
    }
    for key in KEYS {
        assert!(result.get(key).is_some(), "{what}: no {key}: {result:#}");
    }
    assert_eq!(result["server_timing_requests"], PROMPTS, "{what}");
    let mean = server_ttfts.iter().flatten().sum::<f64>() / PROMPTS as f64 * 1000.0;
    let reported = result["mean_server_ttft_ms"].as_f64().unwrap();
    assert!((reported - mean).abs() < 1e-9, "{what}: {reported} {mean}");
}

#[test]
fn the_servers_timing_of_each_request_is_what_the_server_sent() {
    let m = server(true);
    for backend in ["openai", "openai-chat"] {
        for stream in [true, false] {
            let prefix = format!("{backend}-{stream}-");
            let (result, text) = run(&m, backend, stream, &prefix);
            let what = format!("{backend}, stream={stream}");
            check_exact(&m, &result, &text, &prefix, &what);
        }
    }
    // Under load some requests waited: the queue times are not all 0.
    let records = m.server.as_ref().unwrap().requests();
    assert!(
        records
            .iter()
            .any(|r| r.metrics.is_some_and(|s| s.queue_time_ms > 0.0)),
        "{records:?}"
    );
}

#[test]
fn without_the_servers_timing_there_are_no_keys() {
    let m = server(false);
    let (result, text) = run(&m, "openai-chat", true, "plain-");
    assert_eq!(result["completed"], PROMPTS);
    for key in KEYS {
        assert!(result.get(key).is_none(), "{key} without server timing");
    }
    assert!(!text.contains("server_ttft"));
    // A backend built for 0.4.1, before the contract could say it, reads none either.
    let m = server(true);
    let old = repo().join("tests/fixtures/api-0.4.1/openai-chat.wasm");
    let (result, _) = run(&m, &old.display().to_string(), true, "old-");
    assert_eq!(result["completed"], PROMPTS);
    for key in KEYS {
        assert!(result.get(key).is_none(), "{key} from a 0.4.1 backend");
    }
}

/// The shards carry each record's server timing, so the merge reports it exactly as a
/// run of one process does.
#[test]
fn a_merge_of_shards_reports_the_servers_timing() {
    let m = server(true);
    let dir = tempfile::tempdir().unwrap();
    let files = crate::shard::run_shards(|| workload(&m.url, "shard-"), 2, dir.path());
    let output: &Path = &dir.path().join("merged.json");
    crate::shard::merge(&files, output).assert_success();
    let text = std::fs::read_to_string(output).unwrap();
    let merged: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(merged["completed"], PROMPTS, "{merged:#}");
    check_exact(&m, &merged, &text, "shard-", "2 shards merged");
}
