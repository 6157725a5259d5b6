//! vLLM's `BurstGPTDataset` (vLLM 0.32), draw for draw.
//!
//! 1. Read the CSV (pandas' `read_csv`) and keep the rows whose `Model` is `GPT-4` and
//!    whose `Response tokens` is above 0.
//! 2. `DataFrame.sample(n=num_requests, random_state=seed)`: pandas seeds numpy's legacy
//!    `RandomState(seed)` and takes `choice(rows, n, replace=False)` (the first `n` of a
//!    `permutation`) when there are enough rows, else `choice(rows, n, replace=True)`
//!    (`randint`), see [`pandas_sample`].
//! 3. Request `i` of a row with `Request tokens` = L and `Response tokens` = O is the
//!    decoded token ids `(i + j) % vocab_size` for `j < L`, with `prompt_len` L (not
//!    re-measured) and O output tokens.
//!
//! Generic over the SDK's [`Codec`] so that it runs natively in unit tests.

use bench_sdk::rng::RandomState;
use bench_sdk::sampling::Codec;
use bench_sdk::{PluginError, RequestSpec};

/// A kept row of the trace.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// 1-based line of the file, for errors.
    pub line: u64,
    pub request_tokens: u32,
    pub response_tokens: u32,
}

/// The trace's kept rows and what vLLM's filter left out.
#[derive(Debug)]
pub struct Trace {
    pub rows: Vec<Row>,
    /// Data rows in the file.
    pub total: usize,
    /// Rows of another model than GPT-4.
    pub other_models: usize,
    /// GPT-4 rows with 0 (or fewer) response tokens: failed requests.
    pub failed: usize,
}

/// The columns vLLM reads, by name.
const MODEL: &str = "Model";
const REQUEST: &str = "Request tokens";
const RESPONSE: &str = "Response tokens";

/// A number as pandas reads a CSV cell (an integer or a decimal), or an error naming
/// the file, line and column.
fn number(cell: &str, name: &str, line: u64, column: &str) -> Result<f64, PluginError> {
    let value: Option<f64> = cell.trim().parse().ok().filter(|v: &f64| v.is_finite());
    value.ok_or_else(|| {
        PluginError::InvalidInput(format!(
            "burstgpt: {name}:{line}: column {column:?} must be a number, got {cell:?}"
        ))
    })
}

/// Reads a BurstGPT CSV and applies vLLM's filter. Errors name the file and the line.
pub fn parse(bytes: &[u8], name: &str) -> Result<Trace, PluginError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(bytes);
    let at = |e: csv::Error| {
        let line = e.position().map_or(1, |p| p.line());
        let why = match e.kind() {
            csv::ErrorKind::UnequalLengths {
                expected_len, len, ..
            } => format!("expected {expected_len} fields, saw {len}"),
            csv::ErrorKind::Utf8 { .. } => "not UTF-8".to_string(),
            _ => e.to_string(),
        };
        PluginError::InvalidInput(format!("burstgpt: {name}:{line}: {why}"))
    };
    let headers = reader.headers().map_err(at)?.clone();
    let column = |wanted: &str| {
        headers.iter().position(|h| h == wanted).ok_or_else(|| {
            PluginError::InvalidInput(format!(
                "burstgpt: {name}:1: no {wanted:?} column (BurstGPT's columns are Timestamp, \
                 Model, Request tokens, Response tokens, Total tokens, Log Type; found {})",
                headers.iter().collect::<Vec<_>>().join(", ")
            ))
        })
    };
    let (model, request, response) = (column(MODEL)?, column(REQUEST)?, column(RESPONSE)?);
    let mut trace = Trace {
        rows: Vec::new(),
        total: 0,
        other_models: 0,
        failed: 0,
    };
    for record in reader.records() {
        let record = record.map_err(at)?;
        let line = record.position().map_or(0, |p| p.line());
        trace.total += 1;
        let request_tokens = number(&record[request], name, line, REQUEST)?;
        let response_tokens = number(&record[response], name, line, RESPONSE)?;
        if &record[model] != "GPT-4" {
            trace.other_models += 1;
            continue;
        }
        if response_tokens <= 0.0 {
            trace.failed += 1;
            continue;
        }
        // Python's int() truncates toward zero.
        let count = |v: f64, column: &str| {
            u32::try_from(v.trunc() as i64).map_err(|_| {
                PluginError::InvalidInput(format!(
                    "burstgpt: {name}:{line}: column {column:?} must be a token count, got {v}"
                ))
            })
        };
        trace.rows.push(Row {
            line,
            request_tokens: count(request_tokens, REQUEST)?,
            response_tokens: count(response_tokens, RESPONSE)?,
        });
    }
    Ok(trace)
}

