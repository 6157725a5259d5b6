//! Helpers for backends that speak OpenAI's completions and chat-completions formats.
//!
//! The first-party `openai` and `openai-chat` plugins are thin layers over this module:
//! [`OpenAiClient`] reads the options they share and finishes request bodies the way
//! vLLM's benchmark client does (`async_request_openai_completions` and
//! `async_request_openai_chat_completions` in `vllm/benchmarks/lib/endpoint_request_func.py`,
//! with the sampling defaults of `vllm/benchmarks/serve.py`), and [`OpenAiDecoder`] turns
//! response frames into events with the zero-copy [`json`](crate::json) scanner. A
//! third-party plugin for an OpenAI-like API can use both.

use serde_json::{Map, Value, json};

use crate::backend::Frame;
use crate::json::{self, Cursor, Key, Str};
use crate::options::{OptionReader, option};
use crate::server_error::{ServerError, invalid_frame, server_error};
use crate::structured;
use crate::{
    Backend, Chunk, ClientConfig, ContentPart, Decoder, ErrorKind, Event, EventKind, Framing,
    HttpRequest, OptionInfo, PluginError, RequestSpec, ResponseHead, ServerTiming, TextSpan, Usage,
};

/// vLLM's benchmark sends `temperature: 0.0` (greedy decoding) unless the sampling
/// parameters or the extra body set one.
pub const DEFAULT_TEMPERATURE: f64 = 0.0;

/// The options every OpenAI-format backend accepts, for its `describe`.
pub fn common_options() -> Vec<OptionInfo> {
    vec![
        option(
            "stream",
            "Stream the response as server-sent events. false sends \"stream\": false and reads \
             one JSON body, so TTFT equals the end-to-end latency and there is no ITL.",
            Some("true"),
        ),
        option(
            "session-header",
            "The header that carries a multi-turn request's conversation id, so that a router \
             can keep a conversation on one server (empty: not sent)",
            Some(DEFAULT_SESSION_HEADER),
        ),
    ]
}

/// The header a conversation's turns carry their session id in: the name routers that
/// keep a session on one replica key on (SGLang's router, llm-d, Envoy/Istio
/// consistent-hash setups are configured with a header of this name).
pub const DEFAULT_SESSION_HEADER: &str = "X-Session-Id";

/// The settings both OpenAI backends take from their client configuration.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    plugin: &'static str,
    model: String,
    ignore_eos: bool,
    stream: bool,
    extra_body: Map<String, Value>,
    /// Where a request's `session.id` goes (`None`: nowhere).
    session_header: Option<String>,
    /// How a request's output constraint is sent; `None` for an API that cannot send one
    /// (its requests with a constraint are refused).
    structured: Option<structured::Form>,
}

impl OpenAiClient {
    /// Reads the shared settings. The returned reader holds the remaining options: the
    /// plugin reads its own, then calls [`OptionReader::finish`] with its option list so
    /// that an unknown key is refused.
    pub fn open(
        plugin: &'static str,
        config: ClientConfig,
    ) -> Result<(Self, OptionReader), PluginError> {
        let mut options = OptionReader::new(plugin, config.options);
        // The run's choice (`--no-stream`), unless the backend option says otherwise.
        let stream = options.flag("stream", config.stream)?;
        let extra_body = match &config.extra_body {
            None => Map::new(),
            Some(text) => parse_object(text).map_err(|e| {
                PluginError::InvalidConfig(format!("{plugin}: the client's extra body {e}"))
            })?,
        };
        let session_header = options
            .string("session-header")
            .unwrap_or_else(|| DEFAULT_SESSION_HEADER.to_string());
        let session_header = session_header.trim();
        if !session_header.is_empty()
            && !session_header
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        {
            return Err(PluginError::InvalidConfig(format!(
                "{plugin}: option session-header={session_header:?} is not a header name"
            )));
        }
        let client = OpenAiClient {
            plugin,
            model: config.model,
            ignore_eos: config.ignore_eos,
            stream,
            extra_body,
            session_header: (!session_header.is_empty()).then(|| session_header.to_string()),
            structured: None,
        };
        Ok((client, options))
    }

    /// Sends requests' output constraints in `form` ([`OpenAiClient::request`]), for an
    /// API that takes them (chat and completions, with [`structured::option_info`] among
    /// its options).
    pub fn with_structured_output(mut self, form: structured::Form) -> Self {
        self.structured = Some(form);
        self
    }

    /// Whether responses are streamed (the `stream` option).
    pub fn stream(&self) -> bool {
        self.stream
    }

    /// Server-sent events when streaming, else the whole body as one frame.
    pub fn framing(&self) -> Framing {
        if self.stream {
            Framing::Sse
        } else {
            Framing::Raw
        }
    }

    /// Starts a request body with the model: the request's LoRA adapter when it names one
    /// (vLLM sends the adapter as both `model` and `model_name`), else the client's model.
    pub fn body(&self, spec: &RequestSpec) -> Map<String, Value> {
        let model = spec
            .lora_name
            .as_deref()
            .filter(|name| !name.is_empty())
            .unwrap_or(&self.model);
        let mut body = Map::new();
        body.insert("model".into(), json!(model));
        body
    }

    /// Finishes a body that holds the API's own fields and makes the HTTP request.
    ///
    /// In vLLM's order, later entries winning: `stream` and `stream_options`, then
    /// `ignore_eos` when set, then the client's extra body (sampling parameters, with
    /// `temperature` defaulting to [`DEFAULT_TEMPERATURE`], and `--extra-body`), then the
    /// request's own extra body. Headers: `Content-Type: application/json` and
    /// `x-request-id` when the request has an id, and the session header (option
    /// `session-header`, [`DEFAULT_SESSION_HEADER`]) with the conversation's id when the
    /// request is a turn of one; the host adds authorization and `--header` values.
    pub fn request(
        &self,
        body: Map<String, Value>,
        spec: &RequestSpec,
    ) -> Result<HttpRequest, PluginError> {
        let mut body = body;
        match self.structured {
            Some(form) => form.insert(self.plugin, spec, &mut body)?,
            None => structured::refuse(self.plugin, spec)?,
        }
        let body = self.merge(body, spec, true)?;
        self.json_request(body, spec)
    }

    /// The body [`OpenAiClient::request`] sends, as a map: `stream`, then
    /// `stream_options` when streaming and `stream_options` is set (the Responses and
    /// audio APIs take none: they report usage on their own), then `ignore_eos`, the
    /// default temperature and the extra bodies, later entries winning. These APIs take no
    /// output constraint here: a request that carries one is refused.
    pub fn merged(
        &self,
        body: Map<String, Value>,
        spec: &RequestSpec,
        stream_options: bool,
    ) -> Result<Map<String, Value>, PluginError> {
        structured::refuse(self.plugin, spec)?;
        self.merge(body, spec, stream_options)
    }

    /// [`OpenAiClient::merged`] without the refusal: [`OpenAiClient::request`] has put the
    /// constraint in the body already.
    fn merge(
        &self,
        mut body: Map<String, Value>,
        spec: &RequestSpec,
        stream_options: bool,
    ) -> Result<Map<String, Value>, PluginError> {
        body.insert("stream".into(), json!(self.stream));
        if self.stream && stream_options {
            // Servers refuse stream_options on a non-streaming request.
            body.insert("stream_options".into(), json!({ "include_usage": true }));
        }
        if self.ignore_eos {
            body.insert("ignore_eos".into(), json!(true));
        }
        body.insert("temperature".into(), json!(DEFAULT_TEMPERATURE));
        body.extend(self.extra_body.iter().map(|(k, v)| (k.clone(), v.clone())));
        if let Some(text) = &spec.extra_body {
            let extra = parse_object(text).map_err(|e| {
                PluginError::InvalidInput(format!("{}: the request's extra body {e}", self.plugin))
            })?;
            body.extend(extra);
        }
        Ok(body)
    }

    /// A POST of `body` (finished, see [`OpenAiClient::merged`]) as JSON, with the
    /// headers of [`OpenAiClient::headers`].
    pub fn json_request(
        &self,
        body: Map<String, Value>,
        spec: &RequestSpec,
    ) -> Result<HttpRequest, PluginError> {
        let body = serde_json::to_vec(&Value::Object(body)).map_err(|e| {
            PluginError::Internal(format!(
                "{}: cannot serialize the request body: {e}",
                self.plugin
            ))
        })?;
        Ok(HttpRequest {
            method: "POST".into(),
            headers: self.headers(spec, "application/json"),
            body,
        })
    }

