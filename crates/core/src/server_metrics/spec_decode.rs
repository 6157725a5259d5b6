//! vLLM's speculative-decoding statistics, as `vllm bench serve` computes them
//! (`fetch_spec_decode_metrics` before and after the run in `benchmarks/serve.py`, vLLM
//! 0.32): the same counters read with the same rules, the same formulas, the same result
//! keys and console lines. Their rules differ from a Prometheus parser's at the edges
//! (names matched by substring, values truncated to integers, a line with a timestamp
//! skipped), and a user comparing bench with vLLM expects the same numbers, so they are
//! kept here, apart from the general parser.

use std::collections::BTreeMap;

/// vLLM's `SpecDecodeMetrics`: the `vllm:spec_decode*_total` counters of one scrape.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpecDecodeCounters {
    pub num_drafts: i64,
    pub num_draft_tokens: i64,
    pub num_accepted_tokens: i64,
    /// Accepted tokens by draft position (`position` label).
    pub accepted_per_pos: BTreeMap<i64, i64>,
}

impl SpecDecodeCounters {
    /// The counters in `text`; `None` when no line names one (speculative decoding off,
    /// or not vLLM), as vLLM's function returns `None`.
    pub fn parse(text: &str) -> Option<SpecDecodeCounters> {
        let mut counters = SpecDecodeCounters::default();
        let mut found = false;
        for line in text.split('\n').map(str::trim) {
            if line.is_empty() || line.starts_with('#') || !line.starts_with("vllm:spec_decode") {
                continue;
            }
            // The name is what precedes the first whitespace, cut at `{`; the value is
            // everything after that whitespace (so a timestamp makes it unreadable).
            let (first, rest) = match line.split_once(char::is_whitespace) {
                Some((first, rest)) => (first, rest.trim_start()),
                None => (line, line),
            };
            let name = first.split('{').next().unwrap_or(first);
            if !name.ends_with("_total") {
                continue;
            }
            found = true;
            let Some(value) = int_of_float(rest) else {
                continue;
            };
            if name.contains("num_drafts") {
                counters.num_drafts += value;
            } else if name.contains("num_draft_tokens") {
                counters.num_draft_tokens += value;
            } else if name.contains("num_accepted_tokens_per_pos") {
                const POS: &str = "position=\"";
                let Some(start) = line.find(POS).map(|i| i + POS.len()) else {
                    continue;
                };
                let Some(len) = line[start..].find('"') else {
                    continue;
                };
                let Ok(pos) = line[start..start + len].trim().parse::<i64>() else {
                    continue;
                };
                *counters.accepted_per_pos.entry(pos).or_default() += value;
            } else if name.contains("num_accepted_tokens") {
                counters.num_accepted_tokens += value;
            }
        }
        found.then_some(counters)
    }
}

/// Python's `int(float(s))` for the values a server writes; `None` where Python raises.
fn int_of_float(s: &str) -> Option<i64> {
    let x: f64 = s.trim().parse().ok()?;
    x.is_finite().then(|| x.trunc() as i64)
}

/// What speculative decoding did during the run (vLLM's `spec_decode_stats`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SpecDecodeStats {
    pub num_drafts: i64,
    pub draft_tokens: i64,
    pub accepted_tokens: i64,
    /// Accepted over drafted tokens, in percent.
    pub acceptance_rate: f64,
    /// 1 + accepted tokens per draft: tokens per forward pass of the target model.
    pub acceptance_length: f64,
    /// Accepted tokens at each draft position per draft, by position (fractions).
    pub per_position_acceptance_rates: Vec<f64>,
}

impl SpecDecodeStats {
    /// vLLM's deltas: `None` unless both scrapes had the counters and tokens were
    /// drafted during the run.
    pub fn between(
        before: Option<&SpecDecodeCounters>,
        after: Option<&SpecDecodeCounters>,
    ) -> Option<SpecDecodeStats> {
        let (before, after) = (before?, after?);
        let drafts = after.num_drafts - before.num_drafts;
        let draft_tokens = after.num_draft_tokens - before.num_draft_tokens;
        let accepted = after.num_accepted_tokens - before.num_accepted_tokens;
        let mut per_position = Vec::new();
        if drafts > 0 {
            let positions: std::collections::BTreeSet<i64> = before
                .accepted_per_pos
                .keys()
                .chain(after.accepted_per_pos.keys())
                .copied()
                .collect();
            for pos in positions {
                let before_val = before.accepted_per_pos.get(&pos).copied().unwrap_or(0);
                let after_val = after
                    .accepted_per_pos
                    .get(&pos)
                    .copied()
                    .unwrap_or(before_val);
                per_position.push((after_val - before_val) as f64 / drafts as f64);
            }
        }
        (draft_tokens > 0).then(|| SpecDecodeStats {
            num_drafts: drafts,
            draft_tokens,
            accepted_tokens: accepted,
            acceptance_rate: accepted as f64 / draft_tokens as f64 * 100.0,
            acceptance_length: if drafts > 0 {
                1.0 + accepted as f64 / drafts as f64
            } else {
                0.0
            },
            per_position_acceptance_rates: per_position,
        })
    }
}
