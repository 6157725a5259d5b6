//! Tabular files as rows: a JSON array, JSON Lines, CSV/TSV and Parquet, read into one
//! row type ([`Row`] of named [`Value`]s), so a dataset plugin maps columns to requests
//! without caring which format the user has.
//!
//! Enabled by the SDK's `table` feature (it brings the `parquet` and `csv` crates).
//!
//! ```ignore
//! use bench_sdk::table::{self, Format};
//!
//! let table = table::read(&path, &table::ReadOptions::default())?;
//! for row in &table.rows {
//!     let prompt = row
//!         .get("prompt")
//!         .and_then(|v| v.as_str())
//!         .ok_or_else(|| table.error(row, "no string \"prompt\""))?;
//! }
//! ```
//!
//! - The format comes from the file name ([`Format::from_path`]: `.json`, `.jsonl`/`.ndjson`,
//!   `.csv`, `.tsv`, `.parquet`/`.pq`) or is given ([`ReadOptions::format`]). A `.json`
//!   file whose first character is `[` is an array of objects, otherwise it is read as JSON
//!   Lines (as Hugging Face's `json` loader does).
//! - Every row remembers where it came from ([`Place`]); [`Table::error`] and
//!   [`Place::error`] make an error naming the file and the line (JSONL, CSV), item (JSON
//!   array) or row (Parquet). Malformed input is an error naming the same, never skipped.
//! - CSV cells are strings (an empty cell is [`Value::Null`], as pandas reads it);
//!   [`Value::as_i64`] and [`Value::as_f64`] read numbers written as text, so a column
//!   means the same in every format.
//! - Parquet is read with the `parquet` crate's row API (no Arrow) and the codecs that
//!   build for `wasm32-wasip2` in pure Rust: uncompressed, snappy, gzip and lz4. zstd and
//!   brotli would need a C toolchain (zstd) or much more code in every plugin (brotli), so a
//!   file that uses them is a clear error that says how to rewrite it.
//! - [`ReadOptions::columns`] keeps only some columns (for Parquet only those are decoded).

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::PluginError;

/// A tabular file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A `.json` file: an array of objects, or JSON Lines when it does not start with `[`.
    Json,
    /// One JSON object per line (blank lines are skipped).
    JsonLines,
    /// Comma-separated values with a header line.
    Csv,
    /// Tab-separated values with a header line.
    Tsv,
    /// Apache Parquet.
    Parquet,
}

impl Format {
    /// The format a file name says, by its extension (case-insensitive).
    pub fn from_path(path: &str) -> Option<Format> {
        let lower = path.to_ascii_lowercase();
        let ext = lower.rsplit_once('.').map(|(_, e)| e)?;
        Some(match ext {
            "json" => Format::Json,
            "jsonl" | "ndjson" => Format::JsonLines,
            "csv" => Format::Csv,
            "tsv" => Format::Tsv,
            "parquet" | "pq" => Format::Parquet,
            _ => return None,
        })
    }

    /// The format named by `name` (`json`, `jsonl`, `csv`, `tsv`, `parquet`), for an option
    /// that overrides the file name.
    pub fn from_name(name: &str) -> Option<Format> {
        Some(match name.trim().to_ascii_lowercase().as_str() {
            "json" => Format::Json,
            "jsonl" | "ndjson" | "json-lines" => Format::JsonLines,
            "csv" => Format::Csv,
            "tsv" => Format::Tsv,
            "parquet" => Format::Parquet,
            _ => return None,
        })
    }

    /// The names [`Format::from_name`] takes.
    pub const NAMES: [&'static str; 5] = ["json", "jsonl", "csv", "tsv", "parquet"];
}

/// One cell, or a nested value (JSON objects and arrays, Parquet structs, lists and maps).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// Parquet binary columns (images and audio in Hugging Face datasets).
    Bytes(Vec<u8>),
    List(Vec<Value>),
    /// An object, struct or map, in the file's order.
    Map(Vec<(String, Value)>),
}

