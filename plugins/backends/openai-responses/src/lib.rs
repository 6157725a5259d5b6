//! The `openai-responses` backend: OpenAI's Responses API (`/v1/responses`), sent and read
//! as vLLM's `--backend openai-responses` does (`async_request_openai_responses` in
//! `vllm/benchmarks/lib/endpoint_request_func.py`, vLLM 0.32).
//!
//! The body is `input`, `max_output_tokens`, `stream` and `store: false` (a server that
//! stores responses would keep every one of a long run in memory), with the common
//! options, `ignore_eos` and the extra bodies merged by [`bench_sdk::openai`]. Unlike
//! chat completions there is no `stream_options`: the Responses stream reports usage in
//! its terminal event anyway.
//!
//! A stream is typed events (`{"type": "response.output_text.delta", "delta": ...}`);
//! [`ResponsesDecoder`] reads them with the SDK's scanner, as vLLM's client does:
//! - `response.output_text.delta` is a chunk with content, `response.reasoning_text.delta`
//!   a chunk with reasoning; both are timing points (TTFT, ITL);
//! - `response.completed` and `response.incomplete` end the response: their
//!   `response.usage` (`input_tokens`, `output_tokens`) is the usage, which the host takes
//!   as the prompt and output lengths, as vLLM does, since the frame carries no chunk;
//!   their `response.metrics` (vLLM 0.32's `--enable-per-request-metrics`, the response
//!   object's own member) is the server's timing of the request;
//! - `error` and `response.failed` events, or any other event with a non-null `error`
//!   (vLLM reads the error of neither a delta nor a terminal event), fail the request with
//!   the server's message;
//! - a stream that had token deltas but no terminal event fails: it was cut short and its
//!   usage is missing (vLLM's rule). One without any delta fails in the host (no output).
//!
//! Without streaming (`--no-stream`) the answer is one response object: its `output`
//! items' `output_text` and `reasoning_text` parts are the text, `usage` the counts,
//! `metrics` the server's timing.

use bench_sdk::delta_shape::DeltaShape;
use bench_sdk::json::{self, Cursor, Str};
use bench_sdk::native::{ServerError, invalid_frame, read_object, server_error};
use bench_sdk::openai::{OpenAiClient, common_options, server_timing};
use bench_sdk::{
    Backend, BackendDescription, Chunk, ClientConfig, ContentPart, Decoder, Event, EventKind,
    Frame, Framing, HttpRequest, PluginError, PluginInfo, Prompt, RequestSpec, ResponseHead,
    ServerTiming, Usage,
};
use serde_json::{Value, json};

const NAME: &str = "openai-responses";

/// The Responses API backend.
pub struct Responses {
    client: OpenAiClient,
}

impl Backend for Responses {
    type Decoder = ResponsesDecoder;

    fn describe() -> BackendDescription {
        BackendDescription {
            info: PluginInfo {
                name: NAME.into(),
                version: env!("CARGO_PKG_VERSION").into(),
                description: "OpenAI Responses API (/v1/responses, streamed events), as vLLM's \
                              --backend openai-responses. Output and reasoning text deltas are \
                              timed; the terminal event's usage gives the prompt and output \
                              token counts."
                    .into(),
                options: common_options(),
            },
            openai_compatible: true,
        }
    }

    fn open(config: ClientConfig) -> Result<Self, PluginError> {
        let (client, options) = OpenAiClient::open(NAME, config)?;
        options.finish(&Self::describe().info.options)?;
        Ok(Responses { client })
    }

    fn framing(&self) -> Framing {
        self.client.framing()
    }

    fn default_path(&self) -> String {
        "/v1/responses".into()
    }

    fn build_request(&self, spec: RequestSpec) -> Result<HttpRequest, PluginError> {
        let mut body = self.client.body(&spec);
        body.insert("input".into(), input(&spec)?);
        body.insert("max_output_tokens".into(), json!(spec.expected_output_len));
        body.insert("store".into(), json!(false));
        let body = self.client.merged(body, &spec, false)?;
        self.client.json_request(body, &spec)
    }

    fn decoder(&self, _head: &ResponseHead) -> Result<ResponsesDecoder, PluginError> {
        Ok(ResponsesDecoder::new(self.client.stream()))
    }
}

bench_sdk::export_backend!(Responses);

