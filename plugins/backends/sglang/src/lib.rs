//! The `sglang` backend: SGLang's native `/generate` API, streamed.
//!
//! vLLM's older client maps `--backend sglang` to its OpenAI completions function; SGLang
//! serves that API too (reach it with `--backend openai`). This backend measures the
//! server's own API instead: `{"text" | "input_ids", "sampling_params": {...}, "stream"}`,
//! answered by server-sent events whose `text` is the whole text so far (SGLang's default;
//! a server started with `--incremental-streaming-output` sends only the new text: set the
//! `incremental` option). Every event is a timing point, as a completions chunk is for
//! vLLM; the new text of an event is the part of its `text` after the previous event's.
//! The last event's `meta_info` gives the finish reason and the token counts.

use bench_sdk::json::{self, Str};
use bench_sdk::native::{
    self, Finish, FrameReader, NativeClient, NativeDecoder, NativeFrame, Streaming, stream_option,
};
use bench_sdk::options::option;
use bench_sdk::{
    Backend, BackendDescription, ClientConfig, Framing, HttpRequest, PluginError, PluginInfo,
    Prompt, RequestSpec, ResponseHead, Usage,
};
use serde_json::{Map, json};

const NAME: &str = "sglang";

/// The SGLang backend.
pub struct Sglang {
    client: NativeClient,
    incremental: bool,
}

impl Backend for Sglang {
    type Decoder = NativeDecoder<SglangFrames>;

    fn describe() -> BackendDescription {
        BackendDescription {
            info: PluginInfo {
                name: NAME.into(),
                version: env!("CARGO_PKG_VERSION").into(),
                description: "SGLang's native /generate API (server-sent events with the text so \
                              far). Prompts are text or token ids. vLLM maps --backend sglang to \
                              OpenAI completions: use --backend openai for that."
                    .into(),
                options: vec![
                    stream_option(),
                    option(
                        "incremental",
                        "The server sends only each event's new text \
                         (--incremental-streaming-output) instead of the text so far.",
                        Some("false"),
                    )
                    .switch(),
                ],
            },
            openai_compatible: false,
        }
    }

    fn open(config: ClientConfig) -> Result<Self, PluginError> {
        let (client, mut options) = NativeClient::open(NAME, config, Streaming::Optional)?;
        let incremental = options.flag("incremental", false)?;
        options.finish(&Self::describe().info.options)?;
        Ok(Sglang {
            client,
            incremental,
        })
    }

    fn framing(&self) -> Framing {
        self.client.framing()
    }

    fn default_path(&self) -> String {
        "/generate".into()
    }

    fn build_request(&self, spec: RequestSpec) -> Result<HttpRequest, PluginError> {
        let mut body = Map::new();
        match &spec.prompt {
            Prompt::TokenIds(ids) if spec.multimodal.is_empty() => {
                body.insert("input_ids".into(), json!(ids));
            }
            _ => {
                body.insert("text".into(), json!(self.client.text_prompt(&spec)?));
            }
        }
        body.insert(
            "sampling_params".into(),
            json!({
                "max_new_tokens": spec.expected_output_len,
                "temperature": 0.0,
                "ignore_eos": self.client.ignore_eos(),
            }),
        );
        body.insert("stream".into(), json!(self.client.stream()));
        if let Some(lora) = spec.lora_name.as_deref().filter(|name| !name.is_empty()) {
            body.insert("lora_path".into(), json!(lora));
        }
        self.client.request(body, &spec)
    }

    fn decoder(&self, _head: &ResponseHead) -> Result<Self::Decoder, PluginError> {
        Ok(NativeDecoder(SglangFrames {
            cumulative: self.client.stream() && !self.incremental,
            previous: Vec::new(),
        }))
    }
}

/// Reads SGLang's events (`{"text", "output_ids", "meta_info": {...}}`, or `{"error"}`).
pub struct SglangFrames {
    /// Each event's `text` repeats the previous one's.
    cumulative: bool,
    /// The raw literal of the previous event's text (JSON escapes as sent): the same text
    /// is encoded the same way, so the new text starts where these bytes end.
    previous: Vec<u8>,
}