impl Value {
    /// The field `key` of a [`Value::Map`] (the first one with that name).
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Map(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// A whole number: an integer, a float without a fraction, or text holding one
    /// (CSV cells, numbers quoted in JSON).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Float(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => Some(*f as i64),
            Value::Str(s) => {
                let s = s.trim();
                s.parse::<i64>().ok().or_else(|| {
                    s.parse::<f64>()
                        .ok()
                        .filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
                        .map(|f| f as i64)
                })
            }
            _ => None,
        }
    }

    /// A number: an integer, a float, or text holding one.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            Value::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    pub fn as_list(&self) -> Option<&[Value]> {
        match self {
            Value::List(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_map(&self) -> Option<&[(String, Value)]> {
        match self {
            Value::Map(fields) => Some(fields),
            _ => None,
        }
    }

    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }

    /// What the value is, for error messages (`"a string"`, `"null"`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a float",
            Value::Str(_) => "a string",
            Value::Bytes(_) => "binary data",
            Value::List(_) => "a list",
            Value::Map(_) => "an object",
        }
    }

    /// The value as JSON; binary data becomes an array of byte values.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Value::Null => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Int(i) => J::from(*i),
            Value::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
            Value::Str(s) => J::String(s.clone()),
            Value::Bytes(b) => J::Array(b.iter().map(|&x| J::from(x)).collect()),
            Value::List(items) => J::Array(items.iter().map(Value::to_json).collect()),
            Value::Map(fields) => J::Object(
                fields
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect(),
            ),
        }
    }
}

impl From<serde_json::Value> for Value {
    fn from(v: serde_json::Value) -> Self {
        use serde_json::Value as J;
        match v {
            J::Null => Value::Null,
            J::Bool(b) => Value::Bool(b),
            J::Number(n) => match n.as_i64() {
                Some(i) => Value::Int(i),
                None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            J::String(s) => Value::Str(s),
            J::Array(items) => Value::List(items.into_iter().map(Value::from).collect()),
            J::Object(fields) => Value::Map(
                fields
                    .into_iter()
                    .map(|(k, v)| (k, Value::from(v)))
                    .collect(),
            ),
        }
    }
}

/// JSON straight into [`Value`], without a `serde_json::Value` in between.
impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ValueVisitor;

        impl<'de> Visitor<'de> for ValueVisitor {
            type Value = Value;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_unit<E>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }
            fn visit_none<E>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
                Value::deserialize(d)
            }
            fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
                Ok(Value::Bool(b))
            }
            fn visit_i64<E>(self, i: i64) -> Result<Value, E> {
                Ok(Value::Int(i))
            }
            fn visit_u64<E>(self, u: u64) -> Result<Value, E> {
                Ok(i64::try_from(u).map_or(Value::Float(u as f64), Value::Int))
            }
            fn visit_f64<E>(self, f: f64) -> Result<Value, E> {
                Ok(Value::Float(f))
            }
            fn visit_str<E>(self, s: &str) -> Result<Value, E> {
                Ok(Value::Str(s.to_string()))
            }
            fn visit_string<E>(self, s: String) -> Result<Value, E> {
                Ok(Value::Str(s))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Value::List(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
                let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(0).min(256));
                while let Some((k, v)) = map.next_entry::<String, Value>()? {
                    fields.push((k, v));
                }
                Ok(Value::Map(fields))
            }
        }

        deserializer.deserialize_any(ValueVisitor)
    }
}

/// Where a row came from, for error messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// 1-based line of a JSON Lines or CSV file.
    Line(usize),
    /// 1-based element of a JSON array.
    Item(usize),
    /// 1-based row of a Parquet file (over all row groups).
    Row(usize),
}

impl Place {
    /// An [`PluginError::InvalidInput`] naming `file` and this place:
    /// `data.jsonl:3: why`, `data.json: item 3: why`, `data.parquet: row 3: why`.
    pub fn error(self, file: &str, why: impl fmt::Display) -> PluginError {
        PluginError::InvalidInput(match self {
            Place::Line(n) => format!("{file}:{n}: {why}"),
            Place::Item(n) => format!("{file}: item {n}: {why}"),
            Place::Row(n) => format!("{file}: row {n}: {why}"),
        })
    }

    /// The 1-based number, whatever the kind.
    pub fn number(self) -> usize {
        match self {
            Place::Line(n) | Place::Item(n) | Place::Row(n) => n,
        }
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Place::Line(n) => write!(f, "line {n}"),
            Place::Item(n) => write!(f, "item {n}"),
            Place::Row(n) => write!(f, "row {n}"),
        }
    }
}

