//! OpenAI's audio transcriptions and translations (`POST /v1/audio/transcriptions`,
//! `POST /v1/audio/translations`) in vLLM's shapes.
//!
//! The request is a `multipart/form-data` upload, parsed here: the `file` part (any bytes;
//! its name, content type and size are recorded, see [`Upload`]) and text fields, of
//! which the mock acts on `max_completion_tokens` (else `max_tokens`), `stream` and
//! `stream_include_usage` (Python's `True`/`False`, as vLLM's form writes them, or
//! `true`/`false`/`1`/`0`). The answer has the configured timing (token `i` at arrival +
//! `ttft + i * itl`) and the mock's words; the two endpoints answer alike (a translation
//! into English of the mock's English is itself).
//! - Streamed: `transcription.chunk` objects, one per token, `choices[0].delta.content`,
//!   the last with `finish_reason: "length"`. With `stream_include_usage` every chunk
//!   carries the usage so far (what vLLM's `stream_continuous_usage_stats` asks for, which
//!   its benchmark always sends together with it) and a last frame has the usage and no
//!   choices; then `data: [DONE]`.
//! - Whole: `{"text": ..., "usage": {...}}`.
//!
//! `usage.prompt_tokens` stands for the audio's tokens: one per started KiB of the
//! uploaded file (the mock does not decode audio).

use std::io::Write as _;
use std::sync::{Mutex, PoisonError};

use serde::Serialize;

use super::reply::{Reply, WORDS};
use super::timing;

/// What an audio request uploaded, as the server received it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Upload {
    /// The request's `x-request-id`, when it had one.
    pub request_id: Option<String>,
    /// `transcriptions` or `translations`: the endpoint it was sent to.
    pub endpoint: String,
    /// The `file` part's file name and content type (empty when it had none).
    pub file_name: String,
    pub content_type: String,
    /// The size of the uploaded file in bytes.
    pub file_bytes: usize,
    /// The text fields, in the order they came.
    pub fields: Vec<(String, String)>,
}

/// The uploads so far, in arrival order (bounded like the timing records).
#[derive(Debug, Default)]
pub(super) struct Uploads(Mutex<Vec<Upload>>);

impl Uploads {
    pub(super) fn push(&self, upload: Upload) {
        let mut list = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if list.len() == timing::MAX_KEPT_REQUESTS {
            list.remove(0);
        }
        list.push(upload);
    }

