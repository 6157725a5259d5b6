//! vLLM's synthetic text prompts (`RandomDataset` and the datasets built on it:
//! `random`, `random-rerank`, `random-mm`), draw for draw, shared by their plugins.
//!
//! The pieces, each named after the vLLM code it reproduces:
//! - [`sampling_params`]: `get_sampling_params`, the per-request input and output lengths
//!   and vocabulary offsets, drawn from one `default_rng(seed)` stream;
//! - [`Vocabulary`]: the allowed tokens (the vocabulary without special ids), the shared
//!   prefix (`get_prefix`) and the token sequence of one prompt
//!   (`generate_token_sequence`, fitted with [`crate::sampling::fit_to_length`]);
//! - [`TextSampler`]: `RandomDataset.sample`'s state, which hands the prompts out a batch
//!   at a time so that each host call stays short;
//! - the options the family shares (`--random-input-len`, `--random-range-ratio`, ...)
//!   and vLLM's parsing of `--random-range-ratio` ([`parse_range_ratio`]).
//!
//! The order of the draws is vLLM's, because every draw shares one generator and any
//! reordering changes every later prompt. Everything is generic over
//! [`Codec`] so that the plugins' unit tests run natively with a toy tokenizer.

use crate::options::{OptionReader, option};
use crate::rng::Generator;
use crate::sampling::{
    Codec, Fitted, PendingFit, fit_to_length, fit_to_length_batch, fit_to_length_pending,
};
use crate::{OptionInfo, PluginError, SharedFlag};

/// The length options of vLLM's random datasets.
#[derive(Clone, Debug, PartialEq)]
pub struct TextParams {
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

impl Default for TextParams {
    /// vLLM's defaults.
    fn default() -> Self {
        TextParams {
            input_len: 1024,
            output_len: 128,
            input_range_ratio: 0.0,
            output_range_ratio: 0.0,
            prefix_len: 0,
        }
    }
}

impl TextParams {
    /// The four options (`input-len`, `output-len`, `range-ratio`, `prefix-len`) with
    /// vLLM's flags, for a plugin's `describe`.
    pub fn options() -> Vec<OptionInfo> {
        vec![
            input_len_option(),
            option("output-len", "Output tokens per request", Some("128"))
                .flag("random-output-len")
                .count()
                .shared(SharedFlag::OutputLen),
            range_ratio_option(),
            option(
                "prefix-len",
                "Tokens of a fixed random prefix shared by every prompt",
                Some("0"),
            )
            .flag("random-prefix-len")
            .count(),
        ]
    }

