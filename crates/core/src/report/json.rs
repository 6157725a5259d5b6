//! The result JSON with vLLM's keys, value types and key order (`main` in
//! `vllm/benchmarks/serve.py`: run settings, then `benchmark()`'s result, then the metric
//! sections), followed by our client diagnostics under new keys; and the PyTorch OSS
//! benchmark records vLLM writes beside it (`.pytorch.json`).
//!
//! Both are written straight to their file ([`ResultDoc`] and [`PyTorchRecords`] are
//! `Serialize`): the per-request lists are read from the records as they are written, so
//! a run of 100,000 requests with `--save-detailed` never holds its result as a JSON tree
//! or as one string (either would take several times the records' own memory).

use serde::ser::{Serialize, Serializer};
use serde_json::{Map, Value, json};

use super::doc::{Field, List};
pub use super::doc::{ResultDoc, float};
use super::run_info::{RunInfo, rps_change_timestamp, strategy_name};
use super::sections::{percentile_word, reported_sections, steady_state_sections};
use crate::metrics::cost::Cost;
use crate::metrics::{EmbeddingStats, Metrics, PercentileMetric, Summary};
use crate::side_reports::SideReports;

/// Per-request lists that vLLM drops unless `--save-detailed` (it keeps `latencies` and
/// `queue_times` regardless), and bench's own lists of the server's timing, written only
/// when responses carried it.
pub const DETAILED_KEYS: [&str; 9] = [
    "input_lens",
    "output_lens",
    "start_times",
    "ttfts",
    "itls",
    "generated_texts",
    "errors",
    "server_ttfts",
    "server_queue_times",
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

/// The result object vLLM saves, plus our client diagnostics. Without `detailed` the
/// per-request lists in [`DETAILED_KEYS`] are removed, as vLLM does without
/// `--save-detailed`.
pub fn result_doc<'m>(
    m: &'m Metrics,
    side: &SideReports,
    run: &RunInfo,
    detailed: bool,
) -> ResultDoc<'m> {
    let mut r = ResultDoc::default();
    // Run settings (vLLM's `main`).
    r.insert("date", json!(run.date_string()));
    r.insert("endpoint_type", json!(run.backend));
    r.insert("backend", json!(run.backend));
    r.insert("label", json!(run.label));
    r.insert("model_id", json!(run.model_id));
    r.insert("tokenizer_id", json!(run.tokenizer_id));
    r.insert("num_prompts", json!(run.num_prompts));
    for (key, value) in &run.metadata {
        r.insert(key.clone(), json!(value));
    }
    r.insert("request_rate", float(run.request_rate));
    r.insert("burstiness", float(run.burstiness));
    r.insert("max_concurrency", json!(run.max_concurrency));
    if let Some(ramp) = &run.ramp_up {
        // vLLM's ramp-up rates are integer flags.
        r.insert("ramp_up_strategy", json!(strategy_name(ramp.strategy)));
        r.insert("ramp_up_start_rps", json!(ramp.start_rps as u64));
        r.insert("ramp_up_end_rps", json!(ramp.end_rps as u64));
    }
    if let Some(c) = &run.cancellation {
        // AIPerf's flags: a percentage, and seconds.
        r.insert("request_cancellation_rate", float(c.fraction * 100.0));
        r.insert("request_cancellation_delay", float(c.delay.as_secs_f64()));
    }
    if let Some(seconds) = run.duration_limit_s {
        // `--duration` (not in vLLM): the run sent for this long; `num_prompts` is what
        // it sent.
        r.insert("duration_limit_s", float(seconds));
    }

    // `benchmark()`'s result; its keys win over metadata of the same name.
    let p = &m.per_request;
    let goodput = if m.config.goodput.is_empty() {
        Value::Null
    } else {
        float(m.request_goodput)
    };
    let list = |list: List| Field::List(p, list);
    let value = Field::Value;
    let results = match &m.embedding {
        Some(embedding) => embedding_results(m, embedding, list),
        None => vec![
            ("duration", value(float(m.duration_s))),
            ("completed", value(json!(m.completed))),
            ("failed", value(json!(m.failed))),
            ("total_input_tokens", value(json!(m.total_input))),
            ("total_output_tokens", value(json!(m.total_output))),
            ("request_throughput", value(float(m.request_throughput))),
            ("request_goodput", value(goodput)),
            ("output_throughput", value(float(m.output_throughput))),
            (
                "total_token_throughput",
                value(float(m.total_token_throughput)),
            ),
            ("input_lens", list(List::InputLens)),
            ("output_lens", list(List::OutputLens)),
            ("ttfts", list(List::Ttfts)),
            ("itls", list(List::Itls)),
            ("latencies", list(List::Latencies)),
            ("start_times", list(List::StartTimes)),
            ("queue_times", list(List::QueueTimes)),
            ("generated_texts", list(List::GeneratedTexts)),
            ("errors", list(List::Errors)),
            (
                "max_output_tokens_per_s",
                value(float(m.max_output_tokens_per_s)),
            ),
            (
                "max_concurrent_requests",
                value(json!(m.max_concurrent_requests)),
            ),
            // Inverse real-time factor of audio benchmarks (0 without uploaded audio).
            ("rtfx", value(float(m.rtfx))),
        ],
    };
    for (key, field) in results {
        r.insert_field(key.into(), field);
    }
    // vLLM adds the probes' statistics right after `benchmark()`'s own keys.
    if let Some(p) = &side.probe {
        r.insert("probe_completed", json!(p.completed));
        r.insert("probe_failed", json!(p.failed));
        r.insert("probe_median_e2el_ms", float(p.median_e2el_ms));
        r.insert("probe_p99_e2el_ms", float(p.p99_e2el_ms));
        r.insert("probe_max_e2el_ms", float(p.max_e2el_ms));
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
                    .and_then(|i| p.by_index(i))
                    .map_or(e.offset, |record| record.start_time);
                json!({"rps": e.rps, "timestamp": rps_change_timestamp(run.started_at, at)})
            })
            .collect();
        r.insert("rps_change_events", Value::Array(events));
    }
    super::server_metrics::vllm_keys(&mut r, side);
    // Each reported figure's 95% confidence interval (not vLLM's), by the figure's key.
    let mut ci95 = Map::new();
    for (metric, _, _) in reported_sections(m, run) {
        summary_keys(&mut r, metric.name(), m.summary(metric));
        interval_keys(&mut ci95, metric.name(), m.summary(metric));
        // A reasoning run's time to the first content token, beside TTFT, under a name
        // vLLM does not use.
        if let (PercentileMetric::Ttft, Some(reasoning)) = (metric, &m.reasoning) {
            summary_keys(&mut r, "ttfc", &reasoning.ttfc);
            interval_keys(&mut ci95, "ttfc", &reasoning.ttfc);
        }
    }
    if !ci95.is_empty() {
        r.insert("ci95", Value::Object(ci95));
        r.insert("ci95_method", json!(CI95_METHOD));
    }
    if let Some(verdicts) = &m.until_confident {
        r.insert("until_confident", verdicts.to_json());
    }

    // Client diagnostics (not in vLLM).
    let c = &m.client;
    r.insert("requests_sent", json!(c.sent));
    // Failed requests per error kind (`{}` when none failed), most frequent first.
    let by_kind: Map<String, Value> = m
        .failures_by_kind
        .iter()
        .map(|(kind, n)| (kind.to_string(), json!(n)))
        .collect();
    r.insert("failures_by_kind", Value::Object(by_kind));
    if run.cancellation.is_some() || m.cancelled > 0 {
        // Neither completed nor failed (`--request-cancellation-rate`).
        r.insert("cancelled", json!(m.cancelled));
        if detailed {
            let indices: Vec<usize> = p
                .records
                .iter()
                .filter(|r| r.cancelled())
                .map(|r| r.index)
                .collect();
            r.insert("cancelled_requests", json!(indices));
        }
    }
    r.insert("achieved_request_rate", float(c.achieved_request_rate));
    r.insert("achieved_send_rate", float(c.achieved_send_rate));
    r.insert("schedule_lag_ms_mean", float(c.schedule_lag_ms.mean));
    r.insert("schedule_lag_ms_median", float(c.schedule_lag_ms.median));
    r.insert("schedule_lag_ms_p99", float(c.schedule_lag_ms.p99));
    r.insert("schedule_lag_ms_max", float(c.schedule_lag_ms.max));
    if let Some(client) = side.http_client {
        r.insert("http_client", json!(client));
    }
    if let Some(peak) = side.engine_peak_sequences {
        r.insert("engine_peak_running_sequences", json!(peak));
    }
    if let Some(cpu) = side.client_cpu {
        r.insert("client_cpu_seconds", float(cpu.total_s));
        r.insert("decode_cpu_seconds", float(cpu.decode_s));
        r.insert("decode_cpu_share", float(cpu.decode_s / cpu.total_s));
    }
    r.insert(
        "peak_concurrent_requests",
        json!(m.peak_concurrent_requests),
    );
    r.insert("connection_retries", json!(c.connection_retries));
    if !side.shards.is_empty() {
        // A merged run: each shard's client (not in vLLM).
        r.insert("shards", json!(side.shards));
    }
    r.insert("input_tokens_source", json!(m.config.input_tokens));
    if let Some(check) = &c.prompt_tokens {
        r.insert(
            "requests_with_server_prompt_usage",
            json!(check.requests_with_usage),
        );
        r.insert("input_tokens_server_usage", json!(check.server_tokens));
        r.insert("input_tokens_dataset_count", json!(check.dataset_tokens));
        r.insert(
            "input_token_count_mismatches",
            json!(check.mismatched_requests),
        );
        if let Some(offset) = check.constant_offset {
            // Every request's server count minus the dataset's, when they all share it.
            r.insert("input_token_count_offset", json!(offset));
        }
        if let Some((server, dataset, pct)) = check.totals_mismatch() {
            r.insert(
                "input_token_count_mismatch",
                json!({"server_usage": server, "dataset_count": dataset,
                       "difference_pct": float(pct)}),
            );
        }
    }
    super::server_metrics::extra_keys(&mut r, side);
    if let Some(gpu) = &side.gpu {
        for (key, value) in gpu.result_keys(m.token_totals()) {
            r.insert(key, value);
        }
    }
    if let Some(cost) = &m.cost {
        cost_keys(&mut r, cost);
    }
    if let Some(cache) = &m.reported_cache {
        r.insert("requests_with_cached_tokens", json!(cache.requests));
        r.insert("cached_prompt_tokens", json!(cache.cached_tokens));
        r.insert("prompt_tokens_of_cache_reports", json!(cache.prompt_tokens));
        r.insert("prefix_cache_hit_rate", float(cache.hit_rate()));
    }
    if let Some(reuse) = &side.prefix_reuse {
        r.insert("theoretical_prefix_cache_hit_rate", float(reuse.hit_rate()));
        r.insert(
            "theoretical_prefix_cache_block_size",
            json!(reuse.block_size),
        );
        r.insert("theoretical_prefix_cache_blocks", json!(reuse.blocks));
        r.insert(
            "theoretical_prefix_cache_reused_blocks",
            json!(reuse.reused_blocks),
        );
    }
    if !m.per_turn.is_empty() {
        r.insert("per_turn", per_turn(m));
    }
    if let Some(endpoints) = &run.endpoints {
        r.insert("url_selection_strategy", json!(endpoints.routing));
        r.insert("endpoints", per_endpoint(m, side, &endpoints.urls));
        if detailed {
            r.insert_field("endpoint_indices".into(), list(List::Endpoints));
        }
    }
    if let Some(check) = &c.token_counts {
        r.insert(
            "requests_with_server_usage",
            json!(check.requests_with_usage),
        );
        r.insert("output_tokens_server_usage", json!(check.server_tokens));
        r.insert(
            "output_tokens_tokenizer_count",
            json!(check.tokenizer_tokens),
        );
        r.insert(
            "output_token_count_mismatches",
            json!(check.mismatched_requests),
        );
        if let Some((server, tokenizer, pct)) = check.totals_mismatch() {
            r.insert(
                "output_token_count_mismatch",
                json!({"server_usage": server, "tokenizer_count": tokenizer,
                       "difference_pct": float(pct)}),
            );
        }
    }
    if let Some(reasoning) = &m.reasoning {
        r.insert(
            "requests_with_reasoning",
            json!(reasoning.requests_with_reasoning),
        );
        r.insert(
            "requests_without_content",
            json!(reasoning.requests_without_content),
        );
        if let Some(tokens) = reasoning.reasoning_tokens {
            r.insert("total_reasoning_tokens", json!(tokens));
        }
        if detailed {
            r.insert_field("ttfcs".into(), list(List::Ttfcs));
        }
    }
    if let Some(structured) = &m.structured {
        // Structured output (not vLLM's keys): responses checked against their requests'
        // output constraints. The rate is over the checked ones (grammars are not).
        r.insert("structured_output_requests", json!(structured.requests));
        r.insert("valid_outputs", json!(structured.valid));
        r.insert("invalid_outputs", json!(structured.invalid));
        r.insert("unchecked_outputs", json!(structured.unchecked));
        r.insert(
            "valid_output_rate",
            structured.valid_rate().map_or(Value::Null, float),
        );
        r.insert(
            "valid_output_rate_ci95",
            structured
                .valid_rate_interval()
                .map_or(Value::Null, |(lo, hi)| json!([float(lo), float(hi)])),
        );
        r.insert(
            "valid_output_throughput",
            float(structured.valid_throughput),
        );
        if detailed {
            r.insert_field("valid_output".into(), list(List::ValidOutput));
            r.insert_field(
                "invalid_output_reasons".into(),
                list(List::InvalidOutputReasons),
            );
        }
    }
    if let Some(accuracy) = &m.accuracy {
        // Accuracy under load (not vLLM's keys): completed answers judged by the dataset's
        // grader against the references its samples carried.
        let (lo, hi) = accuracy.accuracy_interval();
        r.insert("graded_requests", json!(accuracy.graded));
        r.insert("correct_requests", json!(accuracy.correct));
        r.insert("invalid_answers", json!(accuracy.invalid));
        r.insert("accuracy", float(accuracy.accuracy()));
        r.insert("accuracy_ci95", json!([float(lo), float(hi)]));
        r.insert("mean_grade_score", float(accuracy.mean_score));
        r.insert(
            "correct_request_throughput",
            float(accuracy.correct_throughput),
        );
        if detailed {
            r.insert_field("correct".into(), list(List::Correct));
            r.insert_field("extracted_answers".into(), list(List::ExtractedAnswers));
            r.insert_field("reference_answers".into(), list(List::ReferenceAnswers));
        }
    }
    if let Some(split) = m.itl_split_requests {
        r.insert("itl_split_by_tokens_requests", json!(split));
    }
    if let Some(timing) = &m.server_timing {
        // The server's own timing (vLLM's `--enable-per-request-metrics`), not vLLM's keys.
        r.insert("server_timing_requests", json!(timing.requests));
        summary_keys(&mut r, "server_ttft", &timing.ttft);
        summary_keys(&mut r, "server_queue", &timing.queue);
        summary_keys(&mut r, "client_overhead", &timing.client_overhead);
        // Seconds, as `ttfts`; null for a request whose response did not carry it.
        r.insert_field("server_ttfts".into(), list(List::ServerTtfts));
        r.insert_field("server_queue_times".into(), list(List::ServerQueueTimes));
    }
    steady_state_keys(&mut r, m);

    if !detailed {
        for key in DETAILED_KEYS {
            r.remove(key);
        }
    }
    r
}

