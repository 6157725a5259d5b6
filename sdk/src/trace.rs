//! Request traces in the Mooncake / vLLM `timed_trace` shape: one JSON object per line with
//! a send time, an input and an output length, and the hash ids of the prompt's blocks
//! (`{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47]}`).
//! Shared by the `timed_trace` and `mooncake` datasets (feature `table`).
//!
//! - [`read`] reads the entries with configurable field names ([`Labels`]), each error
//!   naming the file and line (and, where a field is missing, the fields the line has and
//!   the flag that renames it).
//! - [`prefix_hit_rate`]: the share of prompt blocks whose hash id appeared earlier in the
//!   trace, the hit rate an infinite prefix cache would reach.
//! - [`token_pool`]: the token ids prompts are drawn from (the vocabulary without special
//!   tokens, sorted, as vLLM's `TimedTrace` draws them).

use std::collections::HashSet;

use crate::PluginError;
use crate::table::{self, Format, Place, ReadOptions, Value};

/// The field names of a trace line, and the flags that set them (named in errors).
#[derive(Clone, Debug, PartialEq)]
pub struct Labels {
    pub timestamp: String,
    pub input_length: String,
    pub output_length: String,
    pub hash_ids: String,
    /// The command-line flags that set each label, in the order above, for error messages
    /// (`None` when the names are fixed).
    pub flags: Option<[&'static str; 4]>,
}

impl Default for Labels {
    /// The Mooncake / vLLM defaults: `timestamp`, `input_length`, `output_length`,
    /// `hash_ids`.
    fn default() -> Self {
        Labels {
            timestamp: "timestamp".into(),
            input_length: "input_length".into(),
            output_length: "output_length".into(),
            hash_ids: "hash_ids".into(),
            flags: None,
        }
    }
}

/// One line of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// Where the line is (1-based).
    pub place: Place,
    /// The raw time stamp, in the trace's unit.
    pub timestamp: f64,
    /// The prompt length the trace gives (may be negative or zero in a broken trace; the
    /// caller decides).
    pub input_length: i64,
    pub output_length: u32,
    /// The hash ids as Python's `str()` writes them (`46`, or a string's own text); empty
    /// when the line has none.
    pub hash_ids: Vec<String>,
}

/// Reads the first `limit` entries (all when `None`) of the JSON Lines trace at `path`.
/// A missing field, a value of the wrong type or a malformed line is an error naming the
/// file and line.
pub fn read(path: &str, labels: &Labels, limit: Option<usize>) -> Result<Vec<Entry>, PluginError> {
    let bytes = std::fs::read(path)
        .map_err(|e| PluginError::InvalidConfig(format!("cannot read {path}: {e}")))?;
    // The text reader only, so that trace plugins carry no Parquet code.
    let rows = table::parse_text(&bytes, path, Format::JsonLines, &ReadOptions::default())?;
    let take = limit.unwrap_or(usize::MAX);
    rows.into_iter()
        .take(take)
        .map(|row| entry(row, path, labels))
        .collect()
}

/// Parses the rows of an already read trace (see [`read`]); `name` is the file for errors.
pub fn entry(row: table::Row, name: &str, labels: &Labels) -> Result<Entry, PluginError> {
    let place = row.place;
    let bad = |why: String| place.error(name, why);
    let field = |i: usize, label: &str| -> Result<&Value, PluginError> {
        match row.get(label) {
            Some(v) if !v.is_null() => Ok(v),
            _ => {
                let have: Vec<&str> = row.columns().collect();
                let hint = labels
                    .flags
                    .map(|f| format!("; name the field with --{}", f[i]))
                    .unwrap_or_default();
                Err(bad(format!(
                    "no {label:?} field (the line has: {}){hint}",
                    have.join(", ")
                )))
            }
        }
    };
    let ts = field(0, &labels.timestamp)?;
    let timestamp = ts.as_f64().filter(|t| t.is_finite()).ok_or_else(|| {
        bad(format!(
            "{:?} must be a number, got {}",
            labels.timestamp,
            ts.to_json()
        ))
    })?;
    let len = |i: usize, label: &str| -> Result<i64, PluginError> {
        let v = field(i, label)?;
        v.as_i64().ok_or_else(|| {
            bad(format!(
                "{label:?} must be a whole number, got {}",
                v.to_json()
            ))
        })
    };
    let input_length = len(1, &labels.input_length)?;
    let output = len(2, &labels.output_length)?;
    let output_length = u32::try_from(output).map_err(|_| {
        bad(format!(
            "{:?} must be a token count >= 0, got {output}",
            labels.output_length
        ))
    })?;
    let hash_ids = match row.get(&labels.hash_ids) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::List(items)) => items
            .iter()
            .map(|h| match h {
                Value::Int(i) => Ok(i.to_string()),
                Value::Str(s) => Ok(s.clone()),
                other => Err(bad(format!(
                    "{:?} must hold integers or strings, got {}",
                    labels.hash_ids,
                    other.kind()
                ))),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(bad(format!(
                "{:?} must be a list, got {}",
                labels.hash_ids,
                other.kind()
            )));
        }
    };
    Ok(Entry {
        place,
        timestamp,
        input_length,
        output_length,
        hash_ids,
    })
}

/// How many of each prompt's blocks a trace uses: `ceil(input_length / block_size)`, at
/// most the number of hash ids.
pub fn blocks_used(entry: &Entry, block_size: usize) -> usize {
    let len = usize::try_from(entry.input_length.max(0)).unwrap_or(usize::MAX);
    len.div_ceil(block_size.max(1)).min(entry.hash_ids.len())
}

