//! vLLM's `CustomDataset.sample`, shared by the datasets that subclass it in vLLM
//! (`custom`, `spec_bench`, `speed_bench`): each differs only in how it reads its file
//! into prompts ([`PromptRow`]), then all sample alike: shuffle with `random.seed(seed)`
//! (unless `--disable-shuffle`), make one request per row in order, the prompt wrapped in
//! the chat template unless `--skip-chat-template` and measured with special tokens, the
//! output length from the option or, when it is -1, from the row's `output_tokens`; then
//! oversample when the rows run out (unless `--no-oversample`).
//!
//! Generic over the SDK's tokenizer traits so that a plugin's tests run natively.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::sampling::{ChatTemplate, Picker, SampleFlags, TokenCounter};
use crate::{PluginError, RequestSpec};

/// One prompt of the file.
#[derive(Clone, Debug)]
pub struct PromptRow {
    /// 1-based line number, for error messages.
    pub line: usize,
    pub prompt: String,
    /// The raw `output_tokens` value, read only when the output length is
    /// [`OUTPUT_LEN_FROM_DATA`].
    pub output_tokens: Option<Value>,
}

/// The output-length option's value that reads each row's `output_tokens` (vLLM's -1).
pub const OUTPUT_LEN_FROM_DATA: i64 = -1;

/// How `CustomDataset.sample` is called.
#[derive(Clone, Debug, PartialEq)]
pub struct CustomParams {
    /// The output length; [`OUTPUT_LEN_FROM_DATA`] reads `output_tokens`.
    pub output_len: i64,
    /// `--skip-chat-template`.
    pub skip_chat_template: bool,
    /// `--disable-shuffle`, `--no-oversample`.
    pub flags: SampleFlags,
}

impl Default for CustomParams {
    /// `CustomDataset`'s defaults in `vllm bench serve` (`--custom-output-len 256`).
    fn default() -> Self {
        CustomParams {
            output_len: 256,
            skip_chat_template: false,
            flags: SampleFlags::default(),
        }
    }
}

impl CustomParams {
    /// Checks `output_len` is a token count or [`OUTPUT_LEN_FROM_DATA`]; `option` names the
    /// option in the error.
    pub fn check_output_len(
        plugin: &str,
        option: &str,
        output_len: i64,
    ) -> Result<(), PluginError> {
        if output_len != OUTPUT_LEN_FROM_DATA && u32::try_from(output_len).is_err() {
            return Err(PluginError::InvalidConfig(format!(
                "{plugin}: option {option}={output_len}: expected a token count, or -1 to read \
                 each line's \"output_tokens\""
            )));
        }
        Ok(())
    }
}

/// The file of a dataset that, like vLLM's `CustomDataset` subclasses, reads only JSONL and
/// tells it by the name: `(path, text)`. Errors name the plugin: no `--dataset-path`, a
/// name without `.jsonl` (vLLM's check), a file that cannot be read.
pub fn read_jsonl_file(
    plugin: &str,
    path: Option<String>,
) -> Result<(String, String), PluginError> {
    let path = path.ok_or_else(|| {
        PluginError::InvalidConfig(format!("{plugin}: needs --dataset-path (a .jsonl file)"))
    })?;
    if !path.ends_with(".jsonl") {
        return Err(PluginError::Unsupported(format!(
            "{plugin}: only JSONL files (*.jsonl) are supported, got {path}"
        )));
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| PluginError::InvalidConfig(format!("{plugin}: cannot read {path}: {e}")))?;
    Ok((path, text))
}

/// One object of a JSONL file: its 1-based line number and its fields.
pub type JsonlObject = (usize, Map<String, Value>);

