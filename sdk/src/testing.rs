//! The fuzzing harness of the first-party decoders, for any plugin's tests (feature
//! `testing`).
//!
//! A decoder runs on whatever a server sends, and a mistake in it costs no error: a span a
//! few bytes off shows other text, a state kept wrongly between frames miscounts, and the
//! run's numbers are quietly wrong. [`fuzz_decoder`] feeds a decoder the sample responses
//! it is given, then many variations of them (frames cut short, bytes changed, inserted or
//! spliced from other frames, frames dropped, repeated or moved, frame ends out of order,
//! a response fed over several calls), and fails with the smallest case it finds unless,
//! for every one:
//!
//! - the decoder does not panic;
//! - `feed` returns `Ok` when the frame ends are in order inside the buffer (a frame it
//!   cannot read is a malformed-frame event: the response fails at that frame), and an
//!   `InvalidInput` error when they are not;
//! - every event names a frame that exists, chunks come in frame order (the host's timing
//!   rule), and every text span lies inside its chunk's frame;
//! - the spans of the samples as given decode as the host decodes them (UTF-8; JSON
//!   escapes where the span says so);
//! - the events are the same whatever calls the response's frames are fed in (what a
//!   decoder keeps between frames must not depend on where a call ends).
//!
//! `PROPTEST_CASES` sets the number of cases (256 by default), as for proptest's own tests.
//!
//! In the plugin's `Cargo.toml`:
//!
//! ```toml
//! [dev-dependencies]
//! bench-sdk = { version = "...", features = ["testing"] }  # or the path or git source you build against
//! ```
//!
//! and in its tests, with the plugin's own decoder (here one for TGI's
//! `/generate_stream`, one JSON object per frame):
//!
//! ```
//! use bench_sdk::json::Cursor;
//! use bench_sdk::{Chunk, Decoder, Event, EventKind, PluginError};
//!
//! #[derive(Default)]
//! struct TgiDecoder;
//!
//! impl Decoder for TgiDecoder {
//!     fn feed(
//!         &mut self,
//!         buffer: &[u8],
//!         frame_ends: &[u32],
//!         out: &mut Vec<Event>,
//!     ) -> Result<(), PluginError> {
//!         for frame in bench_sdk::backend::frames(buffer, frame_ends)? {
//!             let mut text = None;
//!             let mut cur = Cursor::new(frame.bytes());
//!             let read = cur
//!                 .object(|key, v| {
//!                     if key.is("token") {
//!                         v.object(|key, v| {
//!                             if key.is("text") {
//!                                 text = v.string()?;
//!                             }
//!                             Ok(())
//!                         })?;
//!                     }
//!                     Ok(())
//!                 })
//!                 .and_then(|_| cur.finish());
//!             let kind = match read {
//!                 // `frame.span` turns the cursor's offsets (into the frame) into the
//!                 // buffer's, and checks the text lies inside the frame.
//!                 Ok(()) => EventKind::Chunk(Chunk {
//!                     content: text.map(|s| frame.span(s)),
//!                     ..Chunk::default()
//!                 }),
//!                 Err(e) => EventKind::malformed_frame(format!("invalid JSON: {e}")),
//!             };
//!             out.push(Event { frame: frame.index(), kind });
//!         }
//!         Ok(())
//!     }
//! }
//!
//! let stream: &[&[u8]] = &[
//!     br#"{"token":{"id":9,"text":"Hello"}}"#,
//!     br#"{"token":{"id":7,"text":" w\u00f6rld"},"generated_text":null}"#,
//! ];
//! let events = bench_sdk::testing::fuzz_decoder(&[stream], TgiDecoder::default);
//! // The samples' own events, their texts as the host reads them.
//! assert_eq!(
//!     events[0],
//!     [
//!         r#"0: chunk content="Hello" reasoning=none"#,
//!         r#"1: chunk content=" wörld" reasoning=none"#,
//!     ]
//! );
//! ```

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};

use crate::openai::render;
use crate::{Backend, Decoder, Event, EventKind, PluginError, ResponseHead};

/// Bytes that damage JSON where they land: its punctuation, parts of literals and numbers,
/// a NUL, a line end, UTF-8 (`é`) and a byte that is never UTF-8.
const DAMAGE: &[u8] = b"{}[]\":,\\ 0-.eunlt\x00\n\xc3\xa9\xff";

