//! vLLM's `RandomDataset.sample` (vLLM 0.32), draw for draw.
//!
//! The steps and the order of the numpy draws are vLLM's, because the draws are shared
//! by one `default_rng(seed)` stream and any reordering changes every later prompt:
//! 1. input lengths, output lengths and vocabulary offsets, `num_requests` each;
//! 2. the shared prefix (token indices), fitted to `prefix_len` tokens;
//! 3. per request, consecutive allowed tokens from its offset after the prefix, fitted
//!    to `prefix_len + input_len` tokens (fitting may draw extra tokens).
//!
//! The code is generic over the SDK's [`Codec`] so that it runs natively in unit tests.

use bench_sdk::rng::Generator;
use bench_sdk::sampling::{Codec, fit_to_length, fit_to_length_batch};
use bench_sdk::{PluginError, RequestSpec};

/// The options of `vllm bench serve --dataset-name random`.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// `--random-input-len`.
    pub input_len: i64,
    /// `--random-output-len`.
    pub output_len: i64,
    /// `--random-range-ratio` for input lengths, in [0, 1).
    pub input_range_ratio: f64,
    /// `--random-range-ratio` for output lengths, in [0, 1).
    pub output_range_ratio: f64,
    /// `--random-prefix-len`, never negative.
    pub prefix_len: u32,
}

impl Default for Params {
    /// vLLM's defaults.
    fn default() -> Self {
        Params {
            input_len: 1024,
            output_len: 128,
            input_range_ratio: 0.0,
            output_range_ratio: 0.0,
            prefix_len: 0,
        }
    }
}

/// vLLM's `RandomDataset(random_seed=seed).sample(tokenizer, num_requests, ...)` with
/// `rng = np.random.default_rng(seed)`, producing the requests in batches: [`Sampler::new`]
/// makes the draws vLLM makes up front, [`Sampler::next_batch`] builds the prompts in
/// order (so each host call stays short). Request ids are left to the host.
pub struct Sampler {
    rng: Generator,
    input_lens: Vec<i64>,
    output_lens: Vec<i64>,
    offsets: Vec<i64>,
    /// The vocabulary without special tokens, ascending.
    allowed: Vec<u32>,
    vocab_size: u32,
    prefix_len: u32,
    /// The shared prefix, already fitted to `prefix_len` tokens.
    prefix: Vec<u32>,
    /// Tokens more (positive) or fewer than `prefix_len` in the shared prefix.
    pub prefix_mismatch: i64,
    /// Tokens more or fewer than asked for, summed over the prompts built so far.
    pub token_mismatch: i64,
    next: usize,
}

impl Sampler {
    /// Validates the options against the tokenizer, then draws lengths, offsets and the
    /// prefix, in vLLM's order.
    pub fn new(
        tok: &impl Codec,
        mut rng: Generator,
        num_requests: usize,
        p: &Params,
    ) -> Result<Self, PluginError> {
        // transformers' num_special_tokens_to_add(): what encoding adds to any text.
        let num_special = tok.encode("", true)?.len() as i64;
        let real_input_len = (p.input_len - num_special).max(0) as f64;
        let min_sampled_input = (real_input_len * (1.0 - p.input_range_ratio)).floor() as i64;
        let min_total_input = i64::from(p.prefix_len) + min_sampled_input;
        if min_total_input < 1 {
            return Err(PluginError::InvalidConfig(format!(
                "random: input-len is too small: with {num_special} special tokens added by the \
                 tokenizer and an input range ratio of {}, the shortest possible prompt (prefix + \
                 sampled) has {min_total_input} tokens; raise input-len or prefix-len, or lower \
                 range-ratio, so that prefix-len + floor(max(0, input-len - special tokens) * \
                 (1 - range ratio)) >= 1",
                p.input_range_ratio
            )));
        }
        let vocab_size = tok.vocab_size();
        if vocab_size == 0 {
            return Err(PluginError::InvalidConfig(
                "random: the tokenizer reports an empty vocabulary".into(),
            ));
        }

        // Bounds: floor for the low end, ceil for the high end; at least one output token.
        let input_low = (real_input_len * (1.0 - p.input_range_ratio)).floor() as i64;
        let input_high = (real_input_len * (1.0 + p.input_range_ratio)).ceil() as i64;
        let output = p.output_len as f64;
        let output_low = ((output * (1.0 - p.output_range_ratio)).floor() as i64).max(1);
        let output_high = ((output * (1.0 + p.output_range_ratio)).ceil() as i64).max(1);
        for (what, high) in [("input", input_high), ("output", output_high)] {
            if u32::try_from(high).is_err() {
                return Err(PluginError::InvalidConfig(format!(
                    "random: {what} lengths up to {high} tokens do not fit in 32 bits"
                )));
            }
        }
        let input_lens = rng.integers(input_low, input_high + 1, num_requests);
        let output_lens = rng.integers(output_low, output_high + 1, num_requests);
        let offsets = rng.integers(0, i64::from(vocab_size), num_requests);

        // vLLM lists the vocabulary minus special ids through a Python set of small ints,
        // which iterates in ascending order.
        let special = tok.special_token_ids();
        let allowed: Vec<u32> = (0..vocab_size).filter(|t| !special.contains(t)).collect();
        if allowed.is_empty() {
            return Err(PluginError::InvalidConfig(
                "random: every token of the vocabulary is a special token".into(),
            ));
        }

        let (prefix, prefix_mismatch) = if p.prefix_len > 0 {
            let picks = rng.integers(0, allowed.len() as i64, p.prefix_len as usize);
            let ids = picks.iter().map(|&i| allowed[i as usize]).collect();
            let fitted = fit_to_length(tok, ids, p.prefix_len as usize, vocab_size, &mut rng)?;
            (fitted.tokens, fitted.mismatch)
        } else {
            (Vec::new(), 0)
        };
        Ok(Sampler {
            rng,
            input_lens,
            output_lens,
            offsets,
            allowed,
            vocab_size,
            prefix_len: p.prefix_len,
            prefix,
            prefix_mismatch,
            token_mismatch: 0,
            next: 0,
        })
    }

