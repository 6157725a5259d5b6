//! What the GenAI semantic conventions (OpenTelemetry, `gen_ai.*`, status "development")
//! call a backend's requests, and the bucket boundaries they recommend for its metrics.

/// `gen_ai.operation.name` of a backend's requests: `embeddings` for a pooling run (its
/// responses carried pooled results), `chat` for a chat or messages API (the backend's name
/// says which: `openai-chat`, `anthropic-messages`, `openai-responses`), and
/// `text_completion` otherwise (a completions API, the native engine).
pub fn operation_name(backend: &str, pooling: bool) -> &'static str {
    if pooling {
        "embeddings"
    } else if ["chat", "messages", "responses"]
        .iter()
        .any(|api| backend.contains(api))
    {
        "chat"
    } else {
        "text_completion"
    }
}

/// `gen_ai.provider.name` of a backend: the API it speaks, in the conventions' well-known
/// values where the backend is named after one (`openai` for `openai`, `openai-chat` and
/// the other `openai-*` backends, `anthropic` for `anthropic-messages`), else the
/// backend's own name (`vllm`, `tgi`, `native`, a third-party plugin's).
pub fn provider_name(backend: &str) -> &str {
    ["openai", "anthropic"]
        .into_iter()
        .find(|api| backend.starts_with(api))
        .unwrap_or(backend)
}

/// `gen_ai.client.operation.duration`'s buckets (seconds), which the conventions also give
/// the time to first chunk and the time per output chunk.
pub(crate) const DURATION_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

/// `gen_ai.client.token.usage`'s buckets (tokens).
pub(crate) const TOKEN_BUCKETS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_and_providers_follow_the_backends_api() {
        assert_eq!(operation_name("openai-chat", false), "chat");
        assert_eq!(operation_name("anthropic-messages", false), "chat");
        assert_eq!(operation_name("openai-responses", false), "chat");
        assert_eq!(operation_name("openai", false), "text_completion");
        assert_eq!(operation_name("native", false), "text_completion");
        assert_eq!(operation_name("openai-embeddings", true), "embeddings");
        assert_eq!(provider_name("openai-chat"), "openai");
        assert_eq!(provider_name("openai"), "openai");
        assert_eq!(provider_name("anthropic-messages"), "anthropic");
        assert_eq!(provider_name("vllm"), "vllm");
    }

    #[test]
    fn buckets_rise() {
        for buckets in [&DURATION_BUCKETS[..], &TOKEN_BUCKETS[..]] {
            assert!(buckets.windows(2).all(|w| w[0] < w[1]));
        }
    }
}
