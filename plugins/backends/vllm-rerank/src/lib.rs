//! The `vllm-rerank` backend: vLLM's rerank API (`/v1/rerank`, also served at `/rerank`
//! and `/v2/rerank`), sent as vLLM's `--backend vllm-rerank` sends it
//! (`async_request_vllm_rerank` in `vllm/benchmarks/lib/endpoint_request_func.py`): a
//! `query`, its `documents` and `truncate_prompt_tokens: -1`. As in vLLM, neither
//! `ignore_eos` nor an extra body is sent: its request function skips the common payload
//! update the other backends make. A batch of texts (a dataset without a rerank prompt)
//! is read as vLLM reads its prompt list: the query, then the documents.

use bench_sdk::pooling::{PoolingApi, PoolingBackend};
use bench_sdk::{PluginError, PooledKind, Prompt, RequestSpec};
use serde_json::{Map, Value, json};

/// The API's fields.
pub struct Rerank;

impl PoolingApi for Rerank {
    const NAME: &'static str = "vllm-rerank";
    const DESCRIPTION: &'static str = "vLLM's rerank API (/v1/rerank), as vLLM's --backend \
        vllm-rerank: a query and its documents (dataset random-rerank). Reports vLLM's \
        embedding metrics.";
    const DEFAULT_PATH: &'static str = "/v1/rerank";
    const KIND: PooledKind = PooledKind::Score;
    const MERGES_EXTRA_BODY: bool = false;

    fn fields(spec: &RequestSpec, body: &mut Map<String, Value>) -> Result<(), PluginError> {
        let (query, documents) = match &spec.prompt {
            Prompt::Rerank(rerank) => (&rerank.query, rerank.documents.as_slice()),
            Prompt::Texts(texts) if texts.len() > 1 => (&texts[0], &texts[1..]),
            _ => {
                return Err(PluginError::Unsupported(format!(
                    "{}: a request needs a query and documents (dataset random-rerank without \
                     --no-reranker)",
                    Self::NAME
                )));
            }
        };
        body.insert("query".into(), json!(query));
        body.insert("documents".into(), json!(documents));
        body.insert("truncate_prompt_tokens".into(), json!(-1));
        Ok(())
    }
}

bench_sdk::export_backend!(PoolingBackend<Rerank>);

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::pooling;
    use bench_sdk::{Backend, ClientConfig, RerankInput};

    type Client = PoolingBackend<Rerank>;

    fn client() -> Client {
        Client::open(ClientConfig {
            model: "BAAI/bge-reranker-v2-m3".into(),
            ignore_eos: true,
            stream: true,
            extra_body: Some(r#"{"top_n":1}"#.into()),
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
        assert_eq!(client().default_path(), "/v1/rerank");
        let mut spec = RequestSpec::text(String::new(), 9, 1);
        spec.prompt = Prompt::Rerank(RerankInput {
            query: "what is a panda?".into(),
            documents: vec!["hi".into(), "The giant panda is a bear.".into()],
        });
        spec.extra_body = Some(r#"{"x":1}"#.into());
        // No ignore_eos and no extra body, as vLLM's rerank request function.
        assert_eq!(
            body(spec.clone()).unwrap(),
            json!({
                "model": "BAAI/bge-reranker-v2-m3",
                "query": "what is a panda?",
                "documents": ["hi", "The giant panda is a bear."],
                "truncate_prompt_tokens": -1,
            })
        );
        spec.prompt = Prompt::Texts(vec!["q".into(), "d1".into(), "d2".into()]);
        let sent = body(spec.clone()).unwrap();
        assert_eq!(
            (&sent["query"], &sent["documents"]),
            (&json!("q"), &json!(["d1", "d2"]))
        );
        spec.prompt = Prompt::Texts(vec!["q".into()]);
        assert!(matches!(
            body(spec.clone()),
            Err(PluginError::Unsupported(_))
        ));
        spec.prompt = Prompt::Text("q".into());
        assert!(matches!(body(spec), Err(PluginError::Unsupported(_))));
    }

    #[test]
    fn decodes_a_vllm_response_cut_anywhere() {
        let events = pooling::decode_at_every_cut(
            &client(),
            r#"{"id":"rerank-7c1","model":"BAAI/bge-reranker-v2-m3","usage":{"prompt_tokens":26,"total_tokens":26},"results":[{"index":1,"document":{"text":"The giant panda is a bear.","multi_modal":null},"relevance_score":0.998},{"index":0,"document":{"text":"hi","multi_modal":null},"relevance_score":0.0001}]}"#,
        );
        assert_eq!(
            events,
            [
                "0: usage prompt=26 completion=none",
                "0: pooled PooledKind::Score 2x0"
            ]
        );
    }
}
