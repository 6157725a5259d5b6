//! Python-compatible text: `repr(float)` and `json.dump`'s default output.
//!
//! vLLM writes its result file with `json.dump(result, f)`: `", "` and `": "` separators,
//! non-ASCII characters escaped as `\uXXXX` (`ensure_ascii=True`) and floats in Python's
//! shortest `repr` (`1e-05`, `1e+16`, `100.0`). Writing the same bytes lets users diff
//! our files against vLLM's and feed them to tools that compare text.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::ser::{Formatter, Serializer};

/// Python's `repr(x)` (also `str(x)`) of a float: the shortest digits that round-trip,
/// in positional notation when the decimal exponent is in [-4, 16), else as
/// `d.ddde±XX`; integral values keep a `.0`; `inf`, `-inf` and `nan` as Python spells them.
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_string();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    // Rust's `{:e}` gives the same shortest round-trip digits: "-1.2345e-7".
    let scientific = format!("{x:e}");
    let (mantissa, exponent) = scientific
        .split_once('e')
        .expect("`{:e}` output always has an exponent");
    let exponent: i32 = exponent.parse().expect("`{:e}` exponent is an integer");
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if !(-4..16).contains(&exponent) {
        let (first, rest) = digits.split_at(1);
        let fraction = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        return format!("{sign}{first}{fraction}e{exp_sign}{:02}", exponent.abs());
    }
    let point = exponent + 1; // digits before the decimal point
    let text = if point <= 0 {
        format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
    } else if point as usize >= digits.len() {
        format!("{digits}{}.0", "0".repeat(point as usize - digits.len()))
    } else {
        let (int, frac) = digits.split_at(point as usize);
        format!("{int}.{frac}")
    };
    format!("{sign}{text}")
}

/// `json.dump(value, writer)` with Python's defaults.
pub fn to_writer<W: Write, T: Serialize + ?Sized>(writer: W, value: &T) -> serde_json::Result<()> {
    value.serialize(&mut Serializer::with_formatter(
        writer,
        PythonFormatter::default(),
    ))
}

/// `json.dump(value, writer, indent=indent)`: one item a line, `","` and `": "` as
/// separators, empty lists and objects as `[]` and `{}` (vLLM's offline benchmarks
/// write their results so).
pub fn to_writer_indented<W: Write, T: Serialize + ?Sized>(
    writer: W,
    value: &T,
    indent: usize,
) -> serde_json::Result<()> {
    let formatter = PythonFormatter {
        indent: Some(indent),
        ..PythonFormatter::default()
    };
    value.serialize(&mut Serializer::with_formatter(writer, formatter))
}

/// Formats JSON as Python's `json.dump` does: by default on one line, or indented.
#[derive(Default)]
struct PythonFormatter {
    /// Spaces per level; `None`: one line.
    indent: Option<usize>,
    /// The current nesting level (indented only).
    level: usize,
    /// Whether the container being written has a value yet (indented only).
    has_value: bool,
}

impl PythonFormatter {
    fn newline<W: ?Sized + Write>(&self, w: &mut W, indent: usize) -> io::Result<()> {
        w.write_all(b"\n")?;
        for _ in 0..self.level * indent {
            w.write_all(b" ")?;
        }
        Ok(())
    }

    fn open<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.level += 1;
        self.has_value = false;
        w.write_all(bracket)
    }

    fn close<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.level -= 1;
        if let Some(indent) = self.indent
            && self.has_value
        {
            self.newline(w, indent)?;
        }
        self.has_value = true;
        w.write_all(bracket)
    }

    fn item<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        match self.indent {
            None if first => Ok(()),
            None => w.write_all(b", "),
            Some(indent) => {
                if !first {
                    w.write_all(b",")?;
                }
                self.newline(w, indent)
            }
        }
    }
}

impl Formatter for PythonFormatter {
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"[")
    }

    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"]")
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"{")
    }

    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"}")
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn write_f64<W: ?Sized + Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        writer.write_all(float_repr(value).as_bytes())
    }

    fn write_f32<W: ?Sized + Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        self.write_f64(writer, f64::from(value))
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.item(w, first)
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.item(w, first)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    /// serde_json passes runs of characters it does not escape itself (everything but
    /// `"`, `\` and C0 controls); `ensure_ascii` also escapes DEL and all non-ASCII, the
    /// latter as UTF-16 code units.
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        text: &str,
    ) -> io::Result<()> {
        let mut plain_start = 0;
        for (i, c) in text.char_indices() {
            if c.is_ascii() && c != '\x7f' {
                continue;
            }
            w.write_all(&text.as_bytes()[plain_start..i])?;
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                write!(w, "\\u{unit:04x}")?;
            }
            plain_start = i + c.len_utf8();
        }
        w.write_all(&text.as_bytes()[plain_start..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn float_repr_matches_python() {
        // Expected strings are Python 3's repr() of the same values.
        let cases = [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (100.0, "100.0"),
            (99.9, "99.9"),
            (0.1, "0.1"),
            (1.5e-5, "1.5e-05"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (0.00012345, "0.00012345"),
            (123456.789, "123456.789"),
            (1e15, "1000000000000000.0"),
            (1234567890123456.0, "1234567890123456.0"),
            (1e16, "1e+16"),
            (1.25e22, "1.25e+22"),
            (-2.5e-7, "-2.5e-07"),
            (1e100, "1e+100"),
            (0.1 + 0.2, "0.30000000000000004"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
        ];
        for (value, want) in cases {
            assert_eq!(float_repr(value), want, "{value:e}");
        }
    }

    #[test]
    fn indented_json_matches_python_json_dumps_with_indent() {
        let value = json!({"a": 1.5, "b": [1, {"c": []}], "d": {}, "e": {"10": 0.25}});
        // Python: print(json.dumps({"a": 1.5, "b": [1, {"c": []}], "d": {},
        //   "e": {"10": 0.25}}, indent=4))
        let want = "{\n    \"a\": 1.5,\n    \"b\": [\n        1,\n        {\n            \"c\": []\n        }\n    ],\n    \"d\": {},\n    \"e\": {\n        \"10\": 0.25\n    }\n}";
        let mut out = Vec::new();
        to_writer_indented(&mut out, &value, 4).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), want);
    }

    #[test]
    fn json_matches_python_json_dumps() {
        let value = json!({
            "a": 1,
            "b": [1.0, 2.5, 1e-05, []],
            "c": {"d": null, "e": true},
            "f": "caf\u{e9} \u{1F600} \u{7f} \"q\" \\ \n\t\u{1}",
            "g": {}
        });
        // Python: json.dumps({"a": 1, "b": [1.0, 2.5, 1e-05, []], "c": {"d": None, "e": True},
        //   "f": "caf\u00e9 \U0001F600 \x7f \"q\" \\ \n\t\x01", "g": {}})
        // (serde_json's map is ordered by key here, the same order as written.)
        let want = r#"{"a": 1, "b": [1.0, 2.5, 1e-05, []], "c": {"d": null, "e": true}, "f": "caf\u00e9 \ud83d\ude00 \u007f \"q\" \\ \n\t\u0001", "g": {}}"#;
        let mut out = Vec::new();
        to_writer(&mut out, &value).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), want);
    }
}
