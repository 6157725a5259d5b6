//! The `tensorrt-llm` backend: TensorRT-LLM behind Triton's generate extension
//! (`/v2/models/ensemble/generate_stream`), sent as vLLM's `--backend tensorrt-llm` sends
//! it (`async_request_trt_llm` in vLLM's older `benchmarks/backend_request_func.py`).
//!
//! The body is Triton's flat `{"text_input", "max_tokens", ...}` with vLLM's values
//! (`accumulate_tokens`, greedy sampling, `min_length` = the output length under
//! `--ignore-eos`). The response is server-sent events; as in vLLM, every event is a timing
//! point and its `text_output` is appended to the generated text.

use bench_sdk::json;
use bench_sdk::native::{self, FrameReader, NativeClient, NativeDecoder, NativeFrame, Streaming};
use bench_sdk::{
    Backend, BackendDescription, ClientConfig, Framing, HttpRequest, PluginError, PluginInfo,
    RequestSpec, ResponseHead,
};
use serde_json::{Map, json};

const NAME: &str = "tensorrt-llm";

/// The TensorRT-LLM (Triton) backend.
pub struct TensorRtLlm {
    client: NativeClient,
}

impl Backend for TensorRtLlm {
    type Decoder = NativeDecoder<TritonFrames>;

    fn describe() -> BackendDescription {
        BackendDescription {
            info: PluginInfo {
                name: NAME.into(),
                version: env!("CARGO_PKG_VERSION").into(),
                description: "TensorRT-LLM through Triton's generate extension \
                              (/v2/models/ensemble/generate_stream, server-sent events), as \
                              vLLM's --backend tensorrt-llm. Text prompts; another Triton model \
                              than `ensemble` is reached with --endpoint."
                    .into(),
                options: Vec::new(),
            },
            openai_compatible: false,
        }
    }

    fn open(config: ClientConfig) -> Result<Self, PluginError> {
        let (client, options) = NativeClient::open(NAME, config, Streaming::Always)?;
        options.finish(&[])?;
        Ok(TensorRtLlm { client })
    }

    fn framing(&self) -> Framing {
        Framing::Sse
    }

    fn default_path(&self) -> String {
        "/v2/models/ensemble/generate_stream".into()
    }

    fn build_request(&self, spec: RequestSpec) -> Result<HttpRequest, PluginError> {
        let prompt = self.client.text_prompt(&spec)?;
        let mut body = Map::new();
        body.insert("accumulate_tokens".into(), json!(true));
        body.insert("text_input".into(), json!(prompt));
        body.insert("temperature".into(), json!(0.0));
        body.insert("top_p".into(), json!(1.0));
        body.insert("max_tokens".into(), json!(spec.expected_output_len));
        body.insert("stream".into(), json!(true));
        if self.client.ignore_eos() {
            body.insert("min_length".into(), json!(spec.expected_output_len));
        }
        self.client.request(body, &spec)
    }

    fn decoder(&self, _head: &ResponseHead) -> Result<Self::Decoder, PluginError> {
        Ok(NativeDecoder(TritonFrames))
    }
}

/// Reads Triton's generate events (`{"model_name", ..., "text_output"}`, or `{"error"}`).
pub struct TritonFrames;

impl FrameReader for TritonFrames {
    fn read(&mut self, frame: &[u8]) -> json::Result<NativeFrame> {
        let mut parsed = NativeFrame::default();
        let mut error = false;
        native::read_object(frame, |key, v| {
            if key.is("text_output") {
                parsed.chunk = Some(v.string()?);
            } else if key.is("error") {
                parsed.error = native::server_error(v)?;
                error = parsed.error.is_some();
            }
            Ok(())
        })?;
        if error {
            // An error event carries no token.
            parsed.chunk = None;
        } else if parsed.chunk.is_none() {
            // vLLM times every event; one without `text_output` is still a timing point.
            parsed.chunk = Some(None);
        }
        Ok(parsed)
    }
}

bench_sdk::export_backend!(TensorRtLlm);

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::native::decode_sse_split_everywhere;
    use serde_json::Value;

    fn client(stream: bool, ignore_eos: bool) -> Result<TensorRtLlm, PluginError> {
        TensorRtLlm::open(ClientConfig {
            model: "llama".into(),
            stream,
            ignore_eos,
            extra_body: None,
            options: Vec::new(),
        })
    }

    #[test]
    fn payload_matches_vllm() {
        let backend = client(true, false).unwrap();
        assert_eq!(
            backend.default_path(),
            "/v2/models/ensemble/generate_stream"
        );
        let request = backend
            .build_request(RequestSpec::text("What is ML?".into(), 3, 16))
            .unwrap();
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(
            body,
            json!({
                "accumulate_tokens": true,
                "text_input": "What is ML?",
                "temperature": 0.0,
                "top_p": 1.0,
                "max_tokens": 16,
                "stream": true,
            })
        );
        let request = client(true, true)
            .unwrap()
            .build_request(RequestSpec::text("x".into(), 1, 16))
            .unwrap();
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(body["min_length"], json!(16));
        assert!(
            matches!(client(false, false), Err(PluginError::Unsupported(m)) if m.contains("--no-stream"))
        );
    }

    #[test]
    fn decodes_a_stream_split_anywhere() {
        let body = concat!(
            "data: {\"context_logits\":0.0,\"cum_log_probs\":0.0,\"generation_logits\":0.0,\"model_name\":\"ensemble\",\"model_version\":\"1\",\"output_log_probs\":[0.0],\"sequence_end\":false,\"sequence_id\":0,\"sequence_start\":false,\"text_output\":\" Machine\"}\n\n",
            "data: {\"context_logits\":0.0,\"cum_log_probs\":0.0,\"generation_logits\":0.0,\"model_name\":\"ensemble\",\"model_version\":\"1\",\"output_log_probs\":[0.0],\"sequence_end\":false,\"sequence_id\":0,\"sequence_start\":false,\"text_output\":\"\"}\n\n",
            "data: {\"context_logits\":0.0,\"cum_log_probs\":0.0,\"generation_logits\":0.0,\"model_name\":\"ensemble\",\"model_version\":\"1\",\"output_log_probs\":[0.0],\"sequence_end\":false,\"sequence_id\":0,\"sequence_start\":false,\"text_output\":\" learning\\u2019s\"}\n\n",
            "data: {\"error\":\"in ensemble 'ensemble', Encountered error for requestId 7: max_tokens exceeds the limit\"}\n\n",
        );
        let events = decode_sse_split_everywhere(|| NativeDecoder(TritonFrames), body);
        assert_eq!(
            events,
            [
                r#"0: chunk content=" Machine" reasoning=none"#,
                r#"1: chunk content="" reasoning=none"#,
                r#"2: chunk content=" learning’s" reasoning=none"#,
                "3: error server: the server reported an error: in ensemble 'ensemble', \
                 Encountered error for requestId 7: max_tokens exceeds the limit",
            ]
        );
        let broken = decode_sse_split_everywhere(|| NativeDecoder(TritonFrames), "data: [1]\n\n");
        assert!(
            broken[0].starts_with("0: error malformed: invalid JSON"),
            "{broken:?}"
        );
    }
}
