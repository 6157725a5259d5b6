//! Helpers for backends that speak a server's own generate API rather than OpenAI's
//! (TGI's `/generate_stream`, TensorRT-LLM's Triton `generate_stream`, SGLang's
//! `/generate`, llama.cpp's `/completion`, DeepSpeed-MII).
//!
//! Those APIs differ in their field names, so each plugin writes its own body and decoder;
//! what they share is here: the model (or LoRA adapter) a request names, the run's
//! `--no-stream` and `ignore_eos`, extra bodies merged over the plugin's fields, the
//! request's headers, and the decoder tests' split checks.

use serde_json::{Map, Value};

use crate::backend::Frame;
use crate::json::{self, Cursor, Kind, Str};
use crate::options::{OptionReader, option};
pub use crate::server_error::{ServerError, invalid_frame, quote, server_error};
use crate::{
    Chunk, ClientConfig, Decoder, Event, EventKind, Framing, HttpRequest, OptionInfo, PluginError,
    Prompt, RequestSpec, Usage,
};

/// Whether an API can answer without streaming.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Streaming {
    /// The endpoint always streams (TGI's and Triton's `generate_stream`): `--no-stream`
    /// is refused, since the measurement would not be what the user asked for.
    Always,
    /// A body field chooses (`"stream": true`); the run's `--no-stream` or the plugin's
    /// `stream` option (see [`stream_option`]) turns it off.
    Optional,
    /// The API never streams (DeepSpeed-MII): TTFT is the whole response's latency.
    Never,
}

/// The `stream` option of a [`Streaming::Optional`] backend, for its `describe`.
pub fn stream_option() -> OptionInfo {
    option(
        "stream",
        "Stream the response. false asks for one JSON body, so TTFT equals the end-to-end \
         latency and there is no ITL.",
        Some("true"),
    )
}

/// The settings a native backend takes from its client configuration.
#[derive(Debug, Clone)]
pub struct NativeClient {
    plugin: &'static str,
    model: String,
    ignore_eos: bool,
    stream: bool,
    extra_body: Map<String, Value>,
}

impl NativeClient {
    /// Reads the shared settings; the plugin reads its own options from the returned
    /// reader, then calls [`OptionReader::finish`] so that an unknown key is refused.
    pub fn open(
        plugin: &'static str,
        config: ClientConfig,
        streaming: Streaming,
    ) -> Result<(Self, OptionReader), PluginError> {
        let mut options = OptionReader::new(plugin, config.options);
        let stream = match streaming {
            Streaming::Always if !config.stream => {
                return Err(PluginError::Unsupported(format!(
                    "{plugin}: the server's endpoint always streams; --no-stream is not \
                     supported by this backend"
                )));
            }
            Streaming::Always => true,
            Streaming::Optional => options.flag("stream", config.stream)?,
            Streaming::Never => false,
        };
        let extra_body = match &config.extra_body {
            None => Map::new(),
            Some(text) => crate::openai::parse_object(text).map_err(|e| {
                PluginError::InvalidConfig(format!("{plugin}: the client's extra body {e}"))
            })?,
        };
        Ok((
            NativeClient {
                plugin,
                model: config.model,
                ignore_eos: config.ignore_eos,
                stream,
                extra_body,
            },
            options,
        ))
    }

