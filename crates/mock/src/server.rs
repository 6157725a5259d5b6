//! The mock server's shared state and the generation path every generation API takes:
//! a request numbered and given its fault, its body parsed, its answer timed and sent.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::answers::{self, AnswerKey, AnswerLog, GradedAnswer};
use crate::conn::Conn;
use crate::faults::{Delivery, Fault, FaultPlan, FaultyBody};
use crate::reply::{Api, Content, Reasoning, Reply};
use crate::request::Generation;
use crate::structured::{self, Constraint, StructuredAnswer, StructuredLog};
use crate::timing::{self, SentMetrics};
use crate::{audio, prefix_cache, request, reset, response, running, server_metrics};

/// Largest request body accepted: room for multimodal prompts with inline images.
pub(crate) const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// State shared by all handlers.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) ttft: Duration,
    /// `--ttft-spread-ms`: each request's TTFT gains this times its uniform draw.
    pub(crate) ttft_spread: Duration,
    pub(crate) latency_seed: u64,
    pub(crate) itl: Duration,
    pub(crate) output_len: u32,
    pub(crate) model: String,
    /// `model` as a JSON string literal, formatted once.
    pub(crate) model_json: String,
    pub(crate) started: u64,
    /// Numbers generation requests (request k gets id k) and picks their faults.
    pub(crate) faults: FaultPlan,
    pub(crate) stall: Duration,
    /// Ends stalls when the server shuts down (its sender is dropped).
    pub(crate) shutdown: watch::Receiver<()>,
    /// The server's real send times.
    pub(crate) timing: Arc<timing::TimingRecorder>,
    /// Prompt tokens looked up and served from the (stand-in) prefix cache.
    pub(crate) prefix_cache: prefix_cache::PrefixCache,
    /// See [`MockServer::sessions`].
    pub(crate) sessions: Arc<std::sync::Mutex<Vec<Session>>>,
    /// The server family's metrics that follow the load, when asked for.
    pub(crate) load: server_metrics::Load,
    pub(crate) reasoning: Reasoning,
    pub(crate) usage_tokens_per_word: u32,
    /// See [`MockServerArgs::per_request_metrics`].
    pub(crate) per_request_metrics: bool,
    /// See [`MockServer::uploads`].
    pub(crate) uploads: Arc<audio::Uploads>,
    /// The requests running, for `--ttft-per-running-ms`.
    pub(crate) running: running::Running,
    /// The cache resets received (see `reset.rs`).
    pub(crate) resets: reset::Resets,
    /// Which constrained requests are answered wrongly (`--invalid-structured-rate`),
    /// numbered apart from `faults`.
    pub(crate) invalid_structured: FaultPlan,
    /// See [`MockServer::structured`].
    pub(crate) structured: Arc<StructuredLog>,
    /// The questions of `--answer-key`, if given (see `answers.rs`).
    pub(crate) answer_key: Option<AnswerKey>,
    /// Which requests that ask a key question are answered wrongly
    /// (`--wrong-answer-rate`), numbered apart from `faults`.
    pub(crate) wrong_answers: FaultPlan,
    /// See [`MockServer::answers`].
    pub(crate) answers: Arc<AnswerLog>,
}

/// A request that carried a conversation's session id (`x-session-id`), as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Its `x-request-id`, when it had one.
    pub request_id: Option<String>,
    /// The `x-session-id` header's value.
    pub session_id: String,
    /// The request body, as it came (the chat history of a turn).
    pub body: Vec<u8>,
}

/// The header a multi-turn request names its conversation in (bench's default).
pub(crate) const SESSION_HEADER: &str = "x-session-id";

