//! The HTTP side of the load generator: sending prepared requests and recording what
//! came back, with the arrival time of every network read.
//!
//! The clock is read first: for each read, `Instant::now()` is taken as soon as the bytes
//! are handed over, before framing; frames inherit the time of the read that completed
//! them. No plugin code runs here; decoding happens later on the decode worker
//! ([`decode`]), so a slow plugin can delay the report, never a timestamp.

// The crates below, under the names this crate's modules use.
pub use bench_record as record;
pub use bench_runtime as runtime;

pub mod cancellation;
pub mod cpu;
pub mod decode;
pub mod endpoints;
mod exchange;
pub mod failure;
pub mod framing;
pub mod h1;
pub mod live;
pub mod load;
pub mod stop;
pub mod structured;
pub mod worker;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use hyper_util::client::legacy::connect::HttpInfo;
use reqwest::header::HeaderMap;

use exchange::ERROR_BODY_LIMIT;
pub use exchange::{PreparedRequest, RawResponse, ResponseHeaders};

use crate::record::{Failure, FailureKind};
use framing::{Framer, Frames, FramingKind};

/// Which HTTP client carries the requests of a run.
// A command line can take it as a flag's value (feature `clap`, which the CLI turns on).
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HttpClientKind {
    /// bench's own HTTP/1.1 client for `http://` URLs, reqwest for `https://`.
    #[default]
    Auto,
    /// bench's own HTTP/1.1 client (plain `http://` only): one task per request owns its
    /// connection, and every socket read is timestamped before any parsing.
    H1,
    /// reqwest (hyper): https, HTTP/2 when the server offers it, proxies from the
    /// environment are not used.
    Reqwest,
}

/// Whether https connections check the server's certificate. Every HTTP client bench opens
/// to the server starts from [`reqwest_builder`], so one setting reaches the requests, the
/// model listing, the tokenizer alignment and the `/metrics` scrapes alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tls {
    /// Check the certificate against the web's root certificates (vLLM's default).
    #[default]
    Verify,
    /// Accept any certificate, self-signed or expired (vLLM's `--insecure`): the traffic is
    /// still encrypted, but nothing says who answers.
    Insecure,
}

/// reqwest's builder with what every client of a run shares: no proxies from the
/// environment (a benchmark measures the server, not a proxy) and the run's [`Tls`].
pub fn reqwest_builder(tls: Tls) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .no_proxy()
        .danger_accept_invalid_certs(tls == Tls::Insecure)
}

/// A configured HTTP client shared by all requests of a run.
#[derive(Clone)]
pub struct HttpClient {
    /// Streams the requests of a plain-HTTP run; `None` when reqwest does.
    h1: Option<Arc<h1::H1Client>>,
    client: reqwest::Client,
    /// reqwest without a connection pool, for resending a request on a new connection.
    fresh: reqwest::Client,
    /// reqwest's connections that have served a response, to tell a reused one.
    served: Arc<ServedConns>,
    url: reqwest::Url,
    framing: FramingKind,
    /// The total time a request may take, for timeout messages.
    timeout: Option<Duration>,
}

/// How long reqwest keeps an idle connection for reuse.
const POOL_IDLE: Duration = Duration::from_secs(90);

/// reqwest's connections that have delivered a response head and may be reused, by local
/// and remote address, with when they last did. reqwest does not say whether a failed
/// request went out on a reused connection, but hyper-util keeps the addresses of the
/// connection it failed on in the error: it was reused when it had served a response
/// before. A closed connection's local port can come back on a new connection; entries
/// older than reqwest's idle limit are not trusted, which leaves only a port that came
/// back within [`POOL_IDLE`] on a connection that then failed its first request (one
/// resend too many; a `Connection: close` answer is not recorded, so a server that
/// closes every connection does not cycle the ports through here).
#[derive(Default)]
struct ServedConns(Mutex<Served>);

#[derive(Default)]
struct Served {
    last: HashMap<(SocketAddr, SocketAddr), Instant>,
    /// The size at which entries past [`POOL_IDLE`] are dropped.
    prune_at: usize,
}

impl ServedConns {
    /// Notes the connection of a response head, unless the response closes it.
    fn remember(&self, response: &reqwest::Response) {
        let Some(info) = response.extensions().get::<HttpInfo>() else {
            return;
        };
        let closes = response.version() == reqwest::Version::HTTP_10
            || response
                .headers()
                .get_all(reqwest::header::CONNECTION)
                .iter()
                .any(|v| {
                    v.as_bytes()
                        .split(|&b| b == b',')
                        .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"))
                });
        if closes {
            return;
        }
        let now = Instant::now();
        let mut served = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        served
            .last
            .insert((info.local_addr(), info.remote_addr()), now);
        if served.last.len() >= served.prune_at {
            served
                .last
                .retain(|_, at| now.duration_since(*at) < POOL_IDLE);
            served.prune_at = (2 * served.last.len()).max(1024);
        }
    }

