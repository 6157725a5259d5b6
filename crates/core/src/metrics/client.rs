//! Client-side diagnostics vLLM lacks: schedule lag, achieved rates, and the server's token
//! counts against the tokenizer's and the dataset's.

/// Schedule lag in milliseconds over all sent requests: how much later than scheduled the
/// client actually sent each request, not counting the wait for a `--max-concurrency`
/// slot (`start_time - intended_start_time - concurrency_wait`).
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct LagSummary {
    pub mean: f64,
    pub median: f64,
    pub p99: f64,
    pub max: f64,
}

/// The server's `usage.completion_tokens` against the tokenizer's count of the generated
/// text, over successful requests that reported usage anywhere in their response (also
/// where vLLM's client does not read it, see `RequestRecord::server_output_tokens`). The
/// tokenizer's count includes the reasoning text, which the server's usage counts too
/// (vLLM's output length without usage does not: its client drops reasoning text).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TokenCountCheck {
    pub requests_with_usage: usize,
    pub server_tokens: u64,
    pub tokenizer_tokens: u64,
    /// Requests whose two counts differ.
    pub mismatched_requests: usize,
}

/// The server's `usage.prompt_tokens` against the dataset's `prompt_len`, over successful
/// requests that reported it: both counts are reported, whichever one the metrics use
/// ([`InputTokenSource`]), because the server counts with its own tokenizer and chat
/// template.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PromptTokenCheck {
    pub requests_with_usage: usize,
    pub server_tokens: u64,
    /// The dataset's `prompt_len` summed over the same requests.
    pub dataset_tokens: u64,
    /// Requests whose two counts differ.
    pub mismatched_requests: usize,
    /// The difference `server - dataset` when every request had the same one: 0 when the
    /// counts are equal, a constant number of tokens a chat template or a BOS token adds.
    /// A tokenizer that is not the server's gives differences that vary with the text.
    /// `None` when they vary.
    pub constant_offset: Option<i64>,
}

/// Client-side diagnostics (not in vLLM).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClientStats {
    /// Requests sent (successful and failed).
    pub sent: usize,
    pub schedule_lag_ms: LagSummary,
    /// Completed requests per second of benchmark duration.
    pub achieved_request_rate: f64,
    /// Requests sent per second of sending (`sent / latest send time`); infinite when
    /// every request was sent at time 0, 0 when none was sent.
    pub achieved_send_rate: f64,
    /// Present when a tokenizer was available.
    pub token_counts: Option<TokenCountCheck>,
    /// Requests sent a second time on a fresh connection because the kept-alive
    /// connection they were first sent on had been closed by the server.
    pub connection_retries: usize,
    /// Present when at least one successful request reported `usage.prompt_tokens`.
    pub prompt_tokens: Option<PromptTokenCheck>,
}