/// [`Fuzz`] with its defaults: the usual entry point. `responses` are sample responses
/// of the plugin's API, each as the payloads of its frames (for server-sent events, each
/// event's `data`; for a whole body, the body alone); `decoder` makes a decoder for a
/// response. Returns the events of each sample decoded as given, one line per event (as
/// `openai::render` writes them), for the test to compare with what the samples say.
///
/// # Panics
///
/// When a rule of the [module](self) does not hold, with the smallest case found.
pub fn fuzz_decoder<D: Decoder>(
    responses: &[&[&[u8]]],
    decoder: impl Fn() -> D,
) -> Vec<Vec<String>> {
    Fuzz::new(responses).run(decoder)
}

/// [`fuzz_decoder`] with the decoders `backend` makes for a 200 response without headers.
pub fn fuzz_backend<B: Backend>(responses: &[&[&[u8]]], backend: &B) -> Vec<Vec<String>> {
    let head = ResponseHead {
        status: 200,
        headers: Vec::new(),
    };
    fuzz_decoder(responses, || {
        backend
            .decoder(&head)
            .expect("the backend makes a decoder for a 200 response")
    })
}

/// The harness, with its settings.
#[derive(Debug, Clone)]
pub struct Fuzz<'a> {
    responses: &'a [&'a [&'a [u8]]],
    cases: Option<u32>,
    split_calls: bool,
}

impl<'a> Fuzz<'a> {
    /// The harness over `responses` (see [`fuzz_decoder`]).
    pub fn new(responses: &'a [&'a [&'a [u8]]]) -> Self {
        Fuzz {
            responses,
            cases: None,
            split_calls: true,
        }
    }

    /// Runs `cases` cases (instead of `PROPTEST_CASES`, else 256).
    pub fn cases(mut self, cases: u32) -> Self {
        self.cases = Some(cases);
        self
    }

    /// Feeds each response in one call only: for a decoder that reads the frames of a call
    /// as one document (a whole body the host may hand over in pieces), whose events then
    /// depend on where a call ends.
    pub fn one_call_per_response(mut self) -> Self {
        self.split_calls = false;
        self
    }

    /// Runs the harness (see [`fuzz_decoder`]).
    pub fn run<D: Decoder>(&self, decoder: impl Fn() -> D) -> Vec<Vec<String>> {
        assert!(
            !self.responses.is_empty(),
            "the harness needs a sample response"
        );
        // The samples as given, first: a failure here is the plainest case there is.
        let samples = self
            .responses
            .iter()
            .map(|frames| {
                let frames: Vec<Vec<u8>> = frames.iter().map(|f| f.to_vec()).collect();
                check(&decoder, &frames, &[], true, self.split_calls)
                    .unwrap_or_else(|why| panic!("sample response {frames:?}: {why}"))
            })
            .collect();
        let mut config = Config {
            failure_persistence: None,
            ..Config::default()
        };
        if let Some(cases) = self.cases {
            config.cases = cases;
        }
        let edit = (
            0..7u8,
            any::<usize>(),
            any::<usize>(),
            any::<u8>(),
            any::<usize>(),
        );
        let strategy = (
            any::<usize>(),
            prop::collection::vec(edit, 0..5),
            prop::collection::vec(any::<usize>(), 0..4),
            prop::option::weighted(0.1, prop::collection::vec(any::<u32>(), 0..6)),
        );
        let result = TestRunner::new(config).run(&strategy, |(response, edits, cuts, ends)| {
            let frames = damaged(self.responses, response, &edits);
            let fail = |why: String| {
                TestCaseError::fail(format!(
                    "{why}\nframes: {:?}\ncalls cut before frames {cuts:?}",
                    frames
                        .iter()
                        .map(|f| String::from_utf8_lossy(f))
                        .collect::<Vec<_>>()
                ))
            };
            match ends {
                Some(ends) => bad_ends(&decoder, &frames, &ends).map_err(fail),
                None => check(&decoder, &frames, &cuts, edits.is_empty(), self.split_calls)
                    .map(drop)
                    .map_err(fail),
            }
        });
        match result {
            Ok(()) => samples,
            Err(TestError::Fail(why, _)) => panic!("decoder fuzzing failed: {why}"),
            Err(e) => panic!("decoder fuzzing failed: {e}"),
        }
    }
}

/// The frames of `responses[response]` with `edits` applied: `(what, frame, at, byte,
/// other)`, each number taken modulo what it picks from.
fn damaged(
    responses: &[&[&[u8]]],
    response: usize,
    edits: &[(u8, usize, usize, u8, usize)],
) -> Vec<Vec<u8>> {
    let mut frames: Vec<Vec<u8>> = responses[response % responses.len()]
        .iter()
        .map(|f| f.to_vec())
        .collect();
    let every: Vec<&[u8]> = responses.iter().flat_map(|r| r.iter().copied()).collect();
    for &(what, frame, at, byte, other) in edits {
        let other = every
            .get(other % every.len().max(1))
            .copied()
            .unwrap_or(b"");
        if frames.is_empty() || what == 6 {
            // Another frame of any sample, moved here.
            frames.insert(frame % (frames.len() + 1), other.to_vec());
            continue;
        }
        let index = frame % frames.len();
        let f = &mut frames[index];
        let at = at % (f.len() + 1);
        match what {
            0 => f.truncate(at),
            1 => f.insert(at, DAMAGE[usize::from(byte) % DAMAGE.len()]),
            2 if at < f.len() => f[at] = DAMAGE[usize::from(byte) % DAMAGE.len()],
            3 => {
                let from = usize::from(byte) % (other.len() + 1);
                f.splice(at.., other[from..].iter().copied());
            }
            4 => {
                frames.remove(index);
            }
            _ => {
                let copy = f.clone();
                frames.insert(index, copy);
            }
        }
    }
    frames
}

/// `frames` laid end to end, as the host hands them over, and where each ends.
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

/// Decodes `frames` in one call and, with `split`, again over calls cut before the frames
/// `cuts` name; checks both and that they agree. Returns the events of the one call,
/// rendered.
fn check<D: Decoder>(
    decoder: &impl Fn() -> D,
    frames: &[Vec<u8>],
    cuts: &[usize],
    sample: bool,
    split: bool,
) -> Result<Vec<String>, String> {
    let whole = decode(decoder(), frames, &[frames.len()], sample)?;
    if split {
        let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (frames.len() + 1)).collect();
        bounds.push(frames.len());
        bounds.sort_unstable();
        bounds.dedup();
        let parts = decode(decoder(), frames, &bounds, sample)?;
        if parts != whole {
            return Err(format!(
                "fed in calls ending before frames {bounds:?}, the response gives other events \
                 than in one call:\n  one call: {whole:#?}\n  in parts: {parts:#?}"
            ));
        }
    }
    Ok(whole)
}