/// `--cost-per-hour`'s keys (not vLLM's): the price, the run's whole cost, and that
/// whole cost per million input, output and all tokens and per completed request, each
/// `null` where its denominator is 0 ([`crate::metrics::cost`]).
fn cost_keys(r: &mut ResultDoc<'_>, cost: &Cost) {
    let usd = |x: Option<f64>| x.map_or(Value::Null, float);
    r.insert("cost_per_hour_usd", float(cost.per_hour_usd));
    r.insert("run_cost_usd", float(cost.run_usd));
    r.insert(
        "cost_per_million_input_tokens_usd",
        usd(cost.per_million_input_tokens_usd),
    );
    r.insert(
        "cost_per_million_output_tokens_usd",
        usd(cost.per_million_output_tokens_usd),
    );
    r.insert(
        "cost_per_million_tokens_usd",
        usd(cost.per_million_tokens_usd),
    );
    r.insert("cost_per_request_usd", usd(cost.per_request_usd));
}

/// The steady state's figures (`steady_state_*`, its latencies as vLLM names the whole
/// run's, without `std`) and the over-saturation check's (`oversaturated` and the slopes),
/// where the run had them.
fn steady_state_keys(r: &mut ResultDoc<'_>, m: &Metrics) {
    if let Ok(s) = &m.steady_state {
        r.insert("steady_state_start_s", float(s.window.start_s));
        r.insert("steady_state_end_s", float(s.window.end_s));
        r.insert("steady_state_duration", float(s.window.duration_s()));
        r.insert("steady_state_concurrency", json!(s.window.concurrency));
        r.insert("steady_state_requests", json!(s.requests));
        r.insert(
            "steady_state_request_throughput",
            float(s.request_throughput),
        );
        r.insert("steady_state_output_throughput", float(s.output_throughput));
        for (name, summary) in steady_state_sections(m, s) {
            r.insert(format!("steady_state_mean_{name}_ms"), float(summary.mean));
            r.insert(
                format!("steady_state_median_{name}_ms"),
                float(summary.median),
            );
            for &(p, value) in &summary.percentiles {
                r.insert(
                    format!("steady_state_p{}_{name}_ms", percentile_word(p)),
                    float(value),
                );
            }
        }
    }
    if let Some(s) = &m.saturation {
        r.insert("oversaturated", json!(s.oversaturated()));
        r.insert("ttft_slope_ms_per_s", float(s.ttft.slope * 1000.0));
        r.insert(
            "client_queue_slope_ms_per_s",
            float(s.client_queue.slope * 1000.0),
        );
        r.insert("concurrency_slope_per_s", float(s.concurrency.slope));
    }
}

