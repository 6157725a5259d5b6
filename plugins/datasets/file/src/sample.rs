//! The `file` dataset's sampling (beyond vLLM): rows of a tabular file
//! ([`bench_sdk::table`]) mapped to requests by column names, taken as vLLM's file datasets
//! take theirs ([`Picker`]: shuffled with the seed unless `--disable-shuffle`, oversampled
//! when short unless `--no-oversample`).
//!
//! - `prompt` column: the prompt text (a row without one is an error naming the row).
//! - `output-len` column (optional): each row's output tokens; an empty cell takes the
//!   `output-len` option.
//! - `send-time` column (optional): each row's send time in seconds from the start of the
//!   run, so the run replays the file at those times. A timed file is a trace: its first
//!   `num_requests` rows are taken in file order, neither shuffled nor repeated.
//! - `session` column (optional): rows with the same value are one conversation, its turns
//!   in file order, replayed turn by turn with the server's answers in the history (see
//!   [`crate::turns`]).

use bench_sdk::sampling::{ChatTemplate, Picker, SampleFlags, TokenCounter};
use bench_sdk::table::{Place, Row, Value};
use bench_sdk::{PluginError, RequestSpec};

/// Which column holds what.
#[derive(Clone, Debug, PartialEq)]
pub struct Columns {
    pub prompt: String,
    pub output_len: Option<String>,
    pub send_time: Option<String>,
    pub session: Option<String>,
}

impl Default for Columns {
    fn default() -> Self {
        Columns {
            prompt: "prompt".into(),
            output_len: None,
            send_time: None,
            session: None,
        }
    }
}

impl Columns {
    /// The columns to read (Parquet decodes only these).
    pub fn names(&self) -> Vec<String> {
        let mut names = vec![self.prompt.clone()];
        for c in [&self.output_len, &self.send_time, &self.session]
            .into_iter()
            .flatten()
        {
            if !names.contains(c) {
                names.push(c.clone());
            }
        }
        names
    }
}

/// The options that shape the requests.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    pub columns: Columns,
    /// Output tokens where the row gives none.
    pub output_len: u32,
    /// Wrap each prompt in the tokenizer's chat template.
    pub chat_template: bool,
    pub flags: SampleFlags,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            columns: Columns::default(),
            output_len: 256,
            chat_template: false,
            flags: SampleFlags::default(),
        }
    }
}

/// One row, checked.
#[derive(Clone, Debug)]
pub struct Item {
    pub place: Place,
    pub prompt: String,
    pub output_len: Option<u32>,
    pub send_at: Option<f64>,
    /// The conversation the row belongs to (the session column's value).
    pub conversation: Option<String>,
}

/// Checks every row against the column mapping; errors name the file and the row.
pub fn items(rows: Vec<Row>, columns: &Columns, name: &str) -> Result<Vec<Item>, PluginError> {
    let mut out = Vec::with_capacity(rows.len());
    for mut row in rows {
        let place = row.place;
        let bad = |why: String| place.error(name, why);
        let missing = |row: &Row, col: &str| {
            let have: Vec<&str> = row.columns().collect();
            bad(format!(
                "no {col:?} column (the row has: {})",
                have.join(", ")
            ))
        };
        let prompt = match row.take(&columns.prompt) {
            Some(Value::Str(s)) => s,
            Some(Value::Null) => return Err(bad(format!("{:?} is empty", columns.prompt))),
            Some(other) => {
                return Err(bad(format!(
                    "{:?} must be text, got {}",
                    columns.prompt,
                    other.kind()
                )));
            }
            None => return Err(missing(&row, &columns.prompt)),
        };
        let output_len = match &columns.output_len {
            None => None,
            Some(col) => match row.get(col) {
                None => return Err(missing(&row, col)),
                Some(Value::Null) => None,
                Some(v) => Some(v.as_i64().and_then(|n| u32::try_from(n).ok()).ok_or_else(
                    || {
                        bad(format!(
                            "{col:?} must be a token count >= 0, got {}",
                            v.to_json()
                        ))
                    },
                )?),
            },
        };
        let send_at = match &columns.send_time {
            None => None,
            Some(col) => {
                let v = row.get(col).ok_or_else(|| missing(&row, col))?;
                Some(
                    v.as_f64()
                        .filter(|t| t.is_finite() && *t >= 0.0)
                        .ok_or_else(|| {
                            bad(format!(
                                "{col:?} must be a time in seconds >= 0, got {}",
                                v.to_json()
                            ))
                        })?,
                )
            }
        };
        let conversation = match &columns.session {
            None => None,
            Some(col) => match row.get(col) {
                None => return Err(missing(&row, col)),
                Some(Value::Str(s)) => Some(s.clone()),
                Some(Value::Int(i)) => Some(i.to_string()),
                Some(other) => {
                    return Err(bad(format!(
                        "{col:?} must be text or an integer, got {}",
                        other.kind()
                    )));
                }
            },
        };
        out.push(Item {
            place,
            prompt,
            output_len,
            send_at,
            conversation,
        });
    }
    Ok(out)
}

