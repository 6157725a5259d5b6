//! vLLM's `SonnetDataset.sample`, draw for draw: Python's global `random` (seeded with
//! `--seed` by `vllm bench serve`) picks each prompt's lines with `random.choices`.
//!
//! 1. The average token count of a line (special tokens included) and the templated
//!    length of the fixed instruction (`base_offset`) give how many lines a prompt has
//!    (`round((input_len - base_offset) / avg)`, Python's round half to even) and how many
//!    of them are the file's first lines, shared by every prompt (the same for
//!    `prefix_len`, at least 0).
//! 2. Per prompt: the instruction, the shared lines, then `random.choices` of the other
//!    lines; a prompt whose templated form has more than `input_len` tokens is dropped
//!    and another one drawn (vLLM loops until it has `num_requests`).
//!
//! Generic over the SDK's [`ChatTemplate`] and [`TokenCounter`] so that it runs natively
//! in unit tests.

use std::collections::VecDeque;

use bench_sdk::rng::Random;
use bench_sdk::sampling::{ChatTemplate, TokenCounter};
use bench_sdk::{PluginError, RequestSpec};

/// The instruction every prompt starts with (vLLM's `base_prompt`).
pub const BASE_PROMPT: &str = "Pick as many lines as you can from these poem lines:\n";

/// The options of vLLM's sonnet dataset.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// `--sonnet-input-len`: the most tokens a templated prompt may have.
    pub input_len: u32,
    /// `--sonnet-output-len`.
    pub output_len: u32,
    /// `--sonnet-prefix-len`.
    pub prefix_len: u32,
    /// `--skip-chat-template`: send the prompt untemplated (vLLM's
    /// `return_prompt_formatted=False`, its choice for `--backend openai-chat`).
    pub skip_chat_template: bool,
}

impl Default for Params {
    /// vLLM's defaults.
    fn default() -> Self {
        Params {
            input_len: 550,
            output_len: 150,
            prefix_len: 200,
            skip_chat_template: false,
        }
    }
}

/// The file as UTF-8 (Python opens it with `encoding="utf-8"`), or an error naming the
/// file and the line of the first bad byte.
pub fn decode_utf8(bytes: &[u8], name: &str) -> Result<String, PluginError> {
    String::from_utf8(bytes.to_vec()).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = 1 + bytes[..at].iter().filter(|&&b| b == b'\n').count();
        PluginError::InvalidInput(format!(
            "sonnet: {name}:{line}: not UTF-8 (byte {at} of the file)"
        ))
    })
}

/// Python's `f.readlines()` on a file opened in text mode: universal newlines (`\r\n`,
/// `\r` and `\n` all end a line and read as `\n`), each line keeping its `\n`.
pub fn read_lines(text: &str) -> Vec<String> {
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    text.split_inclusive('\n').map(str::to_string).collect()
}

/// Python's `round(x)` for a float: to the nearest integer, halves to even.
fn py_round(x: f64) -> i64 {
    x.round_ties_even() as i64
}

/// How many drawn prompts in a row may be too long before the options are judged
/// unsatisfiable (vLLM would loop forever).
const MAX_REJECTED_IN_A_ROW: usize = 2000;

/// How many prompts are drawn and measured per host crossing.
const MAX_CHUNK: usize = 256;

/// A drawn prompt, measured.
struct Candidate {
    prompt: String,
    prompt_len: usize,
}

/// vLLM's `SonnetDataset(dataset_path).sample(tokenizer, num_requests, ...)` after
/// `random.seed(seed)`, producing the requests in batches. Prompts are drawn and measured
/// a chunk at a time; drawing is independent of what is kept, so measuring ahead changes
/// nothing.
pub struct Sampler {
    lines: Vec<String>,
    /// The instruction and the shared first lines.
    head: String,
    /// Random lines per prompt.
    extra: usize,
    rng: Random,
    params: Params,
    num_requests: usize,
    made: usize,
    /// Measured, not yet looked at.
    queue: VecDeque<Candidate>,
    /// Prompts dropped for being longer than `input_len`.
    pub rejected: usize,
    rejected_in_a_row: usize,
    name: String,
}

