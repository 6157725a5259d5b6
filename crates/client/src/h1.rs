//! bench's own HTTP/1.1 client for the request hot path (plain `http://`).
//!
//! Why not hyper (through reqwest) here: hyper's client runs each connection as its own
//! task and hands every body chunk to the response through a channel, so each streamed
//! token costs two task wake-ups, a `Bytes` and a channel hop before bench sees it. In the
//! ceiling workload (128-token streams from a zero-delay server) that was most of the
//! client's core. Here the request's own task owns the socket: one `read` returns
//! whatever the kernel holds (often dozens of chunks), its arrival time is taken at once,
//! and the chunked encoding and the SSE/NDJSON framing are undone in place. Nothing
//! between the socket and the timestamp can queue.
//!
//! What it speaks: HTTP/1.1 requests with a `Content-Length` body; responses framed by
//! chunked encoding, `Content-Length`, or the end of the connection; keep-alive with a
//! pool of idle connections (one per request in flight at most, so the pool never limits
//! concurrency). https, HTTP/2 and proxies go through reqwest instead (see
//! [`super::HttpClient`]).
//!
//! Connection reuse never costs a request. A connection is pooled only when the response
//! allows it (`Connection: close` and HTTP/1.0 without keep-alive do not), is checked
//! before reuse (one non-blocking `recv`: a FIN or stray bytes that already arrived retire
//! it; so does an idle time near the server's announced `Keep-Alive: timeout`), and a
//! request whose reused connection dies before any byte of the response arrived is sent
//! once more on a new connection (see [`H1Client::request`]). The check alone cannot be
//! enough: llama.cpp's `llama-server` closes the connection right after every streamed
//! response while promising keep-alive, and its FIN can arrive after the next request
//! went out.

use std::io;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::framing::{Framer, FramingKind};
use crate::exchange::{ERROR_BODY_LIMIT, PreparedRequest, RawResponse, ResponseHeaders};
use crate::record::{Failure, FailureKind};

/// Read buffer per connection: large enough that one read takes what a fast server has
/// queued for one stream.
const READ_BUFFER: usize = 64 * 1024;
/// Compact the read buffer when less than this is free at its end.
const MIN_READ: usize = 8 * 1024;
/// The most response headers accepted.
const MAX_HEADERS: usize = 96;
/// The longest chunk-size or trailer line accepted.
const MAX_LINE: usize = 4096;
/// Handshakes in flight at once while preconnecting (below the usual listen backlog).
const PRECONNECT_AT_ONCE: usize = 64;
/// After the stream's end marker (`[DONE]`), how long the rest of the body (the chunked
/// terminator) may take before the connection is dropped instead of reused.
const DRAIN_LIMIT: Duration = Duration::from_millis(100);
/// How long before the end of a server's announced idle timeout (`Keep-Alive:
/// timeout=N`) a pooled connection stops being reused: the server's clock started when it
/// sent the response, a little before our read, and a request sent at the last moment
/// would race its close. At most a quarter of the timeout.
const IDLE_MARGIN: Duration = Duration::from_secs(1);

/// An HTTP/1.1 client for one `http://` URL.
pub struct H1Client {
    /// `host:port` to connect to (resolved per new connection).
    authority: String,
    /// `POST /path HTTP/1.1\r\nhost: ...\r\n`, shared by every request.
    head_prefix: Vec<u8>,
    /// The `host` header line alone, for requests whose headers set their own host.
    host_line: Vec<u8>,
    framing: FramingKind,
    idle: Mutex<Vec<Conn>>,
}

/// One open connection with its read buffer (kept across requests).
struct Conn {
    stream: TcpStream,
    buf: Box<[u8]>,
    /// Unconsumed bytes are `buf[pos..len]`.
    pos: usize,
    len: usize,
    /// The request being written, reused.
    out: Vec<u8>,
    /// When the connection stops being reused: the server's announced idle timeout, less
    /// a margin, from the end of the last response. `None` when it announced none.
    reuse_until: Option<Instant>,
}

