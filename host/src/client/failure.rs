//! Why a request failed: a small fixed set of kinds, written as the `kind` of a record's
//! `kind: message` error so that reports can count failures by kind and a reader can tell
//! a server fault from a network fault from a plugin fault at a glance.

use std::error::Error as StdError;
use std::fmt;
use std::io;

/// The cause of a failed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            FailureKind::Http(status) => return write!(f, "http-{status}"),
            FailureKind::Connect => "connect",
            FailureKind::Reset => "reset",
            FailureKind::StreamCut => "stream-cut",
            FailureKind::Timeout => "timeout",
            FailureKind::InvalidChunk => "invalid-chunk",
            FailureKind::ServerError => "server-error",
            FailureKind::NoOutput => "no-output",
            FailureKind::Decode => "decode",
            FailureKind::Transport => "transport",
        };
        f.write_str(name)
    }
}

impl FailureKind {
    /// The error text of a record: `kind: message`.
    pub fn error(self, message: impl fmt::Display) -> String {
        format!("{self}: {message}")
    }
}

/// The kind of a reqwest error. `head_received` tells whether a response head had
/// arrived, that is whether the error hit the body rather than the exchange before it.
pub fn classify(e: &reqwest::Error, head_received: bool) -> FailureKind {
    if e.is_connect() {
        FailureKind::Connect
    } else if e.is_timeout() {
        FailureKind::Timeout
    } else if head_received {
        // Reads of the body fail only when the connection breaks or the body's framing
        // (chunk sizes, content length) does not add up: either way the stream was cut.
        FailureKind::StreamCut
    } else if closed_by_peer(e) {
        FailureKind::Reset
    } else {
        FailureKind::Transport
    }
}

/// Whether the connection was closed or reset under the request: an I/O error of that
/// kind, or hyper's "connection closed before message completed" somewhere in the chain.
fn closed_by_peer(e: &(dyn StdError + 'static)) -> bool {
    let mut cur: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<io::Error>()
            && matches!(
                io.kind(),
                io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::BrokenPipe
                    | io::ErrorKind::UnexpectedEof
            )
        {
            return true;
        }
        if let Some(h) = err.downcast_ref::<hyper::Error>()
            && (h.is_incomplete_message() || h.is_canceled())
        {
            return true;
        }
        cur = err.source();
    }
    false
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
        ];
        for (kind, name) in kinds {
            assert_eq!(kind.to_string(), name);
        }
        assert_eq!(FailureKind::Reset.error("gone"), "reset: gone");
    }

    #[test]
    fn io_resets_anywhere_in_the_chain_mean_closed_by_peer() {
        #[derive(Debug)]
        struct Wrapper(io::Error);
        impl fmt::Display for Wrapper {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("wrapper")
            }
        }
        impl StdError for Wrapper {
            fn source(&self) -> Option<&(dyn StdError + 'static)> {
                Some(&self.0)
            }
        }
        let reset = Wrapper(io::ErrorKind::ConnectionReset.into());
        assert!(closed_by_peer(&reset));
        let other = Wrapper(io::ErrorKind::InvalidData.into());
        assert!(!closed_by_peer(&other));
    }
}
