//! The `vllm-pooling` backend: vLLM's pooling API (`/pooling`, the raw output of any
//! pooling model: embeddings, token embeddings, classifier or reward outputs), sent as
//! vLLM's `--backend vllm-pooling` sends it (`async_request_vllm_pooling` in
//! `vllm/benchmarks/lib/endpoint_request_func.py`): `input` and
//! `truncate_prompt_tokens: -1`. Task-specific fields (`task`, `softmax`) go in
//! `--extra-body`.

use bench_sdk::pooling::{self, PoolingApi, PoolingBackend};
use bench_sdk::{PluginError, PooledKind, RequestSpec};
use serde_json::{Map, Value, json};

/// The API's fields.
pub struct Pooling;

impl PoolingApi for Pooling {
    const NAME: &'static str = "vllm-pooling";
    const DESCRIPTION: &'static str = "vLLM's pooling API (/pooling), as vLLM's --backend \
        vllm-pooling: texts, batches of texts or token ids as input. Reports vLLM's embedding \
        metrics.";
    const DEFAULT_PATH: &'static str = "/pooling";
    /// What a pooling model returns depends on the model: the response says only "pooling".
    const KIND: PooledKind = PooledKind::Other;

    fn fields(spec: &RequestSpec, body: &mut Map<String, Value>) -> Result<(), PluginError> {
        body.insert("truncate_prompt_tokens".into(), json!(-1));
        body.insert("input".into(), pooling::input(Self::NAME, spec)?);
        Ok(())
    }
}

bench_sdk::export_backend!(PoolingBackend<Pooling>);

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::{Backend, ClientConfig, Prompt};

    type Client = PoolingBackend<Pooling>;

    fn client(extra_body: Option<&str>) -> Client {
        Client::open(ClientConfig {
            model: "internlm/internlm2-1_8b-reward".into(),
            ignore_eos: true,
            stream: true,
            extra_body: extra_body.map(str::to_string),
            options: Vec::new(),
        })
        .unwrap()
    }

    #[test]
    fn payloads_match_vllm() {
        let backend = client(Some(r#"{"task":"token_embed"}"#));
        assert_eq!(backend.default_path(), "/pooling");
        let mut spec = RequestSpec::text("x".into(), 1, 1);
        spec.prompt = Prompt::Texts(vec!["one".into(), "two".into()]);
        let body: Value =
            serde_json::from_slice(&backend.build_request(spec).unwrap().body).unwrap();
        assert_eq!(
            body,
            json!({
                "model": "internlm/internlm2-1_8b-reward", "truncate_prompt_tokens": -1,
                "input": ["one", "two"], "ignore_eos": true, "task": "token_embed",
            })
        );
    }

    #[test]
    fn decodes_a_vllm_response_cut_anywhere() {
        let events = pooling::decode_at_every_cut(
            &client(None),
            r#"{"id":"pool-9e1","object":"list","created":1718000000,"model":"internlm/internlm2-1_8b-reward","data":[{"index":0,"object":"pooling","data":[[0.5,0.25],[-1.0,2.0],[3.5,0.0]]},{"index":1,"object":"pooling","data":[[1.0,1.0]]}],"usage":{"prompt_tokens":4,"total_tokens":4,"completion_tokens":0,"prompt_tokens_details":null}}"#,
        );
        // The first output's outer length: three token vectors.
        assert_eq!(
            events,
            [
                "0: usage prompt=4 completion=none",
                "0: pooled PooledKind::Other 2x3"
            ]
        );
    }
}
