//! Per-request records to benchmark statistics, defined exactly as vLLM's
//! `calculate_metrics` (`vllm/benchmarks/serve.py`) so numbers compare with
//! `vllm bench serve`, plus client-side diagnostics vLLM lacks (schedule lag, achieved
//! rates, server-versus-tokenizer output token counts).

pub mod accuracy;
pub mod client;
pub mod confidence;
pub mod config;
pub mod cost;
pub mod embeddings;
pub mod endpoints;
pub mod goals;
pub mod goodput;
pub mod per_request;
mod rtfx;
pub mod server_timing;
pub mod significance;
pub mod stats;
pub mod structured;
pub mod timeline;
pub mod tokens;
pub mod turns;

use anyhow::{Context, Result, ensure};

pub use accuracy::AccuracyStats;
pub use client::{ClientStats, LagSummary, PromptTokenCheck, TokenCountCheck};
pub use config::{
    DEFAULT_METRIC_PERCENTILES, DEFAULT_PERCENTILE_METRICS, InputTokenSource, MetricsConfig,
    PercentileMetric, TokenCounter, parse_percentile_metrics, parse_percentiles,
};
pub use cost::Cost;
pub use embeddings::EmbeddingStats;
pub use goodput::{Goodput, parse_goodput};
pub use per_request::PerRequest;
pub use server_timing::ServerTimingStats;
pub use stats::Summary;
pub use structured::StructuredStats;
pub use tokens::ReasoningStats;
pub use turns::{ReportedCache, TurnStats};

pub use crate::client::cpu::ClientCpu;
use per_request::client_queue_time;

use crate::gpu_telemetry::TokenTotals;
use crate::record::{Failure, FailureKind, RequestRecord};
use crate::steady_state::saturation::{self, Saturation};
use crate::steady_state::{self as steady, NoSteadyState, SteadyState};