/// Feeds `frames` in calls ending before each of `bounds` (the last is the frame count),
/// then finishes; checks every event and renders it, frames numbered in the whole
/// response.
fn decode<D: Decoder>(
    mut decoder: D,
    frames: &[Vec<u8>],
    bounds: &[usize],
    sample: bool,
) -> Result<Vec<String>, String> {
    let mut rendered = Vec::new();
    let mut last_chunk_frame = 0;
    let mut from = 0;
    for &to in bounds {
        let (buffer, ends) = lay_out(&frames[from..to]);
        let mut out = Vec::new();
        decoder
            .feed(&buffer, &ends, &mut out)
            .map_err(|e| format!("feed returned {e:?} for frames in order"))?;
        for event in &out {
            check_event(event, &buffer, &ends, sample)?;
            let event = Event {
                frame: event.frame + from as u32,
                kind: event.kind.clone(),
            };
            chunk_order(&event, &mut last_chunk_frame)?;
            rendered.push(render(&buffer, &event));
        }
        from = to;
    }
    let mut out = Vec::new();
    decoder
        .finish(&mut out)
        .map_err(|e| format!("finish returned {e:?}"))?;
    let (buffer, ends) = lay_out(frames);
    for event in &out {
        check_event(event, &buffer, &ends, sample)?;
        chunk_order(event, &mut last_chunk_frame)?;
        rendered.push(render(&buffer, event));
    }
    Ok(rendered)
}

/// The event names a frame of `ends`, its spans lie inside that frame, and, for a sample,
/// their text decodes as the host decodes it.
fn check_event(event: &Event, buffer: &[u8], ends: &[u32], sample: bool) -> Result<(), String> {
    let frame = event.frame as usize;
    let Some(&end) = ends.get(frame) else {
        return Err(format!("{event:?} names frame {frame} of {}", ends.len()));
    };
    let start = if frame == 0 { 0 } else { ends[frame - 1] };
    let EventKind::Chunk(chunk) = &event.kind else {
        return Ok(());
    };
    for span in [chunk.content, chunk.reasoning].into_iter().flatten() {
        let (from, to) = (
            u64::from(span.start()),
            u64::from(span.start()) + u64::from(span.len()),
        );
        if from < u64::from(start) || to > u64::from(end) {
            return Err(format!(
                "chunk {event:?}: its span {from}..{to} is outside its frame {frame} \
                 ({start}..{end} of the buffer)"
            ));
        }
        let raw = &buffer[span.range()];
        let text = if span.escaped() {
            let quoted = [&b"\""[..], raw, b"\""].concat();
            serde_json::from_slice::<String>(&quoted)
                .map(drop)
                .map_err(|e| e.to_string())
        } else {
            std::str::from_utf8(raw)
                .map(drop)
                .map_err(|e| e.to_string())
        };
        if let (true, Err(e)) = (sample, text) {
            return Err(format!(
                "chunk {event:?}: the host cannot read its text {:?}: {e}",
                String::from_utf8_lossy(raw)
            ));
        }
    }
    Ok(())
}

