//! Turning a recorded response and the backend plugin's events into a [`RequestRecord`],
//! with vLLM's timing rules (`endpoint_request_func.py`):
//!
//! - every frame that carries output (a `chunk` event, even with empty text) is a timing
//!   point; the first gives TTFT, the following ones give ITL gaps;
//! - latency runs from the request start to the last such frame;
//! - beyond vLLM, the first chunk with non-empty content text gives the time to the first
//!   content token (`ttfc`), which differs from TTFT when reasoning (or an empty
//!   role-only delta) came first; the chunks' token counts are kept when the decoder knew
//!   them;
//! - `usage` sets the output token count and the server's prompt count, kept beside the
//!   dataset's `prompt_len` (the metrics choose between them, see
//!   `metrics::InputTokenSource`);
//! - `server-timing` (vLLM's per-request `metrics`) is kept in seconds, the last one
//!   winning;
//! - a response without any output frame fails with vLLM's message.
//!
//! A failed record's outcome is a [`Failure`] of a [`FailureKind`]. When several things went
//! wrong, the first error event of the backend wins (the server said why, or the first
//! malformed frame is where the response went bad), then the transport error, then the
//! lack of output. A stream that ends cleanly without `data: [DONE]` is not a failure:
//! vLLM's request functions accept it, and the record is measured like any other.
//!
//! Times come from the reads recorded by the client, never from this code's clock.

use std::time::{Duration, Instant};

use crate::record::{FailureKind, OutputValidity, RequestRecord, ServerTiming};
use crate::runtime::{Chunks, Decoded, ErrorEvent, ErrorKind, EventKind};

use super::RawResponse;

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
    /// The conversation the request is a turn of, if any.
    pub session: Option<crate::runtime::Session>,
    /// Which of the run's endpoints sent it (its index in `--base-url`'s order).
    pub endpoint: usize,
    /// The request's output constraint, compiled (structured output).
    pub check: Option<crate::structured::OutputCheck>,
}

/// vLLM's message for a 200 response that never carried output (kind `no-output`).
pub const NO_CHUNK_ERROR: &str =
    "Never received a valid chunk to calculate TTFT.This response will be marked as failed!";

/// The failure kind of an in-band error event.
fn event_failure_kind(kind: ErrorKind) -> FailureKind {
    match kind {
        ErrorKind::Server => FailureKind::ServerError,
        ErrorKind::MalformedFrame => FailureKind::InvalidChunk,
    }
}

/// Builds the record of one request from its response and what the decoder read from it
/// (`Err` when the decoder failed: the request fails with that message), and checks a
/// completed response against the request's output constraint.
pub fn build_record(
    meta: &RequestMeta,
    raw: &RawResponse,
    decoded: Result<Decoded, String>,
    t0: Instant,
) -> RequestRecord {
    let mut rec = measure(meta, raw, decoded, t0);
    if let (Ok(()), Some(check)) = (&rec.outcome, &meta.check) {
        let mut validity = check.check(&rec.generated_text);
        // The usual cause with small models: the answer ran into `max_tokens` (a string
        // that never closes), which the server's count shows.
        if let OutputValidity::Invalid { reason } = &mut validity
            && rec.server_output_tokens == Some(rec.expected_output_len)
        {
            reason.push_str(&format!(
                " (the response used all {} of its max tokens: likely cut short)",
                rec.expected_output_len
            ));
        }
        rec.output_validity = Some(validity);
    }
    rec
}

