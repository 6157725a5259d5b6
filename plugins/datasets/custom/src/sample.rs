//! vLLM's `CustomDataset` (vLLM 0.32): a JSONL file with a `prompt` per line (and an
//! optional `output_tokens`), shuffled with Python's `random.seed(seed)`, each prompt
//! wrapped in the chat template unless told otherwise. The sampling is the SDK's
//! [`bench_sdk::custom`] (shared with `spec_bench` and `speed_bench`); this module reads
//! the file. Generic over the SDK's tokenizer traits so that it runs natively in unit tests.

use bench_sdk::custom::{self, CustomSampler};
pub use bench_sdk::custom::{CustomParams, OUTPUT_LEN_FROM_DATA, PromptRow};
use bench_sdk::sampling::{ChatTemplate, TokenCounter};
use bench_sdk::{PluginError, RequestSpec};

/// One line of the file.
pub type Row = PromptRow;

/// Parses a JSONL file: one JSON object with a string `prompt` per non-blank line.
/// Errors name the file and the 1-based line (`data.jsonl:3: expected value at column 5`).
pub fn parse(text: &str, name: &str) -> Result<Vec<Row>, PluginError> {
    custom::jsonl_objects(text, name)?
        .into_iter()
        .map(|(at, mut fields)| {
            Ok(Row {
                line: at,
                prompt: custom::prompt_field(&mut fields)
                    .map_err(|why| custom::line_error(name, at, why))?,
                output_tokens: fields.remove("output_tokens"),
            })
        })
        .collect()
}

/// The options of `vllm bench serve --dataset-name custom` this dataset honours:
/// `--custom-output-len` (default 256; [`OUTPUT_LEN_FROM_DATA`] reads `output_tokens`),
/// `--skip-chat-template`, `--disable-shuffle`, `--no-oversample`.
pub type Params = CustomParams;

/// vLLM's `CustomDataset(dataset_path=..., random_seed=seed).sample(...)`: the SDK's
/// [`CustomSampler`] on the file's rows.
pub struct Sampler(CustomSampler);

impl Sampler {
    pub fn new(
        rows: Vec<Row>,
        seed: u64,
        num_requests: usize,
        params: Params,
        name: &str,
    ) -> Result<Self, PluginError> {
        CustomSampler::new("custom", rows, seed, num_requests, params, name).map(Sampler)
    }

    /// How many requests the source makes in all.
    pub fn total(&self) -> usize {
        self.0.total()
    }

