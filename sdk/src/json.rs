//! A zero-copy JSON scanner for decoders.
//!
//! Decoding response frames is the client's hot path (DESIGN.md section 8): building a
//! tree with `serde_json` costs more than everything else a decoder does. A decoder only
//! needs a handful of fields, so [`Cursor`] walks the bytes once, lets the caller descend
//! into the members it names and skips (while validating) everything else. Strings come
//! back as [`Str`] spans of the buffer, never copied; the host decodes their escapes.
//!
//! Validation follows Python's `json.loads`, the parser vLLM's benchmark uses, so a frame
//! that vLLM rejects fails here too: objects, arrays, strings without raw control
//! characters, numbers in JSON's grammar, `true`/`false`/`null`, nothing but whitespace
//! after the value. Like Python it also accepts `NaN`, `Infinity` and `-Infinity`, and
//! does not check that `\u` escapes pair their surrogates. The scanner does not check
//! that the bytes are UTF-8: the host validates text when it reads the spans.
//!
//! ```
//! use bench_sdk::json::Cursor;
//!
//! let frame = br#"{"choices":[{"text":" world","index":0}],"usage":null}"#;
//! let mut text = None;
//! let mut cur = Cursor::new(frame);
//! cur.object(|key, value| {
//!     if key.is("choices") {
//!         value.array(|i, choice| {
//!             if i == 0 {
//!                 choice.object(|key, value| {
//!                     if key.is("text") {
//!                         text = value.string()?;
//!                     }
//!                     Ok(())
//!                 })?;
//!             }
//!             Ok(())
//!         })?;
//!     }
//!     Ok(())
//! })?;
//! cur.finish()?;
//! assert_eq!(text.unwrap().raw(frame), b" world");
//! # Ok::<(), bench_sdk::json::Error>(())
//! ```

use std::fmt;

/// Nesting deeper than this is refused instead of risking the (small) wasm stack.
pub const MAX_DEPTH: u32 = 512;

/// Why a buffer is not valid JSON, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Error {
    /// Byte offset in the scanned buffer.
    pub offset: usize,
    pub what: &'static str,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.what, self.offset)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// The type of a JSON value, known from its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Object,
    Array,
    String,
    Number,
    Bool,
    Null,
}

/// The inside of a string literal (between the quotes): `buf[start..end]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Str {
    pub start: usize,
    pub end: usize,
    /// The literal contains a backslash, so its bytes are not yet the text.
    pub escaped: bool,
}

impl Str {
    /// The raw bytes of the literal's inside.
    pub fn raw<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        &buf[self.start..self.end]
    }

    pub fn len(&self) -> usize {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// The decoded text (escapes resolved; invalid UTF-8 or lone surrogates become U+FFFD).
    pub fn text(&self, buf: &[u8]) -> String {
        unescape(self.raw(buf))
    }
}

/// An object member's key, as the raw inside of its string literal.
#[derive(Debug, Clone, Copy)]
pub struct Key<'a> {
    raw: &'a [u8],
    escaped: bool,
}

impl Key<'_> {
    /// Whether the key is `name`. Keys are compared by their decoded text, so `"\u0074ext"`
    /// is `text`; only such escaped keys (never seen in practice) allocate.
    #[inline]
    pub fn is(&self, name: &str) -> bool {
        if self.escaped {
            escaped_key_is(self.raw, name)
        } else {
            short_eq(self.raw, name.as_bytes())
        }
    }

    /// The raw inside of the key's literal.
    pub fn raw(&self) -> &[u8] {
        self.raw
    }
}

/// Kept out of line so that [`Key::is`] stays small enough to inline.
#[cold]
#[inline(never)]
fn escaped_key_is(raw: &[u8], name: &str) -> bool {
    unescape(raw) == name
}

/// Byte equality without a `memcmp` call for keys up to 16 bytes: decoders compare every
/// key of every frame, and the call costs more than the comparison.
#[inline(always)]
fn short_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word8 =
        |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().expect("eight bytes"));
    let word4 =
        |s: &[u8], at: usize| u32::from_le_bytes(s[at..at + 4].try_into().expect("four bytes"));
    match n {
        // Two overlapping words cover the whole key.
        8..=16 => word8(a, 0) == word8(b, 0) && word8(a, n - 8) == word8(b, n - 8),
        4..=7 => word4(a, 0) == word4(b, 0) && word4(a, n - 4) == word4(b, n - 4),
        0..=3 => a.iter().zip(b).all(|(x, y)| x == y),
        _ => a == b,
    }
}