/// One raw 32-bit draw of the generator: `randint` over the whole 32-bit range takes
/// exactly one draw and masks nothing.
fn next_u32(rs: &mut RandomState) -> u32 {
    rs.randint(0, 1 << 32, 1)[0] as u32
}

/// numpy's `random_interval(max)`: a value in `[0, max]` by masked rejection.
fn random_interval(rs: &mut RandomState, max: u64) -> u64 {
    if max == 0 {
        return 0;
    }
    let mask = u64::MAX >> max.leading_zeros();
    loop {
        let value = if max <= u64::from(u32::MAX) {
            u64::from(next_u32(rs))
        } else {
            let hi = u64::from(next_u32(rs));
            (hi << 32) | u64::from(next_u32(rs))
        } & mask;
        if value <= max {
            return value;
        }
    }
}

/// The row indices of pandas' `DataFrame.sample(n=n, random_state=seed, replace=...)` on
/// `len` rows, where vLLM samples without replacement when `n <= len`:
/// `RandomState(seed).permutation(len)[:n]` (a Fisher-Yates shuffle of `arange(len)`
/// from the end, numpy's legacy `shuffle`), else `RandomState(seed).randint(0, len, n)`.
pub fn pandas_sample(seed: u32, len: usize, n: usize) -> Vec<usize> {
    let mut rs = RandomState::new(seed);
    if n <= len {
        let mut order: Vec<usize> = (0..len).collect();
        for i in (1..len).rev() {
            let j = random_interval(&mut rs, i as u64) as usize;
            order.swap(i, j);
        }
        order.truncate(n);
        order
    } else {
        rs.randint(0, len as i64, n)
            .into_iter()
            .map(|i| i as usize)
            .collect()
    }
}

/// vLLM's `BurstGPTDataset(dataset_path, random_seed=seed).sample(tokenizer, n)`,
/// producing the requests in batches: the rows are sampled up front, prompts decoded a
/// batch at a time.
pub struct Sampler {
    rows: Vec<Row>,
    /// The sampled row of each request.
    picks: Vec<usize>,
    next: usize,
}

impl Sampler {
    pub fn new(
        rows: Vec<Row>,
        seed: u64,
        num_requests: usize,
        name: &str,
    ) -> Result<Self, PluginError> {
        let seed = u32::try_from(seed).map_err(|_| {
            PluginError::InvalidConfig(format!(
                "burstgpt: --seed {seed} is out of range: vLLM samples with pandas, which seeds \
                 numpy's legacy generator with seeds below 2**32"
            ))
        })?;
        if rows.is_empty() && num_requests > 0 {
            return Err(PluginError::InvalidInput(format!(
                "burstgpt: {name}: no GPT-4 rows with response tokens above 0 to sample from"
            )));
        }
        let picks = pandas_sample(seed, rows.len(), num_requests);
        Ok(Sampler {
            rows,
            picks,
            next: 0,
        })
    }

    /// How many requests are made in all.
    pub fn total(&self) -> usize {
        self.picks.len()
    }