    /// Whether `e` happened on a connection that had served a response before (and
    /// forgets it: it is dead).
    fn reused(&self, e: &reqwest::Error) -> bool {
        let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
        while let Some(err) = cur {
            if let Some(info) = err
                .downcast_ref::<hyper_util::client::legacy::Error>()
                .and_then(|h| h.connect_info())
            {
                let mut extras = hyper::http::Extensions::new();
                info.get_extras(&mut extras);
                let Some(addr) = extras.get::<HttpInfo>() else {
                    return false;
                };
                let key = (addr.local_addr(), addr.remote_addr());
                let mut served = self.0.lock().unwrap_or_else(PoisonError::into_inner);
                return served
                    .last
                    .remove(&key)
                    .is_some_and(|at| at.elapsed() < POOL_IDLE);
            }
            cur = err.source();
        }
        false
    }
}

/// The reqwest client settings of a run; `pool` false opens a new connection per request.
fn reqwest_client(
    timeout: Option<Duration>,
    pool: bool,
    tls: Tls,
) -> reqwest::Result<reqwest::Client> {
    let mut builder = reqwest_builder(tls)
        .pool_max_idle_per_host(if pool { usize::MAX } else { 0 })
        .pool_idle_timeout(POOL_IDLE)
        .tcp_nodelay(true);
    if let Some(t) = timeout {
        builder = builder.timeout(t);
    }
    builder.build()
}

/// The names [`HttpClient::transport`] reports: bench's own HTTP/1.1 client, reqwest.
pub const TRANSPORTS: [&str; 2] = ["h1", "reqwest"];

/// The transport of that `name` (read back from a shard's records), if it is one.
pub fn transport_name(name: &str) -> Option<&'static str> {
    TRANSPORTS.into_iter().find(|t| *t == name)
}

impl HttpClient {
    /// A client for POST requests to `url`. reqwest's connection pool never limits
    /// concurrency either: hyper opens a new connection whenever none is idle, and every
    /// idle one is kept for reuse. `tls` applies to `https://` URLs, which reqwest carries.
    pub fn new(
        url: &str,
        framing: FramingKind,
        timeout: Option<Duration>,
        kind: HttpClientKind,
        tls: Tls,
    ) -> anyhow::Result<Self> {
        let url =
            reqwest::Url::parse(url).map_err(|e| anyhow::anyhow!("invalid URL {url:?}: {e}"))?;
        let client = reqwest_client(timeout, true, tls)?;
        let fresh = reqwest_client(timeout, false, tls)?;
        let plain = url.scheme() == "http";
        let h1 = match kind {
            HttpClientKind::Auto if plain => true,
            HttpClientKind::Auto | HttpClientKind::Reqwest => false,
            HttpClientKind::H1 if plain => true,
            HttpClientKind::H1 => anyhow::bail!(
                "--http-client h1 speaks plain HTTP only, not {}://; use --http-client reqwest (or auto)",
                url.scheme()
            ),
        };
        let h1 = h1.then(|| Arc::new(h1::H1Client::new(&url, &reqwest::Method::POST, framing)));
        Ok(HttpClient {
            h1,
            client,
            fresh,
            served: Arc::default(),
            url,
            framing,
            timeout,
        })
    }

    /// Opens `n` connections ahead of the run (bench's HTTP/1.1 client only; reqwest
    /// opens its own on demand).
    pub async fn preconnect(&self, n: usize) -> anyhow::Result<()> {
        if let Some(h1) = &self.h1 {
            h1.preconnect(n)
                .await
                .map_err(|e| anyhow::anyhow!("opening {n} connections to {}: {e}", self.url))?;
        }
        Ok(())
    }

