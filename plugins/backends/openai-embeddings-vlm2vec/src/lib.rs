//! The `openai-embeddings-vlm2vec` backend: VLM2Vec-style embeddings through vLLM's
//! embeddings chat API (`/v1/embeddings` with `messages`), sent as vLLM's `--backend
//! openai-embeddings-vlm2vec` sends them (`async_request_openai_embeddings_vlm2vec` in
//! `vllm/benchmarks/lib/endpoint_request_func.py`). A request with an image puts the image
//! first, then an instruction (`_preprocess_vlm2vec`): requests whose id ends in an even
//! number (or in no number) embed the image alone ("Represent the given image."), odd ones
//! the image with the prompt as a question, so a run mixes both evenly.

use bench_sdk::pooling::{self, MediaPosition, PoolingApi, PoolingBackend};
use bench_sdk::{PluginError, PooledKind, Prompt, RequestSpec};
use serde_json::{Map, Value, json};

/// The API's fields.
pub struct EmbeddingsVlm2Vec;

/// The instruction of an image-only request.
const IMAGE_ONLY: &str = "Represent the given image.";
/// The instruction of an image-and-text request, before the prompt.
const WITH_QUESTION: &str = "Represent the given image with the following question: ";

impl PoolingApi for EmbeddingsVlm2Vec {
    const NAME: &'static str = "openai-embeddings-vlm2vec";
    const DESCRIPTION: &'static str = "VLM2Vec embeddings (/v1/embeddings with messages), as \
        vLLM's --backend openai-embeddings-vlm2vec: the image first, then an instruction; even \
        request ids embed the image alone, odd ones with the prompt as a question. Reports \
        vLLM's embedding metrics.";
    const DEFAULT_PATH: &'static str = "/v1/embeddings";
    const KIND: PooledKind = PooledKind::Embedding;

    fn fields(spec: &RequestSpec, body: &mut Map<String, Value>) -> Result<(), PluginError> {
        let text = if spec.multimodal.is_empty() {
            None
        } else {
            let index = pooling::request_index(spec.request_id.as_deref());
            if index.is_none_or(|i| i % 2 == 0) {
                Some(IMAGE_ONLY.to_string())
            } else {
                let Prompt::Text(prompt) = &spec.prompt else {
                    return Err(PluginError::Unsupported(format!(
                        "{}: a request with an image needs a text prompt",
                        Self::NAME
                    )));
                };
                Some(format!("{WITH_QUESTION}{prompt}"))
            }
        };
        let messages =
            pooling::chat_messages(Self::NAME, spec, text.as_deref(), MediaPosition::First)?;
        body.insert("messages".into(), messages);
        body.insert("truncate_prompt_tokens".into(), json!(-1));
        Ok(())
    }
}

bench_sdk::export_backend!(PoolingBackend<EmbeddingsVlm2Vec>);

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::{Backend, ClientConfig, ContentPart};

    type Client = PoolingBackend<EmbeddingsVlm2Vec>;

    fn client() -> Client {
        Client::open(ClientConfig {
            model: "TIGER-Lab/VLM2Vec-Full".into(),
            ignore_eos: false,
            stream: false,
            extra_body: None,
            options: Vec::new(),
        })
        .unwrap()
    }

    fn messages(spec: RequestSpec) -> Value {
        let body: Value =
            serde_json::from_slice(&client().build_request(spec).unwrap().body).unwrap();
        body["messages"].clone()
    }

    #[test]
    fn even_ids_embed_the_image_alone_and_odd_ones_ask_the_prompt() {
        let image =
            json!({"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/"}});
        let mut spec = RequestSpec::text("what is it?".into(), 3, 1);
        spec.multimodal = vec![ContentPart::ImageUrl("data:image/jpeg;base64,/9j/".into())];
        for (id, text) in [
            (None, IMAGE_ONLY.to_string()),
            (Some("bench-4"), IMAGE_ONLY.to_string()),
            (Some("bench-7"), format!("{WITH_QUESTION}what is it?")),
        ] {
            spec.request_id = id.map(str::to_string);
            assert_eq!(
                messages(spec.clone()),
                json!([{"role": "user", "content": [image, {"type": "text", "text": text}]}]),
                "{id:?}"
            );
        }
        // Without an image the prompt goes as it is.
        spec.multimodal.clear();
        assert_eq!(
            messages(spec),
            json!([{"role": "user", "content": [{"type": "text", "text": "what is it?"}]}])
        );
    }

    #[test]
    fn decodes_a_vllm_response_cut_anywhere() {
        let events = pooling::decode_at_every_cut(
            &client(),
            "{\"id\":\"embd-v\",\"object\":\"list\",\"created\":3,\"model\":\"TIGER-Lab/VLM2Vec-Full\",\"data\":[{\"index\":0,\"object\":\"embedding\",\"embedding\":[1.5e-2,-2.0,3]}],\n\"usage\":{\"prompt_tokens\":770,\"total_tokens\":770,\"completion_tokens\":0,\"prompt_tokens_details\":null}}\n",
        );
        assert_eq!(
            events,
            [
                "0: usage prompt=770 completion=none",
                "0: pooled PooledKind::Embedding 1x3"
            ]
        );
    }
}