    /// The plugin's name, for messages.
    pub fn plugin(&self) -> &'static str {
        self.plugin
    }

    /// Whether the response streams.
    pub fn stream(&self) -> bool {
        self.stream
    }

    /// The run's `--ignore-eos`.
    pub fn ignore_eos(&self) -> bool {
        self.ignore_eos
    }

    /// Server-sent events when streaming, else the whole body as one frame.
    pub fn framing(&self) -> Framing {
        if self.stream {
            Framing::Sse
        } else {
            Framing::Raw
        }
    }

    /// The model a request names: its LoRA adapter when it has one, else the client's.
    pub fn model<'a>(&'a self, spec: &'a RequestSpec) -> &'a str {
        spec.lora_name
            .as_deref()
            .filter(|name| !name.is_empty())
            .unwrap_or(&self.model)
    }

    /// The prompt as text; these APIs take one text prompt (token ids only where the
    /// plugin says so, before calling this), no chat, batches or media.
    pub fn text_prompt<'a>(&self, spec: &'a RequestSpec) -> Result<&'a str, PluginError> {
        let plugin = self.plugin;
        if !spec.multimodal.is_empty() {
            return Err(PluginError::Unsupported(format!(
                "{plugin}: this API takes no images, audio or video; use --backend openai-chat"
            )));
        }
        match &spec.prompt {
            Prompt::Text(text) => Ok(text),
            Prompt::TokenIds(_) => Err(PluginError::Unsupported(format!(
                "{plugin}: this API takes text prompts, not token ids"
            ))),
            Prompt::Chat(_) => Err(PluginError::Unsupported(format!(
                "{plugin}: this API takes no chat messages; use --backend openai-chat"
            ))),
            Prompt::Texts(_) | Prompt::Rerank(_) => Err(PluginError::Unsupported(format!(
                "{plugin}: this API takes no batches of texts or rerank queries; use a pooling \
                 backend"
            ))),
        }
    }

    /// Finishes a body holding the API's own fields and makes the request: the client's
    /// extra body (`--extra-body`, sampling parameters), then the request's, are merged
    /// over the top level, later keys winning, as vLLM merges them. Headers:
    /// `Content-Type: application/json` and `x-request-id` when the request has an id; the
    /// host adds authorization and `--header` values.
    pub fn request(
        &self,
        mut body: Map<String, Value>,
        spec: &RequestSpec,
    ) -> Result<HttpRequest, PluginError> {
        crate::structured::refuse(self.plugin, spec)?;
        body.extend(self.extra_body.iter().map(|(k, v)| (k.clone(), v.clone())));
        if let Some(text) = &spec.extra_body {
            let extra = crate::openai::parse_object(text).map_err(|e| {
                PluginError::InvalidInput(format!("{}: the request's extra body {e}", self.plugin))
            })?;
            body.extend(extra);
        }
        json_post(self.plugin, body, spec)
    }
}

/// What one frame of a native API says, as spans of the frame. A plugin's
/// [`FrameReader`] fills it in; [`NativeDecoder`] turns it into events.
#[derive(Debug, Default, Clone, Copy)]
pub struct NativeFrame {
    /// The frame is a timing point (a token arrived), with this text when it has one.
    pub chunk: Option<Option<Str>>,
    /// How many tokens the chunk carries, when the API says so.
    pub tokens: Option<u32>,
    pub usage: Option<Usage>,
    pub finish: Option<Finish>,
    pub error: Option<ServerError>,
}

/// A finish reason: the server's own string, or one the plugin maps it to.
#[derive(Debug, Clone, Copy)]
pub enum Finish {
    Text(Str),
    Named(&'static str),
}

/// Reads one frame of a plugin's API. It may keep state between frames (SGLang's
/// cumulative text); a frame that is not valid JSON is an `Err`.
pub trait FrameReader: 'static {
    fn read(&mut self, frame: &[u8]) -> json::Result<NativeFrame>;
}

/// Turns frames into events through a [`FrameReader`]. Per frame, in this order: a
/// [`Chunk`] (a timing point, with its text), usage, the finish reason, an error; a frame
/// that is not valid JSON is a malformed-frame error.
pub struct NativeDecoder<R>(pub R);

impl<R: FrameReader> Decoder for NativeDecoder<R> {
    fn feed(
        &mut self,
        buffer: &[u8],
        frame_ends: &[u32],
        out: &mut Vec<Event>,
    ) -> Result<(), PluginError> {
        for frame in crate::backend::frames(buffer, frame_ends)? {
            match self.0.read(frame.bytes()) {
                Ok(parsed) => emit(frame, parsed, out),
                Err(e) => out.push(Event {
                    frame: frame.index(),
                    kind: invalid_frame(frame.bytes(), &e),
                }),
            }
        }
        Ok(())
    }
}

