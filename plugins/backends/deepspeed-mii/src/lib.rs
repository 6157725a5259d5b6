//! The `deepspeed-mii` backend: DeepSpeed-MII's completions API, not streamed, sent as
//! vLLM's `--backend deepspeed-mii` sends it (`async_request_deepspeed_mii` in vLLM's older
//! `benchmarks/backend_request_func.py`).
//!
//! The body is `{"model", "prompt", "max_tokens", "temperature": 0.01, "top_p": 1.0}`
//! (MII refuses temperature 0) with no `stream`, and the answer is one JSON body whose
//! text is `choices[0].text` (MII's OpenAI-style server) or `text[0]` (its older RESTful
//! API). The response has no tokens to time: vLLM reports TTFT 0 as a placeholder, bench
//! reports the time to the whole body (its only frame) as TTFT, which equals the
//! end-to-end latency, and no ITL.

use bench_sdk::json::{self, Str};
use bench_sdk::native::{
    self, Finish, FrameReader, NativeClient, NativeDecoder, NativeFrame, Streaming,
};
use bench_sdk::{
    Backend, BackendDescription, ClientConfig, Framing, HttpRequest, PluginError, PluginInfo,
    RequestSpec, ResponseHead, Usage,
};
use serde_json::{Map, json};

const NAME: &str = "deepspeed-mii";

/// The DeepSpeed-MII backend.
pub struct DeepspeedMii {
    client: NativeClient,
}

impl Backend for DeepspeedMii {
    type Decoder = NativeDecoder<MiiBody>;

    fn describe() -> BackendDescription {
        BackendDescription {
            info: PluginInfo {
                name: NAME.into(),
                version: env!("CARGO_PKG_VERSION").into(),
                description: "DeepSpeed-MII's completions API (/v1/completions), not streamed, \
                              as vLLM's --backend deepspeed-mii: TTFT is the whole response's \
                              latency and there is no ITL. Text prompts."
                    .into(),
                options: Vec::new(),
            },
            openai_compatible: false,
        }
    }

    fn open(config: ClientConfig) -> Result<Self, PluginError> {
        let (client, options) = NativeClient::open(NAME, config, Streaming::Never)?;
        options.finish(&[])?;
        Ok(DeepspeedMii { client })
    }

    fn framing(&self) -> Framing {
        Framing::Raw
    }

    fn default_path(&self) -> String {
        "/v1/completions".into()
    }

    fn build_request(&self, spec: RequestSpec) -> Result<HttpRequest, PluginError> {
        let prompt = self.client.text_prompt(&spec)?;
        let mut body = Map::new();
        body.insert("model".into(), json!(self.client.model(&spec)));
        body.insert("prompt".into(), json!(prompt));
        body.insert("max_tokens".into(), json!(spec.expected_output_len));
        body.insert("temperature".into(), json!(0.01));
        body.insert("top_p".into(), json!(1.0));
        self.client.request(body, &spec)
    }

    fn decoder(&self, _head: &ResponseHead) -> Result<Self::Decoder, PluginError> {
        Ok(NativeDecoder(MiiBody))
    }
}

/// Reads MII's answer: `{"choices": [{"text", "finish_reason"}], "usage"}` or
/// `{"text": ["..."]}`; any other object is an error, as in vLLM.
pub struct MiiBody;

impl FrameReader for MiiBody {
    fn read(&mut self, frame: &[u8]) -> json::Result<NativeFrame> {
        let mut parsed = NativeFrame::default();
        let mut text: Option<Option<Str>> = None;
        native::read_object(frame, |key, v| {
            if key.is("choices") {
                v.array(|index, choice| {
                    if index == 0 {
                        let mut first = None;
                        choice.object(|key, v| {
                            if key.is("text") {
                                first = v.string()?;
                            } else if key.is("finish_reason") {
                                parsed.finish = v.string()?.map(Finish::Text);
                            }
                            Ok(())
                        })?;
                        text = Some(first);
                    }
                    Ok(())
                })?;
            } else if key.is("text") && text.is_none() {
                v.array(|index, item| {
                    if index == 0 {
                        text = Some(item.string()?);
                    }
                    Ok(())
                })?;
            } else if key.is("usage") {
                let mut usage = Usage {
                    prompt_tokens: None,
                    completion_tokens: None,
                    cached_prompt_tokens: None,
                };
                if v.object(|key, v| {
                    if key.is("prompt_tokens") {
                        usage.prompt_tokens = native::count(v)?;
                    } else if key.is("completion_tokens") {
                        usage.completion_tokens = native::count(v)?;
                    }
                    Ok(())
                })?
                .is_some_and(|n| n > 0)
                {
                    parsed.usage = Some(usage);
                }
            } else if key.is("error") {
                parsed.error = native::server_error(v)?;
            }
            Ok(())
        })?;
        match text {
            _ if parsed.error.is_some() => {}
            Some(text) => parsed.chunk = Some(text),
            None => {
                return Err(json::Error {
                    offset: 0,
                    what: "neither `choices` nor `text` in the response",
                });
            }
        }
        Ok(parsed)
    }
}

bench_sdk::export_backend!(DeepspeedMii);

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::native::decode_whole;
    use serde_json::Value;

    fn client(stream: bool) -> DeepspeedMii {
        DeepspeedMii::open(ClientConfig {
            model: "mistralai/Mistral-7B-v0.1".into(),
            stream,
            ignore_eos: true,
            extra_body: None,
            options: Vec::new(),
        })
        .unwrap()
    }

    #[test]
    fn payload_matches_vllm_and_never_streams() {
        for stream in [true, false] {
            let backend = client(stream);
            assert_eq!(backend.framing(), Framing::Raw);
            assert_eq!(backend.default_path(), "/v1/completions");
            let mut spec = RequestSpec::text("DeepSpeed is".into(), 2, 32);
            spec.lora_name = Some("adapter".into());
            let body: Value =
                serde_json::from_slice(&backend.build_request(spec).unwrap().body).unwrap();
            assert_eq!(
                body,
                json!({
                    "model": "adapter",
                    "prompt": "DeepSpeed is",
                    "max_tokens": 32,
                    "temperature": 0.01,
                    "top_p": 1.0,
                })
            );
        }
    }

    #[test]
    fn decodes_both_response_shapes() {
        let events = decode_whole(
            NativeDecoder(MiiBody),
            r#"{"id":"cmpl-1","object":"text_completion","created":1,"model":"mistralai/Mistral-7B-v0.1","choices":[{"index":0,"text":" a deep \"learning\" library","logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":2,"total_tokens":8,"completion_tokens":6}}"#,
        );
        assert_eq!(
            events,
            [
                r#"0: chunk content=" a deep \"learning\" library" reasoning=none"#,
                "0: usage prompt=2 completion=6",
                "0: finish length",
            ]
        );
        let events = decode_whole(
            NativeDecoder(MiiBody),
            r#"{"text": [" a library"], "details": null}"#,
        );
        assert_eq!(events, [r#"0: chunk content=" a library" reasoning=none"#]);
        let events = decode_whole(NativeDecoder(MiiBody), r#"{"generated": "x"}"#);
        assert!(
            events[0].contains("neither `choices` nor `text`"),
            "{events:?}"
        );
        let events = decode_whole(
            NativeDecoder(MiiBody),
            r#"{"error":{"message":"CUDA out of memory","code":500}}"#,
        );
        assert_eq!(
            events,
            ["0: error server: the server reported an error: CUDA out of memory"]
        );
    }
}
