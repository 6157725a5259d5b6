//! The `llama.cpp` backend: llama.cpp's `llama-server` native `/completion` API, streamed.
//!
//! The crate is `llama-cpp` (cargo refuses a `.` in a crate name); its manifest's
//! `[package.metadata.bench] name` is the name users type, vLLM's `llama.cpp`.
//! vLLM's older client maps `--backend llama.cpp` to its OpenAI completions
//! function; llama-server serves that API too (`--backend openai`). This backend measures
//! the server's own API instead: `{"prompt", "n_predict", "stream", ...}` answered by
//! server-sent events `{"content", "stop": false, ...}`, one per token, then a last event
//! with `"stop": true`, the token counts (`tokens_evaluated`, `tokens_predicted`) and why
//! it stopped (`stop_type`), and `timings.cache_n`, the prompt tokens its cache served
//! (reported as cached prompt tokens). Every event with `stop: false`, or with text, is a timing
//! point; the last event without text is not one (it carries no token).

use bench_sdk::json;
use bench_sdk::native::{
    self, Finish, FrameReader, NativeClient, NativeDecoder, NativeFrame, Streaming, stream_option,
};
use bench_sdk::{
    Backend, BackendDescription, ClientConfig, Framing, HttpRequest, PluginError, PluginInfo,
    Prompt, RequestSpec, ResponseHead, Usage,
};
use serde_json::{Map, json};

const NAME: &str = "llama.cpp";

/// The llama.cpp backend.
pub struct LlamaCpp {
    client: NativeClient,
}

impl Backend for LlamaCpp {
    type Decoder = NativeDecoder<LlamaFrames>;

    fn describe() -> BackendDescription {
        BackendDescription {
            info: PluginInfo {
                name: NAME.into(),
                version: env!("CARGO_PKG_VERSION").into(),
                description: "llama.cpp's llama-server native /completion API (server-sent \
                              events, one token per event). Prompts are text or token ids. vLLM \
                              maps --backend llama.cpp to OpenAI completions: use --backend \
                              openai for that."
                    .into(),
                options: vec![stream_option()],
            },
            openai_compatible: false,
        }
    }

    fn open(config: ClientConfig) -> Result<Self, PluginError> {
        let (client, options) = NativeClient::open(NAME, config, Streaming::Optional)?;
        options.finish(&Self::describe().info.options)?;
        Ok(LlamaCpp { client })
    }

    fn framing(&self) -> Framing {
        self.client.framing()
    }

    fn default_path(&self) -> String {
        "/completion".into()
    }

    fn build_request(&self, spec: RequestSpec) -> Result<HttpRequest, PluginError> {
        let prompt = match &spec.prompt {
            Prompt::TokenIds(ids) if spec.multimodal.is_empty() => json!(ids),
            _ => json!(self.client.text_prompt(&spec)?),
        };
        let mut body = Map::new();
        body.insert("prompt".into(), prompt);
        body.insert("n_predict".into(), json!(spec.expected_output_len));
        body.insert("temperature".into(), json!(0.0));
        body.insert("stream".into(), json!(self.client.stream()));
        if self.client.ignore_eos() {
            body.insert("ignore_eos".into(), json!(true));
        }
        self.client.request(body, &spec)
    }

    fn decoder(&self, _head: &ResponseHead) -> Result<Self::Decoder, PluginError> {
        Ok(NativeDecoder(LlamaFrames))
    }
}

/// Reads llama-server's `/completion` events (or its `{"error": {...}}`).
pub struct LlamaFrames;

