//! vLLM's embedding metrics (`calculate_metrics_for_embeddings` in
//! `vllm/benchmarks/serve.py`), reported for pooling runs (embeddings, pooling outputs,
//! rerank scores) instead of the generation metrics.
//!
//! vLLM decides from the backend's name (`POOLING_BACKENDS`); here no backend is named in
//! the host: a run is a pooling run when its backend's responses say so, with the
//! contract's `pooled` event (`RequestRecord::pooled_results`). A run whose every request
//! failed has no such response and is reported as a generation run (vLLM would show the
//! embedding block with zeros; both say that nothing completed).
//!
//! The rest is vLLM's: completed and failed requests, the input tokens of the successful
//! ones (`usage.prompt_tokens`, as `_run_pooling_request` reads it, under the run's
//! `--input-tokens` rule), their input sequences (the texts of a batch, the documents of a
//! rerank request: the results the response held), request, input and token throughput
//! over the benchmark duration, and E2EL statistics. The generation-only sections (TTFT,
//! TPOT, ITL) are not reported, and vLLM's default `--percentile-metrics` for a pooling
//! backend is `e2el` ([`percentile_metrics`]).

use super::config::PercentileMetric;
use crate::record::RequestRecord;

/// What a pooling run adds to the shared counts ([`super::Metrics`] holds completed,
/// failed, total input tokens, the request and token throughputs and the E2EL summary).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct EmbeddingStats {
    /// vLLM's `total_input_sequences`: the inputs of the successful requests.
    pub total_input_sequences: u64,
    /// vLLM's `input_sequence_throughput` (`Input throughput (inputs/s)`).
    pub input_sequence_throughput: f64,
}

/// The embedding statistics of a run whose responses were pooling results; `None` for a
/// generation run.
pub fn stats(ordered: &[RequestRecord], duration_s: f64) -> Option<EmbeddingStats> {
    let mut pooling = false;
    let mut total_input_sequences = 0u64;
    for record in ordered {
        if let Some(results) = record.pooled_results {
            pooling = true;
            if record.succeeded() {
                total_input_sequences += u64::from(results);
            }
        }
    }
    pooling.then(|| EmbeddingStats {
        total_input_sequences,
        input_sequence_throughput: total_input_sequences as f64 / duration_s,
    })
}

