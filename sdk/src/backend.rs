//! The backend side: implement [`Backend`] and [`Decoder`], then call
//! [`export_backend!`](crate::export_backend).

use std::ops::Range;

use crate::backend_bindings::exports::bench::plugin::backend::{
    Chunks, Client, Decoded, Event as WireEvent, EventKind as WireEventKind, GuestClient,
};
use crate::json::Str;
use crate::{
    BackendDescription, ClientConfig, ErrorEvent, ErrorKind, Framing, HttpRequest, PluginError,
    Pooled, RequestSpec, ResponseHead, ServerTiming, Usage,
};

/// An API: builds HTTP requests (before the clock starts) and makes decoders for responses.
pub trait Backend: Sized + 'static {
    type Decoder: Decoder;

    /// Name, version, description and options (for `bench plugin inspect` and the help of
    /// `bench serve`), and whether the API is OpenAI-compatible.
    fn describe() -> BackendDescription;
    /// Validates the configuration (unknown option keys are an error).
    fn open(config: ClientConfig) -> Result<Self, PluginError>;
    /// How the host frames response bodies for [`Decoder::feed`].
    fn framing(&self) -> Framing;
    /// The endpoint path used when the user gives no `--endpoint`.
    fn default_path(&self) -> String;
    fn build_request(&self, spec: RequestSpec) -> Result<HttpRequest, PluginError>;
    /// A decoder for one response.
    fn decoder(&self, head: &ResponseHead) -> Result<Self::Decoder, PluginError>;
}

/// Turns the frames of one response into events.
///
/// `buffer` holds frame payloads end to end; frame `i` is
/// `buffer[frame_ends[i-1]..frame_ends[i]]` (from 0 for the first). Walk them with
/// [`frames`]: each [`Frame`] knows where it lies, and its [`Frame::span`] turns a string
/// that a [`json::Cursor`](crate::json::Cursor) over the frame's bytes read into the
/// [`TextSpan`] an event carries, so the text is never copied and the host reads it
/// natively.
///
/// The host calls `feed` once per response with all its frames. The SDK's test harness
/// (`bench_sdk::testing`, feature `testing`) also feeds a response in several calls, to
/// check that what a decoder keeps between frames does not depend on where a call ends:
/// events from `feed` name frames by their index in that call's `frame_ends`, events from
/// [`Decoder::finish`] by their index in the whole response.
pub trait Decoder: 'static {
    fn feed(
        &mut self,
        buffer: &[u8],
        frame_ends: &[u32],
        out: &mut Vec<Event>,
    ) -> Result<(), PluginError>;
    /// Called once after the last frame.
    fn finish(&mut self, _out: &mut Vec<Event>) -> Result<(), PluginError> {
        Ok(())
    }
}

/// A text inside one frame of the buffer given to [`Decoder::feed`], as the contract sends
/// it: where it starts in the whole buffer and how long it is. `escaped` says it is the
/// inside of a JSON string literal whose escapes the host must decode.
///
/// Made by [`Frame::span`] or [`Frame::text`] from offsets in the frame, which add the
/// frame's start and check the text lies inside the frame: a span built from a frame's
/// offsets as if they were the buffer's would point at other text, and nothing would say
/// so. The host fails a response whose span lies outside its chunk's frame (a `decode`
/// error naming the plugin, the chunk and the span).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextSpan {
    start: u32,
    len: u32,
    escaped: bool,
}

impl TextSpan {
    /// A span at offsets of the whole buffer, checked against nothing. For tests of the
    /// host's checks (a fixture that must send a bad span); a decoder uses
    /// [`Frame::span`].
    pub const fn absolute_unchecked(start: u32, len: u32, escaped: bool) -> TextSpan {
        TextSpan {
            start,
            len,
            escaped,
        }
    }

    /// Where the text starts in the buffer.
    pub const fn start(&self) -> u32 {
        self.start
    }

    /// Its length in bytes (before the host decodes any escapes).
    pub const fn len(&self) -> u32 {
        self.len
    }

    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the host must decode JSON escapes in it.
    pub const fn escaped(&self) -> bool {
        self.escaped
    }

    /// The span's bytes of `buffer` (the one given to [`Decoder::feed`]).
    pub fn range(&self) -> Range<usize> {
        self.start as usize..self.start as usize + self.len as usize
    }
}