    /// How many requests are left to build.
    pub fn remaining(&self) -> usize {
        self.input_lens.len() - self.next
    }

    /// The next (up to) `max` requests: consecutive allowed tokens after the prefix,
    /// starting at the request's offset plus its index, fitted to the drawn length.
    pub fn next_batch(
        &mut self,
        tok: &impl Codec,
        max: usize,
    ) -> Result<Vec<RequestSpec>, PluginError> {
        let end = self.input_lens.len().min(self.next + max);
        let allowed_len = self.allowed.len() as i64;
        let sequences: Vec<(Vec<u32>, usize)> = (self.next..end)
            .map(|i| {
                let (input_len, start) = (self.input_lens[i], self.offsets[i] + i as i64);
                let mut ids = self.prefix.clone();
                ids.extend(
                    (0..input_len).map(|j| self.allowed[((start + j) % allowed_len) as usize]),
                );
                (ids, self.prefix_len as usize + input_len as usize)
            })
            .collect();
        // The whole batch at once: the host encodes it on all cores, with the same draws as
        // fitting one prompt after another.
        let fitted = fit_to_length_batch(tok, sequences, self.vocab_size, &mut self.rng)?;
        let mut out = Vec::with_capacity(fitted.len());
        for (i, fitted) in (self.next..end).zip(fitted) {
            self.token_mismatch += fitted.mismatch;
            let prompt_len = u32::try_from(fitted.tokens.len()).map_err(|_| {
                PluginError::Internal(format!(
                    "random: a prompt of {} tokens",
                    fitted.tokens.len()
                ))
            })?;
            // Checked to fit in `new`.
            let output_len = self.output_lens[i] as u32;
            out.push(RequestSpec::text(fitted.text, prompt_len, output_len));
        }
        self.next = end;
        Ok(out)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use bench_sdk::Prompt;

    /// A toy greedy tokenizer: letters, a few pairs, one triple and a special token.
    /// The same tokenizer in Python drove vLLM 0.32's own `RandomDataset` to produce the
    /// expected values below (the vLLM wheel's `datasets.py` loaded with its heavy imports
    /// stubbed, then `RandomDataset(random_seed=seed).sample(tokenizer=Toy(bos), ...)`).
    pub(crate) struct Toy {
        /// Prepend the special token when asked to add special tokens (like a BOS).
        pub(crate) bos: bool,
    }

    const PAIRS: [&str; 12] = [
        "th", "he", "in", "er", "an", "re", "on", "at", "en", "nd", "ti", "es",
    ];
    const EOS: u32 = 39;

    fn piece(id: u32) -> String {
        match id {
            0..=25 => char::from(b'a' + id as u8).to_string(),
            26..=37 => PAIRS[id as usize - 26].to_string(),
            38 => "tic".to_string(),
            _ => "<eos>".to_string(),
        }
    }

    impl Codec for Toy {
        fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, PluginError> {
            let mut out = if self.bos && add_special_tokens {
                vec![EOS]
            } else {
                vec![]
            };
            let mut rest = text;
            while !rest.is_empty() {
                let id = [5, 3, 2, 1]
                    .iter()
                    .filter(|&&n| n <= rest.len())
                    .find_map(|&n| (0..40).find(|&id| piece(id) == rest[..n]))
                    .ok_or_else(|| PluginError::Internal(format!("toy: cannot encode {rest:?}")))?;
                rest = &rest[piece(id).len()..];
                out.push(id);
            }
            Ok(out)
        }

        fn decode(&self, ids: &[u32]) -> Result<String, PluginError> {
            Ok(ids.iter().map(|&id| piece(id)).collect())
        }

        fn vocab_size(&self) -> u32 {
            40
        }

        fn special_token_ids(&self) -> Vec<u32> {
            vec![EOS]
        }
    }

    /// All requests, drained `batch` at a time.
    fn drain(seed: u128, bos: bool, n: usize, p: &Params, batch: usize) -> Vec<RequestSpec> {
        let tok = Toy { bos };
        let mut sampler = Sampler::new(&tok, Generator::new(seed), n, p).unwrap();
        let mut all = Vec::new();
        while sampler.remaining() > 0 {
            let got = sampler.next_batch(&tok, batch).unwrap();
            assert_eq!(got.len(), batch.min(n - all.len()));
            all.extend(got);
        }
        assert!(sampler.next_batch(&tok, batch).unwrap().is_empty());
        all
    }

    /// The requests as (prompt, prompt_len, expected_output_len), checking that the batch
    /// size the host drains with changes nothing.
    fn run(seed: u128, bos: bool, n: usize, p: Params) -> Vec<(String, u32, u32)> {
        let rows = |specs: Vec<RequestSpec>| -> Vec<(String, u32, u32)> {
            specs
                .into_iter()
                .map(|r| {
                    assert_eq!(r.request_id, None, "the host assigns request ids");
                    match r.prompt {
                        Prompt::Text(t) => (t, r.prompt_len, r.expected_output_len),
                        other => panic!("random makes text prompts, got {other:?}"),
                    }
                })
                .collect()
        };
        let all_at_once = rows(drain(seed, bos, n, &p, n.max(1)));
        for batch in [1, 2, 5] {
            assert_eq!(
                rows(drain(seed, bos, n, &p, batch)),
                all_at_once,
                "batch {batch}"
            );
        }
        all_at_once
    }

    fn expect(rows: &[(&str, u32, u32)]) -> Vec<(String, u32, u32)> {
        rows.iter()
            .map(|&(t, a, b)| (t.to_string(), a, b))
            .collect()
    }

    #[test]
    fn matches_vllm_with_prefix_and_range() {
        // sample(num_requests=6, input_len=12, output_len=5, range_ratio=0.5, prefix_len=3)
        let p = Params {
            input_len: 12,
            output_len: 5,
            input_range_ratio: 0.5,
            output_range_ratio: 0.5,
            prefix_len: 3,
        };
        assert_eq!(
            run(0, false, 6, p),
            expect(&[
                ("vtikuvwxyzthheineranreonatenndti", 20, 2),
                ("vtikzthheineranreonatenndtiestic", 17, 2),
                ("vtikbcdefghijklm", 15, 3),
                ("vtikonatenndtiesticab", 12, 7),
                ("vtikeranreonatenndtiestic", 13, 6),
                ("vtikthheineranre", 9, 8),
            ])
        );
    }

    #[test]
    fn matches_vllm_with_special_tokens_added_by_encoding() {
        // Toy(bos=True): num_special_tokens_to_add() == 1 shortens the sampled inputs.
        // sample(num_requests=5, input_len=8, output_len=4, range_ratio=0.25, prefix_len=0)
        let p = Params {
            input_len: 8,
            output_len: 4,
            input_range_ratio: 0.25,
            output_range_ratio: 0.25,
            prefix_len: 0,
        };
        assert_eq!(
            run(42, true, 5, p),
            expect(&[
                ("vwxyz", 5, 5),
                ("bcdefghi", 8, 3),
                ("reonatenndtiestic", 8, 5),
                ("atenndtiestica", 7, 3),
                ("onatenndtiestic", 7, 3),
            ])
        );
    }

    #[test]
    fn matches_vllm_with_separate_input_and_output_ratios() {
        // range_ratio={"input": 0.6, "output": 0.0}
        // sample(num_requests=4, input_len=10, output_len=3, prefix_len=5)
        let p = Params {
            input_len: 10,
            output_len: 3,
            input_range_ratio: 0.6,
            output_range_ratio: 0.0,
            prefix_len: 5,
        };
        assert_eq!(
            run(7, false, 4, p),
            expect(&[
                ("cllenndxyzthheineranreonatenndtiestic", 21, 3),
                ("cllenndonatenndtiesticabcde", 17, 3),
                ("cllenndndtiesticabcdefgh", 17, 3),
                ("cllenndmnopqrstuvwxyzth", 20, 3),
            ])
        );
    }

    #[test]
    fn prompt_len_is_the_reencoded_length() {
        let p = Params {
            input_len: 30,
            input_range_ratio: 0.9,
            ..Params::default()
        };
        for (text, len, _) in run(3, false, 20, p) {
            assert_eq!(
                Toy { bos: false }.encode(&text, false).unwrap().len() as u32,
                len
            );
        }
    }

    #[test]
    fn too_short_an_input_is_refused_before_drawing() {
        // input_len 1 with a BOS-adding tokenizer leaves 0 sampled tokens and no prefix.
        let p = Params {
            input_len: 1,
            ..Params::default()
        };
        let err = Sampler::new(&Toy { bos: true }, Generator::new(0), 3, &p)
            .err()
            .unwrap();
        assert!(
            matches!(&err, PluginError::InvalidConfig(m) if m.contains("input-len is too small")),
            "{err}"
        );
    }
}