impl Conn {
    fn new(stream: TcpStream) -> Self {
        Conn {
            stream,
            buf: vec![0; READ_BUFFER].into_boxed_slice(),
            pos: 0,
            len: 0,
            out: Vec::new(),
            reuse_until: None,
        }
    }

    fn data(&self) -> &[u8] {
        &self.buf[self.pos..self.len]
    }

    fn consume(&mut self, n: usize) {
        self.pos += n;
        if self.pos == self.len {
            self.pos = 0;
            self.len = 0;
        }
    }

    /// Reads once more into the buffer; `Ok(0)` is the end of the connection.
    async fn fill(&mut self) -> io::Result<usize> {
        if self.buf.len() - self.len < MIN_READ && self.pos > 0 {
            self.buf.copy_within(self.pos..self.len, 0);
            self.len -= self.pos;
            self.pos = 0;
        }
        if self.len == self.buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a response head larger than {} KiB", READ_BUFFER / 1024),
            ));
        }
        let n = self.stream.read(&mut self.buf[self.len..]).await?;
        self.len += n;
        Ok(n)
    }

    /// Whether an idle connection can take a request: it is not near the server's idle
    /// timeout, and the server has neither closed it nor sent anything unasked.
    fn is_reusable(&self) -> bool {
        if self
            .reuse_until
            .is_some_and(|until| Instant::now() >= until)
        {
            return false;
        }
        socket_is_quiet(&self.stream)
    }

    /// Readies a connection whose response allowed keep-alive for the pool.
    fn keep(&mut self, idle_limit: Option<Duration>) {
        self.reuse_until = idle_limit.map(|limit| {
            let margin = IDLE_MARGIN.min(limit / 4);
            Instant::now() + (limit - margin)
        });
    }
}

