//! `multipart/form-data` bodies (RFC 7578), for APIs that take a file upload (OpenAI's
//! audio transcriptions and translations).
//!
//! Parts are written as Python's aiohttp writes a `FormData` (what vLLM's benchmark client
//! sends): a text field has `Content-Disposition: form-data; name="..."` and
//! `Content-Type: text/plain; charset=utf-8`, a file also its `filename` and its own
//! content type. The boundary is chosen so that it occurs in no part: a byte string that
//! is not in the data cannot end a part early, whatever the data (a WAV file is arbitrary
//! bytes).

/// One part of a form.
#[derive(Debug, Clone, Copy)]
pub struct Part<'a> {
    pub name: &'a str,
    /// `(file name, content type)` for a file upload; `None` for a text field.
    pub file: Option<(&'a str, &'a str)>,
    pub data: &'a [u8],
}

impl<'a> Part<'a> {
    pub fn text(name: &'a str, value: &'a str) -> Self {
        Part {
            name,
            file: None,
            data: value.as_bytes(),
        }
    }

    pub fn file(name: &'a str, file_name: &'a str, content_type: &'a str, data: &'a [u8]) -> Self {
        Part {
            name,
            file: Some((file_name, content_type)),
            data,
        }
    }
}

/// A form's body and the `Content-Type` header value that names its boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Form {
    pub content_type: String,
    pub body: Vec<u8>,
}

/// Writes `parts` as a form. `seed` picks the boundary (a request's index, say, so that
/// the same request gets the same body); another is tried while a part contains it.
pub fn encode(parts: &[Part<'_>], seed: u64) -> Form {
    let mut state = seed;
    let boundary = loop {
        let candidate = format!(
            "bench-form-{:016x}{:016x}",
            splitmix(&mut state),
            splitmix(&mut state)
        );
        if !parts.iter().any(|p| {
            contains(p.data, candidate.as_bytes())
                || contains(p.name.as_bytes(), candidate.as_bytes())
                || p.file.is_some_and(|(f, t)| {
                    contains(f.as_bytes(), candidate.as_bytes())
                        || contains(t.as_bytes(), candidate.as_bytes())
                })
        }) {
            break candidate;
        }
    };
    let size: usize = parts.iter().map(|p| p.data.len() + 160).sum();
    let mut body = Vec::with_capacity(size + boundary.len() + 8);
    for part in parts {
        body.extend_from_slice(b"--");
        body.extend_from_slice(boundary.as_bytes());
        body.extend_from_slice(b"\r\nContent-Type: ");
        body.extend_from_slice(
            part.file
                .map_or("text/plain; charset=utf-8", |(_, t)| t)
                .as_bytes(),
        );
        body.extend_from_slice(b"\r\nContent-Disposition: form-data; name=\"");
        quoted(part.name, &mut body);
        if let Some((file_name, _)) = part.file {
            body.extend_from_slice(b"\"; filename=\"");
            quoted(file_name, &mut body);
        }
        body.extend_from_slice(b"\"\r\n\r\n");
        body.extend_from_slice(part.data);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b"--");
    body.extend_from_slice(boundary.as_bytes());
    body.extend_from_slice(b"--\r\n");
    Form {
        content_type: format!("multipart/form-data; boundary={boundary}"),
        body,
    }
}

/// A name inside a quoted header parameter: `"`, CR and LF percent-encoded, as browsers
/// (the WHATWG form encoding) and aiohttp write them.
fn quoted(name: &str, out: &mut Vec<u8>) {
    for b in name.bytes() {
        match b {
            b'"' => out.extend_from_slice(b"%22"),
            b'\r' => out.extend_from_slice(b"%0D"),
            b'\n' => out.extend_from_slice(b"%0A"),
            _ => out.push(b),
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    let Some((&first, rest)) = needle.split_first() else {
        return true;
    };
    haystack
        .iter()
        .enumerate()
        .filter(|&(_, &b)| b == first)
        .any(|(i, _)| haystack[i + 1..].starts_with(rest))
}

/// SplitMix64: spreads a seed over 64 bits.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small reader of form bodies, independent of the writer: the parts between the
    /// boundary's delimiter lines, each with its headers and data.
    fn parse(form: &Form) -> Vec<(Vec<String>, Vec<u8>)> {
        let boundary = form
            .content_type
            .strip_prefix("multipart/form-data; boundary=")
            .unwrap();
        let delimiter = format!("--{boundary}");
        let body = &form.body;
        let mut at: Vec<usize> = (0..body.len())
            .filter(|&i| body[i..].starts_with(delimiter.as_bytes()))
            .collect();
        let last = at.pop().unwrap();
        assert_eq!(&body[last..], format!("{delimiter}--\r\n").as_bytes());
        let mut parts = Vec::new();
        for (i, &start) in at.iter().enumerate() {
            let end = at.get(i + 1).copied().unwrap_or(last);
            let part = &body[start + delimiter.len()..end];
            let part = part.strip_prefix(b"\r\n").unwrap();
            let part = part.strip_suffix(b"\r\n").unwrap();
            let split = part.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
            let headers = String::from_utf8(part[..split].to_vec()).unwrap();
            parts.push((
                headers.split("\r\n").map(str::to_owned).collect(),
                part[split + 4..].to_vec(),
            ));
        }
        parts
    }

    #[test]
    fn fields_and_files_are_written_as_aiohttp_writes_them() {
        let wav = b"RIFF\x00\x01\r\n--\xff\x00WAVE".to_vec();
        let form = encode(
            &[
                Part::file("file", "audio.wav", "audio/wav", &wav),
                Part::text("model", "openai/whisper-large-v3"),
                Part::text("stream", "True"),
                Part::text("quote\"d", "a\r\nb"),
            ],
            7,
        );
        assert!(
            form.content_type
                .starts_with("multipart/form-data; boundary=bench-form-")
        );
        let parts = parse(&form);
        assert_eq!(parts.len(), 4);
        assert_eq!(
            parts[0].0,
            [
                "Content-Type: audio/wav",
                "Content-Disposition: form-data; name=\"file\"; filename=\"audio.wav\"",
            ]
        );
        assert_eq!(parts[0].1, wav);
        assert_eq!(
            parts[1].0,
            [
                "Content-Type: text/plain; charset=utf-8",
                "Content-Disposition: form-data; name=\"model\"",
            ]
        );
        assert_eq!(parts[1].1, b"openai/whisper-large-v3");
        assert_eq!(parts[2].1, b"True");
        assert_eq!(
            parts[3].0[1],
            "Content-Disposition: form-data; name=\"quote%22d\""
        );
        assert_eq!(parts[3].1, b"a\r\nb");
        // The same seed, the same body.
        assert_eq!(
            encode(&[Part::text("a", "b")], 7),
            encode(&[Part::text("a", "b")], 7)
        );
    }

    #[test]
    fn the_boundary_never_occurs_in_the_data() {
        // Data that holds the boundary the seed would pick first.
        let first = encode(&[], 3);
        let boundary = first.content_type.rsplit('=').next().unwrap().to_owned();
        let data = format!("x\r\n--{boundary}\r\ny").into_bytes();
        let form = encode(
            &[Part::file(
                "file",
                "a.bin",
                "application/octet-stream",
                &data,
            )],
            3,
        );
        assert!(!form.content_type.ends_with(&boundary));
        let parts = parse(&form);
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].1, data);
        assert!(contains(b"abcabd", b"abd") && !contains(b"abcab", b"abd"));
    }
}