/// The `input`: a text prompt as the string vLLM sends; chat messages, or a text with
/// images, as the API's input messages (`input_text` and `input_image` parts).
fn input(spec: &RequestSpec) -> Result<Value, PluginError> {
    match &spec.prompt {
        Prompt::Text(text) if spec.multimodal.is_empty() => Ok(json!(text)),
        Prompt::Text(text) => {
            let parts = std::iter::once(Ok(json!({ "type": "input_text", "text": text })))
                .chain(spec.multimodal.iter().map(input_part))
                .collect::<Result<_, _>>()?;
            Ok(json!([{ "role": "user", "content": Value::Array(parts) }]))
        }
        Prompt::Chat(messages) => {
            if !spec.multimodal.is_empty() {
                return Err(PluginError::Unsupported(format!(
                    "{NAME}: chat messages with separate multimodal items are not supported"
                )));
            }
            let messages = messages
                .iter()
                .map(|m| {
                    let content = match m.content.as_slice() {
                        [ContentPart::Text(text)] => json!(text),
                        parts => {
                            Value::Array(parts.iter().map(input_part).collect::<Result<_, _>>()?)
                        }
                    };
                    Ok(json!({ "role": m.role, "content": content }))
                })
                .collect::<Result<_, PluginError>>()?;
            Ok(Value::Array(messages))
        }
        Prompt::TokenIds(_) => Err(PluginError::Unsupported(format!(
            "{NAME}: the Responses API takes no token-id prompts; use --backend openai"
        ))),
        Prompt::Texts(_) | Prompt::Rerank(_) => Err(PluginError::Unsupported(format!(
            "{NAME}: the Responses API takes no batches of texts or rerank queries; use a \
             pooling backend"
        ))),
    }
}

/// A content part as the Responses API's input takes it (text and images only).
fn input_part(part: &ContentPart) -> Result<Value, PluginError> {
    match part {
        ContentPart::Text(text) => Ok(json!({ "type": "input_text", "text": text })),
        ContentPart::ImageUrl(url) => Ok(json!({ "type": "input_image", "image_url": url })),
        ContentPart::AudioUrl(_) | ContentPart::VideoUrl(_) => Err(PluginError::Unsupported(
            format!("{NAME}: the Responses API input takes text and images, not audio or video"),
        )),
        ContentPart::Binary(data) => Err(PluginError::Unsupported(format!(
            "{NAME}: binary data ({}) is a file upload, which a JSON request cannot carry; it \
             needs --backend openai-audio (multipart)",
            data.mime_type
        ))),
    }
}

/// Reads a Responses stream (or one whole response); see the crate documentation.
#[derive(Debug)]
pub struct ResponsesDecoder {
    stream: bool,
    /// A token delta arrived.
    delta: bool,
    /// A terminal event (`response.completed`/`response.incomplete`) arrived.
    terminal: bool,
    /// An error was reported (in band or a frame that could not be read).
    failed: bool,
    /// Frames fed so far: the last one carries the missing terminal event's error.
    frames: u32,
    /// The last delta event read in full, to read the next ones by their delta alone
    /// (its kind: whether it was reasoning).
    shape: Option<DeltaShape<bool>>,
}

/// What kind of event a frame is, from its `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Type {
    OutputDelta,
    ReasoningDelta,
    Terminal,
    Error,
    Other,
}

impl Type {
    fn of(raw: &[u8]) -> Type {
        match raw {
            b"response.output_text.delta" => Type::OutputDelta,
            b"response.reasoning_text.delta" => Type::ReasoningDelta,
            b"response.completed" | b"response.incomplete" => Type::Terminal,
            b"error" | b"response.failed" => Type::Error,
            _ => Type::Other,
        }
    }
}

/// What one streamed event says, as spans of the frame.
#[derive(Debug, Default)]
struct StreamEvent {
    kind: Option<Type>,
    delta: Option<Str>,
    usage: Option<Usage>,
    /// `response.metrics`: the server's timing.
    timing: Option<ServerTiming>,
    status: Option<Str>,
    /// A non-null top-level `error`.
    error: Option<ServerError>,
    /// `response.error` (set on `response.failed`).
    response_error: Option<ServerError>,
    /// A top-level `message` (an `error` event's own).
    message: Option<Str>,
    /// Where a whole-number `sequence_number` is.
    number: Option<(usize, usize)>,
    /// Where the frame's JSON is (for an error without a message: the whole event).
    end: usize,
}

/// What a whole response says.
#[derive(Debug, Default)]
struct Whole {
    /// `(output_text, reasoning_text)` parts, in order.
    output: Vec<Str>,
    reasoning: Vec<Str>,
    usage: Option<Usage>,
    timing: Option<ServerTiming>,
    status: Option<Str>,
    error: Option<ServerError>,
}

impl ResponsesDecoder {
    /// A decoder for a streamed response, or for one whole response object.
    pub fn new(stream: bool) -> Self {
        ResponsesDecoder {
            stream,
            delta: false,
            terminal: false,
            failed: false,
            frames: 0,
            shape: None,
        }
    }

