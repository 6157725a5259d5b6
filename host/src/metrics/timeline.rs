//! Peak output tokens per second and peak concurrent requests, as vLLM's
//! `calculate_metrics` computes them from successful requests only.
//!
//! vLLM's "tokens" here are output-carrying chunks: one at `start + ttft` and one after
//! each inter-chunk gap, so a chunk that bundles several tokens counts once. We keep that
//! definition so the peak compares with vLLM's.

use crate::record::RequestRecord;

/// `(max_output_tokens_per_s, max_concurrent_requests)`; `(0.0, 0)` without successes.
///
/// Tokens fall into whole-second buckets counted from the earliest successful start
/// (`int(t - min_start)`, truncating), over `ceil(max_end - min_start) + 1` buckets.
/// Concurrency is the exact peak of the half-open intervals `[start, start + latency)`:
/// at equal times an end is processed before a start.
pub fn peaks(successful: &[&RequestRecord]) -> (f64, usize) {
    let Some(min_start) = successful.iter().map(|r| r.start_time).reduce(f64::min) else {
        return (0.0, 0);
    };
    let max_end = successful
        .iter()
        .map(|r| r.start_time + r.latency)
        .fold(f64::NEG_INFINITY, f64::max);
    // Python: int(np.ceil(max_end - min_start)) + 1; at least one bucket.
    let buckets = ((max_end - min_start).ceil().max(0.0) as usize).saturating_add(1);
    let mut tokens_per_second = vec![0u64; buckets];
    for record in successful {
        // The chunk times accumulate exactly as vLLM's loop does, gap by gap.
        let mut time = record.start_time + record.ttft;
        bump(&mut tokens_per_second, time - min_start);
        for gap in &record.itl {
            time += gap;
            bump(&mut tokens_per_second, time - min_start);
        }
    }
    let max_tokens = tokens_per_second.iter().copied().max().unwrap_or(0) as f64;
    (max_tokens, peak_concurrency(successful))
}

/// Adds one token to the bucket `int(offset)` (truncation toward zero, as Python's `int`)
/// when it lies within the buckets.
fn bump(buckets: &mut [u64], offset: f64) {
    let index = offset.trunc();
    if index >= 0.0 && index < buckets.len() as f64 {
        buckets[index as usize] += 1;
    }
}

fn peak_concurrency(successful: &[&RequestRecord]) -> usize {
    let mut events: Vec<(f64, i8)> = successful
        .iter()
        .flat_map(|r| [(r.start_time, 1), (r.start_time + r.latency, -1)])
        .collect();
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut current = 0i64;
    let mut peak = 0i64;
    for (_, delta) in events {
        current += i64::from(delta);
        peak = peak.max(current);
    }
    peak as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(start: f64, ttft: f64, itl: &[f64], latency: f64) -> RequestRecord {
        RequestRecord {
            success: true,
            start_time: start,
            ttft,
            itl: itl.to_vec(),
            latency,
            ..RequestRecord::default()
        }
    }

    #[test]
    fn no_successes_means_zero() {
        assert_eq!(peaks(&[]), (0.0, 0));
    }

    #[test]
    fn tokens_fall_into_truncated_second_buckets() {
        // min start 0.5. Request A: chunks at 0.5+0.25 = 0.75, 1.0, 1.25, 2.75 -> offsets
        // 0.25, 0.5, 0.75, 2.25 -> buckets 0, 0, 0, 2.
        let a = rec(0.5, 0.25, &[0.25, 0.25, 1.5], 2.25);
        // Request B: chunks at 1.0+0.1 = 1.1, 1.7 -> offsets 0.6, 1.2 -> buckets 0, 1.
        let b = rec(1.0, 0.1, &[0.6], 0.7);
        // Buckets: ceil(2.75 - 0.5) + 1 = 4 -> [4, 1, 1, 0]; peak 4.
        let (tokens, _) = peaks(&[&a, &b]);
        assert_eq!(tokens, 4.0);
    }

    #[test]
    fn a_chunk_on_a_bucket_edge_opens_the_next_bucket() {
        // Chunks at offsets 0.0, 1.0, 1.5 -> buckets 0, 1, 1: peak 2, not 3.
        let a = rec(0.0, 0.0, &[1.0, 0.5], 1.5);
        assert_eq!(peaks(&[&a]).0, 2.0);
    }

    #[test]
    fn concurrency_counts_half_open_intervals() {
        // [0, 1) and [1, 2) touch but never overlap: peak 1.
        let a = rec(0.0, 0.1, &[], 1.0);
        let b = rec(1.0, 0.1, &[], 1.0);
        assert_eq!(peaks(&[&a, &b]).1, 1);
        // Add [0.5, 1.5): overlaps both -> peak 2; add [0.6, 0.7): peak 3 at 0.6.
        let c = rec(0.5, 0.1, &[], 1.0);
        let d = rec(0.6, 0.05, &[], 0.1);
        assert_eq!(peaks(&[&a, &b, &c, &d]).1, 3);
    }
}