fn emit(at: Frame<'_>, parsed: NativeFrame, out: &mut Vec<Event>) {
    let (bytes, frame) = (at.bytes(), at.index());
    if let Some(text) = parsed.chunk {
        out.push(Event {
            frame,
            kind: EventKind::Chunk(Chunk {
                content: text.map(|s| at.span(s)),
                reasoning: None,
                tokens: parsed.tokens,
            }),
        });
    }
    if let Some(usage) = parsed.usage {
        out.push(Event {
            frame,
            kind: EventKind::Usage(usage),
        });
    }
    if let Some(finish) = parsed.finish {
        let reason = match finish {
            Finish::Text(s) => s.text(bytes),
            Finish::Named(name) => name.to_string(),
        };
        out.push(Event {
            frame,
            kind: EventKind::Finish(reason),
        });
    }
    if let Some(error) = parsed.error {
        out.push(Event {
            frame,
            kind: error.event(bytes),
        });
    }
}

/// Reads the frame as one JSON object, calling `f` with each member (which it may read or
/// leave to be skipped); anything but one object is an error.
pub fn read_object<'a>(
    frame: &'a [u8],
    f: impl FnMut(json::Key<'a>, &mut Cursor<'a>) -> json::Result<()>,
) -> json::Result<()> {
    let mut cur = Cursor::new(frame);
    if cur.object(f)?.is_none() {
        cur.skip()?;
        return Err(json::Error {
            offset: 0,
            what: "expected a JSON object",
        });
    }
    cur.finish()
}

/// Reads a boolean of `frame` at the cursor: `None` (unmoved) when it is not one.
pub fn boolean(frame: &[u8], v: &mut Cursor<'_>) -> json::Result<Option<bool>> {
    if v.kind()? != Kind::Bool {
        return Ok(None);
    }
    let value = frame[v.pos()] == b't';
    v.skip()?;
    Ok(Some(value))
}

/// Reads a token count: a non-negative integer that fits in a `u32`.
pub fn count(v: &mut Cursor<'_>) -> json::Result<Option<u32>> {
    Ok(v.u64()?.and_then(|n| u32::try_from(n).ok()))
}

/// Frames a recorded SSE body the way the client does (one frame per event's `data`,
/// `:` comments skipped, an optional space after `data:`, `[DONE]` ending the stream).
/// Returns the frames of the complete events in `body` and the unfinished rest.
fn sse_frames(body: &str) -> (Vec<String>, &str) {
    let mut frames = Vec::new();
    let mut data: Option<String> = None;
    let (mut pos, mut event_start) = (0, 0);
    while let Some(n) = body[pos..].find('\n') {
        let line = &body[pos..pos + n];
        let line = line.strip_suffix('\r').unwrap_or(line);
        pos += n + 1;
        if line.is_empty() {
            if let Some(data) = data.take() {
                if data == "[DONE]" {
                    return (frames, "");
                }
                frames.push(data);
            }
            event_start = pos;
        } else if let Some(value) = line.strip_prefix("data:") {
            let value = value.strip_prefix(' ').unwrap_or(value);
            match &mut data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => data = Some(value.to_string()),
            }
        }
    }
    // An unfinished event stays with the rest, as the client keeps it until more arrives.
    (frames, &body[event_start..])
}

/// Decodes `frames` fed in the given groups, one `feed` call per group, and renders the
/// events with their frame numbers counted over the whole response.
fn decode_in_groups<D: Decoder>(decoder: &mut D, groups: &[Vec<String>]) -> Vec<String> {
    let mut rendered = Vec::new();
    let mut base = 0u32;
    for group in groups {
        let buffer = group.concat().into_bytes();
        let mut ends = Vec::with_capacity(group.len());
        let mut end = 0u32;
        for frame in group {
            end += frame.len() as u32;
            ends.push(end);
        }
        let mut out: Vec<Event> = Vec::new();
        decoder.feed(&buffer, &ends, &mut out).unwrap();
        for mut event in out {
            let local = crate::openai::render(&buffer, &event);
            event.frame += base;
            let (_, what) = local.split_once(": ").unwrap_or(("", &local));
            rendered.push(format!("{}: {what}", event.frame));
        }
        base += group.len() as u32;
    }
    let mut out = Vec::new();
    decoder.finish(&mut out).unwrap();
    rendered.extend(out.iter().map(|e| crate::openai::render(&[], e)));
    rendered
}

