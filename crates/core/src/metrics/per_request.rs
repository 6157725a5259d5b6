//! A run's records, kept whole in the metrics, and the per-request lists of vLLM's result
//! read from them.

use super::config::InputTokenSource;
use crate::record::{OutputValidity, RequestRecord};

/// Per-request lists, in workload order, for the result JSON (`--save-detailed` keeps all
/// of them; without it vLLM still keeps `latencies` and `queue_times`).
///
/// The lists are read from the records when the result is written rather than copied:
/// on a long run the generated texts and ITLs are most of the client's memory, and a
/// copy would double it. The records themselves live here, moved in by [`calculate`], so
/// that the metrics of a run can be returned whole, records included.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PerRequest {
    /// Every record, in workload (`index`) order.
    pub records: Vec<RequestRecord>,
    /// Output tokens as counted for the metrics; 0 for a failed request.
    pub output_lens: Vec<u64>,
    /// Which prompt length `input_lens` reports.
    pub input_tokens: InputTokenSource,
    /// Added to the records' start times (seconds since the benchmark start) in
    /// `start_times`: the monotonic clock at the benchmark start, so that the values are
    /// vLLM's (`time.perf_counter()` when each request was sent); 0 until the caller sets it.
    pub clock_origin_s: f64,
}

impl PerRequest {
    /// The record of the request at `index` in the workload, if it was sent.
    pub fn by_index(&self, index: usize) -> Option<&RequestRecord> {
        let position = self
            .records
            .binary_search_by_key(&index, |r| r.index)
            .ok()?;
        Some(&self.records[position])
    }

    /// Prompt lengths in tokens, failed requests included (vLLM's `input_lens`), under
    /// the run's [`InputTokenSource`].
    pub fn input_lens(&self) -> impl ExactSizeIterator<Item = u64> + '_ {
        let source = self.input_tokens;
        self.records
            .iter()
            .map(move |r| u64::from(source.prompt_len(r)))
    }

    pub fn ttfts(&self) -> impl ExactSizeIterator<Item = f64> + '_ {
        self.records.iter().map(|r| r.ttft)
    }

    /// Times to the first content token (`None` where no content arrived).
    pub fn ttfcs(&self) -> impl ExactSizeIterator<Item = Option<f64>> + '_ {
        self.records.iter().map(|r| r.ttfc)
    }

    /// The server's TTFTs (from scheduling), in seconds; `None` where the response did
    /// not carry one.
    pub fn server_ttfts(&self) -> impl ExactSizeIterator<Item = Option<f64>> + '_ {
        self.records
            .iter()
            .map(|r| r.server_timing.and_then(|t| t.ttft))
    }

    /// The server's queue times, in seconds; `None` where the response did not carry one.
    pub fn server_queue_times(&self) -> impl ExactSizeIterator<Item = Option<f64>> + '_ {
        self.records
            .iter()
            .map(|r| r.server_timing.and_then(|t| t.queue))
    }

    pub fn itls(&self) -> impl ExactSizeIterator<Item = &[f64]> + '_ {
        self.records.iter().map(|r| r.itl.as_slice())
    }

    pub fn latencies(&self) -> impl ExactSizeIterator<Item = f64> + '_ {
        self.records.iter().map(|r| r.latency)
    }

    /// vLLM's `start_times`: when each request was sent, on the monotonic clock.
    pub fn start_times(&self) -> impl ExactSizeIterator<Item = f64> + '_ {
        let origin = self.clock_origin_s;
        self.records.iter().map(move |r| origin + r.start_time)
    }

    /// Client queue times, failed requests included.
    pub fn queue_times(&self) -> impl ExactSizeIterator<Item = f64> + '_ {
        self.records.iter().map(client_queue_time)
    }

    pub fn generated_texts(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.records.iter().map(|r| r.generated_text.as_str())
    }

    /// The error texts (`kind: message`), `""` for a successful request (vLLM's default).
    pub fn errors(&self) -> impl ExactSizeIterator<Item = String> + '_ {
        self.records
            .iter()
            .map(|r| r.failure().map(ToString::to_string).unwrap_or_default())
    }

    /// Whether each response was what its output constraint asked for: `None` for a
    /// request without one, one that did not complete, or one the host cannot check.
    pub fn valid_outputs(&self) -> impl ExactSizeIterator<Item = Option<bool>> + '_ {
        self.records.iter().map(|r| match &r.output_validity {
            Some(OutputValidity::Valid) => Some(true),
            Some(OutputValidity::Invalid { .. }) => Some(false),
            Some(OutputValidity::Unchecked) | None => None,
        })
    }

    /// Why each invalid response was invalid (`None` for the others).
    pub fn invalid_output_reasons(&self) -> impl ExactSizeIterator<Item = Option<&str>> + '_ {
        self.records.iter().map(|r| match &r.output_validity {
            Some(OutputValidity::Invalid { reason }) => Some(reason.as_str()),
            _ => None,
        })
    }
}

/// Client queue time of one request: how long it waited for a concurrency slot after the
/// scheduler released it (vLLM's `client_queue_time`).
pub(crate) fn client_queue_time(record: &RequestRecord) -> f64 {
    record.start_time - record.dispatch_time
}
