//! An example backend plugin: Hugging Face Text Generation Inference's `/generate_stream`.
//!
//! It shows the backend half of the contract in one file: describe the options, build each
//! request before the clock starts, and decode each response once it has arrived, reading
//! only the fields the measurement needs with the SDK's zero-copy JSON [`Cursor`] and
//! handing the text back as spans of the response, never copied.
//!
//! ```text
//! bench serve --backend ./backend_tgi.wasm --base-url http://localhost:8080 \
//!       --tgi-sse-temperature 0.7 ...
//! ```
//!
//! The request is `{"inputs": PROMPT, "parameters": {"max_new_tokens": N, "details": true}}`;
//! the response is server-sent events, one token per event:
//!
//! ```text
//! data:{"token":{"id":9,"text":"Hello","logprob":-0.1,"special":false},"generated_text":null,"details":null}
//! data:{"token":{"id":2,"text":"</s>","logprob":0.0,"special":true},"generated_text":"Hello","details":{"finish_reason":"eos_token","generated_tokens":2}}
//! ```

use bench_sdk::json::{self, Cursor, Str};
use bench_sdk::native::{NativeClient, Streaming};
use bench_sdk::options::option;
use bench_sdk::{
    Backend, BackendDescription, Chunk, ClientConfig, Decoder, Event, EventKind, Frame, Framing,
    HttpRequest, OptionInfo, PluginError, PluginInfo, RequestSpec, ResponseHead, Usage,
};
use serde_json::{Map, Value, json};

const NAME: &str = "tgi-sse";

fn options() -> Vec<OptionInfo> {
    vec![
        option(
            "temperature",
            "Sample with this temperature (> 0; TGI refuses 0). Unset: greedy decoding",
            None,
        )
        .flag("tgi-sse-temperature")
        .number(),
    ]
}

/// The backend: the run's settings, read once when the run opens it.
pub struct TgiSse {
    /// The settings every server-native backend shares: the model, the extra bodies, the
    /// headers (the SDK's `native` module).
    client: NativeClient,
    temperature: Option<f64>,
}

impl Backend for TgiSse {
    type Decoder = TgiDecoder;

    fn describe() -> BackendDescription {
        BackendDescription {
            info: PluginInfo {
                name: NAME.into(),
                version: env!("CARGO_PKG_VERSION").into(),
                description: "Hugging Face TGI's /generate_stream: server-sent events, one token \
                              per event. Text prompts."
                    .into(),
                options: options(),
            },
            // Not OpenAI's API: the host does not turn --ignore-eos on by default for it.
            openai_compatible: false,
        }
    }

    fn open(config: ClientConfig) -> Result<Self, PluginError> {
        // `/generate_stream` always streams, so `--no-stream` is refused by the SDK.
        let (client, mut reader) = NativeClient::open(NAME, config, Streaming::Always)?;
        let temperature: Option<f64> = reader.parse("temperature")?;
        reader.finish(&options())?;
        if let Some(t) = temperature
            && !(t > 0.0 && t.is_finite())
        {
            return Err(PluginError::InvalidConfig(format!(
                "{NAME}: temperature must be a positive number (TGI refuses {t})"
            )));
        }
        if client.ignore_eos() {
            // Asked for, and not possible: say so rather than measure something else.
            return Err(PluginError::Unsupported(format!(
                "{NAME}: TGI has no parameter to ignore the end-of-sequence token; drop \
                 --ignore-eos"
            )));
        }
        Ok(TgiSse {
            client,
            temperature,
        })
    }

    fn framing(&self) -> Framing {
        Framing::Sse
    }

    fn default_path(&self) -> String {
        "/generate_stream".into()
    }

    fn build_request(&self, spec: RequestSpec) -> Result<HttpRequest, PluginError> {
        let prompt = self.client.text_prompt(&spec)?;
        // `details` makes the last event say why generation stopped and how many tokens it
        // made.
        let mut parameters = json!({
            "max_new_tokens": spec.expected_output_len,
            "details": true,
        });
        if let Some(t) = self.temperature {
            parameters["do_sample"] = json!(true);
            parameters["temperature"] = json!(t);
        }
        let mut body = Map::new();
        body.insert("inputs".into(), Value::from(prompt));
        body.insert("parameters".into(), parameters);
        // Merges `--extra-body` and the request's own extra body over these fields and
        // adds the headers (`x-request-id`).
        self.client.request(body, &spec)
    }