/// How the intervals under `ci95` are computed (`crate::metrics::confidence`).
pub const CI95_METHOD: &str = "mean: Student's t over the values; median and percentiles: \
distribution-free order-statistic interval (binomial, exact up to 100000 values); null: too \
few values to bound that end";

/// The 95% intervals of a summary's mean, median and percentiles, under the keys
/// [`summary_keys`] gives the figures, as `[lo, hi]` (an end is null when unbounded).
fn interval_keys(ci95: &mut Map<String, Value>, name: &str, s: &Summary) {
    let pair = |i: crate::metrics::confidence::Interval| {
        json!([
            i.lo.map_or(Value::Null, float),
            i.hi.map_or(Value::Null, float)
        ])
    };
    ci95.insert(format!("mean_{name}_ms"), pair(s.intervals.mean));
    ci95.insert(format!("median_{name}_ms"), pair(s.intervals.median));
    for (&(p, _), &interval) in s.percentiles.iter().zip(&s.intervals.percentiles) {
        ci95.insert(format!("p{}_{name}_ms", percentile_word(p)), pair(interval));
    }
}

/// `mean_{name}_ms`, `median_{name}_ms`, `std_{name}_ms` and the percentiles' keys.
fn summary_keys(r: &mut ResultDoc<'_>, name: &str, s: &Summary) {
    r.insert(format!("mean_{name}_ms"), float(s.mean));
    r.insert(format!("median_{name}_ms"), float(s.median));
    r.insert(format!("std_{name}_ms"), float(s.std));
    for &(p, value) in &s.percentiles {
        r.insert(format!("p{}_{name}_ms", percentile_word(p)), float(value));
    }
}

