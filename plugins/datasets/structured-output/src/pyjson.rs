//! JSON as Python's `json` module reads and writes it: `json.load` into a tree that keeps
//! the keys in the document's order, and `json.dumps` back to text, byte for byte.
//!
//! vLLM's prompt embeds `json.dumps(schema)`, so the prompt's bytes (and its token count)
//! depend on Python's rendering: `", "` and `": "` separators, keys in the order the file
//! gives them (a repeated key keeps its first place and takes its last value, as a `dict`
//! does), every character outside printable ASCII escaped as `\uXXXX` (`ensure_ascii`),
//! integers as written (any size), floats as `repr(float)` (`1e+16`, `1e-05`, `100.0`),
//! and Python's `NaN`, `Infinity` and `-Infinity`. `serde_json` differs on several of
//! these (and its `preserve_order` feature would reach every plugin of the workspace
//! through feature unification), hence this small reader and writer.

use std::collections::HashMap;
use std::fmt::Write as _;

/// Nesting deeper than this is refused (Python stops at its recursion limit, near 1000;
/// the wasm stack is small).
const MAX_DEPTH: usize = 512;

/// A JSON value as `json.load` makes it.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    /// A Python `int`: the digits as `str(int)` writes them (`-0` is `0`).
    Int(String),
    /// A Python `float` (a number with a fraction or an exponent, or a constant).
    Float(f64),
    Str(String),
    Array(Vec<Value>),
    /// A `dict`: keys in insertion order, each once.
    Object(Vec<(String, Value)>),
}

/// `json.loads(text)`; the error says what is wrong and at which byte.
pub fn parse(text: &str) -> Result<Value, String> {
    let mut p = Parser {
        s: text.as_bytes(),
        pos: 0,
    };
    p.ws();
    let value = p.value(0)?;
    p.ws();
    if p.pos != p.s.len() {
        return Err(p.err("extra data after the JSON value"));
    }
    Ok(value)
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn err(&self, what: &str) -> String {
        format!("{what} at byte {}", self.pos)
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    /// Python's `[ \t\n\r]*`.
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn eat(&mut self, lit: &str) -> bool {
        if self.s[self.pos..].starts_with(lit.as_bytes()) {
            self.pos += lit.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(self.err(&format!("nesting deeper than {MAX_DEPTH}")));
        }
        match self.peek() {
            None => Err(self.err("expected a value, found the end")),
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => Ok(Value::Str(self.string()?)),
            Some(b'-' | b'0'..=b'9') => {
                if self.eat("-Infinity") {
                    Ok(Value::Float(f64::NEG_INFINITY))
                } else {
                    self.number()
                }
            }
            _ if self.eat("null") => Ok(Value::Null),
            _ if self.eat("true") => Ok(Value::Bool(true)),
            _ if self.eat("false") => Ok(Value::Bool(false)),
            _ if self.eat("NaN") => Ok(Value::Float(f64::NAN)),
            _ if self.eat("Infinity") => Ok(Value::Float(f64::INFINITY)),
            _ => Err(self.err("expected a value")),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, String> {
        self.pos += 1; // '{'
        let mut members: Vec<(String, Value)> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value::Object(members));
        }
        loop {
            if self.peek() != Some(b'"') {
                return Err(self.err("expected a property name in double quotes"));
            }
            let key = self.string()?;
            self.ws();
            if self.peek() != Some(b':') {
                return Err(self.err("expected ':' after a property name"));
            }
            self.pos += 1;
            self.ws();
            let value = self.value(depth + 1)?;
            match index.get(&key) {
                Some(&i) => members[i].1 = value,
                None => {
                    index.insert(key.clone(), members.len());
                    members.push((key, value));
                }
            }
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.ws();
                }
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Object(members));
                }
                _ => return Err(self.err("expected ',' or '}' in an object")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, String> {
        self.pos += 1; // '['
        let mut items = Vec::new();
        self.ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Value::Array(items));
        }
        loop {
            items.push(self.value(depth + 1)?);
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.ws();
                }
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(self.err("expected ',' or ']' in an array")),
            }
        }
    }

    /// Python's `-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?`: an `int` without a fraction or
    /// an exponent, else a `float`.
    fn number(&mut self) -> Result<Value, String> {
        let start = self.pos;
        let digits = |p: &mut Self| {
            let from = p.pos;
            while let Some(b'0'..=b'9') = p.peek() {
                p.pos += 1;
            }
            p.pos - from
        };
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                digits(self);
            }
            _ => return Err(self.err("expected a digit")),
        }
        let int_end = self.pos;
        let mut float = false;
        if self.peek() == Some(b'.') && matches!(self.s.get(self.pos + 1), Some(b'0'..=b'9')) {
            self.pos += 1;
            digits(self);
            float = true;
        }
        if let Some(b'e' | b'E') = self.peek() {
            let mark = self.pos;
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if digits(self) == 0 {
                // Python's regex leaves a bare `e` out of the number (and then fails on
                // it as extra data).
                self.pos = mark;
            } else {
                float = true;
            }
        }
        let text = std::str::from_utf8(&self.s[start..self.pos]).expect("ASCII");
        if float {
            let x: f64 = text.parse().map_err(|e| format!("number {text}: {e}"))?;
            Ok(Value::Float(x))
        } else if &self.s[start..int_end] == b"-0" {
            Ok(Value::Int("0".into()))
        } else {
            Ok(Value::Int(text.into()))
        }
    }

    fn hex4(&mut self) -> Result<u16, String> {
        let hex = self
            .s
            .get(self.pos..self.pos + 4)
            .and_then(|h| std::str::from_utf8(h).ok())
            .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| self.err("invalid \\uXXXX escape"))?;
        let unit = u16::from_str_radix(hex, 16).expect("four hex digits");
        self.pos += 4;
        Ok(unit)
    }

    fn string(&mut self) -> Result<String, String> {
        self.pos += 1; // '"'
        let mut out = String::new();
        loop {
            let run = self.pos;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            // The input is a &str and the run stops at ASCII bytes only: valid UTF-8.
            out.push_str(std::str::from_utf8(&self.s[run..self.pos]).expect("UTF-8"));
            match self.peek() {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let Some(escape) = self.peek() else {
                        return Err(self.err("unterminated string"));
                    };
                    self.pos += 1;
                    match escape {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let unit = self.hex4()?;
                            let c = if (0xd800..0xdc00).contains(&unit)
                                && self.s[self.pos..].starts_with(b"\\u")
                            {
                                let mark = self.pos;
                                self.pos += 2;
                                let low = self.hex4()?;
                                if (0xdc00..0xe000).contains(&low) {
                                    char::decode_utf16([unit, low]).next().and_then(Result::ok)
                                } else {
                                    self.pos = mark;
                                    None
                                }
                            } else {
                                char::from_u32(u32::from(unit))
                            };
                            // Python keeps a lone surrogate; no Rust string (nor a server
                            // reading the schema) can.
                            out.push(c.ok_or_else(|| {
                                self.err(&format!("lone UTF-16 surrogate \\u{unit:04x}"))
                            })?);
                        }
                        _ => return Err(self.err("invalid escape")),
                    }
                }
                Some(_) => return Err(self.err("control character in a string")),
            }
        }
    }
}