    fn decoder(&self, _head: &ResponseHead) -> Result<Self::Decoder, PluginError> {
        Ok(TgiDecoder)
    }
}

/// Decodes one response. TGI's events stand alone, so it keeps nothing between frames.
#[derive(Debug, Default)]
pub struct TgiDecoder;

impl Decoder for TgiDecoder {
    fn feed(
        &mut self,
        buffer: &[u8],
        frame_ends: &[u32],
        out: &mut Vec<Event>,
    ) -> Result<(), PluginError> {
        for frame in bench_sdk::backend::frames(buffer, frame_ends)? {
            match TgiEvent::read(frame.bytes()) {
                Ok(event) => event.emit(frame, out),
                // The response fails at this frame; the rest of the run goes on.
                Err(e) => out.push(Event {
                    frame: frame.index(),
                    kind: EventKind::malformed_frame(format!(
                        "{NAME}: a /generate_stream event that is not TGI's JSON: {e}"
                    )),
                }),
            }
        }
        Ok(())
    }
}

/// What one event says, as strings of the frame's own bytes (a [`Str`] holds offsets into
/// the bytes its cursor read: [`Frame::span`] moves them to the buffer's).
#[derive(Debug, Default)]
struct TgiEvent {
    /// A token arrived (a timing point), with its text unless the token is special: TGI
    /// leaves special tokens out of `generated_text`, so they add no text.
    token: Option<Option<Str>>,
    finish_reason: Option<Str>,
    generated_tokens: Option<u64>,
    /// `{"error": "...", "error_type": "..."}`: the server failed the request mid-stream.
    error: Option<Str>,
}

impl TgiEvent {
    fn read(bytes: &[u8]) -> json::Result<TgiEvent> {
        let mut event = TgiEvent::default();
        let mut cur = Cursor::new(bytes);
        let members = cur.object(|key, v| {
            if key.is("token") {
                let (mut text, mut special) = (None, false);
                let token = v.object(|key, v| {
                    if key.is("text") {
                        text = v.string()?;
                    } else if key.is("special") {
                        special = v.bool()?.unwrap_or(false);
                    }
                    Ok(())
                })?;
                if token.is_some() {
                    event.token = Some(text.filter(|_| !special));
                }
            } else if key.is("details") {
                v.object(|key, v| {
                    if key.is("finish_reason") {
                        event.finish_reason = v.string()?;
                    } else if key.is("generated_tokens") {
                        event.generated_tokens = v.u64()?;
                    }
                    Ok(())
                })?;
            } else if key.is("error") {
                event.error = v.string()?;
            }
            // Anything else (`generated_text`, `logprob`, ...) is skipped, and checked.
            Ok(())
        })?;
        cur.finish()?;
        if members.is_none() {
            return Err(json::Error {
                offset: 0,
                what: "expected an object",
            });
        }
        Ok(event)
    }

    fn emit(self, frame: Frame<'_>, out: &mut Vec<Event>) {
        let bytes = frame.bytes();
        let mut push = |kind| {
            out.push(Event {
                frame: frame.index(),
                kind,
            })
        };
        if let Some(message) = self.error {
            push(EventKind::server_error(format!(
                "{NAME}: the server says: {}",
                message.text(bytes)
            )));
            return;
        }
        if let Some(text) = self.token {
            push(EventKind::Chunk(Chunk {
                content: text.map(|s| frame.span(s)),
                reasoning: None,
                tokens: Some(1),
            }));
        }
        if let Some(n) = self.generated_tokens {
            push(EventKind::Usage(Usage {
                prompt_tokens: None,
                completion_tokens: Some(u32::try_from(n).unwrap_or(u32::MAX)),
                cached_prompt_tokens: None,
            }));
        }
        if let Some(reason) = self.finish_reason {
            push(EventKind::Finish(reason.text(bytes)));
        }
    }
}