    fn stream_frame(&mut self, at: Frame<'_>, out: &mut Vec<Event>) {
        let (bytes, frame) = (at.bytes(), at.index());
        let span = |s: Str| at.span(s);
        // A delta event without a `delta` string: an empty text.
        let empty = || at.text(0..0, false);
        if let Some(shape) = &self.shape
            && let Some(text) = shape.read(bytes)
        {
            let text = Some(span(text));
            let (content, reasoning) = if shape.kind() {
                (None, text)
            } else {
                (text, None)
            };
            self.delta = true;
            out.push(Event {
                frame,
                kind: EventKind::Chunk(Chunk {
                    content,
                    reasoning,
                    tokens: None,
                }),
            });
            return;
        }
        let event = match scan_event(bytes) {
            Ok(event) => event,
            Err(e) => return self.malformed(bytes, e, frame, out),
        };
        if let (Some(kind @ (Type::OutputDelta | Type::ReasoningDelta)), Some(text)) =
            (event.kind, event.delta)
        {
            let reasoning = kind == Type::ReasoningDelta;
            DeltaShape::keep(&mut self.shape, bytes, text, event.number, reasoning);
        }
        match event.kind {
            Some(Type::OutputDelta) => {
                self.delta = true;
                out.push(Event {
                    frame,
                    kind: EventKind::Chunk(Chunk {
                        content: Some(event.delta.map_or_else(empty, span)),
                        reasoning: None,
                        tokens: None,
                    }),
                });
            }
            Some(Type::ReasoningDelta) => {
                self.delta = true;
                out.push(Event {
                    frame,
                    kind: EventKind::Chunk(Chunk {
                        content: None,
                        reasoning: Some(event.delta.map_or_else(empty, span)),
                        tokens: None,
                    }),
                });
            }
            Some(Type::Terminal) => {
                self.terminal = true;
                push_counts(event.usage, event.timing, frame, out);
                if let Some(status) = event.status {
                    out.push(Event {
                        frame,
                        kind: EventKind::Finish(status.text(bytes)),
                    });
                }
            }
            _ => {}
        }
        // vLLM: an error event, or any other event (not a delta, not terminal) with an
        // error.
        let error = match event.kind {
            Some(Type::Error) => Some(
                event
                    .error
                    .or(event.response_error)
                    .or(event.message.map(ServerError::Message))
                    .unwrap_or(ServerError::Raw {
                        start: 0,
                        end: event.end,
                    }),
            ),
            Some(Type::OutputDelta | Type::ReasoningDelta | Type::Terminal) => None,
            _ => event.error,
        };
        if let Some(error) = error {
            self.server_error(bytes, error, frame, out);
        }
    }

    fn whole(&mut self, at: Frame<'_>, out: &mut Vec<Event>) {
        let (bytes, frame) = (at.bytes(), at.index());
        let whole = match scan_whole(bytes) {
            Ok(whole) => whole,
            Err(e) => return self.malformed(bytes, e, frame, out),
        };
        let span = |s: Str| at.span(s);
        // One chunk per text part, a reasoning part paired with an output part.
        let parts = whole.output.len().max(whole.reasoning.len());
        for i in 0..parts {
            out.push(Event {
                frame,
                kind: EventKind::Chunk(Chunk {
                    content: whole.output.get(i).copied().map(span),
                    reasoning: whole.reasoning.get(i).copied().map(span),
                    tokens: None,
                }),
            });
        }
        self.delta |= parts > 0;
        self.terminal = true;
        push_counts(whole.usage, whole.timing, frame, out);
        if let Some(status) = whole.status {
            out.push(Event {
                frame,
                kind: EventKind::Finish(status.text(bytes)),
            });
        }
        if let Some(error) = whole.error {
            self.server_error(bytes, error, frame, out);
        }
    }

    fn server_error(&mut self, bytes: &[u8], error: ServerError, frame: u32, out: &mut Vec<Event>) {
        self.failed = true;
        out.push(Event {
            frame,
            kind: error.event(bytes),
        });
    }

    fn malformed(&mut self, bytes: &[u8], e: json::Error, frame: u32, out: &mut Vec<Event>) {
        self.failed = true;
        out.push(Event {
            frame,
            kind: invalid_frame(bytes, &e),
        });
    }
}

/// The events of a response object's usage and server timing, where it has them.
fn push_counts(
    usage: Option<Usage>,
    timing: Option<ServerTiming>,
    frame: u32,
    out: &mut Vec<Event>,
) {
    let usage = usage.map(EventKind::Usage);
    let timing = timing.map(EventKind::ServerTiming);
    out.extend(
        usage
            .into_iter()
            .chain(timing)
            .map(|kind| Event { frame, kind }),
    );
}

