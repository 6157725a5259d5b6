//! The backend side: implement [`Backend`] and [`Decoder`], then call
//! [`export_backend!`](crate::export_backend).

use crate::backend_bindings::exports::bench::plugin::backend::{
    Chunks, Client, Decoded, Event as WireEvent, EventKind as WireEventKind, GuestClient,
};
use crate::{
    BackendDescription, ClientConfig, ErrorEvent, ErrorKind, Framing, HttpRequest, PluginError,
    Pooled, RequestSpec, ResponseHead, Usage,
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
/// `buffer[frame_ends[i-1]..frame_ends[i]]` (from 0 for the first). Events refer to text
/// by [`TextSpan`]s into `buffer` instead of copying it, so the host reads the text
/// natively.
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

/// A byte range of the buffer given to [`Decoder::feed`]. `escaped` says it is the inside
/// of a JSON string literal whose escapes the host must decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextSpan {
    pub start: u32,
    pub len: u32,
    pub escaped: bool,
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

/// The frames of one [`Decoder::feed`] call as `(frame index, where the frame starts in
/// the buffer, its bytes)`, once the ends are checked: in order and inside the buffer.
/// The host lays frames out so; a decoder checks anyway, since a bad end would make it
/// read outside its frame. Every decoder walks its frames through this.
#[inline]
pub fn frames<'a>(
    buffer: &'a [u8],
    frame_ends: &'a [u32],
) -> Result<impl Iterator<Item = (u32, usize, &'a [u8])> + 'a, PluginError> {
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
        (index as u32, from, &buffer[from..end])
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
        Some(TextSpan {
            start,
            len,
            escaped,
        })
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