/// A frame that carries output (`choices` in OpenAI's format): it is a timing point for
/// TTFT and ITL even when it carries no text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Chunk {
    pub content: Option<TextSpan>,
    pub reasoning: Option<TextSpan>,
    /// How many tokens the chunk carries, when the response says so. The host receives
    /// the counts only when every chunk of the response has one.
    pub tokens: Option<u32>,
}

#[derive(Debug, Clone)]
pub enum EventKind {
    Chunk(Chunk),
    Usage(Usage),
    Finish(String),
    /// An in-band error: the request fails with this kind and message.
    Error(ErrorEvent),
    /// A pooling result (embeddings, scores): the request succeeds without chunks.
    Pooled(Pooled),
    /// The server's own timing of the request (vLLM's per-request `metrics`).
    ServerTiming(ServerTiming),
}

impl EventKind {
    /// The server reported an error in a successful response.
    pub fn server_error(message: impl Into<String>) -> EventKind {
        EventKind::Error(ErrorEvent {
            kind: ErrorKind::Server,
            message: message.into(),
        })
    }

    /// A frame the decoder could not parse.
    pub fn malformed_frame(message: impl Into<String>) -> EventKind {
        EventKind::Error(ErrorEvent {
            kind: ErrorKind::MalformedFrame,
            message: message.into(),
        })
    }
}

/// An event and the frame (index into `frame_ends`) that carried it; the event inherits
/// the arrival time of that frame.
#[derive(Debug, Clone)]
pub struct Event {
    pub frame: u32,
    pub kind: EventKind,
}

/// One frame of a [`Decoder::feed`] call: its index in the call's `frame_ends`, where it
/// starts in the buffer, and its bytes. [`frames`] makes them.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    index: u32,
    start: usize,
    bytes: &'a [u8],
}

impl<'a> Frame<'a> {
    /// The frame's index (what [`Event::frame`] names).
    #[inline]
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Where the frame starts in the buffer.
    #[inline]
    pub fn start(&self) -> usize {
        self.start
    }

    /// The frame's payload: what a [`json::Cursor`](crate::json::Cursor) reads.
    #[inline]
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The frame's bytes of the buffer.
    #[inline]
    pub fn range(&self) -> Range<usize> {
        self.start..self.start + self.bytes.len()
    }

    /// The span of a string that a [`json::Cursor`](crate::json::Cursor) over
    /// [`Frame::bytes`] read (a [`Str`] holds offsets into the bytes it scanned).
    ///
    /// # Panics
    ///
    /// When `text` does not lie inside the frame: it was read from other bytes. In a plugin
    /// the panic fails the response with the message, where a wrong span would have
    /// shown other text.
    #[inline]
    pub fn span(&self, text: Str) -> TextSpan {
        self.text(text.start..text.end, text.escaped)
    }

    /// The span of the frame's bytes `range` (offsets into [`Frame::bytes`]); `escaped`
    /// when they are the inside of a JSON string literal.
    ///
    /// # Panics
    ///
    /// When `range` does not lie inside the frame.
    #[inline]
    pub fn text(&self, range: Range<usize>, escaped: bool) -> TextSpan {
        if range.start > range.end || range.end > self.bytes.len() {
            outside_frame(self, range);
        }
        TextSpan {
            start: (self.start + range.start) as u32,
            len: (range.end - range.start) as u32,
            escaped,
        }
    }
}

#[cold]
#[inline(never)]
fn outside_frame(frame: &Frame<'_>, range: Range<usize>) -> ! {
    panic!(
        "text {}..{} is outside frame {} ({} bytes): a span is built from offsets into the \
         frame's own bytes",
        range.start,
        range.end,
        frame.index,
        frame.bytes.len()
    )
}

/// The frames of one [`Decoder::feed`] call, once the ends are checked: in order and
/// inside the buffer. The host lays frames out so; a decoder checks anyway, since a bad
/// end would make it read outside its frame. Every decoder walks its frames through this.
#[inline]
pub fn frames<'a>(
    buffer: &'a [u8],
    frame_ends: &'a [u32],
) -> Result<impl Iterator<Item = Frame<'a>> + 'a, PluginError> {
    let mut start = 0;
    for (index, &end) in frame_ends.iter().enumerate() {
        let end = end as usize;
        if end < start || end > buffer.len() {
            return Err(PluginError::InvalidInput(format!(
                "frame {index} ends at byte {end}, outside {start}..={} of the buffer",
                buffer.len()
            )));
        }
        start = end;
    }
    let mut start = 0;
    Ok(frame_ends.iter().enumerate().map(move |(index, &end)| {
        let (from, end) = (start, end as usize);
        start = end;
        Frame {
            index: index as u32,
            start: from,
            bytes: &buffer[from..end],
        }
    }))
}

