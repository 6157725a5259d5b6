//! The `tgi` backend: Hugging Face Text Generation Inference's `/generate_stream`, sent as
//! vLLM's `--backend tgi` sends it (`async_request_tgi` in vLLM's older
//! `benchmarks/backend_request_func.py`).
//!
//! The body is `{"inputs", "parameters": {...}}` with vLLM's sampling values (TGI refuses
//! temperature 0 and top_p 1, hence 0.01 and 0.99). The response is server-sent events,
//! one token per event: every event is a timing point (vLLM times each one), its
//! `token.text` is the text unless the token is special (TGI leaves special tokens out of
//! `generated_text`, which vLLM reports), and the last event's `details` give the finish
//! reason and the number of generated tokens.

use bench_sdk::json::{self, Str};
use bench_sdk::native::{
    self, Finish, FrameReader, NativeClient, NativeDecoder, NativeFrame, Streaming,
};
use bench_sdk::{
    Backend, BackendDescription, ClientConfig, Framing, HttpRequest, PluginError, PluginInfo,
    RequestSpec, ResponseHead, Usage,
};
use serde_json::{Map, json};

const NAME: &str = "tgi";

/// The TGI backend.
pub struct Tgi {
    client: NativeClient,
}

impl Backend for Tgi {
    type Decoder = NativeDecoder<TgiFrames>;

    fn describe() -> BackendDescription {
        BackendDescription {
            info: PluginInfo {
                name: NAME.into(),
                version: env!("CARGO_PKG_VERSION").into(),
                description: "Hugging Face TGI's /generate_stream (server-sent events, one token \
                              per event), as vLLM's --backend tgi. Text prompts."
                    .into(),
                options: Vec::new(),
            },
            openai_compatible: false,
        }
    }

    fn open(config: ClientConfig) -> Result<Self, PluginError> {
        let (client, options) = NativeClient::open(NAME, config, Streaming::Always)?;
        options.finish(&[])?;
        Ok(Tgi { client })
    }

    fn framing(&self) -> Framing {
        Framing::Sse
    }

    fn default_path(&self) -> String {
        "/generate_stream".into()
    }

    fn build_request(&self, spec: RequestSpec) -> Result<HttpRequest, PluginError> {
        let prompt = self.client.text_prompt(&spec)?;
        let mut body = Map::new();
        body.insert("inputs".into(), json!(prompt));
        body.insert(
            "parameters".into(),
            json!({
                "max_new_tokens": spec.expected_output_len,
                "do_sample": true,
                "temperature": 0.01,
                "top_p": 0.99,
                "truncate": spec.prompt_len,
                "ignore_eos_token": self.client.ignore_eos(),
            }),
        );
        self.client.request(body, &spec)
    }

    fn decoder(&self, _head: &ResponseHead) -> Result<Self::Decoder, PluginError> {
        Ok(NativeDecoder(TgiFrames))
    }
}

/// Reads TGI's stream events (`{"token": {...}, "generated_text", "details"}`, or
/// `{"error", "error_type"}`).
pub struct TgiFrames;

impl FrameReader for TgiFrames {
    fn read(&mut self, frame: &[u8]) -> json::Result<NativeFrame> {
        let mut parsed = NativeFrame::default();
        native::read_object(frame, |key, v| {
            if key.is("token") {
                let (mut text, mut special) = (None::<Str>, false);
                let object = v.object(|key, v| {
                    if key.is("text") {
                        text = v.string()?;
                    } else if key.is("special") {
                        special = native::boolean(frame, v)?.unwrap_or(false);
                    }
                    Ok(())
                })?;
                if object.is_some() {
                    parsed.chunk = Some(if special { None } else { text });
                    parsed.tokens = Some(1);
                }
            } else if key.is("details") {
                v.object(|key, v| {
                    if key.is("finish_reason") {
                        parsed.finish = v.string()?.map(Finish::Text);
                    } else if key.is("generated_tokens")
                        && let Some(n) = native::count(v)?
                    {
                        parsed.usage = Some(Usage {
                            prompt_tokens: None,
                            completion_tokens: Some(n),
                            cached_prompt_tokens: None,
                        });
                    }
                    Ok(())
                })?;
            } else if key.is("error") {
                parsed.error = native::server_error(v)?;
            }
            Ok(())
        })?;
        Ok(parsed)
    }
}

