//! What the server's `/metrics` said, in the reports: vLLM's speculative-decoding lines and
//! keys where vLLM has them (inside its block, same labels and keys), and a "Server
//! Metrics" block and `server_*` keys for the rest, only with what was found.

use serde_json::{Value, json};

use super::doc::{ResultDoc, float};
use super::lines::{header, line, line_f};
use crate::side_reports::SideReports;

/// vLLM's "Speculative Decoding" lines, printed inside its result block after the metric
/// sections, as `vllm bench serve` prints them.
pub(super) fn spec_decode_lines(out: &mut String, side: &SideReports) {
    let Some(spec) = side
        .server_metrics
        .as_ref()
        .and_then(|s| s.spec_decode.as_ref())
    else {
        return;
    };
    header(out, "Speculative Decoding", '-');
    line_f(out, "Acceptance rate (%):", spec.acceptance_rate);
    line_f(out, "Acceptance length:", spec.acceptance_length);
    line(out, "Drafts:", spec.num_drafts);
    line(out, "Draft tokens:", spec.draft_tokens);
    line(out, "Accepted tokens:", spec.accepted_tokens);
    if !spec.per_position_acceptance_rates.is_empty() {
        out.push_str("Per-position acceptance (%):\n");
        for (i, rate) in spec.per_position_acceptance_rates.iter().enumerate() {
            line_f(out, &format!("  Position {i}:"), rate * 100.0);
        }
    }
}

/// vLLM's `spec_decode_*` result keys, where vLLM puts them (before the metric sections).
pub(super) fn vllm_keys(r: &mut ResultDoc<'_>, side: &SideReports) {
    let Some(spec) = side
        .server_metrics
        .as_ref()
        .and_then(|s| s.spec_decode.as_ref())
    else {
        return;
    };
    r.insert("spec_decode_acceptance_rate", float(spec.acceptance_rate));
    r.insert(
        "spec_decode_acceptance_length",
        float(spec.acceptance_length),
    );
    r.insert("spec_decode_num_drafts", json!(spec.num_drafts));
    r.insert("spec_decode_draft_tokens", json!(spec.draft_tokens));
    r.insert("spec_decode_accepted_tokens", json!(spec.accepted_tokens));
    r.insert(
        "spec_decode_per_position_acceptance_rates",
        Value::Array(
            spec.per_position_acceptance_rates
                .iter()
                .map(|&x| float(x))
                .collect(),
        ),
    );
}

/// The `server_*` keys (not in vLLM), for what the server's family exposes.
pub(super) fn extra_keys(r: &mut ResultDoc<'_>, side: &SideReports) {
    let Some(s) = &side.server_metrics else {
        return;
    };
    r.insert("server_metrics_source", json!(s.server));
    if let Some(cache) = &s.cache {
        r.insert(
            "server_cached_prompt_tokens",
            json!(cache.cached_prompt_tokens),
        );
        r.insert(
            "server_queried_prompt_tokens",
            json!(cache.queried_prompt_tokens),
        );
        r.insert("server_prefix_cache_hit_rate", float(cache.hit_rate()));
    }
    if let Some(spec) = &s.spec_gauges {
        r.insert(
            "server_spec_decode_acceptance_rate",
            float(spec.acceptance_rate),
        );
        r.insert(
            "server_spec_decode_acceptance_length",
            float(spec.acceptance_length),
        );
    }
    if let Some(kv) = &s.kv_cache_usage {
        r.insert("server_kv_cache_usage_peak", float(kv.peak));
    }
    if let Some(running) = &s.requests_running {
        r.insert("server_requests_running_peak", float(running.peak));
    }
    if let Some(waiting) = &s.requests_waiting {
        r.insert("server_requests_waiting_peak", float(waiting.peak));
    }
    if let Some(preemptions) = s.preemptions {
        r.insert("server_preemptions", json!(preemptions));
    }

    if let Some(queue) = &s.queue_time {
        r.insert("server_mean_queue_time_ms", float(queue.mean_ms));
        r.insert("server_queue_time_requests", json!(queue.requests));
    }
    if !s.timeline.is_empty() {
        let points = s
            .timeline
            .iter()
            .map(|p| {
                let mut point = serde_json::Map::new();
                point.insert("t".into(), float(p.t));
                for &(name, value) in &p.values {
                    point.insert(name.into(), float(value));
                }
                Value::Object(point)
            })
            .collect();
        r.insert("server_metrics_timeline", Value::Array(points));
    }
}

/// The "Server Metrics (/metrics)" block: the lines of what was found.
pub(super) fn server_block(out: &mut String, side: &SideReports) {
    let Some(s) = &side.server_metrics else {
        return;
    };
    header(out, " Server Metrics (/metrics) ", '=');
    line(out, "Server counters:", s.server);
    if let Some(cache) = &s.cache {
        line(
            out,
            "Prompt tokens looked up in the cache:",
            cache.queried_prompt_tokens,
        );
        line(
            out,
            "Prompt tokens served from the cache:",
            cache.cached_prompt_tokens,
        );
        line_f(out, "Prefix cache hit rate (%):", 100.0 * cache.hit_rate());
    }
    if let Some(spec) = &s.spec_gauges {
        line_f(
            out,
            "Spec. decode acceptance rate (%):",
            spec.acceptance_rate,
        );
        line_f(
            out,
            "Spec. decode acceptance length:",
            spec.acceptance_length,
        );
    }
    if let Some(kv) = &s.kv_cache_usage {
        line_f(out, "Peak KV-cache usage (%):", 100.0 * kv.peak);
    }
    if let Some(running) = &s.requests_running {
        line(out, "Peak requests running:", running.peak);
    }
    if let Some(waiting) = &s.requests_waiting {
        line(out, "Peak requests waiting:", waiting.peak);
    }
    if let Some(preemptions) = s.preemptions {
        line(out, "Preemptions:", preemptions);
    }

    if let Some(queue) = &s.queue_time {
        line_f(out, "Mean server queue time (ms):", queue.mean_ms);
    }
    let _ = std::fmt::Write::write_fmt(out, format_args!("{}\n", "=".repeat(50)));
}
