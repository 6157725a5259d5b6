//! Which metric sections the reports show, and their names: one answer for the console and
//! the result JSON, as vLLM's `--percentile-metrics` picks them.

use super::run_info::RunInfo;
use crate::metrics::{Metrics, PercentileMetric, Summary};

pub(crate) use crate::metrics::config::percentile_word;

/// The metric sections vLLM prints, in its order, with their labels and headers.
pub(crate) fn reported_sections(
    metrics: &Metrics,
    run: &RunInfo,
) -> Vec<(PercentileMetric, &'static str, &'static str)> {
    use PercentileMetric::*;
    let mut sections = Vec::new();
    // vLLM reports TTFT, TPOT and ITL for generation only.
    if metrics.has_tokenizer && metrics.embedding.is_none() {
        sections.push((Ttft, "TTFT", "Time to First Token"));
        sections.push((Tpot, "TPOT", "Time per Output Token (excl. 1st token)"));
        sections.push((Itl, "ITL", "Inter-token Latency"));
    }
    sections.push((E2el, "E2EL", "End-to-end Latency"));
    if run.max_concurrency.is_some() {
        sections.push((ClientQueueTime, "Client Queue Time", "Client-side Queueing"));
        if run.request_rate.is_finite() {
            sections.push((
                E2elIncludingClientQueue,
                "E2EL incl. Client Queue",
                "Queue-inclusive End-to-end Latency",
            ));
        }
    }
    sections.retain(|(metric, _, _)| metrics.config.percentile_metrics.contains(metric));
    sections
}

/// The latency metrics of a steady state, by vLLM's names: E2EL, and before it TTFT,
/// TPOT and ITL where vLLM reports them (generation, with a tokenizer).
pub(super) fn steady_state_sections<'s>(
    m: &Metrics,
    s: &'s crate::steady_state::SteadyState,
) -> Vec<(&'static str, &'s Summary)> {
    let mut sections = Vec::new();
    if m.has_tokenizer && m.embedding.is_none() {
        sections.extend([("ttft", &s.ttft), ("tpot", &s.tpot), ("itl", &s.itl)]);
    }
    sections.push(("e2el", &s.e2el));
    sections
}