impl FrameReader for SglangFrames {
    fn read(&mut self, frame: &[u8]) -> json::Result<NativeFrame> {
        let mut parsed = NativeFrame::default();
        let mut text: Option<Str> = None;
        let mut usage = Usage {
            prompt_tokens: None,
            completion_tokens: None,
            cached_prompt_tokens: None,
        };
        native::read_object(frame, |key, v| {
            if key.is("text") {
                text = v.string()?;
            } else if key.is("meta_info") {
                v.object(|key, v| {
                    if key.is("finish_reason") {
                        // null, or {"type": "length" | "stop" | "abort", ...}.
                        v.object(|key, v| {
                            if key.is("type") {
                                parsed.finish = v.string()?.map(Finish::Text);
                            }
                            Ok(())
                        })?;
                    } else if key.is("prompt_tokens") {
                        usage.prompt_tokens = native::count(v)?;
                    } else if key.is("completion_tokens") {
                        usage.completion_tokens = native::count(v)?;
                    } else if key.is("cached_tokens") {
                        usage.cached_prompt_tokens = native::count(v)?;
                    }
                    Ok(())
                })?;
            } else if key.is("error") {
                parsed.error = native::server_error(v)?;
            }
            Ok(())
        })?;
        if parsed.error.is_some() {
            return Ok(parsed);
        }
        if let Some(full) = text
            && self.cumulative
        {
            let raw = full.raw(frame);
            let new = if raw.starts_with(&self.previous) {
                Str {
                    start: full.start + self.previous.len(),
                    ..full
                }
            } else {
                full
            };
            self.previous.clear();
            self.previous.extend_from_slice(raw);
            text = Some(new);
        }
        parsed.chunk = Some(text);
        // The counts grow with every event: the final ones come with the finish reason.
        if parsed.finish.is_some() {
            parsed.usage = Some(usage);
        }
        Ok(parsed)
    }
}