impl Decoder for ResponsesDecoder {
    fn feed(
        &mut self,
        buffer: &[u8],
        frame_ends: &[u32],
        out: &mut Vec<Event>,
    ) -> Result<(), PluginError> {
        // Frames are numbered within this call; `frames` counts them for `finish`.
        for frame in bench_sdk::backend::frames(buffer, frame_ends)? {
            if self.stream {
                self.stream_frame(frame, out);
            } else {
                self.whole(frame, out);
            }
        }
        self.frames += frame_ends.len() as u32;
        Ok(())
    }

    /// vLLM's rule: a stream with token deltas but without a terminal event was cut
    /// short, and fails (reported on its last frame).
    fn finish(&mut self, out: &mut Vec<Event>) -> Result<(), PluginError> {
        if self.delta && !self.terminal && !self.failed {
            out.push(Event {
                frame: self.frames - 1,
                kind: EventKind::malformed_frame(
                    "the stream ended without a terminal event (response.completed or \
                     response.incomplete): the response is truncated and has no usage",
                ),
            });
        }
        Ok(())
    }
}

/// Reads one streamed event.
fn scan_event(bytes: &[u8]) -> json::Result<StreamEvent> {
    let mut event = StreamEvent::default();
    read_object(bytes, |key, v| {
        if key.is("type") {
            event.kind = v.string()?.map(|s| Type::of(s.raw(bytes)));
        } else if key.is("delta") {
            event.delta = v.string()?;
        } else if key.is("message") {
            event.message = v.string()?;
        } else if key.is("sequence_number") {
            let from = v.pos();
            event.number = v.u64()?.map(|_| (from, v.pos()));
        } else if key.is("error") {
            event.error = server_error(v)?;
        } else if key.is("response") {
            v.object(|key, v| {
                if key.is("usage") {
                    event.usage = usage(v)?;
                } else if key.is("metrics") {
                    event.timing = server_timing(v)?;
                } else if key.is("status") {
                    event.status = v.string()?;
                } else if key.is("error") {
                    event.response_error = server_error(v)?;
                }
                Ok(())
            })?;
        }
        Ok(())
    })?;
    event.end = bytes.len();
    // Usage, timing and status belong to the terminal events only (`response.created`
    // carries a response object too, with `usage: null` and status `in_progress`).
    if event.kind != Some(Type::Terminal) {
        event.usage = None;
        event.timing = None;
        event.status = None;
    }
    Ok(event)
}

/// Reads one whole response object.
fn scan_whole(bytes: &[u8]) -> json::Result<Whole> {
    let mut whole = Whole::default();
    read_object(bytes, |key, v| {
        if key.is("output") {
            v.array(|_, item| {
                item.object(|key, v| {
                    if key.is("content") {
                        v.array(|_, part| {
                            let (mut kind, mut text) = (None, None);
                            part.object(|key, v| {
                                if key.is("type") {
                                    kind = v.string()?;
                                } else if key.is("text") {
                                    text = v.string()?;
                                }
                                Ok(())
                            })?;
                            if let (Some(kind), Some(text)) = (kind, text) {
                                match kind.raw(bytes) {
                                    b"output_text" => whole.output.push(text),
                                    b"reasoning_text" => whole.reasoning.push(text),
                                    _ => {}
                                }
                            }
                            Ok(())
                        })?;
                    }
                    Ok(())
                })?;
                Ok(())
            })?;
        } else if key.is("usage") {
            whole.usage = usage(v)?;
        } else if key.is("metrics") {
            whole.timing = server_timing(v)?;
        } else if key.is("status") {
            whole.status = v.string()?;
        } else if key.is("error") {
            whole.error = server_error(v)?;
        }
        Ok(())
    })?;
    Ok(whole)
}

/// The Responses API's usage: `input_tokens`, `output_tokens` and
/// `input_tokens_details.cached_tokens`; null or `{}` give `None`.
fn usage(v: &mut Cursor<'_>) -> json::Result<Option<Usage>> {
    let mut usage = Usage {
        prompt_tokens: None,
        completion_tokens: None,
        cached_prompt_tokens: None,
    };
    let count = |v: &mut Cursor<'_>| -> json::Result<Option<u32>> {
        Ok(v.u64()?.and_then(|n| u32::try_from(n).ok()))
    };
    let members = v.object(|key, v| {
        if key.is("input_tokens") {
            usage.prompt_tokens = count(v)?;
        } else if key.is("output_tokens") {
            usage.completion_tokens = count(v)?;
        } else if key.is("input_tokens_details") {
            v.object(|key, v| {
                if key.is("cached_tokens") {
                    usage.cached_prompt_tokens = count(v)?;
                }
                Ok(())
            })?;
        }
        Ok(())
    })?;
    Ok(members.filter(|&n| n > 0).map(|_| usage))
}

#[cfg(test)]
mod tests;