// Makes `TgiSse` the plugin's `backend` export (only in the wasm build).
bench_sdk::export_backend!(TgiSse);

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::options::pairs;

    fn open(options: &[(&str, &str)], extra_body: Option<&str>) -> Result<TgiSse, PluginError> {
        TgiSse::open(ClientConfig {
            model: "bigscience/bloom-560m".into(),
            ignore_eos: false,
            stream: true,
            extra_body: extra_body.map(str::to_string),
            options: pairs(options),
        })
    }

    fn body(request: &HttpRequest) -> Value {
        serde_json::from_slice(&request.body).unwrap()
    }

    #[test]
    fn the_body_asks_for_the_output_length_and_the_details() {
        let backend = open(&[], None).unwrap();
        let mut spec = RequestSpec::text("Hello there".into(), 2, 17);
        spec.request_id = Some("bench-3".into());
        let request = backend.build_request(spec).unwrap();
        assert_eq!(request.method, "POST");
        assert!(
            request
                .headers
                .contains(&("x-request-id".into(), "bench-3".into()))
        );
        assert_eq!(
            body(&request),
            json!({
                "inputs": "Hello there",
                "parameters": {"max_new_tokens": 17, "details": true},
            })
        );
    }

    #[test]
    fn temperature_samples_and_extra_bodies_win() {
        let backend = open(&[("temperature", "0.5")], Some(r#"{"seed": 4}"#)).unwrap();
        let request = backend
            .build_request(RequestSpec::text("Hi".into(), 1, 3))
            .unwrap();
        let body = body(&request);
        assert_eq!(body["parameters"]["temperature"], 0.5);
        assert_eq!(body["parameters"]["do_sample"], true);
        assert_eq!(body["seed"], 4);
    }

    #[test]
    fn bad_settings_are_refused_by_name() {
        let zero = open(&[("temperature", "0")], None).err().unwrap();
        assert!(format!("{zero:?}").contains("temperature"), "{zero:?}");
        let unknown = open(&[("top-k", "3")], None).err().unwrap();
        assert!(format!("{unknown:?}").contains("top-k"), "{unknown:?}");
        let chat = open(&[], None).unwrap().build_request(RequestSpec {
            prompt: bench_sdk::Prompt::TokenIds(vec![1, 2]),
            ..RequestSpec::text(String::new(), 2, 3)
        });
        assert!(matches!(chat, Err(PluginError::Unsupported(_))), "{chat:?}");
    }

    /// A stream as TGI sends it: an escaped text, a special token, the details last.
    const STREAM: &[&[u8]] = &[
        br#"{"index":1,"token":{"id":9,"text":"Hello","logprob":-0.1,"special":false},"generated_text":null,"details":null}"#,
        br#"{"index":2,"token":{"id":7,"text":" \"w\u00f6rld\"","logprob":-0.3,"special":false},"generated_text":null,"details":null}"#,
        br#"{"index":3,"token":{"id":2,"text":"</s>","logprob":0.0,"special":true},"generated_text":"Hello \"w\u00f6rld\"","details":{"finish_reason":"eos_token","generated_tokens":3,"seed":null}}"#,
    ];

    const ERROR: &[&[u8]] = &[
        br#"{"index":1,"token":{"id":9,"text":"Hi","logprob":-0.1,"special":false},"generated_text":null,"details":null}"#,
        br#"{"error":"Request failed during generation: out of memory","error_type":"generation"}"#,
    ];

    /// The SDK's harness checks the decoder on these samples and on many damaged and
    /// re-split variations (no panic, every span inside its frame, the same events however
    /// the frames are fed); it returns the samples' own events to compare with.
    #[test]
    fn decodes_tgi_streams_and_survives_the_fuzzer() {
        let events = bench_sdk::testing::fuzz_decoder(&[STREAM, ERROR], TgiDecoder::default);
        assert_eq!(
            events[0],
            [
                r#"0: chunk content="Hello" reasoning=none"#,
                r#"1: chunk content=" \"wörld\"" reasoning=none"#,
                "2: chunk content=none reasoning=none",
                "2: usage prompt=none completion=3",
                "2: finish eos_token",
            ]
        );
        assert_eq!(
            events[1],
            [
                r#"0: chunk content="Hi" reasoning=none"#,
                "1: error server: tgi-sse: the server says: Request failed during generation: \
                 out of memory",
            ]
        );
    }

    #[test]
    fn a_frame_that_is_not_json_fails_the_response_at_that_frame() {
        let mut out = Vec::new();
        let buffer = br#"{"token":{"text":"a"}}{"token":"#;
        TgiDecoder.feed(buffer, &[22, 31], &mut out).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].frame, 1);
        assert!(
            matches!(&out[1].kind, EventKind::Error(e) if e.message.contains("not TGI's JSON")),
            "{out:?}"
        );
    }
}
