//! Turning a recorded response and the backend plugin's events into a [`RequestRecord`],
//! with vLLM's timing rules (`endpoint_request_func.py`):
//!
//! - every frame that carries output (a `chunk` event, even with empty text) is a timing
//!   point; the first gives TTFT, the following ones give ITL gaps;
//! - latency runs from the request start to the last such frame;
//! - `usage` sets the output token count and replaces the prompt length;
//! - a response without any output frame fails with vLLM's message.
//!
//! A failed record's error is `kind: message` ([`FailureKind`]). When several things went
//! wrong, the first error event of the backend wins (the server said why, or the first
//! malformed frame is where the response went bad), then the transport error, then the
//! lack of output. A stream that ends cleanly without `data: [DONE]` is not a failure:
//! vLLM's request functions accept it, and the record is measured like any other.
//!
//! Times come from the reads recorded by the client, never from this code's clock.

use std::time::{Duration, Instant};

use crate::record::RequestRecord;
use crate::runtime::{Event, EventKind, TextSpan};

use super::RawResponse;
use super::failure::FailureKind;

/// What the run knows about a request besides its response.
#[derive(Debug, Clone)]
pub struct RequestMeta {
    pub index: usize,
    pub request_id: String,
    pub prompt_len: u32,
    pub expected_output_len: u32,
    /// Scheduled send time, seconds since the benchmark start.
    pub intended_start_time: f64,
    /// When the scheduler released the request.
    pub dispatch: Instant,
    /// How long it then waited for a `--max-concurrency` slot.
    pub concurrency_wait: Duration,
}

/// vLLM's message for a 200 response that never carried output (kind `no-output`).
pub const NO_CHUNK_ERROR: &str =
    "Never received a valid chunk to calculate TTFT.This response will be marked as failed!";

/// How the SDK's OpenAI decoder (`sdk/src/openai.rs`) starts the message of the error
/// event for a frame that is not valid JSON. The plugin contract has one `error` event for
/// every in-band failure, so this wording is what tells a malformed frame
/// (`invalid-chunk`) from an error the server reported (`server-error`).
pub const MALFORMED_FRAME_PREFIX: &str = "invalid JSON";

/// The kind of an in-band error event's message.
fn event_error_kind(message: &str) -> FailureKind {
    if message.starts_with(MALFORMED_FRAME_PREFIX) {
        FailureKind::InvalidChunk
    } else {
        FailureKind::ServerError
    }
}

/// Builds the record of one request from its response and the decoder's events
/// (`Err` when the decoder failed: the request fails with that message).
pub fn build_record(
    meta: &RequestMeta,
    raw: &RawResponse,
    events: Result<Vec<Event>, String>,
    t0: Instant,
) -> RequestRecord {
    let secs = |t: Instant| t.saturating_duration_since(t0).as_secs_f64();
    let mut rec = RequestRecord {
        index: meta.index,
        request_id: meta.request_id.clone(),
        prompt_len: meta.prompt_len,
        expected_output_len: meta.expected_output_len,
        start_time: secs(raw.start),
        dispatch_time: secs(meta.dispatch),
        intended_start_time: meta.intended_start_time,
        concurrency_wait: meta.concurrency_wait.as_secs_f64(),
        ..Default::default()
    };
    if let Some(e) = &raw.error
        && raw.frames.ends.is_empty()
    {
        rec.error = Some(e.clone());
        return rec;
    }
    let events = match events {
        Ok(ev) => ev,
        Err(e) => {
            rec.error = Some(FailureKind::Decode.error(e));
            return rec;
        }
    };
    let mut first: Option<Instant> = None;
    let mut last = raw.start;
    let mut in_band_error: Option<String> = None;
    for ev in &events {
        let Some(&at) = raw.frame_times.get(ev.frame as usize) else {
            rec.error = Some(FailureKind::Decode.error(format_args!(
                "event names frame {} of {}",
                ev.frame,
                raw.frame_times.len()
            )));
            return rec;
        };
        match &ev.kind {
            EventKind::Chunk(chunk) => {
                if first.is_none() {
                    first = Some(at);
                    rec.ttft = at.saturating_duration_since(raw.start).as_secs_f64();
                } else {
                    rec.itl
                        .push(at.saturating_duration_since(last).as_secs_f64());
                }
                last = at;
                let texts = [&chunk.content, &chunk.reasoning].map(|span| match span {
                    Some(span) => span_text(&raw.frames.buffer, span).map(Some),
                    None => Ok(None),
                });
                match texts {
                    [Ok(content), Ok(reasoning)] => {
                        rec.generated_text
                            .push_str(content.as_deref().unwrap_or(""));
                        rec.reasoning_text
                            .push_str(reasoning.as_deref().unwrap_or(""));
                    }
                    [Err(e), _] | [_, Err(e)] => {
                        rec.error = Some(FailureKind::Decode.error(e));
                        return rec;
                    }
                }
            }
            EventKind::Usage(u) => {
                if let Some(c) = u.completion_tokens {
                    rec.output_tokens = Some(c);
                }
                if let Some(p) = u.prompt_tokens {
                    rec.prompt_len = p;
                }
            }
            EventKind::Finish(_) => {}
            EventKind::Error(msg) => {
                in_band_error.get_or_insert_with(|| msg.clone());
            }
        }
    }
    if let Some(e) = in_band_error {
        rec.error = Some(event_error_kind(&e).error(e));
    } else if let Some(e) = &raw.error {
        // The transport failed after some frames arrived (a cut stream, a timeout).
        rec.error = Some(e.clone());
    } else if first.is_none() {
        rec.error = Some(FailureKind::NoOutput.error(NO_CHUNK_ERROR));
    } else {
        rec.success = true;
        rec.latency = last.saturating_duration_since(raw.start).as_secs_f64();
    }
    rec
}

