//! The `anthropic-messages` backend: Anthropic's Messages API (`POST /v1/messages`), as
//! Anthropic serves it and as vLLM 0.32 serves it (`vllm/entrypoints/anthropic/`, which
//! turns each request into a chat completion and its stream into Anthropic's events).
//!
//! The body is `model`, `messages`, `max_tokens` (the API requires it), `stream`, and the
//! common options and extra bodies merged by [`bench_sdk::openai`] (`temperature` 0.0
//! unless set, `--extra-body`, the request's own). Leading system messages go in the
//! top-level `system`, as the API takes them; images go as `image` blocks (a base64
//! source for a data URL, else a URL source). No `stream_options`: the events carry the
//! usage (vLLM turns on its continuous usage for them). `--ignore-eos` is refused: the API
//! has no such parameter and vLLM's `/v1/messages` drops unknown fields without a word,
//! so the run would claim fixed output lengths it did not get (a server that reads it can
//! be sent it with `--extra-body '{"ignore_eos": true}'`).
//!
//! A stream is typed events (`{"type": "content_block_delta", "delta": {...}}`, each after
//! an SSE `event:` line that repeats the type); [`MessagesDecoder`] reads them with the
//! SDK's scanner:
//! - a `content_block_delta` with a `text_delta` is a chunk with content, a
//!   `thinking_delta` a chunk with reasoning, an `input_json_delta` (a tool call's
//!   arguments) a chunk without text, as a chat stream's tool-call chunks are; each is a
//!   timing point (TTFT, ITL). A `signature_delta` carries no token and is skipped;
//! - `message_start`'s `message.usage` gives the prompt tokens, `message_delta`'s `usage`
//!   the output tokens (and the prompt tokens again, where the server repeats them) and
//!   its `delta.stop_reason` the finish reason. Anthropic counts a prompt as
//!   `input_tokens` plus the cache's `cache_read_input_tokens` and
//!   `cache_creation_input_tokens` (vLLM writes its prompt count so), so the prompt length
//!   is their sum, and the cache reads are the cached prompt tokens;
//! - `message_stop` ends the message; a stream with token deltas that ends without it
//!   fails: it was cut short, and its output count may be missing;
//! - an `error` event (`{"type": "error", "error": {"type", "message"}}`), or any other
//!   event but a delta with a non-null `error`, fails the request with the server's
//!   message.
//!
//! Without streaming (`--backend-option stream=false`) the answer is one message object:
//! its `text` and `thinking` blocks are the text, `usage` the counts, `stop_reason` the
//! finish reason; an error object (`{"type": "error", ...}`, what the API answers a bad
//! request with) fails the request with its message.

use bench_sdk::delta_shape::DeltaShape;
use bench_sdk::json::{self, Cursor, Str};
use bench_sdk::native::{ServerError, invalid_frame, read_object, server_error};
use bench_sdk::openai::{OpenAiClient, common_options};
use bench_sdk::options::option;
use bench_sdk::{
    Backend, BackendDescription, Chunk, ClientConfig, ContentPart, Decoder, Event, EventKind,
    Frame, Framing, HttpRequest, PluginError, PluginInfo, Prompt, RequestSpec, ResponseHead,
    TextSpan, Usage,
};
use serde_json::{Value, json};

const NAME: &str = "anthropic-messages";

/// The API version sent in `anthropic-version` unless the option says otherwise: the one
/// Anthropic's API requires and documents its Messages API under.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The Messages API backend.
pub struct Messages {
    client: OpenAiClient,
    /// The `anthropic-version` header's value (`None`: not sent).
    version: Option<String>,
}

impl Backend for Messages {
    type Decoder = MessagesDecoder;

    fn describe() -> BackendDescription {
        let mut options = common_options();
        options.push(option(
            "anthropic-version",
            "The anthropic-version header, which Anthropic's API requires (empty: not sent). \
             Anthropic's API also wants the key in x-api-key: --header x-api-key=KEY",
            Some(ANTHROPIC_VERSION),
        ));
        BackendDescription {
            info: PluginInfo {
                name: NAME.into(),
                version: env!("CARGO_PKG_VERSION").into(),
                description: "Anthropic Messages API (/v1/messages, streamed events), as \
                              Anthropic and vLLM serve it. Text and thinking deltas are \
                              timed; message_start and message_delta give the prompt and \
                              output token counts."
                    .into(),
                options,
            },
            openai_compatible: false,
        }
    }