/// Whether nothing (no byte, no FIN, no error) waits on the socket, asked of the kernel.
///
/// Not tokio's `try_read`: it answers from tokio's readiness flag, which lags the socket
/// (a short read clears it, and a FIN that arrived since sets it only when the reactor
/// next polls), so it reports an already closed connection as quiet without a syscall;
/// against llama-server that was every connection. The cost is one `recv` per reuse,
/// measured at 0.31 µs on this machine, 0.3% of a request at the client's ceiling of
/// about 11,000 requests a second on one core.
#[cfg(unix)]
fn socket_is_quiet(stream: &TcpStream) -> bool {
    use std::os::fd::AsRawFd as _;
    let mut probe = 0u8;
    // SAFETY: `recv` writes at most one byte into `probe`, which lives across the call,
    // on a socket `stream` keeps open; MSG_PEEK leaves what is there in place.
    let n = unsafe {
        libc::recv(
            stream.as_raw_fd(),
            (&mut probe as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock
}

/// [`socket_is_quiet`] where there is no `recv` to call: tokio's view of the socket.
#[cfg(not(unix))]
fn socket_is_quiet(stream: &TcpStream) -> bool {
    let mut probe = [0u8; 1];
    matches!(stream.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
}

/// How the response body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyKind {
    Chunked,
    Length(u64),
    UntilClose,
    Empty,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    Size,
    Data(u64),
    DataEnd,
    Trailer,
}

/// Undoes the body's transfer framing incrementally, across reads.
#[derive(Debug)]
struct Body {
    kind: BodyKind,
    chunk: ChunkState,
}

/// What the next bytes of a body are.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// Payload at `input[start..end]`.
    Data(usize, usize),
    /// Consumed what it could; more bytes are needed.
    More,
    /// The body is complete.
    End,
    /// The framing is broken.
    Invalid(&'static str),
}

impl Body {
    fn new(kind: BodyKind) -> Self {
        Body {
            kind,
            chunk: ChunkState::Size,
        }
    }

    /// The next step over `input`, and how many bytes of it were consumed.
    fn next(&mut self, input: &[u8]) -> (usize, Step) {
        match self.kind {
            BodyKind::Empty | BodyKind::Length(0) => (0, Step::End),
            BodyKind::Length(rem) => {
                if input.is_empty() {
                    return (0, Step::More);
                }
                let n = rem.min(input.len() as u64) as usize;
                self.kind = BodyKind::Length(rem - n as u64);
                (n, Step::Data(0, n))
            }
            BodyKind::UntilClose => {
                if input.is_empty() {
                    (0, Step::More)
                } else {
                    (input.len(), Step::Data(0, input.len()))
                }
            }
            BodyKind::Chunked => self.next_chunked(input),
        }
    }

    fn next_chunked(&mut self, input: &[u8]) -> (usize, Step) {
        let mut used = 0;
        loop {
            let rest = &input[used..];
            match self.chunk {
                ChunkState::Size => {
                    let Some(nl) = memchr::memchr(b'\n', rest) else {
                        return if rest.len() > MAX_LINE {
                            (used, Step::Invalid("a chunk-size line that never ends"))
                        } else {
                            (used, Step::More)
                        };
                    };
                    let Some(size) = chunk_size(&rest[..nl]) else {
                        return (used, Step::Invalid("an invalid chunk-size line"));
                    };
                    used += nl + 1;
                    self.chunk = if size == 0 {
                        ChunkState::Trailer
                    } else {
                        ChunkState::Data(size)
                    };
                }
                ChunkState::Data(rem) => {
                    if rest.is_empty() {
                        return (used, Step::More);
                    }
                    let n = rem.min(rest.len() as u64) as usize;
                    self.chunk = if n as u64 == rem {
                        ChunkState::DataEnd
                    } else {
                        ChunkState::Data(rem - n as u64)
                    };
                    return (used + n, Step::Data(used, used + n));
                }
                ChunkState::DataEnd => match rest {
                    [b'\r', b'\n', ..] => {
                        used += 2;
                        self.chunk = ChunkState::Size;
                    }
                    [b'\n', ..] => {
                        used += 1;
                        self.chunk = ChunkState::Size;
                    }
                    [] | [b'\r'] => return (used, Step::More),
                    _ => return (used, Step::Invalid("a chunk longer than its size")),
                },
                ChunkState::Trailer => {
                    let Some(nl) = memchr::memchr(b'\n', rest) else {
                        return if rest.len() > MAX_LINE {
                            (used, Step::Invalid("a trailer line that never ends"))
                        } else {
                            (used, Step::More)
                        };
                    };
                    let line = &rest[..nl];
                    used += nl + 1;
                    if line.is_empty() || line == b"\r" {
                        return (used, Step::End);
                    }
                }
            }
        }
    }
}

/// The size of a chunk-size line (`1a;ext=1\r`), or `None` when it is not one.
fn chunk_size(line: &[u8]) -> Option<u64> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let end = line
        .iter()
        .position(|&b| b == b';' || b == b' ' || b == b'\t')
        .unwrap_or(line.len());
    let digits = &line[..end];
    if digits.is_empty() || digits.len() > 15 {
        return None;
    }
    digits.iter().try_fold(0u64, |acc, &b| {
        let d = (b as char).to_digit(16)?;
        Some(acc * 16 + u64::from(d))
    })
}

/// The parts of a response head the client acts on.
struct Head {
    status: u16,
    len: usize,
    body: BodyKind,
    keep_alive: bool,
    /// The server's idle timeout (`Keep-Alive: timeout=N`), when it announces one.
    idle_limit: Option<Duration>,
}

/// The `timeout=N` (seconds) of a `Keep-Alive` header value such as `timeout=5, max=100`.
fn keep_alive_timeout(value: &[u8]) -> Option<Duration> {
    value.split(|&b| b == b',').find_map(|param| {
        let (name, secs) = param.trim_ascii().split_at_checked(8)?;
        if !name.eq_ignore_ascii_case(b"timeout=") {
            return None;
        }
        let secs: u64 = std::str::from_utf8(secs).ok()?.trim().parse().ok()?;
        Some(Duration::from_secs(secs))
    })
}

/// Parses a complete response head at the start of `data`; `Ok(None)` when incomplete.
fn parse_head(data: &[u8], method_is_head: bool) -> Result<Option<Head>, String> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(data) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(format!("the response head is not valid HTTP/1.x: {e}")),
    };
    let status = resp.code.unwrap_or(0);
    let mut chunked = false;
    let mut length = None;
    let mut close = resp.version == Some(0);
    let mut idle_limit = None;
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = h
                .value
                .split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    format!(
                        "invalid content-length {:?}",
                        String::from_utf8_lossy(h.value)
                    )
                })?;
            if length.is_some_and(|l| l != n) {
                return Err("conflicting content-length headers".into());
            }
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("connection") {
            for token in h.value.split(|&b| b == b',') {
                let token = token.trim_ascii();
                if token.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") && resp.version == Some(0) {
                    close = false;
                }
            }
        } else if h.name.eq_ignore_ascii_case("keep-alive") {
            idle_limit = keep_alive_timeout(h.value);
        }
    }
    let body = if method_is_head || status == 204 || status == 304 || (100..200).contains(&status) {
        BodyKind::Empty
    } else if chunked {
        BodyKind::Chunked
    } else if let Some(n) = length {
        BodyKind::Length(n)
    } else {
        BodyKind::UntilClose
    };
    Ok(Some(Head {
        status,
        len,
        body,
        keep_alive: !close && body != BodyKind::UntilClose,
        idle_limit,
    }))
}