/// Chunks come in frame order: the host takes their frames' times in order.
fn chunk_order(event: &Event, last: &mut u32) -> Result<(), String> {
    if let EventKind::Chunk(_) = event.kind {
        if event.frame < *last {
            return Err(format!(
                "a chunk of frame {} comes after one of frame {last}",
                event.frame
            ));
        }
        *last = event.frame;
    }
    Ok(())
}

/// Feeds `frames` with `ends` in place of their ends (each taken modulo a little past the
/// buffer): `Ok` when they are in order inside the buffer, `InvalidInput` otherwise.
fn bad_ends<D: Decoder>(
    decoder: &impl Fn() -> D,
    frames: &[Vec<u8>],
    ends: &[u32],
) -> Result<(), String> {
    let buffer = frames.concat();
    let ends: Vec<u32> = ends.iter().map(|e| e % (buffer.len() as u32 + 3)).collect();
    let in_order = ends
        .iter()
        .try_fold(0, |start, &end| (start <= end).then_some(end))
        .is_some_and(|last| last as usize <= buffer.len());
    let mut out = Vec::new();
    match (decoder().feed(&buffer, &ends, &mut out), in_order) {
        (Ok(()), true) | (Err(PluginError::InvalidInput(_)), false) => Ok(()),
        (result, _) => Err(format!(
            "frame ends {ends:?} over {} bytes (in order: {in_order}): feed returned {result:?}",
            buffer.len()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{Cursor, Str};
    use crate::{Chunk, Frame, TextSpan};

    /// A decoder of `{"t": "..."}` frames whose spans come from `span`; `finish` reports
    /// the frame count on the last frame. With `skip_first`, it takes the first frame of
    /// each call for the response's first and reads no text from it.
    struct Reader {
        span: fn(Frame<'_>, Str) -> TextSpan,
        skip_first: bool,
        frames: u32,
    }

    impl Decoder for Reader {
        fn feed(
            &mut self,
            buffer: &[u8],
            frame_ends: &[u32],
            out: &mut Vec<Event>,
        ) -> Result<(), PluginError> {
            for frame in crate::backend::frames(buffer, frame_ends)? {
                let mut text = None;
                if !(self.skip_first && frame.index() == 0) {
                    let _ = Cursor::new(frame.bytes()).object(|_, v| {
                        text = v.string()?;
                        Ok(())
                    });
                }
                out.push(Event {
                    frame: frame.index(),
                    kind: EventKind::Chunk(Chunk {
                        content: text.map(|s| (self.span)(frame, s)),
                        ..Chunk::default()
                    }),
                });
            }
            self.frames += frame_ends.len() as u32;
            Ok(())
        }

        fn finish(&mut self, out: &mut Vec<Event>) -> Result<(), PluginError> {
            if let Some(last) = self.frames.checked_sub(1) {
                out.push(Event {
                    frame: last,
                    kind: EventKind::Finish(self.frames.to_string()),
                });
            }
            Ok(())
        }
    }

    const STREAM: &[&[u8]] = &[br#"{"t":"Hello, world"}"#, br#"{"t":"!"}"#];

    fn reader(span: fn(Frame<'_>, Str) -> TextSpan, skip_first: bool) -> impl Fn() -> Reader {
        move || Reader {
            span,
            skip_first,
            frames: 0,
        }
    }

    #[test]
    fn a_sound_decoder_passes_and_its_samples_read_back() {
        let events = fuzz_decoder(&[STREAM], reader(|frame, s| frame.span(s), false));
        assert_eq!(
            events[0],
            [
                r#"0: chunk content="Hello, world" reasoning=none"#,
                r#"1: chunk content="!" reasoning=none"#,
                "1: finish 2",
            ]
        );
    }

    #[test]
    #[should_panic(expected = "its span 6..7 is outside its frame 1 (20..29 of the buffer)")]
    fn a_span_built_from_the_frames_own_offsets_is_caught() {
        // The mistake `Frame::span` prevents: the cursor's offsets used as the buffer's.
        fuzz_decoder(
            &[STREAM],
            reader(
                |_, s| TextSpan::absolute_unchecked(s.start as u32, s.len() as u32, s.escaped),
                false,
            ),
        );
    }

    #[test]
    #[should_panic(expected = "gives other events than in one call")]
    fn state_that_depends_on_where_a_call_ends_is_caught() {
        fuzz_decoder(&[STREAM], reader(|frame, s| frame.span(s), true));
    }
}