    /// Reads the four options of [`TextParams::options`] (vLLM's defaults where absent).
    pub fn read(plugin: &str, reader: &mut OptionReader) -> Result<Self, PluginError> {
        let defaults = TextParams::default();
        let input_len = reader.parse_or("input-len", defaults.input_len)?;
        let output_len = reader.parse_or("output-len", defaults.output_len)?;
        let (input_range_ratio, output_range_ratio) = match reader.string("range-ratio") {
            None => (defaults.input_range_ratio, defaults.output_range_ratio),
            Some(text) => parse_range_ratio(plugin, &text)?,
        };
        let prefix_len = reader.parse_or("prefix-len", defaults.prefix_len)?;
        Ok(TextParams {
            input_len,
            output_len,
            input_range_ratio,
            output_range_ratio,
            prefix_len,
        })
    }
}

/// `input-len` (`--random-input-len`, default 1024; `--input-len` sets it too).
pub fn input_len_option() -> OptionInfo {
    option(
        "input-len",
        "Input tokens per request, before the prefix",
        Some("1024"),
    )
    .flag("random-input-len")
    .count()
    .shared(SharedFlag::InputLen)
}

/// `range-ratio` (`--random-range-ratio`, default 0.0).
pub fn range_ratio_option() -> OptionInfo {
    option(
        "range-ratio",
        "Lengths are drawn uniformly from [floor(len * (1 - r)), ceil(len * (1 + r))], \
         r in [0, 1); a number, or a JSON object {\"input\": r, \"output\": r} for \
         separate input and output ratios",
        Some("0.0"),
    )
    .flag("random-range-ratio")
}

/// `batch-size` (`--random-batch-size`, default 1): vLLM's batched inputs for embedding
/// and rerank benchmarks.
pub fn batch_size_option(description: &str) -> OptionInfo {
    option("batch-size", description, Some("1"))
        .flag("random-batch-size")
        .count()
}

/// vLLM's `--random-range-ratio`: a float, else a JSON object with `input` and `output`;
/// each ratio must lie in [0, 1).
pub fn parse_range_ratio(plugin: &str, text: &str) -> Result<(f64, f64), PluginError> {
    let bad = |why: String| {
        PluginError::InvalidConfig(format!("{plugin}: option range-ratio={text:?}: {why}"))
    };
    let (input, output) = match text.trim().parse::<f64>() {
        Ok(r) => (r, r),
        Err(_) => {
            let value: serde_json::Value = serde_json::from_str(text)
                .map_err(|e| bad(format!("expected a number or a JSON object ({e})")))?;
            let part = |key: &str| -> Result<f64, PluginError> {
                let v = value.get(key).ok_or_else(|| {
                    bad("a JSON object needs both \"input\" and \"output\"".into())
                })?;
                // Python's float() takes numbers and numeric strings alike.
                v.as_f64()
                    .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                    .ok_or_else(|| bad(format!("\"{key}\" is not a number")))
            };
            (part("input")?, part("output")?)
        }
    };
    for (which, r) in [("input", input), ("output", output)] {
        if !(0.0..1.0).contains(&r) {
            return Err(bad(format!(
                "the {which} range ratio must be in [0, 1), got {r}"
            )));
        }
    }
    Ok((input, output))
}

/// transformers' `num_special_tokens_to_add()`: what encoding adds to any text.
pub fn num_special_tokens(tok: &impl Codec) -> Result<i64, PluginError> {
    Ok(tok.encode("", true)?.len() as i64)
}

/// The per-request draws of vLLM's `get_sampling_params`.
#[derive(Clone, Debug, PartialEq)]
pub struct Lengths {
    pub input: Vec<i64>,
    pub output: Vec<i64>,
    /// Where each prompt starts in the allowed tokens (before adding its index).
    pub offsets: Vec<i64>,
}

/// vLLM's `get_sampling_params`: `num_requests` input lengths (the special tokens the
/// tokenizer adds are taken off `input_len` first), output lengths (at least 1) and
/// vocabulary offsets, in that order. `plugin` names the plugin in errors.
pub fn sampling_params(
    plugin: &str,
    tok: &impl Codec,
    rng: &mut Generator,
    num_requests: usize,
    input_len: i64,
    output_len: i64,
    (input_ratio, output_ratio): (f64, f64),
) -> Result<Lengths, PluginError> {
    let real_input_len = (input_len - num_special_tokens(tok)?).max(0) as f64;
    let input_low = (real_input_len * (1.0 - input_ratio)).floor() as i64;
    let input_high = (real_input_len * (1.0 + input_ratio)).ceil() as i64;
    let output = output_len as f64;
    let output_low = ((output * (1.0 - output_ratio)).floor() as i64).max(1);
    let output_high = ((output * (1.0 + output_ratio)).ceil() as i64).max(1);
    for (what, high) in [("input", input_high), ("output", output_high)] {
        if u32::try_from(high).is_err() {
            return Err(PluginError::InvalidConfig(format!(
                "{plugin}: {what} lengths up to {high} tokens do not fit in 32 bits"
            )));
        }
    }
    let vocab_size = tok.vocab_size();
    if vocab_size == 0 {
        return Err(PluginError::InvalidConfig(format!(
            "{plugin}: the tokenizer reports an empty vocabulary"
        )));
    }
    Ok(Lengths {
        input: rng.integers(input_low, input_high + 1, num_requests),
        output: rng.integers(output_low, output_high + 1, num_requests),
        offsets: rng.integers(0, i64::from(vocab_size), num_requests),
    })
}

/// The tokens vLLM's random prompts are made of.
#[derive(Clone, Debug)]
pub struct Vocabulary {
    /// The vocabulary without special ids, ascending (vLLM builds it through a Python set
    /// of small ints, which iterates in ascending order).
    pub allowed: Vec<u32>,
    /// transformers' `vocab_size`, the range fitting pads from.
    pub vocab_size: u32,
}

impl Vocabulary {
    /// `set(range(vocab_size)) - set(all_special_ids)`.
    pub fn new(plugin: &str, tok: &impl Codec) -> Result<Self, PluginError> {
        let vocab_size = tok.vocab_size();
        let special = tok.special_token_ids();
        let allowed: Vec<u32> = (0..vocab_size).filter(|t| !special.contains(t)).collect();
        if allowed.is_empty() {
            return Err(PluginError::InvalidConfig(format!(
                "{plugin}: every token of the vocabulary is a special token"
            )));
        }
        Ok(Vocabulary {
            allowed,
            vocab_size,
        })
    }