/// How many prompts are tokenized per host crossing.
const MAX_BATCH: usize = 256;

/// The requests, a batch per call.
pub struct Sampler {
    picker: Picker<Item>,
    total: usize,
    params: Params,
    name: String,
}

impl Sampler {
    /// `num_requests` 0 takes every row once.
    pub fn new(
        items: Vec<Item>,
        seed: u64,
        num_requests: usize,
        mut params: Params,
        name: &str,
    ) -> Result<Self, PluginError> {
        if items.is_empty() {
            return Err(PluginError::InvalidInput(format!("file: {name}: no rows")));
        }
        if params.columns.send_time.is_some() {
            // A trace: the file's order, each row once.
            params.flags = SampleFlags {
                disable_shuffle: true,
                no_oversample: true,
            };
        }
        let num_requests = if num_requests == 0 {
            items.len()
        } else {
            num_requests
        };
        let total = if params.flags.no_oversample {
            num_requests.min(items.len())
        } else {
            num_requests
        };
        Ok(Sampler {
            picker: Picker::new(items, seed, num_requests, params.flags),
            total,
            params,
            name: name.to_string(),
        })
    }

    pub fn total(&self) -> usize {
        self.total
    }

    pub fn next_batch(
        &mut self,
        tok: &(impl ChatTemplate + TokenCounter),
        max: usize,
    ) -> Result<Vec<RequestSpec>, PluginError> {
        let (params, name) = (&self.params, self.name.as_str());
        let make = |items: &[Item], want: usize, out: &mut Vec<RequestSpec>| {
            let batch = &items[..want.min(MAX_BATCH).min(items.len())];
            let prompts = batch
                .iter()
                .map(|item| {
                    if params.chat_template {
                        tok.chat_prompt(&item.prompt)
                    } else {
                        Ok(item.prompt.clone())
                    }
                })
                .collect::<Result<Vec<String>, PluginError>>()?;
            let counts = tok.token_counts(&prompts)?;
            for ((item, prompt), n) in batch.iter().zip(prompts).zip(counts) {
                let prompt_len = u32::try_from(n).map_err(|_| {
                    item.place
                        .error(name, format!("a prompt of {n} tokens is too long"))
                })?;
                let output_len = item.output_len.unwrap_or(params.output_len);
                let mut spec = RequestSpec::text(prompt, prompt_len, output_len);
                spec.send_at = item.send_at;
                out.push(spec);
            }
            Ok(batch.len())
        };
        self.picker.next_batch(max, make, || {
            PluginError::InvalidInput(format!("file: {name}: no rows"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::Prompt;
    use bench_sdk::rng::Random;
    use bench_sdk::table::{Format, ReadOptions, parse};

    struct Chars;

    impl ChatTemplate for Chars {
        fn chat_prompt(&self, user: &str) -> Result<String, PluginError> {
            Ok(format!("<u>{user}</u>"))
        }
    }

    impl TokenCounter for Chars {
        fn token_counts(&self, texts: &[String]) -> Result<Vec<usize>, PluginError> {
            Ok(texts.iter().map(|t| t.chars().count()).collect())
        }
    }

    fn rows(text: &str, format: Format) -> Vec<Row> {
        parse(
            text.as_bytes().to_vec(),
            "f",
            format,
            &ReadOptions::default(),
        )
        .unwrap()
    }

    fn drain(
        items: Vec<Item>,
        seed: u64,
        n: usize,
        params: &Params,
        batch: usize,
    ) -> Vec<RequestSpec> {
        let mut sampler = Sampler::new(items, seed, n, params.clone(), "f").unwrap();
        let mut all = Vec::new();
        loop {
            let got = sampler.next_batch(&Chars, batch).unwrap();
            if got.is_empty() {
                assert_eq!(all.len(), sampler.total());
                return all;
            }
            all.extend(got);
        }
    }

    fn text(spec: &RequestSpec) -> &str {
        match &spec.prompt {
            Prompt::Text(t) => t,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn columns_map_rows_to_requests() {
        let columns = Columns {
            prompt: "q".into(),
            output_len: Some("n".into()),
            send_time: None,
            session: Some("conv".into()),
        };
        let rows = rows("q,n,conv\nhello,5,a\nworld,,b\nagain,7,a\n", Format::Csv);
        let items = items(rows, &columns, "f.csv").unwrap();
        let conversations: Vec<Option<&str>> =
            items.iter().map(|i| i.conversation.as_deref()).collect();
        assert_eq!(conversations, [Some("a"), Some("b"), Some("a")]);
        let params = Params {
            columns,
            output_len: 9,
            chat_template: true,
            flags: SampleFlags {
                disable_shuffle: true,
                no_oversample: false,
            },
        };
        let got = drain(items, 0, 0, &params, 2);
        assert_eq!(
            got.iter()
                .map(|s| (text(s), s.prompt_len, s.expected_output_len))
                .collect::<Vec<_>>(),
            [
                ("<u>hello</u>", 12, 5),
                ("<u>world</u>", 12, 9),
                ("<u>again</u>", 12, 7)
            ]
        );
    }

    #[test]
    fn shuffles_and_oversamples_like_vllms_file_datasets() {
        let file: String = (0..5)
            .map(|i| format!("{{\"prompt\": \"p{i}\"}}\n"))
            .collect();
        let items = items(rows(&file, Format::JsonLines), &Columns::default(), "f").unwrap();
        let params = Params::default();
        let got: Vec<String> = drain(items.clone(), 3, 8, &params, 3)
            .iter()
            .map(|s| text(s).to_string())
            .collect();
        // Python: random.seed(3); random.shuffle(rows); then random.seed(3) and
        // random.choice among the five for the three missing.
        let mut order: Vec<String> = (0..5).map(|i| format!("p{i}")).collect();
        Random::new(3).shuffle(&mut order);
        let mut rng = Random::new(3);
        let extra: Vec<String> = (0..3)
            .map(|_| rng.choice(&order).unwrap().clone())
            .collect();
        assert_eq!(got[..5], order[..]);
        assert_eq!(got[5..], extra[..]);
        let flags = SampleFlags {
            disable_shuffle: false,
            no_oversample: true,
        };
        let params = Params { flags, ..params };
        assert_eq!(drain(items, 3, 8, &params, 100).len(), 5);
    }

    #[test]
    fn a_send_time_column_makes_a_trace_in_file_order() {
        let columns = Columns {
            send_time: Some("t".into()),
            ..Columns::default()
        };
        let rows = rows(
            "[{\"prompt\": \"a\", \"t\": 0.5}, {\"prompt\": \"b\", \"t\": \"1.25\"}, \
             {\"prompt\": \"c\", \"t\": 2}]",
            Format::Json,
        );
        let items = items(rows, &columns, "f").unwrap();
        let params = Params {
            columns,
            ..Params::default()
        };
        let got = drain(items, 1, 10, &params, 1);
        assert_eq!(
            got.iter()
                .map(|s| (text(s), s.send_at.unwrap()))
                .collect::<Vec<_>>(),
            [("a", 0.5), ("b", 1.25), ("c", 2.0)]
        );
    }

    #[test]
    fn bad_rows_name_file_and_row() {
        let with = |columns: Columns, text: &str, format: Format| match items(
            rows(text, format),
            &columns,
            "f.x",
        ) {
            Err(PluginError::InvalidInput(m)) => m,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            with(
                Columns::default(),
                "{\"prompt\": \"a\"}\n{\"text\": \"b\"}\n",
                Format::JsonLines
            ),
            "f.x:2: no \"prompt\" column (the row has: text)"
        );
        assert_eq!(
            with(Columns::default(), "prompt,x\n,1\n", Format::Csv),
            "f.x:2: \"prompt\" is empty"
        );
        assert_eq!(
            with(Columns::default(), "[{\"prompt\": 5}]", Format::Json),
            "f.x: item 1: \"prompt\" must be text, got an integer"
        );
        let columns = Columns {
            output_len: Some("n".into()),
            send_time: Some("t".into()),
            ..Columns::default()
        };
        assert_eq!(
            with(columns.clone(), "prompt,n,t\na,-3,0\n", Format::Csv),
            "f.x:2: \"n\" must be a token count >= 0, got \"-3\""
        );
        assert_eq!(
            with(columns, "prompt,n,t\na,3,-1\n", Format::Csv),
            "f.x:2: \"t\" must be a time in seconds >= 0, got \"-1\""
        );
    }
}