pub(crate) fn unix_now() -> u64 {
    // A clock before 1970 is a broken machine; `created` 0 is the honest answer there.
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub(crate) async fn generate(shared: &Shared, api: Api, conn: &Conn, request: Request) -> Response {
    // When the request reached the socket, not when this handler got to it.
    let arrival = conn.arrival().map_or_else(Instant::now, Instant::from_std);
    let request_id = request
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|id| id.len() <= timing::MAX_ID_BYTES)
        .map(str::to_owned);
    let session_id = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = match axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES).await {
        Ok(body) => body,
        Err(err) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                &format!("cannot read the request body: {err}"),
            );
        }
    };
    if let Some(session_id) = session_id {
        shared
            .sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(Session {
                request_id: request_id.clone(),
                session_id,
                body: body.to_vec(),
            });
    }
    let (k, fault) = match next_request(shared, conn) {
        Ok(next) => next,
        Err(failed) => return *failed,
    };
    let generation: Generation = match request::parse(api, &body) {
        Ok(generation) => generation,
        Err(err) => {
            return error_response(StatusCode::BAD_REQUEST, &format!("invalid request: {err}"));
        }
    };
    if generation.max_tokens == Some(0) {
        return error_response(StatusCode::BAD_REQUEST, "max_tokens must be at least 1");
    }
    // Structured output: the text that keeps (or breaks) the request's constraint.
    let answer = match generation.constraint.as_ref() {
        Some(constraint) => match structured::answer(constraint, &shared.invalid_structured) {
            Ok(answer) => answer,
            Err(unsupported) => {
                return error_response(StatusCode::BAD_REQUEST, &unsupported.to_string());
            }
        },
        None => None,
    };
    // A question of the answer key: its answer, right or wrong, where no structured
    // answer takes the place of the ordinary text already.
    let graded = match (&shared.answer_key, &answer) {
        (Some(key), None) if api.is_openai() => {
            answers::answer(key, api, &body, &shared.wrong_answers)
        }
        _ => None,
    };
    let pieces = answer
        .as_ref()
        .map(|answer| &answer.text)
        .or(graded.as_ref().map(|graded| &graded.text))
        .map(|text| structured::pieces(text));
    let cached_tokens = shared.prefix_cache.lookup(&body, generation.prompt_tokens);
    // A structured or graded answer ends after its text (reasoning first), unless
    // `max_tokens` cuts it; any other takes `max_tokens` (else `--output-len`) tokens.
    let (completion_tokens, stop) = match &pieces {
        Some(pieces) => {
            let reasoning = if api.has_reasoning() {
                shared.reasoning.tokens
            } else {
                0
            };
            let whole = reasoning.saturating_add(u32::try_from(pieces.len()).unwrap_or(u32::MAX));
            match generation.max_tokens {
                Some(max) if max < whole => (max, false),
                _ => (whole, true),
            }
        }
        None => (generation.max_tokens.unwrap_or(shared.output_len), false),
    };
    if completion_tokens == 0 {
        return error_response(StatusCode::BAD_REQUEST, "max_tokens must be at least 1");
    }
    if api.is_openai()
        && let Some(id) = &request_id
    {
        shared.structured.push(StructuredAnswer {
            id: id.clone(),
            constraint: generation.constraint.as_ref().map(Constraint::kind),
            structured: answer
                .as_ref()
                .map(|answer| answer.valid && stop && fault != Some(Fault::Empty)),
        });
    }
    if let Some(graded) = &graded {
        shared.answers.push(GradedAnswer {
            id: request_id.clone(),
            question: graded.question,
            correct: graded.right && stop && fault != Some(Fault::Empty),
        });
    }
    let tail = shared.itl * (completion_tokens - 1);
    // The wait for the requests already running, which vLLM would count as queueing.
    let load_wait = shared.running.admit(arrival, shared.ttft, tail);
    let ttft =
        shared.ttft + shared.ttft_spread.mul_f64(uniform(k, shared.latency_seed)) + load_wait;
    let last_token_at = arrival + ttft + tail;
    shared.load.admit(last_token_at, completion_tokens);
    let reply = Reply {
        api,
        id: k,
        created: unix_now(),
        model_json: &shared.model_json,
        prompt_tokens: generation.prompt_tokens,
        completion_tokens: if fault == Some(Fault::Empty) {
            0
        } else {
            completion_tokens
        },
        cached_tokens: shared.prefix_cache.enabled().then_some(cached_tokens),
        reasoning: shared.reasoning,
        usage_per_word: shared.usage_tokens_per_word,
        continuous_usage: generation.continuous_usage,
        pieces,
        stop,
    };
    let content = match fault {
        Some(f @ Fault::ErrorEvent) => Content::ErrorEvent(on_purpose(k, f)),
        Some(Fault::Malformed) => Content::Malformed,
        Some(Fault::NoDone) => Content::NoDone,
        _ => Content::Normal,
    };
    let first_token_at = arrival + ttft;
    // vLLM's per-request metrics go with OpenAI's APIs, their queue time the load's wait.
    let queue = (shared.per_request_metrics && api.is_openai()).then_some(load_wait);
    if generation.stream {
        let stream = reply.stream(
            generation.include_usage,
            first_token_at,
            shared.itl,
            &content,
            response::Timing {
                recorder: shared.timing.clone(),
                arrival,
                request_id,
                queue,
                cut_on_purpose: matches!(fault, Some(Fault::Cut | Fault::Stall)),
            },
        );
        // Delivery faults act after half of the token chunks.
        let body = match delivery(shared, fault, (reply.completion_tokens / 2) as usize) {
            Some(delivery) => Body::from_stream(FaultyBody::new(stream, delivery)),
            None => Body::from_stream(stream),
        };
        (
            [
                (header::CONTENT_TYPE, "text/event-stream"),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            body,
        )
            .into_response()
    } else {
        let last_token = reply.completion_tokens.saturating_sub(1);
        let generating = timing::AbortGuard::new(&shared.timing, request_id.as_deref());
        tokio::time::sleep_until(first_token_at + shared.itl * last_token).await;
        generating.answered();
        // A whole answer's tokens leave together: its generation is the schedule's, and
        // its time to the first token is what the measured time to the body leaves.
        let metrics = queue.map(|queue| {
            let since_arrival = Instant::now() - arrival;
            let generation = shared.itl * last_token;
            let first = since_arrival.saturating_sub(generation);
            let metrics = SentMetrics::new(first, queue, generation, reply.completion_tokens);
            if let Some(id) = request_id {
                shared.timing.whole(id, since_arrival, metrics);
            }
            metrics
        });
        let json = reply.json_body_with(&content, metrics.as_ref());
        // Delivery faults act after the first half of the bytes.
        let body = match delivery(shared, fault, 1) {
            Some(delivery) => {
                let half = json.len() / 2;
                let halves = [json.slice(..half), json.slice(half..)].map(Ok::<Bytes, Infallible>);
                Body::from_stream(FaultyBody::new(
                    futures_util::stream::iter(halves),
                    delivery,
                ))
            }
            None => Body::from(json),
        };
        ([(header::CONTENT_TYPE, "application/json")], body).into_response()
    }
}