/// Separators: Python's default (`", "`, `": "`) or compact (`","`, `":"`).
#[derive(Clone, Copy)]
enum Style {
    Python,
    Compact,
}

/// `json.dumps(value)`: Python's default rendering.
pub fn dumps(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value, Style::Python);
    out
}

/// `json.dumps(value, separators=(",", ":"))`: the same, without the spaces.
pub fn dumps_compact(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value, Style::Compact);
    out
}

fn write_value(out: &mut String, value: &Value, style: Style) {
    let (item, key) = match style {
        Style::Python => (", ", ": "),
        Style::Compact => (",", ":"),
    };
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(digits) => out.push_str(digits),
        Value::Float(x) => out.push_str(&float_repr(*x)),
        Value::Str(s) => write_str(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(item);
                }
                write_value(out, v, style);
            }
            out.push(']');
        }
        Value::Object(members) => {
            out.push('{');
            for (i, (k, v)) in members.iter().enumerate() {
                if i > 0 {
                    out.push_str(item);
                }
                write_str(out, k);
                out.push_str(key);
                write_value(out, v, style);
            }
            out.push('}');
        }
    }
}

/// A string with `ensure_ascii`: printable ASCII as is (but `"` and `\`), the usual short
/// escapes, everything else `\uXXXX` (lowercase hex, UTF-16 surrogate pairs above U+FFFF).
fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