/// Everything vLLM's `BenchmarkMetrics` holds, the per-request lists of its result (read
/// from the records, which it owns), and our client diagnostics: what [`calculate`]
/// computes from one run's records. What the run's caller measured beside them is in
/// [`crate::side_reports::SideReports`]. Latency statistics are in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Metrics {
    /// Benchmark duration in seconds (first send to last response).
    pub duration_s: f64,
    pub completed: usize,
    pub failed: usize,
    /// Requests the client cancelled on purpose (`--request-cancellation-rate`): neither
    /// completed nor failed, and in no latency or throughput figure.
    pub cancelled: usize,
    pub total_input: u64,
    pub total_output: u64,
    pub request_throughput: f64,
    /// 0 when no goodput SLO was given (the JSON then says `null`).
    pub request_goodput: f64,
    pub output_throughput: f64,
    pub total_token_throughput: f64,
    pub ttft: Summary,
    /// Over requests with more than one output token.
    pub tpot: Summary,
    /// Pooled over the gaps of all successful requests.
    pub itl: Summary,
    pub e2el: Summary,
    /// Over successful requests.
    pub client_queue_time: Summary,
    /// E2EL plus client queue time, over successful requests.
    pub e2el_including_client_queue: Summary,
    /// vLLM's peak output chunks in one whole second.
    pub max_output_tokens_per_s: f64,
    /// vLLM's peak: the most requests active during one whole second.
    pub max_concurrent_requests: usize,
    /// vLLM's `rtfx` (inverse real-time factor): seconds of uploaded audio of the
    /// successful requests per second of benchmark; 0 without audio ([`Metrics::set_rtfx`]).
    pub rtfx: f64,
    /// The most requests in flight at one instant (not in vLLM).
    pub peak_concurrent_requests: usize,
    /// Whether output tokens could be counted with a tokenizer; like vLLM without a
    /// tokenizer, the console then omits token counts, throughputs and TTFT/TPOT/ITL.
    pub has_tokenizer: bool,
    pub config: MetricsConfig,
    pub per_request: PerRequest,
    /// Error messages of the failed requests, in workload order.
    pub failure_messages: Vec<String>,
    /// Failed requests per kind, most frequent first, ties in name order.
    pub failures_by_kind: Vec<(FailureKind, usize)>,
    pub client: ClientStats,
    /// Warnings for the user (stderr), e.g. vLLM's "All requests failed".
    pub warnings: Vec<String>,
    /// What the user should know but need not act on (stderr, as notes), e.g. that the
    /// server's output count is not what re-tokenising its text gives.
    pub notes: Vec<String>,
    /// Multi-turn runs: statistics by turn index (empty for other runs).
    pub per_turn: Vec<TurnStats>,
    /// The prefix-cache hits the server reported in its responses, when any did.
    pub reported_cache: Option<ReportedCache>,
    /// A pooling run (embeddings, scores): vLLM's embedding metrics, which the reports
    /// show instead of the generation metrics; `None` for a generation run.
    pub embedding: Option<EmbeddingStats>,
    /// A run with reasoning text: the time to the first content token and the reasoning
    /// token count, reported beside TTFT; `None` when no response had reasoning.
    pub reasoning: Option<ReasoningStats>,
    /// A run whose requests carried output constraints: how many responses were valid;
    /// `None` when no completed request carried one.
    pub structured: Option<StructuredStats>,
    /// A run whose dataset graded its answers: how many were right; `None` when no
    /// completed request was graded.
    pub accuracy: Option<AccuracyStats>,
    /// `--cost-per-hour`: what the run cost at that price, and per token and request;
    /// `None` without a price.
    pub cost: Option<Cost>,
    /// With `--split-itl-by-tokens`, the successful requests whose ITL was split by their
    /// chunks' token counts (the others kept vLLM's); `None` without the flag.
    pub itl_split_requests: Option<usize>,
    /// The server's own timing of the requests (vLLM's `--enable-per-request-metrics`)
    /// against the client's; `None` when no response carried it.
    pub server_timing: Option<ServerTimingStats>,
    /// The figures of the run's steady state (ramp-up and drain left out), reported beside
    /// the whole run's, or why it has none ([`crate::steady_state`]).
    pub steady_state: Result<SteadyState, NoSteadyState>,
    /// Whether waiting grew without bound during the run; `None` when the run could not
    /// be assessed ([`crate::steady_state::saturation`]).
    pub saturation: Option<Saturation>,
    /// `--until-confident`: whether the run's figures met their goals; set by the run,
    /// which knows the goals and how it ended.
    pub until_confident: Option<goals::Verdicts>,
}

/// Counts failures by kind, most frequent first, ties in name order.
fn count_by_kind<'a>(failures: impl Iterator<Item = &'a Failure>) -> Vec<(FailureKind, usize)> {
    let mut counts: Vec<(FailureKind, usize)> = Vec::new();
    for failure in failures {
        match counts.iter_mut().find(|(k, _)| *k == failure.kind) {
            Some((_, n)) => *n += 1,
            None => counts.push((failure.kind, 1)),
        }
    }
    counts.sort_by(|(ka, na), (kb, nb)| nb.cmp(na).then_with(|| ka.name().cmp(&kb.name())));
    counts
}

