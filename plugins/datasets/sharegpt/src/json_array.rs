//! Streams the elements of a top-level JSON array out of a reader.
//!
//! The full ShareGPT file is about 650 MB: more than a plugin's memory cap, and
//! `serde_json::from_reader` goes through it a byte at a time (about 7 s in wasm, near the
//! host's per-call budget). Here the file is read in large chunks, a small scanner finds
//! where each element ends (tracking nesting and strings only), and each element is
//! parsed with serde_json's much faster slice parser. Only the current chunk is held.
//! Errors carry the line and column in the whole file, as serde_json would give them.

use std::io::Read;

/// A position in the file, 1-based like serde_json's.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Pos {
    line: usize,
    column: usize,
}

impl Pos {
    fn advance(&mut self, bytes: &[u8]) {
        match bytes.iter().rposition(|&b| b == b'\n') {
            Some(last) => {
                self.line += bytes.iter().filter(|&&b| b == b'\n').count();
                self.column = bytes.len() - last;
            }
            None => self.column += bytes.len(),
        }
    }
}

/// A JSON syntax error at a position of the file.
#[derive(Debug, PartialEq)]
pub struct Error {
    pub message: String,
    pub line: usize,
    pub column: usize,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} at line {} column {}",
            self.message, self.line, self.column
        )
    }
}

/// What the caller's parse of one element returned.
pub enum ElementError<E> {
    Json(Error),
    Other(E),
}

/// The chunk size used by [`for_each_element`].
const CHUNK: usize = 4 << 20;

/// Calls `parse` with the bytes of each element of the array `reader` holds, in order.
/// `parse` gets the element's bytes and returns either a value for `each` or a serde_json
/// error, which is reported at its position in the whole file.
pub fn for_each_element<T, E>(
    reader: impl Read,
    parse: impl FnMut(&[u8]) -> serde_json::Result<T>,
    each: impl FnMut(T) -> Result<(), E>,
) -> Result<(), ElementError<E>> {
    Stream::new(reader, CHUNK).run(parse, each)
}

struct Stream<R> {
    reader: R,
    chunk: usize,
    buf: Vec<u8>,
    /// Start of the unconsumed bytes in `buf`.
    start: usize,
    /// Position of `buf[start]` in the file.
    pos: Pos,
    eof: bool,
    io_error: Option<std::io::Error>,
}

impl<R: Read> Stream<R> {
    fn new(reader: R, chunk: usize) -> Self {
        Stream {
            reader,
            chunk,
            buf: Vec::new(),
            start: 0,
            pos: Pos { line: 1, column: 1 },
            eof: false,
            io_error: None,
        }
    }

    /// Reads another chunk; false at the end of the file (or on a read error, kept for
    /// the report).
    fn fill(&mut self) -> bool {
        if self.eof {
            return false;
        }
        self.buf.drain(..self.start);
        self.start = 0;
        let old = self.buf.len();
        self.buf.resize(old + self.chunk, 0);
        let read = loop {
            match self.reader.read(&mut self.buf[old..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.io_error = Some(e);
                    break 0;
                }
            }
        };
        self.buf.truncate(old + read);
        self.eof = read == 0;
        read > 0
    }

    fn consume(&mut self, n: usize) {
        self.pos.advance(&self.buf[self.start..self.start + n]);
        self.start += n;
    }

    /// The next byte after whitespace, without consuming it.
    fn peek(&mut self) -> Option<u8> {
        loop {
            let rest = &self.buf[self.start..];
            match rest.iter().position(|b| !b.is_ascii_whitespace()) {
                Some(i) => {
                    self.consume(i);
                    return Some(self.buf[self.start]);
                }
                None => {
                    let n = rest.len();
                    self.consume(n);
                    if !self.fill() {
                        return None;
                    }
                }
            }
        }
    }

    fn error<E>(&self, message: &str) -> ElementError<E> {
        let message = match &self.io_error {
            Some(e) => format!("read error ({e})"),
            None => message.to_string(),
        };
        // Like serde_json: at the end of the file the column is that of the last byte.
        let at_end = self.start == self.buf.len() && self.eof;
        ElementError::Json(Error {
            message,
            line: self.pos.line,
            column: self.pos.column - usize::from(at_end),
        })
    }

