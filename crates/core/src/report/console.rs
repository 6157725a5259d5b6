//! The console report: vLLM's "Serving Benchmark Result" block, character for character
//! (same labels, `{:<40} {:<10}` columns, two decimals, trailing spaces included), then,
//! when requests failed, a line counting them by error kind, then a separate block with
//! our client diagnostics, so vLLM's part stays identical.

use std::fmt::Write as _;

use super::lines::{header, line, line_f};
use super::run_info::RunInfo;
use super::sections::{percentile_word, reported_sections, steady_state_sections};
use crate::metrics::{EmbeddingStats, Metrics, PercentileMetric, Summary};
use crate::side_reports::SideReports;

/// vLLM prints at most this many failed requests' errors.
const MAX_ERRORS_SHOWN: usize = 10;

/// The text to print after a run: the failed requests' errors (as vLLM prints them
/// before the block), the result block, and the client diagnostics block.
pub fn console(metrics: &Metrics, side: &SideReports, run: &RunInfo) -> String {
    let mut out = String::new();
    if !metrics.failure_messages.is_empty() {
        out.push_str("Failed requests during benchmark run detected (capping to 10):\n");
        for (i, error) in metrics
            .failure_messages
            .iter()
            .take(MAX_ERRORS_SHOWN)
            .enumerate()
        {
            let _ = writeln!(out, "Error {i}: {error}");
        }
    }
    vllm_block(&mut out, metrics, side, run);
    failures_line(&mut out, metrics);
    client_block(&mut out, metrics, side);
    server_timing_block(&mut out, metrics);
    shards_block(&mut out, side);
    steady_state_block(&mut out, metrics);
    super::server_metrics::server_block(&mut out, side);
    if let Some(gpu) = &side.gpu {
        for line in gpu.console_lines(metrics.token_totals()) {
            let _ = writeln!(out, "{line}");
        }
    }
    turns_block(&mut out, metrics, side);
    endpoints_block(&mut out, metrics, run);
    out
}

/// The server's own timing of the requests (vLLM's per-request metrics), when responses
/// carried it: its TTFT (from scheduling) and queue time, and what they leave of the
/// client's TTFT (network, HTTP and the server's front end).
fn server_timing_block(out: &mut String, m: &Metrics) {
    let Some(t) = &m.server_timing else {
        return;
    };
    header(out, " Server Timing (per request) ", '=');
    line(out, "Requests with server timing:", t.requests);
    for (name, summary) in [
        ("server TTFT", &t.ttft),
        ("server queue", &t.queue),
        ("client overhead", &t.client_overhead),
    ] {
        line_f(out, &format!("Mean {name} (ms):"), summary.mean);
        line_f(out, &format!("Median {name} (ms):"), summary.median);
        for &(p, value) in &summary.percentiles {
            line_f(out, &format!("P{} {name} (ms):", percentile_word(p)), value);
        }
    }
    let _ = writeln!(out, "{}", "=".repeat(50));
}

/// A merged run's shards, one line each: did each keep its schedule, how busy was it, and
/// where did its clock stand against the server's.
fn shards_block(out: &mut String, side: &SideReports) {
    if side.shards.is_empty() {
        return;
    }
    header(out, &format!(" {} shards ", side.shards.len()), '=');
    let _ = writeln!(
        out,
        "{:<6} {:>6} {:>10} {:>10} {:>8} {:>5} {:>16}  host",
        "shard", "sent", "lag p99", "lag max", "CPU s", "cores", "clock (ms)"
    );
    for s in &side.shards {
        let clock = match &s.clock_offset {
            Some(c) => format!("{:+.2}±{:.2}", c.offset_ms, c.uncertainty_ms),
            None => "unknown".to_owned(),
        };
        let _ = writeln!(
            out,
            "{:<6} {:>6} {:>10.2} {:>10.2} {:>8.2} {:>5} {:>16}  {}",
            s.shard.to_string(),
            s.sent,
            s.schedule_lag_ms.p99,
            s.schedule_lag_ms.max,
            s.cpu.map_or(0.0, |c| c.total_s),
            s.cores,
            clock,
            s.host
        );
    }
}