bench_sdk::export_backend!(Tgi);

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::native::decode_sse_split_everywhere;
    use serde_json::Value;

    fn client(stream: bool, ignore_eos: bool) -> Result<Tgi, PluginError> {
        Tgi::open(ClientConfig {
            model: "bigscience/bloom-560m".into(),
            stream,
            ignore_eos,
            extra_body: None,
            options: Vec::new(),
        })
    }

    #[test]
    fn payload_matches_vllm() {
        let backend = client(true, true).unwrap();
        assert_eq!(backend.default_path(), "/generate_stream");
        let mut spec = RequestSpec::text("What is deep learning?".into(), 5, 20);
        spec.request_id = Some("bench-3".into());
        let request = backend.build_request(spec).unwrap();
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(
            body,
            json!({
                "inputs": "What is deep learning?",
                "parameters": {
                    "max_new_tokens": 20,
                    "do_sample": true,
                    "temperature": 0.01,
                    "top_p": 0.99,
                    "truncate": 5,
                    "ignore_eos_token": true,
                },
            })
        );
        assert_eq!(
            request.headers[1],
            ("x-request-id".into(), "bench-3".into())
        );
    }

    #[test]
    fn no_stream_and_options_are_refused() {
        assert!(
            matches!(client(false, false), Err(PluginError::Unsupported(m)) if m.contains("--no-stream"))
        );
        let unknown = Tgi::open(ClientConfig {
            model: "m".into(),
            stream: true,
            ignore_eos: false,
            extra_body: None,
            options: vec![("stream".into(), "false".into())],
        });
        assert!(matches!(unknown, Err(PluginError::InvalidConfig(m)) if m.contains("stream")));
    }

    /// A stream as TGI 3 sends it: `data:` without a space, a keep-alive comment, a special
    /// token (a timing point without text), details on the last event.
    const STREAM: &str = concat!(
        "data:{\"index\":1,\"token\":{\"id\":3838,\"text\":\" Deep\",\"logprob\":-0.31,\"special\":false},\"generated_text\":null,\"details\":null}\n\n",
        ":\n\n",
        "data:{\"index\":2,\"token\":{\"id\":6975,\"text\":\" \\\"learning\\\"\",\"logprob\":-0.02,\"special\":false},\"generated_text\":null,\"details\":null}\n\n",
        "data:{\"index\":3,\"token\":{\"id\":2,\"text\":\"</s>\",\"logprob\":-0.5,\"special\":true},\"generated_text\":\" Deep \\\"learning\\\"\",\"details\":{\"finish_reason\":\"eos_token\",\"generated_tokens\":3,\"seed\":null}}\n\n",
    );

    #[test]
    fn decodes_a_stream_split_anywhere() {
        let events = decode_sse_split_everywhere(|| NativeDecoder(TgiFrames), STREAM);
        assert_eq!(
            events,
            [
                r#"0: chunk content=" Deep" reasoning=none"#,
                r#"1: chunk content=" \"learning\"" reasoning=none"#,
                "2: chunk content=none reasoning=none",
                "2: usage prompt=none completion=3",
                "2: finish eos_token",
            ]
        );
    }

    #[test]
    fn errors_and_broken_frames_fail_the_request() {
        let body = concat!(
            "data:{\"index\":1,\"token\":{\"id\":1,\"text\":\"a\",\"logprob\":0.0,\"special\":false},\"generated_text\":null,\"details\":null}\n\n",
            "data:{\"error\":\"Request failed during generation: Server error: CUDA out of memory\",\"error_type\":\"generation\"}\n\n",
            "data:{\"index\":2,\"token\":{\"id\":1,\"te\n\n",
        );
        let events = decode_sse_split_everywhere(|| NativeDecoder(TgiFrames), body);
        assert_eq!(events.len(), 3, "{events:?}");
        assert_eq!(
            events[1],
            "1: error server: the server reported an error: Request failed during generation: \
             Server error: CUDA out of memory"
        );
        assert!(
            events[2].starts_with("2: error malformed: invalid JSON"),
            "{}",
            events[2]
        );
    }
}