/// The record of what arrived: times, texts, counts and the outcome.
fn measure(
    meta: &RequestMeta,
    raw: &RawResponse,
    decoded: Result<Decoded, String>,
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
        retried: raw.retried,
        turn: meta.session.as_ref().map(|s| s.turn),
        endpoint: meta.endpoint as u32,
        ..Default::default()
    };
    if let Some(e) = &raw.error
        && raw.frames.ends.is_empty()
    {
        rec.outcome = Err(e.clone());
        return rec;
    }
    let decoded = match decoded {
        Ok(decoded) => decoded,
        Err(e) => {
            rec.outcome = Err(FailureKind::Decode.failure(e));
            return rec;
        }
    };
    let frame_time = |frame: u32| {
        raw.frame_times.get(frame as usize).copied().ok_or_else(|| {
            FailureKind::Decode.failure(format_args!(
                "output names frame {frame} of {}",
                raw.frame_times.len()
            ))
        })
    };
    let Chunks {
        frames,
        spans,
        escaped,
        tokens,
    } = &decoded.chunks;
    // The host checked that there are none or one per chunk.
    if tokens.len() == frames.len() {
        rec.chunk_tokens.clone_from(tokens);
    }
    let mut first: Option<Instant> = None;
    let mut last = raw.start;
    rec.itl.reserve(frames.len().saturating_sub(1));
    let buffer = &raw.frames.buffer;
    for ((&frame, span), &flags) in frames.iter().zip(spans.chunks_exact(4)).zip(escaped) {
        let at = match frame_time(frame) {
            Ok(at) => at,
            Err(e) => {
                rec.outcome = Err(e);
                return rec;
            }
        };
        if first.is_none() {
            first = Some(at);
            rec.ttft = at.saturating_duration_since(raw.start).as_secs_f64();
        } else {
            rec.itl
                .push(at.saturating_duration_since(last).as_secs_f64());
        }
        last = at;
        if span[1] > 0 && rec.ttfc.is_none() {
            // A non-empty span always decodes to some text (an escape is at least one
            // character).
            rec.ttfc = Some(at.saturating_duration_since(raw.start).as_secs_f64());
        }
        let appended = append_text(
            &mut rec.generated_text,
            buffer,
            span[0],
            span[1],
            flags & 1 != 0,
        )
        .and_then(|()| {
            append_text(
                &mut rec.reasoning_text,
                buffer,
                span[2],
                span[3],
                flags & 2 != 0,
            )
        });
        if let Err(e) = appended {
            rec.outcome = Err(FailureKind::Decode.failure(e));
            return rec;
        }
    }
    let mut in_band_error: Option<&ErrorEvent> = None;
    // Where a pooling result (no chunks) arrived: the end of a successful response.
    let mut pooled_at: Option<Instant> = None;
    // A stream is more than one frame; a whole body is one, and carries choices and usage
    // together.
    let streamed = raw.frames.len() > 1;
    for ev in &decoded.events {
        let at = match frame_time(ev.frame) {
            Ok(at) => at,
            Err(e) => {
                rec.outcome = Err(e);
                return rec;
            }
        };
        match &ev.kind {
            EventKind::Usage(u) => {
                // vLLM's stream loop reads usage only from chunks without choices
                // (`if choices: ... elif usage := ...`). Chunk frames are in order.
                let read_by_vllm = !(streamed && frames.binary_search(&ev.frame).is_ok());
                if let Some(c) = u.completion_tokens {
                    rec.server_output_tokens = Some(c);
                    if read_by_vllm {
                        rec.output_tokens = Some(c);
                    }
                }
                if let Some(c) = u.cached_prompt_tokens {
                    rec.cached_prompt_tokens = Some(c);
                }
                if let Some(p) = u.prompt_tokens {
                    rec.server_prompt_tokens = Some(p);
                    if read_by_vllm {
                        rec.usage_prompt_len = Some(p);
                    }
                }
            }
            EventKind::Finish(_) => {}
            EventKind::Error(e) => {
                in_band_error.get_or_insert(e);
            }
            EventKind::Pooled(pooled) => {
                pooled_at.get_or_insert(at);
                rec.pooled_results.get_or_insert(pooled.count);
            }
            EventKind::ServerTiming(t) => {
                let secs = |ms: Option<f64>| ms.map(|ms| ms / 1000.0);
                rec.server_timing = Some(ServerTiming {
                    queue: secs(t.queue_time_ms),
                    ttft: secs(t.time_to_first_token_ms),
                    generation: secs(t.generation_time_ms),
                    mean_itl: secs(t.mean_itl_ms),
                });
            }
        }
    }
    rec.outcome = if let Some(e) = in_band_error {
        Err(event_failure_kind(e.kind).failure(&e.message))
    } else if let Some(e) = &raw.error {
        // The transport failed after some frames arrived (a cut stream, a timeout).
        Err(e.clone())
    } else if let Some(end) = first.map(|_| last).or(pooled_at) {
        // Generated text ends at its last chunk; a pooling result (embeddings, scores),
        // which has none, at the frame that carried it, as vLLM's pooling request
        // functions measure it.
        rec.latency = end.saturating_duration_since(raw.start).as_secs_f64();
        Ok(())
    } else {
        Err(FailureKind::NoOutput.failure(NO_CHUNK_ERROR))
    };
    rec
}