    /// The length of the element starting at `buf[start]`, reading more as needed; `None`
    /// when the file ends inside it.
    fn element_len(&mut self) -> Option<usize> {
        let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
        let mut i = self.start;
        loop {
            while i < self.buf.len() {
                if in_string && !escaped {
                    // Most bytes are string contents: skip to the next quote or backslash.
                    let rest = &self.buf[i..];
                    match rest.iter().position(|&b| b == b'"' || b == b'\\') {
                        Some(k) => i += k,
                        None => {
                            i = self.buf.len();
                            break;
                        }
                    }
                }
                let b = self.buf[i];
                i += 1;
                if in_string {
                    if escaped {
                        escaped = false;
                    } else if b == b'\\' {
                        escaped = true;
                    } else if b == b'"' {
                        in_string = false;
                        if depth == 0 {
                            return Some(i - self.start);
                        }
                    }
                    continue;
                }
                match b {
                    b'"' => in_string = true,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' if depth > 0 => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i - self.start);
                        }
                    }
                    // A scalar ends where a separator or the array's end begins.
                    b',' | b']' | b'}' if depth == 0 => return Some(i - 1 - self.start),
                    _ if depth == 0 && b.is_ascii_whitespace() => return Some(i - 1 - self.start),
                    _ => {}
                }
            }
            let scanned = i - self.start;
            if !self.fill() {
                return None;
            }
            i = self.start + scanned;
        }
    }

    fn run<T, E>(
        mut self,
        mut parse: impl FnMut(&[u8]) -> serde_json::Result<T>,
        mut each: impl FnMut(T) -> Result<(), E>,
    ) -> Result<(), ElementError<E>> {
        self.fill();
        match self.peek() {
            Some(b'[') => self.consume(1),
            Some(_) => return Err(self.error("expected a JSON array (`[`)")),
            None => return Err(self.error("EOF while parsing a value")),
        }
        if self.peek() == Some(b']') {
            return self.finish();
        }
        loop {
            if self.peek().is_none() {
                return Err(self.error("EOF while parsing a list"));
            }
            // At the file's end the rest goes to serde_json, which says what is missing.
            let len = self.element_len().unwrap_or(self.buf.len() - self.start);
            let bytes = &self.buf[self.start..self.start + len];
            let value = parse(bytes).map_err(|e| ElementError::Json(self.relocate(&e)))?;
            self.consume(len);
            each(value).map_err(ElementError::Other)?;
            match self.peek() {
                Some(b',') => {
                    self.consume(1);
                    if self.peek() == Some(b']') {
                        return Err(self.error("trailing comma"));
                    }
                }
                Some(b']') => return self.finish(),
                Some(_) => return Err(self.error("expected `,` or `]`")),
                None => return Err(self.error("EOF while parsing a list")),
            }
        }
    }

    /// After the closing `]`: nothing but whitespace may follow.
    fn finish<E>(&mut self) -> Result<(), ElementError<E>> {
        self.consume(1);
        match self.peek() {
            None if self.io_error.is_none() => Ok(()),
            _ => Err(self.error("trailing characters")),
        }
    }

    /// A serde_json error inside the element at `pos`, as a position in the file.
    fn relocate(&self, e: &serde_json::Error) -> Error {
        let full = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        let message = full.strip_suffix(&suffix).unwrap_or(&full).to_string();
        let (line, column) = if e.line() <= 1 {
            (
                self.pos.line,
                self.pos.column + e.column().saturating_sub(1),
            )
        } else {
            (self.pos.line + e.line() - 1, e.column())
        };
        Error {
            message,
            line,
            column,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// The elements as serde_json values, read with a tiny chunk to cross boundaries.
    fn elements(text: &str, chunk: usize) -> Result<Vec<Value>, Error> {
        let mut out = Vec::new();
        let r = Stream::new(text.as_bytes(), chunk).run(
            |b| serde_json::from_slice::<Value>(b),
            |v| {
                out.push(v);
                Ok::<(), ()>(())
            },
        );
        match r {
            Ok(()) => Ok(out),
            Err(ElementError::Json(e)) => Err(e),
            Err(ElementError::Other(())) => unreachable!(),
        }
    }

    #[test]
    fn elements_match_serde_json_at_any_chunk_size() {
        let text = r#" [
          {"a": "x,]}\"{[", "b": [1, {"c": null}]},
          "str\\\"ing", 12.5e3 ,true,[],{} ,
          [[["deep"]]], -0, "ünïcödé \u00e9"
        ]
        "#;
        let want: Vec<Value> = serde_json::from_str(text).unwrap();
        for chunk in [1, 2, 3, 7, 64, 4096] {
            assert_eq!(elements(text, chunk).unwrap(), want, "chunk {chunk}");
        }
        assert_eq!(elements("[]", 1).unwrap(), Vec::<Value>::new());
        assert_eq!(elements(" [ ] \n", 2).unwrap(), Vec::<Value>::new());
    }

    #[test]
    fn errors_are_at_serde_jsons_file_positions() {
        let cases = [
            "[\n  {\"a\": 1},\n  {\"b\": tru}\n]",
            "[\n  {\"a\": 1},\n  {\"b\":\n     [1,,2]}\n]",
            "[{\"a\": 1} {\"b\": 2}]",
            "[{\"a\": 1},]",
            "[{\"a\": 1}",
            "[{\"a\": \"unterminated",
            "[1, 2] x",
            "",
        ];
        for text in cases {
            let want = serde_json::from_str::<Vec<Value>>(text).unwrap_err();
            for chunk in [1, 5, 4096] {
                let got = elements(text, chunk).unwrap_err();
                assert_eq!(
                    (got.line, got.column),
                    (want.line(), want.column()),
                    "{text:?} chunk {chunk}: {got} vs serde_json's {want}"
                );
            }
        }
        // serde_json puts a wrong top-level type at column 0; the `{` is at column 1.
        let got = elements(" {\"a\": 1}", 3).unwrap_err();
        assert_eq!(
            got.to_string(),
            "expected a JSON array (`[`) at line 1 column 2"
        );
    }
}
