//! {{name}}: a bench backend plugin for an OpenAI-compatible `/v1/completions` API,
//! streamed as server-sent events (or one JSON body with `--no-stream`).
//!
//! ```text
//! bench --backend {{crate}}.wasm --base-url http://127.0.0.1:8000 --model M ...
//! ```
//!
//! The SDK's `native` module does the shared work (the model, `--ignore-eos`, extra
//! bodies, headers) and turns what [`CompletionFrames`] reads from each frame into events:
//! the reader gives spans of the frame, the SDK makes them offsets into the response.

use bench_sdk::json::{self, Cursor, Str};
use bench_sdk::native::{
    self, Finish, FrameReader, NativeClient, NativeDecoder, NativeFrame, Streaming,
};
use bench_sdk::{
    Backend, BackendDescription, ClientConfig, Framing, HttpRequest, PluginError, PluginInfo,
    RequestSpec, ResponseHead, Usage,
};
use serde_json::{Map, json};

const NAME: &str = "{{name}}";

pub struct Completions {
    client: NativeClient,
}

impl Backend for Completions {
    type Decoder = NativeDecoder<CompletionFrames>;

    fn describe() -> BackendDescription {
        BackendDescription {
            info: PluginInfo {
                name: NAME.into(),
                version: env!("CARGO_PKG_VERSION").into(),
                description: "OpenAI-compatible /v1/completions, streamed (server-sent events)"
                    .into(),
                options: Vec::new(),
            },
            openai_compatible: true,
        }
    }

    fn open(config: ClientConfig) -> Result<Self, PluginError> {
        let (client, options) = NativeClient::open(NAME, config, Streaming::Optional)?;
        // No options of its own: `finish` refuses any key given.
        options.finish(&[])?;
        Ok(Completions { client })
    }

    fn framing(&self) -> Framing {
        self.client.framing()
    }

    fn default_path(&self) -> String {
        "/v1/completions".into()
    }

    fn build_request(&self, spec: RequestSpec) -> Result<HttpRequest, PluginError> {
        let mut body = Map::new();
        body.insert("model".into(), json!(self.client.model(&spec)));
        body.insert("prompt".into(), json!(self.client.text_prompt(&spec)?));
        body.insert("max_tokens".into(), json!(spec.expected_output_len));
        body.insert("temperature".into(), json!(0.0));
        body.insert("stream".into(), json!(self.client.stream()));
        if self.client.stream() {
            // The server's token counts arrive in a last frame without choices.
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        if self.client.ignore_eos() {
            body.insert("ignore_eos".into(), json!(true));
        }
        self.client.request(body, &spec)
    }

    fn decoder(&self, _head: &ResponseHead) -> Result<Self::Decoder, PluginError> {
        Ok(NativeDecoder(CompletionFrames))
    }
}

/// Reads one completions frame: `{"choices": [{"text", "finish_reason"}], "usage"}`, or
/// `{"error": ...}`.
pub struct CompletionFrames;

impl FrameReader for CompletionFrames {
    fn read(&mut self, frame: &[u8]) -> json::Result<NativeFrame> {
        let mut parsed = NativeFrame::default();
        native::read_object(frame, |key, v| {
            if key.is("choices") {
                v.array(|i, choice| {
                    if i == 0 {
                        read_choice(choice, &mut parsed)?;
                    }
                    Ok(())
                })?;
            } else if key.is("usage") {
                read_usage(v, &mut parsed)?;
            } else if key.is("error") {
                parsed.error = native::server_error(v)?;
            }
            Ok(())
        })?;
        Ok(parsed)
    }
}

fn read_choice(choice: &mut Cursor<'_>, parsed: &mut NativeFrame) -> json::Result<()> {
    let mut text = None::<Str>;
    let object = choice.object(|key, v| {
        if key.is("text") {
            text = v.string()?;
        } else if key.is("finish_reason") {
            parsed.finish = v.string()?.map(Finish::Text);
        }
        Ok(())
    })?;
    if object.is_some() {
        // A chunk (a timing point) with its text.
        parsed.chunk = Some(text);
    }
    Ok(())
}

fn read_usage(v: &mut Cursor<'_>, parsed: &mut NativeFrame) -> json::Result<()> {
    let mut usage = Usage {
        prompt_tokens: None,
        completion_tokens: None,
        cached_prompt_tokens: None,
    };
    let object = v.object(|key, v| {
        if key.is("prompt_tokens") {
            usage.prompt_tokens = native::count(v)?;
        } else if key.is("completion_tokens") {
            usage.completion_tokens = native::count(v)?;
        }
        Ok(())
    })?;
    if object.is_some() {
        parsed.usage = Some(usage);
    }
    Ok(())
}

bench_sdk::export_backend!(Completions);

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::native::decode_sse_split_everywhere;

    fn client() -> Completions {
        Completions::open(ClientConfig {
            model: "m".into(),
            stream: true,
            ignore_eos: false,
            extra_body: None,
            options: Vec::new(),
        })
        .unwrap()
    }

    #[test]
    fn the_body_asks_for_a_stream_with_usage() {
        let request = client()
            .build_request(RequestSpec::text("Hi there".into(), 2, 7))
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(body["prompt"], "Hi there");
        assert_eq!(body["max_tokens"], 7);
        assert_eq!(body["stream_options"]["include_usage"], true);
    }

    #[test]
    fn streamed_text_and_usage_decode_wherever_the_frames_split() {
        let stream = concat!(
            "data: {\"choices\":[{\"text\":\"Hello\",\"finish_reason\":null}]}\n\n",
            "data: {\"choices\":[{\"text\":\" w\\u00f6rld\",\"finish_reason\":\"length\"}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":2}}\n\n",
            "data: [DONE]\n\n",
        );
        // Every split of the stream into network reads gives the same events.
        let events = decode_sse_split_everywhere(|| NativeDecoder(CompletionFrames), stream);
        assert_eq!(
            events,
            [
                r#"0: chunk content="Hello" reasoning=none"#,
                r#"1: chunk content=" wörld" reasoning=none"#,
                "1: finish length",
                "2: usage prompt=2 completion=2",
            ]
        );
    }
}