/// The steady state's figures (or why the run has none), and the load's trends when the
/// run could be assessed for over-saturation. Nothing for a run too small for either.
fn steady_state_block(out: &mut String, m: &Metrics) {
    if m.completed < crate::steady_state::MIN_REQUESTS {
        return;
    }
    match &m.steady_state {
        Ok(s) => {
            let w = &s.window;
            header(
                out,
                &format!(" Steady state ({:.2}-{:.2} s) ", w.start_s, w.end_s),
                '=',
            );
            if m.saturation.is_some_and(|s| s.oversaturated()) {
                let _ = writeln!(out, "Not steady: the load grew all along (over-saturated).");
            }
            line(out, "Plateau concurrency:", w.concurrency);
            line(out, "Requests inside the window:", s.requests);
            line_f(out, "Request throughput (req/s):", s.request_throughput);
            if m.has_tokenizer && m.embedding.is_none() {
                line_f(out, "Output token throughput (tok/s):", s.output_throughput);
            }
            for (name, summary) in steady_state_sections(m, s) {
                let name = name.to_uppercase();
                line_f(out, &format!("Mean {name} (ms):"), summary.mean);
                line_f(out, &format!("Median {name} (ms):"), summary.median);
                for &(p, value) in &summary.percentiles {
                    line_f(out, &format!("P{} {name} (ms):", percentile_word(p)), value);
                }
            }
        }
        Err(why) => {
            header(out, " Steady state ", '=');
            let _ = writeln!(out, "None: {why}.");
        }
    }
    if let Some(s) = &m.saturation {
        line_f(out, "TTFT trend (ms/s):", s.ttft.slope * 1000.0);
        line_f(
            out,
            "Client queue trend (ms/s):",
            s.client_queue.slope * 1000.0,
        );
        line_f(out, "Requests in system trend (1/s):", s.concurrency.slope);
        line(
            out,
            "Over-saturated:",
            if s.oversaturated() { "yes" } else { "no" },
        );
    }
    let _ = writeln!(out, "{}", "=".repeat(50));
}

/// Multi-turn runs: TTFT and ITL by turn index (mean and the first requested percentile);
/// the prefix-cache hit rate the server reported in its responses, when it did, next to
/// the workload's theoretical one (shown too when the workload reused prefixes at all).
fn turns_block(out: &mut String, m: &Metrics, side: &SideReports) {
    let reuse = side.prefix_reuse.filter(|r| r.blocks > 0);
    let reused = reuse.is_some_and(|r| r.reused_blocks > 0);
    if m.per_turn.is_empty() && m.reported_cache.is_none() && !reused {
        return;
    }
    header(out, " Conversations and Prefix Cache ", '=');
    if let Some(reuse) = reuse {
        line_f(
            out,
            "Prefix cache hit rate, theoretical (%):",
            100.0 * reuse.hit_rate(),
        );
    }
    if let Some(cache) = m.reported_cache {
        line(out, "Requests reporting cached tokens:", cache.requests);
        line(out, "Cached prompt tokens (reported):", cache.cached_tokens);
        line_f(
            out,
            "Prefix cache hit rate, reported (%):",
            100.0 * cache.hit_rate(),
        );
    }
    if !m.per_turn.is_empty() {
        let p = m.config.percentiles.first().copied().unwrap_or(99.0);
        let pw = format!("P{}", percentile_word(p));
        let _ = writeln!(
            out,
            "{:>4} {:>9} {:>10} {:>10} {:>10} {:>10}",
            "Turn",
            "Completed",
            "TTFT ms",
            format!("{pw} TTFT"),
            "ITL ms",
            format!("{pw} ITL")
        );
        for t in &m.per_turn {
            let at = |s: &crate::metrics::Summary| s.percentiles.first().map_or(0.0, |x| x.1);
            let _ = writeln!(
                out,
                "{:>4} {:>9} {:>10.2} {:>10.2} {:>10.2} {:>10.2}",
                t.turn,
                t.completed,
                t.ttft.mean,
                at(&t.ttft),
                t.itl.mean,
                at(&t.itl)
            );
        }
    }
    let _ = writeln!(out, "{}", "=".repeat(50));
}