/// The JSON objects of a JSONL file, one per non-blank line, each with its 1-based line
/// number. A line that is not JSON, or not an object, is an error naming the file, the line
/// and the column (`data.jsonl:3: expected value at column 5`, serde_json's reason without
/// its "at line 1" of the one line it saw).
pub fn jsonl_objects(text: &str, name: &str) -> Result<Vec<JsonlObject>, PluginError> {
    let mut objects = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let at = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line).map_err(|e| {
            let full = e.to_string();
            let suffix = format!(" at line {} column {}", e.line(), e.column());
            let why = full.strip_suffix(&suffix).unwrap_or(&full);
            line_error(name, at, format!("{why} at column {}", e.column()))
        })?;
        let Value::Object(fields) = value else {
            return Err(line_error(name, at, "expected a JSON object".into()));
        };
        objects.push((at, fields));
    }
    Ok(objects)
}

/// The JSON objects of a JSONL file given as bytes, for a dataset whose file may carry
/// comments (the graded datasets, whose files follow vLLM's `read_jsonl`): the bytes must
/// be UTF-8 (else an error naming the plugin, the file and the line of the first bad
/// byte), lines that start with `#` are skipped as `read_jsonl` skips them, and the rest is
/// read by [`jsonl_objects`], its errors prefixed with `{plugin}: `. A comment line is
/// blanked rather than dropped, so the line numbers given with the objects and in the
/// errors are the file's.
pub fn commented_jsonl_objects(
    plugin: &str,
    bytes: &[u8],
    name: &str,
) -> Result<Vec<JsonlObject>, PluginError> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let at = e.valid_up_to();
        let line = 1 + bytes[..at].iter().filter(|&&b| b == b'\n').count();
        PluginError::InvalidInput(format!(
            "{plugin}: {name}:{line}: not UTF-8 (byte {at} of the file)"
        ))
    })?;
    let kept: Vec<&str> = text
        .lines()
        .map(|line| if line.starts_with('#') { "" } else { line })
        .collect();
    jsonl_objects(&kept.join("\n"), name).map_err(|e| match e {
        PluginError::InvalidInput(m) => PluginError::InvalidInput(format!("{plugin}: {m}")),
        other => other,
    })
}

/// What is wrong with line `at` of file `name`, as [`jsonl_objects`] says it.
pub fn line_error(name: &str, at: usize, why: String) -> PluginError {
    PluginError::InvalidInput(format!("{name}:{at}: {why}"))
}

/// A row's `prompt`, which vLLM's custom datasets require as a string.
pub fn prompt_field(fields: &mut Map<String, Value>) -> Result<String, String> {
    match fields.remove("prompt") {
        Some(Value::String(p)) => Ok(p),
        Some(_) => Err("\"prompt\" must be a string".into()),
        None => Err("no \"prompt\" field".into()),
    }
}

/// The prompts of a JSONL file, and how many rows the file has.
#[derive(Debug)]
pub struct JsonlPrompts {
    pub rows: Vec<PromptRow>,
    /// Rows (non-blank lines) in the file, kept or not.
    pub total: usize,
}

/// Reads a JSONL file of one object per non-blank line the way vLLM's `CustomDataset`
/// subclasses (`SpecBench`, `SpeedBench`) do: keeps the rows whose `category` is
/// `category` (all when `None`) and takes each kept row's prompt with `prompt` (which
/// says what is wrong, e.g. `no "turns" field`). Errors name the plugin, the file and the
/// line; a category no row has is an error listing the categories there are. Only the
/// prompt is kept (as vLLM does), so an output length of -1 is an error for these files.
pub fn read_jsonl_prompts(
    plugin: &str,
    text: &str,
    name: &str,
    category: Option<&str>,
    prompt: impl Fn(&Map<String, Value>) -> Result<String, String>,
) -> Result<JsonlPrompts, PluginError> {
    let mut rows = Vec::new();
    let mut total = 0;
    let mut categories = BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        let at = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let bad = |why: String| PluginError::InvalidInput(format!("{plugin}: {name}:{at}: {why}"));
        let value: Value = serde_json::from_str(line).map_err(|e| bad(format!("{e}")))?;
        let Value::Object(fields) = value else {
            return Err(bad("expected a JSON object".into()));
        };
        total += 1;
        if let Some(wanted) = category {
            match fields.get("category") {
                Some(Value::String(c)) => {
                    categories.insert(c.clone());
                    if c != wanted {
                        continue;
                    }
                }
                _ => return Err(bad("no string \"category\" to filter by".into())),
            }
        }
        rows.push(PromptRow {
            line: at,
            prompt: prompt(&fields).map_err(bad)?,
            // vLLM keeps only the prompt of these rows.
            output_tokens: None,
        });
    }
    if let Some(wanted) = category
        && rows.is_empty()
        && total > 0
    {
        return Err(PluginError::InvalidConfig(format!(
            "{plugin}: {name}: no row of category {wanted:?} (the file has: {})",
            categories.into_iter().collect::<Vec<_>>().join(", ")
        )));
    }
    Ok(JsonlPrompts { rows, total })
}