bench_sdk::export_backend!(Sglang);

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::native::{decode_sse_split_everywhere, decode_whole};
    use serde_json::Value;

    fn client(stream: bool, options: &[(&str, &str)]) -> Result<Sglang, PluginError> {
        Sglang::open(ClientConfig {
            model: "Qwen/Qwen3-0.6B".into(),
            stream,
            ignore_eos: true,
            extra_body: None,
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        })
    }

    fn decoder(backend: &Sglang) -> NativeDecoder<SglangFrames> {
        backend
            .decoder(&ResponseHead {
                status: 200,
                headers: Vec::new(),
            })
            .unwrap()
    }

    #[test]
    fn payloads() {
        let backend = client(true, &[]).unwrap();
        assert_eq!(backend.default_path(), "/generate");
        assert_eq!(backend.framing(), Framing::Sse);
        let mut spec = RequestSpec::text("The capital of France is".into(), 5, 8);
        spec.lora_name = Some("sql-lora".into());
        let body: Value =
            serde_json::from_slice(&backend.build_request(spec).unwrap().body).unwrap();
        assert_eq!(
            body,
            json!({
                "text": "The capital of France is",
                "sampling_params": {"max_new_tokens": 8, "temperature": 0.0, "ignore_eos": true},
                "stream": true,
                "lora_path": "sql-lora",
            })
        );
        let mut spec = RequestSpec::text(String::new(), 3, 2);
        spec.prompt = Prompt::TokenIds(vec![791, 6864, 315]);
        let backend = client(false, &[]).unwrap();
        assert_eq!(backend.framing(), Framing::Raw);
        let body: Value =
            serde_json::from_slice(&backend.build_request(spec).unwrap().body).unwrap();
        assert_eq!(body["input_ids"], json!([791, 6864, 315]));
        assert_eq!(body["stream"], json!(false));
        assert!(
            matches!(client(true, &[("n", "2")]), Err(PluginError::InvalidConfig(m)) if m.contains("\"n\""))
        );
    }

    /// SGLang's default stream: each event has the whole text so far, escapes included.
    const CUMULATIVE: &str = concat!(
        "data: {\"text\":\" Paris\",\"output_ids\":[12095],\"meta_info\":{\"id\":\"a1\",\"finish_reason\":null,\"prompt_tokens\":5,\"completion_tokens\":1,\"cached_tokens\":0}}\n\n",
        "data: {\"text\":\" Paris\\n\\\"\",\"output_ids\":[12095,198],\"meta_info\":{\"id\":\"a1\",\"finish_reason\":null,\"prompt_tokens\":5,\"completion_tokens\":2,\"cached_tokens\":0}}\n\n",
        "data: {\"text\":\" Paris\\n\\\"\",\"output_ids\":[12095,198,2],\"meta_info\":{\"id\":\"a1\",\"finish_reason\":null,\"prompt_tokens\":5,\"completion_tokens\":3,\"cached_tokens\":0}}\n\n",
        "data: {\"text\":\" Paris\\n\\\"é.\",\"output_ids\":[12095,198,2,13],\"meta_info\":{\"id\":\"a1\",\"finish_reason\":{\"type\":\"length\",\"length\":4},\"prompt_tokens\":5,\"completion_tokens\":4,\"cached_tokens\":3}}\n\n",
        "data: [DONE]\n\n",
    );

    #[test]
    fn decodes_the_new_text_of_a_cumulative_stream_split_anywhere() {
        let backend = client(true, &[]).unwrap();
        let events = decode_sse_split_everywhere(|| decoder(&backend), CUMULATIVE);
        assert_eq!(
            events,
            [
                r#"0: chunk content=" Paris" reasoning=none"#,
                r#"1: chunk content="\n\"" reasoning=none"#,
                // A token without text (a special token) is still a timing point.
                r#"2: chunk content="" reasoning=none"#,
                r#"3: chunk content="é." reasoning=none"#,
                "3: usage prompt=5 completion=4",
                "3: finish length",
            ]
        );
    }

    #[test]
    fn incremental_streams_and_whole_bodies() {
        let backend = client(true, &[("incremental", "true")]).unwrap();
        let body = concat!(
            "data: {\"text\":\" Paris\",\"meta_info\":{\"finish_reason\":null,\"prompt_tokens\":5,\"completion_tokens\":1}}\n\n",
            "data: {\"text\":\" Paris\",\"meta_info\":{\"finish_reason\":{\"type\":\"stop\",\"matched\":2},\"prompt_tokens\":5,\"completion_tokens\":2}}\n\n",
            "data: [DONE]\n\n",
        );
        let events = decode_sse_split_everywhere(|| decoder(&backend), body);
        assert_eq!(
            events,
            [
                r#"0: chunk content=" Paris" reasoning=none"#,
                r#"1: chunk content=" Paris" reasoning=none"#,
                "1: usage prompt=5 completion=2",
                "1: finish stop",
            ]
        );
        let backend = client(false, &[]).unwrap();
        let events = decode_whole(
            decoder(&backend),
            "{\"text\":\" Paris is\",\"output_ids\":[1,2],\"meta_info\":{\"id\":\"b\",\"finish_reason\":{\"type\":\"length\",\"length\":2},\"prompt_tokens\":5,\"completion_tokens\":2,\"cached_tokens\":0}}",
        );
        assert_eq!(
            events,
            [
                r#"0: chunk content=" Paris is" reasoning=none"#,
                "0: usage prompt=5 completion=2",
                "0: finish length",
            ]
        );
        let events = decode_whole(
            decoder(&backend),
            r#"{"error":{"object":"error","message":"The input is too long","type":"BadRequestError","code":400}}"#,
        );
        assert_eq!(
            events,
            ["0: error server: the server reported an error: The input is too long"]
        );
    }
}