/// How a fault breaks the delivery of a body whose stream has its half-way point after
/// `half` items; `None` for a fault that does not touch delivery.
pub(crate) fn delivery(shared: &Shared, fault: Option<Fault>, half: usize) -> Option<Delivery> {
    match fault? {
        Fault::Cut => Some(Delivery::Cut { after: half }),
        Fault::Stall => Some(Delivery::Stall {
            after: half,
            stall: shared.stall,
            shutdown: shared.shutdown.clone(),
        }),
        Fault::Dribble => Some(Delivery::Dribble),
        _ => None,
    }
}

/// An error in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`.
/// What a request that fails on purpose says, naming the flag that asked for it.
/// Request `k`'s draw in [0, 1) for `--ttft-spread-ms`: SplitMix64 of `k` and the seed
/// (a stateless mix, so concurrent requests need no shared generator), top 53 bits.
fn uniform(k: u64, seed: u64) -> f64 {
    let mut z = k
        .wrapping_add(seed.wrapping_mul(0xD6E8_FEB8_6659_FD93))
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

pub(crate) fn on_purpose(k: u64, fault: Fault) -> String {
    format!(
        "mock server: request {k} fails on purpose ({})",
        fault.flag()
    )
}

/// The next request's number and fault from the plan. A fault that fails the request before
/// any work (a server error, an HTTP status, a reset connection) comes back as the response
/// to give instead; the others are the caller's to apply as it answers.
pub(crate) fn next_request(
    shared: &Shared,
    conn: &Conn,
) -> Result<(u64, Option<Fault>), Box<Response>> {
    let (k, fault) = shared.faults.next();
    match fault {
        Some(f @ Fault::ServerError) => Err(Box::new(error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &on_purpose(k, f),
        ))),
        Some(f @ Fault::Http(status)) => Err(Box::new(error_response(status, &on_purpose(k, f)))),
        Some(Fault::Reset) => {
            conn.reset();
            // Never sent: writing its head fails and the connection closes with an RST.
            Err(Box::new(StatusCode::INTERNAL_SERVER_ERROR.into_response()))
        }
        _ => Ok((k, fault)),
    }
}

pub(crate) fn error_response(status: StatusCode, message: &str) -> Response {
    let kind = if status.is_client_error() {
        "BadRequestError"
    } else {
        "InternalServerError"
    };
    let body = serde_json::json!({
        "error": {"message": message, "type": kind, "param": null, "code": status.as_u16()},
    });
    (status, axum::Json(body)).into_response()
}
