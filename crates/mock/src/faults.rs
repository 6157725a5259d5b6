//! Faults the mock server injects on purpose, so that the client's failure handling can be
//! tested end to end against real sockets: which requests get which fault (a fixed,
//! reproducible plan), and the machinery that breaks a connection or a body on cue.
//!
//! - Connection reset: every connection goes through [`ConnIo`]; a handler that wants the
//!   connection reset flags it through its [`Conn`], the IO then fails hyper's first write
//!   (the response head), hyper drops the connection, and the socket, set to `SO_LINGER`
//!   0 first, closes with a TCP RST. No byte of a response leaves.
//! - Stream cut, stall, dribble: [`FaultyBody`] wraps a body stream. A cut ends it with an
//!   error, which makes hyper close the connection without the body's terminating chunk
//!   (a FIN, so the chunks sent before arrive); a stall stops it while the connection
//!   stays open; a dribble hands hyper one byte at a time, each flushed as its own write.
//! - Connections that close on their own ([`super::Closing`]): [`ConnIo`] hands its reads
//!   and flushes to the connection's [`IoClosing`], which runs the idle timer and the
//!   silent close (see `closing.rs`).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::http::StatusCode;
use axum::serve::{IncomingStream, Listener};
use bytes::Bytes;
use futures_util::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::arrival::LastArrival;
use super::closing::{CloseStats, ConnClosing, IoClosing, IoPolicy};

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
            self.modes[i].0
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

/// The listener of the mock server: plain TCP with `TCP_NODELAY`, each connection wrapped
/// in a [`ConnIo`] that a handler can reset and that closes as [`super::Closing`] says.
pub(super) struct FaultListener {
    pub listener: TcpListener,
    pub closing: IoPolicy,
    pub stats: Arc<CloseStats>,
}

impl Listener for FaultListener {
    type Io = ConnIo;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (ConnIo, SocketAddr) {
        loop {
            match self.listener.accept().await {
                Ok((stream, addr)) => {
                    self.stats.accepted();
                    // Without TCP_NODELAY, Nagle's algorithm would hold small SSE chunks
                    // back and distort exactly the timings the mock promises.
                    if let Err(err) = stream.set_nodelay(true) {
                        tracing::warn!("mock server: cannot set TCP_NODELAY: {err}");
                    }
                    #[cfg(target_os = "linux")]
                    if let Err(err) =
                        super::arrival::enable(std::os::fd::AsRawFd::as_raw_fd(&stream))
                    {
                        tracing::warn!("mock server: no kernel receive timestamps: {err}");
                    }
                    let conn = Conn(Arc::default());
                    let closing = IoClosing::new(self.closing, self.stats.clone());
                    return (
                        ConnIo {
                            stream,
                            conn,
                            closing,
                        },
                        addr,
                    );
                }
                // A connection that died in the accept queue concerns that client only.
                Err(err) if is_connection_error(&err) => {}
                Err(err) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::warn!("mock server: accept failed: {err}");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// A handler's hold on its connection (axum's `ConnectInfo`): it can have it reset, and
/// learn when its request arrived.
#[derive(Debug, Clone)]
pub(super) struct Conn(Arc<ConnState>);

#[derive(Debug, Default)]
pub(super) struct ConnState {
    reset: AtomicBool,
    /// When the kernel received the data of the connection's latest read.
    arrival: LastArrival,
    /// When and how the connection closes on its own.
    closing: ConnClosing,
}

impl Conn {
    /// Makes the connection fail its next write and close with a TCP RST: the response
    /// the handler returns is never sent.
    pub(super) fn reset(&self) {
        self.0.reset.store(true, Ordering::SeqCst);
    }

    fn is_reset(&self) -> bool {
        self.0.reset.load(Ordering::SeqCst)
    }

    /// When the request being handled arrived (see [`super::arrival`]); `None` where the
    /// kernel gives no receive timestamps.
    pub(super) fn arrival(&self) -> Option<std::time::Instant> {
        self.0.arrival.get()
    }

    /// The connection's closing state (see [`super::closing`]).
    pub(super) fn closing(&self) -> &ConnClosing {
        &self.0.closing
    }
}

impl Connected<IncomingStream<'_, FaultListener>> for Conn {
    fn connect_info(stream: IncomingStream<'_, FaultListener>) -> Self {
        stream.io().conn.clone()
    }
}

/// A TCP connection whose writes fail once its [`Conn`] asked for a reset, and that
/// closes on its own when [`super::Closing`] says so.
pub(super) struct ConnIo {
    stream: TcpStream,
    conn: Conn,
    closing: IoClosing,
}

impl ConnIo {
    /// `Some(error)` when the connection is to be reset: `SO_LINGER` 0 makes the close
    /// that follows (hyper drops a connection whose write failed) send an RST.
    fn reset_error(&self) -> Option<io::Error> {
        if !self.conn.is_reset() {
            return None;
        }
        if let Err(err) = self.stream.set_zero_linger() {
            tracing::warn!("mock server: cannot set SO_LINGER 0 for a reset: {err}");
        }
        Some(io::Error::new(
            io::ErrorKind::ConnectionReset,
            "mock server: connection reset on purpose (--reset-rate)",
        ))
    }
}

impl AsyncRead for ConnIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let conn = &this.conn;
        this.closing.poll_read(
            &conn.0.closing,
            &mut this.stream,
            cx,
            buf,
            |stream, cx, buf| read_stamped(stream, conn, cx, buf),
        )
    }
}

/// Reads with `recvmsg`, keeping the kernel's receive time of the data in `conn`.
#[cfg(target_os = "linux")]
fn read_stamped(
    stream: &mut TcpStream,
    conn: &Conn,
    cx: &mut Context<'_>,
    buf: &mut ReadBuf<'_>,
) -> Poll<io::Result<()>> {
    use std::os::fd::AsRawFd;
    loop {
        ready!(stream.poll_read_ready(cx))?;
        let fd = stream.as_raw_fd();
        let unfilled = buf.initialize_unfilled();
        match stream.try_io(tokio::io::Interest::READABLE, || {
            super::arrival::recv(fd, unfilled)
        }) {
            Ok((n, received)) => {
                buf.advance(n);
                if n > 0 {
                    conn.0.arrival.set(received);
                }
                return Poll::Ready(Ok(()));
            }
            // Readiness was stale: wait for the next wake-up.
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => continue,
            Err(err) => return Poll::Ready(Err(err)),
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn read_stamped(
    stream: &mut TcpStream,
    _conn: &Conn,
    cx: &mut Context<'_>,
    buf: &mut ReadBuf<'_>,
) -> Poll<io::Result<()>> {
    Pin::new(stream).poll_read(cx, buf)
}

impl AsyncWrite for ConnIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(err) = self.reset_error() {
            return Poll::Ready(Err(err));
        }
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if let Some(err) = self.reset_error() {
            return Poll::Ready(Err(err));
        }
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    /// Everything hyper had buffered has been written when it flushes, so this is where
    /// a silent close after a response sends its FIN.
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(err) = self.reset_error() {
            return Poll::Ready(Err(err));
        }
        ready!(Pin::new(&mut self.stream).poll_flush(cx))?;
        let this = self.get_mut();
        this.closing
            .flushed(&this.conn.0.closing, &mut this.stream, cx);
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(err) = self.reset_error() {
            return Poll::Ready(Err(err));
        }
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
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