/// A run with several endpoints: each one's requests and main figures, one line each,
/// under its URL.
fn endpoints_block(out: &mut String, m: &Metrics, run: &RunInfo) {
    let Some(endpoints) = &run.endpoints else {
        return;
    };
    header(out, " Endpoints ", '=');
    line(out, "URL selection strategy:", &endpoints.routing);
    let stats = crate::metrics::endpoints::per_endpoint(
        &m.per_request,
        endpoints.urls.len(),
        m.duration_s,
        &m.config.percentiles,
    );
    let _ = writeln!(
        out,
        "{:>3} {:>9} {:>6} {:>8} {:>10} {:>10} {:>10}",
        "#", "Completed", "Failed", "Req/s", "TTFT ms", "TPOT ms", "E2EL ms"
    );
    for (e, url) in stats.iter().zip(&endpoints.urls) {
        let _ = writeln!(
            out,
            "{:>3} {:>9} {:>6} {:>8.2} {:>10.2} {:>10.2} {:>10.2}  {url}",
            e.endpoint,
            e.completed,
            e.failed,
            e.request_throughput,
            e.ttft.mean,
            e.tpot.mean,
            e.e2el.mean
        );
    }
    let _ = writeln!(out, "{}", "=".repeat(50));
}

/// `Failures by kind: http-500: 3, timeout: 1`, when any request failed.
fn failures_line(out: &mut String, m: &Metrics) {
    if m.failures_by_kind.is_empty() {
        return;
    }
    let counts: Vec<String> = m
        .failures_by_kind
        .iter()
        .map(|(kind, n)| format!("{kind}: {n}"))
        .collect();
    let _ = writeln!(out, "Failures by kind: {}", counts.join(", "));
}

fn vllm_block(out: &mut String, m: &Metrics, side: &SideReports, run: &RunInfo) {
    header(out, " Serving Benchmark Result ", '=');
    line(out, "Successful requests:", m.completed);
    line(out, "Failed requests:", m.failed);
    if run.cancellation.is_some() || m.cancelled > 0 {
        line(out, "Cancelled requests:", m.cancelled);
    }
    if let Some(max_concurrency) = run.max_concurrency {
        line(out, "Maximum request concurrency:", max_concurrency);
    }
    if run.request_rate.is_finite() {
        line_f(out, "Request rate configured (RPS):", run.request_rate);
    }
    line_f(out, "Benchmark duration (s):", m.duration_s);
    line(out, "Total input tokens:", m.total_input);
    match &m.embedding {
        Some(embedding) => embedding_lines(out, m, embedding),
        None => generation_lines(out, m),
    }
    probe_lines(out, side);
    structured_lines(out, m);
    accuracy_lines(out, m);
    cost_lines(out, m);
    until_confident_lines(out, m);
    for (metric, name, title) in reported_sections(m, run) {
        section(out, m.summary(metric), name, title);
        // A reasoning run's time to the first content token, beside vLLM's TTFT (which
        // its first reasoning delta set); the block is vLLM's without reasoning.
        if let (PercentileMetric::Ttft, Some(reasoning)) = (metric, &m.reasoning) {
            section(out, &reasoning.ttfc, "TTFC", "Time to First Content Token");
        }
    }
    super::server_metrics::spec_decode_lines(out, side);
    let _ = writeln!(out, "{}", "=".repeat(50));
}

/// One metric's section of vLLM's block: its header, mean, median and percentiles.
fn section(out: &mut String, summary: &Summary, name: &str, title: &str) {
    header(out, title, '-');
    line_f(out, &format!("Mean {name} (ms):"), summary.mean);
    line_f(out, &format!("Median {name} (ms):"), summary.median);
    for &(p, value) in &summary.percentiles {
        line_f(out, &format!("P{} {name} (ms):", percentile_word(p)), value);
    }
}

