//! The mock server's connections: its listener (plain TCP with `TCP_NODELAY` and, on Linux,
//! kernel receive timestamps), each connection's IO, which a handler can reset and which
//! closes as [`super::Closing`] says, a handler's hold on its connection ([`Conn`]), and
//! the closing middleware that counts a connection's responses.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::body::{Body, HttpBody};
use axum::extract::connect_info::Connected;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use axum::serve::{IncomingStream, Listener};
use bytes::Bytes;
use hyper::body::{Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

use super::arrival::LastArrival;
use super::closing::{CloseStats, Closing, ConnClosing, IoClosing, IoPolicy, SilentClose};

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

/// The closing middleware: counts the connection's responses, adds `Connection: close`
/// where the options ask for it, and wraps the body so that its end marks the
/// connection idle and, after a streamed response, due for a silent close.
pub(super) async fn close_connections(
    State(closing): State<Arc<Closing>>,
    ConnectInfo(conn): ConnectInfo<Conn>,
    request: Request,
    next: Next,
) -> Response {
    let n = conn.closing().responses.fetch_add(1, Ordering::SeqCst) + 1;
    let mut response = next.run(request).await;
    let last = closing.connection_close || closing.keep_alive_requests.is_some_and(|max| n >= max);
    if last {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    let streamed = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let silent = if streamed && !last {
        closing.close_after_stream
    } else {
        None
    };
    let (parts, body) = response.into_parts();
    let body = Body::new(Tracked {
        inner: body,
        conn,
        silent,
    });
    Response::from_parts(parts, body)
}

/// A response body that tells its connection when it is done: hyper drops a body once its
/// end is queued for writing, before the write.
struct Tracked {
    inner: Body,
    conn: Conn,
    silent: Option<SilentClose>,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.conn.closing().response_ended(self.silent);
    }
}