    /// The next (up to) `max` requests, in vLLM's order.
    pub fn next_batch(
        &mut self,
        tok: &(impl ChatTemplate + TokenCounter),
        max: usize,
    ) -> Result<Vec<RequestSpec>, PluginError> {
        self.0.next_batch(tok, max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::Prompt;
    use bench_sdk::sampling::SampleFlags;

    /// Wraps prompts in a marker template and counts characters as tokens.
    struct Chars;

    impl ChatTemplate for Chars {
        fn chat_prompt(&self, user: &str) -> Result<String, PluginError> {
            Ok(format!("<u>{user}</u><a>"))
        }
    }

    impl TokenCounter for Chars {
        fn token_counts(&self, texts: &[String]) -> Result<Vec<usize>, PluginError> {
            Ok(texts.iter().map(|t| t.chars().count()).collect())
        }
    }

    fn drain(
        rows: Vec<Row>,
        seed: u64,
        n: usize,
        p: &Params,
        name: &str,
        batch: usize,
    ) -> Result<Vec<RequestSpec>, PluginError> {
        let mut sampler = Sampler::new(rows, seed, n, p.clone(), name)?;
        let mut all = Vec::new();
        loop {
            let got = sampler.next_batch(&Chars, batch)?;
            assert!(got.len() <= batch);
            if got.is_empty() {
                assert_eq!(all.len(), sampler.total());
                return Ok(all);
            }
            all.extend(got);
        }
    }

    /// All requests; the batch size the host drains with must change nothing.
    fn sample(
        rows: Vec<Row>,
        seed: u64,
        n: usize,
        p: &Params,
        name: &str,
    ) -> Result<Vec<RequestSpec>, PluginError> {
        let all = drain(rows.clone(), seed, n, p, name, 1000)?;
        for batch in [1, 2, 3] {
            let again = drain(rows.clone(), seed, n, p, name, batch)?;
            assert_eq!(texts(&again), texts(&all), "batch {batch}");
        }
        Ok(all)
    }

    fn texts(specs: &[RequestSpec]) -> Vec<(String, u32, u32)> {
        specs
            .iter()
            .map(|s| match &s.prompt {
                Prompt::Text(t) => (t.clone(), s.prompt_len, s.expected_output_len),
                other => panic!("custom makes text prompts, got {other:?}"),
            })
            .collect()
    }

    const FILE: &str = "{\"prompt\": \"alpha\", \"output_tokens\": 7}\n\n\
                        {\"prompt\": \"beta\", \"output_tokens\": 9.8}\r\n\
                        {\"prompt\": \"gamma\", \"output_tokens\": \"12\", \"extra\": [1]}\n\
                        {\"prompt\": \"delta\"}\n";

    #[test]
    fn parse_reads_prompts_and_skips_blank_lines() {
        let rows = parse(FILE, "d.jsonl").unwrap();
        let got: Vec<(usize, &str)> = rows.iter().map(|r| (r.line, r.prompt.as_str())).collect();
        assert_eq!(got, [(1, "alpha"), (3, "beta"), (4, "gamma"), (5, "delta")]);
    }

    #[test]
    fn malformed_rows_name_file_and_line() {
        for (text, want) in [
            (
                "{\"prompt\": \"a\"}\n{\"prompt\": \"b\"}\n{\"prompt\":\n",
                "data.jsonl:3: EOF while parsing a value at column 10",
            ),
            (
                "{\"prompt\": \"a\"}\n\n  {\"prompt\" 1}\n",
                "data.jsonl:3: expected `:` at column 13",
            ),
            (
                "\n{\"prompt\": \"second\",}\n",
                "data.jsonl:2: trailing comma at column 21",
            ),
            ("[1, 2]\n", "data.jsonl:1: expected a JSON object"),
            (
                "{\"prompt\": 5}\n",
                "data.jsonl:1: \"prompt\" must be a string",
            ),
            ("{\"text\": \"x\"}\n", "data.jsonl:1: no \"prompt\" field"),
        ] {
            match parse(text, "data.jsonl") {
                Err(PluginError::InvalidInput(m)) => assert_eq!(m, want),
                other => panic!("expected invalid input for {text:?}, got {other:?}"),
            }
        }
    }

    /// The expected values are those of vLLM 0.32's CustomDataset (with pandas) on the same
    /// lines and a tokenizer with the same toy template and character counts.
    #[test]
    fn chat_template_output_len_and_order() {
        let rows = parse(FILE, "d.jsonl").unwrap();
        let p = Params {
            flags: SampleFlags {
                disable_shuffle: true,
                ..SampleFlags::default()
            },
            ..Params::default()
        };
        let got = sample(rows.clone(), 0, 2, &p, "d.jsonl").unwrap();
        assert_eq!(
            texts(&got),
            [
                ("<u>alpha</u><a>".to_string(), 15, 256),
                ("<u>beta</u><a>".to_string(), 14, 256)
            ]
        );
        let p = Params {
            skip_chat_template: true,
            output_len: OUTPUT_LEN_FROM_DATA,
            flags: SampleFlags {
                disable_shuffle: true,
                ..SampleFlags::default()
            },
        };
        let got = sample(rows[..3].to_vec(), 0, 0, &p, "d.jsonl").unwrap();
        assert_eq!(
            texts(&got),
            [
                ("alpha".to_string(), 5, 7),
                ("beta".to_string(), 4, 9),
                ("gamma".to_string(), 5, 12)
            ]
        );
        assert!(matches!(
            sample(vec![], 0, 1, &p, "e.jsonl"),
            Err(PluginError::InvalidInput(m)) if m.contains("e.jsonl: the file has no prompts")
        ));
        // "delta" (line 5) has no output_tokens.
        match sample(rows, 0, 0, &p, "d.jsonl") {
            Err(PluginError::InvalidInput(m)) => {
                assert!(m.starts_with("d.jsonl:5: no \"output_tokens\""), "{m}")
            }
            other => panic!("expected invalid input, got {other:?}"),
        }
    }

    #[test]
    fn shuffles_and_oversamples_like_vllm() {
        let rows: Vec<Row> = (0..5)
            .map(|i| Row {
                line: i + 1,
                prompt: format!("p{i}"),
                output_tokens: None,
            })
            .collect();
        let p = Params {
            skip_chat_template: true,
            ..Params::default()
        };
        let got: Vec<String> = texts(&sample(rows.clone(), 3, 8, &p, "d.jsonl").unwrap())
            .into_iter()
            .map(|(t, _, _)| t)
            .collect();
        // vLLM 0.32's own CustomDataset (pandas 2, CPython 3.11) on the same five lines:
        //   CustomDataset(dataset_path="five.jsonl", random_seed=3)
        //       .sample(tokenizer, num_requests=8, output_len=256, skip_chat_template=True)
        assert_eq!(got, ["p0", "p2", "p3", "p4", "p1", "p2", "p1", "p1"]);
        // Fewer than the file holds: the first of the shuffled rows.
        let got = texts(&sample(rows.clone(), 3, 3, &p, "d.jsonl").unwrap());
        assert_eq!(
            got.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
            ["p0", "p2", "p3"]
        );
        // no-oversample stops at the end of the file.
        let p = Params {
            flags: SampleFlags {
                no_oversample: true,
                ..SampleFlags::default()
            },
            ..p
        };
        assert_eq!(sample(rows, 3, 8, &p, "d.jsonl").unwrap().len(), 5);
    }
}