    pub(super) fn list(&self) -> Vec<Upload> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A parsed form: the file part and the text fields.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Form {
    pub file: Option<FilePart>,
    pub fields: Vec<(String, String)>,
}

#[derive(Debug, PartialEq, Eq)]
pub(super) struct FilePart {
    pub file_name: String,
    pub content_type: String,
    pub bytes: usize,
}

impl Form {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A boolean field as Python (`True`) or JSON (`true`) or a form (`1`) writes it.
    pub fn flag(&self, name: &str) -> Result<bool, String> {
        match self.field(name) {
            None => Ok(false),
            Some("True" | "true" | "1") => Ok(true),
            Some("False" | "false" | "0") => Ok(false),
            Some(other) => Err(format!("field {name:?} is not a boolean: {other:?}")),
        }
    }
}

/// Parses a `multipart/form-data` body. The boundary is the body's first line (clients
/// send no preamble), so the parser needs no header; every part must have a
/// `Content-Disposition: form-data` with a name, the part named `file` is the upload.
pub(super) fn parse(body: &[u8]) -> Result<Form, String> {
    let line_end = find(body, b"\r\n").ok_or("the body is not a multipart form")?;
    let delimiter = &body[..line_end];
    if delimiter.len() < 3 || !delimiter.starts_with(b"--") {
        return Err("the body does not start with a multipart boundary".into());
    }
    let mut separator = b"\r\n".to_vec();
    separator.extend_from_slice(delimiter);
    let mut form = Form::default();
    // After each delimiter: `--` ends the form, CRLF starts a part.
    let mut at = line_end;
    loop {
        let rest = &body[at..];
        if rest.starts_with(b"--") {
            return Ok(form);
        }
        let rest = rest
            .strip_prefix(b"\r\n")
            .ok_or("a boundary is followed by neither a part nor the end")?;
        let head_end = find(rest, b"\r\n\r\n").ok_or("a part has no end of its headers")?;
        let head =
            std::str::from_utf8(&rest[..head_end]).map_err(|_| "a part's headers are not UTF-8")?;
        let data_start = head_end + 4;
        let data_len = find(&rest[data_start..], &separator).ok_or("a part is not closed")?;
        let data = &rest[data_start..data_start + data_len];
        let (mut name, mut file_name, mut content_type) = (None, None, String::new());
        for line in head.split("\r\n") {
            let (key, value) = line.split_once(':').ok_or("a part header has no colon")?;
            let value = value.trim();
            if key.eq_ignore_ascii_case("content-type") {
                content_type = value.to_owned();
            } else if key.eq_ignore_ascii_case("content-disposition") {
                let mut params = value.split(';').map(str::trim);
                if params.next() != Some("form-data") {
                    return Err(format!("a part is not form-data: {value:?}"));
                }
                for param in params {
                    let (k, v) = param.split_once('=').unwrap_or((param, ""));
                    let v = v.trim_matches('"').to_owned();
                    match k {
                        "name" => name = Some(v),
                        "filename" => file_name = Some(v),
                        _ => {}
                    }
                }
            }
        }
        let name = name.ok_or("a part has no name")?;
        if name == "file" {
            form.file = Some(FilePart {
                file_name: file_name.unwrap_or_default(),
                content_type,
                bytes: data.len(),
            });
        } else {
            let value = String::from_utf8(data.to_vec())
                .map_err(|_| format!("field {name:?} is not UTF-8"))?;
            form.fields.push((name, value));
        }
        at += 2 + data_start + data_len + separator.len();
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn word(i: u32) -> &'static str {
    WORDS[i as usize % WORDS.len()]
}

/// `"usage":{...}` after `n` tokens.
fn usage(prompt: u32, n: u32, out: &mut Vec<u8>) {
    let _ = write!(
        out,
        r#""usage":{{"prompt_tokens":{prompt},"total_tokens":{},"completion_tokens":{n}}}"#,
        u64::from(prompt) + u64::from(n)
    );
}

/// Token chunk `i` of `n` of answer `id`: `head` ends right after the token's text.
pub(super) fn chunk(id: u64, i: u32, n: u32, prompt: u32, head: &mut Vec<u8>, tail: &mut Vec<u8>) {
    let _ = write!(
        head,
        r#"data: {{"id":"trsc-{id:016x}","object":"transcription.chunk","choices":[{{"delta":{{"content":"{}"#,
        word(i)
    );
    let finish = if i + 1 == n { r#""length""# } else { "null" };
    let _ = write!(
        tail,
        r#""}},"finish_reason":{finish},"stop_reason":null}}],"#
    );
    usage(prompt, i + 1, tail);
    tail.extend_from_slice(b"}\n\n");
}

/// The last frame of a stream with usage: no choices, the usage.
pub(super) fn usage_trailer(reply: &Reply<'_>, out: &mut Vec<u8>) {
    let _ = write!(
        out,
        r#"data: {{"id":"trsc-{:016x}","object":"transcription.chunk","choices":[],"#,
        reply.id
    );
    usage(reply.prompt_tokens, reply.completion_tokens, out);
    out.extend_from_slice(b"}\n\n");
}

/// The whole answer: the text and the usage.
pub(super) fn whole(reply: &Reply<'_>, out: &mut Vec<u8>) {
    out.extend_from_slice(br#"{"text":""#);
    reply.text(reply.completion_tokens, out);
    out.extend_from_slice(br#"","#);
    usage(reply.prompt_tokens, reply.completion_tokens, out);
    out.push(b'}');
}

/// The stand-in prompt size: one token per started KiB of the upload.
pub(super) fn prompt_tokens(form: &Form) -> u32 {
    form.file.as_ref().map_or(0, |f| {
        u32::try_from(f.bytes.div_ceil(1024)).unwrap_or(u32::MAX)
    })
}

#[cfg(test)]
mod tests;
