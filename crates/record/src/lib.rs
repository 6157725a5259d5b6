//! What one request produced: written by the client and the decode worker, read by
//! metrics and reports. Times are seconds (f64), as in vLLM's `RequestFuncOutput`.
//!
//! A request's outcome is typed ([`Outcome`]): success, or a [`Failure`] with a
//! [`FailureKind`] that reports count and a reader can tell apart at a glance (a server
//! fault from a network fault from a plugin fault). The text `kind: message` exists only
//! where it is written out (vLLM's `errors` list, the console), never parsed back.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The cause of a failed request. Written and read as its fixed name ([`FailureKind::name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum FailureKind {
    /// The server answered with this non-2xx status (written `http-503`).
    Http(u16),
    /// No connection could be made: refused, unreachable, or a failed name lookup.
    Connect,
    /// The connection was closed or reset after the request went out and before a
    /// response head came back.
    Reset,
    /// The response body ended without its proper end: the connection was closed or
    /// reset in the middle of it.
    StreamCut,
    /// `--request-timeout` passed before the response was complete.
    Timeout,
    /// A frame of a 2xx response that the backend could not parse (malformed JSON).
    InvalidChunk,
    /// The server reported an error inside a 2xx response (an in-band error event).
    ServerError,
    /// A 2xx response without any output (vLLM's "Never received a valid chunk").
    NoOutput,
    /// The backend plugin failed while decoding the response.
    Decode,
    /// Any other transport failure, such as a response head that is not HTTP.
    Transport,
    /// Still running when the benchmark was stopped (a signal, or a part of the run that
    /// could not go on) and
    /// its grace period ran out: cancelled.
    Interrupted,
    /// Not a failure: the client cancelled the request on purpose
    /// (`--request-cancellation-rate`). Kept as an outcome of its own, neither completed
    /// nor failed ([`RequestRecord::cancelled`]); it travels as a failure kind so that a
    /// cancelled record keeps what it measured and reads back from a shard's file.
    Cancelled,
}

impl FailureKind {
    /// The kind's fixed name, as written in results (`http-` plus the status for
    /// [`FailureKind::Http`]).
    pub fn name(self) -> std::borrow::Cow<'static, str> {
        let name = match self {
            FailureKind::Http(status) => return format!("http-{status}").into(),
            FailureKind::Connect => "connect",
            FailureKind::Reset => "reset",
            FailureKind::StreamCut => "stream-cut",
            FailureKind::Timeout => "timeout",
            FailureKind::InvalidChunk => "invalid-chunk",
            FailureKind::ServerError => "server-error",
            FailureKind::NoOutput => "no-output",
            FailureKind::Decode => "decode",
            FailureKind::Transport => "transport",
            FailureKind::Interrupted => "interrupted",
            FailureKind::Cancelled => "cancelled",
        };
        name.into()
    }

    /// A failure of this kind with `message`.
    pub fn failure(self, message: impl fmt::Display) -> Failure {
        Failure {
            kind: self,
            message: message.to_string(),
        }
    }
}

/// The kind a fixed name ([`FailureKind::name`]) stands for: how records written by one
/// process (a shard of a run) are read back by another.
impl std::str::FromStr for FailureKind {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        const FIXED: [FailureKind; 11] = [
            FailureKind::Connect,
            FailureKind::Reset,
            FailureKind::StreamCut,
            FailureKind::Timeout,
            FailureKind::InvalidChunk,
            FailureKind::ServerError,
            FailureKind::NoOutput,
            FailureKind::Decode,
            FailureKind::Transport,
            FailureKind::Interrupted,
            FailureKind::Cancelled,
        ];
        if let Some(status) = name.strip_prefix("http-") {
            return status
                .parse()
                .map(FailureKind::Http)
                .map_err(|_| format!("{name:?} is not a failure kind (http- then a status)"));
        }
        FIXED
            .into_iter()
            .find(|kind| kind.name() == name)
            .ok_or_else(|| format!("{name:?} is not a failure kind"))
    }
}

impl From<FailureKind> for String {
    fn from(kind: FailureKind) -> String {
        kind.name().into_owned()
    }
}

impl TryFrom<String> for FailureKind {
    type Error = String;