impl Sampler {
    /// Measures the lines and the instruction, as vLLM does before drawing.
    pub fn new(
        tok: &(impl ChatTemplate + TokenCounter),
        lines: Vec<String>,
        seed: u64,
        num_requests: usize,
        params: Params,
        name: &str,
    ) -> Result<Self, PluginError> {
        if lines.is_empty() {
            return Err(PluginError::InvalidInput(format!(
                "sonnet: {name}: the file has no lines"
            )));
        }
        let counts = tok.token_counts(&lines)?;
        let avg = counts.iter().sum::<usize>() as f64 / lines.len() as f64;
        let base = templated(tok, BASE_PROMPT)?;
        let base_offset = tok.token_counts(&[base])?[0] as i64;
        let input_len = i64::from(params.input_len);
        if input_len <= base_offset {
            return Err(PluginError::InvalidConfig(format!(
                "sonnet: input-len ({input_len}) must be more than the templated instruction's \
                 {base_offset} tokens"
            )));
        }
        let num_input_lines = py_round((input_len - base_offset) as f64 / avg);
        let num_prefix_lines =
            py_round((i64::from(params.prefix_len) - base_offset) as f64 / avg).max(0);
        let prefix_lines = (num_prefix_lines as usize).min(lines.len());
        let mut head = BASE_PROMPT.to_string();
        head.extend(lines[..prefix_lines].iter().map(String::as_str));
        // Python's random.choices draws nothing for a negative count.
        let extra = (num_input_lines - num_prefix_lines).max(0) as usize;
        Ok(Sampler {
            lines,
            head,
            extra,
            rng: Random::new(i128::from(seed)),
            params,
            num_requests,
            made: 0,
            queue: VecDeque::new(),
            rejected: 0,
            rejected_in_a_row: 0,
            name: name.to_string(),
        })
    }

    /// `--sonnet-input-len`.
    pub fn input_len(&self) -> u32 {
        self.params.input_len
    }

    /// The next (up to) `max` requests, in vLLM's order.
    pub fn next_batch(
        &mut self,
        tok: &(impl ChatTemplate + TokenCounter),
        max: usize,
    ) -> Result<Vec<RequestSpec>, PluginError> {
        let want = max.min(self.num_requests - self.made);
        let mut out = Vec::with_capacity(want);
        while out.len() < want {
            if self.queue.is_empty() {
                self.draw(tok, (want - out.len()).clamp(1, MAX_CHUNK))?;
            }
            let c = self.queue.pop_front().expect("drawn above");
            if c.prompt_len > self.params.input_len as usize {
                self.rejected += 1;
                self.rejected_in_a_row += 1;
                if self.rejected_in_a_row >= MAX_REJECTED_IN_A_ROW {
                    return Err(PluginError::InvalidConfig(format!(
                        "sonnet: {}: {} prompts in a row were longer than input-len ({}) with \
                         prefix-len {}; raise input-len (vLLM would draw forever)",
                        self.name,
                        self.rejected_in_a_row,
                        self.params.input_len,
                        self.params.prefix_len
                    )));
                }
                continue;
            }
            self.rejected_in_a_row = 0;
            // Fits: checked against input_len, a u32.
            let prompt_len = c.prompt_len as u32;
            out.push(RequestSpec::text(
                c.prompt,
                prompt_len,
                self.params.output_len,
            ));
        }
        self.made += out.len();
        Ok(out)
    }

    /// Draws `n` prompts and measures them in one crossing.
    fn draw(
        &mut self,
        tok: &(impl ChatTemplate + TokenCounter),
        n: usize,
    ) -> Result<(), PluginError> {
        let mut raw = Vec::with_capacity(n);
        let mut formatted = Vec::with_capacity(n);
        for _ in 0..n {
            let mut prompt = self.head.clone();
            for line in self.rng.choices(&self.lines, self.extra) {
                prompt.push_str(&line);
            }
            formatted.push(templated(tok, &prompt)?);
            raw.push(prompt);
        }
        let counts = tok.token_counts(&formatted)?;
        for ((raw, formatted), prompt_len) in raw.into_iter().zip(formatted).zip(counts) {
            let prompt = if self.params.skip_chat_template {
                raw
            } else {
                formatted
            };
            self.queue.push_back(Candidate { prompt, prompt_len });
        }
        Ok(())
    }
}

