//! The `infinity-embeddings-clip` backend: the Infinity embedding server's API
//! (`/embeddings`) for CLIP models, sent as vLLM's `--backend infinity-embeddings-clip`
//! sends it (`async_request_infinity_embeddings_clip` in
//! `vllm/benchmarks/lib/endpoint_request_func.py`): a CLIP model embeds an image or a text,
//! so a request with an image sends the image's URL with `modality: image` and drops its
//! text; one without sends its text.

use bench_sdk::pooling::{self, PoolingApi, PoolingBackend};
use bench_sdk::{PluginError, PooledKind, RequestSpec};
use serde_json::{Map, Value};

/// The API's fields.
pub struct InfinityEmbeddingsClip;

impl PoolingApi for InfinityEmbeddingsClip {
    const NAME: &'static str = "infinity-embeddings-clip";
    const DESCRIPTION: &'static str = "Infinity embedding server (/embeddings) for CLIP models, as vLLM's --backend infinity-embeddings-clip: an image URL alone (its text dropped) or a text alone. Reports vLLM's embedding metrics.";
    const DEFAULT_PATH: &'static str = "/embeddings";
    const KIND: PooledKind = PooledKind::Embedding;

    fn fields(spec: &RequestSpec, body: &mut Map<String, Value>) -> Result<(), PluginError> {
        pooling::infinity_fields(Self::NAME, spec, true, body)
    }
}

bench_sdk::export_backend!(PoolingBackend<InfinityEmbeddingsClip>);

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::{Backend, ClientConfig, ContentPart};
    use serde_json::json;

    type Client = PoolingBackend<InfinityEmbeddingsClip>;

    fn client() -> Client {
        Client::open(ClientConfig {
            model: "wkcn/TinyCLIP-ViT-8M-16-Text-3M-YFCC15M".into(),
            ignore_eos: false,
            stream: true,
            extra_body: None,
            options: Vec::new(),
        })
        .unwrap()
    }

    fn body(spec: RequestSpec) -> Value {
        serde_json::from_slice(&client().build_request(spec).unwrap().body).unwrap()
    }

    #[test]
    fn an_image_goes_without_its_text() {
        let mut spec = RequestSpec::text("a cat".into(), 2, 1);
        assert_eq!(body(spec.clone())["input"], json!("a cat"));
        spec.multimodal = vec![ContentPart::ImageUrl("data:image/jpeg;base64,/9j/".into())];
        assert_eq!(
            body(spec),
            json!({
                "model": "wkcn/TinyCLIP-ViT-8M-16-Text-3M-YFCC15M",
                "input": "data:image/jpeg;base64,/9j/",
                "modality": "image",
            })
        );
    }

    #[test]
    fn decodes_an_infinity_response_cut_anywhere() {
        let events = pooling::decode_at_every_cut(
            &client(),
            r#"{"object":"list","data":[{"object":"embedding","embedding":[0.25,0.5],"index":0}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1},"id":"infinity-1","created":1}"#,
        );
        assert_eq!(
            events,
            [
                "0: usage prompt=1 completion=none",
                "0: pooled PooledKind::Embedding 1x2"
            ]
        );
    }
}