/// Computes every metric from the records of one run, as vLLM's `calculate_metrics`.
///
/// `duration_s` is the benchmark duration; `count_tokens` counts a generated text's tokens
/// (the fallback when a server reported no `usage.completion_tokens`, or reported 0, and
/// the check against servers that did); without it such requests count as 1 token, as in
/// vLLM without a tokenizer. Records may come in any order; they are sorted into
/// workload (`index`) order, which fixes the order of pooled ITLs and per-request lists,
/// and kept in the metrics ([`Metrics::per_request`]).
pub fn calculate(
    mut records: Vec<RequestRecord>,
    duration_s: f64,
    count_tokens: Option<TokenCounter<'_>>,
    config: &MetricsConfig,
) -> Result<Metrics> {
    ensure!(
        duration_s.is_finite() && duration_s > 0.0,
        "benchmark duration must be a positive number of seconds, got {duration_s}"
    );
    records.sort_by_key(|r| r.index);
    let itl_split_requests = config.split_itl_by_tokens.then(|| {
        let mut split = 0;
        for record in records.iter_mut().filter(|r| r.succeeded()) {
            if let Some(itl) = tokens::split_itl(&record.itl, &record.chunk_tokens) {
                record.itl = itl;
                split += 1;
            }
        }
        split
    });
    let ordered = records.as_slice();

    let mut output_lens = Vec::with_capacity(ordered.len());
    let mut total_input = 0u64;
    let mut completed = 0usize;
    let mut good_completed = 0usize;
    let (mut ttfts, mut tpots, mut itls, mut e2els) = (vec![], vec![], vec![], vec![]);
    let (mut queue_times, mut e2els_with_queue) = (vec![], vec![]);
    let mut without_usage = 0usize;
    // Of those, requests whose usage came where vLLM's client does not read it.
    let mut unread_usage = 0usize;
    let mut check = TokenCountCheck::default();
    let mut reasoning_tokens = 0u64;

    for record in ordered {
        if !record.succeeded() {
            output_lens.push(0);
            continue;
        }
        if record.pooled_results.is_some() {
            // A pooling result: no output (vLLM's `calculate_metrics_for_embeddings`
            // counts its prompt and latency only).
            output_lens.push(0);
            total_input += u64::from(config.input_tokens.prompt_len(record));
            e2els.push(record.latency);
            queue_times.push(client_queue_time(record));
            e2els_with_queue.push(record.latency + client_queue_time(record));
            completed += 1;
            continue;
        }
        // vLLM: `if not output_tokens` -> a missing or zero count falls back.
        let server_count = record.output_tokens.filter(|&n| n > 0).map(u64::from);
        let tokenizer_count = match count_tokens {
            Some(count) => Some(count(&record.generated_text).with_context(|| {
                format!("counting the output tokens of request {}", record.index)
            })? as u64),
            None => None,
        };
        // The server counts reasoning tokens as output; vLLM's client drops their text.
        let reasoning_count = match count_tokens {
            Some(count) if !record.reasoning_text.is_empty() => count(&record.reasoning_text)
                .with_context(|| {
                    format!("counting the reasoning tokens of request {}", record.index)
                })? as u64,
            _ => 0,
        };
        reasoning_tokens += reasoning_count;
        // The diagnostics compare every count the server sent, read by vLLM's rule or not.
        if let (Some(server), Some(tokenized)) = (
            record.server_output_tokens.filter(|&n| n > 0),
            tokenizer_count,
        ) {
            let server = u64::from(server);
            let tokenized = tokenized + reasoning_count;
            check.requests_with_usage += 1;
            check.server_tokens += server;
            check.tokenizer_tokens += tokenized;
            check.mismatched_requests += usize::from(server != tokenized);
        }
        let output_len = match server_count {
            Some(server) => server,
            None => {
                without_usage += 1;
                unread_usage += usize::from(record.server_output_tokens.is_some());
                tokenizer_count.unwrap_or(1)
            }
        };
        output_lens.push(output_len);
        total_input += u64::from(config.input_tokens.prompt_len(record));
        // vLLM regards TPOT as 0 for goodput when there is at most one output token.
        let mut tpot = 0.0;
        if output_len > 1 {
            tpot = (record.latency - record.ttft) / (output_len - 1) as f64;
            tpots.push(tpot);
        }
        if !config.goodput.is_empty() && config.goodput.is_good(record.ttft, tpot, record.latency) {
            good_completed += 1;
        }
        itls.extend_from_slice(&record.itl);
        ttfts.push(record.ttft);
        e2els.push(record.latency);
        queue_times.push(client_queue_time(record));
        e2els_with_queue.push(record.latency + client_queue_time(record));
        completed += 1;
    }

    let mut warnings = Vec::new();
    if completed == 0 {
        warnings.push(
            "All requests failed. This is likely due to a misconfiguration on the benchmark \
             arguments."
                .to_string(),
        );
    }
    if without_usage > 0 {
        let how = if count_tokens.is_some() {
            "counted by tokenizing the generated text (this may inflate the count slightly)"
        } else {
            "counted as 1 token each because no tokenizer is loaded"
        };
        let unread = if unread_usage > 0 {
            format!(
                " ({unread_usage} sent it only next to `choices` in a streamed chunk, which \
                 vLLM's client does not read; the Client Diagnostics compare those counts)"
            )
        } else {
            String::new()
        };
        warnings.push(format!(
            "{without_usage} of {completed} successful requests reported no \
             usage.completion_tokens{unread}; their output tokens were {how}"
        ));
    }

    let successful: Vec<&RequestRecord> = ordered.iter().filter(|r| r.succeeded()).collect();
    let peaks = timeline::peaks(&successful);
    let total_output: u64 = output_lens.iter().sum();
    let percentiles = &config.percentiles;
    let failure_messages = ordered
        .iter()
        .filter_map(|r| r.failure().map(ToString::to_string))
        .collect();
    let failures_by_kind = count_by_kind(ordered.iter().filter_map(|r| r.failure()));
    let embedding = embeddings::stats(ordered, duration_s);
    // A pooling result has no output to count.
    let token_counts = count_tokens.filter(|_| embedding.is_none()).map(|_| check);
    let client = client_stats(ordered, completed, duration_s, token_counts);
    let (token_warnings, notes) = tokens::mismatch_notes(&client);
    warnings.extend(token_warnings);
    if itl_split_requests == Some(0) && completed > 0 {
        warnings.push(
            "--split-itl-by-tokens: no response said how many tokens its chunks carried, so \
             ITL is per chunk as in vLLM"
                .to_string(),
        );
    }
    let reasoning = tokens::reasoning(ordered, count_tokens.map(|_| reasoning_tokens), percentiles);
    let structured = structured::stats(ordered, duration_s);
    let accuracy = accuracy::stats(ordered, duration_s);
    let cost = config
        .cost_per_hour_usd
        .map(|price| {
            let totals = cost::RunTotals {
                duration_s,
                input_tokens: total_input,
                output_tokens: total_output,
                completed,
            };
            Cost::of_run(price, totals)
        })
        .transpose()?;
    let cancelled = ordered.iter().filter(|r| r.cancelled()).count();
    let failed = ordered.len() - completed - cancelled;
    let server_timing = server_timing::stats(ordered, percentiles);
    let per_turn = turns::per_turn(ordered, &output_lens, percentiles);
    let reported_cache = turns::reported_cache(ordered);
    let input_tokens = config.input_tokens;
    let mut config = config.clone();
    if embedding.is_some() {
        config.percentile_metrics = embeddings::percentile_metrics(&config.percentile_metrics);
    }
    let per_request = PerRequest {
        records,
        output_lens,
        input_tokens,
        clock_origin_s: 0.0,
    };
    let steady_state = steady::of_run(&per_request, percentiles);
    let saturation = saturation::assess(&per_request.records);
    warnings.extend(saturation.and_then(|s| s.warning()));

    Ok(Metrics {
        duration_s,
        completed,
        failed,
        cancelled,
        total_input,
        total_output,
        request_throughput: completed as f64 / duration_s,
        request_goodput: good_completed as f64 / duration_s,
        output_throughput: total_output as f64 / duration_s,
        total_token_throughput: (total_input + total_output) as f64 / duration_s,
        ttft: Summary::of_seconds(ttfts, percentiles),
        tpot: Summary::of_seconds(tpots, percentiles),
        itl: Summary::of_seconds(itls, percentiles),
        e2el: Summary::of_seconds(e2els, percentiles),
        client_queue_time: Summary::of_seconds(queue_times, percentiles),
        e2el_including_client_queue: Summary::of_seconds(e2els_with_queue, percentiles),
        max_output_tokens_per_s: peaks.max_output_tokens_per_s,
        max_concurrent_requests: peaks.max_concurrent_requests,
        rtfx: 0.0,
        peak_concurrent_requests: peaks.peak_concurrent_requests,
        has_tokenizer: count_tokens.is_some(),
        config,
        failure_messages,
        failures_by_kind,
        client,
        warnings,
        notes,
        per_turn,
        reported_cache,
        embedding,
        reasoning,
        structured,
        accuracy,
        cost,
        itl_split_requests,
        server_timing,
        per_request,
        steady_state,
        saturation,
        until_confident: None,
    })
}