impl FrameReader for LlamaFrames {
    fn read(&mut self, frame: &[u8]) -> json::Result<NativeFrame> {
        let mut parsed = NativeFrame::default();
        let mut content = None;
        let mut stop = false;
        let mut stop_type = None;
        let mut usage = Usage {
            prompt_tokens: None,
            completion_tokens: None,
            cached_prompt_tokens: None,
        };
        native::read_object(frame, |key, v| {
            if key.is("content") {
                content = v.string()?;
            } else if key.is("stop") {
                stop = native::boolean(frame, v)?.unwrap_or(false);
            } else if key.is("stop_type") {
                stop_type = v.string()?;
            } else if key.is("tokens_evaluated") {
                usage.prompt_tokens = native::count(v)?;
            } else if key.is("tokens_predicted") {
                usage.completion_tokens = native::count(v)?;
            } else if key.is("timings") {
                // `cache_n`: prompt tokens the slot's cache served.
                v.object(|key, v| {
                    if key.is("cache_n") {
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
        if !stop || content.is_some_and(|c| !c.is_empty()) {
            parsed.chunk = Some(content);
        }
        if stop {
            parsed.usage = Some(usage);
            // llama-server's stop types, named as OpenAI's finish reasons.
            parsed.finish = match stop_type.map(|s| s.raw(frame)) {
                Some(b"limit") => Some(Finish::Named("length")),
                Some(b"eos" | b"word") => Some(Finish::Named("stop")),
                _ => stop_type.map(Finish::Text),
            };
        }
        Ok(parsed)
    }
}

bench_sdk::export_backend!(LlamaCpp);

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::native::{decode_sse_split_everywhere, decode_whole};
    use serde_json::Value;

    fn client(stream: bool, ignore_eos: bool) -> LlamaCpp {
        LlamaCpp::open(ClientConfig {
            model: "qwen".into(),
            stream,
            ignore_eos,
            extra_body: Some(r#"{"cache_prompt":false}"#.into()),
            options: Vec::new(),
        })
        .unwrap()
    }

    #[test]
    fn payloads() {
        let backend = client(true, true);
        assert_eq!(backend.default_path(), "/completion");
        let body: Value = serde_json::from_slice(
            &backend
                .build_request(RequestSpec::text("Building a website".into(), 3, 12))
                .unwrap()
                .body,
        )
        .unwrap();
        assert_eq!(
            body,
            json!({
                "prompt": "Building a website",
                "n_predict": 12,
                "temperature": 0.0,
                "stream": true,
                "ignore_eos": true,
                "cache_prompt": false,
            })
        );
        let mut spec = RequestSpec::text(String::new(), 2, 1);
        spec.prompt = Prompt::TokenIds(vec![9707, 1879]);
        let backend = client(false, false);
        assert_eq!(backend.framing(), Framing::Raw);
        let body: Value =
            serde_json::from_slice(&backend.build_request(spec).unwrap().body).unwrap();
        assert_eq!(body["prompt"], json!([9707, 1879]));
        assert_eq!(body["stream"], json!(false));
        assert!(body.get("ignore_eos").is_none());
    }

    #[test]
    fn decodes_a_stream_split_anywhere() {
        let body = concat!(
            "data: {\"index\":0,\"content\":\" can\",\"tokens\":[646],\"stop\":false,\"id_slot\":-1,\"tokens_predicted\":1,\"tokens_evaluated\":4}\n\n",
            "data: {\"index\":0,\"content\":\" be\\n\",\"tokens\":[387],\"stop\":false,\"id_slot\":-1,\"tokens_predicted\":2,\"tokens_evaluated\":4}\n\n",
            "data: {\"index\":0,\"content\":\"\",\"tokens\":[],\"id_slot\":0,\"stop\":true,\"model\":\"qwen\",\"tokens_predicted\":2,\"tokens_evaluated\":4,\"generation_settings\":{\"n_predict\":2},\"prompt\":\"<|im_start|>Building a website\",\"has_new_line\":true,\"truncated\":false,\"stop_type\":\"limit\",\"stopping_word\":\"\",\"tokens_cached\":5,\"timings\":{\"prompt_n\":4,\"prompt_ms\":12.5,\"predicted_n\":2,\"predicted_ms\":20.1}}\n\n",
        );
        let backend = client(true, false);
        let events = decode_sse_split_everywhere(
            || {
                backend
                    .decoder(&ResponseHead {
                        status: 200,
                        headers: Vec::new(),
                    })
                    .unwrap()
            },
            body,
        );
        assert_eq!(
            events,
            [
                r#"0: chunk content=" can" reasoning=none"#,
                r#"1: chunk content=" be\n" reasoning=none"#,
                "2: usage prompt=4 completion=2",
                "2: finish length",
            ]
        );
    }

    #[test]
    fn whole_bodies_and_errors() {
        let events = decode_whole(
            LlamaFrames.into_decoder(),
            r#"{"index":0,"content":" can be built","tokens":[],"id_slot":0,"stop":true,"model":"qwen","tokens_predicted":3,"tokens_evaluated":4,"stop_type":"eos","stopping_word":""}"#,
        );
        assert_eq!(
            events,
            [
                r#"0: chunk content=" can be built" reasoning=none"#,
                "0: usage prompt=4 completion=3",
                "0: finish stop",
            ]
        );
        let events = decode_whole(
            LlamaFrames.into_decoder(),
            r#"{"error":{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}}"#,
        );
        assert_eq!(
            events,
            [
                "0: error server: the server reported an error: the request exceeds the available context size"
            ]
        );
    }

    #[test]
    fn the_last_event_reports_cached_prompt_tokens() {
        // As llama-server (b7000s) sends it, `generation_settings` shortened.
        let last = br#"{"index":0,"content":"","tokens":[],"id_slot":3,"stop":true,"model":"smol.gguf","tokens_predicted":4,"tokens_evaluated":4,"generation_settings":{"n_predict":4},"prompt":"Once upon a time","has_new_line":false,"truncated":false,"stop_type":"limit","stopping_word":"","tokens_cached":7,"timings":{"cache_n":3,"prompt_n":1,"prompt_ms":17.2,"predicted_n":4,"predicted_ms":43.6}}"#;
        let frame = LlamaFrames.read(last).unwrap();
        let usage = frame.usage.unwrap();
        assert_eq!(usage.prompt_tokens, Some(4));
        assert_eq!(usage.completion_tokens, Some(4));
        assert_eq!(usage.cached_prompt_tokens, Some(3));
        assert!(frame.chunk.is_none());
    }

    impl LlamaFrames {
        fn into_decoder(self) -> NativeDecoder<LlamaFrames> {
            NativeDecoder(self)
        }
    }
}
