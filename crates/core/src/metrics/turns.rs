//! Multi-turn runs (not in vLLM): TTFT, TPOT, ITL and E2EL by the turn's index in its
//! conversation, and the prefix-cache hit rate the server reported in its responses.
//!
//! A later turn carries the whole history, so its prompt is longer and, on a server with
//! a prefix cache, mostly cached: the run's overall TTFT mixes turns whose costs differ by
//! design. Both are computed after the run from the records (their `turn` and
//! `cached_prompt_tokens`), never on the request path.

use super::stats::Summary;
use crate::record::RequestRecord;

/// The statistics of one turn index, in milliseconds, with vLLM's definitions (TPOT over
/// requests with more than one output token, ITL pooled over the gaps).
#[derive(Debug, Clone, PartialEq)]
pub struct TurnStats {
    /// The turn's index in its conversation, from 0.
    pub turn: u32,
    /// Successful requests of this turn.
    pub completed: usize,
    pub failed: usize,
    pub ttft: Summary,
    pub tpot: Summary,
    pub itl: Summary,
    pub e2el: Summary,
}

/// Per-turn statistics, by increasing turn; empty when no request was a turn of a
/// conversation. `output_lens` are the metrics' output lengths, parallel to `records`.
pub fn per_turn(
    records: &[RequestRecord],
    output_lens: &[u64],
    percentiles: &[f64],
) -> Vec<TurnStats> {
    let Some(last) = records.iter().filter_map(|r| r.turn).max() else {
        return Vec::new();
    };
    #[derive(Default)]
    struct Values {
        completed: usize,
        failed: usize,
        ttft: Vec<f64>,
        tpot: Vec<f64>,
        itl: Vec<f64>,
        e2el: Vec<f64>,
    }
    let mut by_turn: Vec<Values> = (0..=last).map(|_| Values::default()).collect();
    for (record, &output_len) in records.iter().zip(output_lens) {
        let Some(turn) = record.turn else { continue };
        let v = &mut by_turn[turn as usize];
        if record.cancelled() {
            continue;
        }
        if !record.succeeded() {
            v.failed += 1;
            continue;
        }
        v.completed += 1;
        v.ttft.push(record.ttft);
        if output_len > 1 {
            v.tpot
                .push((record.latency - record.ttft) / (output_len - 1) as f64);
        }
        v.itl.extend_from_slice(&record.itl);
        v.e2el.push(record.latency);
    }
    by_turn
        .into_iter()
        .enumerate()
        .filter(|(_, v)| v.completed + v.failed > 0)
        .map(|(turn, v)| TurnStats {
            turn: turn as u32,
            completed: v.completed,
            failed: v.failed,
            ttft: Summary::of_seconds(v.ttft, percentiles),
            tpot: Summary::of_seconds(v.tpot, percentiles),
            itl: Summary::of_seconds(v.itl, percentiles),
            e2el: Summary::of_seconds(v.e2el, percentiles),
        })
        .collect()
}

/// The prefix-cache hit rate the server reported itself, request by request
/// (`usage.prompt_tokens_details.cached_tokens`), over the successful requests whose
/// response carried it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ReportedCache {
    /// Requests that reported cached tokens (0 included).
    pub requests: usize,
    /// Their prompt tokens (the server's `usage.prompt_tokens`, else the dataset's count).
    pub prompt_tokens: u64,
    /// Their cached prompt tokens.
    pub cached_tokens: u64,
}

impl ReportedCache {
    /// Cached over prompt tokens; 0 when there were none.
    pub fn hit_rate(&self) -> f64 {
        if self.prompt_tokens == 0 {
            0.0
        } else {
            self.cached_tokens as f64 / self.prompt_tokens as f64
        }
    }
}

/// What the server reported of its cache; `None` when no response said.
pub fn reported_cache(records: &[RequestRecord]) -> Option<ReportedCache> {
    let mut cache = ReportedCache::default();
    for record in records.iter().filter(|r| r.succeeded()) {
        let Some(cached) = record.cached_prompt_tokens else {
            continue;
        };
        cache.requests += 1;
        cache.cached_tokens += u64::from(cached);
        cache.prompt_tokens += u64::from(record.server_prompt_tokens.unwrap_or(record.prompt_len));
    }
    (cache.requests > 0).then_some(cache)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::FailureKind;

    fn turn(turn: Option<u32>, ttft: f64, itl: &[f64], latency: f64) -> RequestRecord {
        RequestRecord {
            turn,
            ttft,
            itl: itl.to_vec(),
            latency,
            ..RequestRecord::default()
        }
    }

    #[test]
    fn statistics_are_grouped_by_turn_index() {
        let mut failed = turn(Some(1), 0.0, &[], 0.0);
        failed.outcome = Err(FailureKind::Timeout.failure("late"));
        let records = vec![
            turn(Some(0), 0.010, &[0.001, 0.003], 0.014),
            turn(Some(1), 0.030, &[0.002], 0.032),
            turn(Some(0), 0.020, &[0.001], 0.021),
            failed,
            turn(Some(3), 0.050, &[], 0.050),
        ];
        let output_lens = [3, 2, 2, 0, 1];
        let stats = per_turn(&records, &output_lens, &[99.0]);
        // Turn 2 had no request: no entry.
        assert_eq!(
            stats
                .iter()
                .map(|s| (s.turn, s.completed, s.failed))
                .collect::<Vec<_>>(),
            [(0, 2, 0), (1, 1, 1), (3, 1, 0)]
        );
        let close = |a: f64, b: f64| assert!((a - b).abs() < 1e-9, "{a} vs {b}");
        close(stats[0].ttft.mean, 15.0);
        close(stats[0].ttft.median, 15.0);
        close(stats[0].itl.mean, (1.0 + 3.0 + 1.0) / 3.0);
        // TPOT: (14 - 10) / 2 and (21 - 20) / 1.
        close(stats[0].tpot.mean, 1.5);
        close(stats[1].ttft.mean, 30.0);
        close(stats[1].e2el.percentiles[0].1, 32.0);
        // One output token: no TPOT (vLLM's rule), reported as 0.
        close(stats[2].tpot.mean, 0.0);

        // A run without conversations has no per-turn statistics.
        assert!(per_turn(&[turn(None, 0.1, &[], 0.1)], &[1], &[99.0]).is_empty());
    }

    #[test]
    fn the_reported_hit_rate_counts_only_requests_that_reported() {
        let rec = |prompt: u32, server: Option<u32>, cached: Option<u32>| RequestRecord {
            prompt_len: prompt,
            server_prompt_tokens: server,
            cached_prompt_tokens: cached,
            ..RequestRecord::default()
        };
        assert_eq!(reported_cache(&[rec(10, Some(10), None)]), None);
        let cache = reported_cache(&[
            rec(10, Some(12), Some(6)),
            rec(8, None, Some(0)),
            rec(100, Some(100), None),
        ])
        .unwrap();
        assert_eq!(
            (cache.requests, cache.prompt_tokens, cache.cached_tokens),
            (2, 20, 6)
        );
        assert!((cache.hit_rate() - 0.3).abs() < 1e-12);
    }
}