    fn try_from(name: String) -> Result<Self, String> {
        name.parse()
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Why a request failed: its kind and a message for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

/// Written `kind: message` (for example `http-500: Internal Server Error`), the text of a
/// record in vLLM's `errors` list.
impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

/// The outcome of one request: `Ok` when it succeeded. A failed request keeps what it
/// measured before failing (text and chunk times), as vLLM's `RequestFuncOutput` does; so
/// does a request the client cancelled on purpose, whose `Err` is of kind
/// [`FailureKind::Cancelled`] and which is neither completed nor failed
/// ([`RequestRecord::cancelled`], [`RequestRecord::failure`]).
pub type Outcome = Result<(), Failure>;

/// What one benchmark request produced. Serialised (JSON) as a shard of a run writes it,
/// with `outcome` as `error`: `null` on success, else the [`Failure`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Position in the workload (0-based), also the order of `--save-detailed` lists.
    pub index: usize,
    pub request_id: String,
    #[serde(rename = "error", with = "outcome_as_error")]
    pub outcome: Outcome,
    /// Prompt length in tokens as the dataset measured it with the run's tokenizer (the
    /// `prompt_len` of vLLM's `SampleRequest`). Kept as sampled; which count the metrics
    /// use is `metrics::InputTokenSource`'s choice.
    pub prompt_len: u32,
    /// The server's `usage.prompt_tokens` where vLLM's client reads it (see
    /// `output_tokens`). vLLM's request functions (0.32: `endpoint_request_func.py`) put
    /// it in place of the dataset's count, and `calculate_metrics` sums that; the server
    /// counts with its own tokenizer and chat template, so the two differ for the same
    /// traffic.
    pub usage_prompt_len: Option<u32>,
    /// The server's `usage.prompt_tokens` wherever the response carried it (see
    /// `server_output_tokens`): compared with `prompt_len` in the client diagnostics.
    pub server_prompt_tokens: Option<u32>,
    /// The `max_tokens` the request asked for.
    pub expected_output_len: u32,
    /// The server's `usage.completion_tokens` where vLLM's client reads it: a whole body's
    /// usage, or a streamed frame's usage without `choices`. `calculate_metrics` takes it
    /// as the output length, and counts the generated text with the tokenizer without it.
    pub output_tokens: Option<u32>,
    /// The server's `usage.completion_tokens` wherever the response carried it, including
    /// the usage vLLM's client skips (llama.cpp's server streams it in the chunk with the
    /// finish reason): compared with the tokenizer's count in the client diagnostics.
    pub server_output_tokens: Option<u32>,
    pub generated_text: String,
    pub reasoning_text: String,
    /// Time to the first frame that carried output (vLLM: first chunk with `choices`).
    pub ttft: f64,
    /// Time to the first chunk whose content text (not reasoning) is non-empty: when a
    /// reasoning model's answer began. vLLM's TTFT counts the first reasoning delta (and an
    /// empty role-only delta) as the first token, which hides a long reasoning phase; this
    /// is reported beside it. `None` when no content arrived.
    pub ttfc: Option<f64>,
    /// Gaps between successive output-carrying frames.
    pub itl: Vec<f64>,
    /// Tokens each output chunk carried, in chunk order (one more than `itl` gaps), when
    /// the backend's decoder knew the count of every chunk (the contract sends all or
    /// none); empty otherwise. `--split-itl-by-tokens` splits a chunk's gap among them.
    pub chunk_tokens: Vec<u32>,
    /// Request start to the last output-carrying frame (vLLM's `latency`).
    pub latency: f64,
    /// Actual send time (after any `--max-concurrency` wait), seconds since the
    /// benchmark started. vLLM's `start_time`.
    pub start_time: f64,
    /// When the scheduler released the request (before waiting for a concurrency slot),
    /// seconds since the benchmark started. `start_time - dispatch_time` is vLLM's
    /// `client_queue_time`.
    pub dispatch_time: f64,
    /// Scheduled send time, seconds since the benchmark started.
    pub intended_start_time: f64,
    /// Seconds spent waiting for a `--max-concurrency` slot. Schedule lag, the delay the
    /// client itself added to a send, is `start_time - intended_start_time -
    /// concurrency_wait`: the dispatcher's lateness plus the hop to the request's task.
    pub concurrency_wait: f64,
    /// Whether the request was sent again on a fresh connection after the kept-alive
    /// connection it was first sent on turned out closed (see `RawResponse::retried`).
    pub retried: bool,
    /// The request's turn in its conversation (from 0), for a multi-turn workload; the
    /// per-turn metrics group by it.
    pub turn: Option<u32>,
    /// The server's `usage.prompt_tokens_details.cached_tokens`: prompt tokens its prefix
    /// cache served, where the response said so.
    pub cached_prompt_tokens: Option<u32>,
    /// How many results (embeddings, scores) a pooling response held, from the backend's
    /// `pooled` event; `None` for a response without one (generation). A run whose
    /// requests carry it is a pooling run, reported with vLLM's embedding metrics, and the
    /// counts sum to its `total_input_sequences` (one result per input sequence).
    pub pooled_results: Option<u32>,
    /// The server's own timing of the request, where the response carried it (vLLM's
    /// `--enable-per-request-metrics`). Kept in the record, not only in the result, so
    /// that a shard carries it and `bench merge` recomputes the figures from records.
    #[serde(default)]
    pub server_timing: Option<ServerTiming>,
    /// Which of the run's endpoints sent the request: its index in the order of the
    /// `--base-url`s (always 0 with one). The per-endpoint figures group by it.
    #[serde(default)]
    pub endpoint: u32,
    /// What the host found checking the response against the request's output constraint
    /// (structured output); `None` for a request without one, or one that did not
    /// complete.
    #[serde(default)]
    pub output_validity: Option<OutputValidity>,
    /// What the dataset's grader made of the answer (accuracy under load); `None` for a
    /// request whose sample carried no reference, or one that did not complete.
    #[serde(default)]
    pub grade: Option<Graded>,
}

/// A completed response judged by its dataset's grader against the reference its sample
/// carried (the dataset plugin's `grade`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Graded {
    /// What a right answer is, as the dataset wrote it (a GSM8K problem's final number).
    pub reference: String,
    pub correct: bool,
    /// From 0 to 1 (1 or 0 for a grader that only tells right from wrong).
    pub score: f64,
    /// What the grader read as the answer; `None` when it found none (an invalid answer,
    /// graded wrong).
    pub extracted: Option<String>,
}

