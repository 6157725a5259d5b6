//! Native, incremental framing of a response body into frames for the backend decoder.
//!
//! The client hands every network read to a [`Framer`] right after taking its timestamp;
//! the framer appends the payloads of the frames that read completed to a [`Frames`]
//! batch, laid end to end the way the backend plugin's `decoder.feed` takes them
//! (`buffer` plus `frame-ends`). The return value of [`Framer::push`] tells the caller how
//! many frames this read completed, so each frame is stamped with the arrival time of the
//! read that carried its last byte.
//!
//! Reads split the body anywhere: in the middle of a `data:` line, between the `\r` and
//! `\n` of a line end, inside a multi-byte UTF-8 character. The framer keeps bytes as
//! bytes and carries an unfinished line over to the next read in a growable buffer, so a
//! line of any length (MBs of base64 in one SSE event) frames correctly.

use memchr::{memchr, memchr2};

/// How a response body splits into frames (the `framing` enum of the backend contract).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FramingKind {
    /// Server-sent events: one frame per event's `data`; `data: [DONE]` ends the stream.
    Sse,
    /// One frame per non-empty line.
    Ndjson,
    /// The whole body is one frame.
    Raw,
}

/// Frame payloads laid end to end: frame `i` is `buffer[ends[i - 1]..ends[i]]` (from 0
/// for the first). This is the shape `decoder.feed(buffer, frame-ends)` takes, so a batch
/// crosses into the plugin in one copy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Frames {
    pub buffer: Vec<u8>,
    pub ends: Vec<u32>,
}

impl Frames {
    /// Number of frames in the batch.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether the batch holds no frame.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Empties the batch, keeping its capacity for the next read.
    pub fn clear(&mut self) {
        self.buffer.clear();
        self.ends.clear();
    }

    /// The frame payloads in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().map(|&end| end as usize));
        starts
            .zip(self.ends.iter())
            .map(|(start, &end)| &self.buffer[start..end as usize])
    }

    /// Closes the frame that ends at the current end of `buffer`.
    ///
    /// # Panics
    /// If `buffer` has grown past 4 GiB, which `frame-ends` (u32) cannot address; callers
    /// hand each batch to the decoder and clear it long before that.
    fn close_frame(&mut self) {
        let end = u32::try_from(self.buffer.len())
            .expect("a frame batch must stay under 4 GiB (frame ends are u32)");
        self.ends.push(end);
    }
}

/// The payload of the SSE event that ends a stream.
const DONE: &[u8] = b"[DONE]";
/// A UTF-8 byte order mark, which the SSE spec strips from the start of a stream.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Incremental framer for one response body. Create one per response.
#[derive(Debug)]
pub struct Framer {
    kind: FramingKind,
    /// The bytes of a line whose end has not arrived yet (SSE, NDJSON), or the whole
    /// body so far (Raw). Grows as needed, so there is no line length limit.
    partial: Vec<u8>,
    /// SSE: the last read ended in `\r`, so a `\n` opening the next read finishes that
    /// same line end rather than making an empty line (which would dispatch an event).
    skip_lf: bool,
    /// SSE: data of an event whose blank line has not arrived when a read ended. Within
    /// a call the event's data is assembled directly in `Frames::buffer`; it is parked
    /// here between calls so that `Frames` only ever holds completed frames and the
    /// caller may clear it after every read.
    event: Vec<u8>,
    /// SSE: the current event has had a `data` field (later ones join with `\n`).
    has_data: bool,
    /// SSE: no line has been processed yet, so a leading byte order mark is stripped.
    at_stream_start: bool,
    /// SSE: `data: [DONE]` was seen; everything after it is ignored.
    done: bool,
}

impl Framer {
    pub fn new(kind: FramingKind) -> Self {
        Framer {
            kind,
            partial: Vec::new(),
            skip_lf: false,
            event: Vec::new(),
            has_data: false,
            at_stream_start: true,
            done: false,
        }
    }

    /// Frames one network read. Appends the frames this read completed to `out` and
    /// returns how many that is. Nothing is appended for an unfinished frame: its bytes
    /// are kept inside the framer until a later read (or [`Framer::finish`]) completes it.
    pub fn push(&mut self, bytes: &[u8], out: &mut Frames) -> usize {
        let before = out.len();
        match self.kind {
            FramingKind::Sse => self.push_sse(bytes, out),
            FramingKind::Ndjson => self.push_ndjson(bytes, out),
            FramingKind::Raw => self.partial.extend_from_slice(bytes),
        }
        out.len() - before
    }