/// Python's `int(x)` for the values a JSON `output_tokens` can hold: integers, floats
/// (truncated toward zero) and integer strings.
fn python_int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| {
            n.as_f64()
                .filter(|f| f.is_finite() && f.abs() < 9.2e18)
                .map(|f| f.trunc() as i64)
        }),
        Value::String(s) => s.trim().replace('_', "").parse().ok(),
        _ => None,
    }
}

/// How many prompts are tokenized per host crossing.
const MAX_BATCH: usize = 256;

/// `CustomDataset(...).sample(...)` over rows already read (and, as vLLM's subclasses do,
/// filtered), producing the requests in batches so that each host call stays short:
/// shuffle, take `num_requests` rows in order (all of them when 0), then oversample with
/// a fresh `random.seed(seed)` when the file is shorter.
pub struct CustomSampler {
    /// The plugin's name, for errors.
    plugin: &'static str,
    picker: Picker<PromptRow>,
    /// How many requests are made in all.
    total: usize,
    params: CustomParams,
    /// The file name, for errors.
    name: String,
}

impl CustomSampler {
    /// `rows` must not be empty (vLLM fails on an empty file too); the error names
    /// `plugin` and the file `name`.
    pub fn new(
        plugin: &'static str,
        rows: Vec<PromptRow>,
        seed: u64,
        num_requests: usize,
        params: CustomParams,
        name: &str,
    ) -> Result<Self, PluginError> {
        if rows.is_empty() {
            return Err(no_prompts(plugin, name));
        }
        let num_requests = if num_requests == 0 {
            rows.len()
        } else {
            num_requests
        };
        // Every row makes a request, so only oversampling can make more than the rows.
        let total = if params.flags.no_oversample {
            num_requests.min(rows.len())
        } else {
            num_requests
        };
        Ok(CustomSampler {
            plugin,
            picker: Picker::new(rows, seed, num_requests, params.flags),
            total,
            params,
            name: name.to_string(),
        })
    }

    /// How many requests the source makes in all.
    pub fn total(&self) -> usize {
        self.total
    }

    /// The next (up to) `max` requests, in vLLM's order.
    pub fn next_batch(
        &mut self,
        tok: &(impl ChatTemplate + TokenCounter),
        max: usize,
    ) -> Result<Vec<RequestSpec>, PluginError> {
        let (plugin, params, name) = (self.plugin, &self.params, self.name.as_str());
        let make = |rows: &[PromptRow], want: usize, out: &mut Vec<RequestSpec>| {
            let batch = &rows[..want.min(MAX_BATCH).min(rows.len())];
            let mut prompts = Vec::with_capacity(batch.len());
            let mut output_lens = Vec::with_capacity(batch.len());
            for row in batch {
                output_lens.push(output_len(row, params.output_len, name)?);
                prompts.push(if params.skip_chat_template {
                    row.prompt.clone()
                } else {
                    tok.chat_prompt(&row.prompt)?
                });
            }
            let counts = tok.token_counts(&prompts)?;
            for ((prompt, n), output_len) in prompts.into_iter().zip(counts).zip(output_lens) {
                let prompt_len = u32::try_from(n).map_err(|_| {
                    PluginError::InvalidInput(format!(
                        "{plugin}: {name}: a prompt of {n} tokens is too long"
                    ))
                })?;
                out.push(RequestSpec::text(prompt, prompt_len, output_len));
            }
            Ok(batch.len())
        };
        self.picker
            .next_batch(max, make, || no_prompts(plugin, name))
    }
}