    fn open(config: ClientConfig) -> Result<Self, PluginError> {
        if config.ignore_eos {
            return Err(PluginError::InvalidConfig(format!(
                "{NAME}: --ignore-eos cannot be honoured: the Messages API has no ignore_eos \
                 parameter, and vLLM's /v1/messages drops fields it does not know without an \
                 error, so outputs would stop at the model's end of text while the run claims \
                 fixed lengths. Leave out --ignore-eos (compare with --backend openai-chat on \
                 the same terms), or send it to a server that reads it with --extra-body \
                 '{{\"ignore_eos\": true}}'"
            )));
        }
        let (client, mut options) = OpenAiClient::open(NAME, config)?;
        let version = options
            .string("anthropic-version")
            .unwrap_or_else(|| ANTHROPIC_VERSION.to_string());
        options.finish(&Self::describe().info.options)?;
        let version = version.trim();
        Ok(Messages {
            client,
            version: (!version.is_empty()).then(|| version.to_string()),
        })
    }

    fn framing(&self) -> Framing {
        self.client.framing()
    }

    fn default_path(&self) -> String {
        "/v1/messages".into()
    }

    fn build_request(&self, spec: RequestSpec) -> Result<HttpRequest, PluginError> {
        let mut body = self.client.body(&spec);
        let (system, messages) = messages(&spec)?;
        if let Some(system) = system {
            body.insert("system".into(), json!(system));
        }
        body.insert("messages".into(), Value::Array(messages));
        body.insert("max_tokens".into(), json!(spec.expected_output_len));
        let body = self.client.merged(body, &spec, false)?;
        let mut request = self.client.json_request(body, &spec)?;
        if let Some(version) = &self.version {
            request
                .headers
                .push(("anthropic-version".into(), version.clone()));
        }
        Ok(request)
    }

    fn decoder(&self, _head: &ResponseHead) -> Result<MessagesDecoder, PluginError> {
        Ok(MessagesDecoder::new(self.client.stream()))
    }
}

bench_sdk::export_backend!(Messages);

/// The request's `system` (its leading system messages' text, joined by blank lines) and
/// `messages`: a text prompt is one user message, with the request's images after the
/// text; chat messages keep their roles (a system message after the first user or
/// assistant message stays in place: vLLM takes it so, Anthropic's API refuses it).
fn messages(spec: &RequestSpec) -> Result<(Option<String>, Vec<Value>), PluginError> {
    match &spec.prompt {
        Prompt::Text(text) if spec.multimodal.is_empty() => {
            Ok((None, vec![json!({ "role": "user", "content": text })]))
        }
        Prompt::Text(text) => {
            let blocks = std::iter::once(Ok(json!({ "type": "text", "text": text })))
                .chain(spec.multimodal.iter().map(block))
                .collect::<Result<_, _>>()?;
            Ok((
                None,
                vec![json!({ "role": "user", "content": Value::Array(blocks) })],
            ))
        }
        Prompt::Chat(chat) => {
            if !spec.multimodal.is_empty() {
                return Err(PluginError::Unsupported(format!(
                    "{NAME}: chat messages with separate multimodal items are not supported"
                )));
            }
            let leading = chat.iter().take_while(|m| m.role == "system").count();
            let mut system = Vec::new();
            for message in &chat[..leading] {
                for part in &message.content {
                    match part {
                        ContentPart::Text(text) => system.push(text.as_str()),
                        _ => {
                            return Err(PluginError::Unsupported(format!(
                                "{NAME}: a system message holds text only in the Messages API"
                            )));
                        }
                    }
                }
            }
            let messages = chat[leading..]
                .iter()
                .map(|m| {
                    let content = match m.content.as_slice() {
                        [ContentPart::Text(text)] => json!(text),
                        parts => Value::Array(parts.iter().map(block).collect::<Result<_, _>>()?),
                    };
                    Ok(json!({ "role": m.role, "content": content }))
                })
                .collect::<Result<_, PluginError>>()?;
            Ok(((leading > 0).then(|| system.join("\n\n")), messages))
        }
        Prompt::TokenIds(_) => Err(PluginError::Unsupported(format!(
            "{NAME}: the Messages API takes no token-id prompts; use --backend openai"
        ))),
        Prompt::Texts(_) | Prompt::Rerank(_) => Err(PluginError::Unsupported(format!(
            "{NAME}: the Messages API takes no batches of texts or rerank queries; use a \
             pooling backend"
        ))),
    }
}