/// The schedule lag of `records` (how late each went out against its schedule, beyond a
/// concurrency cap's wait), in milliseconds.
pub fn lag_summary(records: &[RequestRecord]) -> LagSummary {
    let lags: Vec<f64> = records
        .iter()
        .map(|r| r.start_time - r.intended_start_time - r.concurrency_wait)
        .collect();
    LagSummary {
        mean: stats::mean(&lags) * 1000.0,
        median: stats::median(&lags) * 1000.0,
        p99: stats::percentile(&lags, 99.0) * 1000.0,
        max: stats::max(&lags) * 1000.0,
    }
}

fn client_stats(
    ordered: &[RequestRecord],
    completed: usize,
    duration_s: f64,
    token_counts: Option<TokenCountCheck>,
) -> ClientStats {
    let last_send = stats::max(&ordered.iter().map(|r| r.start_time).collect::<Vec<_>>());
    ClientStats {
        sent: ordered.len(),
        schedule_lag_ms: lag_summary(ordered),
        achieved_request_rate: completed as f64 / duration_s,
        achieved_send_rate: match ordered.len() {
            0 => 0.0,
            sent if last_send > 0.0 => sent as f64 / last_send,
            _ => f64::INFINITY,
        },
        token_counts,
        connection_retries: ordered.iter().filter(|r| r.retried).count(),
        prompt_tokens: prompt_token_check(ordered),
    }
}

