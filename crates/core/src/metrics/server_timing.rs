//! The server's own timing of each request (vLLM 0.32's `--enable-per-request-metrics`:
//! a `metrics` object per response), set against the client's.
//!
//! vLLM's server TTFT runs from the request's scheduling to its first token, so the
//! client's TTFT is the server's queue time plus the server's TTFT plus what neither
//! covers: the network both ways, HTTP, and the server's front end (request parsing,
//! tokenization, the hop to the engine, detokenization). That remainder is the client
//! overhead reported here, which tells a slow network or front end from a busy engine.

use super::stats::Summary;
use crate::record::RequestRecord;

/// Present when any successful generation request carried the server's timing.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerTimingStats {
    /// Successful requests whose response carried it (`server_timing_requests`).
    pub requests: usize,
    /// The server's TTFT, from scheduling, in milliseconds (`mean_server_ttft_ms`, ...).
    pub ttft: Summary,
    /// The server's queue time (`mean_server_queue_ms`, ...).
    pub queue: Summary,
    /// The client's TTFT less the server's queue time and TTFT, over requests with both
    /// (`mean_client_overhead_ms`, ...).
    pub client_overhead: Summary,
}

/// The statistics of the server timings of `ordered`'s successful generation records,
/// or `None` when none carried any. Each summary has the run's percentiles, and p99
/// always (the figure a reader of any run looks for).
pub fn stats(ordered: &[RequestRecord], percentiles: &[f64]) -> Option<ServerTimingStats> {
    let timed = || {
        ordered.iter().filter_map(|r| {
            let timing = r.server_timing?;
            (r.succeeded() && r.pooled_results.is_none()).then_some((r, timing))
        })
    };
    let requests = timed().count();
    if requests == 0 {
        return None;
    }
    let mut percentiles = percentiles.to_vec();
    if !percentiles.contains(&99.0) {
        percentiles.push(99.0);
    }
    let summary = |values: Vec<f64>| Summary::of_seconds(values, &percentiles);
    Some(ServerTimingStats {
        requests,
        ttft: summary(timed().filter_map(|(_, t)| t.ttft).collect()),
        queue: summary(timed().filter_map(|(_, t)| t.queue).collect()),
        client_overhead: summary(
            timed()
                .filter_map(|(r, t)| Some(r.ttft - t.queue? - t.ttft?))
                .collect(),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{FailureKind, ServerTiming};

    fn timed(
        index: usize,
        ttft: f64,
        queue: Option<f64>,
        server_ttft: Option<f64>,
    ) -> RequestRecord {
        RequestRecord {
            index,
            ttft,
            server_timing: Some(ServerTiming {
                queue,
                ttft: server_ttft,
                ..ServerTiming::default()
            }),
            ..RequestRecord::default()
        }
    }

    #[test]
    fn the_client_overhead_is_what_the_servers_queue_and_ttft_leave_of_the_clients_ttft() {
        let records = [
            timed(0, 0.5, Some(0.25), Some(0.125)),
            timed(1, 1.0, Some(0.5), Some(0.25)),
            // No queue time: in the server TTFT's figures, not in the overhead's.
            timed(2, 1.0, None, Some(0.75)),
            // Failed, pooled or without timing: left out.
            RequestRecord {
                outcome: Err(FailureKind::Timeout.failure("late")),
                ..timed(3, 9.0, Some(9.0), Some(9.0))
            },
            RequestRecord {
                pooled_results: Some(1),
                ..timed(4, 9.0, Some(9.0), Some(9.0))
            },
            RequestRecord {
                index: 5,
                ttft: 9.0,
                ..RequestRecord::default()
            },
        ];
        let s = stats(&records, &[50.0]).unwrap();
        assert_eq!(s.requests, 3);
        assert_eq!(s.ttft.mean, (0.125 + 0.25 + 0.75) / 3.0 * 1000.0);
        assert_eq!(s.ttft.median, 250.0);
        // The run's percentiles, then p99.
        assert_eq!(
            s.ttft.percentiles.iter().map(|p| p.0).collect::<Vec<_>>(),
            [50.0, 99.0]
        );
        assert_eq!(s.queue.mean, 375.0);
        assert_eq!(s.client_overhead.mean, (0.125 + 0.25) / 2.0 * 1000.0);
        // p99 is not added twice.
        assert_eq!(stats(&records, &[99.0]).unwrap().ttft.percentiles.len(), 1);
        assert_eq!(stats(&records[3..], &[99.0]), None);
    }
}