/// The prompt in the chat template; vLLM needs one to measure prompts.
fn templated(tok: &impl ChatTemplate, text: &str) -> Result<String, PluginError> {
    tok.chat_prompt(text).map_err(|e| {
        let why = match e {
            PluginError::InvalidConfig(m)
            | PluginError::InvalidInput(m)
            | PluginError::Unsupported(m)
            | PluginError::Internal(m) => m,
        };
        PluginError::Unsupported(format!(
            "sonnet: the tokenizer needs a chat template (vLLM measures every prompt in it): \
             {why}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::Prompt;

    /// Wraps prompts in a marker template and counts words as tokens.
    struct Words;

    impl ChatTemplate for Words {
        fn chat_prompt(&self, user: &str) -> Result<String, PluginError> {
            Ok(format!("<u> {user} </u>"))
        }
    }

    impl TokenCounter for Words {
        fn token_counts(&self, texts: &[String]) -> Result<Vec<usize>, PluginError> {
            Ok(texts.iter().map(|t| t.split_whitespace().count()).collect())
        }
    }

    fn text(spec: &RequestSpec) -> &str {
        match &spec.prompt {
            Prompt::Text(t) => t,
            other => panic!("sonnet makes text prompts, got {other:?}"),
        }
    }

    /// Lines of 1 to 6 words ("l<i>w<j>"), 10 lines.
    fn poem() -> Vec<String> {
        (0..10)
            .map(|i| {
                let words: Vec<String> = (0..1 + i % 6).map(|j| format!("l{i}w{j}")).collect();
                format!("{}\n", words.join(" "))
            })
            .collect()
    }

    fn sample(seed: u64, n: usize, p: &Params, batch: usize) -> (Vec<RequestSpec>, usize) {
        let mut sampler = Sampler::new(&Words, poem(), seed, n, p.clone(), "p.txt").unwrap();
        let mut all = Vec::new();
        loop {
            let got = sampler.next_batch(&Words, batch).unwrap();
            assert!(got.len() <= batch);
            if got.is_empty() {
                return (all, sampler.rejected);
            }
            all.extend(got);
        }
    }

    #[test]
    fn universal_newlines_keep_their_ends() {
        assert_eq!(
            read_lines("a\r\nb\rc\nd"),
            ["a\n", "b\n", "c\n", "d"].map(String::from)
        );
        assert!(read_lines("").is_empty());
        let bad = decode_utf8(b"ok\nstill ok\n\xff\n", "s.txt").unwrap_err();
        assert!(matches!(bad, PluginError::InvalidInput(m) if m.contains("s.txt:3: not UTF-8")));
    }

    #[test]
    fn prompts_share_the_prefix_and_fit_input_len() {
        // 31 words in 10 lines: avg 3.1 words a line; the templated instruction has 13
        // words. input-len 40: round(27 / 3.1) = 9 lines (8.7), prefix-len 19:
        // round(6 / 3.1) = 2 lines (1.9), so 7 random ones.
        let p = Params {
            input_len: 40,
            output_len: 9,
            prefix_len: 19,
            skip_chat_template: false,
        };
        let (got, rejected) = sample(3, 40, &p, 7);
        assert_eq!(got.len(), 40);
        let head = format!("<u> {BASE_PROMPT}l0w0\nl1w0 l1w1\n");
        for spec in &got {
            let t = text(spec);
            assert!(t.starts_with(&head), "{t:?}");
            assert_eq!(t.matches('\n').count(), 1 + 9, "{t:?}");
            assert_eq!(spec.prompt_len as usize, t.split_whitespace().count());
            assert!(spec.prompt_len <= 40);
            assert_eq!(spec.expected_output_len, 9);
        }
        // Seven lines of up to 6 words often pass 40: some were drawn again.
        assert!(rejected > 0);

        // The same draws whatever the batch size; the raw prompt with skip-chat-template,
        // measured templated.
        let texts = |specs: &[RequestSpec]| -> Vec<String> {
            specs.iter().map(|s| text(s).to_string()).collect()
        };
        let (again, _) = sample(3, 40, &p, 1000);
        assert_eq!(texts(&again), texts(&got));
        let raw = Params {
            skip_chat_template: true,
            ..p.clone()
        };
        let (plain, _) = sample(3, 40, &raw, 5);
        for (a, b) in plain.iter().zip(&got) {
            assert_eq!(format!("<u> {} </u>", text(a)), text(b));
            assert_eq!(a.prompt_len, b.prompt_len);
        }
        assert_ne!(texts(&sample(4, 40, &p, 7).0), texts(&got));
    }

    #[test]
    fn draws_are_pythons_random_choices() {
        let p = Params {
            input_len: 60,
            output_len: 1,
            prefix_len: 0,
            skip_chat_template: true,
        };
        // round(47 / 3.1) = 15 lines, none shared; too long prompts are skipped.
        let (got, rejected) = sample(7, 30, &p, 4);
        let mut rng = Random::new(7);
        let lines = poem();
        let mut want = Vec::new();
        let mut skipped = 0;
        while want.len() < 30 {
            let prompt = format!("{BASE_PROMPT}{}", rng.choices(&lines, 15).concat());
            if prompt.split_whitespace().count() + 2 <= 60 {
                want.push(prompt);
            } else {
                skipped += 1;
            }
        }
        let got: Vec<&str> = got.iter().map(text).collect();
        assert_eq!(got, want);
        assert_eq!(rejected, skipped);
    }

    #[test]
    fn impossible_lengths_are_errors() {
        let p = Params {
            input_len: 13,
            ..Params::default()
        };
        assert!(matches!(
            Sampler::new(&Words, poem(), 0, 1, p, "p.txt"),
            Err(PluginError::InvalidConfig(m)) if m.contains("templated instruction's 13 tokens")
        ));
        assert!(matches!(
            Sampler::new(&Words, vec![], 0, 1, Params::default(), "e.txt"),
            Err(PluginError::InvalidInput(m)) if m.contains("e.txt: the file has no lines")
        ));
        // Every prompt too long: an error instead of vLLM's endless loop.
        let p = Params {
            input_len: 20,
            prefix_len: 200,
            ..Params::default()
        };
        let mut sampler = Sampler::new(&Words, poem(), 0, 1, p, "p.txt").unwrap();
        assert!(matches!(
            sampler.next_batch(&Words, 1),
            Err(PluginError::InvalidConfig(m)) if m.contains("raise input-len")
        ));
    }
}