/// The contract's flat form of a response's events (`decoded` in the WIT): chunks as
/// parallel lists of numbers, which the host copies in one go, and the few other events as
/// they are. A missing text is an empty span: the host appends nothing for either.
pub fn flatten(events: Vec<Event>) -> Decoded {
    let chunks = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Chunk(_)))
        .count();
    let mut flat = Decoded {
        chunks: Chunks {
            frames: Vec::with_capacity(chunks),
            spans: Vec::with_capacity(4 * chunks),
            escaped: Vec::with_capacity(chunks),
            tokens: Vec::new(),
        },
        events: Vec::new(),
    };
    // Token counts go over only when every chunk has one (the contract's rule).
    let mut all_counted = chunks > 0;
    for event in events {
        let kind = match event.kind {
            EventKind::Chunk(chunk) => {
                let text = |span: Option<TextSpan>| {
                    span.map_or((0, 0, false), |s| (s.start, s.len, s.escaped))
                };
                let (content_start, content_len, content_escaped) = text(chunk.content);
                let (reasoning_start, reasoning_len, reasoning_escaped) = text(chunk.reasoning);
                let c = &mut flat.chunks;
                c.frames.push(event.frame);
                c.spans.extend_from_slice(&[
                    content_start,
                    content_len,
                    reasoning_start,
                    reasoning_len,
                ]);
                c.escaped
                    .push(u8::from(content_escaped) | u8::from(reasoning_escaped) << 1);
                match chunk.tokens {
                    Some(n) if all_counted => c.tokens.push(n),
                    _ => all_counted = false,
                }
                continue;
            }
            EventKind::Usage(usage) => WireEventKind::Usage(usage),
            EventKind::Finish(reason) => WireEventKind::Finish(reason),
            EventKind::Error(error) => WireEventKind::Error(error),
            EventKind::Pooled(pooled) => WireEventKind::Pooled(pooled),
            EventKind::ServerTiming(timing) => WireEventKind::ServerTiming(timing),
        };
        flat.events.push(WireEvent {
            frame: event.frame,
            kind,
        });
    }
    if !all_counted {
        flat.chunks.tokens.clear();
    }
    flat
}

impl ResponseHead {
    /// The value of the first header called `name` (ASCII case-insensitive), trimmed.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.header_lines()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value)
    }

    /// Every `name: value` header line, in order, trimmed (lines that are not UTF-8 or
    /// have no colon are skipped).
    pub fn header_lines(&self) -> impl Iterator<Item = (&str, &str)> {
        self.headers.split(|&b| b == b'\n').filter_map(|line| {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let (name, value) = std::str::from_utf8(line).ok()?.split_once(':')?;
            Some((name.trim(), value.trim()))
        })
    }
}

/// Adapts a [`Backend`] to the generated resource trait.
#[doc(hidden)]
pub struct ClientAdapter<T>(T);

impl<T: Backend> GuestClient for ClientAdapter<T> {
    fn open(config: ClientConfig) -> Result<Client, PluginError> {
        Ok(Client::new(ClientAdapter(T::open(config)?)))
    }

    fn framing(&self) -> Framing {
        self.0.framing()
    }

    fn default_path(&self) -> String {
        self.0.default_path()
    }

    fn build_request(&self, spec: RequestSpec) -> Result<HttpRequest, PluginError> {
        self.0.build_request(spec)
    }

    fn decode(
        &self,
        head: ResponseHead,
        buffer: Vec<u8>,
        frame_ends: Vec<u32>,
    ) -> Result<Decoded, PluginError> {
        let mut decoder = self.0.decoder(&head)?;
        let mut out = Vec::with_capacity(frame_ends.len() + 2);
        decoder.feed(&buffer, &frame_ends, &mut out)?;
        decoder.finish(&mut out)?;
        Ok(flatten(out))
    }
}