/// The percentile metrics a pooling run reports out of `selected`: those that apply to
/// it (E2EL and the client-queue ones; vLLM processes TTFT, TPOT and ITL for generation
/// only), or E2EL when none does. vLLM's default for pooling backends is `e2el`; the host
/// parses one default for every run (`ttft,tpot,itl`), which selects none of these, so
/// the fallback gives vLLM's default. (An explicit generation-only choice prints no
/// section in vLLM and E2EL here.)
pub fn percentile_metrics(selected: &[PercentileMetric]) -> Vec<PercentileMetric> {
    use PercentileMetric::*;
    let kept: Vec<PercentileMetric> = selected
        .iter()
        .copied()
        .filter(|m| matches!(m, E2el | ClientQueueTime | E2elIncludingClientQueue))
        .collect();
    if kept.is_empty() { vec![E2el] } else { kept }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{MetricsConfig, calculate};
    use crate::record::FailureKind;
    use crate::side_reports::SideReports;

    fn pooled(index: usize, results: u32, prompt: u32, latency: f64) -> RequestRecord {
        RequestRecord {
            index,
            prompt_len: 99,
            usage_prompt_len: Some(prompt),
            latency,
            start_time: 0.5,
            dispatch_time: 0.25,
            pooled_results: Some(results),
            ..RequestRecord::default()
        }
    }

    #[test]
    fn pooling_runs_get_vllms_embedding_metrics() {
        let failed = RequestRecord {
            index: 3,
            usage_prompt_len: Some(1000),
            outcome: Err(FailureKind::Http(500).failure("boom")),
            ..RequestRecord::default()
        };
        let records = vec![
            pooled(2, 4, 30, 0.3),
            pooled(0, 2, 10, 0.1),
            failed,
            pooled(1, 1, 20, 0.2),
        ];
        let count_tokens = |_: &str| -> anyhow::Result<usize> { Ok(7) };
        let m = calculate(records, 2.0, Some(&count_tokens), &MetricsConfig::default()).unwrap();
        assert_eq!((m.completed, m.failed), (3, 1));
        // usage.prompt_tokens of the successful requests (vLLM's prompt_len).
        assert_eq!(m.total_input, 60);
        // No output: the tokenizer is never asked and nothing is counted as 1 token.
        assert_eq!(m.total_output, 0);
        assert!(m.warnings.is_empty(), "{:?}", m.warnings);
        // Nor is there an output count to check against the server's.
        assert_eq!(m.client.token_counts, None);
        assert!((m.request_throughput - 1.5).abs() < 1e-12);
        assert!((m.total_token_throughput - 30.0).abs() < 1e-12);
        let e = m.embedding.unwrap();
        assert_eq!(e.total_input_sequences, 7);
        assert!((e.input_sequence_throughput - 3.5).abs() < 1e-12);
        assert!((m.e2el.mean - 200.0).abs() < 1e-9);
        assert!((m.e2el.median - 200.0).abs() < 1e-9);
        // np.std([.1, .2, .3]) * 1000.
        assert!((m.e2el.std - 81.649_658_092_772_6).abs() < 1e-6);
        // vLLM's default percentile metric for pooling.
        assert_eq!(m.config.percentile_metrics, [PercentileMetric::E2el]);
    }

    #[test]
    fn generation_runs_have_none_and_choices_that_apply_are_kept() {
        let record = RequestRecord {
            generated_text: "hi".into(),
            ..RequestRecord::default()
        };
        let m = calculate(vec![record], 1.0, None, &MetricsConfig::default()).unwrap();
        assert_eq!(m.embedding, None);
        use PercentileMetric::*;
        assert_eq!(
            percentile_metrics(&[Ttft, ClientQueueTime, E2el]),
            [ClientQueueTime, E2el]
        );
        assert_eq!(percentile_metrics(&[Itl]), [E2el]);
    }
    /// A run of the pooling records above at 2 req/s with at most 4 in flight.
    fn run() -> crate::report::RunInfo {
        use chrono::{Local, TimeZone};
        crate::report::RunInfo {
            date: Local.with_ymd_and_hms(2025, 3, 4, 5, 6, 7).unwrap(),
            started_at: Local.with_ymd_and_hms(2025, 3, 4, 5, 5, 0).unwrap(),
            backend: "a-pooling-backend".into(),
            label: None,
            model_id: "BAAI/bge-m3".into(),
            tokenizer_id: Some("BAAI/bge-m3".into()),
            num_prompts: 3,
            request_rate: 2.0,
            burstiness: 1.0,
            max_concurrency: Some(4),
            ramp_up: None,
            rps_change_events: vec![],
            metadata: vec![],
            args: serde_json::Map::new(),
            cancellation: None,
            endpoints: None,
            duration_limit_s: None,
        }
    }

    fn pooling_metrics() -> crate::metrics::Metrics {
        let records = vec![
            pooled(0, 2, 10, 0.1),
            pooled(1, 1, 20, 0.2),
            pooled(2, 4, 30, 0.3),
        ];
        let count_tokens = |_: &str| -> anyhow::Result<usize> { Ok(7) };
        calculate(records, 2.0, Some(&count_tokens), &MetricsConfig::default()).unwrap()
    }

    #[test]
    fn the_console_shows_vllms_embedding_block() {
        let text = crate::report::console(&pooling_metrics(), &SideReports::default(), &run());
        // vLLM's prints for EmbedBenchmarkMetrics with these numbers.
        let want = concat!(
            "============ Serving Benchmark Result ============\n",
            "Successful requests:                     3         \n",
            "Failed requests:                         0         \n",
            "Maximum request concurrency:             4         \n",
            "Request rate configured (RPS):           2.00      \n",
            "Benchmark duration (s):                  2.00      \n",
            "Total input tokens:                      60        \n",
            "Request throughput (req/s):              1.50      \n",
            "Input throughput (inputs/s):             3.50      \n",
            "Total token throughput (tok/s):          30.00     \n",
            "----------------End-to-end Latency----------------\n",
            "Mean E2EL (ms):                          200.00    \n",
            "Median E2EL (ms):                        200.00    \n",
            "P99 E2EL (ms):                           298.00    \n",
            "==================================================\n",
        );
        assert!(text.starts_with(want), "{text}");
    }

    #[test]
    fn the_result_has_vllms_embedding_keys() {
        let m = pooling_metrics();
        let run = run();
        let keys = |detailed| -> Vec<String> {
            crate::report::result_doc(&m, &SideReports::default(), &run, detailed)
                .keys()
                .map(str::to_string)
                .collect()
        };
        let all = keys(true);
        let start = all.iter().position(|k| k == "duration").unwrap();
        assert_eq!(
            all[start..start + 15],
            [
                "duration",
                "completed",
                "total_input_tokens",
                "total_input_sequences",
                "request_throughput",
                "input_sequence_throughput",
                "total_token_throughput",
                "input_lens",
                "latencies",
                "queue_times",
                "errors",
                "mean_e2el_ms",
                "median_e2el_ms",
                "std_e2el_ms",
                "p99_e2el_ms",
            ]
        );
        for generation_only in [
            "failed",
            "total_output_tokens",
            "ttfts",
            "mean_ttft_ms",
            "rtfx",
        ] {
            assert!(
                !all.iter().any(|k| k == generation_only),
                "{generation_only}"
            );
        }
        // Without --save-detailed vLLM drops input_lens and errors.
        let short = keys(false);
        assert!(!short.iter().any(|k| k == "input_lens" || k == "errors"));
        assert!(short.iter().any(|k| k == "latencies"));
        let doc = serde_json::to_value(crate::report::result_doc(
            &m,
            &SideReports::default(),
            &run,
            true,
        ))
        .unwrap();
        assert_eq!(doc["total_input_sequences"], 7);
        assert_eq!(doc["input_lens"], serde_json::json!([10, 20, 30]));
        assert_eq!(doc["latencies"], serde_json::json!([0.1, 0.2, 0.3]));
        // No TTFT, TPOT or ITL statistic: vLLM writes no PyTorch records.
        let result = crate::report::result_doc(&m, &SideReports::default(), &run, false);
        assert!(crate::report::pytorch_records(&result, &run).is_empty());
    }
}