/// The text a span points at, decoding JSON escapes when the plugin says there are some.
pub fn span_text(buffer: &[u8], span: &TextSpan) -> Result<String, String> {
    let start = span.start as usize;
    let end = start
        .checked_add(span.len as usize)
        .filter(|&e| e <= buffer.len())
        .ok_or_else(|| {
            format!(
                "text span {}+{} is outside the {}-byte buffer",
                span.start,
                span.len,
                buffer.len()
            )
        })?;
    let bytes = &buffer[start..end];
    if span.escaped {
        let mut quoted = Vec::with_capacity(bytes.len() + 2);
        quoted.push(b'"');
        quoted.extend_from_slice(bytes);
        quoted.push(b'"');
        serde_json::from_slice::<String>(&quoted)
            .map_err(|e| format!("bad JSON string escape in output text: {e}"))
    } else {
        Ok(String::from_utf8_lossy(bytes).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::client::framing::Frames;
    use crate::runtime::{Chunk, Usage};

    fn raw_with(frames: &[&str], offsets_ms: &[u64], start: Instant) -> RawResponse {
        let mut f = Frames::default();
        for fr in frames {
            f.buffer.extend_from_slice(fr.as_bytes());
            f.ends.push(f.buffer.len() as u32);
        }
        RawResponse {
            index: 0,
            status: Some(200),
            headers: Default::default(),
            frames: f,
            frame_times: offsets_ms
                .iter()
                .map(|ms| start + Duration::from_millis(*ms))
                .collect(),
            start,
            error: None,
        }
    }

    fn chunk(frame: u32, start: u32, len: u32, escaped: bool) -> Event {
        Event {
            frame,
            kind: EventKind::Chunk(Chunk {
                content: Some(TextSpan {
                    start,
                    len,
                    escaped,
                }),
                reasoning: None,
            }),
        }
    }

    fn meta(t0: Instant) -> RequestMeta {
        RequestMeta {
            index: 3,
            request_id: "r3".into(),
            prompt_len: 10,
            expected_output_len: 3,
            intended_start_time: 0.5,
            dispatch: t0 + Duration::from_millis(501),
            concurrency_wait: Duration::ZERO,
        }
    }

    #[test]
    fn timing_follows_vllm_rules() {
        let t0 = Instant::now();
        let start = t0 + Duration::from_millis(502);
        // frames: "ab", "c\\n" (escaped newline), "" (empty chunk still a timing point), usage
        let raw = raw_with(&["ab", "c\\n", "", "u"], &[50, 60, 75, 75], start);
        let events = vec![
            chunk(0, 0, 2, false),
            chunk(1, 2, 3, true),
            Event {
                frame: 2,
                kind: EventKind::Chunk(Chunk {
                    content: None,
                    reasoning: None,
                }),
            },
            Event {
                frame: 3,
                kind: EventKind::Usage(Usage {
                    prompt_tokens: Some(12),
                    completion_tokens: Some(3),
                }),
            },
        ];
        let rec = build_record(&meta(t0), &raw, Ok(events), t0);
        assert!(rec.success, "{:?}", rec.error);
        assert_eq!(rec.generated_text, "abc\n");
        assert!((rec.ttft - 0.050).abs() < 1e-9);
        assert_eq!(rec.itl.len(), 2);
        assert!((rec.itl[0] - 0.010).abs() < 1e-9 && (rec.itl[1] - 0.015).abs() < 1e-9);
        // latency ends at the last output frame, not at the usage frame
        assert!((rec.latency - 0.075).abs() < 1e-9);
        assert_eq!(rec.output_tokens, Some(3));
        assert_eq!(rec.prompt_len, 12);
        assert!((rec.start_time - 0.502).abs() < 1e-9);
        assert!((rec.dispatch_time - 0.501).abs() < 1e-9);
        assert_eq!(rec.intended_start_time, 0.5);
    }

    #[test]
    fn no_output_frame_fails_like_vllm() {
        let t0 = Instant::now();
        let raw = raw_with(&["u"], &[5], t0);
        let ev = vec![Event {
            frame: 0,
            kind: EventKind::Usage(Usage {
                prompt_tokens: None,
                completion_tokens: Some(0),
            }),
        }];
        let rec = build_record(&meta(t0), &raw, Ok(ev), t0);
        assert!(!rec.success);
        assert_eq!(rec.error, Some(format!("no-output: {NO_CHUNK_ERROR}")));
    }

    #[test]
    fn errors_fail_the_request_with_their_kind_and_cause() {
        let t0 = Instant::now();
        let raw = raw_with(&["x", "y"], &[5, 6], t0);
        let error_at = |frame: u32, message: &str| Event {
            frame,
            kind: EventKind::Error(message.into()),
        };
        let inband = vec![chunk(0, 0, 1, false), error_at(1, "overloaded")];
        let rec = build_record(&meta(t0), &raw, Ok(inband), t0);
        assert_eq!(rec.error.as_deref(), Some("server-error: overloaded"));
        // The SDK's wording for a frame that is not JSON makes it a malformed chunk; the
        // first error event decides.
        let malformed = vec![
            chunk(0, 0, 1, false),
            error_at(1, "invalid JSON in a response frame: unterminated string"),
            error_at(1, "later"),
        ];
        let rec = build_record(&meta(t0), &raw, Ok(malformed), t0);
        assert_eq!(
            rec.error.as_deref(),
            Some("invalid-chunk: invalid JSON in a response frame: unterminated string")
        );
        let rec = build_record(&meta(t0), &raw, Err("trap in feed".into()), t0);
        assert_eq!(rec.error.as_deref(), Some("decode: trap in feed"));
        let rec = build_record(&meta(t0), &raw, Ok(vec![chunk(0, 0, 9, false)]), t0);
        assert!(
            rec.error
                .unwrap()
                .starts_with("decode: text span 0+9 is outside")
        );
        let rec = build_record(&meta(t0), &raw, Ok(vec![chunk(4, 0, 1, false)]), t0);
        assert_eq!(
            rec.error.as_deref(),
            Some("decode: event names frame 4 of 2")
        );

        // A transport error after some frames keeps the text that arrived, and fails.
        let mut cut = raw_with(&["x"], &[5], t0);
        cut.error = Some("stream-cut: connection reset".into());
        let rec = build_record(&meta(t0), &cut, Ok(vec![chunk(0, 0, 1, false)]), t0);
        assert!(!rec.success);
        assert_eq!(rec.generated_text, "x");
        assert_eq!(rec.error.as_deref(), Some("stream-cut: connection reset"));
        // ... unless the server had already said what went wrong.
        let said = vec![chunk(0, 0, 1, false), error_at(0, "engine died")];
        let rec = build_record(&meta(t0), &cut, Ok(said), t0);
        assert_eq!(rec.error.as_deref(), Some("server-error: engine died"));
        // Without any frame, the transport error stands alone and nothing is decoded.
        let mut refused = raw_with(&[], &[], t0);
        refused.error = Some("connect: refused".into());
        let rec = build_record(&meta(t0), &refused, Err("not called".into()), t0);
        assert_eq!(rec.error.as_deref(), Some("connect: refused"));
    }

    #[test]
    fn escaped_spans_decode_unicode() {
        let buf = br#"caf\u00e9 \ud83d\ude00 \"q\""#;
        let span = TextSpan {
            start: 0,
            len: buf.len() as u32,
            escaped: true,
        };
        assert_eq!(span_text(buf, &span).unwrap(), "café 😀 \"q\"");
    }
}