    /// A request's headers: `Content-Type`, `x-request-id` when the request has an id,
    /// and the session header with the conversation's id when it is a turn of one.
    pub fn headers(&self, spec: &RequestSpec, content_type: &str) -> Vec<(String, String)> {
        let mut headers = vec![("Content-Type".to_string(), content_type.to_string())];
        if let Some(id) = &spec.request_id {
            headers.push(("x-request-id".to_string(), id.clone()));
        }
        if let (Some(name), Some(session)) = (&self.session_header, &spec.session) {
            headers.push((name.clone(), session.id.clone()));
        }
        headers
    }

    /// The plugin's name, for messages.
    pub fn plugin(&self) -> &'static str {
        self.plugin
    }

    /// A decoder for one response, reading the text where `fields` says.
    pub fn decoder(&self, fields: ChoiceFields) -> OpenAiDecoder {
        OpenAiDecoder {
            fields,
            shape: None,
            completion_tokens: 0,
        }
    }
}

/// Parses a JSON object (an extra body); duplicate keys keep the last value, as Python does.
pub(crate) fn parse_object(text: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!("must be a JSON object, got {}", json_type(&other))),
        Err(e) => Err(format!("is not valid JSON: {e}")),
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A content part as OpenAI's chat messages carry it (`{"type": "image_url", "image_url":
/// {"url": ...}}`, ...), for every backend that sends chat messages. Binary data is a file
/// upload (a multipart request), which no JSON body can carry: an error naming `plugin`.
pub fn content_part(plugin: &str, part: &ContentPart) -> Result<Value, PluginError> {
    Ok(match part {
        ContentPart::Text(text) => json!({ "type": "text", "text": text }),
        ContentPart::ImageUrl(url) => json!({ "type": "image_url", "image_url": { "url": url } }),
        ContentPart::AudioUrl(url) => json!({ "type": "audio_url", "audio_url": { "url": url } }),
        ContentPart::VideoUrl(url) => json!({ "type": "video_url", "video_url": { "url": url } }),
        ContentPart::Binary(data) => {
            return Err(PluginError::Unsupported(format!(
                "{plugin}: binary data ({}) is a file upload, which a JSON request cannot \
                 carry; it needs --backend openai-audio (multipart)",
                data.mime_type
            )));
        }
    })
}

/// A chat message as OpenAI's APIs take it. Content that is one text part goes as a plain
/// string, the form of vLLM's prebuilt conversations (and the one every chat template
/// accepts); anything else goes as a list of content parts ([`content_part`]).
pub fn chat_message(plugin: &str, message: &crate::ChatMessage) -> Result<Value, PluginError> {
    let content = match message.content.as_slice() {
        [ContentPart::Text(text)] => json!(text),
        parts => Value::Array(
            parts
                .iter()
                .map(|p| content_part(plugin, p))
                .collect::<Result<_, _>>()?,
        ),
    };
    Ok(json!({ "role": message.role, "content": content }))
}

/// Where the text sits inside `choices[0]`.
#[derive(Debug, Clone, Copy)]
pub struct ChoiceFields {
    /// The object in the choice that holds the text (`delta` in a chat stream, `message`
    /// in a whole chat response), or `None` when the choice holds it itself (completions).
    pub holder: Option<&'static str>,
    /// The content key (`text` for completions, `content` for chat).
    pub content: &'static str,
    /// Reasoning keys in order of preference; the first with non-empty text wins, like
    /// Python's `delta.get("reasoning_content") or delta.get("reasoning")`.
    pub reasoning: &'static [&'static str],
}

/// Decodes OpenAI-format responses: SSE chunks when streaming, one JSON body otherwise.
///
/// Per frame, following vLLM's client:
/// - a non-empty `choices` array makes a [`Chunk`] (a timing point even without text,
///   vLLM's `if choices := data.get("choices")`), with spans of `choices[0]`'s content
///   and reasoning strings; a string `finish_reason` adds a `Finish`;
/// - a non-empty `usage` object makes a [`Usage`], also next to `choices` (a whole
///   body carries both, and llama.cpp's server streams usage in the chunk with the finish
///   reason). The host applies vLLM's rule (`if choices: ... elif usage := ...`) to a
///   stream: usage that came with `choices` is recorded as the server's count but is not
///   the request's output length;
/// - a non-null `error` member makes an `Error`, as does a frame that is not a JSON
///   object;
/// - a `metrics` object with any of vLLM's per-request timings
///   (`--enable-per-request-metrics`: on a stream's final usage frame, or next to `usage`
///   in a whole body) makes a [`ServerTiming`]; null, `{}` and all-null objects make none.
///
/// Shapes that crash vLLM's client but carry no output (a choice without `delta`, a
/// non-string content) are read as a chunk without text instead.
///
/// A stream repeats the same bytes around the text chunk after chunk (the id, model,
/// index, `"finish_reason":null`, ...), so the decoder remembers the last frame it read
/// in full that had text ([`Shape`]) and reads a frame that differs from it only inside
/// that text's string literal by scanning the literal alone. Any other frame is read in
/// full.
#[derive(Debug, Clone)]
pub struct OpenAiDecoder {
    fields: ChoiceFields,
    shape: Option<Shape>,
    /// The last `usage.completion_tokens` seen next to `choices`: a stream with vLLM's
    /// `continuous_usage_stats` carries the running count in every chunk, so each chunk's
    /// tokens are the difference (`Chunk::tokens`, which the host uses only when every
    /// chunk of the response has one).
    completion_tokens: u32,
}

/// A frame read in full, kept to read later frames of the same shape.
///
/// Why bytes identical outside the literal give an identical reading: the scanner reads
/// left to right and decides only on bytes it has reached, so up to the literal's opening
/// quote both frames are read alike. Any valid literal is then read as one string whose
/// span is all the decoder keeps of it (a reasoning text is also tested for being empty,
/// so a reasoning literal must stay non-empty), and the rest, the same bytes read in the
/// same state, is read alike too, its spans moved by the change in the literal's length.
#[derive(Debug, Clone)]
struct Shape {
    /// The frame.
    bytes: Vec<u8>,
    /// The literal that may differ: the chunk's content, or its reasoning when `reasoning`.
    text: Str,
    reasoning: bool,
    /// Its reading (never an error: a frame that reports one is not kept).
    choice: Choice,
    usage: Option<Usage>,
    timing: Option<ServerTiming>,
}

/// What one frame says, as spans of the frame.
#[derive(Default, Clone, Copy)]
struct Reading {
    /// `Some` when `choices` is a non-empty array.
    choice: Option<Choice>,
    usage: Option<Usage>,
    timing: Option<ServerTiming>,
    error: Option<ServerError>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Choice {
    content: Option<Str>,
    /// The non-empty reasoning text and the index of its key in `ChoiceFields::reasoning`.
    reasoning: Option<(usize, Str)>,
    finish: Option<Str>,
}

impl Decoder for OpenAiDecoder {
    fn feed(
        &mut self,
        buffer: &[u8],
        frame_ends: &[u32],
        out: &mut Vec<Event>,
    ) -> Result<(), PluginError> {
        self.feed_frames(buffer, frame_ends, out)
    }
}

impl OpenAiDecoder {
    /// [`Decoder::feed`]. With wasm's SIMD, so that the shape check's comparisons (see
    /// `json::same_bytes`) are inlined here: the plugins are built without it, and code
    /// with a target feature is inlined only into code with it.
    #[cfg_attr(target_arch = "wasm32", target_feature(enable = "simd128"))]
    fn feed_frames(
        &mut self,
        buffer: &[u8],
        frame_ends: &[u32],
        out: &mut Vec<Event>,
    ) -> Result<(), PluginError> {
        for frame in crate::backend::frames(buffer, frame_ends)? {
            self.frame(frame, out);
        }
        Ok(())
    }

    #[inline]
    fn frame(&mut self, frame: Frame<'_>, out: &mut Vec<Event>) {
        if let Some(parsed) = self.same_shape(frame.bytes()) {
            self.emit(frame, parsed, out);
        } else if let Some(parsed) = self.read_in_full(frame, out) {
            self.keep_shape(frame.bytes(), &parsed);
        }
    }

    /// Reads `frame` without the shape check: adds its events to `out` and returns its
    /// reading, or `None` when it is not valid JSON.
    fn read_in_full(&mut self, frame: Frame<'_>, out: &mut Vec<Event>) -> Option<Reading> {
        let bytes = frame.bytes();
        let index = frame.index();
        match self.scan(bytes) {
            Ok(parsed) => {
                self.emit(frame, parsed, out);
                Some(parsed)
            }
            Err(e) => {
                out.push(Event {
                    frame: index,
                    kind: invalid_frame(bytes, &e),
                });
                None
            }
        }
    }