    /// vLLM's `get_prefix`: `prefix_len` allowed tokens drawn at random, fitted to
    /// `prefix_len` tokens; the tokens and the mismatch (tokens more or fewer).
    pub fn prefix(
        &self,
        tok: &impl Codec,
        rng: &mut Generator,
        prefix_len: u32,
    ) -> Result<(Vec<u32>, i64), PluginError> {
        if prefix_len == 0 {
            return Ok((Vec::new(), 0));
        }
        let picks = rng.integers(0, self.allowed.len() as i64, prefix_len as usize);
        let ids = picks.iter().map(|&i| self.allowed[i as usize]).collect();
        let fitted = fit_to_length(tok, ids, prefix_len as usize, self.vocab_size, rng)?;
        Ok((fitted.tokens, fitted.mismatch))
    }

    /// The unfitted tokens of vLLM's `generate_token_sequence`: the prefix, then
    /// `input_len` consecutive allowed tokens from `offset + index`; and the length to
    /// fit them to, `prefix_len + input_len` (the asked-for prefix length, not the fitted
    /// prefix's, as in vLLM).
    pub fn sequence(
        &self,
        prefix: &[u32],
        prefix_len: u32,
        input_len: i64,
        offset: i64,
        index: usize,
    ) -> (Vec<u32>, usize) {
        let n = self.allowed.len() as i64;
        let start = offset + index as i64;
        let mut ids = Vec::with_capacity(prefix.len() + input_len.max(0) as usize);
        ids.extend_from_slice(prefix);
        ids.extend((0..input_len).map(|j| self.allowed[((start + j) % n) as usize]));
        (ids, prefix_len as usize + input_len.max(0) as usize)
    }
}

/// vLLM's check in `RandomDataset.sample` (not made by `random-mm`): the shortest prompt
/// the options allow must have a token.
pub fn check_min_input(plugin: &str, tok: &impl Codec, p: &TextParams) -> Result<(), PluginError> {
    let num_special = num_special_tokens(tok)?;
    let real_input_len = (p.input_len - num_special).max(0) as f64;
    let min_sampled_input = (real_input_len * (1.0 - p.input_range_ratio)).floor() as i64;
    let min_total_input = i64::from(p.prefix_len) + min_sampled_input;
    if min_total_input < 1 {
        return Err(PluginError::InvalidConfig(format!(
            "{plugin}: input-len is too small: with {num_special} special tokens added by the \
             tokenizer and an input range ratio of {}, the shortest possible prompt (prefix + \
             sampled) has {min_total_input} tokens; raise input-len or prefix-len, or lower \
             range-ratio, so that prefix-len + floor(max(0, input-len - special tokens) * \
             (1 - range ratio)) >= 1",
            p.input_range_ratio
        )));
    }
    Ok(())
}

/// One prompt of a [`TextSampler`]: its index, fitted text and drawn output length.
#[derive(Clone, Debug, PartialEq)]
pub struct TextPrompt {
    pub index: usize,
    pub fitted: Fitted,
    /// The drawn output length (checked to fit in 32 bits).
    pub output_len: u32,
}

/// A [`TextPrompt`] whose fitting may still draw padding (see [`TextSampler::next_pending`]).
pub struct PendingPrompt {
    pub index: usize,
    pub pending: PendingFit,
    pub output_len: u32,
}

/// `RandomDataset.sample`'s state with `rng = np.random.default_rng(seed)`, producing the
/// prompts in batches: [`TextSampler::new`] makes the draws vLLM makes up front (lengths,
/// offsets, the prefix), the `next_*` methods build the prompts in order. The generator
/// is public so that a dataset built on it (`random-mm`) draws from the same stream.
pub struct TextSampler {
    pub rng: Generator,
    lengths: Lengths,
    vocab: Vocabulary,
    prefix_len: u32,
    /// The shared prefix, already fitted to `prefix_len` tokens.
    prefix: Vec<u32>,
    /// Tokens more (positive) or fewer than `prefix_len` in the shared prefix.
    pub prefix_mismatch: i64,
    /// Tokens more or fewer than asked for, summed over the prompts built so far.
    pub token_mismatch: i64,
    next: usize,
}

impl TextSampler {
    /// Draws lengths, offsets and the prefix, in vLLM's order.
    pub fn new(
        plugin: &str,
        tok: &impl Codec,
        mut rng: Generator,
        num_requests: usize,
        p: &TextParams,
    ) -> Result<Self, PluginError> {
        let lengths = sampling_params(
            plugin,
            tok,
            &mut rng,
            num_requests,
            p.input_len,
            p.output_len,
            (p.input_range_ratio, p.output_range_ratio),
        )?;
        let vocab = Vocabulary::new(plugin, tok)?;
        let (prefix, prefix_mismatch) = vocab.prefix(tok, &mut rng, p.prefix_len)?;
        Ok(TextSampler {
            rng,
            lengths,
            vocab,
            prefix_len: p.prefix_len,
            prefix,
            prefix_mismatch,
            token_mismatch: 0,
            next: 0,
        })
    }