    /// Ends the body: flushes a last frame that arrived without its terminating blank line
    /// (SSE) or newline (NDJSON), and emits Raw's single frame (the whole body, possibly
    /// empty). Returns how many frames it appended. Call once, after the last `push`.
    pub fn finish(&mut self, out: &mut Frames) -> usize {
        let before = out.len();
        match self.kind {
            FramingKind::Sse => self.finish_sse(out),
            FramingKind::Ndjson => {
                if !self.partial.is_empty() {
                    let line = std::mem::take(&mut self.partial);
                    ndjson_line(&line, out);
                }
            }
            FramingKind::Raw => {
                if out.buffer.is_empty() {
                    // Hand the body over without copying it.
                    std::mem::swap(&mut out.buffer, &mut self.partial);
                } else {
                    out.buffer.extend_from_slice(&self.partial);
                    self.partial.clear();
                }
                out.close_frame();
            }
        }
        out.len() - before
    }

    /// Whether an SSE stream has sent `data: [DONE]`. Frames after it are ignored.
    pub fn done(&self) -> bool {
        self.done
    }

    fn push_sse(&mut self, mut bytes: &[u8], out: &mut Frames) {
        if self.done {
            return;
        }
        if self.skip_lf && !bytes.is_empty() {
            self.skip_lf = false;
            if bytes[0] == b'\n' {
                bytes = &bytes[1..];
            }
        }
        let mut event_start = self.resume_event(out);
        while !self.done {
            let Some(at) = memchr2(b'\n', b'\r', bytes) else {
                self.partial.extend_from_slice(bytes);
                break;
            };
            let mut next = at + 1;
            if bytes[at] == b'\r' {
                match bytes.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.skip_lf = true,
                }
            }
            if self.partial.is_empty() {
                self.sse_line(&bytes[..at], out, &mut event_start);
            } else {
                self.partial.extend_from_slice(&bytes[..at]);
                self.sse_partial_line(out, &mut event_start);
            }
            bytes = &bytes[next..];
        }
        self.park_event(out, event_start);
    }

    fn finish_sse(&mut self, out: &mut Frames) {
        if self.done {
            return;
        }
        let mut event_start = self.resume_event(out);
        if !self.partial.is_empty() {
            self.sse_partial_line(out, &mut event_start);
        }
        // The body ended without the blank line that dispatches the last event; its data
        // arrived in full, so it is a frame all the same.
        self.dispatch(out, &mut event_start);
        self.park_event(out, event_start);
    }

    /// Moves the data of an event left unfinished by the previous read back into `out`,
    /// where the event continues; returns where its data starts.
    fn resume_event(&mut self, out: &mut Frames) -> usize {
        let event_start = out.buffer.len();
        out.buffer.extend_from_slice(&self.event);
        self.event.clear();
        event_start
    }

    /// Takes the data of the unfinished event back out of `out` until the next read.
    fn park_event(&mut self, out: &mut Frames, event_start: usize) {
        if !self.done {
            self.event.extend_from_slice(&out.buffer[event_start..]);
        }
        out.buffer.truncate(event_start);
    }

    /// Processes the line assembled in `partial`, keeping its allocation for reuse.
    fn sse_partial_line(&mut self, out: &mut Frames, event_start: &mut usize) {
        let mut line = std::mem::take(&mut self.partial);
        self.sse_line(&line, out, event_start);
        line.clear();
        self.partial = line;
    }

    /// Interprets one SSE line (without its line end), per the WHATWG event stream rules.
    fn sse_line(&mut self, mut line: &[u8], out: &mut Frames, event_start: &mut usize) {
        if std::mem::take(&mut self.at_stream_start) {
            line = line.strip_prefix(BOM).unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(out, event_start);
            return;
        }
        let (field, value) = match memchr(b':', line) {
            // A comment, such as a keep-alive ping.
            Some(0) => return,
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &line[line.len()..]),
        };
        // `event`, `id` and `retry` (and unknown fields) do not change the payload.
        if field == b"data" {
            if self.has_data {
                out.buffer.push(b'\n');
            }
            out.buffer.extend_from_slice(value);
            self.has_data = true;
        }
    }

    /// Ends the current event: its data becomes a frame unless it is empty or `[DONE]`.
    fn dispatch(&mut self, out: &mut Frames, event_start: &mut usize) {
        self.has_data = false;
        let data = &out.buffer[*event_start..];
        if data == DONE {
            self.done = true;
            self.partial.clear();
            out.buffer.truncate(*event_start);
        } else if !data.is_empty() {
            out.close_frame();
            *event_start = out.buffer.len();
        }
    }

    fn push_ndjson(&mut self, mut bytes: &[u8], out: &mut Frames) {
        while let Some(at) = memchr(b'\n', bytes) {
            if self.partial.is_empty() {
                ndjson_line(&bytes[..at], out);
            } else {
                self.partial.extend_from_slice(&bytes[..at]);
                ndjson_line(&self.partial, out);
                self.partial.clear();
            }
            bytes = &bytes[at + 1..];
        }
        self.partial.extend_from_slice(bytes);
    }
}

