//! The `infinity-embeddings` backend: the Infinity embedding server's API
//! (`/embeddings`, https://github.com/michaelfeil/infinity), sent as vLLM's `--backend
//! infinity-embeddings` sends it (`async_request_infinity_embeddings` in
//! `vllm/benchmarks/lib/endpoint_request_func.py`): the prompt as `input`, or, for a request
//! without text, its image URL with `modality: image`. Infinity has no
//! `truncate_prompt_tokens`.

use bench_sdk::pooling::{self, PoolingApi, PoolingBackend};
use bench_sdk::{PluginError, PooledKind, RequestSpec};
use serde_json::{Map, Value};

/// The API's fields.
pub struct InfinityEmbeddings;

impl PoolingApi for InfinityEmbeddings {
    const NAME: &'static str = "infinity-embeddings";
    const DESCRIPTION: &'static str = "Infinity embedding server (/embeddings), as vLLM's --backend infinity-embeddings: texts or batches of texts, or an image URL with its modality when a request has no text. Reports vLLM's embedding metrics.";
    const DEFAULT_PATH: &'static str = "/embeddings";
    const KIND: PooledKind = PooledKind::Embedding;

    fn fields(spec: &RequestSpec, body: &mut Map<String, Value>) -> Result<(), PluginError> {
        pooling::infinity_fields(Self::NAME, spec, false, body)
    }
}

bench_sdk::export_backend!(PoolingBackend<InfinityEmbeddings>);

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::{Backend, ClientConfig, ContentPart, Prompt};
    use serde_json::json;

    type Client = PoolingBackend<InfinityEmbeddings>;

    fn client() -> Client {
        Client::open(ClientConfig {
            model: "michaelfeil/bge-small-en-v1.5".into(),
            ignore_eos: false,
            stream: true,
            extra_body: None,
            options: Vec::new(),
        })
        .unwrap()
    }

    fn body(spec: RequestSpec) -> Result<Value, PluginError> {
        let request = client().build_request(spec)?;
        Ok(serde_json::from_slice(&request.body).unwrap())
    }

    #[test]
    fn payloads_match_vllm() {
        assert_eq!(client().default_path(), "/embeddings");
        let mut spec = RequestSpec::text("a cat".into(), 2, 1);
        assert_eq!(
            body(spec.clone()).unwrap(),
            json!({"model": "michaelfeil/bge-small-en-v1.5", "input": "a cat"})
        );
        spec.prompt = Prompt::Texts(vec!["a".into(), "b".into()]);
        assert_eq!(body(spec.clone()).unwrap()["input"], json!(["a", "b"]));
        // A text with an image: the text goes (vLLM reads the image only without text).
        spec.prompt = Prompt::Text("a cat".into());
        spec.multimodal = vec![ContentPart::ImageUrl("data:image/jpeg;base64,/9j/".into())];
        assert_eq!(body(spec.clone()).unwrap()["input"], json!("a cat"));
        spec.prompt = Prompt::Text(String::new());
        assert_eq!(
            body(spec.clone()).unwrap(),
            json!({
                "model": "michaelfeil/bge-small-en-v1.5",
                "input": "data:image/jpeg;base64,/9j/",
                "modality": "image",
            })
        );
        spec.multimodal.clear();
        assert!(
            matches!(body(spec), Err(PluginError::InvalidInput(m)) if m.contains("neither text"))
        );
    }

    #[test]
    fn decodes_an_infinity_response_cut_anywhere() {
        let events = pooling::decode_at_every_cut(
            &client(),
            r#"{"object":"list","data":[{"object":"embedding","embedding":[-0.0416,0.0136,0.0186],"index":0}],"model":"michaelfeil/bge-small-en-v1.5","usage":{"prompt_tokens":5,"total_tokens":5},"id":"infinity-3f1c6e5e","created":1718000000}"#,
        );
        assert_eq!(
            events,
            [
                "0: usage prompt=5 completion=none",
                "0: pooled PooledKind::Embedding 1x3"
            ]
        );
    }
}
