//! The `openai-embeddings-chat` backend: embeddings of chat messages (`/v1/embeddings`
//! with `messages`, vLLM's extension of OpenAI's API for multimodal embedding models),
//! sent as vLLM's `--backend openai-embeddings-chat` sends them
//! (`async_request_openai_embeddings_chat` in
//! `vllm/benchmarks/lib/endpoint_request_func.py`): chat messages as given, else one user
//! message with the text, then the multimodal items; `truncate_prompt_tokens: -1`.

use bench_sdk::pooling::{self, MediaPosition, PoolingApi, PoolingBackend};
use bench_sdk::{PluginError, PooledKind, RequestSpec};
use serde_json::{Map, Value, json};

/// The API's fields.
pub struct EmbeddingsChat;

impl PoolingApi for EmbeddingsChat {
    const NAME: &'static str = "openai-embeddings-chat";
    const DESCRIPTION: &'static str = "Embeddings of chat messages (/v1/embeddings with \
        messages), as vLLM's --backend openai-embeddings-chat: the text, then images. Reports \
        vLLM's embedding metrics.";
    const DEFAULT_PATH: &'static str = "/v1/embeddings";
    const KIND: PooledKind = PooledKind::Embedding;

    fn fields(spec: &RequestSpec, body: &mut Map<String, Value>) -> Result<(), PluginError> {
        let messages = pooling::chat_messages(Self::NAME, spec, None, MediaPosition::Last)?;
        body.insert("messages".into(), messages);
        body.insert("truncate_prompt_tokens".into(), json!(-1));
        Ok(())
    }
}

bench_sdk::export_backend!(PoolingBackend<EmbeddingsChat>);

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::{Backend, ChatMessage, ClientConfig, ContentPart, Prompt};

    type Client = PoolingBackend<EmbeddingsChat>;

    fn client() -> Client {
        Client::open(ClientConfig {
            model: "TIGER-Lab/VLM2Vec-Full".into(),
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
    fn payloads_match_vllm() {
        let mut spec = RequestSpec::text("a red car".into(), 3, 1);
        spec.multimodal = vec![ContentPart::ImageUrl("data:image/jpeg;base64,/9j/".into())];
        assert_eq!(
            body(spec.clone()),
            json!({
                "model": "TIGER-Lab/VLM2Vec-Full",
                "messages": [{"role": "user", "content": [
                    {"type": "text", "text": "a red car"},
                    {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/"}},
                ]}],
                "truncate_prompt_tokens": -1,
            })
        );
        spec.multimodal.clear();
        spec.prompt = Prompt::Chat(vec![ChatMessage {
            role: "user".into(),
            content: vec![ContentPart::Text("hello".into())],
        }]);
        assert_eq!(
            body(spec.clone())["messages"],
            json!([{"role": "user", "content": "hello"}])
        );
        spec.prompt = Prompt::Texts(vec!["a".into()]);
        assert!(matches!(
            client().build_request(spec),
            Err(PluginError::Unsupported(_))
        ));
        assert_eq!(client().default_path(), "/v1/embeddings");
    }

    #[test]
    fn decodes_a_vllm_response_cut_anywhere() {
        let events = pooling::decode_at_every_cut(
            &client(),
            "{\"id\":\"embd-1\",\"object\":\"list\",\"created\":1,\"model\":\"m\",\"data\":[{\"index\":0,\"object\":\"embedding\",\"embedding\":[0.5,-0.25,0.125]}],\"usage\":{\"prompt_tokens\":1031,\"total_tokens\":1031,\"completion_tokens\":0,\"prompt_tokens_details\":null}}",
        );
        assert_eq!(
            events,
            [
                "0: usage prompt=1031 completion=none",
                "0: pooled PooledKind::Embedding 1x3"
            ]
        );
    }
}