/// A generation run's lines between the input tokens and the metric sections.
fn generation_lines(out: &mut String, m: &Metrics) {
    if m.has_tokenizer {
        line(out, "Total generated tokens:", m.total_output);
    }
    line_f(out, "Request throughput (req/s):", m.request_throughput);
    if !m.config.goodput.is_empty() {
        line_f(out, "Request goodput (req/s):", m.request_goodput);
    }
    if m.has_tokenizer {
        line_f(out, "Output token throughput (tok/s):", m.output_throughput);
        line_f(
            out,
            "Peak output token throughput (tok/s):",
            m.max_output_tokens_per_s,
        );
    }
    line_f(
        out,
        "Peak concurrent requests:",
        m.max_concurrent_requests as f64,
    );
    // vLLM prints it for audio runs only, where it is positive.
    if m.rtfx > 0.0 {
        line_f(out, "RTFx (Inverse Real-Time Factor):", m.rtfx);
    }
    if m.has_tokenizer {
        line_f(
            out,
            "Total token throughput (tok/s):",
            m.total_token_throughput,
        );
    }
}

/// The "Structured Output" block (not vLLM's), after the probe block: how many responses
/// were what their requests' output constraints asked for.
fn structured_lines(out: &mut String, m: &Metrics) {
    let Some(s) = &m.structured else {
        return;
    };
    header(out, "Structured Output", '-');
    line(out, "Requests with an output constraint:", s.requests);
    line(out, "Valid outputs:", s.valid);
    line(out, "Invalid outputs:", s.invalid);
    if s.unchecked > 0 {
        line(out, "Unchecked outputs (grammars):", s.unchecked);
    }
    if let (Some(rate), Some((lo, hi))) = (s.valid_rate(), s.valid_rate_interval()) {
        line_f(out, "Valid output rate (%):", rate * 100.0);
        line(
            out,
            "Valid output rate, 95% interval (%):",
            format!("{:.2} to {:.2}", lo * 100.0, hi * 100.0),
        );
    }
    line_f(out, "Valid outputs per second:", s.valid_throughput);
}

/// The "Accuracy" block (not vLLM's), after the structured-output one: how many graded
/// answers were right, with the interval, and the rate of right answers.
fn accuracy_lines(out: &mut String, m: &Metrics) {
    let Some(a) = &m.accuracy else {
        return;
    };
    let (lo, hi) = a.accuracy_interval();
    header(out, "Accuracy", '-');
    line(out, "Graded requests:", a.graded);
    line(out, "Correct answers:", a.correct);
    line(out, "Invalid answers (none found):", a.invalid);
    line_f(out, "Accuracy (%):", a.accuracy() * 100.0);
    line(
        out,
        "Accuracy, 95% interval (%):",
        format!("{:.2} to {:.2}", lo * 100.0, hi * 100.0),
    );
    line_f(out, "Correct answers per second:", a.correct_throughput);
}

/// The "Until confident" block (not vLLM's), with `--until-confident` only: whether each
/// goal holds for the result's figures, with the interval, and what ended the run.
fn until_confident_lines(out: &mut String, m: &Metrics) {
    let Some(v) = &m.until_confident else {
        return;
    };
    header(out, "Until confident", '-');
    line(
        out,
        "Goals reached:",
        if v.reached() { "yes" } else { "no" },
    );
    line(out, "Ended by:", v.ended.name());
    line(out, "Requests not sent:", v.not_sent);
    let end = |e: Option<f64>| e.map_or("unbounded".to_owned(), |v| format!("{v:.2}"));
    for (goal, figure) in &v.goals {
        let text = match figure {
            Some((value, i)) => format!(
                "{value:.2}, 95% CI {} to {}, {}",
                end(i.lo),
                end(i.hi),
                if i.within(*value, goal.rel) {
                    "met"
                } else {
                    "not met"
                }
            ),
            None => "not reported".to_owned(),
        };
        line(
            out,
            &format!("{} (within {}%):", goal.key(), goal.rel * 100.0),
            text,
        );
    }
}

