//! Faults the mock server injects on purpose, so that the client's failure handling can be
//! tested end to end against real sockets: which requests get which fault (a fixed,
//! reproducible plan), and the machinery that breaks a connection or a body on cue.
//!
//! - Connection reset: every connection goes through [`super::conn::ConnIo`]; a handler
//!   that wants the connection reset flags it through its [`super::conn::Conn`], the IO
//!   then fails hyper's first write
//!   (the response head), hyper drops the connection, and the socket, set to `SO_LINGER`
//!   0 first, closes with a TCP RST. No byte of a response leaves.
//! - Stream cut, stall, dribble: [`FaultyBody`] wraps a body stream. A cut ends it with an
//!   error, which makes hyper close the connection without the body's terminating chunk
//!   (a FIN, so the chunks sent before arrive); a stall stops it while the connection
//!   stays open; a dribble hands hyper one byte at a time, each flushed as its own write.
//! - Connections that close on their own ([`super::Closing`]): the connection's IO hands
//!   its reads and flushes to its [`super::closing::IoClosing`], which runs the idle timer and the
//!   silent close (see `closing.rs`).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::http::StatusCode;
use bytes::Bytes;
use futures_util::Stream;
use tokio::sync::watch;

/// Checks a fault rate flag: a share from 0.0 to 1.0.
pub(super) fn parse_rate(text: &str) -> Result<f64, String> {
    let rate: f64 = text.parse().map_err(|e| format!("{e}"))?;
    if (0.0..=1.0).contains(&rate) {
        Ok(rate)
    } else {
        Err(format!("must be between 0.0 and 1.0, got {rate}"))
    }
}

/// The faults of `bench mock-server` besides `--fail-rate`, each with the share of
/// generation requests it hits; all rates together (with `--fail-rate`) at most 1.
/// Streaming faults act half-way through the token chunks (after `floor(n / 2)` of `n`);
/// on a non-streaming answer they act half-way through the body's bytes.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct Faults {
    /// Share of requests answered at once with HTTP --http-error-status and an
    /// OpenAI-style error body.
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    pub http_error_rate: f64,
    /// Status of the --http-error-rate answers (400 to 599).
    #[arg(long, default_value_t = 503,
          value_parser = clap::value_parser!(u16).range(400..=599))]
    pub http_error_status: u16,
    /// Share of requests whose connection is reset (TCP RST) once the request is read,
    /// before any byte of a response.
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    pub reset_rate: f64,
    /// Share of requests whose response is cut half-way: the connection closes without
    /// the end of the body.
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    pub cut_rate: f64,
    /// Share of requests with one malformed JSON chunk half-way (the token chunk is cut
    /// short; the rest of the stream is normal).
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    pub malformed_rate: f64,
    /// Share of requests whose response stops half-way for --stall-ms, the connection
    /// kept open; after the stall the rest follows.
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    pub stall_rate: f64,
    /// How long a stall lasts, in milliseconds (a stall also ends, cutting the response,
    /// when the server shuts down).
    #[arg(long, default_value_t = 3_600_000)]
    pub stall_ms: u64,
    /// Share of requests whose stream carries vLLM's in-band error event half-way, then
    /// `data: [DONE]` (a non-streaming answer is the error object with status 200).
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    pub error_event_rate: f64,
    /// Share of requests answered 200 without any token: a stream of only the usage chunk
    /// and `data: [DONE]` (a non-streaming answer has an empty text).
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    pub empty_rate: f64,
    /// Share of streams that end cleanly after their last chunk without `data: [DONE]`
    /// (not a failure: vLLM's client accepts it).
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    pub no_done_rate: f64,
    /// Share of requests whose response body is sent one byte per write.
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    pub dribble_rate: f64,
}

impl Default for Faults {
    /// No fault; the flags' defaults for the fault parameters.
    fn default() -> Self {
        Faults {
            http_error_rate: 0.0,
            http_error_status: 503,
            reset_rate: 0.0,
            cut_rate: 0.0,
            malformed_rate: 0.0,
            stall_rate: 0.0,
            stall_ms: 3_600_000,
            error_event_rate: 0.0,
            empty_rate: 0.0,
            no_done_rate: 0.0,
            dribble_rate: 0.0,
        }
    }
}