/// A completed response checked against its request's output constraint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "validity")]
pub enum OutputValidity {
    /// The response is what the constraint asks for: one JSON value the schema accepts,
    /// a full match of the regular expression, one of the choices.
    Valid,
    /// It is not, and why (the parse error, the schema's first complaint, ...).
    Invalid { reason: String },
    /// The constraint is of a kind the host cannot check (a grammar): sent, not judged.
    Unchecked,
}

/// What the server said of a request's time, in seconds (the server sends milliseconds),
/// on the server's clock. Each is `None` when the server did not send it.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ServerTiming {
    /// From the request's arrival in the server's queue to its scheduling.
    pub queue: Option<f64>,
    /// From the request's scheduling to its first token: the queue, the server's front
    /// end (HTTP, tokenization) and the network are outside it, so it is at most the
    /// client's TTFT less the queue.
    pub ttft: Option<f64>,
    /// From the first token to the last.
    pub generation: Option<f64>,
    /// The generation time over the gaps between tokens; `None` for one token.
    pub mean_itl: Option<f64>,
}

/// [`Outcome`] written as an optional failure (`null` for success) rather than serde's
/// `{"Ok": null}`.
mod outcome_as_error {
    use super::{Failure, Outcome};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(outcome: &Outcome, s: S) -> Result<S::Ok, S::Error> {
        outcome.as_ref().err().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Outcome, D::Error> {
        Ok(match Option::<Failure>::deserialize(d)? {
            None => Ok(()),
            Some(failure) => Err(failure),
        })
    }
}

impl RequestRecord {
    /// Whether the request succeeded.
    pub fn succeeded(&self) -> bool {
        self.outcome.is_ok()
    }

    /// The failure, for a failed request: `None` for one that succeeded or that the client
    /// cancelled on purpose.
    pub fn failure(&self) -> Option<&Failure> {
        self.outcome
            .as_ref()
            .err()
            .filter(|f| f.kind != FailureKind::Cancelled)
    }