/// A position in a JSON buffer, reading one value at a time.
///
/// Readers that return `Option` (`string`, `u64`, `i64`, `f64`, `bool`, `object`, `array`)
/// or `bool` (`null`) consume the value when it has their type and leave the cursor where
/// it was otherwise. Inside [`Cursor::object`] and [`Cursor::array`], a value the callback
/// leaves unread is skipped (and validated) by the container, so a callback reads only
/// what it needs.
pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    depth: u32,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Cursor {
            buf,
            pos: 0,
            depth: 0,
        }
    }

    /// The current byte offset.
    pub fn pos(&self) -> usize {
        self.pos
    }

    fn err<T>(&self, what: &'static str) -> Result<T> {
        Err(Error {
            offset: self.pos,
            what,
        })
    }

    fn skip_ws(&mut self) {
        while let Some(&b) = self.buf.get(self.pos) {
            if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                break;
            }
            self.pos += 1;
        }
    }

    /// The first byte of the next value, after whitespace.
    fn peek_value(&mut self) -> Result<u8> {
        self.skip_ws();
        match self.buf.get(self.pos) {
            Some(&b) => Ok(b),
            None => self.err("unexpected end of input, expected a value"),
        }
    }

    /// The kind of the next value (after whitespace), without consuming it.
    pub fn kind(&mut self) -> Result<Kind> {
        Ok(match self.peek_value()? {
            b'{' => Kind::Object,
            b'[' => Kind::Array,
            b'"' => Kind::String,
            b'-' | b'0'..=b'9' | b'N' | b'I' => Kind::Number,
            b't' | b'f' => Kind::Bool,
            b'n' => Kind::Null,
            _ => return self.err("expected a value"),
        })
    }

    /// Skips the next value, validating it.
    pub fn skip(&mut self) -> Result<()> {
        let start = self.pos;
        if self.skip_valid() {
            return Ok(());
        }
        // Read it again for the error and where it is.
        self.pos = start;
        self.skip_checked()
    }

    /// Skips the next value when it is valid, in one loop: skipping is most of reading a
    /// frame, and the readers' recursion costs a call per member and level (each with a
    /// stack and an interruption check in wasm). `false` (the cursor anywhere) when the
    /// value is not valid JSON, for [`Cursor::skip_checked`] to say why.
    fn skip_valid(&mut self) -> bool {
        // The containers open inside the value, innermost last: a set bit is an object.
        let mut objects = [0u64; (MAX_DEPTH as usize).div_ceil(64)];
        let mut open = 0usize;
        loop {
            // At a value.
            self.skip_ws();
            let Some(&b) = self.buf.get(self.pos) else {
                return false;
            };
            let scalar = match b {
                b'{' | b'[' => {
                    if self.depth as usize + open >= MAX_DEPTH as usize {
                        return false;
                    }
                    let object = b == b'{';
                    let (word, bit) = (open / 64, open % 64);
                    objects[word] = (objects[word] & !(1 << bit)) | (u64::from(object) << bit);
                    open += 1;
                    self.pos += 1;
                    self.skip_ws();
                    let close = if object { b'}' } else { b']' };
                    if self.buf.get(self.pos) != Some(&close) {
                        if object && !self.skip_key() {
                            return false;
                        }
                        continue;
                    }
                    self.pos += 1;
                    open -= 1;
                    Ok(())
                }
                // The same arms as `skip_checked`'s, on purpose: a shared helper, even
                // inlined, made this loop ~5% slower natively and in wasm (decode bench).
                b'"' => self.scan_string().map(drop),
                b'-' | b'0'..=b'9' => self.scan_number().map(drop),
                b't' => self.literal(b"true"),
                b'f' => self.literal(b"false"),
                b'n' => self.literal(b"null"),
                b'N' => self.literal(b"NaN"),
                b'I' => self.literal(b"Infinity"),
                _ => return false,
            };
            if scalar.is_err() {
                return false;
            }
            // After a value: close containers until one goes on with another member.
            loop {
                let Some(inner) = open.checked_sub(1) else {
                    return true;
                };
                let object = (objects[inner / 64] >> (inner % 64)) & 1 == 1;
                self.skip_ws();
                match self.buf.get(self.pos) {
                    Some(b',') => {
                        self.pos += 1;
                        if object && !self.skip_key() {
                            return false;
                        }
                        break;
                    }
                    Some(b'}') if object => {}
                    Some(b']') if !object => {}
                    _ => return false,
                }
                self.pos += 1;
                open = inner;
            }
        }
    }

    /// Reads a member's `"key":` (whitespace allowed around each), for
    /// [`Cursor::skip_valid`].
    #[inline(always)]
    fn skip_key(&mut self) -> bool {
        self.skip_ws();
        if self.buf.get(self.pos) != Some(&b'"') || self.scan_string().is_err() {
            return false;
        }
        self.skip_ws();
        if self.buf.get(self.pos) != Some(&b':') {
            return false;
        }
        self.pos += 1;
        true
    }

    /// [`Cursor::skip`] by the readers' own rules, which say why a value is not valid.
    fn skip_checked(&mut self) -> Result<()> {
        match self.peek_value()? {
            b'{' => self.object(|_, v| v.skip_checked()).map(drop),
            b'[' => self.array(|_, v| v.skip_checked()).map(drop),
            b'"' => self.scan_string().map(drop),
            b'-' | b'0'..=b'9' => self.scan_number().map(drop),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'N' => self.literal(b"NaN"),
            b'I' => self.literal(b"Infinity"),
            _ => self.err("expected a value"),
        }
    }

    /// Checks that only whitespace follows the value just read.
    pub fn finish(&mut self) -> Result<()> {
        self.skip_ws();
        if self.pos == self.buf.len() {
            Ok(())
        } else {
            self.err("unexpected data after the JSON value")
        }
    }

    /// Reads a string: its span, or `None` (cursor unmoved) when the value is not a string.
    pub fn string(&mut self) -> Result<Option<Str>> {
        if self.peek_value()? != b'"' {
            return Ok(None);
        }
        self.scan_string().map(Some)
    }

    /// Reads a non-negative integer that fits in a `u64`; `None` (cursor unmoved) for any
    /// other value, including numbers with a fraction or exponent.
    pub fn u64(&mut self) -> Result<Option<u64>> {
        if !self.peek_value()?.is_ascii_digit() {
            return Ok(None);
        }
        let value_start = self.pos;
        let (end, integer) = self.scan_number()?;
        if integer
            && let Some(n) = std::str::from_utf8(&self.buf[value_start..end])
                .ok()
                .and_then(|s| s.parse().ok())
        {
            return Ok(Some(n));
        }
        self.pos = value_start;
        Ok(None)
    }

    /// Reads an integer that fits in an `i64`, negative or not; `None` (cursor unmoved) for
    /// any other value, including numbers with a fraction or exponent.
    pub fn i64(&mut self) -> Result<Option<i64>> {
        let first = self.peek_value()?;
        if !(first.is_ascii_digit() || first == b'-') {
            return Ok(None);
        }
        let value_start = self.pos;
        let (end, _) = self.scan_number()?;
        // `-Infinity`, fractions and exponents do not parse as an integer.
        if let Some(n) = std::str::from_utf8(&self.buf[value_start..end])
            .ok()
            .and_then(|s| s.parse().ok())
        {
            return Ok(Some(n));
        }
        self.pos = value_start;
        Ok(None)
    }

    /// Reads any number as the nearest `f64`, as Python's `json.loads` does for a float:
    /// integers too (beyond 2^53 they round), `NaN`, `Infinity` and `-Infinity`, and
    /// exponents too large for an `f64` as infinity. `None` (cursor unmoved) for any other
    /// value.
    pub fn f64(&mut self) -> Result<Option<f64>> {
        let first = self.peek_value()?;
        let value_start = self.pos;
        let end = match first {
            b'-' | b'0'..=b'9' => self.scan_number()?.0,
            b'N' => self.literal(b"NaN").map(|()| self.pos)?,
            b'I' => self.literal(b"Infinity").map(|()| self.pos)?,
            _ => return Ok(None),
        };
        // JSON's number grammar is a subset of what `f64::from_str` reads; so are the
        // three names.
        match std::str::from_utf8(&self.buf[value_start..end]).map(str::parse) {
            Ok(Ok(n)) => Ok(Some(n)),
            _ => {
                self.pos = value_start;
                self.err("invalid number")
            }
        }
    }

    /// Reads `true` or `false`; `None` (cursor unmoved) for any other value.
    pub fn bool(&mut self) -> Result<Option<bool>> {
        match self.peek_value()? {
            b't' => self.literal(b"true").map(|()| Some(true)),
            b'f' => self.literal(b"false").map(|()| Some(false)),
            _ => Ok(None),
        }
    }

    /// Reads a `null`: `true` when the value was null (consumed), `false` (unmoved) otherwise.
    pub fn null(&mut self) -> Result<bool> {
        if self.peek_value()? != b'n' {
            return Ok(false);
        }
        self.literal(b"null").map(|()| true)
    }

    /// Reads an object, calling `f` with each key and the cursor at its value; `f` may read
    /// the value or leave it to be skipped. Returns the number of members, or `None`
    /// (cursor unmoved) when the value is not an object. Duplicate keys are all visited in
    /// order, so a caller that overwrites on each visit keeps the last, like Python.
    pub fn object(
        &mut self,
        mut f: impl FnMut(Key<'a>, &mut Cursor<'a>) -> Result<()>,
    ) -> Result<Option<usize>> {
        if self.peek_value()? != b'{' {
            return Ok(None);
        }
        self.enter()?;
        self.pos += 1;
        self.skip_ws();
        let mut count = 0;
        if self.buf.get(self.pos) == Some(&b'}') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(Some(0));
        }
        loop {
            self.skip_ws();
            if self.buf.get(self.pos) != Some(&b'"') {
                return self.err("expected a string key");
            }
            let key = self.scan_string()?;
            self.skip_ws();
            if self.buf.get(self.pos) != Some(&b':') {
                return self.err("expected ':' after an object key");
            }
            self.pos += 1;
            self.value_with(
                Key {
                    raw: key.raw(self.buf),
                    escaped: key.escaped,
                },
                &mut f,
            )?;
            count += 1;
            self.skip_ws();
            match self.buf.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                _ => return self.err("expected ',' or '}' in an object"),
            }
        }
        self.depth -= 1;
        Ok(Some(count))
    }

    /// Reads an array, calling `f` with each element's index and the cursor at it; `f` may
    /// read the element or leave it to be skipped. Returns the number of elements, or
    /// `None` (cursor unmoved) when the value is not an array.
    pub fn array(
        &mut self,
        mut f: impl FnMut(usize, &mut Cursor<'a>) -> Result<()>,
    ) -> Result<Option<usize>> {
        if self.peek_value()? != b'[' {
            return Ok(None);
        }
        self.enter()?;
        self.pos += 1;
        self.skip_ws();
        let mut count = 0;
        if self.buf.get(self.pos) == Some(&b']') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(Some(0));
        }
        loop {
            self.value_with(count, &mut f)?;
            count += 1;
            self.skip_ws();
            match self.buf.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    break;
                }
                _ => return self.err("expected ',' or ']' in an array"),
            }
        }
        self.depth -= 1;
        Ok(Some(count))
    }

    /// Hands the value at the cursor to `f`, then skips it if `f` left it unread.
    fn value_with<K>(
        &mut self,
        key: K,
        f: &mut impl FnMut(K, &mut Cursor<'a>) -> Result<()>,
    ) -> Result<()> {
        self.peek_value()?;
        let value_start = self.pos;
        f(key, self)?;
        if self.pos == value_start {
            self.skip()?;
        }
        Ok(())
    }

    fn enter(&mut self) -> Result<()> {
        if self.depth >= MAX_DEPTH {
            return self.err("JSON nested too deeply");
        }
        self.depth += 1;
        Ok(())
    }

    fn literal(&mut self, word: &'static [u8]) -> Result<()> {
        if self.buf[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            self.err("invalid literal")
        }
    }

    /// Scans a number at the cursor; returns its end and whether it is a plain integer.
    fn scan_number(&mut self) -> Result<(usize, bool)> {
        let buf = self.buf;
        let mut integer = true;
        if buf[self.pos] == b'-' {
            self.pos += 1;
            if buf[self.pos..].starts_with(b"Infinity") {
                self.pos += b"Infinity".len();
                return Ok((self.pos, false));
            }
            integer = false;
        }
        match buf.get(self.pos) {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return self.err("invalid number"),
        }
        if buf.get(self.pos) == Some(&b'.') {
            integer = false;
            self.pos += 1;
            if !buf.get(self.pos).is_some_and(u8::is_ascii_digit) {
                return self.err("expected a digit after '.' in a number");
            }
            self.digits();
        }
        if matches!(buf.get(self.pos), Some(b'e' | b'E')) {
            integer = false;
            self.pos += 1;
            if matches!(buf.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !buf.get(self.pos).is_some_and(u8::is_ascii_digit) {
                return self.err("expected a digit in a number's exponent");
            }
            self.digits();
        }
        Ok((self.pos, integer))
    }

    /// Moves past ASCII digits, eight at a time: numbers are much of a frame's bytes
    /// (ids, timestamps, log probabilities with 17 digits).
    fn digits(&mut self) {
        while let Some(word) = self.buf.get(self.pos..self.pos + 8) {
            let others = non_digits(u64::from_le_bytes(word.try_into().expect("eight bytes")));
            if others != 0 {
                self.pos += (others.trailing_zeros() / 8) as usize;
                return;
            }
            self.pos += 8;
        }
        while self.buf.get(self.pos).is_some_and(u8::is_ascii_digit) {
            self.pos += 1;
        }
    }

    /// Scans a string literal at the cursor (on its opening quote). Inline for the common
    /// literal without escapes, which ends at the first special byte; a call otherwise.
    #[inline(always)]
    fn scan_string(&mut self) -> Result<Str> {
        let start = self.pos + 1;
        let end = next_special_byte(self.buf, start);
        if self.buf.get(end) == Some(&b'"') {
            self.pos = end + 1;
            return Ok(Str {
                start,
                end,
                escaped: false,
            });
        }
        self.scan_string_from(start, end)
    }

    /// Scans the rest of a string literal whose inside starts at `start`, from `pos`.
    #[inline(never)]
    fn scan_string_from(&mut self, start: usize, mut pos: usize) -> Result<Str> {
        let buf = self.buf;
        let mut escaped = false;
        loop {
            pos = next_special_byte(buf, pos);
            match buf.get(pos) {
                Some(b'"') => {
                    self.pos = pos + 1;
                    return Ok(Str {
                        start,
                        end: pos,
                        escaped,
                    });
                }
                Some(b'\\') => {
                    escaped = true;
                    match buf.get(pos + 1) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => pos += 2,
                        Some(b'u') => {
                            let hex = buf.get(pos + 2..pos + 6);
                            if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                                self.pos = pos + 1;
                                return self.err("invalid \\u escape (expected four hex digits)");
                            }
                            pos += 6;
                        }
                        Some(_) => {
                            self.pos = pos + 1;
                            return self.err("invalid escape in a string");
                        }
                        None => break,
                    }
                }
                Some(_) => {
                    self.pos = pos;
                    return self.err("control character in a string");
                }
                None => break,
            }
        }
        Err(Error {
            offset: start - 1,
            what: "unterminated string",
        })
    }
}