/// A pooling run's result keys (vLLM's `benchmark()` for `EmbedBenchmarkMetrics`, which
/// has no `failed`, output or peak keys).
fn embedding_results<'m>(
    m: &Metrics,
    e: &EmbeddingStats,
    list: impl Fn(List) -> Field<'m>,
) -> Vec<(&'static str, Field<'m>)> {
    let value = Field::Value;
    vec![
        ("duration", value(float(m.duration_s))),
        ("completed", value(json!(m.completed))),
        ("total_input_tokens", value(json!(m.total_input))),
        (
            "total_input_sequences",
            value(json!(e.total_input_sequences)),
        ),
        ("request_throughput", value(float(m.request_throughput))),
        (
            "input_sequence_throughput",
            value(float(e.input_sequence_throughput)),
        ),
        (
            "total_token_throughput",
            value(float(m.total_token_throughput)),
        ),
        ("input_lens", list(List::InputLens)),
        ("latencies", list(List::Latencies)),
        ("queue_times", list(List::QueueTimes)),
        ("errors", list(List::Errors)),
    ]
}

/// Multi-turn runs: one object per turn index, `turn`, `completed`, `failed`, then for
/// TTFT, TPOT, ITL and E2EL the mean, median and the run's percentiles in milliseconds,
/// under vLLM's key names (`mean_ttft_ms`, `p99_itl_ms`, ...).
fn per_turn(m: &Metrics) -> Value {
    let turns = m
        .per_turn
        .iter()
        .map(|t| {
            let mut o = Map::new();
            o.insert("turn".into(), json!(t.turn));
            o.insert("completed".into(), json!(t.completed));
            o.insert("failed".into(), json!(t.failed));
            for (name, s) in [
                ("ttft", &t.ttft),
                ("tpot", &t.tpot),
                ("itl", &t.itl),
                ("e2el", &t.e2el),
            ] {
                o.insert(format!("mean_{name}_ms"), float(s.mean));
                o.insert(format!("median_{name}_ms"), float(s.median));
                for &(p, value) in &s.percentiles {
                    o.insert(format!("p{}_{name}_ms", percentile_word(p)), float(value));
                }
            }
            Value::Object(o)
        })
        .collect();
    Value::Array(turns)
}