/// A way of answering a request wrongly on purpose, chosen per request before it is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fault {
    /// HTTP 500 with an OpenAI-style error body, at once (`--fail-rate`).
    ServerError,
    /// This HTTP error status with an OpenAI-style error body, at once.
    Http(StatusCode),
    Reset,
    Cut,
    Malformed,
    Stall,
    ErrorEvent,
    Empty,
    NoDone,
    Dribble,
    /// A structured-output answer that breaks its constraint (`--invalid-structured-rate`),
    /// planned over the constrained requests alone, never by the plan of the other faults.
    InvalidStructured,
    /// A wrong answer to a question of the answer key (`--wrong-answer-rate`), planned over
    /// the requests that ask one alone, never by the plan of the other faults.
    WrongAnswer,
}

impl Fault {
    /// The flag that asked for the fault, for messages.
    pub(super) fn flag(self) -> &'static str {
        match self {
            Fault::ServerError => "--fail-rate",
            Fault::Http(_) => "--http-error-rate",
            Fault::Reset => "--reset-rate",
            Fault::Cut => "--cut-rate",
            Fault::Malformed => "--malformed-rate",
            Fault::Stall => "--stall-rate",
            Fault::ErrorEvent => "--error-event-rate",
            Fault::Empty => "--empty-rate",
            Fault::NoDone => "--no-done-rate",
            Fault::Dribble => "--dribble-rate",
            Fault::InvalidStructured => "--invalid-structured-rate",
            Fault::WrongAnswer => "--wrong-answer-rate",
        }
    }
}

/// Deterministic fault choice. Request k (from 0, in arrival order) is due a fault of a
/// mode with rate p when floor((k+1)p) is more than the faults of that mode served so far;
/// it gets the most overdue mode (the first listed on ties). Rates are kept in billionths,
/// so the arithmetic is exact.
///
/// With a single mode this is exactly the pattern `floor((k+1)p) > floor(kp)`: 0.25 hits
/// requests 3, 7, 11, ..., and of the first n requests exactly floor(n * p) (the rate
/// rounded to 1e-9). With several modes (rates summing to at most 1), each mode's count
/// stays within the number of modes of floor(n * p).
#[derive(Debug)]
pub(super) struct FaultPlan {
    modes: Vec<(Fault, u128)>,
    state: Mutex<PlanState>,
}

#[derive(Debug, Default)]
struct PlanState {
    /// The next request's number.
    next: u64,
    /// Faults served per mode.
    served: Vec<u128>,
}

impl FaultPlan {
    const SCALE: u128 = 1_000_000_000;

    /// A plan for `(fault, rate)` pairs, rates from 0 to 1 (unchecked; see
    /// [`check_rates`]). Zero rates are left out.
    pub(super) fn new(modes: &[(Fault, f64)]) -> Self {
        let modes: Vec<(Fault, u128)> = modes
            .iter()
            .map(|&(fault, rate)| (fault, (rate * Self::SCALE as f64).round() as u128))
            .filter(|&(_, per_billion)| per_billion > 0)
            .collect();
        let served = vec![0; modes.len()];
        FaultPlan {
            modes,
            state: Mutex::new(PlanState { next: 0, served }),
        }
    }

    /// Numbers the next request and decides its fault.
    pub(super) fn next(&self) -> (u64, Option<Fault>) {
        let (k, fault) = self.next_counted();
        (k, fault.map(|(fault, _)| fault))
    }

    /// [`Self::next`], with the number of faults of the chosen mode served before this one.
    pub(super) fn next_counted(&self) -> (u64, Option<(Fault, u128)>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let k = state.next;
        state.next += 1;
        let due = self
            .modes
            .iter()
            .zip(&state.served)
            .map(|(&(_, p), &served)| {
                ((u128::from(k) + 1) * p / Self::SCALE).saturating_sub(served)
            })
            .enumerate()
            .filter(|&(_, overdue)| overdue > 0)
            // The first of the most overdue: `max_by_key` keeps the last maximum, so
            // compare on reversed positions.
            .max_by_key(|&(i, overdue)| (overdue, std::cmp::Reverse(i)));
        let fault = due.map(|(i, _)| {
            state.served[i] += 1;
            (self.modes[i].0, state.served[i] - 1)
        });
        (k, fault)
    }
}

