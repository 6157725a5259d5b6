//! Peak output tokens per second and peak concurrent requests, as vLLM's
//! `calculate_metrics` computes them from successful requests only, plus the exact peak
//! of requests in flight, which vLLM's per-second count overstates.
//!
//! vLLM's "tokens" here are output-carrying chunks: one at `start + ttft` and one after
//! each inter-chunk gap, so a chunk that bundles several tokens counts once. vLLM's
//! "concurrent requests" of a second are the requests active at any moment of that
//! second, so at `--max-concurrency 1` forty 100 ms requests in a row count as ten. We
//! keep both definitions so the shared keys compare with vLLM's, and report the exact
//! peak beside them.

use crate::record::RequestRecord;

/// The peaks of a run's successful requests; all zero without successes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Peaks {
    /// vLLM's `max_output_tokens_per_s`: the most output chunks in one whole second.
    pub max_output_tokens_per_s: f64,
    /// vLLM's `max_concurrent_requests`: the most requests active in one whole second.
    pub max_concurrent_requests: usize,
    /// The most requests in flight at one instant (not in vLLM).
    pub peak_concurrent_requests: usize,
}

/// The peaks of `successful`.
///
/// Both per-second counts use whole-second buckets counted from the earliest successful
/// start (`int(t - min_start)`, truncating), over `ceil(max_end - min_start) + 1`
/// buckets. A request is active in every second from `int(start - min_start)` to
/// `int(end - min_start)`, both included. The exact peak is over the half-open intervals
/// `[start, start + latency)`: at equal times an end is processed before a start.
pub fn peaks(successful: &[&RequestRecord]) -> Peaks {
    let Some(min_start) = successful.iter().map(|r| r.start_time).reduce(f64::min) else {
        return Peaks::default();
    };
    let max_end = successful
        .iter()
        .map(|r| r.start_time + r.latency)
        .fold(f64::NEG_INFINITY, f64::max);
    // Python: int(np.ceil(max_end - min_start)) + 1; at least one bucket.
    let buckets = ((max_end - min_start).ceil().max(0.0) as usize).saturating_add(1);
    let mut tokens_per_second = vec![0u64; buckets];
    let mut requests_per_second = vec![0u64; buckets];
    for record in successful {
        // Python's `range(int(start), int(end) + 1)`; both offsets are >= 0.
        let first = (record.start_time - min_start).trunc() as usize;
        let last = (record.start_time + record.latency - min_start).trunc() as usize;
        for second in requests_per_second.iter_mut().take(last + 1).skip(first) {
            *second += 1;
        }
        // The chunk times accumulate exactly as vLLM's loop does, gap by gap.
        let mut time = record.start_time + record.ttft;
        bump(&mut tokens_per_second, time - min_start);
        for gap in &record.itl {
            time += gap;
            bump(&mut tokens_per_second, time - min_start);
        }
    }
    Peaks {
        max_output_tokens_per_s: tokens_per_second.iter().copied().max().unwrap_or(0) as f64,
        max_concurrent_requests: requests_per_second.iter().copied().max().unwrap_or(0) as usize,
        peak_concurrent_requests: peak_concurrency(successful),
    }
}

/// Adds one token to the bucket `int(offset)` (truncation toward zero, as Python's `int`)
/// when it lies within the buckets.
fn bump(buckets: &mut [u64], offset: f64) {
    let index = offset.trunc();
    if index >= 0.0 && index < buckets.len() as f64 {
        buckets[index as usize] += 1;
    }
}

/// The most of `successful`'s intervals that overlap at one instant.
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
            start_time: start,
            ttft,
            itl: itl.to_vec(),
            latency,
            ..RequestRecord::default()
        }
    }

    #[test]
    fn no_successes_means_zero() {
        assert_eq!(peaks(&[]), Peaks::default());
    }

    #[test]
    fn tokens_fall_into_truncated_second_buckets() {
        // min start 0.5. Request A: chunks at 0.5+0.25 = 0.75, 1.0, 1.25, 2.75 -> offsets
        // 0.25, 0.5, 0.75, 2.25 -> buckets 0, 0, 0, 2.
        let a = rec(0.5, 0.25, &[0.25, 0.25, 1.5], 2.25);
        // Request B: chunks at 1.0+0.1 = 1.1, 1.7 -> offsets 0.6, 1.2 -> buckets 0, 1.
        let b = rec(1.0, 0.1, &[0.6], 0.7);
        // Buckets: ceil(2.75 - 0.5) + 1 = 4 -> [4, 1, 1, 0]; peak 4.
        assert_eq!(peaks(&[&a, &b]).max_output_tokens_per_s, 4.0);
    }

    #[test]
    fn a_chunk_on_a_bucket_edge_opens_the_next_bucket() {
        // Chunks at offsets 0.0, 1.0, 1.5 -> buckets 0, 1, 1: peak 2, not 3.
        let a = rec(0.0, 0.0, &[1.0, 0.5], 1.5);
        assert_eq!(peaks(&[&a]).max_output_tokens_per_s, 2.0);
    }

    #[test]
    fn the_exact_peak_counts_half_open_intervals() {
        // [0, 1) and [1, 2) touch but never overlap: peak 1.
        let a = rec(0.0, 0.1, &[], 1.0);
        let b = rec(1.0, 0.1, &[], 1.0);
        assert_eq!(peaks(&[&a, &b]).peak_concurrent_requests, 1);
        // Add [0.5, 1.5): overlaps both -> peak 2; add [0.6, 0.7): peak 3 at 0.6.
        let c = rec(0.5, 0.1, &[], 1.0);
        let d = rec(0.6, 0.05, &[], 0.1);
        assert_eq!(peaks(&[&a, &b, &c, &d]).peak_concurrent_requests, 3);
    }

    #[test]
    fn vllm_counts_the_requests_active_in_each_whole_second() {
        // Ten back-to-back 0.1 s requests: one at a time, but all ten in second 0, and the
        // last one (ending at exactly 1.0) in second 1 too.
        let serial: Vec<_> = (0..10)
            .map(|i| rec(f64::from(i) * 0.1, 0.01, &[], 0.1))
            .collect();
        let refs: Vec<_> = serial.iter().collect();
        let p = peaks(&refs);
        assert_eq!(p.max_concurrent_requests, 10);
        assert_eq!(p.peak_concurrent_requests, 1);
        // Seconds count from the earliest start, 0.5: a request from 0.5 to 2.5 is active
        // in seconds 0, 1 and 2 (its end second included); one from 1.2 to 1.3 in second 0.
        let long = rec(0.5, 0.1, &[], 2.0);
        let short = rec(1.2, 0.05, &[], 0.1);
        assert_eq!(peaks(&[&long, &short]).max_concurrent_requests, 2);
        let third = rec(2.9, 0.05, &[], 0.05);
        // Seconds from min start 0.5: long 0..=2, short 0..=0, third 2..=2 -> [2, 1, 2].
        assert_eq!(peaks(&[&long, &short, &third]).max_concurrent_requests, 2);
    }
}