/// Each endpoint's figures (see [`crate::metrics::endpoints`]) and its server's `/metrics`
/// report (`null` where it had none bench knows), in the order of the `--base-url`s.
fn per_endpoint(m: &Metrics, side: &SideReports, urls: &[String]) -> Value {
    let stats = crate::metrics::endpoints::per_endpoint(
        &m.per_request,
        urls.len(),
        m.duration_s,
        &m.config.percentiles,
    );
    let endpoints = stats
        .iter()
        .zip(urls)
        .map(|(e, url)| {
            let mut o = Map::new();
            o.insert("url".into(), json!(url));
            o.insert("completed".into(), json!(e.completed));
            o.insert("failed".into(), json!(e.failed));
            o.insert("cancelled".into(), json!(e.cancelled));
            o.insert("total_input_tokens".into(), json!(e.total_input_tokens));
            o.insert("total_output_tokens".into(), json!(e.total_output_tokens));
            o.insert("request_throughput".into(), float(e.request_throughput));
            o.insert("output_throughput".into(), float(e.output_throughput));
            for (name, s) in [
                ("ttft", &e.ttft),
                ("tpot", &e.tpot),
                ("itl", &e.itl),
                ("e2el", &e.e2el),
            ] {
                o.insert(format!("mean_{name}_ms"), float(s.mean));
                o.insert(format!("median_{name}_ms"), float(s.median));
                for &(p, value) in &s.percentiles {
                    o.insert(format!("p{}_{name}_ms", percentile_word(p)), float(value));
                }
            }
            let server = side
                .endpoint_server_metrics
                .get(e.endpoint)
                .and_then(Option::as_ref);
            o.insert(
                "server_metrics".into(),
                server.map_or(Value::Null, |s| json!(s)),
            );
            Value::Object(o)
        })
        .collect();
    Value::Array(endpoints)
}