    /// The next (up to) `max` requests, in vLLM's order.
    pub fn next_batch(
        &mut self,
        tok: &impl Codec,
        max: usize,
    ) -> Result<Vec<RequestSpec>, PluginError> {
        let vocab_size = u64::from(tok.vocab_size());
        if vocab_size == 0 {
            return Err(PluginError::InvalidConfig(
                "burstgpt: the tokenizer reports an empty vocabulary".into(),
            ));
        }
        let end = self.picks.len().min(self.next + max);
        let mut out = Vec::with_capacity(end - self.next);
        for i in self.next..end {
            let row = &self.rows[self.picks[i]];
            let ids: Vec<u32> = (0..u64::from(row.request_tokens))
                .map(|j| ((i as u64 + j) % vocab_size) as u32)
                .collect();
            out.push(RequestSpec::text(
                tok.decode(&ids)?,
                row.request_tokens,
                row.response_tokens,
            ));
        }
        self.next = end;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::Prompt;

    const CSV: &str = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n\
                       0,GPT-4,3,5,8,Conversation log\n\
                       1,ChatGPT,4,6,10,API log\n\
                       2,GPT-4,7,0,7,API log\n\
                       3,\"GPT-4\",2.9,9,11,Conversation log\n\
                       4,GPT-4,1,1,2,API log\n";

    #[test]
    fn keeps_gpt4_rows_with_a_response_and_counts_the_rest() {
        let t = parse(CSV.as_bytes(), "t.csv").unwrap();
        assert_eq!((t.total, t.other_models, t.failed), (5, 1, 1));
        let kept: Vec<(u64, u32, u32)> = t
            .rows
            .iter()
            .map(|r| (r.line, r.request_tokens, r.response_tokens))
            .collect();
        assert_eq!(kept, [(2, 3, 5), (5, 2, 9), (6, 1, 1)]);
    }

    #[test]
    fn bad_files_name_file_and_line() {
        let header = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n";
        for (body, want) in [
            (
                "Timestamp,Model,Response tokens\n1,GPT-4,3\n".to_string(),
                "b.csv:1: no \"Request tokens\" column",
            ),
            (
                format!("{header}0,GPT-4,3,5,8,x\n1,GPT-4,many,5,8,x\n"),
                "b.csv:3: column \"Request tokens\" must be a number, got \"many\"",
            ),
            (
                format!("{header}0,ChatGPT,3,,8,x\n"),
                "b.csv:2: column \"Response tokens\" must be a number, got \"\"",
            ),
            (
                format!("{header}0,GPT-4,3,5\n"),
                "b.csv:2: expected 6 fields, saw 4",
            ),
            (
                format!("{header}0,GPT-4,-3,5,2,x\n"),
                "b.csv:2: column \"Request tokens\" must be a token count, got -3",
            ),
        ] {
            match parse(body.as_bytes(), "b.csv") {
                Err(PluginError::InvalidInput(m)) => assert!(m.contains(want), "{m:?}"),
                other => panic!("expected an error for {body:?}, got {other:?}"),
            }
        }
    }

    /// numpy 2.4 (CPython 3.11) and pandas 3.1:
    ///   np.random.RandomState(0).permutation(10)[:4] -> [2, 8, 4, 9]
    ///   np.random.RandomState(42).randint(0, 3, 6)   -> [2, 0, 2, 2, 0, 0]
    #[test]
    fn sampling_is_pandas_and_numpys() {
        assert_eq!(pandas_sample(0, 10, 4), [2, 8, 4, 9]);
        assert_eq!(pandas_sample(42, 3, 6), [2, 0, 2, 2, 0, 0]);
        // Without replacement: distinct rows.
        let mut picks = pandas_sample(7, 50, 50);
        picks.sort_unstable();
        assert_eq!(picks, (0..50).collect::<Vec<_>>());
    }

    /// Token `t` decodes as `<t>`.
    struct Ids;

    impl Codec for Ids {
        fn encode(&self, _: &str, _: bool) -> Result<Vec<u32>, PluginError> {
            unreachable!("burstgpt never encodes")
        }
        fn decode(&self, ids: &[u32]) -> Result<String, PluginError> {
            Ok(ids.iter().map(|t| format!("<{t}>")).collect())
        }
        fn vocab_size(&self) -> u32 {
            4
        }
        fn special_token_ids(&self) -> Vec<u32> {
            Vec::new()
        }
    }

    #[test]
    fn prompts_are_the_rows_lengths_of_shifted_ids() {
        let t = parse(CSV.as_bytes(), "t.csv").unwrap();
        for batch in [1, 2, 100] {
            let mut s = Sampler::new(t.rows.clone(), 42, 6, "t.csv").unwrap();
            let mut got = Vec::new();
            loop {
                let b = s.next_batch(&Ids, batch).unwrap();
                if b.is_empty() {
                    break;
                }
                got.extend(b);
            }
            // Rows [2, 0, 2, 2, 0, 0] of (3, 5), (2, 9), (1, 1).
            let want: Vec<(String, u32, u32)> = vec![
                ("<0>".into(), 1, 1),
                ("<1><2><3>".into(), 3, 5),
                ("<2>".into(), 1, 1),
                ("<3>".into(), 1, 1),
                ("<0><1><2>".into(), 3, 5),
                ("<1><2><3>".into(), 3, 5),
            ];
            let got: Vec<(String, u32, u32)> = got
                .into_iter()
                .map(|s| match s.prompt {
                    Prompt::Text(t) => (t, s.prompt_len, s.expected_output_len),
                    other => panic!("text expected, got {other:?}"),
                })
                .collect();
            assert_eq!(got, want, "batch {batch}");
        }
        assert!(matches!(
            Sampler::new(vec![], 0, 1, "e.csv"),
            Err(PluginError::InvalidInput(m)) if m.contains("e.csv: no GPT-4 rows")
        ));
        assert!(matches!(
            Sampler::new(t.rows, 1 << 32, 1, "t.csv"),
            Err(PluginError::InvalidConfig(m)) if m.contains("below 2**32")
        ));
    }
}
