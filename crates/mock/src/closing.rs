//! How the mock server ends kept-alive connections, the ways real servers do, so that a
//! client's connection reuse can be tested against each of them.
//!
//! By default the mock keeps a connection open as long as the client does. Real servers
//! do not: nginx closes after `keepalive_requests` responses and after `keepalive_timeout`
//! idle, cpp-httplib (llama.cpp's server) after `max=100` responses and 5 s idle, and
//! llama.cpp's `llama-server` closes the connection after every streamed response while
//! its headers still promise `Keep-Alive: timeout=5, max=100` (its stream provider
//! reports the end of the stream as a cancelled write, and cpp-httplib closes a connection
//! whose write did not succeed). Each of these is an option ([`Closing`]):
//!
//! - `Connection: close` (on every response, or on the last one allowed by the request
//!   limit): hyper closes the connection after that response; a client that honours the
//!   header never reuses it.
//! - A silent close: a FIN without notice, after the idle timeout or after a streamed
//!   response. The connection's IO ([`super::conn::ConnIo`]) half-closes the socket
//!   and then reads what the client still sends, without answering, until the client
//!   closes its end (as cpp-httplib drains before closing, so the client sees a FIN rather
//!   than an RST). A request that arrives on a connection the server has given up is
//!   counted ([`CloseStats::dropped_requests`]): the client must send it again, and every
//!   such request is one a correct client retries.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead as _, AsyncWrite as _, ReadBuf};
use tokio::net::TcpStream;

/// How the mock server ends kept-alive connections (`bench mock-server` flags). All off by
/// default: a connection stays open as long as the client keeps it.
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct Closing {
    /// Close a connection after this many responses, the last one carrying
    /// `Connection: close` (nginx's keepalive_requests, cpp-httplib's `max=100`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub keep_alive_requests: Option<u32>,
    /// Close a kept-alive connection that has been idle this many milliseconds since its
    /// last response, without notice: a FIN, as servers do after their keep-alive
    /// timeout (nginx's keepalive_timeout; a connection's first request has its own,
    /// longer limit in real servers, and none here).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout_ms: Option<u64>,
    /// Answer every request with `Connection: close` and close the connection after the
    /// response.
    #[arg(long)]
    pub connection_close: bool,
    /// Close the connection after every streamed (SSE) response without
    /// `Connection: close`, as llama.cpp's llama-server does: `at-once` sends the FIN right
    /// after the response's last byte; `on-reuse` keeps the connection open until the
    /// client's next request arrives on it, which is never answered (the client's write
    /// always beats the FIN: the worst case of the race).
    #[arg(long, value_enum, value_name = "WHEN")]
    pub close_after_stream: Option<SilentClose>,
}

/// When a connection closes without notice after a streamed response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SilentClose {
    /// A FIN as soon as the response's last byte is written.
    AtOnce,
    /// When the client sends its next request on the connection (that request is read
    /// and dropped).
    OnReuse,
}

impl Closing {
    /// Whether any response needs the closing middleware.
    pub(super) fn any(&self) -> bool {
        *self != Closing::default()
    }

    /// What the connections' IO must do on its own (no header involved).
    pub(super) fn io_policy(&self) -> IoPolicy {
        IoPolicy {
            idle_timeout: self.idle_timeout_ms.map(Duration::from_millis),
            silent: self.close_after_stream.is_some(),
        }
    }
}

/// What every connection counts towards, shared by the listener and the server handle.
#[derive(Debug, Default)]
pub(super) struct CloseStats {
    connections: AtomicU64,
    dropped: AtomicU64,
}

impl CloseStats {
    pub(super) fn accepted(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }

    /// Connections accepted so far.
    pub(super) fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    /// Requests that arrived on a connection the server had already given up (closed
    /// without notice), read and never answered; at most one per connection.
    pub(super) fn dropped_requests(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// The part of [`Closing`] the connections' IO acts on.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct IoPolicy {
    idle_timeout: Option<Duration>,
    /// Some responses end with a silent close ([`Closing::close_after_stream`]).
    silent: bool,
}

impl IoPolicy {
    /// Whether the IO has anything to do; when not, reads and writes pass straight through.
    fn active(&self) -> bool {
        self.idle_timeout.is_some() || self.silent
    }
}

const NOTHING: u8 = 0;
const CLOSE_AT_FLUSH: u8 = 1;
const CLOSE_ON_REQUEST: u8 = 2;

/// A connection's closing state that handlers (through [`Conn`]) and the connection's IO
/// share.
#[derive(Debug, Default)]
pub(super) struct ConnClosing {
    /// Responses started on the connection.
    pub(super) responses: AtomicU32,
    /// What the IO does once the current response is out ([`CLOSE_AT_FLUSH`],
    /// [`CLOSE_ON_REQUEST`]).
    pending: AtomicU8,
    /// Since when the connection waits for its next request: set when a response ends,
    /// cleared when request bytes arrive.
    idle_since: Mutex<Option<Instant>>,
}

impl ConnClosing {
    fn set_idle(&self, since: Option<Instant>) {
        *self
            .idle_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = since;
    }