/// vLLM's PyTorch OSS benchmark records for a saved result: one record per TTFT, TPOT and
/// ITL statistic present in the result, each carrying the run's `args` and every other
/// result key except the large raw lists (`extra_info`). Serialises as a JSON array.
pub struct PyTorchRecords<'d> {
    result: &'d ResultDoc<'d>,
    args: Map<String, Value>,
}

/// The records for `result` (see [`PyTorchRecords`]).
pub fn pytorch_records<'d>(result: &'d ResultDoc<'d>, run: &RunInfo) -> PyTorchRecords<'d> {
    let mut args = run.args.clone();
    // vLLM records the tensor-parallel size from `--metadata` when the args lack one.
    let tp_missing = args.get("tensor_parallel_size").is_none_or(python_falsy);
    if tp_missing && let Some(tp) = result.get("tensor_parallel_size") {
        args.insert("tensor_parallel_size".into(), tp.clone());
    }
    PyTorchRecords { result, args }
}

impl PyTorchRecords<'_> {
    /// The exported statistics present in the result, in vLLM's order, with their values.
    fn metrics(&self) -> impl Iterator<Item = (&'static str, &Value)> {
        PYTORCH_METRICS
            .iter()
            .filter_map(|&name| self.result.get(name).map(|value| (name, value)))
    }

    /// No statistic to export (vLLM then writes no file).
    pub fn is_empty(&self) -> bool {
        self.metrics().next().is_none()
    }
}