/// Emits one NDJSON line (without its `\n`) as a frame unless it is empty.
fn ndjson_line(line: &[u8], out: &mut Frames) {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if !line.is_empty() {
        out.buffer.extend_from_slice(line);
        out.close_frame();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Frames a body delivered as the given reads, clearing the batch after every call as
    /// a client that feeds the decoder per read does.
    fn frame_reads(kind: FramingKind, reads: &[&[u8]]) -> (Vec<Vec<u8>>, bool) {
        let mut framer = Framer::new(kind);
        let mut out = Frames::default();
        let mut frames = Vec::new();
        for read in reads {
            let n = framer.push(read, &mut out);
            assert_eq!(n, out.len(), "push returns the frames it appended");
            frames.extend(out.iter().map(<[u8]>::to_vec));
            out.clear();
        }
        let n = framer.finish(&mut out);
        assert_eq!(n, out.len(), "finish returns the frames it appended");
        frames.extend(out.iter().map(<[u8]>::to_vec));
        (frames, framer.done())
    }

    fn frame_all(kind: FramingKind, body: &[u8]) -> (Vec<Vec<u8>>, bool) {
        frame_reads(kind, &[body])
    }

    fn frame_bytewise(kind: FramingKind, body: &[u8]) -> (Vec<Vec<u8>>, bool) {
        let reads: Vec<&[u8]> = body.chunks(1).collect();
        frame_reads(kind, &reads)
    }

    fn strs(frames: &[&str]) -> Vec<Vec<u8>> {
        frames.iter().map(|f| f.as_bytes().to_vec()).collect()
    }

    #[test]
    fn sse_data_with_and_without_space() {
        let body = b"data: {\"a\":1}\n\ndata:{\"b\":2}\n\ndata:  two spaces\n\n";
        let (frames, done) = frame_all(FramingKind::Sse, body);
        assert_eq!(frames, strs(&["{\"a\":1}", "{\"b\":2}", " two spaces"]));
        assert!(!done);
    }

    #[test]
    fn sse_line_ends_lf_crlf_cr() {
        let body = b"data: a\n\ndata: b\r\n\r\ndata: c\r\rdata: d\r\n\n";
        let (frames, _) = frame_all(FramingKind::Sse, body);
        assert_eq!(frames, strs(&["a", "b", "c", "d"]));
    }

    #[test]
    fn sse_cr_at_end_of_read_then_lf_is_one_line_end() {
        // "\r" | "\n" is one line end; were it two, the empty line would dispatch "x"
        // early and "y" would become a separate frame.
        let reads: [&[u8]; 3] = [b"data: x\r", b"\ndata: y\r\n", b"\r\n"];
        let (frames, _) = frame_reads(FramingKind::Sse, &reads);
        assert_eq!(frames, strs(&["x\ny"]));
        // And "\r" | "\r" is two line ends: a blank line dispatches.
        let reads: [&[u8]; 3] = [b"data: x\r", b"\rdata: y\r", b"\r"];
        let (frames, _) = frame_reads(FramingKind::Sse, &reads);
        assert_eq!(frames, strs(&["x", "y"]));
    }

    #[test]
    fn sse_multiple_data_lines_join_with_newline() {
        let body = b"data: first\ndata:second\ndata\ndata: \n\n";
        let (frames, _) = frame_all(FramingKind::Sse, body);
        assert_eq!(frames, strs(&["first\nsecond\n\n"]));
    }

    #[test]
    fn sse_comments_and_other_fields_are_ignored() {
        let body = b": ping\n\nevent: message\nid: 7\nretry: 100\ndata: x\n: mid-event ping\n\n\
                     event: done\n\nfoo: bar\ndata: y\n\n";
        let (frames, _) = frame_all(FramingKind::Sse, body);
        assert_eq!(frames, strs(&["x", "y"]));
    }

    #[test]
    fn sse_events_without_data_are_not_frames() {
        let body = b"event: ping\n\n\n\nid: 3\n\ndata:\n\ndata: real\n\n";
        let (frames, _) = frame_all(FramingKind::Sse, body);
        assert_eq!(frames, strs(&["real"]));
    }

    #[test]
    fn sse_done_ends_the_stream() {
        let body = b"data: a\n\ndata: [DONE]\n\ndata: after\n\n";
        let (frames, done) = frame_all(FramingKind::Sse, body);
        assert_eq!(frames, strs(&["a"]));
        assert!(done);

        let mut framer = Framer::new(FramingKind::Sse);
        let mut out = Frames::default();
        assert_eq!(framer.push(b"data: [DONE]\n\n", &mut out), 0);
        assert!(framer.done());
        assert_eq!(framer.push(b"data: late\n\n", &mut out), 0);
        assert_eq!(framer.finish(&mut out), 0);
        assert!(out.is_empty() && out.buffer.is_empty());
    }

    #[test]
    fn sse_done_only_as_whole_payload() {
        let body = b"data: [DONE] \n\ndata: [DONE]\ndata: more\n\n";
        let (frames, done) = frame_all(FramingKind::Sse, body);
        assert_eq!(frames, strs(&["[DONE] ", "[DONE]\nmore"]));
        assert!(!done);
    }

    #[test]
    fn sse_missing_done_and_missing_final_blank_line() {
        let (frames, done) = frame_all(FramingKind::Sse, b"data: a\n\ndata: b\n");
        assert_eq!(frames, strs(&["a", "b"]));
        assert!(!done);
        // Not even a line end after the last data line.
        let (frames, _) = frame_all(FramingKind::Sse, b"data: a\n\ndata: b");
        assert_eq!(frames, strs(&["a", "b"]));
        // [DONE] without its blank line still ends the stream.
        let (frames, done) = frame_all(FramingKind::Sse, b"data: a\n\ndata: [DONE]");
        assert_eq!(frames, strs(&["a"]));
        assert!(done);
    }

    #[test]
    fn sse_data_line_split_across_reads() {
        let reads: [&[u8]; 5] = [b"da", b"ta: {\"text\":", b"\"hel", b"lo\"}\n", b"\n"];
        let mut framer = Framer::new(FramingKind::Sse);
        let mut out = Frames::default();
        let counts: Vec<usize> = reads.iter().map(|r| framer.push(r, &mut out)).collect();
        // Only the read carrying the blank line completes the frame.
        assert_eq!(counts, [0, 0, 0, 0, 1]);
        assert_eq!(out.iter().collect::<Vec<_>>(), [b"{\"text\":\"hello\"}"]);
    }

    #[test]
    fn sse_frames_accumulate_when_batch_is_not_cleared() {
        let mut framer = Framer::new(FramingKind::Sse);
        let mut out = Frames::default();
        assert_eq!(framer.push(b"data: one\n\ndata: tw", &mut out), 1);
        assert_eq!(framer.push(b"o\n\ndata: three\n", &mut out), 1);
        assert_eq!(framer.finish(&mut out), 1);
        assert_eq!(out.buffer, b"onetwothree");
        assert_eq!(out.ends, [3, 6, 11]);
    }

    #[test]
    fn sse_utf8_split_across_reads_is_intact() {
        let text = "data: héllo → 世界 🎉\n\n".as_bytes();
        let (frames, _) = frame_bytewise(FramingKind::Sse, text);
        assert_eq!(frames, strs(&["héllo → 世界 🎉"]));
    }

    #[test]
    fn sse_long_line_across_many_reads() {
        let payload: Vec<u8> = (0..4 << 20).map(|i| b'a' + (i % 26) as u8).collect();
        let mut body = b"data: ".to_vec();
        body.extend_from_slice(&payload);
        body.extend_from_slice(b"\n\ndata: next\n\n");
        let reads: Vec<&[u8]> = body.chunks(16 * 1024).collect();
        let (frames, _) = frame_reads(FramingKind::Sse, &reads);
        assert_eq!(frames.len(), 2);
        assert!(
            frames[0] == payload,
            "the 4 MiB payload must come out intact"
        );
        assert_eq!(frames[1], b"next");
    }

    #[test]
    fn sse_leading_byte_order_mark_is_stripped() {
        let (frames, _) = frame_bytewise(FramingKind::Sse, b"\xEF\xBB\xBFdata: a\n\n");
        assert_eq!(frames, strs(&["a"]));
        // Only at the very start of the stream.
        let (frames, _) = frame_all(FramingKind::Sse, b"data: a\n\n\xEF\xBB\xBFdata: b\n\n");
        assert_eq!(frames, strs(&["a"]));
    }

    #[test]
    fn ndjson_lines() {
        let body = b"{\"a\":1}\n\n{\"b\":2}\r\n\r\n{\"c\":3}";
        let (frames, done) = frame_all(FramingKind::Ndjson, body);
        assert_eq!(frames, strs(&["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]));
        assert!(!done);
        let (bytewise, _) = frame_bytewise(FramingKind::Ndjson, body);
        assert_eq!(bytewise, frames);
    }

    #[test]
    fn ndjson_counts_per_read() {
        let mut framer = Framer::new(FramingKind::Ndjson);
        let mut out = Frames::default();
        assert_eq!(framer.push(b"{\"a\"", &mut out), 0);
        assert_eq!(framer.push(b":1}\r", &mut out), 0);
        assert_eq!(framer.push(b"\n{}\n{\"x\"", &mut out), 2);
        assert_eq!(framer.finish(&mut out), 1);
        assert_eq!(
            out.iter().collect::<Vec<_>>(),
            [&b"{\"a\":1}"[..], b"{}", b"{\"x\""]
        );
    }

    #[test]
    fn raw_is_one_frame_at_finish() {
        let mut framer = Framer::new(FramingKind::Raw);
        let mut out = Frames::default();
        assert_eq!(framer.push(b"{\"choices\":\n", &mut out), 0);
        assert_eq!(framer.push(b"[]}\n\n", &mut out), 0);
        assert!(out.is_empty());
        assert_eq!(framer.finish(&mut out), 1);
        assert_eq!(out.iter().collect::<Vec<_>>(), [b"{\"choices\":\n[]}\n\n"]);

        // Appends after frames already in the batch.
        let mut framer = Framer::new(FramingKind::Raw);
        let mut out = Frames {
            buffer: b"old".to_vec(),
            ends: vec![3],
        };
        framer.push(b"body", &mut out);
        assert_eq!(framer.finish(&mut out), 1);
        assert_eq!(out.iter().collect::<Vec<_>>(), [&b"old"[..], b"body"]);

        let (frames, _) = frame_all(FramingKind::Raw, b"");
        assert_eq!(frames, [Vec::<u8>::new()]);
    }

    /// One SSE line in a generated stream.
    #[derive(Debug, Clone)]
    enum SseLine {
        /// A data line; `spaced` writes `data: ` rather than `data:`.
        Data {
            payload: String,
            spaced: bool,
        },
        Comment(String),
        /// `event:`, `id:` or `retry:` with a value.
        Other(&'static str, String),
    }

    #[derive(Debug, Clone, Copy)]
    enum Ending {
        Lf,
        CrLf,
        Cr,
    }

    impl Ending {
        fn bytes(self) -> &'static [u8] {
            match self {
                Ending::Lf => b"\n",
                Ending::CrLf => b"\r\n",
                Ending::Cr => b"\r",
            }
        }
    }

    fn ending() -> impl Strategy<Value = Ending> {
        prop_oneof![Just(Ending::Lf), Just(Ending::CrLf), Just(Ending::Cr)]
    }

    /// Payloads: any characters but line ends, multi-byte ones included, and now and then
    /// the end marker itself.
    fn payload() -> impl Strategy<Value = String> {
        prop_oneof![
            6 => "[^\r\n]{0,24}",
            1 => Just("[DONE]".to_string()),
        ]
    }

    fn sse_line() -> impl Strategy<Value = SseLine> {
        prop_oneof![
            6 => (payload(), any::<bool>()).prop_map(|(payload, spaced)| SseLine::Data {
                // Without the space, a payload starting with one would lose it.
                spaced: spaced || payload.starts_with(' '),
                payload,
            }),
            1 => "[^\r\n]{0,12}".prop_map(SseLine::Comment),
            1 => (prop_oneof![Just("event"), Just("id"), Just("retry")], "[^\r\n]{0,12}")
                .prop_map(|(field, value)| SseLine::Other(field, value)),
        ]
    }

    /// A stream: events of (line, ending) with the ending of their blank line, and whether
    /// the last event's blank line is left off.
    type SseStream = (Vec<(Vec<(SseLine, Ending)>, Ending)>, bool);

    fn sse_stream() -> impl Strategy<Value = SseStream> {
        (
            prop::collection::vec(
                (
                    prop::collection::vec((sse_line(), ending()), 0..4),
                    ending(),
                ),
                0..8,
            ),
            any::<bool>(),
        )
    }

    /// Serializes a stream and computes the frames the spec says it carries, independently
    /// of the framer.
    fn render_sse((events, truncate_last): &SseStream) -> (Vec<u8>, Vec<Vec<u8>>, bool) {
        let mut body = Vec::new();
        let mut expected = Vec::new();
        let mut done = false;
        let mut previous = None;
        let mut push_line = |body: &mut Vec<u8>, line: &[u8], ending: Ending| {
            // An empty line right after a lone "\r" would merge with it into one "\r\n";
            // a blank line after "\r" must itself carry a "\r".
            let ending = match (previous, line.is_empty(), ending) {
                (Some(Ending::Cr), true, Ending::Lf) => Ending::CrLf,
                _ => ending,
            };
            body.extend_from_slice(line);
            body.extend_from_slice(ending.bytes());
            previous = Some(ending);
        };
        for (i, (lines, blank)) in events.iter().enumerate() {
            let mut data: Option<Vec<u8>> = None;
            for (line, ending) in lines {
                let text = match line {
                    SseLine::Data { payload, spaced } => {
                        match &mut data {
                            Some(joined) => {
                                joined.push(b'\n');
                                joined.extend_from_slice(payload.as_bytes());
                            }
                            None => data = Some(payload.as_bytes().to_vec()),
                        }
                        let sep = if *spaced { "data: " } else { "data:" };
                        format!("{sep}{payload}")
                    }
                    SseLine::Comment(text) => format!(":{text}"),
                    SseLine::Other(field, value) => format!("{field}: {value}"),
                };
                push_line(&mut body, text.as_bytes(), *ending);
            }
            if !(*truncate_last && i + 1 == events.len()) {
                push_line(&mut body, b"", *blank);
            }
            if done {
                continue;
            }
            match data {
                Some(d) if d == DONE => done = true,
                Some(d) if !d.is_empty() => expected.push(d),
                _ => {}
            }
        }
        (body, expected, done)
    }

    /// Splits `body` at the given cut points (taken modulo its length).
    fn split<'a>(body: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
        cuts.sort_unstable();
        let mut reads = Vec::new();
        let mut from = 0;
        for cut in cuts.into_iter().chain([body.len()]) {
            reads.push(&body[from..cut]);
            from = cut;
        }
        reads
    }

    /// `short_run` cases in a plain `cargo test`; `PROPTEST_CASES=N` sets the count for a
    /// long run (e.g. `PROPTEST_CASES=200000 cargo test -p bench --lib fuzz_`).
    fn cases(short_run: u32) -> ProptestConfig {
        let mut config = ProptestConfig::default();
        if std::env::var_os("PROPTEST_CASES").is_none() {
            config.cases = short_run;
        }
        config
    }

    proptest! {
        #![proptest_config(cases(512))]

        #[test]
        fn sse_any_split_gives_the_same_frames(
            stream in sse_stream(),
            cuts in prop::collection::vec(any::<usize>(), 0..12),
        ) {
            let (body, expected, expected_done) = render_sse(&stream);
            let whole = frame_all(FramingKind::Sse, &body);
            prop_assert_eq!(&whole.0, &expected);
            prop_assert_eq!(whole.1, expected_done);
            prop_assert_eq!(&frame_reads(FramingKind::Sse, &split(&body, &cuts)), &whole);
            prop_assert_eq!(&frame_bytewise(FramingKind::Sse, &body), &whole);
        }

        #[test]
        fn ndjson_any_split_gives_the_same_frames(
            lines in prop::collection::vec(("[^\r\n]{0,24}", any::<bool>()), 0..10),
            trailing_newline in any::<bool>(),
            cuts in prop::collection::vec(any::<usize>(), 0..12),
        ) {
            let mut body = Vec::new();
            for (i, (line, crlf)) in lines.iter().enumerate() {
                body.extend_from_slice(line.as_bytes());
                if trailing_newline || i + 1 < lines.len() {
                    body.extend_from_slice(if *crlf { b"\r\n" } else { b"\n" });
                }
            }
            let expected: Vec<Vec<u8>> = lines
                .iter()
                .filter(|(line, _)| !line.is_empty())
                .map(|(line, _)| line.as_bytes().to_vec())
                .collect();
            let whole = frame_all(FramingKind::Ndjson, &body);
            prop_assert_eq!(&whole.0, &expected);
            prop_assert_eq!(&frame_reads(FramingKind::Ndjson, &split(&body, &cuts)), &whole);
            prop_assert_eq!(&frame_bytewise(FramingKind::Ndjson, &body), &whole);
        }
    }

    /// Bodies of arbitrary bytes, with the bytes that drive the framers (line ends, field
    /// names, the end marker, a byte order mark) much more likely than chance.
    fn hostile_body() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            4 => prop::collection::vec(any::<u8>(), 0..8),
            2 => Just(b"\n".to_vec()),
            2 => Just(b"\r".to_vec()),
            1 => Just(b"\r\n".to_vec()),
            2 => Just(b"data:".to_vec()),
            1 => Just(b"data: ".to_vec()),
            1 => Just(b":".to_vec()),
            1 => Just(b"[DONE]".to_vec()),
            1 => Just(b"event: x".to_vec()),
            1 => Just(BOM.to_vec()),
        ];
        prop::collection::vec(piece, 0..48).prop_map(|pieces| pieces.concat())
    }

    fn framing_kind() -> impl Strategy<Value = FramingKind> {
        prop_oneof![
            Just(FramingKind::Sse),
            Just(FramingKind::Ndjson),
            Just(FramingKind::Raw),
        ]
    }

    /// What any framer must guarantee for any body: frames end in order inside the
    /// buffer, only Raw emits empty frames, NDJSON frames hold no line end, and an SSE
    /// stream emits nothing after `[DONE]`.
    fn check_frames(kind: FramingKind, body: &[u8], frames: &[Vec<u8>], done: bool) {
        match kind {
            FramingKind::Raw => assert_eq!(frames, [body.to_vec()]),
            FramingKind::Ndjson => {
                for frame in frames {
                    assert!(!frame.is_empty());
                    assert!(!frame.contains(&b'\n'));
                }
            }
            FramingKind::Sse => {
                for frame in frames {
                    assert!(!frame.is_empty());
                    assert_ne!(frame.as_slice(), DONE);
                }
            }
        }
        if kind != FramingKind::Sse {
            assert!(!done);
        }
        let payload: usize = frames.iter().map(Vec::len).sum();
        assert!(
            payload <= body.len(),
            "frames never hold more than the body"
        );
    }

    proptest! {
        #![proptest_config(cases(512))]

        #[test]
        fn fuzz_any_bytes_split_anywhere_frame_as_one_read(
            kind in framing_kind(),
            body in hostile_body(),
            cuts in prop::collection::vec(any::<usize>(), 0..16),
        ) {
            let whole = frame_all(kind, &body);
            check_frames(kind, &body, &whole.0, whole.1);
            prop_assert_eq!(&frame_reads(kind, &split(&body, &cuts)), &whole);
            prop_assert_eq!(&frame_bytewise(kind, &body), &whole);
        }

        #[test]
        fn fuzz_frames_accumulate_in_one_batch_as_in_many(
            kind in framing_kind(),
            body in hostile_body(),
            cuts in prop::collection::vec(any::<usize>(), 0..16),
        ) {
            // A caller that keeps one batch for the whole body (no clearing) gets the same
            // frames, laid end to end with ends that only grow.
            let mut framer = Framer::new(kind);
            let mut out = Frames::default();
            let mut counted = 0;
            for read in split(&body, &cuts) {
                counted += framer.push(read, &mut out);
            }
            counted += framer.finish(&mut out);
            prop_assert_eq!(counted, out.len());
            prop_assert!(out.ends.windows(2).all(|w| w[0] <= w[1]));
            prop_assert_eq!(out.ends.last().map_or(0, |&e| e as usize), out.buffer.len());
            let frames: Vec<Vec<u8>> = out.iter().map(<[u8]>::to_vec).collect();
            prop_assert_eq!(frames, frame_all(kind, &body).0);
        }
    }
}