    /// How many prompts are left to build.
    pub fn remaining(&self) -> usize {
        self.lengths.input.len() - self.next
    }

    /// The vocabulary size fitting pads from.
    pub fn vocab_size(&self) -> u32 {
        self.vocab.vocab_size
    }

    /// The unfitted sequences of the next (up to) `max` prompts, with their indices.
    fn take(&mut self, max: usize) -> (Vec<usize>, Vec<(Vec<u32>, usize)>) {
        let end = self.lengths.input.len().min(self.next + max);
        let indices: Vec<usize> = (self.next..end).collect();
        let sequences = indices
            .iter()
            .map(|&i| {
                self.vocab.sequence(
                    &self.prefix,
                    self.prefix_len,
                    self.lengths.input[i],
                    self.lengths.offsets[i],
                    i,
                )
            })
            .collect();
        self.next = end;
        (indices, sequences)
    }

    /// The next (up to) `max` prompts, fitted. The whole batch is fitted at once (the
    /// host encodes it on all cores), with the same draws as one prompt after another.
    pub fn next_batch(
        &mut self,
        tok: &impl Codec,
        max: usize,
    ) -> Result<Vec<TextPrompt>, PluginError> {
        let (indices, sequences) = self.take(max);
        let fitted = fit_to_length_batch(tok, sequences, self.vocab.vocab_size, &mut self.rng)?;
        Ok(indices
            .into_iter()
            .zip(fitted)
            .map(|(index, fitted)| {
                self.token_mismatch += fitted.mismatch;
                TextPrompt {
                    index,
                    fitted,
                    output_len: self.lengths.output[index] as u32,
                }
            })
            .collect())
    }

    /// The next (up to) `max` prompts with their draw-free fitting steps done; the
    /// caller finishes each with [`TextSampler::finish`], in order, making its own draws
    /// for that prompt right after (as `random-mm` draws a prompt's images).
    pub fn next_pending(
        &mut self,
        tok: &impl Codec,
        max: usize,
    ) -> Result<Vec<PendingPrompt>, PluginError> {
        let (indices, sequences) = self.take(max);
        let pending = fit_to_length_pending(tok, sequences)?;
        Ok(indices
            .into_iter()
            .zip(pending)
            .map(|(index, pending)| PendingPrompt {
                index,
                pending,
                output_len: self.lengths.output[index] as u32,
            })
            .collect())
    }

    /// Finishes a prompt of [`TextSampler::next_pending`] (draws padding if it needs any).
    pub fn finish(
        &mut self,
        tok: &impl Codec,
        prompt: PendingPrompt,
    ) -> Result<TextPrompt, PluginError> {
        let fitted = prompt
            .pending
            .finish(tok, self.vocab.vocab_size, &mut self.rng)?;
        self.token_mismatch += fitted.mismatch;
        Ok(TextPrompt {
            index: prompt.index,
            fitted,
            output_len: prompt.output_len,
        })
    }
}

/// The `u32` length of a fitted prompt.
pub fn prompt_len(plugin: &str, fitted: &Fitted) -> Result<u32, PluginError> {
    u32::try_from(fitted.tokens.len()).map_err(|_| {
        PluginError::Internal(format!(
            "{plugin}: a prompt of {} tokens",
            fitted.tokens.len()
        ))
    })
}

/// vLLM's warning when re-encoding did not land on the drawn lengths, through the host's
/// log (`what`: "the shared prefix", "all prompts together").
pub fn warn_mismatch(plugin: &str, what: &str, mismatch: i64) {
    if mismatch != 0 {
        let sign = if mismatch > 0 { "more" } else { "fewer" };
        crate::host::log_warn(&format!(
            "{plugin}: {what} re-encoded to {} {sign} tokens than asked for (decoding and \
             re-encoding random tokens is not always length-preserving; vLLM shows the same)",
            mismatch.unsigned_abs()
        ));
    }
}

/// A tokenizer for the native unit tests of synthetic datasets (not for plugins).
#[doc(hidden)]
pub mod toy {
    use crate::PluginError;
    use crate::sampling::Codec;