/// The "Cost" block (not vLLM's), after the accuracy one, with `--cost-per-hour` only:
/// the run's whole cost and that whole cost per million tokens of each kind and per
/// request (so the lines do not add up), each left out where nothing divides it. Prices
/// per million tokens have four decimals (a cheap deployment's are cents), the run's cost
/// and a request's six (a short run costs a fraction of a cent).
fn cost_lines(out: &mut String, m: &Metrics) {
    let Some(c) = &m.cost else {
        return;
    };
    header(out, "Cost", '-');
    let usd = |out: &mut String, label: &str, value: Option<f64>, decimals: usize| {
        if let Some(x) = value {
            line(out, label, format!("{x:.decimals$}"));
        }
    };
    line_f(out, "Price (USD/hour):", c.per_hour_usd);
    usd(out, "Run cost (USD):", Some(c.run_usd), 6);
    usd(
        out,
        "Cost per 1M input tokens (USD):",
        c.per_million_input_tokens_usd,
        4,
    );
    usd(
        out,
        "Cost per 1M output tokens (USD):",
        c.per_million_output_tokens_usd,
        4,
    );
    usd(
        out,
        "Cost per 1M tokens (USD):",
        c.per_million_tokens_usd,
        4,
    );
    usd(out, "Cost per request (USD):", c.per_request_usd, 6);
}

/// vLLM's "Probe Requests" block (`--probe-request-rate`), where it prints it: after the
/// throughputs, before the metric sections, and only when a probe succeeded.
fn probe_lines(out: &mut String, side: &SideReports) {
    let Some(p) = &side.probe else {
        return;
    };
    header(out, "Probe Requests", '-');
    line(out, "Probe requests completed:", p.completed);
    line(out, "Probe requests failed:", p.failed);
    line_f(out, "Median probe E2EL (ms):", p.median_e2el_ms);
    line_f(out, "P99 probe E2EL (ms):", p.p99_e2el_ms);
    line_f(out, "Max probe E2EL (ms):", p.max_e2el_ms);
}

/// A pooling run's lines between the input tokens and the metric sections (vLLM's
/// `EmbedBenchmarkMetrics`): no output tokens, goodput or peaks; the input sequences'
/// throughput.
fn embedding_lines(out: &mut String, m: &Metrics, e: &EmbeddingStats) {
    line_f(out, "Request throughput (req/s):", m.request_throughput);
    line_f(
        out,
        "Input throughput (inputs/s):",
        e.input_sequence_throughput,
    );
    if m.has_tokenizer {
        line_f(
            out,
            "Total token throughput (tok/s):",
            m.total_token_throughput,
        );
    }
}

