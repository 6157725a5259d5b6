//! The result JSON with vLLM's keys, value types and key order (`main` in
//! `vllm/benchmarks/serve.py`: run settings, then `benchmark()`'s result, then the metric
//! sections), followed by our client diagnostics under new keys; and the PyTorch OSS
//! benchmark records vLLM writes beside it (`.pytorch.json`).
//!
//! Key order is kept when serde_json's `preserve_order` feature is on (otherwise maps
//! sort their keys; every key and value is the same either way).

use serde_json::{Map, Value, json};

use super::console::{percentile_word, reported_sections};
use super::{RunInfo, rps_change_timestamp, strategy_name};
use crate::metrics::Metrics;

/// Per-request lists that vLLM drops unless `--save-detailed` (it keeps `latencies` and
/// `queue_times` regardless).
pub const DETAILED_KEYS: [&str; 7] = [
    "input_lens",
    "output_lens",
    "start_times",
    "ttfts",
    "itls",
    "generated_texts",
    "errors",
];

/// The metrics vLLM's `save_to_pytorch_benchmark_format` turns into records, in order.
const PYTORCH_METRICS: [&str; 12] = [
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

/// Large raw lists vLLM leaves out of the PyTorch records' `extra_info`.
const PYTORCH_IGNORED: [&str; 4] = ["ttfts", "itls", "generated_texts", "errors"];

/// A float as vLLM's JSON holds it. JSON has no infinity: an infinite value is written as
/// the string `"inf"`, as vLLM does for `request_rate` and its `InfEncoder` does for
/// every float; NaN (never produced by the metrics) becomes `null`.
pub fn float(x: f64) -> Value {
    if x.is_infinite() {
        Value::from("inf")
    } else {
        serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
    }
}

fn floats(xs: &[f64]) -> Value {
    Value::Array(xs.iter().copied().map(float).collect())
}

/// The result object vLLM saves, plus our client diagnostics. Without `detailed` the
/// per-request lists in [`DETAILED_KEYS`] are removed, as vLLM does without
/// `--save-detailed`.
pub fn result_json(m: &Metrics, run: &RunInfo, detailed: bool) -> Value {
    let mut r = Map::new();
    // Run settings (vLLM's `main`).
    r.insert("date".into(), json!(run.date_string()));
    r.insert("endpoint_type".into(), json!(run.backend));
    r.insert("backend".into(), json!(run.backend));
    r.insert("label".into(), json!(run.label));
    r.insert("model_id".into(), json!(run.model_id));
    r.insert("tokenizer_id".into(), json!(run.tokenizer_id));
    r.insert("num_prompts".into(), json!(run.num_prompts));
    for (key, value) in &run.metadata {
        r.insert(key.clone(), json!(value));
    }
    r.insert("request_rate".into(), float(run.request_rate));
    r.insert("burstiness".into(), float(run.burstiness));
    r.insert("max_concurrency".into(), json!(run.max_concurrency));
    if let Some(ramp) = &run.ramp_up {
        // vLLM's ramp-up rates are integer flags.
        r.insert(
            "ramp_up_strategy".into(),
            json!(strategy_name(ramp.strategy)),
        );
        r.insert("ramp_up_start_rps".into(), json!(ramp.start_rps as u64));
        r.insert("ramp_up_end_rps".into(), json!(ramp.end_rps as u64));
    }

    // `benchmark()`'s result; its keys win over metadata of the same name.
    let p = &m.per_request;
    let goodput = if m.config.goodput.is_empty() {
        Value::Null
    } else {
        float(m.request_goodput)
    };
    let results = [
        ("duration", float(m.duration_s)),
        ("completed", json!(m.completed)),
        ("failed", json!(m.failed)),
        ("total_input_tokens", json!(m.total_input)),
        ("total_output_tokens", json!(m.total_output)),
        ("request_throughput", float(m.request_throughput)),
        ("request_goodput", goodput),
        ("output_throughput", float(m.output_throughput)),
        ("total_token_throughput", float(m.total_token_throughput)),
        ("input_lens", json!(p.input_lens)),
        ("output_lens", json!(p.output_lens)),
        ("ttfts", floats(&p.ttfts)),
        (
            "itls",
            Value::Array(p.itls.iter().map(|gaps| floats(gaps)).collect()),
        ),
        ("latencies", floats(&p.latencies)),
        ("start_times", floats(&p.start_times)),
        ("queue_times", floats(&p.queue_times)),
        ("generated_texts", json!(p.generated_texts)),
        ("errors", json!(p.errors)),
        ("max_output_tokens_per_s", float(m.max_output_tokens_per_s)),
        ("max_concurrent_requests", json!(m.max_concurrent_requests)),
        // Inverse real-time factor of audio benchmarks; no audio input here.
        ("rtfx", float(0.0)),
    ];
    for (key, value) in results {
        r.insert(key.into(), value);
    }
    if !run.rps_change_events.is_empty() {
        let events = run
            .rps_change_events
            .iter()
            .map(|e| {
                // vLLM stamps the moment the request that first runs at the new rate is
                // dispatched: its actual send time, else its scheduled one.
                let at = e
                    .request
                    .and_then(|i| p.indices.binary_search(&i).ok())
                    .map_or(e.offset, |position| p.start_times[position]);
                json!({"rps": e.rps, "timestamp": rps_change_timestamp(run.started_at, at)})
            })
            .collect();
        r.insert("rps_change_events".into(), Value::Array(events));
    }
    for (metric, _, _) in reported_sections(m, run) {
        let name = metric.name();
        let s = m.summary(metric);
        r.insert(format!("mean_{name}_ms"), float(s.mean));
        r.insert(format!("median_{name}_ms"), float(s.median));
        r.insert(format!("std_{name}_ms"), float(s.std));
        for &(p, value) in &s.percentiles {
            r.insert(format!("p{}_{name}_ms", percentile_word(p)), float(value));
        }
    }

    // Client diagnostics (not in vLLM).
    let c = &m.client;
    r.insert("requests_sent".into(), json!(c.sent));
    // Failed requests per error kind (`{}` when none failed), most frequent first.
    let by_kind: Map<String, Value> = m
        .failures_by_kind
        .iter()
        .map(|(kind, n)| (kind.clone(), json!(n)))
        .collect();
    r.insert("failures_by_kind".into(), Value::Object(by_kind));
    r.insert(
        "achieved_request_rate".into(),
        float(c.achieved_request_rate),
    );
    r.insert("achieved_send_rate".into(), float(c.achieved_send_rate));
    r.insert("schedule_lag_ms_mean".into(), float(c.schedule_lag_ms.mean));
    r.insert(
        "schedule_lag_ms_median".into(),
        float(c.schedule_lag_ms.median),
    );
    r.insert("schedule_lag_ms_p99".into(), float(c.schedule_lag_ms.p99));
    r.insert("schedule_lag_ms_max".into(), float(c.schedule_lag_ms.max));
    if let Some(client) = c.http_client {
        r.insert("http_client".into(), json!(client));
    }
    if let Some(cpu) = c.cpu {
        r.insert("client_cpu_seconds".into(), float(cpu.total_s));
        r.insert("decode_cpu_seconds".into(), float(cpu.decode_s));
        r.insert("decode_cpu_share".into(), float(cpu.decode_s / cpu.total_s));
    }
    if let Some(check) = &c.token_counts {
        r.insert(
            "requests_with_server_usage".into(),
            json!(check.requests_with_usage),
        );
        r.insert(
            "output_tokens_server_usage".into(),
            json!(check.server_tokens),
        );
        r.insert(
            "output_tokens_tokenizer_count".into(),
            json!(check.tokenizer_tokens),
        );
        r.insert(
            "output_token_count_mismatches".into(),
            json!(check.mismatched_requests),
        );
    }

    if !detailed {
        for key in DETAILED_KEYS {
            r.remove(key);
        }
    }
    Value::Object(r)
}

/// vLLM's PyTorch OSS benchmark records for a saved result: one record per TTFT, TPOT and
/// ITL statistic present in `result`, each carrying the run's `args` and every other
/// result key except the large raw lists.
pub fn pytorch_records(result: &Value, run: &RunInfo) -> Vec<Value> {
    let Some(result) = result.as_object() else {
        return Vec::new();
    };
    let extra_info: Map<String, Value> = result
        .iter()
        .filter(|(k, _)| !PYTORCH_METRICS.contains(&k.as_str()))
        .filter(|(k, _)| !PYTORCH_IGNORED.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut args = run.args.clone();
    // vLLM records the tensor-parallel size from `--metadata` when the args lack one.
    let tp_missing = args.get("tensor_parallel_size").is_none_or(python_falsy);
    if tp_missing && let Some(tp) = extra_info.get("tensor_parallel_size") {
        args.insert("tensor_parallel_size".into(), tp.clone());
    }
    let model = args.get("model").cloned().unwrap_or(Value::Null);
    PYTORCH_METRICS
        .iter()
        .filter_map(|name| result.get(*name).map(|value| (name, value)))
        .map(|(name, value)| {
            json!({
                "benchmark": {"name": "vLLM benchmark", "extra_info": {"args": args}},
                "model": {"name": model},
                "metric": {
                    "name": name,
                    "benchmark_values": [value],
                    "extra_info": extra_info,
                },
            })
        })
        .collect()
}

/// Python truthiness of a JSON value (`not tp` in vLLM).
fn python_falsy(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}