    /// A toy greedy tokenizer: letters, a few pairs, one triple and a special token.
    /// The same tokenizer in Python drove vLLM 0.32's own `RandomDataset` to produce the
    /// expected values of the `random` plugin's unit tests (the vLLM wheel's `datasets.py`
    /// loaded with its heavy imports stubbed, then
    /// `RandomDataset(random_seed=seed).sample(tokenizer=Toy(bos), ...)`).
    pub struct Toy {
        /// Prepend the special token when asked to add special tokens (like a BOS).
        pub bos: bool,
    }

    const PAIRS: [&str; 12] = [
        "th", "he", "in", "er", "an", "re", "on", "at", "en", "nd", "ti", "es",
    ];
    pub const EOS: u32 = 39;

    pub fn piece(id: u32) -> String {
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
}

#[cfg(test)]
mod tests {
    use super::toy::Toy;
    use super::*;

    fn params() -> TextParams {
        TextParams {
            input_len: 14,
            output_len: 6,
            input_range_ratio: 0.6,
            output_range_ratio: 0.5,
            prefix_len: 3,
        }
    }

    /// Finishing pending prompts one by one, in order, gives what fitting the batch gives,
    /// and leaves the generator in the same state (what `random-mm` relies on).
    #[test]
    fn pending_prompts_finish_like_a_fitted_batch() {
        let tok = Toy { bos: true };
        for seed in 0..30u128 {
            let mut a = TextSampler::new("t", &tok, Generator::new(seed), 9, &params()).unwrap();
            let mut b = TextSampler::new("t", &tok, Generator::new(seed), 9, &params()).unwrap();
            let mut batch = Vec::new();
            let mut one_by_one = Vec::new();
            while a.remaining() > 0 {
                batch.extend(a.next_batch(&tok, 4).unwrap());
                for p in b.next_pending(&tok, 4).unwrap() {
                    one_by_one.push(b.finish(&tok, p).unwrap());
                }
            }
            assert_eq!(batch, one_by_one, "seed {seed}");
            assert_eq!(a.token_mismatch, b.token_mismatch);
            assert_eq!(a.rng.integers(0, 1 << 30, 3), b.rng.integers(0, 1 << 30, 3));
            for p in &batch {
                assert_eq!(tok.encode(&p.fitted.text, false).unwrap(), p.fitted.tokens);
                assert!((3..=9).contains(&p.output_len), "{p:?}");
            }
        }
    }

    #[test]
    fn sampling_params_take_off_special_tokens_and_keep_outputs_positive() {
        // Toy(bos) adds one token: input 11 - 1 = 10, ratio 0.5 -> [5, 15]; output 0 -> 1.
        let mut rng = Generator::new(4);
        let l = sampling_params("t", &Toy { bos: true }, &mut rng, 50, 11, 0, (0.5, 0.5)).unwrap();
        assert!(
            l.input.iter().all(|n| (5..=15).contains(n)),
            "{:?}",
            l.input
        );
        assert!(l.output.iter().all(|&n| n == 1));
        assert!(l.offsets.iter().all(|o| (0..40).contains(o)));
        // The draws: numpy's integers for each list in turn.
        let mut want = Generator::new(4);
        assert_eq!(l.input, want.integers(5, 16, 50));
        assert_eq!(l.offsets, want.integers(0, 40, 50));
    }

    #[test]
    fn range_ratios_parse_as_vllm() {
        assert_eq!(parse_range_ratio("t", "0.25").unwrap(), (0.25, 0.25));
        assert_eq!(
            parse_range_ratio("t", r#"{"input": 0.1, "output": "0.2"}"#).unwrap(),
            (0.1, 0.2)
        );
        assert!(parse_range_ratio("t", "1").is_err());
        assert!(parse_range_ratio("t", r#"{"input": 0.1}"#).is_err());
    }
}