    /// Which client carries the requests (for the report).
    pub fn transport(&self) -> &'static str {
        if self.h1.is_some() {
            TRANSPORTS[0]
        } else {
            TRANSPORTS[1]
        }
    }

    /// Sends one request and records every read. Never fails: errors are recorded in the
    /// returned response so that the run keeps every result.
    pub async fn send(&self, req: &PreparedRequest) -> RawResponse {
        self.send_started(req, Instant::now(), None).await
    }

    /// [`Self::send`] for a request whose start time (`RawResponse::start`, vLLM's
    /// `start_time`) the caller took just before: the load generator takes it in send order.
    ///
    /// With `cancel_after`, a request still unanswered that long after it was sent is
    /// cancelled: its connection is closed and its response keeps what had arrived, with
    /// error kind `cancelled` ([`cancellation`]). bench's own client counts the delay from
    /// the request written whole to the socket, as AIPerf does; reqwest does not say when
    /// it wrote the body, so over `https://` the delay counts from the request's start.
    pub async fn send_started(
        &self,
        req: &PreparedRequest,
        start: Instant,
        cancel_after: Option<Duration>,
    ) -> RawResponse {
        let mut out = RawResponse {
            index: req.index,
            status: None,
            headers: ResponseHeaders::default(),
            frames: Frames::default(),
            frame_times: Vec::new(),
            start,
            error: None,
            retried: false,
        };
        let Some(h1) = &self.h1 else {
            let cancelled = match cancel_after {
                None => {
                    self.send_reqwest(req, &mut out).await;
                    false
                }
                Some(delay) => tokio::select! {
                    biased;
                    () = self.send_reqwest(req, &mut out) => false,
                    () = tokio::time::sleep_until((start + delay).into()) => true,
                },
            };
            if cancelled {
                out.error = Some(cancelled_error(cancel_after.unwrap_or_default()));
            }
            return out;
        };
        let mut progress = h1::Progress::default();
        let sent = cancel_after.map(|delay| {
            let (tx, rx) = tokio::sync::oneshot::channel();
            progress.sent = Some(tx);
            async move {
                match rx.await {
                    Ok(at) => tokio::time::sleep_until((at + delay).into()).await,
                    // Never written (it failed first): nothing to cancel.
                    Err(_) => std::future::pending().await,
                }
            }
        });
        let exchange = async {
            let exchange = h1.send(req, &mut out, &mut progress);
            match self.timeout {
                Some(t) => tokio::time::timeout(t, exchange).await.map_err(|_| t),
                None => {
                    exchange.await;
                    Ok(())
                }
            }
        };
        let ended = match sent {
            None => Some(exchange.await),
            // A response that ends as the delay runs out is not cancelled.
            Some(cancel) => tokio::select! {
                biased;
                ended = exchange => Some(ended),
                () = cancel => None,
            },
        };
        match ended {
            Some(Ok(())) => {}
            Some(Err(t)) => out.error = Some(self.timeout_error(t, progress.body_bytes)),
            None => out.error = Some(cancelled_error(cancel_after.unwrap_or_default())),
        }
        out
    }

    /// [`Self::send`] through reqwest.
    async fn send_reqwest(&self, req: &PreparedRequest, out: &mut RawResponse) {
        let Some(mut response) = self.reqwest_head(req, out).await else {
            return;
        };
        let status = response.status();
        out.status = Some(status.as_u16());
        out.headers = ResponseHeaders::Map(std::mem::take(response.headers_mut()));
        if !status.is_success() {
            let mut body = Vec::new();
            while let Ok(Some(chunk)) = response.chunk().await {
                let room = ERROR_BODY_LIMIT.saturating_sub(body.len());
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            let text = String::from_utf8_lossy(&body);
            out.error = Some(FailureKind::Http(status.as_u16()).failure(format_args!(
                "{}{}{}",
                status.canonical_reason().unwrap_or(""),
                if text.trim().is_empty() { "" } else { ": " },
                text.trim()
            )));
            return;
        }
        let mut framer = Framer::new(self.framing);
        let mut received = 0usize;
        loop {
            match response.chunk().await {
                Ok(Some(bytes)) => {
                    let now = Instant::now();
                    received += bytes.len();
                    let n = framer.push(&bytes, &mut out.frames);
                    out.frame_times.extend(std::iter::repeat_n(now, n));
                    if framer.done() {
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    // The unfinished last frame is dropped: it is a piece of an event, not
                    // an event, and would read as malformed and hide the real cause.
                    out.error = Some(self.failure(&e, Some(received)));
                    return;
                }
            }
        }
        let now = Instant::now();
        let n = framer.finish(&mut out.frames);
        out.frame_times.extend(std::iter::repeat_n(now, n));
    }

    /// Sends `req` through reqwest up to its response head; on failure, writes the error
    /// into `out` and returns `None`.
    ///
    /// Resending, as bench's own client does (see `h1::H1Client::request`): when the
    /// request failed on a reused connection that was closed or reset before a response
    /// head arrived (hyper's "connection closed before message completed", or a reset),
    /// it is sent once more on a new connection (a client without a pool) and
    /// `out.retried` is set. hyper resends by itself only a request it had not written
    /// yet (`retry_canceled_requests`); a server that closes a kept-alive connection
    /// while our request is on its way (llama.cpp's `llama-server` after every streamed
    /// response, any server at its idle timeout) drops that request unread, so it was
    /// never served and sending it again is what the client's own reuse owes it. The
    /// caveat is the POST's: a server that died while serving a request on a reused
    /// connection would get it twice; that is counted, and it is the bet browsers make.
    /// vLLM's aiohttp client resends only idempotent methods, never its POST, but it
    /// rarely loses this race: it skips pooled connections whose close it has already
    /// seen, and it is slow to reuse.
    /// Two limits of reqwest: hyper reports a head cut short the same way as no head, so
    /// here a close after a partial head is resent too (bench's own client does not);
    /// and whether the connection was reused is known from its addresses (see
    /// [`ServedConns`]). The request keeps the first attempt's `start` (vLLM's clock
    /// starts before `session.post`), and `--request-timeout` bounds both attempts.
    async fn reqwest_head(
        &self,
        req: &PreparedRequest,
        out: &mut RawResponse,
    ) -> Option<reqwest::Response> {
        let send = |client: &reqwest::Client| {
            client
                .request(req.method.clone(), self.url.clone())
                .headers(req.headers.clone())
                .body(req.body.clone())
        };
        let e = match send(&self.client).send().await {
            Ok(r) => {
                self.served.remember(&r);
                return Some(r);
            }
            Err(e) => e,
        };
        let e = if failure::classify(&e, false) == FailureKind::Reset && self.served.reused(&e) {
            out.retried = true;
            let mut again = send(&self.fresh);
            if let Some(t) = self.timeout {
                again = again.timeout(t.saturating_sub(out.start.elapsed()));
            }
            match again.send().await {
                Ok(r) => return Some(r),
                Err(e) => e,
            }
        } else {
            e
        };
        out.error = Some(self.failure(&e, None));
        None
    }

    /// The record error of a request that outlived `--request-timeout`.
    fn timeout_error(&self, t: Duration, body_bytes: Option<usize>) -> Failure {
        FailureKind::Timeout.failure(format_args!(
            "no complete response within the request timeout of {} s ({})",
            t.as_secs_f64(),
            match body_bytes {
                None => "no response head".to_string(),
                Some(n) => format!("{n} body bytes received"),
            }
        ))
    }

    /// The record error for a transport failure; `body_bytes` is how much of the body had
    /// arrived, `None` when the response head had not.
    fn failure(&self, e: &reqwest::Error, body_bytes: Option<usize>) -> Failure {
        let kind = failure::classify(e, body_bytes.is_some());
        let chain = error_chain(e);
        match kind {
            FailureKind::Timeout => match self.timeout {
                Some(t) => self.timeout_error(t, body_bytes),
                None => kind.failure(chain),
            },
            FailureKind::StreamCut => kind.failure(format_args!(
                "the response body broke off after {} bytes: {chain}",
                body_bytes.unwrap_or(0)
            )),
            FailureKind::Reset => kind.failure(format_args!(
                "the connection was closed before a response head arrived: {chain}"
            )),
            _ => kind.failure(chain),
        }
    }

    /// GET a JSON document from the server (for /v1/models), relative to the base URL.
    pub async fn get_json(
        &self,
        base_url: &str,
        path: &str,
        headers: &HeaderMap,
    ) -> anyhow::Result<serde_json::Value> {
        let url = format!("{}{}", base_url.trim_end_matches('/'), path);
        let resp = self
            .client
            .get(&url)
            .headers(headers.clone())
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("GET {url}: {}", error_chain(&e)))?;
        let status = resp.status();
        if !status.is_success() {
            anyhow::bail!("GET {url}: HTTP {status}");
        }
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| anyhow::anyhow!("GET {url}: {}", error_chain(&e)))?;
        serde_json::from_slice(&bytes).map_err(|e| anyhow::anyhow!("GET {url}: invalid JSON: {e}"))
    }
}

/// The record error of a request the client cancelled on purpose `delay` after sending it.
fn cancelled_error(delay: Duration) -> Failure {
    FailureKind::Cancelled.failure(format_args!(
        "cancelled by the client {} s after it was sent (--request-cancellation-delay)",
        delay.as_secs_f64()
    ))
}

/// An error with its sources, which reqwest keeps behind "error sending request".
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(inner) = cur {
        let msg = inner.to_string();
        if !s.contains(&msg) {
            s.push_str(": ");
            s.push_str(&msg);
        }
        cur = inner.source();
    }
    s
}