impl Serialize for PyTorchRecords<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let model = self.args.get("model").unwrap_or(&Value::Null);
        s.collect_seq(self.metrics().map(|(name, value)| PyTorchRecord {
            benchmark: Benchmark {
                name: "vLLM benchmark",
                extra_info: BenchmarkInfo { args: &self.args },
            },
            model: Model { name: model },
            metric: Metric {
                name,
                benchmark_values: [value],
                extra_info: ExtraInfo(self.result),
            },
        }))
    }
}

/// One record, its keys in vLLM's order.
#[derive(serde::Serialize)]
struct PyTorchRecord<'a> {
    benchmark: Benchmark<'a>,
    model: Model<'a>,
    metric: Metric<'a>,
}

#[derive(serde::Serialize)]
struct Benchmark<'a> {
    name: &'static str,
    extra_info: BenchmarkInfo<'a>,
}

#[derive(serde::Serialize)]
struct BenchmarkInfo<'a> {
    args: &'a Map<String, Value>,
}

#[derive(serde::Serialize)]
struct Model<'a> {
    name: &'a Value,
}

#[derive(serde::Serialize)]
struct Metric<'a> {
    name: &'static str,
    benchmark_values: [&'a Value; 1],
    extra_info: ExtraInfo<'a>,
}

/// The result without the exported statistics and the large raw lists.
struct ExtraInfo<'a>(&'a ResultDoc<'a>);

impl Serialize for ExtraInfo<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize_without(s, |key| {
            PYTORCH_METRICS.contains(&key) || PYTORCH_IGNORED.contains(&key)
        })
    }
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