/// The prefix-cache hit rate an infinite cache would reach on this trace: the share of
/// prompt blocks (those [`blocks_used`] counts) whose hash id appeared earlier in the trace
/// (in an earlier request, or earlier in the same prompt). `(hits, blocks)`.
pub fn prefix_hit_rate(entries: &[Entry], block_size: usize) -> (u64, u64) {
    let mut seen: HashSet<&str> = HashSet::new();
    let (mut hits, mut blocks) = (0u64, 0u64);
    for entry in entries {
        for h in &entry.hash_ids[..blocks_used(entry, block_size)] {
            blocks += 1;
            if !seen.insert(h.as_str()) {
                hits += 1;
            }
        }
    }
    (hits, blocks)
}

/// The token ids a synthetic prompt is drawn from: `0..vocab_len` (the tokenizer's
/// `len(tokenizer)`) without the special tokens, sorted, which is vLLM `TimedTrace`'s
/// `sorted(get_vocab().values())` without `all_special_ids` for tokenizers whose ids have
/// no gaps.
pub fn token_pool(vocab_len: u32, special_ids: &[u32]) -> Vec<u32> {
    let special: HashSet<u32> = special_ids.iter().copied().collect();
    (0..vocab_len).filter(|id| !special.contains(id)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, labels: &Labels) -> Result<Vec<Entry>, PluginError> {
        table::parse(
            text.as_bytes().to_vec(),
            "t.jsonl",
            Format::JsonLines,
            &ReadOptions::default(),
        )?
        .into_iter()
        .map(|row| entry(row, "t.jsonl", labels))
        .collect()
    }

    fn invalid(r: Result<Vec<Entry>, PluginError>) -> String {
        match r {
            Err(PluginError::InvalidInput(m)) => m,
            other => panic!("expected invalid input, got {other:?}"),
        }
    }

    #[test]
    fn entries_are_read_with_their_labels() {
        let got = parse(
            "{\"timestamp\": 27482, \"input_length\": 6955, \"output_length\": 52, \
             \"hash_ids\": [46, 47, \"x\"]}\n{\"timestamp\": \"1.5\", \"input_length\": 3.0, \
             \"output_length\": 1}\n",
            &Labels::default(),
        )
        .unwrap();
        assert_eq!(
            got[0],
            Entry {
                place: Place::Line(1),
                timestamp: 27482.0,
                input_length: 6955,
                output_length: 52,
                hash_ids: vec!["46".into(), "47".into(), "x".into()],
            }
        );
        assert_eq!(got[1].timestamp, 1.5);
        assert_eq!(got[1].input_length, 3);
        assert!(got[1].hash_ids.is_empty());
        let labels = Labels {
            timestamp: "t".into(),
            input_length: "in".into(),
            output_length: "out".into(),
            hash_ids: "h".into(),
            flags: None,
        };
        let got = parse("{\"t\": 2, \"in\": 4, \"out\": 5, \"h\": [9]}\n", &labels).unwrap();
        assert_eq!((got[0].timestamp, got[0].hash_ids.len()), (2.0, 1));
    }

    #[test]
    fn bad_lines_name_file_line_and_flag() {
        let labels = Labels {
            flags: Some(["ts-flag", "in-flag", "out-flag", "h-flag"]),
            ..Labels::default()
        };
        let good = "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n";
        let m = invalid(parse(
            &format!("{good}{{\"time\": 0, \"input_length\": 1, \"output_length\": 1}}\n"),
            &labels,
        ));
        assert_eq!(
            m,
            "t.jsonl:2: no \"timestamp\" field (the line has: time, input_length, \
             output_length); name the field with --ts-flag"
        );
        for (line, want) in [
            (
                "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": -1}",
                "t.jsonl:2: \"output_length\" must be a token count >= 0, got -1",
            ),
            (
                "{\"timestamp\": 0, \"input_length\": 1.5, \"output_length\": 1}",
                "t.jsonl:2: \"input_length\" must be a whole number, got 1.5",
            ),
            (
                "{\"timestamp\": [], \"input_length\": 1, \"output_length\": 1}",
                "t.jsonl:2: \"timestamp\" must be a number, got []",
            ),
            (
                "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": 4}",
                "t.jsonl:2: \"hash_ids\" must be a list, got an integer",
            ),
            (
                "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1.5]}",
                "t.jsonl:2: \"hash_ids\" must hold integers or strings, got a float",
            ),
            (
                "{\"timestamp\": 0,",
                "t.jsonl:2: EOF while parsing a value at column 16",
            ),
        ] {
            assert_eq!(invalid(parse(&format!("{good}{line}\n"), &labels)), want);
        }
    }

    fn e(input_length: i64, hash_ids: &[u32]) -> Entry {
        Entry {
            place: Place::Line(1),
            timestamp: 0.0,
            input_length,
            output_length: 1,
            hash_ids: hash_ids.iter().map(|h| h.to_string()).collect(),
        }
    }

    #[test]
    fn hit_rate_counts_blocks_seen_before() {
        let trace = [
            e(1024, &[1, 2]),
            e(1500, &[1, 2, 3]),
            // Only the first block is used: 100 tokens.
            e(100, &[3, 9]),
            // A block repeated inside one prompt hits too.
            e(1024, &[7, 7]),
        ];
        assert_eq!(blocks_used(&trace[2], 512), 1);
        assert_eq!(prefix_hit_rate(&trace, 512), (4, 8));
        assert_eq!(prefix_hit_rate(&[], 512), (0, 0));
    }

    #[test]
    fn the_pool_leaves_out_special_tokens() {
        assert_eq!(token_pool(6, &[5, 0, 9]), [1, 2, 3, 4]);
    }
}