/// The server's prompt counts against the dataset's, over successful requests that
/// reported one; `None` when none did.
fn prompt_token_check(ordered: &[RequestRecord]) -> Option<PromptTokenCheck> {
    let mut check = PromptTokenCheck::default();
    let mut offsets = Vec::new();
    for record in ordered.iter().filter(|r| r.succeeded()) {
        let Some(server) = record.server_prompt_tokens else {
            continue;
        };
        check.requests_with_usage += 1;
        check.server_tokens += u64::from(server);
        check.dataset_tokens += u64::from(record.prompt_len);
        check.mismatched_requests += usize::from(server != record.prompt_len);
        offsets.push(i64::from(server) - i64::from(record.prompt_len));
    }
    let first = *offsets.first()?;
    check.constant_offset = offsets.iter().all(|&o| o == first).then_some(first);
    Some(check)
}

impl Metrics {
    /// The summary of one percentile metric.
    pub fn summary(&self, metric: PercentileMetric) -> &Summary {
        match metric {
            PercentileMetric::Ttft => &self.ttft,
            PercentileMetric::Tpot => &self.tpot,
            PercentileMetric::Itl => &self.itl,
            PercentileMetric::E2el => &self.e2el,
            PercentileMetric::ClientQueueTime => &self.client_queue_time,
            PercentileMetric::E2elIncludingClientQueue => &self.e2el_including_client_queue,
        }
    }

    /// The run's input and output tokens, which the GPUs' energy per token divides.
    pub fn token_totals(&self) -> TokenTotals {
        TokenTotals {
            input: self.total_input,
            output: self.total_output,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
