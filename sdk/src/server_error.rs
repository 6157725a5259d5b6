//! An error a server reports inside a successful response (an `error` member of a frame),
//! as every decoder reads it, and the quoted start of a bad frame for error messages.

use crate::EventKind;
use crate::json::{self, Cursor, Str};

/// How much of a bad frame an error message quotes.
const QUOTE_BYTES: usize = 120;

/// An error the server reported inside a successful response.
#[derive(Debug, Clone, Copy)]
pub enum ServerError {
    /// The error's message (the `error` string, or its `message` member).
    Message(Str),
    /// The raw JSON of an error without a message.
    Raw { start: usize, end: usize },
}

impl ServerError {
    /// The error event of this error, read from `bytes` (the frame it is in): "the server
    /// reported an error: " and its message, or its JSON quoted when it has none.
    pub fn event(self, bytes: &[u8]) -> EventKind {
        let message = match self {
            ServerError::Message(s) => s.text(bytes),
            ServerError::Raw { start, end } => quote(&bytes[start..end]),
        };
        EventKind::server_error(format!("the server reported an error: {message}"))
    }
}

/// The error event of a frame that is not valid JSON (`e`), quoting its start.
pub fn invalid_frame(bytes: &[u8], e: &json::Error) -> EventKind {
    EventKind::malformed_frame(format!(
        "invalid JSON in a response frame: {e}; the frame starts {}",
        quote(bytes)
    ))
}

/// Reads an `error` member: `None` for null, else its message (a string, or an object's
/// `message`), or the raw JSON of an error without one.
pub fn server_error(v: &mut Cursor<'_>) -> json::Result<Option<ServerError>> {
    if v.null()? {
        return Ok(None);
    }
    if let Some(message) = v.string()? {
        return Ok(Some(ServerError::Message(message)));
    }
    v.kind()?;
    let start = v.pos();
    let mut message = None;
    if v.object(|key, v| {
        if key.is("message") {
            message = v.string()?;
        }
        Ok(())
    })?
    .is_none()
    {
        v.skip()?;
    }
    Ok(Some(message.map_or(
        ServerError::Raw {
            start,
            end: v.pos(),
        },
        ServerError::Message,
    )))
}

/// The start of `bytes` (at most 120 bytes of it) as a quoted string, for an error
/// message about a bad frame.
pub fn quote(bytes: &[u8]) -> String {
    let cut = bytes.len().min(QUOTE_BYTES);
    let text = String::from_utf8_lossy(&bytes[..cut]);
    if cut < bytes.len() {
        format!("{text:?}...")
    } else {
        format!("{text:?}")
    }
}