    /// The events of `frame` read as `parsed`.
    #[inline(always)]
    fn emit(&mut self, at: Frame<'_>, parsed: Reading, out: &mut Vec<Event>) {
        let (bytes, frame) = (at.bytes(), at.index());
        let span = |s: Str| at.span(s);
        if let Some(choice) = parsed.choice {
            let tokens = parsed
                .usage
                .and_then(|u| u.completion_tokens)
                .map(|running| {
                    let new = running.saturating_sub(self.completion_tokens);
                    self.completion_tokens = running;
                    new
                });
            out.push(Event {
                frame,
                kind: EventKind::Chunk(Chunk {
                    content: choice.content.map(span),
                    reasoning: choice.reasoning.map(|(_, s)| span(s)),
                    tokens,
                }),
            });
            if let Some(usage) = parsed.usage {
                out.push(Event {
                    frame,
                    kind: EventKind::Usage(usage),
                });
            }
            if let Some(reason) = choice.finish {
                out.push(Event {
                    frame,
                    kind: EventKind::Finish(reason.text(bytes)),
                });
            }
        } else if let Some(usage) = parsed.usage {
            out.push(Event {
                frame,
                kind: EventKind::Usage(usage),
            });
        }
        if let Some(timing) = parsed.timing {
            out.push(Event {
                frame,
                kind: EventKind::ServerTiming(timing),
            });
        }
        if let Some(error) = parsed.error {
            out.push(Event {
                frame,
                kind: error.event(bytes),
            });
        }
    }

    /// The reading of `bytes` when they are the kept [`Shape`]'s frame with another valid
    /// literal in place of its text; `None` when they are not.
    #[inline]
    fn same_shape(&self, bytes: &[u8]) -> Option<Reading> {
        let shape = self.shape.as_ref()?;
        let old = shape.text;
        // Through the opening quote, and from the closing quote on.
        let head = &shape.bytes[..old.start];
        let tail = &shape.bytes[old.end..];
        let close = bytes.len().checked_sub(tail.len())?;
        if close < head.len()
            || !json::same_bytes(&bytes[close..], tail)
            || !json::same_bytes(&bytes[..head.len()], head)
        {
            return None;
        }
        // A valid literal from the opening quote that ends at the closing one.
        let text = json::string_at(bytes, head.len() - 1)?;
        if text.end != close || (shape.reasoning && text.is_empty()) {
            return None;
        }
        // Spans after the literal move with its closing quote.
        let moved = |s: Str| {
            if s.start > old.end {
                Str {
                    start: s.start - old.end + text.end,
                    end: s.end - old.end + text.end,
                    escaped: s.escaped,
                }
            } else {
                s
            }
        };
        let mut choice = shape.choice;
        if shape.reasoning {
            choice.content = choice.content.map(moved);
            choice.reasoning = choice.reasoning.map(|(rank, _)| (rank, text));
        } else {
            choice.content = Some(text);
            choice.reasoning = choice.reasoning.map(|(rank, s)| (rank, moved(s)));
        }
        choice.finish = choice.finish.map(moved);
        Some(Reading {
            choice: Some(choice),
            usage: shape.usage,
            timing: shape.timing,
            error: None,
        })
    }

    /// Keeps `bytes`, read in full as `parsed`, as the [`Shape`] to compare later frames
    /// with, when it carries text and no error.
    fn keep_shape(&mut self, bytes: &[u8], parsed: &Reading) {
        let (Some(choice), None) = (parsed.choice, &parsed.error) else {
            return;
        };
        // The text that changes from chunk to chunk: non-empty content, else reasoning
        // (non-empty when present), else the empty content.
        let (text, reasoning) = match (choice.content, choice.reasoning) {
            (Some(content), _) if !content.is_empty() => (content, false),
            (_, Some((_, reasoning))) => (reasoning, true),
            (Some(content), None) => (content, false),
            (None, None) => return,
        };
        let shape = self.shape.get_or_insert_with(|| Shape {
            bytes: Vec::new(),
            text,
            reasoning,
            choice,
            usage: parsed.usage,
            timing: parsed.timing,
        });
        shape.bytes.clear();
        shape.bytes.extend_from_slice(bytes);
        shape.text = text;
        shape.reasoning = reasoning;
        shape.choice = choice;
        shape.usage = parsed.usage;
        shape.timing = parsed.timing;
    }

    /// Reads a frame in full. Kept out of line: inlined into the frame loop, it makes the
    /// loop's shape check slower in wasm (more registers spilled).
    #[inline(never)]
    fn scan(&self, bytes: &[u8]) -> json::Result<Reading> {
        let mut frame = Reading::default();
        let mut cur = Cursor::new(bytes);
        let object = cur.object(|key, v| {
            if key.is("choices") {
                frame.choice = self.choices(v)?;
            } else if key.is("usage") {
                frame.usage = usage(v)?;
            } else if key.is("metrics") {
                frame.timing = server_timing(v)?;
            } else if key.is("error") {
                frame.error = server_error(v)?;
            }
            Ok(())
        })?;
        if object.is_none() {
            cur.skip()?;
            return Err(json::Error {
                offset: 0,
                what: "expected a JSON object",
            });
        }
        cur.finish()?;
        Ok(frame)
    }

    /// `Some` for a non-empty array (with `choices[0]`'s text), `None` for null or `[]`.
    fn choices(&self, v: &mut Cursor<'_>) -> json::Result<Option<Choice>> {
        if v.null()? {
            return Ok(None);
        }
        let offset = v.pos();
        let mut first = None;
        let count = v.array(|index, choice| {
            if index == 0 {
                first = Some(self.choice(choice)?);
            }
            Ok(())
        })?;
        match count {
            None => Err(json::Error {
                offset,
                what: "`choices` is not an array",
            }),
            Some(_) => Ok(first),
        }
    }

    fn choice(&self, v: &mut Cursor<'_>) -> json::Result<Choice> {
        let mut choice = Choice::default();
        v.object(|key, v| {
            if key.is("finish_reason") {
                choice.finish = v.string()?;
            } else if let Some(holder) = self.fields.holder {
                if key.is(holder) {
                    v.object(|key, v| self.text_member(key, v, &mut choice))?;
                }
            } else {
                self.text_member(key, v, &mut choice)?;
            }
            Ok(())
        })?;
        Ok(choice)
    }