/// The string literal whose opening quote is `buf[open]`, when it is a valid one.
#[inline(always)]
pub(crate) fn string_at(buf: &[u8], open: usize) -> Option<Str> {
    if buf.get(open) != Some(&b'"') {
        return None;
    }
    let mut cur = Cursor {
        buf,
        pos: open,
        depth: 0,
    };
    cur.scan_string().ok()
}

/// The index of the first byte at or after `pos` that is `"`, `\\` or a control character
/// (below 0x20), or `buf.len()`. Sixteen bytes at a time, then eight, then one: most of a
/// frame's bytes are inside plain strings.
#[inline(always)]
fn next_special_byte(buf: &[u8], mut pos: usize) -> usize {
    while let Some(block) = buf.get(pos..pos + 16) {
        let first = first_special(block.try_into().expect("sixteen bytes"));
        if first < 16 {
            return pos + first;
        }
        pos += 16;
    }
    if let Some(word) = buf.get(pos..pos + 8) {
        let mask = special_bytes(u64::from_le_bytes(word.try_into().expect("eight bytes")));
        if mask != 0 {
            return pos + (mask.trailing_zeros() / 8) as usize;
        }
        pos += 8;
    }
    while let Some(&b) = buf.get(pos) {
        if b == b'"' || b == b'\\' || b < 0x20 {
            break;
        }
        pos += 1;
    }
    pos
}

/// The index in `block` of its first `"`, `\\` or control byte, or 16 when it has none.
/// (SWAR on two words: a wasm SIMD compare and bitmask is no faster on the short strings
/// of frames, and code with the `simd128` feature is not inlined into code without it.)
#[inline(always)]
fn first_special(block: &[u8; 16]) -> usize {
    let word = |at: usize| u64::from_le_bytes(block[at..at + 8].try_into().expect("eight bytes"));
    // The lowest flagged byte is exact (only bytes above a real match can be false hits).
    match (special_bytes(word(0)), special_bytes(word(8))) {
        (0, 0) => 16,
        (0, high) => 8 + (high.trailing_zeros() / 8) as usize,
        (low, _) => (low.trailing_zeros() / 8) as usize,
    }
}

/// The high bit of each byte of `w` (little-endian) that is not an ASCII digit (SWAR,
/// exact for every byte: no sum carries into the next byte).
#[inline(always)]
fn non_digits(w: u64) -> u64 {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    const ONES: u64 = 0x0101_0101_0101_0101;
    let low7 = w & !HIGH;
    // High bit set: the low seven bits are at least '0' (0x30), at least ':' (0x3a).
    let from_zero = low7 + ONES * (0x80 - 0x30);
    let past_nine = low7 + ONES * (0x80 - 0x3a);
    (w | past_nine | !from_zero) & HIGH
}

/// The high bit of each byte of `w` (little-endian) that may be `"`, `\` or below 0x20 (SWAR):
/// zero exactly when there is none, and the lowest set bit marks the first one.
#[inline(always)]
fn special_bytes(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x;
    let quote = has_zero(w ^ (ONES * u64::from(b'"')));
    let backslash = has_zero(w ^ (ONES * u64::from(b'\\')));
    let control = w.wrapping_sub(ONES * 0x20) & !w;
    (quote | backslash | control) & HIGH
}

/// Whether `a` and `b` are the same bytes, 64 then 16 at a time: a slice comparison is
/// a `memcmp` call, which in wasm is a loop over single bytes (with an interruption check
/// per byte).
#[cfg_attr(target_arch = "wasm32", target_feature(enable = "simd128"))]
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n <= 16 {
        return short_eq(a, b);
    }
    let block = |s: &[u8]| -> [u8; 16] { s.try_into().expect("sixteen bytes") };
    // The last 16 bytes, which overlap the blocks before them unless the length is a
    // multiple of 16.
    if !same_block(&block(&a[n - 16..]), &block(&b[n - 16..])) {
        return false;
    }
    let (mut a64, mut b64) = (a.chunks_exact(64), b.chunks_exact(64));
    if !(&mut a64).zip(&mut b64).all(|(x, y)| same_blocks4(x, y)) {
        return false;
    }
    a64.remainder()
        .chunks_exact(16)
        .zip(b64.remainder().chunks_exact(16))
        .all(|(x, y)| same_block(&block(x), &block(y)))
}

/// Whether the 64 bytes of `a` and `b` are the same.
#[cfg(not(target_arch = "wasm32"))]
#[inline(always)]
fn same_blocks4(a: &[u8], b: &[u8]) -> bool {
    a.chunks_exact(16)
        .zip(b.chunks_exact(16))
        .fold(true, |same, (x, y)| {
            same & same_block(
                x.try_into().expect("sixteen bytes"),
                y.try_into().expect("sixteen bytes"),
            )
        })
}

#[cfg(not(target_arch = "wasm32"))]
#[inline(always)]
fn same_block(a: &[u8; 16], b: &[u8; 16]) -> bool {
    u128::from_le_bytes(*a) == u128::from_le_bytes(*b)
}

/// [`same_blocks4`] with wasm's 128-bit SIMD: four vector compares and one test, where
/// 64-bit words take eight compares and branches.
#[cfg(target_arch = "wasm32")]
#[target_feature(enable = "simd128")]
#[inline]
fn same_blocks4(a: &[u8], b: &[u8]) -> bool {
    use core::arch::wasm32::{v128_any_true, v128_or, v128_xor};
    let differ = |at: usize| {
        let block = |s: &[u8]| -> [u8; 16] { s[at..at + 16].try_into().expect("sixteen bytes") };
        v128_xor(v128_block(&block(a)), v128_block(&block(b)))
    };
    !v128_any_true(v128_or(
        v128_or(differ(0), differ(16)),
        v128_or(differ(32), differ(48)),
    ))
}

#[cfg(target_arch = "wasm32")]
#[target_feature(enable = "simd128")]
#[inline]
fn same_block(a: &[u8; 16], b: &[u8; 16]) -> bool {
    use core::arch::wasm32::{v128_any_true, v128_xor};
    !v128_any_true(v128_xor(v128_block(a), v128_block(b)))
}

/// Sixteen bytes as a vector (one unaligned `v128.load`).
#[cfg(target_arch = "wasm32")]
#[target_feature(enable = "simd128")]
#[inline]
fn v128_block(block: &[u8; 16]) -> core::arch::wasm32::v128 {
    let word = |at: usize| u64::from_le_bytes(block[at..at + 8].try_into().expect("eight bytes"));
    core::arch::wasm32::u64x2(word(0), word(8))
}

/// Decodes the inside of a JSON string literal (as a [`Str`] spans it). Escapes are
/// resolved, surrogate pairs joined; lone surrogates and invalid UTF-8 become U+FFFD.
pub fn unescape(raw: &[u8]) -> String {
    let mut out = String::with_capacity(raw.len());
    unescape_into(raw, &mut out);
    out
}

/// [`unescape`] appending to `out`.
pub fn unescape_into(raw: &[u8], out: &mut String) {
    let mut i = 0;
    while i < raw.len() {
        let run_end = raw[i..]
            .iter()
            .position(|&b| b == b'\\')
            .map_or(raw.len(), |p| i + p);
        out.push_str(&String::from_utf8_lossy(&raw[i..run_end]));
        i = run_end;
        if i >= raw.len() {
            break;
        }
        // raw[i] is a backslash.
        let Some(&e) = raw.get(i + 1) else {
            out.push('\u{fffd}');
            break;
        };
        i += 2;
        let c = match e {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let Some(hi) = hex4(raw, i) else {
                    out.push('\u{fffd}');
                    continue;
                };
                i += 4;
                if (0xd800..0xdc00).contains(&hi)
                    && raw.get(i..i + 2) == Some(b"\\u")
                    && let Some(lo) = hex4(raw, i + 2)
                    && (0xdc00..0xe000).contains(&lo)
                {
                    i += 6;
                    char::from_u32(0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00))
                        .unwrap_or('\u{fffd}')
                } else {
                    char::from_u32(hi).unwrap_or('\u{fffd}')
                }
            }
            _ => '\u{fffd}',
        };
        out.push(c);
    }
}