/// `json.dumps` of a float: `repr(x)`, or `NaN`, `Infinity`, `-Infinity`. `repr` writes
/// the shortest digits that read back to `x`, positionally when the decimal exponent is
/// in [-4, 16), with `.0` on whole numbers, else as `d.ddde±XX`.
fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    // Rust's `{:e}` also writes the shortest round-tripping digits: `-1.5e16`, `1e-5`.
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e} exponent");
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if x == 0.0 {
        return format!("{sign}0.0");
    }
    if (-4..16).contains(&exp) {
        let n = digits.len() as i32;
        if exp < 0 {
            // 0.000ddd
            format!("{sign}0.{}{digits}", "0".repeat((-exp - 1) as usize))
        } else if exp + 1 >= n {
            // ddd000.0
            format!("{sign}{digits}{}.0", "0".repeat((exp + 1 - n) as usize))
        } else {
            let (int, frac) = digits.split_at((exp + 1) as usize);
            format!("{sign}{int}.{frac}")
        }
    } else {
        let (first, rest) = digits.split_at(1);
        let dot = if rest.is_empty() { "" } else { "." };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{first}{dot}{rest}e{esign}{:02}", exp.unsigned_abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `json.dumps(json.loads(text))`, printed by CPython 3.11.7.
    #[test]
    fn numbers_render_as_python() {
        let text = "[1.0, -0, -0.0, 0.0, 1e16, 1.5e16, 123456789012345678, \
                    1234567890123456.7, 9999999999999998.0, 0.0001, 1e-05, 2.5E-7, 1E+2, \
                    0.1, 3.141592653589793, 1e400, -1e400, 12345678901234567890123, 5e-324, \
                    1.7976931348623157e308, 1e22, 100.5e-2, NaN, -Infinity, Infinity]";
        let want = "[1.0, 0, -0.0, 0.0, 1e+16, 1.5e+16, 123456789012345678, \
                    1234567890123456.8, 9999999999999998.0, 0.0001, 1e-05, 2.5e-07, 100.0, \
                    0.1, 3.141592653589793, Infinity, -Infinity, 12345678901234567890123, \
                    5e-324, 1.7976931348623157e+308, 1e+22, 1.005, NaN, -Infinity, Infinity]";
        assert_eq!(dumps(&parse(text).unwrap()), want);
    }

    /// Key order, a repeated key (first place, last value), `ensure_ascii` escapes and
    /// both separator styles; the expected strings printed by CPython 3.11.7
    /// (`json.dumps(json.loads(text))` and with `separators=(",", ":")`).
    #[test]
    fn strings_and_objects_render_as_python() {
        let text = r#"{"b": [1.0, 2],
 "a": "caf\u00e9 \u00fcber \ud83d\ude00 tab\there\n\"q\" back\\slash \/ \u0001 \u007f",
 "raw": "naïve ✓ 😀",
 "b": {"nested": {}, "empty": [], "t": true, "f": false, "n": null},
 "": 0 }"#;
        let v = parse(text).unwrap();
        assert_eq!(
            dumps(&v),
            r#"{"b": {"nested": {}, "empty": [], "t": true, "f": false, "n": null}, "a": "caf\u00e9 \u00fcber \ud83d\ude00 tab\there\n\"q\" back\\slash / \u0001 \u007f", "raw": "na\u00efve \u2713 \ud83d\ude00", "": 0}"#
        );
        assert_eq!(
            dumps_compact(&v),
            r#"{"b":{"nested":{},"empty":[],"t":true,"f":false,"n":null},"a":"caf\u00e9 \u00fcber \ud83d\ude00 tab\there\n\"q\" back\\slash / \u0001 \u007f","raw":"na\u00efve \u2713 \ud83d\ude00","":0}"#
        );
    }

    #[test]
    fn what_python_refuses_is_refused() {
        for bad in [
            "",
            "{",
            "{\"a\": 1,}",
            "[1, 2,]",
            "{'a': 1}",
            "01",
            "1.",
            "1e",
            "-",
            "\"tab\there\"",
            "\"\\x\"",
            "\"\\u12\"",
            "{} {}",
            "\u{feff}{}",
            "nul",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
        // Python keeps a lone surrogate; it is refused here, with its code.
        let err = parse(r#"{"a": "\ud800"}"#).unwrap_err();
        assert!(err.contains("\\ud800"), "{err}");
        let deep = "[".repeat(MAX_DEPTH + 2) + &"]".repeat(MAX_DEPTH + 2);
        assert!(parse(&deep).unwrap_err().contains("nesting"));
    }

    #[test]
    fn whitespace_and_literals() {
        let v = parse(" \t\r\n{\"x\" : [ true , false , null ] }\n").unwrap();
        assert_eq!(dumps(&v), "{\"x\": [true, false, null]}");
        assert_eq!(dumps_compact(&v), "{\"x\":[true,false,null]}");
    }
}
