//! One exchange as the HTTP clients see it: the request, built before the clock starts,
//! and the response as it came back. Both clients (`h1` and reqwest's) share these.

use std::time::Instant;

use bytes::Bytes;
use reqwest::header::HeaderMap;

use crate::framing::Frames;
use crate::record::Failure;

/// The most body bytes of an error response kept for the error message.
pub(crate) const ERROR_BODY_LIMIT: usize = 512;

/// A request ready to send: built by the backend plugin before the clock starts.
#[derive(Debug, Clone)]
pub struct PreparedRequest {
    pub index: usize,
    pub request_id: String,
    pub method: reqwest::Method,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub prompt_len: u32,
    pub expected_output_len: u32,
    /// The conversation this request is a turn of (multi-turn workloads): its response
    /// goes back to the dataset plugin for the next turn.
    pub session: Option<crate::runtime::Session>,
    /// The request's output constraint, compiled: the decode worker checks the response
    /// against it (structured output).
    pub check: Option<crate::structured::OutputCheck>,
}

impl PreparedRequest {
    /// This request sent again by a run bounded by time (`--duration`), in round `round`
    /// (1 for its second send) at the run's position `index`: the same method, headers and
    /// body, under its own index, and its own id (`<id>-<round>`) in the record and in an
    /// `x-request-id` header that carried the id, so that the server and the records tell
    /// the sends apart. One clone per send: the body is shared, the headers copied.
    pub fn again(&self, index: usize, round: usize) -> PreparedRequest {
        let mut again = self.clone();
        again.index = index;
        again.request_id = format!("{}-{round}", self.request_id);
        if again
            .headers
            .get("x-request-id")
            .is_some_and(|v| v.as_bytes() == self.request_id.as_bytes())
            && let Ok(value) = reqwest::header::HeaderValue::from_str(&again.request_id)
        {
            again.headers.insert("x-request-id", value);
        }
        again
    }
}

/// What the network delivered for one request, before decoding.
#[derive(Debug)]
pub struct RawResponse {
    pub index: usize,
    /// HTTP status and headers, when a response head arrived.
    pub status: Option<u16>,
    /// Kept as received (no parsing on the receive path); the decode worker turns them
    /// into strings for the backend plugin.
    pub headers: ResponseHeaders,
    /// Frame payloads laid end to end, as the decoder receives them.
    pub frames: Frames,
    /// Arrival time of each frame (the read that completed it).
    pub frame_times: Vec<Instant>,
    /// When the request was handed to the HTTP client.
    pub start: Instant,
    /// A transport or HTTP failure that makes the request fail whatever the frames say. After a transport error mid-body, `frames`
    /// holds the complete frames that arrived before it.
    pub error: Option<Failure>,
    /// Whether the request was sent a second time on a fresh connection because the
    /// connection it was first sent on was closed before any byte of the response
    /// arrived (a kept-alive connection the server had already given up). Counted in the
    /// client diagnostics.
    pub retried: bool,
}

/// Response headers as the transport delivered them.
#[derive(Debug)]
pub enum ResponseHeaders {
    /// From reqwest, already parsed.
    Map(HeaderMap),
    /// The raw response head from the HTTP/1.1 client ([`h1`]), status line included.
    Raw(Bytes),
}

impl Default for ResponseHeaders {
    fn default() -> Self {
        ResponseHeaders::Map(HeaderMap::new())
    }
}

impl ResponseHeaders {
    /// The header lines (`name: value`, each ending in a line break) without the status
    /// line and the blank line after them: the `headers` of the backend contract's
    /// `response-head`, handed to the plugin as one list of bytes.
    pub fn lines(&self) -> Vec<u8> {
        match self {
            ResponseHeaders::Map(map) => {
                let mut out = Vec::with_capacity(map.len() * 32);
                for (name, value) in map {
                    out.extend_from_slice(name.as_str().as_bytes());
                    out.extend_from_slice(b": ");
                    out.extend_from_slice(value.as_bytes());
                    out.extend_from_slice(b"\r\n");
                }
                out
            }
            ResponseHeaders::Raw(head) => {
                let after_status = head
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(head.len(), |i| i + 1);
                let lines = &head[after_status..];
                let lines = lines
                    .strip_suffix(b"\r\n")
                    .or_else(|| lines.strip_suffix(b"\n"))
                    .unwrap_or(lines);
                lines.to_vec()
            }
        }
    }
}