/// One row: named values in the file's column order.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub place: Place,
    pub fields: Vec<(String, Value)>,
}

impl Row {
    /// The value of column `name` (`None` when the row has no such column; a column that
    /// is present but empty is `Some(Value::Null)`).
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.fields.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// Takes the value of column `name` out of the row (leaving [`Value::Null`]), to move
    /// large strings instead of copying them.
    pub fn take(&mut self, name: &str) -> Option<Value> {
        self.fields
            .iter_mut()
            .find(|(k, _)| k == name)
            .map(|(_, v)| std::mem::replace(v, Value::Null))
    }

    /// The column names of this row.
    pub fn columns(&self) -> impl Iterator<Item = &str> {
        self.fields.iter().map(|(k, _)| k.as_str())
    }
}

/// How to read a file.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// The format; `None` takes it from the file name and fails when it says none.
    pub format: Option<Format>,
    /// Keep only these columns (in each row's order); `None` keeps all. For Parquet only
    /// these are decoded; a name the file's schema lacks is an error listing its columns.
    pub columns: Option<Vec<String>>,
}

/// The rows of one file.
#[derive(Clone, Debug)]
pub struct Table {
    /// The path as given, for error messages.
    pub path: String,
    pub format: Format,
    pub rows: Vec<Row>,
}

impl Table {
    /// An [`PluginError::InvalidInput`] naming this file and `row`'s place.
    pub fn error(&self, row: &Row, why: impl fmt::Display) -> PluginError {
        row.place.error(&self.path, why)
    }
}

/// Reads the file at `path` (see the module docs). A missing or unreadable file is a
/// [`PluginError::InvalidConfig`] (the user must point at another), bad content a
/// [`PluginError::InvalidInput`] naming the file and line, item or row.
pub fn read(path: &str, options: &ReadOptions) -> Result<Table, PluginError> {
    let format = match options.format {
        Some(f) => f,
        None => Format::from_path(path).ok_or_else(|| {
            PluginError::InvalidConfig(format!(
                "{path}: cannot tell the file's format from its name; expected .json, .jsonl, \
                 .ndjson, .csv, .tsv or .parquet"
            ))
        })?,
    };
    let bytes = std::fs::read(path)
        .map_err(|e| PluginError::InvalidConfig(format!("cannot read {path}: {e}")))?;
    let rows = parse(bytes, path, format, options)?;
    Ok(Table {
        path: path.to_string(),
        format,
        rows,
    })
}

/// Reads rows from the bytes of a file in `format`; `name` is the file name for errors.
/// [`read`] without the file system, for tests.
pub fn parse(
    bytes: Vec<u8>,
    name: &str,
    format: Format,
    options: &ReadOptions,
) -> Result<Vec<Row>, PluginError> {
    match format {
        Format::Parquet => parquet_rows(bytes, name, options.columns.as_deref()),
        _ => parse_text(&bytes, name, format, options),
    }
}

/// [`parse`] for the text formats only (JSON, JSON Lines, CSV, TSV), for a plugin that
/// reads no Parquet: calling it instead of [`parse`] or [`read`] leaves the Parquet reader
/// out of the plugin's `.wasm` (about 1 MB). [`Format::Parquet`] is an error here.
pub fn parse_text(
    bytes: &[u8],
    name: &str,
    format: Format,
    options: &ReadOptions,
) -> Result<Vec<Row>, PluginError> {
    let columns = options.columns.as_deref();
    let mut rows = match format {
        Format::Parquet => {
            return Err(PluginError::Unsupported(format!(
                "{name}: this dataset does not read Parquet files"
            )));
        }
        Format::Csv => delimited(bytes, name, b',')?,
        Format::Tsv => delimited(bytes, name, b'\t')?,
        Format::Json | Format::JsonLines => {
            let text = std::str::from_utf8(bytes).map_err(|e| {
                let line = bytes[..e.valid_up_to()]
                    .iter()
                    .filter(|&&b| b == b'\n')
                    .count()
                    + 1;
                Place::Line(line).error(name, "not valid UTF-8")
            })?;
            let first = text.trim_start_matches('\u{feff}').trim_start().as_bytes();
            if format == Format::Json && first.first() == Some(&b'[') {
                json_array(text, name)?
            } else {
                json_lines(text, name)?
            }
        }
    };
    if let Some(keep) = columns {
        for row in &mut rows {
            row.fields.retain(|(k, _)| keep.iter().any(|c| c == k));
        }
    }
    Ok(rows)
}

