//! What one request produced: written by the client and the decode worker, read by
//! metrics and reports. Times are seconds (f64), as in vLLM's `RequestFuncOutput`.

/// The outcome of one benchmark request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestRecord {
    /// Position in the workload (0-based), also the order of `--save-detailed` lists.
    pub index: usize,
    pub request_id: String,
    pub success: bool,
    /// `kind: message` for a failed request (for example `http-500: Internal Server Error`).
    pub error: Option<String>,
    /// Prompt length in tokens as the dataset measured it with the run's tokenizer (the
    /// `prompt_len` of vLLM's `SampleRequest`). Kept as sampled; which count the metrics
    /// use is `metrics::InputTokenSource`'s choice.
    pub prompt_len: u32,
    /// The server's `usage.prompt_tokens` where vLLM's client reads it (see
    /// `output_tokens`). vLLM's request functions (0.32: `endpoint_request_func.py`) put
    /// it in place of the dataset's count, and `calculate_metrics` sums that; the server
    /// counts with its own tokenizer and chat template, so the two differ for the same
    /// traffic.
    pub usage_prompt_len: Option<u32>,
    /// The server's `usage.prompt_tokens` wherever the response carried it (see
    /// `server_output_tokens`): compared with `prompt_len` in the client diagnostics.
    pub server_prompt_tokens: Option<u32>,
    /// The `max_tokens` the request asked for.
    pub expected_output_len: u32,
    /// The server's `usage.completion_tokens` where vLLM's client reads it: a whole body's
    /// usage, or a streamed frame's usage without `choices`. `calculate_metrics` takes it
    /// as the output length, and counts the generated text with the tokenizer without it.
    pub output_tokens: Option<u32>,
    /// The server's `usage.completion_tokens` wherever the response carried it, including
    /// the usage vLLM's client skips (llama.cpp's server streams it in the chunk with the
    /// finish reason): compared with the tokenizer's count in the client diagnostics.
    pub server_output_tokens: Option<u32>,
    pub generated_text: String,
    pub reasoning_text: String,
    /// Time to the first frame that carried output (vLLM: first chunk with `choices`).
    pub ttft: f64,
    /// Gaps between successive output-carrying frames.
    pub itl: Vec<f64>,
    /// Request start to the last output-carrying frame (vLLM's `latency`).
    pub latency: f64,
    /// Actual send time (after any `--max-concurrency` wait), seconds since the
    /// benchmark started. vLLM's `start_time`.
    pub start_time: f64,
    /// When the scheduler released the request (before waiting for a concurrency slot),
    /// seconds since the benchmark started. `start_time - dispatch_time` is vLLM's
    /// `client_queue_time`.
    pub dispatch_time: f64,
    /// Scheduled send time, seconds since the benchmark started.
    pub intended_start_time: f64,
    /// Seconds spent waiting for a `--max-concurrency` slot. Schedule lag, the delay the
    /// client itself added to a send, is `start_time - intended_start_time -
    /// concurrency_wait`: the dispatcher's lateness plus the hop to the request's task.
    pub concurrency_wait: f64,
    /// Whether the request was sent again on a fresh connection after the kept-alive
    /// connection it was first sent on turned out closed (see `RawResponse::retried`).
    pub retried: bool,
}