    /// Whether the client cancelled the request on purpose (`--request-cancellation-rate`).
    pub fn cancelled(&self) -> bool {
        matches!(&self.outcome, Err(f) if f.kind == FailureKind::Cancelled)
    }
}

/// An empty successful record: the base the decode worker fills in (and tests build on).
impl Default for RequestRecord {
    fn default() -> Self {
        RequestRecord {
            index: 0,
            request_id: String::new(),
            outcome: Ok(()),
            prompt_len: 0,
            usage_prompt_len: None,
            server_prompt_tokens: None,
            expected_output_len: 0,
            output_tokens: None,
            server_output_tokens: None,
            generated_text: String::new(),
            reasoning_text: String::new(),
            ttft: 0.0,
            ttfc: None,
            itl: Vec::new(),
            chunk_tokens: Vec::new(),
            latency: 0.0,
            start_time: 0.0,
            dispatch_time: 0.0,
            intended_start_time: 0.0,
            concurrency_wait: 0.0,
            retried: false,
            turn: None,
            cached_prompt_tokens: None,
            pooled_results: None,
            server_timing: None,
            endpoint: 0,
            output_validity: None,
            grade: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_written_as_their_fixed_names() {
        let kinds = [
            (FailureKind::Http(503), "http-503"),
            (FailureKind::Connect, "connect"),
            (FailureKind::Reset, "reset"),
            (FailureKind::StreamCut, "stream-cut"),
            (FailureKind::Timeout, "timeout"),
            (FailureKind::InvalidChunk, "invalid-chunk"),
            (FailureKind::ServerError, "server-error"),
            (FailureKind::NoOutput, "no-output"),
            (FailureKind::Decode, "decode"),
            (FailureKind::Transport, "transport"),
            (FailureKind::Interrupted, "interrupted"),
            (FailureKind::Cancelled, "cancelled"),
        ];
        for (kind, name) in kinds {
            assert_eq!(kind.to_string(), name);
        }
        assert_eq!(
            FailureKind::Reset.failure("gone").to_string(),
            "reset: gone"
        );
        for (kind, name) in kinds {
            assert_eq!(name.parse::<FailureKind>(), Ok(kind));
        }
        assert!("http-x".parse::<FailureKind>().is_err());
        assert!("gone".parse::<FailureKind>().is_err());
    }

    #[test]
    fn a_cancelled_request_is_neither_completed_nor_failed() {
        let cancelled = RequestRecord {
            outcome: Err(FailureKind::Cancelled.failure("after 0.5 s")),
            ..RequestRecord::default()
        };
        assert!(cancelled.cancelled());
        assert!(!cancelled.succeeded());
        assert_eq!(cancelled.failure(), None);
        let failed = RequestRecord {
            outcome: Err(FailureKind::Timeout.failure("late")),
            ..RequestRecord::default()
        };
        assert!(!failed.cancelled());
        assert_eq!(failed.failure().map(|f| f.kind), Some(FailureKind::Timeout));
        assert!(!RequestRecord::default().cancelled());
    }

    #[test]
    fn records_read_back_as_written() {
        let records = [
            RequestRecord {
                index: 7,
                request_id: "r-7".into(),
                itl: vec![0.01, 0.02],
                chunk_tokens: vec![1, 2, 3],
                ttfc: Some(0.5),
                turn: Some(2),
                server_timing: Some(ServerTiming {
                    queue: Some(0.25),
                    ttft: Some(0.125),
                    generation: None,
                    mean_itl: Some(0.001),
                }),
                ..RequestRecord::default()
            },
            RequestRecord {
                outcome: Err(FailureKind::Http(503).failure("busy")),
                ..RequestRecord::default()
            },
            RequestRecord {
                outcome: Err(FailureKind::Cancelled.failure("after 0.5 s")),
                ..RequestRecord::default()
            },
        ];
        for record in records {
            let json = serde_json::to_string(&record).unwrap();
            let back: RequestRecord = serde_json::from_str(&json).unwrap();
            assert_eq!(back, record, "{json}");
        }
        let failed = serde_json::to_value(RequestRecord {
            outcome: Err(FailureKind::StreamCut.failure("cut")),
            ..RequestRecord::default()
        })
        .unwrap();
        assert_eq!(failed["error"]["kind"], "stream-cut");
        // A record written before the server's timing was kept reads as without it.
        let mut older = failed;
        older.as_object_mut().unwrap().remove("server_timing");
        let back: RequestRecord = serde_json::from_value(older).unwrap();
        assert_eq!(back.server_timing, None);
    }

    /// Times read back bit for bit, including those serde_json's default float parser
    /// gets one unit wrong in the last place (a server's 20.689463 ms as seconds).
    #[test]
    fn times_read_back_bit_for_bit() {
        for nanos in (0..100_000_000u64).step_by(997).chain([20_689_463]) {
            let seconds = nanos as f64 / 1e6 / 1e3;
            let record = RequestRecord {
                latency: seconds,
                server_timing: Some(ServerTiming {
                    ttft: Some(seconds),
                    ..ServerTiming::default()
                }),
                ..RequestRecord::default()
            };
            let json = serde_json::to_string(&record).unwrap();
            let back: RequestRecord = serde_json::from_str(&json).unwrap();
            assert_eq!(back.latency.to_bits(), seconds.to_bits(), "{json}");
            assert_eq!(back.server_timing, record.server_timing, "{json}");
        }
    }
}