    /// Reads `key` into `choice` when it is the content or a reasoning key.
    fn text_member(
        &self,
        key: Key<'_>,
        v: &mut Cursor<'_>,
        choice: &mut Choice,
    ) -> json::Result<()> {
        if key.is(self.fields.content) {
            choice.content = v.string()?;
        } else if let Some(rank) = self.fields.reasoning.iter().position(|name| key.is(name))
            && let Some(text) = v.string()?
            && !text.is_empty()
            && choice.reasoning.is_none_or(|(best, _)| rank <= best)
        {
            choice.reasoning = Some((rank, text));
        }
        Ok(())
    }
}

/// A non-empty usage object (vLLM's `if usage := data.get("usage")`); null, `{}` and
/// other types give `None`.
fn usage(v: &mut Cursor<'_>) -> json::Result<Option<Usage>> {
    let mut usage = Usage {
        prompt_tokens: None,
        completion_tokens: None,
        cached_prompt_tokens: None,
    };
    let members = v.object(|key, v| {
        if key.is("prompt_tokens") {
            usage.prompt_tokens = v.u64()?.and_then(|n| u32::try_from(n).ok());
        } else if key.is("completion_tokens") {
            usage.completion_tokens = v.u64()?.and_then(|n| u32::try_from(n).ok());
        } else if key.is("prompt_tokens_details") {
            // `{"cached_tokens": N}`: prompt tokens served from the prefix cache.
            v.object(|key, v| {
                if key.is("cached_tokens") {
                    usage.cached_prompt_tokens = v.u64()?.and_then(|n| u32::try_from(n).ok());
                }
                Ok(())
            })?;
        }
        Ok(())
    })?;
    Ok(members.filter(|&n| n > 0).map(|_| usage))
}

/// vLLM's per-request `metrics` object (`PerRequestTimingMetrics`, sent when the server
/// runs with `--enable-per-request-metrics`), when it holds any of the timings bench
/// keeps; null, `{}`, an object of nulls and other types give `None`. `tokens_per_second`
/// is left out: the host counts the tokens and the time itself.
pub fn server_timing(v: &mut Cursor<'_>) -> json::Result<Option<ServerTiming>> {
    let mut timing = ServerTiming {
        queue_time_ms: None,
        time_to_first_token_ms: None,
        generation_time_ms: None,
        mean_itl_ms: None,
    };
    v.object(|key, v| {
        let field = if key.is("queue_time_ms") {
            &mut timing.queue_time_ms
        } else if key.is("time_to_first_token_ms") {
            &mut timing.time_to_first_token_ms
        } else if key.is("generation_time_ms") {
            &mut timing.generation_time_ms
        } else if key.is("mean_itl_ms") {
            &mut timing.mean_itl_ms
        } else {
            return Ok(());
        };
        *field = v.f64()?;
        Ok(())
    })?;
    let any = timing.queue_time_ms.is_some()
        || timing.time_to_first_token_ms.is_some()
        || timing.generation_time_ms.is_some()
        || timing.mean_itl_ms.is_some();
    Ok(any.then_some(timing))
}

/// One line per event with its text resolved (`2: chunk content="Hi" reasoning=none`),
/// so that decoder tests compare readable strings.
pub fn render(buffer: &[u8], event: &Event) -> String {
    let text = |span: &Option<TextSpan>| match span {
        None => "none".to_string(),
        Some(s) => {
            let raw = &buffer[s.range()];
            let text = if s.escaped() {
                json::unescape(raw)
            } else {
                String::from_utf8_lossy(raw).into_owned()
            };
            format!("{text:?}")
        }
    };
    let number = |n: Option<u32>| n.map_or("none".to_string(), |n| n.to_string());
    let what = match &event.kind {
        EventKind::Chunk(c) => format!(
            "chunk content={} reasoning={}",
            text(&c.content),
            text(&c.reasoning)
        ),
        EventKind::Usage(u) => {
            format!(
                "usage prompt={} completion={}",
                number(u.prompt_tokens),
                number(u.completion_tokens)
            )
        }
        EventKind::Finish(reason) => format!("finish {reason}"),
        EventKind::Error(e) => {
            let kind = match e.kind {
                ErrorKind::Server => "server",
                ErrorKind::MalformedFrame => "malformed",
            };
            format!("error {kind}: {}", e.message)
        }
        EventKind::Pooled(p) => format!("pooled {:?} {}x{}", p.kind, p.count, p.dimension),
        EventKind::ServerTiming(t) => {
            let ms = |v: Option<f64>| v.map_or("none".to_string(), |v| v.to_string());
            format!(
                "server-timing queue={} ttft={} generation={} itl={}",
                ms(t.queue_time_ms),
                ms(t.time_to_first_token_ms),
                ms(t.generation_time_ms),
                ms(t.mean_itl_ms)
            )
        }
    };
    format!("{}: {what}", event.frame)
}

/// Where each of `frames` ends once they are laid end to end in one buffer.
fn frame_ends(frames: &[&str]) -> Vec<u32> {
    frames
        .iter()
        .scan(0, |end, f| {
            *end += f.len() as u32;
            Some(*end)
        })
        .collect()
}

/// Feeds `frames` to `decoder` in one call, finishes it and [`render`]s the events, so
/// that decoder tests compare readable lines.
pub fn render_frames(decoder: &mut impl Decoder, frames: &[&str]) -> Vec<String> {
    let buffer = frames.concat().into_bytes();
    let ends = frame_ends(frames);
    let mut out = Vec::new();
    decoder.feed(&buffer, &ends, &mut out).unwrap();
    decoder.finish(&mut out).unwrap();
    out.iter().map(|e| render(&buffer, e)).collect()
}

/// [`render_frames`] with the decoder `backend` makes for a 200 response.
pub fn render_response<B: Backend>(backend: &B, frames: &[&str]) -> Vec<String> {
    let head = ResponseHead {
        status: 200,
        headers: Vec::new(),
    };
    render_frames(&mut backend.decoder(&head).unwrap(), frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHAT: ChoiceFields = ChoiceFields {
        holder: Some("delta"),
        content: "content",
        reasoning: &["reasoning_content", "reasoning"],
    };

    fn config(options: &[(&str, &str)], extra_body: Option<&str>) -> ClientConfig {
        ClientConfig {
            model: "m".into(),
            ignore_eos: false,
            stream: true,
            extra_body: extra_body.map(str::to_string),
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn open(
        options: &[(&str, &str)],
        extra_body: Option<&str>,
    ) -> Result<(OpenAiClient, OptionReader), PluginError> {
        OpenAiClient::open("t", config(options, extra_body))
    }

    /// The message of an `InvalidConfig` error (panics on anything else).
    fn config_error(result: Result<(OpenAiClient, OptionReader), PluginError>) -> String {
        match result {
            Err(PluginError::InvalidConfig(m)) => m,
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("accepted"),
        }
    }

    #[test]
    fn shared_options_and_unknown_keys() {
        let (client, options) = open(&[("stream", "false")], None).unwrap();
        assert!(options.finish(&common_options()).is_ok());
        assert!(!client.stream());
        assert_eq!(client.framing(), Framing::Raw);

        let (client, options) = open(&[("strem", "true")], None).unwrap();
        assert!(client.stream());
        assert_eq!(client.framing(), Framing::Sse);
        let err = options.finish(&common_options()).unwrap_err();
        assert!(
            matches!(&err, PluginError::InvalidConfig(m) if m == "t: unknown option \"strem\" (known: stream, session-header)"),
            "{err:?}"
        );

        assert_eq!(
            config_error(open(&[("stream", "maybe")], None)),
            "t: option stream=\"maybe\": expected true or false"
        );
        assert_eq!(
            config_error(open(&[], Some("[1]"))),
            "t: the client's extra body must be a JSON object, got an array"
        );
        let err = config_error(open(&[], Some("{")));
        assert!(
            err.starts_with("t: the client's extra body is not valid JSON: EOF"),
            "{err}"
        );
    }

    #[test]
    fn request_bodies_merge_in_vllms_order() {
        let mut cfg = config(
            &[],
            Some(r#"{"temperature":0.7,"top_p":0.9,"max_tokens":5}"#),
        );
        cfg.ignore_eos = true;
        let (client, _) = OpenAiClient::open("t", cfg).unwrap();
        let mut spec = RequestSpec::text("hi".into(), 1, 8);
        spec.extra_body = Some(r#"{"top_p":0.5,"seed":3}"#.into());
        spec.request_id = Some("bench-7".into());
        let mut body = client.body(&spec);
        body.insert("max_tokens".into(), json!(8));
        let request = client.request(body, &spec).unwrap();
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        // The client's extra body overrides the API's fields and the temperature default;
        // the request's extra body overrides the client's.
        assert_eq!(
            body,
            json!({
                "model": "m", "max_tokens": 5, "stream": true, "stream_options": {"include_usage": true},
                "ignore_eos": true, "temperature": 0.7, "top_p": 0.5, "seed": 3,
            })
        );
        assert_eq!(request.method, "POST");
        assert_eq!(
            request.headers,
            vec![
                ("Content-Type".into(), "application/json".into()),
                ("x-request-id".into(), "bench-7".into())
            ]
        );

        spec.extra_body = Some("null".into());
        let err = client.request(Map::new(), &spec).unwrap_err();
        assert!(
            matches!(&err, PluginError::InvalidInput(m) if m == "t: the request's extra body must be a JSON object, got null"),
            "{err:?}"
        );
    }

    #[test]
    fn a_turn_of_a_conversation_carries_its_session_id_in_a_header() {
        let mut spec = RequestSpec::text("hi".into(), 1, 8);
        spec.session = Some(crate::Session {
            id: "conv-3".into(),
            turn: 2,
        });
        let headers = |options: &[(&str, &str)], spec: &RequestSpec| {
            let (client, _) = open(options, None).unwrap();
            client.request(client.body(spec), spec).unwrap().headers
        };
        let json = ("Content-Type".to_string(), "application/json".to_string());
        assert_eq!(
            headers(&[], &spec),
            vec![json.clone(), ("X-Session-Id".into(), "conv-3".into())]
        );
        assert_eq!(
            headers(&[("session-header", "x-conversation")], &spec),
            vec![json.clone(), ("x-conversation".into(), "conv-3".into())]
        );
        assert_eq!(
            headers(&[("session-header", "")], &spec),
            vec![json.clone()]
        );
        // A request of no conversation has no session header.
        spec.session = None;
        assert_eq!(headers(&[], &spec), vec![json]);
        assert_eq!(
            config_error(open(&[("session-header", "bad name")], None)),
            "t: option session-header=\"bad name\" is not a header name"
        );
    }

    #[test]
    fn non_streaming_bodies_have_no_stream_options_and_lora_names_the_model() {
        let (client, _) = open(&[("stream", "false")], None).unwrap();
        let mut spec = RequestSpec::text("hi".into(), 1, 8);
        spec.lora_name = Some("sql-adapter".into());
        let request = client.request(client.body(&spec), &spec).unwrap();
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(
            body,
            json!({"model": "sql-adapter", "stream": false, "temperature": 0.0})
        );
        assert_eq!(
            request.headers,
            vec![("Content-Type".into(), "application/json".into())]
        );
    }

    /// Shows each chunk's token count as a line after it (`finish tokens=N`), so that the
    /// split-everywhere check compares the counts too.
    struct ShowTokens(OpenAiDecoder);

    impl Decoder for ShowTokens {
        fn feed(
            &mut self,
            buffer: &[u8],
            frame_ends: &[u32],
            out: &mut Vec<Event>,
        ) -> Result<(), PluginError> {
            let mut events = Vec::new();
            self.0.feed(buffer, frame_ends, &mut events)?;
            for event in events {
                let (frame, tokens) = match &event.kind {
                    EventKind::Chunk(chunk) => (event.frame, chunk.tokens),
                    _ => (event.frame, None),
                };
                out.push(event);
                if let Some(n) = tokens {
                    out.push(Event {
                        frame,
                        kind: EventKind::Finish(format!("tokens={n}")),
                    });
                }
            }
            Ok(())
        }
    }

    /// vLLM with `stream_options.continuous_usage_stats`: every chunk carries the running
    /// usage, so each chunk's tokens are the difference, also when a chunk holds several
    /// (speculative decoding, or a detokenizer holding back an incomplete character), and
    /// however the reads split the stream (the count carries over from one feed to the
    /// next). Without usage in the chunks there are no counts.
    #[test]
    fn continuous_usage_gives_each_chunk_its_tokens() {
        let (client, _) = open(&[], None).unwrap();
        let body = concat!(
            "data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1718000003,\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":{\"prompt_tokens\":9,\"total_tokens\":9,\"completion_tokens\":0}}\n\n",
            "data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1718000003,\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"Hm\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":{\"prompt_tokens\":9,\"total_tokens\":10,\"completion_tokens\":1}}\n\n",
            "data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1718000003,\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"The tower \\u2014\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":{\"prompt_tokens\":9,\"total_tokens\":13,\"completion_tokens\":4}}\n\n",
            "data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1718000003,\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" Eiffel.\"},\"logprobs\":null,\"finish_reason\":\"stop\",\"stop_reason\":null}],\"usage\":{\"prompt_tokens\":9,\"total_tokens\":15,\"completion_tokens\":6}}\n\n",
            "data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1718000003,\"model\":\"Qwen/Qwen3-8B\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"total_tokens\":15,\"completion_tokens\":6}}\n\n",
            "data: [DONE]\n\n",
        );
        let events =
            crate::native::decode_sse_split_everywhere(|| ShowTokens(client.decoder(CHAT)), body);
        assert_eq!(
            events,
            [
                r#"0: chunk content="" reasoning=none"#,
                "0: finish tokens=0",
                "0: usage prompt=9 completion=0",
                r#"1: chunk content=none reasoning="Hm""#,
                "1: finish tokens=1",
                "1: usage prompt=9 completion=1",
                r#"2: chunk content="The tower —" reasoning=none"#,
                "2: finish tokens=3",
                "2: usage prompt=9 completion=4",
                r#"3: chunk content=" Eiffel." reasoning=none"#,
                "3: finish tokens=2",
                "3: usage prompt=9 completion=6",
                "3: finish stop",
                "4: usage prompt=9 completion=6",
            ]
        );
        // The flattened form the host receives: a count for every chunk.
        let mut decoder = client.decoder(CHAT);
        let frames: Vec<&str> = body
            .split("\n\n")
            .filter_map(|event| event.strip_prefix("data: "))
            .filter(|data| *data != "[DONE]")
            .collect();
        let buffer = frames.concat().into_bytes();
        let ends = frame_ends(&frames);
        let mut out = Vec::new();
        decoder.feed(&buffer, &ends, &mut out).unwrap();
        assert_eq!(crate::backend::flatten(out).chunks.tokens, [0, 1, 3, 2]);
        // vLLM's default stream (usage only at the end): no counts.
        let plain = [
            r#"{"choices":[{"index":0,"delta":{"content":"Hi"}}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2}}"#,
        ];
        let mut decoder = client.decoder(CHAT);
        let mut out = Vec::new();
        let buffer = plain.concat().into_bytes();
        decoder
            .feed(&buffer, &frame_ends(&plain), &mut out)
            .unwrap();
        assert!(crate::backend::flatten(out).chunks.tokens.is_empty());
    }

    #[test]
    fn chat_stream_events_and_spans() {
        let (client, _) = open(&[], None).unwrap();
        let mut decoder = client.decoder(CHAT);
        let frames = [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"reasoning":"r2","reasoning_content":"r\"1"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"reasoning_content":"","reasoning":"r3"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}],"usage":{"completion_tokens":2}}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2}}"#,
        ];
        assert_eq!(
            render_frames(&mut decoder, &frames),
            [
                r#"0: chunk content="" reasoning=none"#,
                r#"1: chunk content=none reasoning="r\"1""#,
                r#"2: chunk content=none reasoning="r3""#,
                r#"3: chunk content="Hi" reasoning=none"#,
                // Usage next to choices is reported; the host decides what it counts for.
                "3: usage prompt=none completion=2",
                "3: finish stop",
                "4: usage prompt=4 completion=2",
            ]
        );
        // Spans point into the buffer at the inside of the literal.
        let buffer = frames.concat();
        let ends = frame_ends(&frames);
        let mut out = Vec::new();
        decoder.feed(buffer.as_bytes(), &ends, &mut out).unwrap();
        let EventKind::Chunk(Chunk {
            reasoning: Some(span),
            ..
        }) = &out[1].kind
        else {
            panic!("{out:?}")
        };
        let inside = &buffer[span.range()];
        assert_eq!((inside, span.escaped()), (r#"r\"1"#, true));
        let EventKind::Chunk(Chunk {
            content: Some(span),
            ..
        }) = &out[3].kind
        else {
            panic!("{out:?}")
        };
        assert_eq!(
            span.start() as usize,
            ends[2] as usize + frames[3].find("Hi").unwrap()
        );
        assert!(!span.escaped());
    }

    #[test]
    fn errors_in_band_and_invalid_frames() {
        let (client, _) = open(&[], None).unwrap();
        let mut decoder = client.decoder(CHAT);
        let long = format!(r#"{{"choices":[{{"delta":{{"content":"{}"#, "x".repeat(200));
        let events = render_frames(
            &mut decoder,
            &[
                r#"{"error":{"message":"out of \"memory\"","code":500}}"#,
                r#"{"error":"busy"}"#,
                r#"{"error":{"code":429}}"#,
                r#"{"error":null,"usage":{}}"#,
                r#"{"choices":[{"delta":{"content":"a"}}]"#,
                "[]",
                "",
                &long,
                r#"{"choices":{"0":{}}}"#,
            ],
        );
        assert_eq!(
            events[0],
            r#"0: error server: the server reported an error: out of "memory""#
        );
        assert_eq!(
            events[1],
            "1: error server: the server reported an error: busy"
        );
        assert_eq!(
            events[2],
            r#"2: error server: the server reported an error: "{\"code\":429}""#
        );
        // Frame 3 (a null error, an empty usage) gives nothing.
        assert_eq!(
            events[3],
            r#"4: error malformed: invalid JSON in a response frame: expected ',' or '}' in an object at byte 38; the frame starts "{\"choices\":[{\"delta\":{\"content\":\"a\"}}]""#
        );
        assert_eq!(
            events[4],
            r#"5: error malformed: invalid JSON in a response frame: expected a JSON object at byte 0; the frame starts "[]""#
        );
        assert_eq!(
            events[5],
            r#"6: error malformed: invalid JSON in a response frame: unexpected end of input, expected a value at byte 0; the frame starts """#
        );
        assert!(
            events[6].starts_with(
                "7: error malformed: invalid JSON in a response frame: unterminated string at byte 32"
            ),
            "{}",
            events[6]
        );
        assert!(
            events[6].ends_with("xxx\"...") && events[6].len() < 250,
            "{}",
            events[6]
        );
        assert!(
            events[7].starts_with(
                "8: error malformed: invalid JSON in a response frame: `choices` is not an array at byte 11"
            ),
            "{}",
            events[7]
        );
        assert_eq!(events.len(), 8);
    }

    #[test]
    fn frame_ends_outside_the_buffer_are_refused() {
        let (client, _) = open(&[], None).unwrap();
        let mut decoder = client.decoder(CHAT);
        let mut out = Vec::new();
        let err = decoder.feed(b"{}{}", &[2, 1], &mut out).unwrap_err();
        assert!(
            matches!(&err, PluginError::InvalidInput(m) if m == "frame 1 ends at byte 1, outside 2..=4 of the buffer"),
            "{err:?}"
        );
        assert!(decoder.feed(b"{}", &[3], &mut out).is_err());
        assert!(decoder.feed(b"{}{}", &[2, 4], &mut out).is_ok());
    }

    /// vLLM 0.32 with `--enable-per-request-metrics`: the streamed final usage chunk
    /// carries a `metrics` object (fields the server has no value for are left out), read
    /// into one `server-timing` event on that frame, however the reads split the stream.
    #[test]
    fn per_request_metrics_on_the_final_usage_chunk_of_a_stream() {
        let (client, _) = open(&[], None).unwrap();
        let completions = concat!(
            "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" Hello\",\"logprobs\":null,\"finish_reason\":null,\"stop_reason\":null}],\"usage\":null}\n\n",
            "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" world\",\"logprobs\":null,\"finish_reason\":\"length\",\"stop_reason\":null}],\"usage\":null}\n\n",
            "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":64,\"total_tokens\":66,\"completion_tokens\":2},\"metrics\":{\"time_to_first_token_ms\":500.0,\"generation_time_ms\":1000.0,\"queue_time_ms\":12.5,\"mean_itl_ms\":1000.0,\"tokens_per_second\":2.0}}\n\n",
            "data: [DONE]\n\n",
        );
        let events = crate::native::decode_sse_split_everywhere(
            || client.decoder(fuzz::COMPLETIONS),
            completions,
        );
        assert_eq!(
            events,
            [
                r#"0: chunk content=" Hello" reasoning=none"#,
                r#"1: chunk content=" world" reasoning=none"#,
                "1: finish length",
                "2: usage prompt=64 completion=2",
                "2: server-timing queue=12.5 ttft=500 generation=1000 itl=1000",
            ]
        );
        // A response of one token has no mean ITL; the server leaves it out.
        let chat = concat!(
            "data: {\"id\":\"chatcmpl-2\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"logprobs\":null,\"finish_reason\":\"length\"}]}\n\n",
            "data: {\"id\":\"chatcmpl-2\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"total_tokens\":6,\"completion_tokens\":1},\"metrics\":{\"time_to_first_token_ms\":3.25,\"generation_time_ms\":0.0,\"queue_time_ms\":0.5,\"tokens_per_second\":0.0}}\n\n",
            "data: [DONE]\n\n",
        );
        let events = crate::native::decode_sse_split_everywhere(|| client.decoder(CHAT), chat);
        assert_eq!(
            events,
            [
                r#"0: chunk content="Hi" reasoning=none"#,
                "0: finish length",
                "1: usage prompt=5 completion=1",
                "1: server-timing queue=0.5 ttft=3.25 generation=0 itl=none",
            ]
        );
    }

    /// A whole (`stream: false`) body carries `metrics` next to `usage`, its missing
    /// values as nulls; an object with no timing bench keeps (`{}`, nulls, values that are
    /// not numbers), null and other types give no event.
    #[test]
    fn per_request_metrics_in_a_whole_body_and_empty_ones() {
        let (client, _) = open(&[("stream", "false")], None).unwrap();
        let whole = r#"{"id":"chatcmpl-3","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi there"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"total_tokens":7,"completion_tokens":2},"metrics":{"queue_time_ms":null,"time_to_first_token_ms":7,"generation_time_ms":2.5e1,"mean_itl_ms":25.0,"tokens_per_second":null}}"#;
        assert_eq!(
            crate::native::decode_whole(client.decoder(fuzz::CHAT_WHOLE), whole),
            [
                r#"0: chunk content="Hi there" reasoning=none"#,
                "0: usage prompt=5 completion=2",
                "0: finish stop",
                "0: server-timing queue=none ttft=7 generation=25 itl=25",
            ]
        );
        for empty in [
            "{}",
            "null",
            r#"{"queue_time_ms":null,"tokens_per_second":4.0}"#,
            r#"{"queue_time_ms":"soon"}"#,
            "[1]",
        ] {
            let frame = format!(
                r#"{{"choices":[],"usage":{{"prompt_tokens":5,"completion_tokens":2}},"metrics":{empty}}}"#
            );
            assert_eq!(
                render_frames(&mut client.decoder(CHAT), &[&frame]),
                ["0: usage prompt=5 completion=2"],
                "{empty}"
            );
        }
    }

    /// The authors' harness (`testing::fuzz_decoder`) over vLLM's responses, with the
    /// field choices of the first-party plugins, streamed and whole.
    #[test]
    fn fuzz_decoders_with_the_plugin_authors_harness() {
        let completions: &[&[u8]] = &[
            br#"{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" upon\n\"a\" time\u2026","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}"#,
            br#"{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" there","logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":null}"#,
            br#"{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":4,"total_tokens":6,"completion_tokens":2},"metrics":{"time_to_first_token_ms":500.0,"generation_time_ms":1000.0,"queue_time_ms":500.0,"mean_itl_ms":1000.0,"tokens_per_second":2.0}}"#,
        ];
        let chat: &[&[u8]] = &[
            br#"{"id":"chatcmpl-9","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
            br#"{"id":"chatcmpl-9","choices":[{"index":0,"delta":{"reasoning_content":"Let me \"think\""},"finish_reason":null}]}"#,
            br#"{"id":"chatcmpl-9","choices":[{"index":0,"delta":{"content":"caf\u00e9 \ud83d\ude00"},"finish_reason":null}]}"#,
            br#"{"id":"chatcmpl-9","choices":[{"index":0,"delta":{"content":"!"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":3}}"#,
        ];
        let whole: &[&[u8]] = &[
            br#"{"id":"chatcmpl-8","choices":[{"index":0,"message":{"role":"assistant","content":"Answer","reasoning":"why"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#,
        ];
        let error: &[&[u8]] = &[br#"{"error":{"message":"Engine loop died","code":500}}"#];
        let responses = [completions, chat, whole, error];
        for fields in [fuzz::COMPLETIONS, CHAT, fuzz::CHAT_WHOLE] {
            for stream in ["true", "false"] {
                let (client, _) = open(&[("stream", stream)], None).unwrap();
                let events = crate::testing::fuzz_decoder(&responses, || client.decoder(fields));
                // What each field choice reads from the response in its own shape.
                let (texts, response) = match fields.content {
                    "text" => (vec![r#"" upon\n\"a\" time…""#, r#"" there""#], 0),
                    _ if fields.holder == Some("delta") => {
                        (vec![r#""""#, "none", r#""café 😀""#, r#""!""#], 1)
                    }
                    _ => (vec![r#""Answer""#], 2),
                };
                let got: Vec<&str> = events[response]
                    .iter()
                    .filter_map(|e| {
                        e.split_once(": chunk content=")?
                            .1
                            .rsplit_once(" reasoning=")
                    })
                    .map(|(content, _)| content)
                    .collect();
                assert_eq!(got, texts, "{:?}", events[response]);
                assert_eq!(
                    events[3],
                    ["0: error server: the server reported an error: Engine loop died"]
                );
            }
        }
    }

    /// Fuzzing of the decoder with proptest, with the field choices of the first-party
    /// plugins: `cargo test -p bench-sdk fuzz_` runs a short round;
    /// `PROPTEST_CASES=200000 cargo test -p bench-sdk fuzz_` a long one.
    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        /// `short_run` cases unless `PROPTEST_CASES` asks for another count.
        fn cases(short_run: u32) -> ProptestConfig {
            let mut config = ProptestConfig::default();
            if std::env::var_os("PROPTEST_CASES").is_none() {
                config.cases = short_run;
            }
            config
        }

        /// `plugins/backends/openai`: the text is the choice's own `text`.
        pub(super) const COMPLETIONS: ChoiceFields = ChoiceFields {
            holder: None,
            content: "text",
            reasoning: &[],
        };
        /// `plugins/backends/openai-chat` streaming: `choices[0].delta`.
        const CHAT_STREAM: ChoiceFields = CHAT;
        /// `plugins/backends/openai-chat` without streaming: `choices[0].message`.
        pub(super) const CHAT_WHOLE: ChoiceFields = ChoiceFields {
            holder: Some("message"),
            content: "content",
            reasoning: &["reasoning_content", "reasoning"],
        };

        /// Every decoder the first-party plugins make: each field choice, streaming or
        /// not (a plugin pairs a choice with one mode; the decoder must hold up in both).
        fn decoder() -> impl Strategy<Value = OpenAiDecoder> {
            (
                prop::sample::select(&[COMPLETIONS, CHAT_STREAM, CHAT_WHOLE][..]),
                any::<bool>(),
            )
                .prop_map(|(fields, stream)| {
                    let stream = if stream { "true" } else { "false" };
                    let (client, _) = open(&[("stream", stream)], None).unwrap();
                    client.decoder(fields)
                })
        }

        /// Feeds and finishes, checking what must hold for any input: no panic, `Ok`
        /// exactly when the frame ends are in order inside the buffer, events in frame
        /// order naming real frames, and every span inside its own frame.
        fn decode_checked(
            decoder: &mut OpenAiDecoder,
            buffer: &[u8],
            ends: &[u32],
        ) -> std::result::Result<Vec<Event>, TestCaseError> {
            let mut out = Vec::new();
            let fed = decoder.feed(buffer, ends, &mut out);
            let ends_ok = ends
                .iter()
                .try_fold(0u32, |start, &end| (start <= end).then_some(end))
                .is_some_and(|last| last as usize <= buffer.len());
            prop_assert_eq!(fed.is_ok(), ends_ok, "{:?}", fed);
            if let Err(e) = &fed {
                prop_assert!(matches!(e, PluginError::InvalidInput(_)), "{:?}", e);
            }
            decoder.finish(&mut out).unwrap();
            let mut last_frame = 0;
            for event in &out {
                let frame = event.frame as usize;
                prop_assert!(frame < ends.len(), "{:?} of {} frames", event, ends.len());
                prop_assert!(frame >= last_frame, "events out of frame order: {:?}", out);
                last_frame = frame;
                let start = if frame == 0 {
                    0
                } else {
                    ends[frame - 1] as usize
                };
                let end = ends[frame] as usize;
                if let EventKind::Chunk(chunk) = &event.kind {
                    for span in [&chunk.content, &chunk.reasoning].into_iter().flatten() {
                        let (from, len) = (span.start() as usize, span.len() as usize);
                        prop_assert!(
                            start <= from && from + len <= end,
                            "span {}+{} outside frame {}..{}",
                            from,
                            len,
                            start,
                            end
                        );
                        // Spans sit between the quotes of a string literal.
                        prop_assert_eq!(buffer[from - 1], b'"');
                        prop_assert_eq!(buffer[from + len], b'"');
                    }
                }
                // Rendering slices every span: it would panic on a bad one.
                render(buffer, event);
            }
            Ok(out)
        }

        /// Frames laid end to end, as the host hands them over.
        fn lay_out(frames: &[Vec<u8>]) -> (Vec<u8>, Vec<u32>) {
            let buffer = frames.concat();
            let ends = frames
                .iter()
                .scan(0u32, |end, f| {
                    *end += f.len() as u32;
                    Some(*end)
                })
                .collect();
            (buffer, ends)
        }

        /// Any JSON value, small: what a server may put where the decoder expects
        /// something else.
        fn junk() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::from),
                any::<i64>().prop_map(Value::from),
                any::<u64>().prop_map(Value::from),
                (-1e6f64..1e6).prop_map(Value::from),
                ".{0,8}".prop_map(Value::from),
            ];
            leaf.prop_recursive(2, 8, 3, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
                    prop::collection::btree_map("[a-z_]{1,8}", inner, 0..3)
                        .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        /// Text as servers send it: any characters, control ones and quotes included.
        fn text() -> impl Strategy<Value = Value> {
            prop_oneof![
                4 => ".{0,12}".prop_map(Value::from),
                1 => Just(Value::from("")),
                1 => "[\"\\\\\n\t\u{0}-\u{1f}é😀]{0,6}".prop_map(Value::from),
            ]
        }

        /// An object with some of `members` (each either its expected shape or junk)
        /// and a stray member now and then.
        fn object_of(
            members: Vec<(&'static str, BoxedStrategy<Value>)>,
        ) -> impl Strategy<Value = Value> {
            let members: Vec<_> = members
                .into_iter()
                .map(|(key, value)| {
                    prop::option::weighted(0.7, prop_oneof![6 => value, 1 => junk()])
                        .prop_map(move |v| v.map(|v| (key.to_owned(), v)))
                })
                .collect();
            (members, prop::option::of(("[a-z]{1,6}", junk()))).prop_map(|(members, stray)| {
                Value::Object(members.into_iter().flatten().chain(stray).collect())
            })
        }

        fn text_holder() -> BoxedStrategy<Value> {
            object_of(vec![
                ("role", Just(Value::from("assistant")).boxed()),
                ("content", text().boxed()),
                ("reasoning_content", text().boxed()),
                ("reasoning", text().boxed()),
            ])
            .boxed()
        }

        fn choice() -> BoxedStrategy<Value> {
            object_of(vec![
                ("index", Just(Value::from(0)).boxed()),
                ("text", text().boxed()),
                ("delta", text_holder()),
                ("message", text_holder()),
                (
                    "finish_reason",
                    prop_oneof![Just(Value::Null), ".{0,6}".prop_map(Value::from)].boxed(),
                ),
            ])
            .boxed()
        }

        fn count() -> BoxedStrategy<Value> {
            prop_oneof![
                4 => (0u64..100_000).prop_map(Value::from),
                1 => any::<u64>().prop_map(Value::from),
                1 => (-5i64..0).prop_map(Value::from),
                1 => Just(serde_json::json!(3.0)),
            ]
            .boxed()
        }

        /// A response frame in OpenAI's shape, with every part now and then missing,
        /// null, empty or of the wrong type.
        fn frame() -> impl Strategy<Value = Value> {
            object_of(vec![
                ("id", Just(Value::from("cmpl-1")).boxed()),
                (
                    "choices",
                    prop_oneof![
                        4 => prop::collection::vec(choice(), 1..3).prop_map(Value::from),
                        1 => Just(serde_json::json!([])),
                        1 => Just(Value::Null),
                    ]
                    .boxed(),
                ),
                (
                    "usage",
                    prop_oneof![
                        3 => object_of(vec![
                            ("prompt_tokens", count()),
                            ("completion_tokens", count()),
                            ("total_tokens", count()),
                        ]),
                        1 => Just(Value::Null),
                    ]
                    .boxed(),
                ),
                (
                    "error",
                    prop_oneof![
                        3 => Just(Value::Null),
                        1 => ".{0,8}".prop_map(Value::from),
                        1 => object_of(vec![
                            ("message", text().boxed()),
                            ("code", Just(Value::from(500)).boxed()),
                        ]),
                    ]
                    .boxed(),
                ),
            ])
        }

        /// What the decoder must make of a well-formed frame, rendered as [`render`]
        /// does, computed from serde_json's reading of it with vLLM's rules.
        fn expected(fields: &ChoiceFields, frame: usize, value: &Value, raw: &[u8]) -> Vec<String> {
            let mut out = Vec::new();
            let string = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
            let shown =
                |s: &Option<String>| s.as_ref().map_or("none".to_owned(), |s| format!("{s:?}"));
            let usage = value
                .get("usage")
                .and_then(Value::as_object)
                .filter(|u| !u.is_empty())
                .map(|u| {
                    let n = |key: &str| {
                        u.get(key)
                            .and_then(Value::as_u64)
                            .and_then(|n| u32::try_from(n).ok())
                            .map_or("none".to_owned(), |n| n.to_string())
                    };
                    format!(
                        "{frame}: usage prompt={} completion={}",
                        n("prompt_tokens"),
                        n("completion_tokens")
                    )
                });
            match value.get("choices").and_then(Value::as_array) {
                Some(choices) if !choices.is_empty() => {
                    let choice = &choices[0];
                    let holder = match fields.holder {
                        Some(holder) => choice.get(holder).filter(|h| h.is_object()),
                        None => choice.as_object().map(|_| choice),
                    };
                    let content = string(holder.and_then(|h| h.get(fields.content)));
                    let reasoning = fields.reasoning.iter().find_map(|key| {
                        string(holder.and_then(|h| h.get(*key))).filter(|s| !s.is_empty())
                    });
                    out.push(format!(
                        "{frame}: chunk content={} reasoning={}",
                        shown(&content),
                        shown(&reasoning)
                    ));
                    out.extend(usage);
                    if let Some(reason) = string(choice.get("finish_reason")) {
                        out.push(format!("{frame}: finish {reason}"));
                    }
                }
                _ => out.extend(usage),
            }
            match value.get("error") {
                None | Some(Value::Null) => {}
                Some(error) => {
                    let message = match error {
                        Value::String(s) => s.clone(),
                        other => match other.get("message").and_then(Value::as_str) {
                            Some(m) => m.to_owned(),
                            None => {
                                // The error's own bytes in the frame, quoted.
                                let text = serde_json::to_string(other).unwrap();
                                assert!(
                                    raw.windows(text.len()).any(|w| w == text.as_bytes()),
                                    "the error's text is in the frame"
                                );
                                crate::server_error::quote(text.as_bytes())
                            }
                        },
                    };
                    out.push(format!(
                        "{frame}: error server: the server reported an error: {message}"
                    ));
                }
            }
            out
        }

        /// A frame's bytes, now and then damaged (cut short, a byte changed, an
        /// arbitrary byte string instead).
        fn damaged(
            value: Value,
            damage: u8,
            at: usize,
            byte: u8,
            noise: Vec<u8>,
        ) -> (Value, Vec<u8>, bool) {
            let mut raw = serde_json::to_vec(&value).unwrap();
            let at = at % raw.len();
            match damage {
                0 => raw.truncate(at),
                1 => raw[at] = byte,
                2 => raw = noise,
                _ => return (value, raw, false),
            }
            (value, raw, true)
        }

        /// Stands for the text in a frame until the frame is cut around it.
        const MARK: &str = "@@text@@";

        /// `frame` (a frame of [`frame()`]) with [`MARK`] as the string at the text key
        /// `key` of its first choice, which is made an object (with its holder) if needed.
        fn with_mark(fields: &ChoiceFields, mut frame: Value, key: &str) -> Value {
            let object = |v: &mut Value| {
                if !v.is_object() {
                    *v = Value::Object(Map::new());
                }
            };
            object(&mut frame);
            let choices = &mut frame["choices"];
            if choices.as_array().is_none_or(Vec::is_empty) {
                *choices = json!([{}]);
            }
            let mut holder = &mut choices[0];
            object(holder);
            if let Some(name) = fields.holder {
                holder = &mut holder[name];
                object(holder);
            }
            holder[key] = Value::from(MARK);
            frame
        }

        /// The inside of a string literal as a server might send it, valid or not: plain
        /// text, escapes (some broken), quotes and backslashes that end the literal early
        /// or escape its closing quote, control bytes, UTF-8 and bytes that are not.
        fn literal_inside() -> impl Strategy<Value = Vec<u8>> {
            let piece = prop_oneof![
                6 => "[a-z .,]{1,4}".prop_map(String::into_bytes),
                1 => Just(b"\"".to_vec()),
                1 => Just(b"\\".to_vec()),
                1 => Just(b"\\\"".to_vec()),
                1 => Just(b"\\\\".to_vec()),
                1 => Just(b"\\n".to_vec()),
                1 => Just(b"\\u00e9".to_vec()),
                1 => Just(b"\\ud83d\\ude00".to_vec()),
                1 => Just(b"\\u12".to_vec()),
                1 => Just(b"\\x".to_vec()),
                1 => Just(b"\x01\t".to_vec()),
                1 => Just("é😀".as_bytes().to_vec()),
                1 => Just(b"\xff".to_vec()),
                1 => Just(b"\",\"k\":\"".to_vec()),
            ];
            prop::collection::vec(piece, 0..6).prop_map(|pieces| pieces.concat())
        }

        proptest! {
            #![proptest_config(cases(1024))]

            #[test]
            fn fuzz_any_buffer_and_frame_ends(
                mut decoder in decoder(),
                buffer in prop::collection::vec(
                    prop_oneof![
                        4 => any::<u8>(),
                        1 => prop::sample::select(&b"{}[]\":,\\ 0ntufc"[..]),
                    ],
                    0..128,
                ),
                ends in prop::collection::vec(any::<u32>(), 0..8),
                in_range in any::<bool>(),
            ) {
                // Half the time, ends that are in order inside the buffer.
                let mut ends = ends;
                if in_range {
                    for end in &mut ends {
                        *end %= buffer.len() as u32 + 1;
                    }
                    ends.sort_unstable();
                }
                decode_checked(&mut decoder, &buffer, &ends)?;
            }

            #[test]
            fn fuzz_openai_shaped_frames_decode_as_vllm_reads_them(
                fields in prop::sample::select(&[COMPLETIONS, CHAT_STREAM, CHAT_WHOLE][..]),
                streaming in any::<bool>(),
                frames in prop::collection::vec(
                    (
                        frame(),
                        prop_oneof![8 => Just(3u8), 1 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)],
                        any::<usize>(),
                        any::<u8>(),
                        prop::collection::vec(any::<u8>(), 0..24),
                    )
                        .prop_map(|(v, damage, at, byte, noise)| damaged(v, damage, at, byte, noise)),
                    0..6,
                ),
            ) {
                let stream = if streaming { "true" } else { "false" };
                let (client, _) = open(&[("stream", stream)], None).unwrap();
                let mut decoder = client.decoder(fields);
                let raws: Vec<Vec<u8>> = frames.iter().map(|(_, raw, _)| raw.clone()).collect();
                let (buffer, ends) = lay_out(&raws);
                let events = decode_checked(&mut decoder, &buffer, &ends)?;
                let rendered: Vec<String> = events.iter().map(|e| render(&buffer, e)).collect();
                for (i, (value, raw, was_damaged)) in frames.iter().enumerate() {
                    let got: Vec<&String> = rendered
                        .iter()
                        .filter(|line| line.starts_with(&format!("{i}: ")))
                        .collect();
                    if *was_damaged {
                        // Whatever the damage made of it, a frame is never silently lost
                        // when it is no longer valid JSON.
                        let mut cur = json::Cursor::new(raw);
                        if cur.skip().and_then(|()| cur.finish()).is_err() {
                            prop_assert!(
                                got.iter().any(|l| l.contains(": error malformed: invalid JSON")),
                                "{:?}: {:?}", String::from_utf8_lossy(raw), got
                            );
                        }
                    } else if value.get("choices").is_some_and(|c| !c.is_array() && !c.is_null()) {
                        // vLLM's client fails on it; the decoder reports the frame.
                        prop_assert_eq!(got.len(), 1, "{:?}", got);
                        let prefix = format!(
                            "{i}: error malformed: invalid JSON in a response frame: `choices` is not an array at byte "
                        );
                        prop_assert!(got[0].starts_with(&prefix), "{:?}", got);
                    } else {
                        let want = expected(&fields, i, value, raw);
                        prop_assert_eq!(
                            got.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
                            want.iter().map(String::as_str).collect::<Vec<_>>(),
                            "frame {}", String::from_utf8_lossy(raw)
                        );
                    }
                }
            }

            /// The shape check: a stream of frames that differ only inside the text's
            /// literal (now and then elsewhere too), fed in two calls, reads exactly as
            /// each frame read in full on its own.
            #[test]
            fn fuzz_frames_of_one_shape_read_as_frames_read_in_full(
                fields in prop::sample::select(&[COMPLETIONS, CHAT_STREAM, CHAT_WHOLE][..]),
                streaming in any::<bool>(),
                base in frame(),
                key in 0..3usize,
                insides in prop::collection::vec(
                    (literal_inside(), prop::option::weighted(0.1, (any::<usize>(), any::<u8>()))),
                    1..10,
                ),
                split in any::<usize>(),
            ) {
                // The content, or one of the reasoning keys when the fields have them.
                let key = match key {
                    0 => fields.content,
                    k => fields.reasoning.get(k - 1).copied().unwrap_or(fields.content),
                };
                let text = serde_json::to_vec(&with_mark(&fields, base, key)).unwrap();
                let at = text.windows(MARK.len()).position(|w| w == MARK.as_bytes()).unwrap();
                let (head, tail) = (&text[..at], &text[at + MARK.len()..]);
                let frames: Vec<Vec<u8>> = insides
                    .into_iter()
                    .map(|(inside, damage)| {
                        let mut frame = [head, &inside, tail].concat();
                        // A changed byte anywhere: the frame no longer has the shape.
                        if let Some((at, byte)) = damage {
                            let at = at % frame.len();
                            frame[at] = byte;
                        }
                        frame
                    })
                    .collect();
                let stream = if streaming { "true" } else { "false" };
                let (client, _) = open(&[("stream", stream)], None).unwrap();
                let mut decoder = client.decoder(fields);
                let split = split % (frames.len() + 1);
                let mut got = Vec::new();
                let mut want = Vec::new();
                // Reads every frame in full, never through a kept shape; it keeps only the
                // running completion count, which the chunks' token counts follow.
                let mut alone = client.decoder(fields);
                for part in [&frames[..split], &frames[split..]] {
                    let (buffer, ends) = lay_out(part);
                    let mut events = Vec::new();
                    decoder.feed(&buffer, &ends, &mut events).unwrap();
                    got.extend(events.iter().map(|e| format!("{e:?}")));
                    let mut events = Vec::new();
                    for frame in crate::backend::frames(&buffer, &ends).unwrap() {
                        alone.read_in_full(frame, &mut events);
                    }
                    want.extend(events.iter().map(|e| format!("{e:?}")));
                }
                prop_assert_eq!(got, want);
            }
        }
    }
}