/// serde_json's message without its own " at line L column C" (the caller says where).
fn json_reason(e: &serde_json::Error) -> String {
    let full = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    full.strip_suffix(&suffix).unwrap_or(&full).to_string()
}

fn object_fields(value: Value) -> Result<Vec<(String, Value)>, String> {
    match value {
        Value::Map(fields) => Ok(fields),
        other => Err(format!("expected a JSON object, got {}", other.kind())),
    }
}

fn json_lines(text: &str, name: &str) -> Result<Vec<Row>, PluginError> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let place = Place::Line(i + 1);
        let line = if i == 0 {
            line.trim_start_matches('\u{feff}')
        } else {
            line
        };
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line).map_err(|e| {
            place.error(
                name,
                format!("{} at column {}", json_reason(&e), e.column()),
            )
        })?;
        let fields = object_fields(value).map_err(|why| place.error(name, why))?;
        rows.push(Row { place, fields });
    }
    Ok(rows)
}

fn json_array(text: &str, name: &str) -> Result<Vec<Row>, PluginError> {
    let text = text.trim_start_matches('\u{feff}');
    let items: Vec<Value> = serde_json::from_str(text).map_err(|e| {
        PluginError::InvalidInput(format!(
            "{name}:{}: {} at column {}",
            e.line(),
            json_reason(&e),
            e.column()
        ))
    })?;
    items
        .into_iter()
        .enumerate()
        .map(|(i, value)| {
            let place = Place::Item(i + 1);
            let fields = object_fields(value).map_err(|why| place.error(name, why))?;
            Ok(Row { place, fields })
        })
        .collect()
}

/// Line numbers of byte offsets, counted from the file's start as offsets grow. The csv
/// crate's own line count is one short after `\r\n` line ends (it stops at the `\r`).
struct Lines<'a> {
    bytes: &'a [u8],
    at: usize,
    line: usize,
}

impl Lines<'_> {
    /// The 1-based line of the record that starts at byte `offset` (line ends before the
    /// record's first character are skipped).
    fn of(&mut self, offset: usize) -> usize {
        let mut start = offset.min(self.bytes.len());
        while start < self.bytes.len() && matches!(self.bytes[start], b'\r' | b'\n') {
            start += 1;
        }
        if start < self.at {
            self.at = 0;
            self.line = 1;
        }
        self.line += self.bytes[self.at..start]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        self.at = start;
        self.line
    }
}

fn delimited(bytes: &[u8], name: &str, delimiter: u8) -> Result<Vec<Row>, PluginError> {
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    let mut lines = Lines {
        bytes,
        at: 0,
        line: 1,
    };
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .has_headers(true)
        .from_reader(bytes);
    let csv_error = |e: csv::Error, lines: &mut Lines| {
        let line = e.position().map_or(1, |p| lines.of(p.byte() as usize));
        let why = match e.kind() {
            csv::ErrorKind::UnequalLengths {
                expected_len, len, ..
            } => {
                format!("{len} fields where the header has {expected_len}")
            }
            csv::ErrorKind::Utf8 { .. } => "not valid UTF-8".to_string(),
            _ => e.to_string(),
        };
        Place::Line(line).error(name, why)
    };
    let headers: Vec<String> = match reader.headers() {
        Ok(h) => h.iter().map(str::to_string).collect(),
        Err(e) => return Err(csv_error(e, &mut lines)),
    };
    if headers.is_empty() || headers.iter().all(|h| h.is_empty()) {
        return Err(Place::Line(1).error(name, "no header line (the column names)"));
    }
    let mut rows = Vec::new();
    let mut record = csv::StringRecord::new();
    loop {
        match reader.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => return Err(csv_error(e, &mut lines)),
        }
        let line = record.position().map_or(0, |p| lines.of(p.byte() as usize));
        let fields = headers
            .iter()
            .zip(record.iter())
            .map(|(h, cell)| {
                let value = if cell.is_empty() {
                    Value::Null
                } else {
                    Value::Str(cell.to_string())
                };
                (h.clone(), value)
            })
            .collect();
        rows.push(Row {
            place: Place::Line(line),
            fields,
        });
    }
    Ok(rows)
}