/// A content part as a Messages API content block (text and images only).
fn block(part: &ContentPart) -> Result<Value, PluginError> {
    match part {
        ContentPart::Text(text) => Ok(json!({ "type": "text", "text": text })),
        ContentPart::ImageUrl(url) => {
            let source = match url
                .strip_prefix("data:")
                .and_then(|rest| rest.split_once(";base64,"))
            {
                Some((media_type, data)) => {
                    json!({ "type": "base64", "media_type": media_type, "data": data })
                }
                None => json!({ "type": "url", "url": url }),
            };
            Ok(json!({ "type": "image", "source": source }))
        }
        ContentPart::AudioUrl(_) | ContentPart::VideoUrl(_) => Err(PluginError::Unsupported(
            format!("{NAME}: the Messages API takes text and images, not audio or video"),
        )),
        ContentPart::Binary(data) => Err(PluginError::Unsupported(format!(
            "{NAME}: binary data ({}) is a file upload, which a JSON request cannot carry; it \
             needs --backend openai-audio (multipart)",
            data.mime_type
        ))),
    }
}

/// Reads a Messages stream (or one whole message); see the crate documentation.
#[derive(Debug)]
pub struct MessagesDecoder {
    stream: bool,
    /// A token delta arrived.
    delta: bool,
    /// `message_stop` arrived.
    stopped: bool,
    /// An error was reported (in band or a frame that could not be read).
    failed: bool,
    /// Frames fed so far: the last one carries the missing `message_stop`'s error.
    frames: u32,
    /// The last token delta read in full, to read the next ones by their text alone.
    shape: Option<DeltaShape<Delta>>,
}

/// What kind of event a frame is, from its `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Type {
    MessageStart,
    BlockDelta,
    MessageDelta,
    MessageStop,
    Error,
    Other,
}

impl Type {
    fn of(raw: &[u8]) -> Type {
        match raw {
            b"message_start" => Type::MessageStart,
            b"content_block_delta" => Type::BlockDelta,
            b"message_delta" => Type::MessageDelta,
            b"message_stop" => Type::MessageStop,
            b"error" => Type::Error,
            _ => Type::Other,
        }
    }
}

/// What a `content_block_delta` carries, from its delta's `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delta {
    /// `text_delta`: content, in `text`.
    Text,
    /// `thinking_delta`: reasoning, in `thinking`.
    Thinking,
    /// `input_json_delta`: a tool call's arguments, in `partial_json`.
    ToolInput,
    /// Anything else (`signature_delta`): no token.
    Other,
}

impl Delta {
    fn of(raw: &[u8]) -> Delta {
        match raw {
            b"text_delta" => Delta::Text,
            b"thinking_delta" => Delta::Thinking,
            b"input_json_delta" => Delta::ToolInput,
            _ => Delta::Other,
        }
    }

    /// The chunk of a delta of this kind with this text (`None` for [`Delta::Other`]).
    fn chunk(self, text: TextSpan) -> Option<Chunk> {
        let (content, reasoning) = match self {
            Delta::Text => (Some(text), None),
            Delta::Thinking => (None, Some(text)),
            Delta::ToolInput => (None, None),
            Delta::Other => return None,
        };
        Some(Chunk {
            content,
            reasoning,
            tokens: None,
        })
    }
}

/// What one streamed event says, as spans of the frame.
#[derive(Debug, Default)]
struct StreamEvent {
    kind: Option<Type>,
    /// The `delta` object's `type`.
    delta: Option<Delta>,
    /// The delta's `text`, `thinking` and `partial_json` literals.
    text: Option<Str>,
    thinking: Option<Str>,
    partial_json: Option<Str>,
    /// `delta.stop_reason` (`message_delta`).
    stop_reason: Option<Str>,
    /// The top-level `usage` (`message_delta`).
    usage: Option<Usage>,
    /// `message.usage` (`message_start`).
    message_usage: Option<Usage>,
    /// A non-null top-level `error`.
    error: Option<ServerError>,
    /// Where the frame's JSON ends (for an error without a message: the whole event).
    end: usize,
}

