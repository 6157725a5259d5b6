//! Runs with several endpoints (`--base-url` repeated, not in vLLM): the main figures of
//! each endpoint's requests, so that a slow replica shows itself instead of hiding in the
//! run's averages.
//!
//! Computed after the run from the records (their `endpoint`), with the run's own
//! definitions: output lengths as the metrics counted them, prompt lengths by the run's
//! input-token rule, TPOT over requests with more than one output token, ITL pooled over
//! the gaps, throughputs over the whole run's duration (the endpoints ran side by side,
//! so each one's throughputs add up to the run's).

use super::per_request::PerRequest;
use super::stats::Summary;

/// The figures of one endpoint's requests; times in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointStats {
    /// The endpoint's index in the order of the `--base-url`s.
    pub endpoint: usize,
    pub completed: usize,
    pub failed: usize,
    pub cancelled: usize,
    pub total_input_tokens: u64,
    pub total_output_tokens: u64,
    pub request_throughput: f64,
    pub output_throughput: f64,
    pub ttft: Summary,
    pub tpot: Summary,
    pub itl: Summary,
    pub e2el: Summary,
}

/// Each of `endpoints` endpoints' figures, in endpoint order (an endpoint that got no
/// request has zeros), over a run of `duration_s` seconds.
pub fn per_endpoint(
    per_request: &PerRequest,
    endpoints: usize,
    duration_s: f64,
    percentiles: &[f64],
) -> Vec<EndpointStats> {
    #[derive(Default)]
    struct Values {
        completed: usize,
        failed: usize,
        cancelled: usize,
        input: u64,
        output: u64,
        ttft: Vec<f64>,
        tpot: Vec<f64>,
        itl: Vec<f64>,
        e2el: Vec<f64>,
    }
    let mut by_endpoint: Vec<Values> = (0..endpoints).map(|_| Values::default()).collect();
    for (record, &output_len) in per_request.records.iter().zip(&per_request.output_lens) {
        let Some(v) = by_endpoint.get_mut(record.endpoint as usize) else {
            continue;
        };
        if record.cancelled() {
            v.cancelled += 1;
            continue;
        }
        if !record.succeeded() {
            v.failed += 1;
            continue;
        }
        v.completed += 1;
        v.input += u64::from(per_request.input_tokens.prompt_len(record));
        v.output += output_len;
        v.ttft.push(record.ttft);
        if output_len > 1 {
            v.tpot
                .push((record.latency - record.ttft) / (output_len - 1) as f64);
        }
        v.itl.extend_from_slice(&record.itl);
        v.e2el.push(record.latency);
    }
    let per_second = |n: f64| {
        if duration_s > 0.0 {
            n / duration_s
        } else {
            0.0
        }
    };
    by_endpoint
        .into_iter()
        .enumerate()
        .map(|(endpoint, v)| EndpointStats {
            endpoint,
            completed: v.completed,
            failed: v.failed,
            cancelled: v.cancelled,
            total_input_tokens: v.input,
            total_output_tokens: v.output,
            request_throughput: per_second(v.completed as f64),
            output_throughput: per_second(v.output as f64),
            ttft: Summary::of_seconds(v.ttft, percentiles),
            tpot: Summary::of_seconds(v.tpot, percentiles),
            itl: Summary::of_seconds(v.itl, percentiles),
            e2el: Summary::of_seconds(v.e2el, percentiles),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::config::InputTokenSource;
    use crate::record::{FailureKind, RequestRecord};

    fn record(endpoint: u32, ttft: f64, itl: &[f64], latency: f64) -> RequestRecord {
        RequestRecord {
            endpoint,
            ttft,
            itl: itl.to_vec(),
            latency,
            prompt_len: 10,
            ..Default::default()
        }
    }

    #[test]
    fn figures_are_grouped_by_endpoint() {
        let mut failed = record(1, 0.0, &[], 0.0);
        failed.outcome = Err(FailureKind::Http(500).failure("HTTP 500"));
        let mut cancelled = record(0, 0.0, &[], 0.0);
        cancelled.outcome = Err(FailureKind::Cancelled.failure("cancelled"));
        let per_request = PerRequest {
            records: vec![
                record(0, 0.1, &[0.01, 0.01], 0.12),
                record(1, 0.3, &[0.05], 0.35),
                record(0, 0.2, &[0.02], 0.22),
                failed,
                cancelled,
            ],
            output_lens: vec![3, 2, 2, 0, 0],
            input_tokens: InputTokenSource::Dataset,
            clock_origin_s: 0.0,
        };
        let stats = per_endpoint(&per_request, 3, 2.0, &[99.0]);
        assert_eq!(stats.len(), 3);
        let (a, b, c) = (&stats[0], &stats[1], &stats[2]);
        assert_eq!((a.completed, a.failed, a.cancelled), (2, 0, 1));
        assert_eq!((b.completed, b.failed, b.cancelled), (1, 1, 0));
        assert_eq!((a.total_input_tokens, a.total_output_tokens), (20, 5));
        assert_eq!((a.request_throughput, a.output_throughput), (1.0, 2.5));
        assert!((a.ttft.mean - 150.0).abs() < 1e-9, "{:?}", a.ttft);
        // TPOT: (0.12 - 0.1) / 2 and (0.22 - 0.2) / 1.
        assert!((a.tpot.mean - 15.0).abs() < 1e-9, "{:?}", a.tpot);
        assert!((b.itl.mean - 50.0).abs() < 1e-9, "{:?}", b.itl);
        // The third got nothing.
        assert_eq!((c.completed, c.failed, c.total_output_tokens), (0, 0, 0));
        assert_eq!(c.ttft.mean, 0.0);
    }
}