/// For decoder tests: decodes a recorded SSE `body` (as the server sent it) in one `feed`,
/// then split at every byte boundary as two network reads would split it (the frames
/// complete after the first read in one `feed`, the others in a second), and asserts that
/// every split gives the same events. Returns them, rendered as
/// [`render`](crate::openai::render) does.
pub fn decode_sse_split_everywhere<D: Decoder>(
    mut make: impl FnMut() -> D,
    body: &str,
) -> Vec<String> {
    let (all, rest) = sse_frames(body);
    let mut frames = all.clone();
    // A last event without its blank line is still a frame at the end of the body.
    let tail = sse_frames(&format!("{rest}\n\n")).0;
    frames.extend(tail);
    let whole = decode_in_groups(&mut make(), std::slice::from_ref(&frames));
    for split in 0..=body.len() {
        if !body.is_char_boundary(split) {
            continue;
        }
        let (first, _) = sse_frames(&body[..split]);
        let second = frames[first.len().min(frames.len())..].to_vec();
        let got = decode_in_groups(&mut make(), &[first, second]);
        assert_eq!(got, whole, "split at byte {split}");
    }
    whole
}

/// For decoder tests of a non-streaming API: decodes `body` as the one frame it is.
pub fn decode_whole<D: Decoder>(mut decoder: D, body: &str) -> Vec<String> {
    decode_in_groups(&mut decoder, &[vec![body.to_string()]])
}

/// A POST of a finished `body` as JSON: `Content-Type: application/json`, and `x-request-id`
/// when the request has an id (the host adds authorization and `--header` values). The
/// plugin's name is for the message of a body that cannot be serialized.
pub fn json_post(
    plugin: &str,
    body: Map<String, Value>,
    spec: &RequestSpec,
) -> Result<HttpRequest, PluginError> {
    let body = serde_json::to_vec(&Value::Object(body)).map_err(|e| {
        PluginError::Internal(format!("{plugin}: cannot serialize the request body: {e}"))
    })?;
    let mut headers = vec![("Content-Type".to_string(), "application/json".to_string())];
    if let Some(id) = &spec.request_id {
        headers.push(("x-request-id".to_string(), id.clone()));
    }
    Ok(HttpRequest {
        method: "POST".into(),
        headers,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_frames_follow_the_event_stream_rules() {
        let body = ": ping\n\ndata:{\"a\":1}\n\ndata: {\"b\":2}\r\n\r\ndata: [DONE]\n\ndata: x\n\n";
        let (frames, rest) = sse_frames(body);
        assert_eq!(frames, [r#"{"a":1}"#, r#"{"b":2}"#]);
        assert_eq!(rest, "");
        let (frames, rest) = sse_frames("data: {\"a\":1}\n\ndata: {\"b\"");
        assert_eq!(frames, [r#"{"a":1}"#]);
        assert_eq!(rest, "data: {\"b\"");
    }

    fn config(stream: bool, options: &[(&str, &str)]) -> ClientConfig {
        ClientConfig {
            model: "m".into(),
            stream,
            ignore_eos: false,
            extra_body: Some(r#"{"temperature":0.5,"top_k":3}"#.into()),
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn streaming_rules_and_extra_bodies() {
        assert!(matches!(
            NativeClient::open("tgi", config(false, &[]), Streaming::Always),
            Err(PluginError::Unsupported(m)) if m.starts_with("tgi:") && m.contains("--no-stream")
        ));
        let (client, _) = NativeClient::open("x", config(true, &[]), Streaming::Never).unwrap();
        assert_eq!(client.framing(), Framing::Raw);
        let (client, options) = NativeClient::open(
            "x",
            config(true, &[("stream", "false")]),
            Streaming::Optional,
        )
        .unwrap();
        options.finish(&[stream_option()]).unwrap();
        assert!(!client.stream());
        let mut body = Map::new();
        body.insert("temperature".into(), Value::from(0.0));
        body.insert("prompt".into(), Value::from("hi"));
        let mut spec = RequestSpec::text("hi".into(), 1, 1);
        spec.request_id = Some("r-1".into());
        spec.extra_body = Some(r#"{"top_k":9}"#.into());
        let request = client.request(body, &spec).unwrap();
        let sent: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(
            sent,
            serde_json::json!({"prompt": "hi", "temperature": 0.5, "top_k": 9})
        );
        assert_eq!(request.headers[1], ("x-request-id".into(), "r-1".into()));
    }
}
