//! The `openai-embeddings` backend: OpenAI's embeddings API (`/v1/embeddings`), sent as
//! vLLM's `--backend openai-embeddings` sends it (`async_request_openai_embeddings` in
//! `vllm/benchmarks/lib/endpoint_request_func.py`): `input` (a text, a batch of texts from
//! `--random-batch-size`, or token ids) and `truncate_prompt_tokens: -1`, so that a model
//! with a short context truncates instead of refusing. The request, the response and the
//! timing are [`bench_sdk::pooling`]'s.

use bench_sdk::pooling::{self, PoolingApi, PoolingBackend};
use bench_sdk::{PluginError, PooledKind, RequestSpec};
use serde_json::{Map, Value, json};

/// The API's fields.
pub struct Embeddings;

impl PoolingApi for Embeddings {
    const NAME: &'static str = "openai-embeddings";
    const DESCRIPTION: &'static str = "OpenAI embeddings API (/v1/embeddings), as vLLM's --backend \
        openai-embeddings: texts, batches of texts (--random-batch-size) or token ids. Reports \
        vLLM's embedding metrics.";
    const DEFAULT_PATH: &'static str = "/v1/embeddings";
    const KIND: PooledKind = PooledKind::Embedding;

    fn fields(spec: &RequestSpec, body: &mut Map<String, Value>) -> Result<(), PluginError> {
        body.insert("input".into(), pooling::input(Self::NAME, spec)?);
        body.insert("truncate_prompt_tokens".into(), json!(-1));
        Ok(())
    }
}

bench_sdk::export_backend!(PoolingBackend<Embeddings>);

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::{Backend, ClientConfig, Framing, HttpRequest, Prompt, RerankInput};

    type Client = PoolingBackend<Embeddings>;

    fn client(
        ignore_eos: bool,
        extra_body: Option<&str>,
        options: &[(&str, &str)],
    ) -> Result<Client, PluginError> {
        Client::open(ClientConfig {
            model: "BAAI/bge-m3".into(),
            ignore_eos,
            stream: true,
            extra_body: extra_body.map(str::to_string),
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        })
    }

    fn body(request: &HttpRequest) -> Value {
        serde_json::from_slice(&request.body).unwrap()
    }

    #[test]
    fn payloads_match_vllm() {
        let backend = client(false, None, &[]).unwrap();
        assert_eq!(backend.default_path(), "/v1/embeddings");
        assert_eq!(backend.framing(), Framing::Raw);
        assert!(!Client::describe().openai_compatible);
        let mut spec = RequestSpec::text("a cat".into(), 2, 1);
        spec.request_id = Some("bench-3".into());
        let request = backend.build_request(spec.clone()).unwrap();
        // No stream and no temperature: vLLM sends neither to a pooling API.
        assert_eq!(
            body(&request),
            json!({"model": "BAAI/bge-m3", "input": "a cat", "truncate_prompt_tokens": -1})
        );
        assert_eq!(
            request.headers,
            [
                ("Content-Type".to_string(), "application/json".to_string()),
                ("x-request-id".to_string(), "bench-3".to_string()),
            ]
        );
        spec.prompt = Prompt::Texts(vec!["a".into(), "b c".into()]);
        spec.lora_name = Some("adapter".into());
        spec.extra_body = Some(r#"{"dimensions":64}"#.into());
        let backend = client(
            true,
            Some(r#"{"encoding_format":"float","dimensions":32}"#),
            &[],
        )
        .unwrap();
        assert_eq!(
            body(&backend.build_request(spec.clone()).unwrap()),
            json!({
                "model": "adapter", "input": ["a", "b c"], "truncate_prompt_tokens": -1,
                "ignore_eos": true, "encoding_format": "float", "dimensions": 64,
            })
        );
        spec.prompt = Prompt::TokenIds(vec![1, 2, 3]);
        assert_eq!(
            body(&backend.build_request(spec.clone()).unwrap())["input"],
            json!([1, 2, 3])
        );
        spec.prompt = Prompt::Rerank(RerankInput {
            query: "q".into(),
            documents: vec!["d".into()],
        });
        assert!(
            matches!(backend.build_request(spec), Err(PluginError::Unsupported(m)) if m.contains("vllm-rerank"))
        );
    }

    #[test]
    fn options_are_refused() {
        assert!(
            matches!(client(false, None, &[("stream", "false")]), Err(PluginError::InvalidConfig(m)) if m.contains("unknown option \"stream\""))
        );
        assert!(
            matches!(client(false, Some("[1]"), &[]), Err(PluginError::InvalidConfig(m)) if m.contains("extra body"))
        );
    }

    #[test]
    fn decodes_a_vllm_response_cut_anywhere() {
        let backend = client(false, None, &[]).unwrap();
        let events = pooling::decode_at_every_cut(
            &backend,
            r#"{"id":"embd-6b3c","object":"list","created":1718000000,"model":"BAAI/bge-m3","data":[{"index":0,"object":"embedding","embedding":[0.0125,-0.0431,0.0779,0.0012]},{"index":1,"object":"embedding","embedding":[-0.0043,0.0518,0.0093,-0.0806]}],"usage":{"prompt_tokens":9,"total_tokens":9,"completion_tokens":0,"prompt_tokens_details":null}}"#,
        );
        assert_eq!(
            events,
            [
                "0: usage prompt=9 completion=none",
                "0: pooled PooledKind::Embedding 2x4"
            ]
        );
    }
}