fn hex4(raw: &[u8], at: usize) -> Option<u32> {
    let digits = raw.get(at..at + 4)?;
    let s = std::str::from_utf8(digits).ok()?;
    u32::from_str_radix(s, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// Realistic stream frames and whole responses from the servers we target.
    const REALISTIC: &[&str] = &[
        // vLLM completions stream: a token, a special token with empty text, the last
        // token with its finish reason, the usage-only chunk.
        r#"{"id":"cmpl-3b1f0a2c9d8e4f5a","object":"text_completion","created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"text":" the","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}"#,
        r#"{"id":"cmpl-3b1f0a2c9d8e4f5a","object":"text_completion","created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"text":"","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}"#,
        r#"{"id":"cmpl-3b1f0a2c9d8e4f5a","object":"text_completion","created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"text":" end.\n","logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":null}"#,
        r#"{"id":"cmpl-3b1f0a2c9d8e4f5a","object":"text_completion","created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[],"usage":{"prompt_tokens":1024,"total_tokens":1152,"completion_tokens":128,"prompt_tokens_details":null}}"#,
        // vLLM completions with logprobs: "text" keys nested deeper than the choice's.
        r#"{"id":"cmpl-1","object":"text_completion","created":1718000001,"model":"m","choices":[{"index":0,"text":"Hi","logprobs":{"text_offset":[0],"token_logprobs":[-0.25],"tokens":["Hi"],"top_logprobs":[{"Hi":-0.25,"Hello":-1.5e0}]},"finish_reason":null,"stop_reason":null}],"usage":null}"#,
        // vLLM chat stream: role chunk, content with escapes, reasoning, finish, usage.
        r#"{"id":"chatcmpl-9c2d","object":"chat.completion.chunk","created":1718000002,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-9c2d","object":"chat.completion.chunk","created":1718000002,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"reasoning_content":"Let me think \u2014 \"carefully\"."},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-9c2d","object":"chat.completion.chunk","created":1718000002,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"content":"Line one\nLine \\two\t\ud83d\ude00 caf\u00e9 /\/ café"},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-9c2d","object":"chat.completion.chunk","created":1718000002,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}"#,
        r#"{"id":"chatcmpl-9c2d","object":"chat.completion.chunk","created":1718000002,"model":"Qwen/Qwen3-8B","choices":[],"usage":{"prompt_tokens":17,"total_tokens":50,"completion_tokens":33}}"#,
        // llama.cpp server: adds `timings` to the last chunk, usage alongside choices.
        r#"{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"created":1718000003,"id":"chatcmpl-Xy12","model":"gpt-3.5-turbo","system_fingerprint":"b4500-1a2b3c4d","object":"chat.completion.chunk","usage":{"completion_tokens":12,"prompt_tokens":9,"total_tokens":21},"timings":{"prompt_n":9,"prompt_ms":15.361,"prompt_per_token_ms":1.7067777777777777,"prompt_per_second":585.9,"predicted_n":12,"predicted_ms":120.5,"predicted_per_token_ms":10.041666666666666,"predicted_per_second":99.58506224066391}}"#,
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"content":" Paris"}}],"created":1718000003,"id":"chatcmpl-Xy12","model":"gpt-3.5-turbo","system_fingerprint":"b4500-1a2b3c4d","object":"chat.completion.chunk"}"#,
        // OpenAI: obfuscation padding, usage null until the last chunk.
        r#"{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_4d82cc3fd1","choices":[{"index":0,"delta":{"content":" Hello","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"kjD3"}"#,
        r#"{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_4d82cc3fd1","choices":[],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}"#,
        // Whole (non-streaming) responses, pretty-printed.
        "{\n  \"id\": \"cmpl-7\",\n  \"object\": \"text_completion\",\n  \"choices\": [\n    {\n      \"index\": 0,\n      \"text\": \"A whole answer.\",\n      \"finish_reason\": \"length\"\n    }\n  ],\n  \"usage\": {\"prompt_tokens\": 5, \"completion_tokens\": 4, \"total_tokens\": 9}\n}\n",
        r#"{"id":"chatcmpl-8","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Answer","reasoning_content":null,"tool_calls":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4},"prompt_logprobs":null,"kv_transfer_params":null}"#,
        // In-band errors.
        r#"{"error":{"object":"error","message":"The model `x` does not exist.","type":"NotFoundError","param":null,"code":404}}"#,
        r#"{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#,
        // Numbers of every shape, deep nesting, empty containers.
        r#"{"a":[-0,0.5,-1.25e-3,1E+2,12345678901234567890,[],{},[[[{"b":[true,false,null]}]]]],"c":""}"#,
    ];

    /// Rebuilds a `serde_json::Value` using only the cursor's public readers.
    fn to_value(buf: &[u8], cur: &mut Cursor<'_>) -> Result<Value> {
        Ok(match cur.kind()? {
            Kind::Object => {
                let mut map = serde_json::Map::new();
                cur.object(|key, v| {
                    let key = unescape(key.raw());
                    map.insert(key, to_value(buf, v)?);
                    Ok(())
                })?;
                Value::Object(map)
            }
            Kind::Array => {
                let mut items = Vec::new();
                cur.array(|i, v| {
                    assert_eq!(i, items.len());
                    items.push(to_value(buf, v)?);
                    Ok(())
                })?;
                Value::Array(items)
            }
            Kind::String => Value::String(cur.string()?.expect("a string").text(buf)),
            Kind::Null => {
                assert!(cur.null()?);
                Value::Null
            }
            Kind::Bool => Value::Bool(cur.bool()?.expect("a boolean")),
            Kind::Number => {
                if let Some(n) = cur.u64()? {
                    Value::from(n)
                } else {
                    let start = cur.pos();
                    cur.skip()?;
                    let text = std::str::from_utf8(&buf[start..cur.pos()]).unwrap();
                    serde_json::from_str(text).expect("serde_json reads the number")
                }
            }
        })
    }

    fn parse(text: &str) -> Result<Value> {
        let buf = text.as_bytes();
        let mut cur = Cursor::new(buf);
        let value = to_value(buf, &mut cur)?;
        cur.finish()?;
        Ok(value)
    }

    fn valid(text: &[u8]) -> bool {
        let mut cur = Cursor::new(text);
        cur.skip().and_then(|()| cur.finish()).is_ok()
    }

    /// The top-level `choices[0].<path...>` string, read the way a decoder reads it.
    fn choice_string(buf: &[u8], path: &[&str]) -> Option<Str> {
        fn walk(cur: &mut Cursor<'_>, path: &[&str], out: &mut Option<Str>) -> Result<()> {
            let Some((first, rest)) = path.split_first() else {
                *out = cur.string()?;
                return Ok(());
            };
            cur.object(|key, v| {
                if key.is(first) {
                    walk(v, rest, out)
                } else {
                    Ok(())
                }
            })?;
            Ok(())
        }
        let mut out = None;
        let mut cur = Cursor::new(buf);
        cur.object(|key, v| {
            if key.is("choices") {
                v.array(|i, c| {
                    if i == 0 {
                        walk(c, path, &mut out)
                    } else {
                        Ok(())
                    }
                })?;
            }
            Ok(())
        })
        .unwrap();
        cur.finish().unwrap();
        out
    }

    #[test]
    fn rebuilds_realistic_frames_exactly_as_serde_json_reads_them() {
        for text in REALISTIC {
            let expected: Value = serde_json::from_str(text).unwrap();
            assert_eq!(parse(text).unwrap(), expected, "frame: {text}");
        }
    }

    #[test]
    fn extracted_fields_match_serde_json() {
        let paths: &[&[&str]] = &[
            &["text"],
            &["delta", "content"],
            &["delta", "reasoning_content"],
            &["message", "content"],
            &["finish_reason"],
        ];
        let mut seen = 0;
        for text in REALISTIC {
            let tree: Value = serde_json::from_str(text).unwrap();
            for path in paths {
                let mut expected = tree.get("choices").and_then(|c| c.get(0));
                for key in *path {
                    expected = expected.and_then(|v| v.get(key));
                }
                let expected = expected.and_then(Value::as_str);
                let got = choice_string(text.as_bytes(), path);
                assert_eq!(
                    got.map(|s| s.text(text.as_bytes())).as_deref(),
                    expected,
                    "{path:?} in {text}"
                );
                if let Some(s) = got {
                    seen += 1;
                    assert_eq!(s.escaped, s.raw(text.as_bytes()).contains(&b'\\'));
                    assert_eq!(&text.as_bytes()[s.start - 1], &b'"');
                    assert_eq!(&text.as_bytes()[s.end], &b'"');
                }
            }
            // usage.completion_tokens as a u64, as serde_json sees it.
            let mut tokens = None;
            let mut cur = Cursor::new(text.as_bytes());
            cur.object(|key, v| {
                if key.is("usage") {
                    v.object(|key, v| {
                        if key.is("completion_tokens") {
                            tokens = v.u64()?;
                        }
                        Ok(())
                    })?;
                }
                Ok(())
            })
            .unwrap();
            assert_eq!(
                tokens,
                tree.pointer("/usage/completion_tokens")
                    .and_then(Value::as_u64),
                "{text}"
            );
        }
        assert!(
            seen > 15,
            "the corpus exercises the extraction ({seen} strings)"
        );
    }

    #[test]
    fn string_spans_point_inside_the_literal_and_flag_escapes() {
        let buf = br#"{"plain":"abc","esc":"a\"b\\c\nd","uni":"\u00e9\ud83d\ude00","empty":""}"#;
        let mut found = Vec::new();
        Cursor::new(buf)
            .object(|key, v| {
                found.push((
                    String::from_utf8(key.raw().to_vec()).unwrap(),
                    v.string()?.unwrap(),
                ));
                Ok(())
            })
            .unwrap();
        let get = |k: &str| found.iter().find(|(name, _)| name == k).unwrap().1;
        assert_eq!(get("plain").raw(buf), b"abc");
        assert!(!get("plain").escaped);
        assert_eq!(get("esc").raw(buf), br#"a\"b\\c\nd"#);
        assert!(get("esc").escaped);
        assert_eq!(get("esc").text(buf), "a\"b\\c\nd");
        assert_eq!(get("uni").text(buf), "é😀");
        assert!(get("uni").escaped);
        assert!(get("empty").is_empty() && !get("empty").escaped);
    }

    #[test]
    fn unescape_matches_serde_json() {
        let cases = [
            r#"plain"#,
            r#"\"quoted\" \\ back \/ slash"#,
            r#"\b\f\n\r\t"#,
            r#"\u0041\u00e9\u4e2d\uFFFF"#,
            r#"\ud83d\ude00 pair, \uD834\uDD1E upper-case pair"#,
            "multi-byte UTF-8 as is: caf\u{e9} \u{1f600}",
            r#"a\u0000b"#,
        ];
        for raw in cases {
            let expected: String = serde_json::from_str(&format!("\"{raw}\"")).unwrap();
            assert_eq!(unescape(raw.as_bytes()), expected, "{raw}");
        }
        // Lone surrogates (Python keeps them, Rust strings cannot) become U+FFFD.
        assert_eq!(unescape(br"x\ud83dy"), "x\u{fffd}y");
        assert_eq!(unescape(br"\ude00"), "\u{fffd}");
        assert_eq!(unescape(br"\ud83d\u0041"), "\u{fffd}A");
    }

    #[test]
    fn same_key_deeper_does_not_shadow_the_top_level_one() {
        let buf = br#"{"choices":[{"delta":{"content":"inner"},"text":{"text":"deep"}}],"text":"outer","usage":{"usage":{"completion_tokens":1},"completion_tokens":7}}"#;
        let (mut text, mut tokens) = (None, None);
        let mut cur = Cursor::new(buf);
        cur.object(|key, v| {
            if key.is("text") {
                text = v.string()?;
            } else if key.is("usage") {
                v.object(|key, v| {
                    if key.is("completion_tokens") {
                        tokens = v.u64()?;
                    }
                    Ok(())
                })?;
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(text.unwrap().raw(buf), b"outer");
        assert_eq!(tokens, Some(7));
        // choices[0].text is an object here, so a string read yields nothing.
        assert_eq!(choice_string(buf, &["text"]), None);
        assert_eq!(
            choice_string(buf, &["delta", "content"]).unwrap().raw(buf),
            b"inner"
        );
    }

    #[test]
    fn keys_in_any_order_and_whitespace_anywhere() {
        let a = b"{\"usage\":{\"completion_tokens\":3},\"choices\":[{\"finish_reason\":\"stop\",\"text\":\"x\"}]}";
        let b = b" \r\n\t{ \"choices\" :\n[ { \"text\" : \"x\" , \"finish_reason\"\t:\"stop\" } ] ,\n \"usage\" : { \"completion_tokens\" : 3 } } \n";
        for buf in [&a[..], &b[..]] {
            assert_eq!(choice_string(buf, &["text"]).unwrap().raw(buf), b"x");
            assert_eq!(
                choice_string(buf, &["finish_reason"]).unwrap().raw(buf),
                b"stop"
            );
            assert_eq!(
                parse(std::str::from_utf8(buf).unwrap()).unwrap(),
                serde_json::from_slice::<Value>(buf).unwrap()
            );
        }
    }

    #[test]
    fn every_json_type_has_a_reader_that_leaves_other_types_alone() {
        /// What each reader makes of `text`: `None` leaves the cursor where it was.
        fn read(text: &str) -> (Option<bool>, Option<i64>, Option<u64>, Option<f64>, bool) {
            let buf = text.as_bytes();
            let mut cur = Cursor::new(buf);
            let boolean = cur.bool().unwrap();
            let end = |cur: &Cursor<'_>, read: bool| {
                assert_eq!(cur.pos(), if read { buf.len() } else { 0 }, "{text}");
            };
            end(&cur, boolean.is_some());
            let mut cur = Cursor::new(buf);
            let int = cur.i64().unwrap();
            end(&cur, int.is_some());
            let mut cur = Cursor::new(buf);
            let unsigned = cur.u64().unwrap();
            end(&cur, unsigned.is_some());
            let mut cur = Cursor::new(buf);
            let float = cur.f64().unwrap();
            end(&cur, float.is_some());
            let mut cur = Cursor::new(buf);
            let null = cur.null().unwrap();
            end(&cur, null);
            (boolean, int, unsigned, float, null)
        }
        assert_eq!(read("true"), (Some(true), None, None, None, false));
        assert_eq!(read("false"), (Some(false), None, None, None, false));
        assert_eq!(read("null"), (None, None, None, None, true));
        assert_eq!(read("7"), (None, Some(7), Some(7), Some(7.0), false));
        assert_eq!(read("-12"), (None, Some(-12), None, Some(-12.0), false));
        assert_eq!(
            read("-9223372036854775808"),
            (
                None,
                Some(i64::MIN),
                None,
                Some(-9.223372036854776e18),
                false
            )
        );
        // Past i64 but inside u64; past both.
        assert_eq!(
            read("9223372036854775808"),
            (None, None, Some(1 << 63), Some(9.223372036854776e18), false)
        );
        assert_eq!(
            read("123456789012345678901234567890"),
            (None, None, None, Some(1.2345678901234568e29), false)
        );
        assert_eq!(read("-1.25e-3"), (None, None, None, Some(-0.00125), false));
        assert_eq!(read("1E+2"), (None, None, None, Some(100.0), false));
        assert_eq!(read("1e400").3, Some(f64::INFINITY));
        assert_eq!(read("-Infinity").3, Some(f64::NEG_INFINITY));
        assert!(read("NaN").3.unwrap().is_nan());
        assert_eq!(read("-0").3.map(f64::is_sign_negative), Some(true));
        for other in [r#""true""#, "[1]", r#"{"a":1}"#] {
            assert_eq!(read(other), (None, None, None, None, false), "{other}");
        }
        // A broken literal or number is an error, as for `null` and `u64`.
        assert_eq!(
            Cursor::new(b"tru").bool().unwrap_err().what,
            "invalid literal"
        );
        assert!(Cursor::new(b"-x").i64().is_err());
        assert!(Cursor::new(b"1.").f64().is_err());
        assert!(Cursor::new(b"Nan").f64().is_err());
        // Whitespace before the value is read past, as by every reader.
        assert_eq!(Cursor::new(b" \n false").bool().unwrap(), Some(false));
    }

    #[test]
    fn duplicate_keys_are_all_visited_so_the_last_wins() {
        let buf = br#"{"text":"first","text":"second"}"#;
        let mut text = None;
        Cursor::new(buf)
            .object(|key, v| {
                if key.is("text") {
                    text = v.string()?;
                }
                Ok(())
            })
            .unwrap();
        assert_eq!(text.unwrap().raw(buf), b"second");
    }

    #[test]
    fn escaped_keys_compare_by_their_text() {
        let buf = br#"{"\u0074ext":"t","te\"xt":"u"}"#;
        let mut seen = Vec::new();
        Cursor::new(buf)
            .object(|key, v| {
                seen.push((
                    key.is("text"),
                    key.is("te\"xt"),
                    v.string()?.unwrap().raw(buf).to_vec(),
                ));
                Ok(())
            })
            .unwrap();
        assert_eq!(
            seen,
            vec![(true, false, b"t".to_vec()), (false, true, b"u".to_vec())]
        );
    }

    /// `eq` tells every equal slice from every slice with one byte changed, and from its
    /// own prefix, at every length up to `max`.
    fn check_comparator(eq: fn(&[u8], &[u8]) -> bool, max: u8) {
        let text: Vec<u8> = (0..max).map(|i| b'a' + i % 26).collect();
        for n in 0..=text.len() {
            let a = &text[..n];
            // An equal copy elsewhere in memory.
            let copy = a.to_vec();
            assert!(eq(a, &copy));
            for i in 0..n {
                for flip in [1, 0x80] {
                    let mut b = a.to_vec();
                    b[i] ^= flip;
                    assert!(!eq(a, &b), "length {n}, byte {i}");
                }
            }
            assert!(n == 0 || !eq(a, &text[..n - 1]));
        }
    }

    #[test]
    fn short_eq_compares_every_length() {
        check_comparator(short_eq, 26);
    }

    #[test]
    fn same_bytes_compares_every_length_and_position() {
        check_comparator(same_bytes, 80);
    }

    #[test]
    fn string_at_reads_the_literal_at_a_quote() {
        let buf = br#"{"a":"plain","b":"esc\"aped","c":"bad\x","d":"#;
        let at = |needle: &str| {
            buf.windows(needle.len())
                .position(|w| w == needle.as_bytes())
                .unwrap()
        };
        let plain = string_at(buf, at(r#""plain""#)).unwrap();
        assert_eq!((plain.raw(buf), plain.escaped), (&b"plain"[..], false));
        let escaped = string_at(buf, at(r#""esc"#)).unwrap();
        assert_eq!(
            (escaped.raw(buf), escaped.escaped),
            (&br#"esc\"aped"#[..], true)
        );
        // Not on a quote, an invalid escape, an unterminated literal.
        assert_eq!(string_at(buf, 0), None);
        assert_eq!(string_at(buf, at(r#""bad"#)), None);
        assert_eq!(string_at(buf, buf.len() - 1), None);
        assert_eq!(string_at(buf, buf.len()), None);
    }

    #[test]
    fn skipping_reads_deep_mixed_nesting_in_one_loop() {
        // 300 levels, objects and arrays in turn: past the first word of the loop's stack.
        let depth = 300;
        let mut text = String::new();
        for level in 0..depth {
            text.push_str(if level % 2 == 0 { r#"{"k": "# } else { "[1, " });
        }
        text.push_str("null");
        for level in (0..depth).rev() {
            text.push(if level % 2 == 0 { '}' } else { ']' });
        }
        let mut cur = Cursor::new(text.as_bytes());
        assert!(cur.skip_valid());
        assert_eq!(cur.pos(), text.len());
        // A closing bracket of the other kind, at any level, is refused.
        for level in [0, 63, 64, 65, depth - 1] {
            let at = text.len() - 1 - level;
            let mut bad = text.clone().into_bytes();
            bad[at] = if bad[at] == b'}' { b']' } else { b'}' };
            assert!(!Cursor::new(&bad).skip_valid(), "level {level}");
            assert!(Cursor::new(&bad).skip().is_err(), "level {level}");
        }
    }

    #[test]
    fn swar_flags_exactly_the_bytes_that_are_not_digits() {
        for byte in 0..=255u8 {
            for at in 0..8 {
                let mut word = *b"01234567";
                word[at] = byte;
                let flags = non_digits(u64::from_le_bytes(word));
                let expected = if byte.is_ascii_digit() {
                    0
                } else {
                    0x80 << (8 * at)
                };
                assert_eq!(flags, expected, "{byte:#x} at {at}");
            }
        }
    }

    #[test]
    fn empty_and_null_values() {
        let buf = br#"{"choices":[],"usage":null,"content":null,"o":{}}"#;
        let mut counts = Vec::new();
        let mut cur = Cursor::new(buf);
        cur.object(|key, v| {
            if key.is("choices") {
                counts.push(v.array(|_, _| Ok(()))?);
            } else if key.is("o") {
                counts.push(v.object(|_, _| Ok(()))?);
            } else {
                // A null is not a string, an object or a number: nothing is consumed.
                assert_eq!(v.string()?, None);
                assert_eq!(v.object(|_, _| Ok(()))?, None);
                assert_eq!(v.u64()?, None);
                assert!(v.null()?);
            }
            Ok(())
        })
        .unwrap();
        cur.finish().unwrap();
        assert_eq!(counts, vec![Some(0), Some(0)]);
    }

    #[test]
    fn u64_reads_plain_integers_only() {
        let read = |text: &str| {
            let mut cur = Cursor::new(text.as_bytes());
            let n = cur.u64().unwrap();
            // Unread values stay for the caller to skip.
            if n.is_none() {
                cur.skip().unwrap();
            }
            cur.finish().unwrap();
            n
        };
        assert_eq!(read("0"), Some(0));
        assert_eq!(read(" 4096 "), Some(4096));
        assert_eq!(read("18446744073709551615"), Some(u64::MAX));
        assert_eq!(read("18446744073709551616"), None);
        assert_eq!(read("-1"), None);
        assert_eq!(read("12.0"), None);
        assert_eq!(read("1e3"), None);
        assert_eq!(read("\"12\""), None);
    }

    #[test]
    fn invalid_json_is_detected_with_its_position() {
        let cases: &[(&str, &str)] = &[
            ("", "unexpected end of input, expected a value"),
            ("   ", "unexpected end of input, expected a value"),
            ("{\"a\":1,}", "expected a string key"),
            ("{\"a\" 1}", "expected ':' after an object key"),
            ("{'a':1}", "expected a string key"),
            ("{\"a\":1 \"b\":2}", "expected ',' or '}' in an object"),
            ("[1,]", "expected a value"),
            ("[1 2]", "expected ',' or ']' in an array"),
            ("{\"a\":\"x\ny\"}", "control character in a string"),
            ("\"\\x\"", "invalid escape in a string"),
            (
                "\"\\u12g4\"",
                "invalid \\u escape (expected four hex digits)",
            ),
            ("\"abc", "unterminated string"),
            ("01", "unexpected data after the JSON value"),
            ("1.", "expected a digit after '.' in a number"),
            ("1e+", "expected a digit in a number's exponent"),
            ("-", "invalid number"),
            ("tru", "invalid literal"),
            ("nul", "invalid literal"),
            ("{} {}", "unexpected data after the JSON value"),
            ("data: {}", "expected a value"),
            ("[DONE]", "expected a value"),
        ];
        for (text, what) in cases {
            let mut cur = Cursor::new(text.as_bytes());
            let err = cur.skip().and_then(|()| cur.finish()).unwrap_err();
            assert_eq!(err.what, *what, "{text:?}");
            assert!(err.offset <= text.len());
            assert!(
                serde_json::from_str::<Value>(text).is_err(),
                "serde_json agrees on {text:?}"
            );
        }
        let mut cur = Cursor::new(b"{\"a\":[1,2,}");
        assert_eq!(
            cur.skip().unwrap_err(),
            Error {
                offset: 10,
                what: "expected a value"
            }
        );
    }

    #[test]
    fn every_truncation_of_a_frame_is_invalid() {
        for text in REALISTIC {
            let buf = text.trim_end().as_bytes();
            for cut in 0..buf.len() {
                assert!(!valid(&buf[..cut]), "prefix {cut} of {text} accepted");
            }
            assert!(valid(buf));
        }
    }

    #[test]
    fn validity_agrees_with_serde_json_on_damaged_frames() {
        // Delete or replace each byte of ASCII frames; the scanner must accept exactly what
        // serde_json accepts, apart from the documented differences with Python's parser
        // (NaN/Infinity, numbers that overflow to infinity, lone surrogates, invalid UTF-8,
        // depth over 128), which these inputs avoid or skip.
        let replacements = [
            b'"', b'\\', b'{', b'}', b'[', b']', b':', b',', b'0', b'-', b'.', b'e', b'n', b' ',
            b'\n', 0x01,
        ];
        let mut checked = 0;
        for text in REALISTIC
            .iter()
            .filter(|t| t.is_ascii() && !t.contains("\\ud"))
        {
            let buf = text.as_bytes();
            for i in 0..buf.len() {
                let mut variants = vec![[&buf[..i], &buf[i + 1..]].concat()];
                for r in replacements {
                    let mut v = buf.to_vec();
                    v[i] = r;
                    variants.push(v);
                }
                for v in variants {
                    if std::str::from_utf8(&v).is_ok_and(|s| s.contains("\\ud")) {
                        continue;
                    }
                    let expected = match serde_json::from_slice::<Value>(&v) {
                        Ok(_) => true,
                        // Python reads `1e18000000` as infinity; serde_json refuses it.
                        Err(e) if e.to_string().starts_with("number out of range") => continue,
                        Err(_) => false,
                    };
                    assert_eq!(valid(&v), expected, "{}", String::from_utf8_lossy(&v));
                    checked += 1;
                }
            }
        }
        assert!(checked > 10_000);
    }

    #[test]
    fn python_extensions_are_accepted() {
        // Python's json.loads (vLLM's parser) reads these; a server that emits them must
        // not fail here while vLLM succeeds.
        for text in [
            "NaN",
            "Infinity",
            "-Infinity",
            "[NaN,-Infinity]",
            r#"{"lp":-Infinity}"#,
            "1e400",
            r#""\ud83d""#,
        ] {
            assert!(valid(text.as_bytes()), "{text}");
        }
        assert!(!valid(b"-NaN"));
    }

    #[test]
    fn nesting_is_bounded() {
        let depth = MAX_DEPTH as usize;
        let ok = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(valid(ok.as_bytes()));
        let deep = format!("{}{}", "[".repeat(depth + 1), "]".repeat(depth + 1));
        let mut cur = Cursor::new(deep.as_bytes());
        assert_eq!(cur.skip().unwrap_err().what, "JSON nested too deeply");
    }

    #[test]
    fn swar_finds_the_first_special_byte_at_every_position() {
        let first = |word: [u8; 8]| match special_bytes(u64::from_le_bytes(word)) {
            0 => None,
            mask => Some(mask.trailing_zeros() as usize / 8),
        };
        for at in 0..8 {
            for special in [b'"', b'\\', 0x00, 0x1f, b'\n'] {
                let mut word = *b"abcdefgh";
                word[at] = special;
                assert_eq!(first(word), Some(at), "{special:#x} at {at}");
                // Later special bytes (where borrows can give false hits) do not move it.
                for later in at + 1..8 {
                    let mut word = word;
                    word[later] = b'"';
                    word[(later + 1).min(7)] = 0x00;
                    assert_eq!(
                        first(word),
                        Some(at),
                        "{special:#x} at {at}, more at {later}"
                    );
                }
            }
            for plain in [b' ', b'!', b'#', b'[', b']', 0x7f, 0x80, 0xe9, 0xff] {
                let mut word = *b"abcdefgh";
                word[at] = plain;
                assert_eq!(first(word), None, "{plain:#x} at {at}");
            }
        }
        // Long strings cross the fast path with the special byte at each offset.
        for len in 0..40 {
            let text = format!("\"{}\\n{}\"", "x".repeat(len), "y".repeat(len % 9));
            let mut cur = Cursor::new(text.as_bytes());
            let s = cur.string().unwrap().unwrap();
            assert!(s.escaped);
            assert_eq!(s.len(), len + 2 + len % 9);
            cur.finish().unwrap();
        }
    }

    /// Fuzzing of the scanner with proptest: `cargo test -p bench-sdk fuzz_` runs a short
    /// round; `PROPTEST_CASES=200000 cargo test -p bench-sdk fuzz_` a long one.
    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        /// `short_run` cases unless `PROPTEST_CASES` asks for another count.
        fn cases(short_run: u32) -> ProptestConfig {
            let mut config = ProptestConfig::default();
            if std::env::var_os("PROPTEST_CASES").is_none() {
                config.cases = short_run;
            }
            config
        }

        /// Reads every value with the public readers, the way decoders do, and never
        /// panics on any input: the scanner's errors are values, not crashes.
        fn walk(buf: &[u8], cur: &mut Cursor<'_>) -> Result<()> {
            match cur.kind()? {
                Kind::Object => {
                    cur.object(|key, v| {
                        let _ = key.is("text") || key.is("\u{e9}t\"") || key.raw().is_empty();
                        walk(buf, v)
                    })?;
                }
                Kind::Array => {
                    cur.array(|_, v| walk(buf, v))?;
                }
                Kind::String => {
                    let s = cur.string()?.expect("kind said string");
                    assert!(s.start <= s.end && s.end < buf.len());
                    assert_eq!(buf[s.start - 1], b'"');
                    assert_eq!(buf[s.end], b'"');
                    let _ = s.text(buf);
                }
                Kind::Number => {
                    let start = cur.pos();
                    let integer = cur.i64()?;
                    cur.pos = start;
                    if cur.f64()?.is_none() {
                        cur.skip()?;
                    } else if let Some(n) = integer {
                        assert_eq!(
                            std::str::from_utf8(&buf[start..cur.pos()]).map(str::parse),
                            Ok(Ok(n))
                        );
                    }
                }
                Kind::Null => {
                    if !cur.null()? {
                        cur.skip()?;
                    }
                }
                Kind::Bool => {
                    if cur.bool()?.is_none() {
                        cur.skip()?;
                    }
                }
            }
            Ok(())
        }

        /// Token soup: mostly JSON's own punctuation and literals, so about half the
        /// inputs are valid and the rest fail at every possible place. All ASCII or valid
        /// UTF-8, without the extensions Python accepts (NaN, Infinity, lone surrogates),
        /// so the scanner must agree with serde_json on every one.
        fn soup_piece() -> impl Strategy<Value = &'static str> {
            prop_oneof![
                Just("{"),
                Just("}"),
                Just("["),
                Just("]"),
                Just(":"),
                Just(","),
                Just("\""),
                Just("\"k\""),
                Just("\"text\":"),
                Just("\"\\\"\""),
                Just("\"\\u00e9\\n\""),
                Just("\"\\u12\""),
                Just("\"\\x\""),
                Just("\"é\""),
                Just("\"\u{1}\""),
                Just("\\"),
                Just("0"),
                Just("12"),
                Just("-"),
                Just("."),
                Just("5e"),
                Just("E+3"),
                Just("true"),
                Just("fals"),
                Just("null"),
                Just(" "),
                Just("\n"),
                Just("\t"),
                Just("x"),
            ]
        }

        fn soup() -> impl Strategy<Value = String> {
            prop::collection::vec(soup_piece(), 0..40).prop_map(|pieces| pieces.concat())
        }

        /// serde_json's verdict on `text`, or `Err(())` when Python's `json.loads` (which
        /// the scanner follows) would judge it differently: numbers that overflow to
        /// infinity and lone surrogates (a leading one not followed by `\u` is "unexpected
        /// end of hex escape" to serde_json), which Python accepts and serde_json refuses.
        fn serde_verdict(text: &str) -> std::result::Result<Option<Value>, ()> {
            match serde_json::from_str::<Value>(text) {
                Ok(value) => Ok(Some(value)),
                Err(e)
                    if e.to_string().starts_with("number out of range")
                        || e.to_string().contains("surrogate")
                        || e.to_string().starts_with("unexpected end of hex escape") =>
                {
                    Err(())
                }
                Err(_) => Ok(None),
            }
        }

        /// The scanner's verdict agrees with serde_json's, and an accepted text reads
        /// as the same value.
        fn check_agreement(text: &str) -> std::result::Result<(), TestCaseError> {
            let Ok(theirs) = serde_verdict(text) else {
                return Ok(());
            };
            prop_assert_eq!(valid(text.as_bytes()), theirs.is_some(), "{:?}", text);
            let mut cur = Cursor::new(text.as_bytes());
            let walked = walk(text.as_bytes(), &mut cur).and_then(|()| cur.finish());
            prop_assert_eq!(walked.is_ok(), theirs.is_some(), "{:?}", text);
            if let Some(value) = theirs {
                prop_assert_eq!(parse(text).unwrap(), value);
            }
            Ok(())
        }

        /// A JSON number's text, always within f64's range.
        fn number() -> impl Strategy<Value = String> {
            "-?(0|[1-9][0-9]{0,24})(\\.[0-9]{1,8})?([eE][+-]?[0-9]{1,2})?"
        }

        /// One character of a string literal, written any way JSON allows.
        fn string_piece() -> impl Strategy<Value = String> {
            prop_oneof![
                // Any character; those that must be escaped as `\uXXXX`.
                4 => any::<char>().prop_map(|c| match c {
                    '\0'..='\u{1f}' | '"' | '\\' => format!("\\u{:04x}", u32::from(c)),
                    c => String::from(c),
                }),
                1 => prop_oneof![
                    Just("\\\""), Just("\\\\"), Just("\\/"), Just("\\b"), Just("\\f"),
                    Just("\\n"), Just("\\r"), Just("\\t"),
                ]
                .prop_map(str::to_owned),
                1 => any::<char>().prop_map(|c| {
                    // \uXXXX, as a surrogate pair outside the basic plane.
                    let mut units = [0u16; 2];
                    c.encode_utf16(&mut units)
                        .iter()
                        .map(|u| format!("\\u{u:04X}"))
                        .collect::<String>()
                }),
            ]
        }

        fn string_literal() -> impl Strategy<Value = String> {
            prop::collection::vec(string_piece(), 0..12)
                .prop_map(|pieces| format!("\"{}\"", pieces.concat()))
        }

        fn whitespace() -> impl Strategy<Value = &'static str> {
            prop_oneof![4 => Just(""), 1 => Just(" "), 1 => Just("\n  "), 1 => Just("\r\n\t")]
        }

        /// A strategy for one of `flawless` (always, when `flawed` is false) or, now and
        /// then, one of `flaws`.
        fn maybe_flawed(
            flawed: bool,
            flawless: BoxedStrategy<String>,
            flaws: &'static [&'static str],
        ) -> BoxedStrategy<String> {
            if flawed {
                prop_oneof![
                    12 => flawless,
                    1 => prop::sample::select(flaws).prop_map(str::to_owned),
                ]
                .boxed()
            } else {
                flawless
            }
        }

        /// JSON documents as text: nested containers, every literal and number shape,
        /// every escape form, whitespace between any tokens. With `flawed`, a token here
        /// and there is wrong in one of the ways JSON can be (a bad number, string,
        /// literal or separator), so validity turns on single bytes anywhere in it.
        fn json_text(flawed: bool) -> BoxedStrategy<String> {
            let literal = prop::sample::select(&["null", "true", "false"][..])
                .prop_map(str::to_owned)
                .boxed();
            let leaf = prop_oneof![
                maybe_flawed(flawed, literal, &["tru", "nul", "True", "nan", "'a'", ""]),
                maybe_flawed(
                    flawed,
                    number().boxed(),
                    &[
                        "1.", ".5", "01", "-", "1e", "1e+", "+1", "--1", "0x1", "1.e3"
                    ],
                ),
                maybe_flawed(
                    flawed,
                    string_literal().boxed(),
                    &["\"abc", "\"\\x\"", "\"\\u12\"", "\"a\u{1}b\"", "\"\\\""],
                ),
            ];
            let comma =
                move || maybe_flawed(flawed, Just(",".to_owned()).boxed(), &["", ",,", ";"]);
            let colon = maybe_flawed(flawed, Just(":".to_owned()).boxed(), &["", "::", "="]);
            let key = maybe_flawed(flawed, string_literal().boxed(), &["k", "1", "null", "\"k"]);
            // Nothing, or a separator before the closing bracket.
            let trailing = maybe_flawed(flawed, Just(String::new()).boxed(), &[",", " ,", ":"]);
            leaf.prop_recursive(6, 64, 6, move |inner| {
                let item = (whitespace(), inner.clone(), comma());
                let member = (
                    whitespace(),
                    key.clone(),
                    whitespace(),
                    colon.clone(),
                    inner,
                    comma(),
                );
                prop_oneof![
                    (
                        prop::collection::vec(item, 0..6),
                        trailing.clone(),
                        whitespace()
                    )
                        .prop_map(|(items, trailing, end)| {
                            let mut text = "[".to_owned();
                            for (i, (ws, value, comma)) in items.iter().enumerate() {
                                let sep = if i == 0 { "" } else { comma.as_str() };
                                text.push_str(&format!("{sep}{ws}{value}"));
                            }
                            format!("{text}{trailing}{end}]")
                        }),
                    (
                        prop::collection::vec(member, 0..6),
                        trailing.clone(),
                        whitespace()
                    )
                        .prop_map(|(members, trailing, end)| {
                            let mut text = "{".to_owned();
                            for (i, (a, key, b, colon, value, comma)) in members.iter().enumerate()
                            {
                                let sep = if i == 0 { "" } else { comma.as_str() };
                                text.push_str(&format!("{sep}{a}{key}{b}{colon}{value}"));
                            }
                            format!("{text}{trailing}{end}}}")
                        }),
                ]
            })
            .boxed()
        }

        fn document() -> BoxedStrategy<String> {
            json_text(false)
        }

        proptest! {
            #![proptest_config(cases(1024))]

            #[test]
            fn fuzz_next_special_byte_finds_the_first_one(
                bytes in prop::collection::vec(
                    prop_oneof![8 => b' '..=b'~', 1 => Just(b'"'), 1 => Just(b'\\'), 1 => 0..0x20u8, 1 => 0x80..=0xffu8],
                    0..80,
                ),
                from in any::<usize>(),
            ) {
                let from = from % (bytes.len() + 1);
                let naive = bytes[from..]
                    .iter()
                    .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                    .map_or(bytes.len(), |p| from + p);
                prop_assert_eq!(next_special_byte(&bytes, from), naive);
            }

            #[test]
            fn fuzz_same_bytes_is_equality(
                a in prop::collection::vec(any::<u8>(), 0..100),
                change in prop::option::of((any::<usize>(), any::<u8>())),
                cut in prop::option::weighted(0.1, any::<usize>()),
            ) {
                let mut b = a.clone();
                if let Some((at, byte)) = change && !b.is_empty() {
                    let at = at % b.len();
                    b[at] = byte;
                }
                if let Some(cut) = cut {
                    b.truncate(cut % (b.len() + 1));
                }
                prop_assert_eq!(same_bytes(&a, &b), a == b);
            }

            #[test]
            fn fuzz_string_at_reads_as_the_cursor_reads(text in soup(), open in any::<usize>()) {
                let buf = text.as_bytes();
                let open = open % (buf.len() + 1);
                let mut cur = Cursor::new(&buf[open..]);
                let expected = match buf.get(open) {
                    Some(b'"') => cur.string().ok().flatten().map(|s| Str {
                        start: open + s.start,
                        end: open + s.end,
                        escaped: s.escaped,
                    }),
                    _ => None,
                };
                prop_assert_eq!(string_at(buf, open), expected);
            }

            #[test]
            fn fuzz_skipping_in_one_loop_agrees_with_the_readers(
                text in prop_oneof![soup(), json_text(true)],
                depth in prop_oneof![Just(0u32), Just(MAX_DEPTH - 2), Just(MAX_DEPTH)],
            ) {
                // Near the depth limit too: the loop must refuse what the readers refuse.
                let bytes = text.as_bytes();
                let mut checked = Cursor::new(bytes);
                checked.depth = depth;
                let expected = checked.skip_checked().map(|()| checked.pos());
                let mut fast = Cursor::new(bytes);
                fast.depth = depth;
                prop_assert_eq!(fast.skip_valid().then(|| fast.pos()), expected.ok());
                let mut cur = Cursor::new(bytes);
                cur.depth = depth;
                prop_assert_eq!(cur.skip().map(|()| cur.pos()), expected);
            }

            #[test]
            fn fuzz_arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
                let mut cur = Cursor::new(&bytes);
                let _ = cur.skip().and_then(|()| cur.finish());
                let mut cur = Cursor::new(&bytes);
                if let Err(e) = walk(&bytes, &mut cur).and_then(|()| cur.finish()) {
                    prop_assert!(e.offset <= bytes.len());
                }
                let _ = unescape(&bytes);
            }

            #[test]
            fn fuzz_token_soup_is_judged_as_serde_json_judges_it(text in soup()) {
                check_agreement(&text)?;
            }

            #[test]
            fn fuzz_flawed_documents_are_judged_as_serde_json_judges_them(text in json_text(true)) {
                check_agreement(&text)?;
            }

            #[test]
            fn fuzz_damaged_documents_are_judged_as_serde_json_judges_them(
                text in document(),
                edits in prop::collection::vec((any::<usize>(), 0..3u8, soup_piece()), 1..4),
            ) {
                // Near-valid input: a document with a few bytes deleted, inserted or
                // replaced, where validity turns on a single byte.
                let mut bytes = text.into_bytes();
                for (at, kind, piece) in edits {
                    let at = at % (bytes.len() + 1);
                    match kind {
                        0 if at < bytes.len() => {
                            bytes.remove(at);
                        }
                        1 => {
                            bytes.splice(at..at, piece.bytes());
                        }
                        _ if at < bytes.len() => bytes[at] = piece.as_bytes()[0],
                        _ => {}
                    }
                }
                let mut cur = Cursor::new(&bytes);
                let _ = walk(&bytes, &mut cur);
                // The scanner leaves UTF-8 to the host; serde_json checks it.
                if let Ok(text) = std::str::from_utf8(&bytes) {
                    check_agreement(text)?;
                }
            }

            #[test]
            fn fuzz_numbers_read_as_rust_parses_them(
                text in prop_oneof![
                    number(),
                    Just("NaN".to_owned()),
                    Just("Infinity".to_owned()),
                    Just("-Infinity".to_owned()),
                    "-?[0-9]{17,22}",
                ],
            ) {
                // Leading zeros are not JSON: the readers stop after the first zero.
                let json = !text.trim_start_matches('-').starts_with("0") || {
                    let digits = text.trim_start_matches('-');
                    digits == "0" || !digits.as_bytes()[1].is_ascii_digit()
                };
                let buf = text.as_bytes();
                let mut cur = Cursor::new(buf);
                let float = cur.f64().unwrap();
                let rust: f64 = text.parse().unwrap();
                prop_assert!(float.is_some_and(|f| f.to_bits() == rust.to_bits()) || !json, "{}", text);
                prop_assert_eq!(cur.pos() == buf.len(), json, "{}", text);
                let mut cur = Cursor::new(buf);
                let int = cur.i64().unwrap();
                if json {
                    prop_assert_eq!(int, text.parse::<i64>().ok(), "{}", text);
                    prop_assert_eq!(cur.pos(), if int.is_some() { buf.len() } else { 0 });
                }
            }

            #[test]
            fn fuzz_valid_documents_read_as_serde_json_reads_them(
                text in document(),
                lead in whitespace(),
                trail in whitespace(),
            ) {
                let text = format!("{lead}{text}{trail}");
                let expected: Value = serde_json::from_str(&text).unwrap();
                prop_assert_eq!(parse(&text).unwrap(), expected.clone());
                // And what serde_json writes back, compact and pretty.
                // (Compared with serde_json's reading of that text: its float parsing
                // does not always give back the float it wrote.)
                for again in [
                    serde_json::to_string(&expected).unwrap(),
                    serde_json::to_string_pretty(&expected).unwrap(),
                ] {
                    let reread: Value = serde_json::from_str(&again).unwrap();
                    prop_assert_eq!(parse(&again).unwrap(), reread);
                }
                // A container or string cut anywhere before its closing byte is
                // incomplete (a bare number's prefix may be a number).
                let trimmed = text.trim();
                if trimmed.starts_with(['{', '[', '"']) {
                    for cut in [1, trimmed.len() / 2, trimmed.len() - 1] {
                        prop_assert!(!valid(&trimmed.as_bytes()[..cut]), "{:?}", trimmed);
                    }
                }
            }
        }
    }
}