/// The error for a file without rows (so nothing to sample or oversample from).
fn no_prompts(plugin: &str, name: &str) -> PluginError {
    PluginError::InvalidInput(format!("{plugin}: {name}: the file has no prompts"))
}

/// The output length of one row: the option, or the row's `output_tokens` when it is -1
/// (public for the datasets that sample like `CustomDataset` but make other requests,
/// e.g. `custom_audio`).
pub fn output_len(row: &PromptRow, option: i64, name: &str) -> Result<u32, PluginError> {
    let at = |why: String| PluginError::InvalidInput(format!("{name}:{}: {why}", row.line));
    if option != OUTPUT_LEN_FROM_DATA {
        // Options are checked to fit when they are read.
        return Ok(option as u32);
    }
    let raw = row.output_tokens.as_ref().ok_or_else(|| {
        at("no \"output_tokens\" field; with output-len -1 every row needs one".into())
    })?;
    python_int(raw)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| {
            at(format!(
                "\"output_tokens\" must be a non-negative integer, got {raw}"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commented_jsonl_skips_comments_and_keeps_line_numbers() {
        let text = "# header\n{\"a\": 1}\n\n  # indented: not a comment\n";
        match commented_jsonl_objects("p", text.as_bytes(), "c.jsonl") {
            Err(PluginError::InvalidInput(m)) => {
                assert!(
                    m.starts_with("p: c.jsonl:4: expected value at column 3"),
                    "{m}"
                )
            }
            other => panic!("expected an input error, got {other:?}"),
        }
        let text = "# header\n{\"a\": 1}\n\n# {\"a\": 2}\n{\"a\": 3}";
        let got = commented_jsonl_objects("p", text.as_bytes(), "c.jsonl").unwrap();
        let view: Vec<(usize, &Value)> = got.iter().map(|(at, f)| (*at, &f["a"])).collect();
        assert_eq!(view, [(2, &Value::from(1)), (5, &Value::from(3))]);
        assert!(
            commented_jsonl_objects("p", b"# only\n\n", "e.jsonl")
                .unwrap()
                .is_empty()
        );
        for (bytes, want) in [
            (
                &b"{}\n# a comment\n[1]\n"[..],
                "p: q.jsonl:3: expected a JSON object",
            ),
            (
                &b"{}\n\xff\n"[..],
                "p: q.jsonl:2: not UTF-8 (byte 3 of the file)",
            ),
            (
                &b"# \xc3\n{}"[..],
                "p: q.jsonl:1: not UTF-8 (byte 2 of the file)",
            ),
        ] {
            match commented_jsonl_objects("p", bytes, "q.jsonl") {
                Err(PluginError::InvalidInput(m)) => assert_eq!(m, want),
                other => panic!("expected {want:?}, got {other:?}"),
            }
        }
    }

    #[test]
    fn output_tokens_are_read_as_python_int_reads_them() {
        for (raw, want) in [
            (serde_json::json!(7), Some(7)),
            (serde_json::json!(9.8), Some(9)),
            (serde_json::json!(" 1_2 "), Some(12)),
            (serde_json::json!("x"), None),
            (serde_json::json!([1]), None),
        ] {
            assert_eq!(python_int(&raw), want, "{raw}");
        }
        assert!(CustomParams::check_output_len("p", "output-len", -1).is_ok());
        assert!(matches!(
            CustomParams::check_output_len("p", "output-len", -2),
            Err(PluginError::InvalidConfig(m)) if m.contains("p: option output-len=-2")
        ));
    }
}