    fn idle_since(&self) -> Option<Instant> {
        *self
            .idle_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A response ended (its body was dropped by hyper, its last bytes queued): the
    /// connection is idle from now, and closes as `silent` says.
    pub(super) fn response_ended(&self, silent: Option<SilentClose>) {
        let pending = match silent {
            None => NOTHING,
            Some(SilentClose::AtOnce) => CLOSE_AT_FLUSH,
            Some(SilentClose::OnReuse) => CLOSE_ON_REQUEST,
        };
        self.pending.store(pending, Ordering::SeqCst);
        self.set_idle(Some(Instant::now()));
    }
}

/// The IO side of closing, one per connection: the idle timer, and after a silent close
/// the drain that reads (and drops) what the client still sends.
pub(super) struct IoClosing {
    policy: IoPolicy,
    stats: Arc<CloseStats>,
    /// The running idle timer and the idle period it belongs to.
    idle: Option<(Instant, Pin<Box<tokio::time::Sleep>>)>,
    /// The server has closed its side: reads are drained.
    closed: bool,
    /// A dropped request was counted for this connection.
    counted: bool,
}

impl IoClosing {
    pub(super) fn new(policy: IoPolicy, stats: Arc<CloseStats>) -> Self {
        IoClosing {
            policy,
            stats,
            idle: None,
            closed: false,
            counted: false,
        }
    }

    /// Whether the idle timeout of the connection's current idle period has passed
    /// (registering `cx` for it when not).
    fn idle_expired(&mut self, conn: &ConnClosing, cx: &mut Context<'_>) -> bool {
        let (Some(timeout), Some(since)) = (self.policy.idle_timeout, conn.idle_since()) else {
            self.idle = None;
            return false;
        };
        let timer = match &mut self.idle {
            Some((period, timer)) if *period == since => timer,
            idle => {
                let deadline = tokio::time::Instant::from_std(since + timeout);
                &mut idle
                    .insert((since, Box::pin(tokio::time::sleep_until(deadline))))
                    .1
            }
        };
        timer.as_mut().poll(cx).is_ready()
    }

    fn drop_request(&mut self) {
        if !self.counted {
            self.counted = true;
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Closes the server's side without notice: a FIN; reads are drained from now on.
    fn close(&mut self, stream: &mut TcpStream, cx: &mut Context<'_>) {
        self.closed = true;
        self.idle = None;
        // A plain shutdown(2), ready at once; if the client is gone already, the drain
        // reads its end next.
        let _ = Pin::new(stream).poll_shutdown(cx);
    }

    /// `AsyncRead::poll_read` for a connection that may close on its own; `read` is the
    /// connection's plain read.
    pub(super) fn poll_read(
        &mut self,
        conn: &ConnClosing,
        stream: &mut TcpStream,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
        mut read: impl FnMut(&mut TcpStream, &mut Context<'_>, &mut ReadBuf<'_>) -> Poll<io::Result<()>>,
    ) -> Poll<io::Result<()>> {
        if !self.policy.active() {
            return read(stream, cx, buf);
        }
        loop {
            if self.closed {
                return self.poll_drain(stream, cx);
            }
            if self.idle_expired(conn, cx) {
                self.close(stream, cx);
                continue;
            }
            let before = buf.filled().len();
            ready!(read(stream, cx, buf))?;
            if buf.filled().len() == before {
                // The client closed: hyper ends the connection.
                return Poll::Ready(Ok(()));
            }
            if conn
                .pending
                .compare_exchange(
                    CLOSE_ON_REQUEST,
                    NOTHING,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                )
                .is_ok()
            {
                // The next request on a connection given up: never answered.
                buf.set_filled(before);
                self.drop_request();
                self.close(stream, cx);
                continue;
            }
            conn.set_idle(None);
            self.idle = None;
            return Poll::Ready(Ok(()));
        }
    }

    /// Reads and drops what the client sends after the server closed, until the client
    /// closes too; then hyper sees the end of the connection.
    fn poll_drain(&mut self, stream: &mut TcpStream, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut scratch = [0u8; 4096];
        loop {
            let mut sink = ReadBuf::new(&mut scratch);
            match ready!(Pin::new(&mut *stream).poll_read(cx, &mut sink)) {
                Ok(()) if !sink.filled().is_empty() => self.drop_request(),
                // The client's FIN or RST: the connection is over.
                Ok(()) | Err(_) => return Poll::Ready(Ok(())),
            }
        }
    }

    /// To call after the connection's writes were flushed, on hyper's task. A response
    /// that ended with a silent close `at-once` has now gone out whole, so the FIN
    /// follows it. A response that ended starts an idle period, and its timer is armed
    /// here: hyper does not read again after a response until the client sends
    /// something, so a timer armed only in [`Self::poll_read`] would never wake it.
    pub(super) fn flushed(
        &mut self,
        conn: &ConnClosing,
        stream: &mut TcpStream,
        cx: &mut Context<'_>,
    ) {
        if !self.policy.active() || self.closed {
            return;
        }
        let at_once = self.policy.silent
            && conn
                .pending
                .compare_exchange(CLOSE_AT_FLUSH, NOTHING, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok();
        if at_once || self.idle_expired(conn, cx) {
            self.close(stream, cx);
        }
    }
}