impl StreamEvent {
    /// The literal that holds a delta's text, by its kind.
    fn delta_text(&self) -> Option<Str> {
        match self.delta? {
            Delta::Text => self.text,
            Delta::Thinking => self.thinking,
            Delta::ToolInput => self.partial_json,
            Delta::Other => None,
        }
    }
}

/// What a whole message says.
#[derive(Debug, Default)]
struct Whole {
    /// `text` and `thinking` blocks, in order.
    text: Vec<Str>,
    thinking: Vec<Str>,
    usage: Option<Usage>,
    stop_reason: Option<Str>,
    error: Option<ServerError>,
}

impl MessagesDecoder {
    /// A decoder for a streamed message, or for one whole message object.
    pub fn new(stream: bool) -> Self {
        MessagesDecoder {
            stream,
            delta: false,
            stopped: false,
            failed: false,
            frames: 0,
            shape: None,
        }
    }

    fn stream_frame(&mut self, at: Frame<'_>, out: &mut Vec<Event>) {
        let (bytes, frame) = (at.bytes(), at.index());
        if let Some(shape) = &self.shape
            && let Some(text) = shape.read(bytes)
            && let Some(chunk) = shape.kind().chunk(at.span(text))
        {
            self.delta = true;
            out.push(Event {
                frame,
                kind: EventKind::Chunk(chunk),
            });
            return;
        }
        let event = match scan_event(bytes) {
            Ok(event) => event,
            Err(e) => return self.malformed(bytes, e, frame, out),
        };
        match event.kind {
            Some(Type::BlockDelta) => {
                let delta = event.delta.unwrap_or(Delta::Other);
                let text = event.delta_text();
                if let Some(text) = text {
                    DeltaShape::keep(&mut self.shape, bytes, text, None, delta);
                }
                // A delta without its text literal: an empty text.
                let span = text.map_or_else(|| at.text(0..0, false), |s| at.span(s));
                if let Some(chunk) = delta.chunk(span) {
                    self.delta = true;
                    out.push(Event {
                        frame,
                        kind: EventKind::Chunk(chunk),
                    });
                }
            }
            Some(Type::MessageStart) => {
                // The output count here is a placeholder (0 or 1): only the prompt counts.
                if let Some(usage) = event.message_usage {
                    let usage = Usage {
                        completion_tokens: None,
                        ..usage
                    };
                    push_usage(Some(usage), frame, out);
                }
            }
            Some(Type::MessageDelta) => {
                push_usage(event.usage, frame, out);
                if let Some(reason) = event.stop_reason {
                    out.push(Event {
                        frame,
                        kind: EventKind::Finish(reason.text(bytes)),
                    });
                }
            }
            Some(Type::MessageStop) => self.stopped = true,
            _ => {}
        }
        let error = match event.kind {
            Some(Type::Error) => Some(event.error.unwrap_or(ServerError::Raw {
                start: 0,
                end: event.end,
            })),
            // A delta's text is all that is read of it.
            Some(Type::BlockDelta) => None,
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
        // One chunk per text block, a thinking block paired with a text block.
        let parts = whole.text.len().max(whole.thinking.len());
        for i in 0..parts {
            out.push(Event {
                frame,
                kind: EventKind::Chunk(Chunk {
                    content: whole.text.get(i).map(|&s| at.span(s)),
                    reasoning: whole.thinking.get(i).map(|&s| at.span(s)),
                    tokens: None,
                }),
            });
        }
        self.delta |= parts > 0;
        self.stopped = true;
        push_usage(whole.usage, frame, out);
        if let Some(reason) = whole.stop_reason {
            out.push(Event {
                frame,
                kind: EventKind::Finish(reason.text(bytes)),
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

fn push_usage(usage: Option<Usage>, frame: u32, out: &mut Vec<Event>) {
    if let Some(usage) = usage {
        out.push(Event {
            frame,
            kind: EventKind::Usage(usage),
        });
    }
}

impl Decoder for MessagesDecoder {
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

    /// A stream with token deltas but without `message_stop` was cut short, and fails
    /// (reported on its last frame).
    fn finish(&mut self, out: &mut Vec<Event>) -> Result<(), PluginError> {
        if self.delta && !self.stopped && !self.failed {
            out.push(Event {
                frame: self.frames - 1,
                kind: EventKind::malformed_frame(
                    "the stream ended without message_stop: the message is truncated and its \
                     output count may be missing",
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
            v.object(|key, v| {
                if key.is("type") {
                    event.delta = v.string()?.map(|s| Delta::of(s.raw(bytes)));
                } else if key.is("text") {
                    event.text = v.string()?;
                } else if key.is("thinking") {
                    event.thinking = v.string()?;
                } else if key.is("partial_json") {
                    event.partial_json = v.string()?;
                } else if key.is("stop_reason") {
                    event.stop_reason = v.string()?;
                }
                Ok(())
            })?;
        } else if key.is("usage") {
            event.usage = usage(v)?;
        } else if key.is("message") {
            v.object(|key, v| {
                if key.is("usage") {
                    event.message_usage = usage(v)?;
                }
                Ok(())
            })?;
        } else if key.is("error") {
            event.error = server_error(v)?;
        }
        Ok(())
    })?;
    event.end = bytes.len();
    // Each member counts only in the event it belongs to.
    if event.kind != Some(Type::MessageDelta) {
        event.usage = None;
        event.stop_reason = None;
    }
    if event.kind != Some(Type::MessageStart) {
        event.message_usage = None;
    }
    Ok(event)
}

/// Reads one whole message object (or an error object).
fn scan_whole(bytes: &[u8]) -> json::Result<Whole> {
    let mut whole = Whole::default();
    read_object(bytes, |key, v| {
        if key.is("content") {
            v.array(|_, block| {
                let (mut kind, mut text, mut thinking) = (None, None, None);
                block.object(|key, v| {
                    if key.is("type") {
                        kind = v.string()?;
                    } else if key.is("text") {
                        text = v.string()?;
                    } else if key.is("thinking") {
                        thinking = v.string()?;
                    }
                    Ok(())
                })?;
                match kind.map(|k| k.raw(bytes)) {
                    Some(b"text") => whole.text.extend(text),
                    Some(b"thinking") => whole.thinking.extend(thinking),
                    _ => {}
                }
                Ok(())
            })?;
        } else if key.is("usage") {
            whole.usage = usage(v)?;
        } else if key.is("stop_reason") {
            whole.stop_reason = v.string()?;
        } else if key.is("error") {
            whole.error = server_error(v)?;
        }
        Ok(())
    })?;
    Ok(whole)
}

/// The Messages API's usage: the prompt is `input_tokens` plus the cache's reads and
/// writes (`cache_read_input_tokens`, `cache_creation_input_tokens`), the cache reads are
/// the cached prompt tokens, `output_tokens` the output; null or `{}` give `None`.
fn usage(v: &mut Cursor<'_>) -> json::Result<Option<Usage>> {
    let (mut input, mut read, mut created, mut output) = (None, None, None, None);
    let count = |v: &mut Cursor<'_>| -> json::Result<Option<u32>> {
        Ok(v.u64()?.and_then(|n| u32::try_from(n).ok()))
    };
    let members = v.object(|key, v| {
        if key.is("input_tokens") {
            input = count(v)?;
        } else if key.is("output_tokens") {
            output = count(v)?;
        } else if key.is("cache_read_input_tokens") {
            read = count(v)?;
        } else if key.is("cache_creation_input_tokens") {
            created = count(v)?;
        }
        Ok(())
    })?;
    let prompt = input.map(|n| {
        n.saturating_add(read.unwrap_or(0))
            .saturating_add(created.unwrap_or(0))
    });
    Ok(members.filter(|&n| n > 0).map(|_| Usage {
        prompt_tokens: prompt,
        completion_tokens: output,
        cached_prompt_tokens: read,
    }))
}

#[cfg(test)]
mod tests;
