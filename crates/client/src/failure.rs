//! Which [`FailureKind`] a reqwest transport error is (bench's own HTTP/1.1 client in
//! `h1.rs` knows its kinds where it fails).

use std::error::Error as StdError;
use std::io;

use crate::record::FailureKind;

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
    use std::fmt;

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