/// Exports a type implementing [`Backend`] as the plugin's `backend` interface.
#[macro_export]
macro_rules! export_backend {
    ($t:ty) => {
        #[doc(hidden)]
        struct __BenchBackendExport;

        impl $crate::backend_bindings::exports::bench::plugin::backend::Guest for __BenchBackendExport {
            type Client = $crate::backend::ClientAdapter<$t>;

            fn describe() -> $crate::BackendDescription {
                <$t as $crate::Backend>::describe()
            }
        }

        // Component exports exist only on wasm; natively (unit tests of a plugin crate)
        // the names are not valid linker symbols.
        #[cfg(target_arch = "wasm32")]
        $crate::backend_bindings::__export_backend_world!(__BenchBackendExport with_types_in $crate::backend_bindings);
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(start: u32, len: u32, escaped: bool) -> Option<TextSpan> {
        Some(TextSpan::absolute_unchecked(start, len, escaped))
    }

    #[test]
    fn flatten_lays_chunks_out_as_numbers_and_keeps_other_events_in_order() {
        let chunk = |frame, content, reasoning| Event {
            frame,
            kind: EventKind::Chunk(Chunk {
                content,
                reasoning,
                tokens: None,
            }),
        };
        let flat = flatten(vec![
            chunk(0, span(3, 5, false), None),
            Event {
                frame: 0,
                kind: EventKind::Finish("length".into()),
            },
            chunk(1, None, span(20, 2, true)),
            chunk(2, span(30, 4, true), span(40, 1, false)),
            Event {
                frame: 2,
                kind: EventKind::server_error("boom"),
            },
            Event {
                frame: 3,
                kind: EventKind::Usage(Usage {
                    prompt_tokens: Some(7),
                    completion_tokens: None,
                    cached_prompt_tokens: None,
                }),
            },
        ]);
        assert_eq!(flat.chunks.frames, [0, 1, 2]);
        assert_eq!(flat.chunks.spans, [3, 5, 0, 0, 0, 0, 20, 2, 30, 4, 40, 1]);
        assert_eq!(flat.chunks.escaped, [0b00, 0b10, 0b01]);
        let others: Vec<String> = flat
            .events
            .iter()
            .map(|e| format!("{} {:?}", e.frame, e.kind))
            .collect();
        assert_eq!(others.len(), 3);
        assert!(
            others[0].starts_with("0 ") && others[0].contains("length"),
            "{others:?}"
        );
        assert!(
            others[1].starts_with("2 ") && others[1].contains("boom"),
            "{others:?}"
        );
        assert!(
            others[2].starts_with("3 ") && others[2].contains('7'),
            "{others:?}"
        );
    }

    #[test]
    fn frame_spans_are_the_frames_offsets_moved_to_the_buffer() {
        let buffer = br#"{"t":"ab"}{"t":"cd"}"#;
        let all: Vec<Frame<'_>> = frames(buffer, &[10, 20]).unwrap().collect();
        let second = all[1];
        assert_eq!(
            (second.index(), second.start(), second.range()),
            (1, 10, 10..20)
        );
        let mut cur = crate::json::Cursor::new(second.bytes());
        let mut text = None;
        cur.object(|_, v| {
            text = v.string()?;
            Ok(())
        })
        .unwrap();
        // The cursor's offsets are the frame's own (6..8); the span's are the buffer's.
        let text = text.unwrap();
        assert_eq!(text.start, 6);
        let span = second.span(text);
        assert_eq!((span.start(), span.len(), span.escaped()), (16, 2, false));
        assert_eq!(&buffer[span.range()], b"cd");
        assert_eq!(second.text(0..0, false).range(), 10..10);
    }

    #[test]
    #[should_panic(expected = "text 6..11 is outside frame 0 (10 bytes)")]
    fn a_span_past_its_frame_panics() {
        let buffer = br#"{"t":"ab"}{"t":"cd"}"#;
        let first = frames(buffer, &[10, 20]).unwrap().next().unwrap();
        first.text(6..11, false);
    }

    #[test]
    fn headers_are_looked_up_by_name_in_any_case() {
        let head = ResponseHead {
            status: 200,
            headers:
                b"Content-Type: text/event-stream\r\nx-request-id:  bench-7 \r\nbroken\r\n\r\n"
                    .to_vec(),
        };
        assert_eq!(head.header("content-type"), Some("text/event-stream"));
        assert_eq!(head.header("X-Request-Id"), Some("bench-7"));
        assert_eq!(head.header("broken"), None);
        assert_eq!(head.header_lines().count(), 2);
    }
}