fn parquet_rows(
    bytes: Vec<u8>,
    name: &str,
    columns: Option<&[String]>,
) -> Result<Vec<Row>, PluginError> {
    use parquet::basic::Compression;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::schema::types::Type;
    use std::sync::Arc;

    let corrupt = |e: parquet::errors::ParquetError| {
        PluginError::InvalidInput(format!("{name}: not a readable Parquet file: {e}"))
    };
    let reader = SerializedFileReader::new(bytes::Bytes::from(bytes)).map_err(corrupt)?;
    let metadata = reader.metadata();
    for group in metadata.row_groups() {
        for column in group.columns() {
            let codec = match column.compression() {
                Compression::ZSTD(_) => "zstd",
                Compression::BROTLI(_) => "brotli",
                Compression::LZO => "LZO",
                _ => continue,
            };
            return Err(PluginError::Unsupported(format!(
                "{name}: column {} is compressed with {codec}, which this reader does not \
                 support (it reads uncompressed, snappy, gzip and lz4 Parquet; zstd needs a C \
                 library that does not build for the plugin sandbox); rewrite the file with \
                 another codec, e.g. pyarrow.parquet.write_table(table, path, \
                 compression=\"snappy\")",
                column.column_path()
            )));
        }
    }
    let schema = metadata.file_metadata().schema();
    let projection = match columns {
        None => None,
        Some(keep) => {
            let fields = schema.get_fields();
            let mut chosen: Vec<Arc<Type>> = Vec::new();
            for wanted in keep {
                match fields.iter().find(|f| f.name() == wanted) {
                    Some(f) => chosen.push(f.clone()),
                    None => {
                        let have: Vec<&str> = fields.iter().map(|f| f.name()).collect();
                        return Err(PluginError::InvalidInput(format!(
                            "{name}: no column {wanted:?} (columns: {})",
                            have.join(", ")
                        )));
                    }
                }
            }
            // Keep the file's column order.
            chosen.sort_by_key(|c| fields.iter().position(|f| f.name() == c.name()));
            Some(
                Type::group_type_builder(schema.name())
                    .with_fields(chosen)
                    .build()
                    .map_err(corrupt)?,
            )
        }
    };
    let total = usize::try_from(metadata.file_metadata().num_rows()).unwrap_or(0);
    let mut rows = Vec::with_capacity(total.min(1 << 20));
    let iter = reader.get_row_iter(projection).map_err(corrupt)?;
    for (i, row) in iter.enumerate() {
        let place = Place::Row(i + 1);
        let row = row.map_err(|e| place.error(name, format!("cannot decode the row: {e}")))?;
        let fields = row
            .into_columns()
            .into_iter()
            .map(|(k, f)| (k, field_value(f)))
            .collect();
        rows.push(Row { place, fields });
    }
    Ok(rows)
}