fn client_block(out: &mut String, m: &Metrics, side: &SideReports) {
    let c = &m.client;
    header(out, " Client Diagnostics ", '=');
    line(out, "Requests sent:", c.sent);
    line_f(
        out,
        "Achieved request rate (req/s):",
        c.achieved_request_rate,
    );
    line_f(out, "Achieved send rate (req/s):", c.achieved_send_rate);
    line_f(out, "Mean schedule lag (ms):", c.schedule_lag_ms.mean);
    line_f(out, "Median schedule lag (ms):", c.schedule_lag_ms.median);
    line_f(out, "P99 schedule lag (ms):", c.schedule_lag_ms.p99);
    line_f(out, "Max schedule lag (ms):", c.schedule_lag_ms.max);
    line(
        out,
        "Exact peak concurrent requests:",
        m.peak_concurrent_requests,
    );
    if let Some(client) = side.http_client {
        line(out, "HTTP client:", client);
    }
    if let Some(cpu) = side.client_cpu {
        line_f(out, "Client CPU time (s):", cpu.total_s);
        line_f(
            out,
            "Client CPU busy (% of one core):",
            100.0 * cpu.total_s / m.duration_s,
        );
        line_f(
            out,
            "Decode share of client CPU (%):",
            100.0 * cpu.decode_s / cpu.total_s,
        );
    }
    if c.connection_retries > 0 {
        line(out, "Resent on a fresh connection:", c.connection_retries);
    }
    if let Some(check) = c.prompt_tokens {
        line(out, "Input tokens (server usage):", check.server_tokens);
        line(out, "Input tokens (dataset count):", check.dataset_tokens);
        if let Some((_, _, pct)) = check.totals_mismatch() {
            line_f(out, "Input token totals differ (%):", pct);
        }
    }
    if let Some(check) = c.token_counts.filter(|check| check.requests_with_usage > 0) {
        line(out, "Output tokens (server usage):", check.server_tokens);
        line(
            out,
            "Output tokens (tokenizer count):",
            check.tokenizer_tokens,
        );
        line(
            out,
            "Requests with differing counts:",
            check.mismatched_requests,
        );
        if let Some((_, _, pct)) = check.totals_mismatch() {
            line_f(out, "Output token totals differ (%):", pct);
        }
    }
    if let Some(reasoning) = &m.reasoning {
        line(
            out,
            "Requests with reasoning:",
            reasoning.requests_with_reasoning,
        );
        if reasoning.requests_without_content > 0 {
            line(
                out,
                "Requests without content:",
                reasoning.requests_without_content,
            );
        }
        if let Some(tokens) = reasoning.reasoning_tokens {
            line(out, "Reasoning tokens (tokenizer count):", tokens);
        }
    }
    if let Some(split) = m.itl_split_requests {
        line(out, "Requests with ITL split by tokens:", split);
    }
    let _ = writeln!(out, "{}", "=".repeat(50));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::lines::centered;

    #[test]
    fn headers_center_like_python_format() {
        // Python: "{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")
        assert_eq!(
            centered(" Serving Benchmark Result ", '='),
            "============ Serving Benchmark Result ============"
        );
        // 19 characters: 31 of padding, 15 left and 16 right.
        assert_eq!(
            centered("Time to First Token", '-'),
            "---------------Time to First Token----------------"
        );
    }

    /// A closed loop of 4 workers starting 0.5 s apart (the steady state's own test run):
    /// the block names the window and the figures inside it; the JSON has the same keys.
    #[test]
    fn the_steady_state_block_names_its_window() {
        use crate::metrics::{MetricsConfig, calculate};
        let records = crate::steady_state::tests::closed_loop(4, 20, 1.0, 0.5);
        let words = crate::metrics::tests::words;
        let m = calculate(records, 21.5, Some(&words), &MetricsConfig::default()).unwrap();
        let run = crate::report::tests::run();
        let text = console(&m, &SideReports::default(), &run);
        let block: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.contains("Steady state"))
            .collect();
        assert_eq!(
            block[0],
            "========== Steady state (1.50-20.00 s) ==========="
        );
        assert_eq!(
            block[1].trim_end(),
            format!("{:<40} 4", "Plateau concurrency:")
        );
        assert_eq!(
            block[2].trim_end(),
            format!("{:<40} 72", "Requests inside the window:")
        );
        assert!(block.contains(&"Mean E2EL (ms):                          1000.00   "));
        let doc = serde_json::to_value(crate::report::result_doc(
            &m,
            &SideReports::default(),
            &run,
            false,
        ))
        .unwrap();
        assert_eq!(doc["steady_state_start_s"], 1.5);
        assert_eq!(doc["steady_state_end_s"], 20.0);
        assert_eq!(doc["steady_state_requests"], 72);
        assert_eq!(doc["steady_state_mean_e2el_ms"], 1000.0);
        // Every request's TTFT is a tenth of its latency, and nothing grows.
        assert_eq!(doc["steady_state_p99_ttft_ms"], 100.0);
        assert_eq!(doc["oversaturated"], false);
        // vLLM's own key is the whole run's.
        assert!(doc["request_throughput"].as_f64().unwrap() < 80.0 / 20.0);
    }

    #[test]
    fn percentile_words_follow_vllm() {
        assert_eq!(percentile_word(99.0), "99");
        assert_eq!(percentile_word(0.0), "0");
        assert_eq!(percentile_word(100.0), "100");
        assert_eq!(percentile_word(99.9), "99.9");
        assert_eq!(percentile_word(37.5), "37.5");
    }
}
