//! The `openai-embeddings-clip` backend: CLIP-style embeddings through vLLM's embeddings
//! chat API (`/v1/embeddings` with `messages`), sent as vLLM's `--backend
//! openai-embeddings-clip` sends them (`async_request_openai_embeddings_clip` in
//! `vllm/benchmarks/lib/endpoint_request_func.py`): a CLIP model embeds an image or a text,
//! not both, so a request with an image sends an empty text next to it
//! (`_preprocess_clip`), and one without sends its text.

use bench_sdk::pooling::{self, MediaPosition, PoolingApi, PoolingBackend};
use bench_sdk::{PluginError, PooledKind, RequestSpec};
use serde_json::{Map, Value, json};

/// The API's fields.
pub struct EmbeddingsClip;

impl PoolingApi for EmbeddingsClip {
    const NAME: &'static str = "openai-embeddings-clip";
    const DESCRIPTION: &'static str = "CLIP embeddings (/v1/embeddings with messages), as \
        vLLM's --backend openai-embeddings-clip: an image alone (its text left empty) or a text \
        alone. Reports vLLM's embedding metrics.";
    const DEFAULT_PATH: &'static str = "/v1/embeddings";
    const KIND: PooledKind = PooledKind::Embedding;

    fn fields(spec: &RequestSpec, body: &mut Map<String, Value>) -> Result<(), PluginError> {
        let text = (!spec.multimodal.is_empty()).then_some("");
        let messages = pooling::chat_messages(Self::NAME, spec, text, MediaPosition::Last)?;
        body.insert("messages".into(), messages);
        body.insert("truncate_prompt_tokens".into(), json!(-1));
        Ok(())
    }
}

bench_sdk::export_backend!(PoolingBackend<EmbeddingsClip>);

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::{Backend, ClientConfig, ContentPart};

    type Client = PoolingBackend<EmbeddingsClip>;

    fn client() -> Client {
        Client::open(ClientConfig {
            model: "openai/clip-vit-base-patch32".into(),
            ignore_eos: false,
            stream: true,
            extra_body: Some(r#"{"encoding_format":"float"}"#.into()),
            options: Vec::new(),
        })
        .unwrap()
    }

    fn messages(spec: RequestSpec) -> Value {
        let body: Value =
            serde_json::from_slice(&client().build_request(spec).unwrap().body).unwrap();
        assert_eq!(body["truncate_prompt_tokens"], json!(-1));
        assert_eq!(body["encoding_format"], json!("float"));
        body["messages"].clone()
    }

    #[test]
    fn an_image_goes_without_its_text_and_a_text_alone() {
        let mut spec = RequestSpec::text("a photo of a dog".into(), 5, 1);
        assert_eq!(
            messages(spec.clone()),
            json!([{"role": "user", "content": [{"type": "text", "text": "a photo of a dog"}]}])
        );
        spec.multimodal = vec![ContentPart::ImageUrl("data:image/png;base64,iVBO".into())];
        assert_eq!(
            messages(spec),
            json!([{"role": "user", "content": [
                {"type": "text", "text": ""},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
            ]}])
        );
    }

    #[test]
    fn decodes_a_vllm_response_cut_anywhere() {
        let events = pooling::decode_at_every_cut(
            &client(),
            r#"{"id":"embd-c","object":"list","created":2,"model":"openai/clip-vit-base-patch32","data":[{"index":0,"object":"embedding","embedding":[0.03,0.01]}],"usage":{"prompt_tokens":50,"total_tokens":50,"completion_tokens":0,"prompt_tokens_details":null}}"#,
        );
        assert_eq!(
            events,
            [
                "0: usage prompt=50 completion=none",
                "0: pooled PooledKind::Embedding 1x2"
            ]
        );
    }
}