/// Checks that every rate lies in 0..=1 and that they sum to at most 1 (in billionths,
/// as the plan counts), naming the flag at fault.
pub(super) fn check_rates(modes: &[(Fault, f64)]) -> Result<(), String> {
    let mut total = 0u128;
    for &(fault, rate) in modes {
        if !(0.0..=1.0).contains(&rate) {
            return Err(format!(
                "mock server {} must be between 0.0 and 1.0, got {rate}",
                fault.flag()
            ));
        }
        total += (rate * FaultPlan::SCALE as f64).round() as u128;
    }
    if total > FaultPlan::SCALE {
        return Err(format!(
            "mock server fault rates add up to {}, more than 1",
            total as f64 / FaultPlan::SCALE as f64
        ));
    }
    Ok(())
}

/// How a [`FaultyBody`] breaks the delivery of its stream.
pub(super) enum Delivery {
    /// After `after` items, the body fails: hyper closes the connection without the end
    /// of the body.
    Cut { after: usize },
    /// After `after` items, nothing for `stall` (then the rest), or until the server shuts
    /// down (then a cut).
    Stall {
        after: usize,
        stall: Duration,
        shutdown: watch::Receiver<()>,
    },
    /// Every byte is its own item, with a round through the scheduler before each, so that
    /// hyper flushes each one as a separate write.
    Dribble,
}

/// A response body stream with a delivery fault.
pub(super) struct FaultyBody<S> {
    inner: S,
    delivery: Delivery,
    /// Items passed on so far (cut, stall).
    sent: usize,
    /// The rest of the current item (dribble).
    pending: Bytes,
    /// A `Pending` was just returned so that hyper flushes what it holds; the next poll
    /// goes on.
    yielded: bool,
    /// The running stall: `true` when it ran its time, `false` when the server shut down.
    stall: Option<Pin<Box<dyn Future<Output = bool> + Send>>>,
    /// The stall is over and the rest flows.
    stalled: bool,
}

impl<S> FaultyBody<S> {
    pub(super) fn new(inner: S, delivery: Delivery) -> Self {
        FaultyBody {
            inner,
            delivery,
            sent: 0,
            pending: Bytes::new(),
            yielded: false,
            stall: None,
            stalled: false,
        }
    }

    /// Returns `Pending` once, waking at once: hyper then flushes what it has buffered
    /// before polling again.
    fn flush_first(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            self.yielded = false;
            Poll::Ready(())
        } else {
            self.yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

impl<S> Stream for FaultyBody<S>
where
    S: Stream<Item = Result<Bytes, Infallible>> + Unpin,
{
    type Item = io::Result<Bytes>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        match &this.delivery {
            Delivery::Dribble => loop {
                if !this.pending.is_empty() {
                    ready!(this.flush_first(cx));
                    return Poll::Ready(Some(Ok(this.pending.split_to(1))));
                }
                match ready!(Pin::new(&mut this.inner).poll_next(cx)) {
                    Some(Ok(item)) => this.pending = item,
                    None => return Poll::Ready(None),
                }
            },
            &Delivery::Cut { after } if this.sent == after => {
                ready!(this.flush_first(cx));
                Poll::Ready(Some(Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "mock server: response cut on purpose (--cut-rate)",
                ))))
            }
            Delivery::Stall {
                after,
                stall,
                shutdown,
            } if this.sent == *after && !this.stalled => {
                let (stall, mut shutdown) = (*stall, shutdown.clone());
                let wait = this.stall.get_or_insert_with(|| {
                    Box::pin(async move {
                        tokio::select! {
                            () = tokio::time::sleep(stall) => true,
                            // The sender is dropped (never sent on) at shutdown.
                            _ = shutdown.changed() => false,
                        }
                    })
                });
                let resume = ready!(wait.as_mut().poll(cx));
                this.stall = None;
                if !resume {
                    return Poll::Ready(Some(Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        "mock server: stalled response cut by the shutdown",
                    ))));
                }
                this.stalled = true;
                Pin::new(this).poll_next(cx)
            }
            Delivery::Cut { .. } | Delivery::Stall { .. } => {
                let item = ready!(Pin::new(&mut this.inner).poll_next(cx));
                this.sent += 1;
                Poll::Ready(item.map(|item| item.map_err(|never| match never {})))
            }
        }
    }
}