fn field_value(field: parquet::record::Field) -> Value {
    use parquet::record::Field as F;
    match field {
        F::Null => Value::Null,
        F::Bool(b) => Value::Bool(b),
        F::Byte(i) => Value::Int(i.into()),
        F::Short(i) => Value::Int(i.into()),
        F::Int(i) => Value::Int(i.into()),
        F::Long(i) => Value::Int(i),
        F::UByte(i) => Value::Int(i.into()),
        F::UShort(i) => Value::Int(i.into()),
        F::UInt(i) => Value::Int(i.into()),
        F::ULong(i) => i64::try_from(i).map_or(Value::Float(i as f64), Value::Int),
        F::Float16(f) => Value::Float(f64::from(f32::from(f))),
        F::Float(f) => Value::Float(f.into()),
        F::Double(f) => Value::Float(f),
        F::Decimal(d) => Value::Str(F::Decimal(d).to_string()),
        F::Str(s) => Value::Str(s),
        F::Bytes(b) => Value::Bytes(b.data().to_vec()),
        F::Date(d) => Value::Int(d.into()),
        F::TimeMillis(t) => Value::Int(t.into()),
        F::TimeMicros(t) | F::TimestampMillis(t) | F::TimestampMicros(t) => Value::Int(t),
        F::Group(row) => Value::Map(
            row.into_columns()
                .into_iter()
                .map(|(k, f)| (k, field_value(f)))
                .collect(),
        ),
        F::ListInternal(list) => {
            Value::List(list.elements().iter().cloned().map(field_value).collect())
        }
        F::MapInternal(map) => Value::Map(
            map.entries()
                .iter()
                .map(|(k, v)| {
                    let key = match field_value(k.clone()) {
                        Value::Str(s) => s,
                        other => other.to_json().to_string(),
                    };
                    (key, field_value(v.clone()))
                })
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Test files made with pyarrow (see tests/data/datasets/file/README.md).
    const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/datasets/file");

    fn rows(text: &str, format: Format) -> Result<Vec<Row>, PluginError> {
        parse(
            text.as_bytes().to_vec(),
            "d.x",
            format,
            &ReadOptions::default(),
        )
    }

    fn invalid(result: Result<Vec<Row>, PluginError>) -> String {
        match result {
            Err(PluginError::InvalidInput(m)) => m,
            other => panic!("expected invalid input, got {other:?}"),
        }
    }

    fn s(v: &str) -> Value {
        Value::Str(v.into())
    }

    #[test]
    fn formats_come_from_names() {
        assert_eq!(Format::from_path("a/b.JSONL"), Some(Format::JsonLines));
        assert_eq!(Format::from_path("x.ndjson"), Some(Format::JsonLines));
        assert_eq!(Format::from_path("x.json"), Some(Format::Json));
        assert_eq!(Format::from_path("x.csv"), Some(Format::Csv));
        assert_eq!(Format::from_path("x.tsv"), Some(Format::Tsv));
        assert_eq!(Format::from_path("x.parquet"), Some(Format::Parquet));
        assert_eq!(Format::from_path("x.txt"), None);
        assert_eq!(Format::from_path("noext"), None);
        for name in Format::NAMES {
            assert!(Format::from_name(name).is_some(), "{name}");
        }
    }

    #[test]
    fn json_lines_keep_types_lines_and_order() {
        let got = rows(
            "\u{feff}{\"p\": \"a\", \"n\": 3, \"f\": 0.5, \"l\": [1, {\"k\": null}]}\n\n\
             {\"n\": \"7\", \"b\": true, \"big\": 18446744073709551615}\r\n",
            Format::JsonLines,
        )
        .unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].place, Place::Line(1));
        assert_eq!(got[1].place, Place::Line(3));
        assert_eq!(got[0].columns().collect::<Vec<_>>(), ["p", "n", "f", "l"]);
        assert_eq!(got[0].get("p"), Some(&s("a")));
        assert_eq!(got[0].get("n").and_then(Value::as_i64), Some(3));
        assert_eq!(got[0].get("f").and_then(Value::as_f64), Some(0.5));
        let l = got[0].get("l").and_then(Value::as_list).unwrap();
        assert_eq!(l[1].get("k"), Some(&Value::Null));
        // Numbers written as text read as numbers.
        assert_eq!(got[1].get("n").and_then(Value::as_i64), Some(7));
        assert_eq!(got[1].get("b").and_then(Value::as_bool), Some(true));
        assert_eq!(
            got[1].get("big"),
            Some(&Value::Float(18446744073709551615.0))
        );
        assert_eq!(got[1].get("p"), None);
        // A .json file that is not an array is JSON Lines too.
        assert_eq!(
            rows("{\"a\": 1}\n{\"a\": 2}\n", Format::Json)
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn json_errors_name_file_and_line_or_item() {
        assert_eq!(
            invalid(rows("{\"a\": 1}\n{\"a\": }\n", Format::JsonLines)),
            "d.x:2: expected value at column 7"
        );
        assert_eq!(
            invalid(rows("{\"a\": 1}\n[1]\n", Format::JsonLines)),
            "d.x:2: expected a JSON object, got a list"
        );
        assert_eq!(
            invalid(rows("[{\"a\": 1},\n {\"a\": 2},\n \"x\"]", Format::Json)),
            "d.x: item 3: expected a JSON object, got a string"
        );
        assert_eq!(
            invalid(rows("[{\"a\": 1},\n {\"a\" 2}]", Format::Json)),
            "d.x:2: expected `:` at column 7"
        );
        let bad = parse(
            b"{\"a\": 1}\n{\"a\": \"\xff\"}\n".to_vec(),
            "d.x",
            Format::JsonLines,
            &ReadOptions::default(),
        );
        assert_eq!(invalid(bad), "d.x:2: not valid UTF-8");
    }

    #[test]
    fn json_array_rows_are_items() {
        let got = rows(" [{\"a\": 1}, {\"a\": [\"x\"]}]", Format::Json).unwrap();
        assert_eq!(got[1].place, Place::Item(2));
        assert_eq!(got[1].get("a"), Some(&Value::List(vec![s("x")])));
    }

    #[test]
    fn csv_cells_are_text_and_errors_name_the_line() {
        let got = rows(
            "prompt,output_len,t\n\"a, with comma\",12,\n\"multi\nline\",\"7\",0.5\n",
            Format::Csv,
        )
        .unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].place, Place::Line(2));
        assert_eq!(got[0].get("prompt"), Some(&s("a, with comma")));
        assert_eq!(got[0].get("output_len").and_then(Value::as_i64), Some(12));
        assert_eq!(got[0].get("t"), Some(&Value::Null));
        assert_eq!(got[1].place, Place::Line(3));
        assert_eq!(got[1].get("prompt"), Some(&s("multi\nline")));
        assert_eq!(got[1].get("t").and_then(Value::as_f64), Some(0.5));
        assert_eq!(
            invalid(rows("a,b\n1,2\n1,2,3\n", Format::Csv)),
            "d.x:3: 3 fields where the header has 2"
        );
        // Windows line ends (Python's csv writer) count lines the same.
        let crlf = rows("a,b\r\n1,2\r\n\"x\r\ny\",4\r\n5,6\r\n", Format::Csv).unwrap();
        let places: Vec<Place> = crlf.iter().map(|r| r.place).collect();
        assert_eq!(places, [Place::Line(2), Place::Line(3), Place::Line(5)]);
        assert_eq!(
            invalid(rows("a,b\r\n1,2\r\n1,2,3\r\n", Format::Csv)),
            "d.x:3: 3 fields where the header has 2"
        );
        let tsv = rows("a\tb\nx y\t2\n", Format::Tsv).unwrap();
        assert_eq!(tsv[0].get("a"), Some(&s("x y")));
        assert_eq!(
            invalid(rows("", Format::Csv)),
            "d.x:1: no header line (the column names)"
        );
    }

    #[test]
    fn columns_keep_only_those_asked_for() {
        let options = ReadOptions {
            columns: Some(vec!["b".into()]),
            ..ReadOptions::default()
        };
        let got = parse(b"a,b\n1,2\n".to_vec(), "d.csv", Format::Csv, &options).unwrap();
        assert_eq!(got[0].fields, vec![("b".to_string(), s("2"))]);
    }

    fn parquet_file(name: &str, columns: Option<&[&str]>) -> Result<Table, PluginError> {
        let options = ReadOptions {
            format: None,
            columns: columns.map(|c| c.iter().map(|s| s.to_string()).collect()),
        };
        read(&format!("{DATA}/{name}"), &options)
    }

    #[test]
    fn parquet_reads_every_pure_rust_codec_with_nested_values() {
        for codec in ["none", "snappy", "gzip", "lz4"] {
            let table = parquet_file(&format!("table-{codec}.parquet"), None).unwrap();
            assert_eq!(table.format, Format::Parquet);
            let r = &table.rows;
            assert_eq!(r.len(), 4, "{codec}");
            assert_eq!(r[0].place, Place::Row(1));
            assert_eq!(
                r[0].columns().collect::<Vec<_>>(),
                [
                    "prompt",
                    "output_len",
                    "send_time",
                    "turns",
                    "image",
                    "score",
                    "flag"
                ]
            );
            assert_eq!(r[0].get("prompt"), Some(&s("Tell me about parquet.")));
            assert_eq!(r[2].get("prompt"), Some(&Value::Null));
            assert_eq!(r[1].get("output_len"), Some(&Value::Int(32)));
            assert_eq!(r[3].get("output_len"), Some(&Value::Null));
            assert_eq!(r[1].get("send_time"), Some(&Value::Float(0.25)));
            assert_eq!(r[0].get("score"), Some(&Value::Float(1.5)));
            assert_eq!(r[2].get("flag"), Some(&Value::Null));
            assert_eq!(
                r[0].get("image").and_then(Value::as_bytes),
                Some(&b"\x89PNG"[..])
            );
            let turns = r[3].get("turns").and_then(Value::as_list).unwrap();
            assert_eq!(turns.len(), 2);
            assert_eq!(turns[1].get("value"), Some(&s("again")));
            assert_eq!(turns[0].get("from"), Some(&s("gpt")));
            assert_eq!(r[1].get("turns"), Some(&Value::List(vec![])));
        }
    }

    #[test]
    fn parquet_projection_decodes_only_the_columns_asked_for() {
        let table = parquet_file("table-snappy.parquet", Some(&["send_time", "prompt"])).unwrap();
        assert_eq!(
            table.rows[1].fields,
            vec![
                ("prompt".to_string(), s("Why is the sky blue?")),
                ("send_time".to_string(), Value::Float(0.25))
            ]
        );
        match parquet_file("table-snappy.parquet", Some(&["nope"])) {
            Err(PluginError::InvalidInput(m)) => {
                assert!(m.ends_with("no column \"nope\" (columns: prompt, output_len, send_time, turns, image, score, flag)"), "{m}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn parquet_codecs_it_cannot_read_and_corrupt_files_are_clear_errors() {
        for codec in ["zstd", "brotli"] {
            match parquet_file(&format!("table-{codec}.parquet"), None) {
                Err(PluginError::Unsupported(m)) => {
                    assert!(m.contains(&format!("compressed with {codec}")), "{m}");
                    assert!(m.contains("compression=\"snappy\""), "{m}");
                }
                other => panic!("{codec}: {other:?}"),
            }
        }
        for name in ["truncated.parquet", "corrupt-pages.parquet"] {
            match parquet_file(name, None) {
                Err(PluginError::InvalidInput(m)) => {
                    assert!(m.contains(name), "{m}");
                    assert!(
                        m.contains("not a readable Parquet file") || m.contains(": row "),
                        "{m}"
                    );
                }
                other => panic!("{name}: {other:?}"),
            }
        }
        // Not Parquet at all.
        let got = parse(
            b"{\"a\": 1}".to_vec(),
            "x.parquet",
            Format::Parquet,
            &ReadOptions::default(),
        );
        assert!(invalid(got).starts_with("x.parquet: not a readable Parquet file"));
    }

    #[test]
    fn missing_files_and_unknown_names_are_config_errors() {
        let options = ReadOptions::default();
        assert!(matches!(
            read("/nonexistent/x.jsonl", &options),
            Err(PluginError::InvalidConfig(m)) if m.starts_with("cannot read /nonexistent/x.jsonl")
        ));
        assert!(matches!(
            read("/nonexistent/x.txt", &options),
            Err(PluginError::InvalidConfig(m)) if m.contains("cannot tell the file's format")
        ));
    }

    #[test]
    fn values_convert_to_and_from_json() {
        let j: serde_json::Value =
            serde_json::from_str("{\"a\": [1, 2.5, \"x\", null, true]}").unwrap();
        let v = Value::from(j.clone());
        assert_eq!(v.to_json(), j);
        let direct: Value = serde_json::from_value(j).unwrap();
        assert_eq!(direct, v);
        assert_eq!(
            Value::Bytes(vec![1, 2]).to_json(),
            serde_json::json!([1, 2])
        );
        assert_eq!(Value::Float(3.0).as_i64(), Some(3));
        assert_eq!(Value::Float(3.5).as_i64(), None);
        assert_eq!(s(" 4 ").as_i64(), Some(4));
        assert_eq!(s("4.0").as_i64(), Some(4));
    }
}