/// Appends the text of `buffer[start..start + len]` to `out`, decoding JSON escapes when
/// the plugin says there are some. Valid UTF-8 without escapes, the common case, is
/// copied without an intermediate string.
pub fn append_text(
    out: &mut String,
    buffer: &[u8],
    start: u32,
    len: u32,
    escaped: bool,
) -> Result<(), String> {
    if len == 0 {
        return Ok(());
    }
    let bytes = (start as usize)
        .checked_add(len as usize)
        .and_then(|end| buffer.get(start as usize..end))
        .ok_or_else(|| {
            format!(
                "text span {start}+{len} is outside the {}-byte buffer",
                buffer.len()
            )
        })?;
    if escaped {
        let mut quoted = Vec::with_capacity(bytes.len() + 2);
        quoted.push(b'"');
        quoted.extend_from_slice(bytes);
        quoted.push(b'"');
        let text = serde_json::from_slice::<String>(&quoted)
            .map_err(|e| format!("bad JSON string escape in output text: {e}"))?;
        out.push_str(&text);
    } else {
        out.push_str(&String::from_utf8_lossy(bytes));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::framing::Frames;

    /// The record's failure as written in results.
    fn error(rec: &RequestRecord) -> Option<String> {
        rec.failure().map(ToString::to_string)
    }
    use crate::runtime::{Event, Usage};

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
            retried: false,
        }
    }

    /// Chunks with content `(frame, start, len, escaped)` and no reasoning, then `events`.
    fn decoded(chunks: &[(u32, u32, u32, bool)], events: Vec<Event>) -> Decoded {
        Decoded {
            chunks: Chunks {
                frames: chunks.iter().map(|c| c.0).collect(),
                spans: chunks.iter().flat_map(|c| [c.1, c.2, 0, 0]).collect(),
                escaped: chunks.iter().map(|c| u8::from(c.3)).collect(),
                tokens: vec![],
            },
            events,
        }
    }

    fn error_at(frame: u32, message: &str) -> Event {
        error_of(frame, ErrorKind::Server, message)
    }

    fn error_of(frame: u32, kind: ErrorKind, message: &str) -> Event {
        Event {
            frame,
            kind: EventKind::Error(ErrorEvent {
                kind,
                message: message.into(),
            }),
        }
    }

    fn meta(t0: Instant) -> RequestMeta {
        RequestMeta {
            session: None,
            index: 3,
            request_id: "r3".into(),
            prompt_len: 10,
            expected_output_len: 3,
            intended_start_time: 0.5,
            dispatch: t0 + Duration::from_millis(501),
            concurrency_wait: Duration::ZERO,
            endpoint: 1,
            check: None,
        }
    }

    #[test]
    fn timing_follows_vllm_rules() {
        let t0 = Instant::now();
        let start = t0 + Duration::from_millis(502);
        // frames: "ab", "c\\n" (escaped newline), "" (empty chunk still a timing point), usage
        let raw = raw_with(&["ab", "c\\n", "", "u"], &[50, 60, 75, 75], start);
        let events = decoded(
            &[(0, 0, 2, false), (1, 2, 3, true), (2, 0, 0, false)],
            vec![Event {
                frame: 3,
                kind: EventKind::Usage(Usage {
                    prompt_tokens: Some(12),
                    completion_tokens: Some(3),
                    cached_prompt_tokens: None,
                }),
            }],
        );
        let rec = build_record(&meta(t0), &raw, Ok(events), t0);
        assert!(rec.succeeded(), "{:?}", rec.outcome);
        // The record keeps the endpoint that sent it.
        assert_eq!(rec.endpoint, 1);
        assert_eq!(rec.generated_text, "abc\n");
        assert!((rec.ttft - 0.050).abs() < 1e-9);
        assert_eq!(rec.itl.len(), 2);
        assert!((rec.itl[0] - 0.010).abs() < 1e-9 && (rec.itl[1] - 0.015).abs() < 1e-9);
        // latency ends at the last output frame, not at the usage frame
        assert!((rec.latency - 0.075).abs() < 1e-9);
        assert_eq!(rec.output_tokens, Some(3));
        // The server's prompt count is kept beside the dataset's, not over it.
        assert_eq!(rec.prompt_len, 10);
        assert_eq!(rec.server_prompt_tokens, Some(12));
        assert_eq!(rec.usage_prompt_len, Some(12));
        assert!(!rec.retried);
        assert!((rec.start_time - 0.502).abs() < 1e-9);
        assert!((rec.dispatch_time - 0.501).abs() < 1e-9);
        assert_eq!(rec.intended_start_time, 0.5);
    }

    fn usage_at(frame: u32, completion: u32) -> Event {
        Event {
            frame,
            kind: EventKind::Usage(Usage {
                prompt_tokens: Some(7),
                completion_tokens: Some(completion),
                cached_prompt_tokens: None,
            }),
        }
    }

    #[test]
    fn usage_next_to_choices_in_a_stream_is_the_servers_count_but_not_the_output_length() {
        // llama.cpp's server: the last streamed chunk carries text, finish and usage.
        let t0 = Instant::now();
        let raw = raw_with(&["a", "b"], &[5, 9], t0);
        let events = decoded(&[(0, 0, 1, false), (1, 1, 1, false)], vec![usage_at(1, 2)]);
        let rec = build_record(&meta(t0), &raw, Ok(events), t0);
        assert!(rec.succeeded(), "{:?}", rec.outcome);
        assert_eq!(rec.output_tokens, None, "vLLM's `elif usage` skips it");
        assert_eq!(rec.usage_prompt_len, None);
        assert_eq!(rec.server_output_tokens, Some(2));
        assert_eq!(rec.server_prompt_tokens, Some(7));
        // A usage-only frame after the chunks is read as vLLM reads it.
        let raw = raw_with(&["a", "b", "u"], &[5, 9, 9], t0);
        let events = decoded(&[(0, 0, 1, false), (1, 1, 1, false)], vec![usage_at(2, 2)]);
        let rec = build_record(&meta(t0), &raw, Ok(events), t0);
        assert_eq!(
            (rec.output_tokens, rec.server_output_tokens),
            (Some(2), Some(2))
        );
    }

    /// vLLM's per-request `metrics` (milliseconds) become the record's server timing in
    /// seconds, without touching the client's own times.
    #[test]
    fn the_servers_timing_is_kept_in_seconds() {
        let t0 = Instant::now();
        let raw = raw_with(&["a", "b", "u"], &[5, 9, 9], t0);
        let timing = Event {
            frame: 2,
            kind: EventKind::ServerTiming(crate::runtime::ServerTiming {
                queue_time_ms: Some(2.5),
                time_to_first_token_ms: Some(3.0),
                generation_time_ms: Some(4.0),
                mean_itl_ms: None,
            }),
        };
        let events = decoded(
            &[(0, 0, 1, false), (1, 1, 1, false)],
            vec![usage_at(2, 2), timing],
        );
        let rec = build_record(&meta(t0), &raw, Ok(events), t0);
        assert!(rec.succeeded(), "{:?}", rec.outcome);
        assert_eq!(
            rec.server_timing,
            Some(ServerTiming {
                queue: Some(2.5 / 1000.0),
                ttft: Some(3.0 / 1000.0),
                generation: Some(4.0 / 1000.0),
                mean_itl: None,
            })
        );
        assert!((rec.ttft - 0.005).abs() < 1e-9);
        assert!((rec.latency - 0.009).abs() < 1e-9);
        let events = decoded(&[(0, 0, 1, false)], vec![]);
        let rec = build_record(&meta(t0), &raw, Ok(events), t0);
        assert_eq!(rec.server_timing, None);
    }

    #[test]
    fn a_whole_bodys_usage_next_to_choices_is_the_output_length() {
        let t0 = Instant::now();
        let raw = raw_with(&["ab"], &[5], t0);
        let events = decoded(&[(0, 0, 2, false)], vec![usage_at(0, 2)]);
        let rec = build_record(&meta(t0), &raw, Ok(events), t0);
        assert!(rec.succeeded(), "{:?}", rec.outcome);
        assert_eq!(
            (rec.output_tokens, rec.server_output_tokens),
            (Some(2), Some(2))
        );
    }

    #[test]
    fn a_completed_response_is_checked_against_its_constraint_and_a_failed_one_is_not() {
        use crate::runtime::OutputConstraint;
        let t0 = Instant::now();
        let mut meta = meta(t0);
        let choice = OutputConstraint::Choice(vec!["ab".into()]);
        meta.check = Some(
            crate::structured::OutputChecks::default()
                .compile(&choice)
                .unwrap(),
        );
        let raw = raw_with(&["ab"], &[5], t0);
        let rec = build_record(&meta, &raw, Ok(decoded(&[(0, 0, 2, false)], vec![])), t0);
        assert_eq!(rec.output_validity, Some(OutputValidity::Valid));
        let rec = build_record(&meta, &raw, Ok(decoded(&[(0, 0, 1, false)], vec![])), t0);
        assert!(matches!(
            &rec.output_validity,
            Some(OutputValidity::Invalid { reason }) if !reason.contains("cut short")
        ));
        // All of max_tokens (3 here) used: the reason says so.
        let cut = decoded(&[(0, 0, 1, false)], vec![usage_at(0, 3)]);
        let rec = build_record(&meta, &raw, Ok(cut), t0);
        assert!(matches!(
            &rec.output_validity,
            Some(OutputValidity::Invalid { reason }) if reason.contains("all 3 of its max tokens")
        ));
        let failed = decoded(&[(0, 0, 2, false)], vec![error_at(0, "boom")]);
        let rec = build_record(&meta, &raw, Ok(failed), t0);
        assert_eq!((rec.succeeded(), rec.output_validity), (false, None));
        meta.check = None;
        let rec = build_record(&meta, &raw, Ok(decoded(&[(0, 0, 2, false)], vec![])), t0);
        assert_eq!(rec.output_validity, None);
    }

    #[test]
    fn a_resent_request_is_marked_in_its_record() {
        let t0 = Instant::now();
        let mut raw = raw_with(&["a"], &[5], t0);
        raw.retried = true;
        let rec = build_record(
            &meta(t0),
            &raw,
            Ok(decoded(&[(0, 0, 1, false)], vec![])),
            t0,
        );
        assert!(rec.succeeded(), "{:?}", rec.outcome);
        assert!(rec.retried);
        assert_eq!(rec.server_prompt_tokens, None);
    }

    #[test]
    fn no_output_frame_fails_like_vllm() {
        let t0 = Instant::now();
        let raw = raw_with(&["u"], &[5], t0);
        let ev = decoded(
            &[],
            vec![Event {
                frame: 0,
                kind: EventKind::Usage(Usage {
                    prompt_tokens: None,
                    completion_tokens: Some(0),
                    cached_prompt_tokens: None,
                }),
            }],
        );
        let rec = build_record(&meta(t0), &raw, Ok(ev), t0);
        assert!(!rec.succeeded());
        assert_eq!(error(&rec), Some(format!("no-output: {NO_CHUNK_ERROR}")));
    }

    #[test]
    fn a_pooling_result_succeeds_without_chunks_and_ends_at_its_frame() {
        let t0 = Instant::now();
        let raw = raw_with(&["{\"data\":[]}"], &[40], t0);
        let pooled = Event {
            frame: 0,
            kind: EventKind::Pooled(crate::runtime::Pooled {
                kind: crate::runtime::PooledKind::Embedding,
                count: 2,
                dimension: 384,
            }),
        };
        let rec = build_record(&meta(t0), &raw, Ok(decoded(&[], vec![pooled])), t0);
        assert!(rec.succeeded(), "{:?}", rec.outcome);
        assert!((rec.latency - 0.040).abs() < 1e-9, "{}", rec.latency);
        assert_eq!((rec.ttft, rec.itl.len()), (0.0, 0));
        // The results it held count as input sequences in the embedding metrics.
        assert_eq!(rec.pooled_results, Some(2));
        // Without it, the same response fails as vLLM's text functions fail it.
        let rec = build_record(&meta(t0), &raw, Ok(decoded(&[], vec![])), t0);
        assert_eq!(rec.failure().map(|f| f.kind), Some(FailureKind::NoOutput));
    }

    #[test]
    fn errors_fail_the_request_with_their_kind_and_cause() {
        let t0 = Instant::now();
        let raw = raw_with(&["x", "y"], &[5, 6], t0);
        let inband = decoded(&[(0, 0, 1, false)], vec![error_at(1, "overloaded")]);
        let rec = build_record(&meta(t0), &raw, Ok(inband), t0);
        assert_eq!(error(&rec).as_deref(), Some("server-error: overloaded"));
        // The event's kind decides the failure's (a malformed frame is an invalid chunk);
        // the first error event decides.
        let malformed = decoded(
            &[(0, 0, 1, false)],
            vec![
                error_of(
                    1,
                    ErrorKind::MalformedFrame,
                    "invalid JSON in a response frame: unterminated string",
                ),
                error_at(1, "later"),
            ],
        );
        let rec = build_record(&meta(t0), &raw, Ok(malformed), t0);
        assert_eq!(
            error(&rec).as_deref(),
            Some("invalid-chunk: invalid JSON in a response frame: unterminated string")
        );
        let rec = build_record(&meta(t0), &raw, Err("trap in feed".into()), t0);
        assert_eq!(error(&rec).as_deref(), Some("decode: trap in feed"));
        let rec = build_record(
            &meta(t0),
            &raw,
            Ok(decoded(&[(0, 0, 9, false)], vec![])),
            t0,
        );
        assert!(
            error(&rec)
                .unwrap()
                .starts_with("decode: text span 0+9 is outside")
        );
        let rec = build_record(
            &meta(t0),
            &raw,
            Ok(decoded(&[(4, 0, 1, false)], vec![])),
            t0,
        );
        assert_eq!(
            error(&rec).as_deref(),
            Some("decode: output names frame 4 of 2")
        );
        let late = decoded(&[(0, 0, 1, false)], vec![error_at(2, "x")]);
        let rec = build_record(&meta(t0), &raw, Ok(late), t0);
        assert_eq!(
            error(&rec).as_deref(),
            Some("decode: output names frame 2 of 2")
        );

        // A transport error after some frames keeps the text that arrived, and fails.
        let mut cut = raw_with(&["x"], &[5], t0);
        cut.error = Some(FailureKind::StreamCut.failure("connection reset"));
        let rec = build_record(
            &meta(t0),
            &cut,
            Ok(decoded(&[(0, 0, 1, false)], vec![])),
            t0,
        );
        assert!(!rec.succeeded());
        assert_eq!(rec.generated_text, "x");
        assert_eq!(error(&rec).as_deref(), Some("stream-cut: connection reset"));
        // ... unless the server had already said what went wrong.
        let said = decoded(&[(0, 0, 1, false)], vec![error_at(0, "engine died")]);
        let rec = build_record(&meta(t0), &cut, Ok(said), t0);
        assert_eq!(error(&rec).as_deref(), Some("server-error: engine died"));
        // Without any frame, the transport error stands alone and nothing is decoded.
        let mut refused = raw_with(&[], &[], t0);
        refused.error = Some(FailureKind::Connect.failure("refused"));
        let rec = build_record(&meta(t0), &refused, Err("not called".into()), t0);
        assert_eq!(error(&rec).as_deref(), Some("connect: refused"));
    }

    #[test]
    fn escaped_spans_decode_unicode() {
        let buf = br#"caf\u00e9 \ud83d\ude00 \"q\""#;
        let mut out = String::from(">");
        append_text(&mut out, buf, 0, buf.len() as u32, true).unwrap();
        assert_eq!(out, ">café 😀 \"q\"");
        // Invalid UTF-8 is replaced, as Python's lossy decoding would.
        append_text(&mut out, b"a\xffb", 0, 3, false).unwrap();
        assert_eq!(out, ">café 😀 \"q\"a\u{fffd}b");
        let err = append_text(&mut out, br"\x", 0, 2, true).unwrap_err();
        assert!(err.starts_with("bad JSON string escape"), "{err}");
    }

    #[test]
    fn reasoning_spans_and_their_escape_flag_go_to_the_reasoning_text() {
        let t0 = Instant::now();
        let raw = raw_with(&["think\\n", "said"], &[5, 6], t0);
        let out = Decoded {
            chunks: Chunks {
                frames: vec![0, 1],
                // Chunk 0: reasoning only (escaped); chunk 1: content only.
                spans: vec![0, 0, 0, 7, 7, 4, 0, 0],
                escaped: vec![0b10, 0b00],
                tokens: vec![],
            },
            events: vec![],
        };
        let rec = build_record(&meta(t0), &raw, Ok(out), t0);
        assert!(rec.succeeded(), "{:?}", rec.outcome);
        assert_eq!(rec.reasoning_text, "think\n");
        assert_eq!(rec.generated_text, "said");
        assert_eq!(rec.itl.len(), 1);
    }

    #[test]
    fn the_first_content_token_is_timed_apart_from_reasoning_and_empty_deltas() {
        let t0 = Instant::now();
        let start = t0 + Duration::from_millis(100);
        // A role-only chunk (empty content), two reasoning chunks, then the answer in two.
        let raw = raw_with(
            &["", "hm", "mm", "an", "swer"],
            &[10, 20, 30, 45, 50],
            start,
        );
        let out = Decoded {
            chunks: Chunks {
                frames: vec![0, 1, 2, 3, 4],
                spans: vec![0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 2, 2, 4, 2, 0, 0, 6, 4, 0, 0],
                escaped: vec![0; 5],
                tokens: vec![0, 1, 1, 1, 1],
            },
            events: vec![],
        };
        let rec = build_record(&meta(t0), &raw, Ok(out), t0);
        assert!(rec.succeeded(), "{:?}", rec.outcome);
        // TTFT is vLLM's: the first chunk, empty or not.
        assert!((rec.ttft - 0.010).abs() < 1e-9, "{}", rec.ttft);
        // TTFC: the first chunk with content text, 45 ms after the start.
        let ttfc = rec.ttfc.expect("content arrived");
        assert!((ttfc - 0.045).abs() < 1e-9, "{ttfc}");
        assert_eq!(
            (rec.reasoning_text.as_str(), rec.generated_text.as_str()),
            ("hmmm", "answer")
        );
        // The decoder's per-chunk counts are kept, one per chunk.
        assert_eq!(rec.chunk_tokens, vec![0, 1, 1, 1, 1]);
        assert_eq!(rec.itl.len(), 4);

        // Reasoning only: no content token, no TTFC; without counts, none are kept.
        let raw = raw_with(&["hm"], &[7], start);
        let out = Decoded {
            chunks: Chunks {
                frames: vec![0],
                spans: vec![0, 0, 0, 2],
                escaped: vec![0],
                tokens: vec![],
            },
            events: vec![],
        };
        let rec = build_record(&meta(t0), &raw, Ok(out), t0);
        assert!(rec.succeeded(), "{:?}", rec.outcome);
        assert_eq!((rec.ttfc, rec.chunk_tokens.len()), (None, 0));
        // Content in the first chunk: TTFC is TTFT.
        let raw = raw_with(&["ab"], &[7], start);
        let rec = build_record(
            &meta(t0),
            &raw,
            Ok(decoded(&[(0, 0, 2, false)], vec![])),
            t0,
        );
        assert_eq!(rec.ttfc, Some(rec.ttft));
    }
}