/// Why an attempt got no response head.
enum NoHead {
    /// The connection failed (the write failed, or it closed or reset) before any byte
    /// of a response arrived: on a reused connection, the server had given it up.
    Unanswered(Failure),
    /// Anything else: a refused connection, bytes that are not a response head.
    Failed(Failure),
}

fn fail(kind: FailureKind, message: impl Into<String>) -> Failure {
    Failure {
        kind,
        message: message.into(),
    }
}

/// How far a request got; read after a timeout to say what had arrived.
#[derive(Default)]
pub struct Progress {
    /// Body bytes received, once the response head arrived.
    pub body_bytes: Option<usize>,
    /// Told when the request was first written whole to the socket: a request the client
    /// cancels on purpose counts its delay from then (see `crate::cancellation`). A resend
    /// on a new connection (see [`H1Client::request`]) keeps that first moment.
    pub sent: Option<tokio::sync::oneshot::Sender<Instant>>,
}

impl H1Client {
    /// A client for `url`, which must be `http://`.
    pub fn new(url: &reqwest::Url, method: &reqwest::Method, framing: FramingKind) -> Self {
        let host = url.host_str().unwrap_or("localhost");
        let port = url.port_or_known_default().unwrap_or(80);
        // IPv6 literals keep their brackets in both places.
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]")
        } else {
            host.to_string()
        };
        let authority = format!("{host}:{port}");
        let host_header = match url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.clone(),
        };
        let mut target = url.path().to_string();
        if let Some(q) = url.query() {
            target.push('?');
            target.push_str(q);
        }
        let host_line = format!("host: {host_header}\r\n").into_bytes();
        let mut head_prefix = format!("{method} {target} HTTP/1.1\r\n").into_bytes();
        head_prefix.extend_from_slice(&host_line);
        H1Client {
            authority,
            head_prefix,
            host_line,
            framing,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Sends one request and fills `out` with what came back. Errors are written into
    /// `out.error`, never returned, so the run keeps every result.
    pub async fn send(
        &self,
        req: &PreparedRequest,
        out: &mut RawResponse,
        progress: &mut Progress,
    ) {
        if let Err(f) = self.exchange(req, out, progress).await {
            out.error = Some(f);
        }
    }

    async fn exchange(
        &self,
        req: &PreparedRequest,
        out: &mut RawResponse,
        progress: &mut Progress,
    ) -> Result<(), Failure> {
        let (mut conn, head) = self.request(req, &mut out.retried, progress).await?;
        let status = head.status;
        out.status = Some(status);
        out.headers = ResponseHeaders::Raw(Bytes::copy_from_slice(&conn.data()[..head.len]));
        conn.consume(head.len);
        let mut body = Body::new(head.body);
        progress.body_bytes = Some(0);
        if !(200..300).contains(&status) {
            let mut kept = Vec::new();
            let ended = self
                .read_body(&mut conn, &mut body, progress, |bytes, _| {
                    let room = ERROR_BODY_LIMIT.saturating_sub(kept.len());
                    kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
                    false
                })
                .await;
            // Only at the body's own end: bytes past it are not ours to keep.
            if ended.is_ok_and(|e| e == BodyEnd::Complete) && head.keep_alive {
                conn.keep(head.idle_limit);
                self.put_back(conn);
            }
            let text = String::from_utf8_lossy(&kept);
            let reason = reqwest::StatusCode::from_u16(status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("");
            return Err(fail(
                FailureKind::Http(status),
                format!(
                    "{reason}{}{}",
                    if text.trim().is_empty() { "" } else { ": " },
                    text.trim()
                ),
            ));
        }
        let mut framer = Framer::new(self.framing);
        let mut last_read = Instant::now();
        let frames = &mut out.frames;
        let times = &mut out.frame_times;
        let ended = self
            .read_body(&mut conn, &mut body, progress, |bytes, at| {
                last_read = at;
                let n = framer.push(bytes, frames);
                times.extend(std::iter::repeat_n(at, n));
                framer.done()
            })
            .await;
        match ended {
            Ok(BodyEnd::Complete) => {
                let n = framer.finish(frames);
                times.extend(std::iter::repeat_n(last_read, n));
                if head.keep_alive {
                    conn.keep(head.idle_limit);
                    self.put_back(conn);
                }
                Ok(())
            }
            // The stream said it is done; the transfer framing's own end did not follow
            // in time, so the connection is not reused.
            Ok(BodyEnd::Abandoned) => Ok(()),
            Err(f) => Err(f),
        }
    }

    /// Connects (or reuses an idle connection), writes the request and reads the response
    /// head, skipping `1xx` heads.
    ///
    /// A reused connection can die under the request: a server closes idle connections
    /// whenever it likes (an idle timeout, a request limit, or, like llama.cpp's
    /// `llama-server`, after every streamed response while promising keep-alive), and
    /// its FIN can reach us after [`Conn::is_reusable`] looked and after the request went
    /// out. When a reused connection fails before any byte of the response arrived (the
    /// write fails, or it closes or resets), the request is sent once more on a new
    /// connection and `retried` is set. Never after a response byte (the server was
    /// answering), never for a new connection's failure (that is the server's), never
    /// twice (the second attempt is on a new connection).
    ///
    /// Why resending is sound: a server that closes a kept-alive connection drops what
    /// arrives on it unread (cpp-httplib reads and discards it before closing, others
    /// reset), so the request was never served. A POST is not idempotent, and a server
    /// that crashed mid-request on a reused connection would get it a second time; that
    /// is the bet browsers make (Chromium resends a request, POST included, when a
    /// reused connection closes or resets before the response head), it is counted
    /// (`retried`), and not resending would charge the client's own reuse to the server
    /// as a `reset`. vLLM's aiohttp client resends only idempotent methods, so never its
    /// POST; it loses the race less often because it is slower to reuse and skips
    /// pooled connections whose close it has already seen, which is the check
    /// [`Self::checkout`] makes.
    ///
    /// Timing: the request's `start` (and so its TTFT and latency) stays at the first
    /// attempt, as vLLM's clock starts before `session.post` and would include anything
    /// the client does to get the answer; the retry's reconnect is the client's cost of
    /// the server's close, as a fresh connection's handshake is in vLLM's numbers.
    async fn request(
        &self,
        req: &PreparedRequest,
        retried: &mut bool,
        progress: &mut Progress,
    ) -> Result<(Conn, Head), Failure> {
        let mut fresh_only = false;
        loop {
            let (mut conn, reused) = self.checkout(fresh_only).await?;
            match self.attempt(&mut conn, req, progress).await {
                Ok(head) => return Ok((conn, head)),
                Err(NoHead::Unanswered(_)) if reused => {
                    *retried = true;
                    fresh_only = true;
                }
                Err(NoHead::Unanswered(f) | NoHead::Failed(f)) => return Err(f),
            }
        }
    }

    /// Writes the request on `conn` and reads the response head.
    async fn attempt(
        &self,
        conn: &mut Conn,
        req: &PreparedRequest,
        progress: &mut Progress,
    ) -> Result<Head, NoHead> {
        let method_is_head = req.method == reqwest::Method::HEAD;
        let closed = |why: String| {
            fail(
                FailureKind::Reset,
                format!("the connection was closed before a response head arrived{why}"),
            )
        };
        self.write_request(conn, req);
        if let Err(e) = conn.stream.write_all(&conn.out).await {
            return Err(NoHead::Unanswered(closed(format!(": {e}"))));
        }
        if let Some(sent) = progress.sent.take() {
            // Nobody listening is fine: the request was not to be cancelled after all.
            let _ = sent.send(Instant::now());
        }
        let mut answered = false;
        loop {
            match parse_head(conn.data(), method_is_head) {
                Ok(Some(head)) if (100..200).contains(&head.status) => {
                    conn.consume(head.len);
                    continue;
                }
                Ok(Some(head)) => return Ok(head),
                Ok(None) => {}
                Err(why) => return Err(NoHead::Failed(fail(FailureKind::Transport, why))),
            }
            let lost = match conn.fill().await {
                Ok(0) => closed(String::new()),
                Ok(_) => {
                    answered = true;
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                    return Err(NoHead::Failed(fail(FailureKind::Transport, e.to_string())));
                }
                Err(e) => closed(format!(": {e}")),
            };
            return Err(if answered {
                NoHead::Failed(lost)
            } else {
                NoHead::Unanswered(lost)
            });
        }
    }

    /// Reads the body to its end, handing each payload piece and the arrival time of the
    /// read that brought it to `sink`. `sink` returns true once the stream is logically
    /// complete (`[DONE]`); the rest of the body is then read only as long as
    /// [`DRAIN_LIMIT`] allows.
    async fn read_body(
        &self,
        conn: &mut Conn,
        body: &mut Body,
        progress: &mut Progress,
        mut sink: impl FnMut(&[u8], Instant) -> bool,
    ) -> Result<BodyEnd, Failure> {
        let mut at = Instant::now();
        let mut done = false;
        loop {
            let (used, step) = body.next(conn.data());
            match step {
                Step::Data(start, end) => {
                    done |= sink(&conn.data()[start..end], at);
                    conn.consume(used);
                }
                Step::End => {
                    conn.consume(used);
                    // Bytes past the end of a response are not ours to keep.
                    return Ok(if conn.data().is_empty() {
                        BodyEnd::Complete
                    } else {
                        BodyEnd::Abandoned
                    });
                }
                Step::Invalid(why) => {
                    return Err(fail(
                        FailureKind::StreamCut,
                        format!(
                            "the response body broke off after {} bytes: {why}",
                            progress.body_bytes.unwrap_or(0)
                        ),
                    ));
                }
                Step::More => {
                    conn.consume(used);
                    let read = if done {
                        match tokio::time::timeout(DRAIN_LIMIT, conn.fill()).await {
                            Ok(r) => r,
                            Err(_) => return Ok(BodyEnd::Abandoned),
                        }
                    } else {
                        conn.fill().await
                    };
                    at = Instant::now();
                    match read {
                        Ok(0) if body.kind == BodyKind::UntilClose => {
                            return Ok(BodyEnd::Abandoned);
                        }
                        Ok(0) if done => return Ok(BodyEnd::Abandoned),
                        Ok(0) => {
                            return Err(fail(
                                FailureKind::StreamCut,
                                format!(
                                    "the response body broke off after {} bytes: the connection was closed",
                                    progress.body_bytes.unwrap_or(0)
                                ),
                            ));
                        }
                        Ok(n) => {
                            if let Some(b) = &mut progress.body_bytes {
                                *b += n;
                            }
                        }
                        Err(_) if done => return Ok(BodyEnd::Abandoned),
                        Err(e) => {
                            return Err(fail(
                                FailureKind::StreamCut,
                                format!(
                                    "the response body broke off after {} bytes: {e}",
                                    progress.body_bytes.unwrap_or(0)
                                ),
                            ));
                        }
                    }
                }
            }
        }
    }

    /// Writes the request into the connection's output buffer.
    fn write_request(&self, conn: &mut Conn, req: &PreparedRequest) {
        let out = &mut conn.out;
        out.clear();
        let own_host = req.headers.contains_key(reqwest::header::HOST);
        if own_host {
            let prefix_len = self.head_prefix.len() - self.host_line.len();
            out.extend_from_slice(&self.head_prefix[..prefix_len]);
        } else {
            out.extend_from_slice(&self.head_prefix);
        }
        for (name, value) in &req.headers {
            if name == reqwest::header::CONTENT_LENGTH || name == reqwest::header::TRANSFER_ENCODING
            {
                continue;
            }
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"content-length: ");
        out.extend_from_slice(itoa::Buffer::new().format(req.body.len()).as_bytes());
        out.extend_from_slice(b"\r\n\r\n");
        out.extend_from_slice(&req.body);
    }

    /// An idle connection that is still open (`true`: it came from the pool, opened
    /// ahead by [`Self::preconnect`] or used before), or a new one (`false`).
    async fn checkout(&self, fresh_only: bool) -> Result<(Conn, bool), Failure> {
        if !fresh_only {
            loop {
                let conn = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
                match conn {
                    Some(c) if c.is_reusable() => return Ok((c, true)),
                    Some(_) => continue,
                    None => break,
                }
            }
        }
        let stream = TcpStream::connect(&self.authority)
            .await
            .map_err(|e| fail(FailureKind::Connect, format!("{}: {e}", self.authority)))?;
        // Requests go out whole at once; Nagle would hold back the next one.
        let _ = stream.set_nodelay(true);
        Ok((Conn::new(stream), false))
    }

    /// Opens connections until `n` are idle, before the clock starts, so that the first
    /// requests of a run do not measure TCP handshakes made all at once. At most
    /// [`PRECONNECT_AT_ONCE`] handshakes are in flight: thousands at once can overflow the
    /// server's accept queue, and connections the client believes open are later reset.
    pub async fn preconnect(&self, n: usize) -> std::io::Result<()> {
        use futures_util::StreamExt as _;
        let have = self.idle.lock().unwrap_or_else(|p| p.into_inner()).len();
        let mut opened = futures_util::stream::iter(have..n)
            .map(|_| TcpStream::connect(&self.authority))
            .buffer_unordered(PRECONNECT_AT_ONCE);
        while let Some(stream) = opened.next().await {
            let stream = stream?;
            let _ = stream.set_nodelay(true);
            self.put_back(Conn::new(stream));
        }
        Ok(())
    }

    fn put_back(&self, conn: Conn) {
        self.idle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(conn);
    }
}

/// How a body read ended without an error.
#[derive(Debug, PartialEq, Eq)]
enum BodyEnd {
    /// At the transfer framing's end: the connection can take another request.
    Complete,
    /// The stream was complete but the connection is not fit for reuse.
    Abandoned,
}

#[cfg(test)]
mod tests;
