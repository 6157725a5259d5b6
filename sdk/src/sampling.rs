//! What vLLM's dataset samplers have in common, for plugins that reproduce them.
//!
//! - The tokenizer a sampler uses, as small traits ([`TokenCounter`], [`ChatTemplate`],
//!   [`Codec`]) that [`HostTokenizer`] implements with the run's tokenizer, so that a
//!   plugin's sampling logic is generic and its unit tests run natively with a toy one.
//! - vLLM's `--disable-shuffle` / `--no-oversample` flags ([`SampleFlags`]).
//! - The shape of vLLM's file datasets ([`Picker`]): shuffle with Python's
//!   `random.seed(seed)`, make requests from the items in order until there are
//!   `num_requests`, then `maybe_oversample_requests` ([`Oversampler`]).
//! - vLLM's `gen_prompt_decode_to_target_len` ([`fit_to_length`]), which every synthetic
//!   dataset uses to turn drawn tokens into a prompt of a given length.

use crate::options::{OptionReader, option};
use crate::rng::{Generator, Random, RandomState};
use crate::{ChatMessage, ContentPart, OptionInfo, PluginError, RequestSpec, host};

/// Counting tokens, as `len(tokenizer(text).input_ids)` (special tokens added).
pub trait TokenCounter {
    fn token_counts(&self, texts: &[String]) -> Result<Vec<usize>, PluginError>;
}

/// The chat template applied to one user message, with the generation prompt.
pub trait ChatTemplate {
    fn chat_prompt(&self, user: &str) -> Result<String, PluginError>;
}

/// Encoding, decoding and the vocabulary.
pub trait Codec {
    fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, PluginError>;
    /// [`Codec::encode`] for many texts; the host encodes them on all its cores.
    fn encode_batch(
        &self,
        texts: &[String],
        add_special_tokens: bool,
    ) -> Result<Vec<Vec<u32>>, PluginError> {
        texts
            .iter()
            .map(|text| self.encode(text, add_special_tokens))
            .collect()
    }
    /// Decodes keeping special tokens, as transformers' `decode` does by default.
    fn decode(&self, ids: &[u32]) -> Result<String, PluginError>;
    /// transformers' `tokenizer.vocab_size` (without added tokens).
    fn vocab_size(&self) -> u32;
    /// transformers' `tokenizer.all_special_ids`.
    fn special_token_ids(&self) -> Vec<u32>;
}

/// The run's tokenizer, lent by the host (only usable inside a plugin).
pub struct HostTokenizer;

impl TokenCounter for HostTokenizer {
    /// One host crossing for all texts.
    fn token_counts(&self, texts: &[String]) -> Result<Vec<usize>, PluginError> {
        Ok(host::encode_batch(texts, true)?
            .iter()
            .map(Vec::len)
            .collect())
    }
}

impl ChatTemplate for HostTokenizer {
    fn chat_prompt(&self, user: &str) -> Result<String, PluginError> {
        let message = ChatMessage {
            role: "user".into(),
            content: vec![ContentPart::Text(user.into())],
        };
        host::apply_chat_template(&[message], true)
    }
}

impl Codec for HostTokenizer {
    fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, PluginError> {
        host::encode(text, add_special_tokens)
    }

    /// One host crossing for all texts.
    fn encode_batch(
        &self,
        texts: &[String],
        add_special_tokens: bool,
    ) -> Result<Vec<Vec<u32>>, PluginError> {
        host::encode_batch(texts, add_special_tokens)
    }

    fn decode(&self, ids: &[u32]) -> Result<String, PluginError> {
        host::decode(ids, false)
    }

    fn vocab_size(&self) -> u32 {
        host::vocab_size(false)
    }

    fn special_token_ids(&self) -> Vec<u32> {
        host::special_token_ids()
    }
}

/// vLLM's `--disable-shuffle` and `--no-oversample`, honoured by its file datasets.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SampleFlags {
    /// `--disable-shuffle`: keep the file's order.
    pub disable_shuffle: bool,
    /// `--no-oversample`: return fewer requests than asked for when the file is short.
    pub no_oversample: bool,
}

impl SampleFlags {
    /// The two options, for a plugin's `describe`.
    pub fn options() -> [OptionInfo; 2] {
        [
            option(
                "disable-shuffle",
                "Keep the file's order instead of shuffling with the run seed",
                Some("false"),
            )
            .flag("disable-shuffle")
            .switch(),
            option(
                "no-oversample",
                "Return fewer requests than asked for instead of repeating random ones",
                Some("false"),
            )
            .flag("no-oversample")
            .switch(),
        ]
    }

    /// Reads the two options (vLLM's defaults: both off).
    pub fn read(reader: &mut OptionReader) -> Result<Self, PluginError> {
        Ok(SampleFlags {
            disable_shuffle: reader.flag("disable-shuffle", false)?,
            no_oversample: reader.flag("no-oversample", false)?,
        })
    }
}

/// vLLM's `maybe_oversample_requests`: `random.choice` among the requests made, drawn
/// from a fresh `random.seed(seed)`, until there are `num_requests`. Keeps its draws
/// between calls so that the requests can be handed out in batches.
pub struct Oversampler {
    seed: u64,
    /// Created at the first draw, as vLLM seeds right before drawing.
    rng: Option<Random>,
    made: usize,
}

impl Oversampler {
    pub fn new(seed: u64) -> Self {
        Oversampler {
            seed,
            rng: None,
            made: 0,
        }
    }

    /// Appends picks among `samples` to `out` until `out` holds `max` or
    /// `num_requests - samples.len()` picks are made in all. `None` when picks are due
    /// but `samples` is empty (vLLM's `random.choice` raises then).
    pub fn fill(
        &mut self,
        samples: &[RequestSpec],
        num_requests: usize,
        max: usize,
        out: &mut Vec<RequestSpec>,
    ) -> Option<()> {
        let missing = num_requests.saturating_sub(samples.len());
        if self.made >= missing || out.len() >= max {
            return Some(());
        }
        let seed = self.seed;
        let rng = self
            .rng
            .get_or_insert_with(|| Random::new(i128::from(seed)));
        while self.made < missing && out.len() < max {
            out.push(rng.choice(samples)?.clone());
            self.made += 1;
        }
        Some(())
    }
}

/// vLLM's file datasets (`ShareGPTDataset`, `CustomDataset`, ...), run a batch at a time:
/// the items are shuffled with `random.seed(seed)` (unless `--disable-shuffle`), requests
/// are made from them in order until there are `num_requests`, and when the items run out
/// first, [`Oversampler`] repeats random ones (unless `--no-oversample`).
pub struct Picker<T> {
    items: Vec<T>,
    /// The next item to look at.
    cursor: usize,
    num_requests: usize,
    /// The requests made from items so far (oversampling picks among them).
    samples: Vec<RequestSpec>,
    /// `None` with `--no-oversample`.
    oversampler: Option<Oversampler>,
}

impl<T> Picker<T> {
    pub fn new(mut items: Vec<T>, seed: u64, num_requests: usize, flags: SampleFlags) -> Self {
        if !flags.disable_shuffle {
            Random::new(i128::from(seed)).shuffle(&mut items);
        }
        Picker {
            items,
            cursor: 0,
            num_requests,
            samples: Vec::new(),
            oversampler: (!flags.no_oversample).then(|| Oversampler::new(seed)),
        }
    }

    /// The next (up to) `max` requests, in vLLM's order.
    ///
    /// `make(items, want, out)` makes at most `want` requests from the front of `items`
    /// (the ones not looked at yet, never empty), appends them to `out` and returns how
    /// many items it looked at (at least one). `starved` is the error when oversampling
    /// is due but no item made a request.
    pub fn next_batch(
        &mut self,
        max: usize,
        mut make: impl FnMut(&[T], usize, &mut Vec<RequestSpec>) -> Result<usize, PluginError>,
        starved: impl FnOnce() -> PluginError,
    ) -> Result<Vec<RequestSpec>, PluginError> {
        let mut out = Vec::new();
        while out.len() < max
            && self.samples.len() < self.num_requests
            && self.cursor < self.items.len()
        {
            let want = (max - out.len()).min(self.num_requests - self.samples.len());
            let start = out.len();
            let looked_at = make(&self.items[self.cursor..], want, &mut out)?;
            assert!(
                looked_at > 0 && out.len() - start <= want,
                "make must look at an item and make at most `want` requests"
            );
            self.cursor += looked_at;
            self.samples.extend_from_slice(&out[start..]);
        }
        if self.cursor == self.items.len()
            && let Some(oversampler) = &mut self.oversampler
        {
            oversampler
                .fill(&self.samples, self.num_requests, max, &mut out)
                .ok_or_else(starved)?;
        }
        Ok(out)
    }
}

/// Where [`fit_to_length`] draws its padding tokens from `[0, vocab_size)`. vLLM's
/// `gen_prompt_decode_to_target_len` draws with the numpy `Generator` it is given
/// (`rng.integers`), else with the legacy global `np.random.randint` (what
/// `PrefixRepetitionRandomDataset` relies on), so both streams implement this.
pub trait TokenDraws {
    /// `n` tokens drawn uniformly from `[0, vocab_size)`.
    fn draw_tokens(&mut self, vocab_size: u32, n: usize) -> Vec<u32>;
}

impl TokenDraws for Generator {
    /// `rng.integers(0, vocab_size, size=n)`.
    fn draw_tokens(&mut self, vocab_size: u32, n: usize) -> Vec<u32> {
        self.integers(0, i64::from(vocab_size), n)
            .into_iter()
            .map(|t| t as u32)
            .collect()
    }
}

impl TokenDraws for RandomState {
    /// `np.random.randint(0, vocab_size, size=n)`.
    fn draw_tokens(&mut self, vocab_size: u32, n: usize) -> Vec<u32> {
        self.randint(0, i64::from(vocab_size), n)
            .into_iter()
            .map(|t| t as u32)
            .collect()
    }
}

/// The text of a token sequence whose re-encoding has (ideally) `target` tokens.
#[derive(Clone, Debug, PartialEq)]
pub struct Fitted {
    pub text: String,
    /// The re-encoded tokens of `text`.
    pub tokens: Vec<u32>,
    /// `tokens.len() - target` when the tries ran out, else 0.
    pub mismatch: i64,
}

/// How many tries [`fit_to_length`] has before it settles for a length mismatch.
const MAX_RETRY: u32 = 10;

/// Where one sequence stands in vLLM's loop (see [`fit_to_length`]).
enum Fit {
    /// Decode `tokens` and re-encode the text next.
    RoundTrip {
        tokens: Vec<u32>,
        tries_left: u32,
    },
    /// Re-encoded too short: pad with drawn tokens next.
    Pad {
        tokens: Vec<u32>,
        tries_left: u32,
    },
    Done(Fitted),
}

impl Fit {
    /// The step after a round trip gave `tokens` for `text`.
    fn after_round_trip(text: String, mut tokens: Vec<u32>, target: usize, tries_left: u32) -> Fit {
        if tries_left == 0 || tokens.len() == target {
            let mismatch = tokens.len() as i64 - target as i64;
            return Fit::Done(Fitted {
                text,
                tokens,
                mismatch,
            });
        }
        if tokens.len() < target {
            return Fit::Pad { tokens, tries_left };
        }
        tokens.truncate(target);
        Fit::RoundTrip {
            tokens,
            tries_left: tries_left - 1,
        }
    }

    /// The padding step: `target - len` tokens drawn from `[0, vocab_size)`.
    fn pad(
        mut tokens: Vec<u32>,
        tries_left: u32,
        target: usize,
        vocab_size: u32,
        rng: &mut impl TokenDraws,
    ) -> Fit {
        tokens.extend(rng.draw_tokens(vocab_size, target - tokens.len()));
        Fit::RoundTrip {
            tokens,
            tries_left: tries_left - 1,
        }
    }
}

/// vLLM's `gen_prompt_decode_to_target_len`: decoding then re-encoding can merge or
/// split tokens, so decode, re-encode (without special tokens), and then pad with random
/// tokens (drawn from `[0, vocab_size)`, special ones included) or truncate, up to ten
/// times.
pub fn fit_to_length(
    tok: &impl Codec,
    tokens: Vec<u32>,
    target: usize,
    vocab_size: u32,
    rng: &mut impl TokenDraws,
) -> Result<Fitted, PluginError> {
    let mut fitted = fit_to_length_batch(tok, vec![(tokens, target)], vocab_size, rng)?;
    Ok(fitted.pop().expect("one fitted sequence per input"))
}

/// [`fit_to_length`] for many `(tokens, target)` sequences: the same results and the same
/// draws from `rng` as fitting them one after another, in order, but with the steps
/// that draw nothing (every sequence's first round trip and its truncations) taken for
/// all sequences together, one [`Codec::encode_batch`] per step, which the host spreads
/// over its cores. A sequence that needs padding finishes on its own afterwards, in
/// order, because its draws must follow those of the sequences before it (few do: 3% of
/// vLLM's default `random` prompts with GPT-2).
pub fn fit_to_length_batch(
    tok: &impl Codec,
    sequences: Vec<(Vec<u32>, usize)>,
    vocab_size: u32,
    rng: &mut impl TokenDraws,
) -> Result<Vec<Fitted>, PluginError> {
    fit_to_length_pending(tok, sequences)?
        .into_iter()
        .map(|pending| pending.finish(tok, vocab_size, rng))
        .collect()
}

/// A sequence of [`fit_to_length_pending`] whose steps without draws are done; the rest
/// of vLLM's loop (padding with drawn tokens) runs in [`PendingFit::finish`].
pub struct PendingFit {
    fit: Fit,
    target: usize,
}

impl PendingFit {
    /// Whether finishing the fit will draw (the sequence re-encoded too short); a fit
    /// that draws nothing finishes the same whatever state the generator is in.
    pub fn needs_draws(&self) -> bool {
        !matches!(self.fit, Fit::Done(_))
    }

    /// Finishes the fit, drawing from `rng` where the sequence needs padding (most need
    /// none and draw nothing).
    pub fn finish(
        self,
        tok: &impl Codec,
        vocab_size: u32,
        rng: &mut impl TokenDraws,
    ) -> Result<Fitted, PluginError> {
        let (mut fit, target) = (self.fit, self.target);
        loop {
            fit = match fit {
                Fit::Done(fitted) => return Ok(fitted),
                Fit::Pad { tokens, tries_left } => {
                    Fit::pad(tokens, tries_left, target, vocab_size, rng)
                }
                Fit::RoundTrip { tokens, tries_left } => {
                    let text = tok.decode(&tokens)?;
                    let tokens = tok.encode(&text, false)?;
                    Fit::after_round_trip(text, tokens, target, tries_left)
                }
            }
        }
    }
}

/// The first half of [`fit_to_length_batch`]: the steps that draw nothing, for all
/// sequences together. A caller whose own draws come between one sequence's padding and
/// the next (vLLM's `random-mm` draws each prompt's images right after its text) finishes
/// the sequences one by one, in order, with its draws in between.
pub fn fit_to_length_pending(
    tok: &impl Codec,
    sequences: Vec<(Vec<u32>, usize)>,
) -> Result<Vec<PendingFit>, PluginError> {
    let targets: Vec<usize> = sequences.iter().map(|(_, target)| *target).collect();
    let mut fits: Vec<Fit> = sequences
        .into_iter()
        .map(|(tokens, _)| Fit::RoundTrip {
            tokens,
            tries_left: MAX_RETRY,
        })
        .collect();
    // The steps without draws, all sequences at once, until none is left.
    loop {
        let due: Vec<usize> = (0..fits.len())
            .filter(|&i| matches!(fits[i], Fit::RoundTrip { .. }))
            .collect();
        if due.is_empty() {
            break;
        }
        let texts = due
            .iter()
            .map(|&i| match &fits[i] {
                Fit::RoundTrip { tokens, .. } => tok.decode(tokens),
                _ => unreachable!("filtered above"),
            })
            .collect::<Result<Vec<String>, PluginError>>()?;
        let encoded = tok.encode_batch(&texts, false)?;
        if encoded.len() != texts.len() {
            return Err(PluginError::Internal(format!(
                "encode_batch returned {} encodings for {} texts",
                encoded.len(),
                texts.len()
            )));
        }
        for ((i, text), tokens) in due.into_iter().zip(texts).zip(encoded) {
            let Fit::RoundTrip { tries_left, .. } = fits[i] else {
                unreachable!("filtered above")
            };
            fits[i] = Fit::after_round_trip(text, tokens, targets[i], tries_left);
        }
    }
    // The sequences that need draws finish later, in order, each to its end.
    Ok(fits
        .into_iter()
        .zip(targets)
        .map(|(fit, target)| PendingFit { fit, target })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Prompt;

    fn spec(text: &str) -> RequestSpec {
        RequestSpec::text(text.to_string(), 1, 1)
    }

    fn texts(specs: &[RequestSpec]) -> Vec<String> {
        specs
            .iter()
            .map(|s| match &s.prompt {
                Prompt::Text(t) => t.clone(),
                other => panic!("expected text, got {other:?}"),
            })
            .collect()
    }

    /// Every item makes a request, except those starting with "x".
    fn drain(picker: &mut Picker<&str>, max: usize) -> Result<Vec<String>, PluginError> {
        let mut all = Vec::new();
        loop {
            let got = picker.next_batch(
                max,
                |items, want, out| {
                    let (start, mut looked_at) = (out.len(), 0);
                    for item in items.iter().take(2) {
                        if out.len() - start == want {
                            break;
                        }
                        looked_at += 1;
                        if !item.starts_with('x') {
                            out.push(spec(item));
                        }
                    }
                    Ok(looked_at)
                },
                || PluginError::InvalidInput("starved".into()),
            )?;
            assert!(got.len() <= max);
            if got.is_empty() {
                return Ok(all);
            }
            all.extend(texts(&got));
        }
    }

    #[test]
    fn picker_shuffles_like_python_and_takes_in_order() {
        let items = vec!["a", "b", "c", "d", "e", "f"];
        let mut order = items.clone();
        Random::new(5).shuffle(&mut order);
        for max in [1, 2, 3, 100] {
            let mut picker = Picker::new(items.clone(), 5, 4, SampleFlags::default());
            assert_eq!(drain(&mut picker, max).unwrap(), order[..4], "max {max}");
        }
        let flags = SampleFlags {
            disable_shuffle: true,
            ..SampleFlags::default()
        };
        let mut picker = Picker::new(vec!["a", "xb", "c", "d"], 5, 2, flags);
        assert_eq!(drain(&mut picker, 1).unwrap(), ["a", "c"]);
    }

    #[test]
    fn picker_oversamples_with_a_fresh_python_rng() {
        let flags = SampleFlags {
            disable_shuffle: true,
            ..SampleFlags::default()
        };
        // What Python's random.seed(9); [random.choice("ac") for _ in range(5)] picks.
        let mut rng = Random::new(9);
        let extra: Vec<&str> = (0..5).map(|_| *rng.choice(&["a", "c"]).unwrap()).collect();
        for max in [1, 2, 3, 100] {
            let mut picker = Picker::new(vec!["a", "xb", "c"], 9, 7, flags);
            let got = drain(&mut picker, max).unwrap();
            assert_eq!(got[..2], ["a", "c"], "max {max}");
            assert_eq!(got[2..], extra[..], "max {max}");
        }
        let flags = SampleFlags {
            disable_shuffle: true,
            no_oversample: true,
        };
        let mut picker = Picker::new(vec!["a", "xb", "c"], 9, 7, flags);
        assert_eq!(drain(&mut picker, 2).unwrap(), ["a", "c"]);
        // Nothing made and oversampling due: the caller's error; without oversampling, none.
        let mut picker = Picker::new(vec!["xa"], 9, 2, SampleFlags::default());
        assert!(
            matches!(drain(&mut picker, 2), Err(PluginError::InvalidInput(m)) if m == "starved")
        );
        let mut picker = Picker::new(vec!["xa"], 9, 2, flags);
        assert_eq!(drain(&mut picker, 2).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn flags_are_read_with_vllms_defaults() {
        let read = |pairs: &[(&str, &str)]| {
            let pairs = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let mut reader = OptionReader::new("t", pairs);
            let flags = SampleFlags::read(&mut reader);
            reader.finish(&SampleFlags::options()).and(flags)
        };
        assert_eq!(read(&[]).unwrap(), SampleFlags::default());
        assert_eq!(
            read(&[("disable-shuffle", "yes"), ("no-oversample", "1")]).unwrap(),
            SampleFlags {
                disable_shuffle: true,
                no_oversample: true
            }
        );
        assert!(matches!(
            read(&[("no-oversample", "perhaps")]),
            Err(PluginError::InvalidConfig(m)) if m.contains("expected true or false")
        ));
        let names = SampleFlags::options().map(|o| o.name);
        assert_eq!(names, ["disable-shuffle", "no-oversample"]);
    }

    /// Letters plus one merge: "t" "h" re-encodes as the single token "th" (26), and
    /// "th" then "e" as "the" (27).
    struct Merging;

    impl Codec for Merging {
        fn encode(&self, text: &str, _: bool) -> Result<Vec<u32>, PluginError> {
            let mut out = Vec::new();
            let mut rest = text;
            while !rest.is_empty() {
                let (id, n) = if rest.starts_with("the") {
                    (27, 3)
                } else if rest.starts_with("th") {
                    (26, 2)
                } else {
                    (u32::from(rest.as_bytes()[0] - b'a'), 1)
                };
                out.push(id);
                rest = &rest[n..];
            }
            Ok(out)
        }

        fn decode(&self, ids: &[u32]) -> Result<String, PluginError> {
            Ok(ids
                .iter()
                .map(|&id| match id {
                    26 => "th".to_string(),
                    27 => "the".to_string(),
                    _ => char::from(b'a' + id as u8).to_string(),
                })
                .collect())
        }

        fn vocab_size(&self) -> u32 {
            26
        }

        fn special_token_ids(&self) -> Vec<u32> {
            Vec::new()
        }
    }

    #[test]
    fn fitting_pads_with_drawn_tokens_or_truncates() {
        let mut rng = Generator::new(0);
        // "t" "h" "e" "a" re-encodes as "the" "a": two tokens short, so two drawn tokens
        // (numpy's default_rng(0).integers(0, 26, 2)) are appended and re-encoded.
        let drawn = Generator::new(0).integers(0, 26, 2);
        let f = fit_to_length(&Merging, vec![19, 7, 4, 0], 4, 26, &mut rng).unwrap();
        let mut want = "thea".to_string();
        want.extend(drawn.iter().map(|&t| char::from(b'a' + t as u8)));
        assert_eq!(f.text, want);
        assert_eq!((f.tokens.len(), f.mismatch), (4, 0));
        // Too long: truncated.
        let f = fit_to_length(&Merging, vec![0, 1, 2, 3], 2, 26, &mut rng).unwrap();
        assert_eq!((f.text.as_str(), f.mismatch), ("ab", 0));
    }

    /// vLLM's loop as written, one sequence at a time: the reference for the batch.
    fn fit_one_by_one(
        tok: &impl Codec,
        mut tokens: Vec<u32>,
        target: usize,
        vocab_size: u32,
        rng: &mut Generator,
    ) -> Fitted {
        for tries_left in (0..=MAX_RETRY).rev() {
            let text = tok.decode(&tokens).unwrap();
            tokens = tok.encode(&text, false).unwrap();
            if tries_left == 0 || tokens.len() == target {
                let mismatch = tokens.len() as i64 - target as i64;
                return Fitted {
                    text,
                    tokens,
                    mismatch,
                };
            }
            if tokens.len() < target {
                let extra = rng.integers(0, i64::from(vocab_size), target - tokens.len());
                tokens.extend(extra.into_iter().map(|t| t as u32));
            } else {
                tokens.truncate(target);
            }
        }
        unreachable!("the last try returns")
    }

    #[test]
    fn fitting_a_batch_equals_fitting_one_by_one_in_order() {
        // Many sequences of letters around "t", "h" and "e", so that merges make some
        // short (padded with draws) and some long (truncated), over many seeds.
        for seed in 0..200u64 {
            let mut lcg = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            let mut next = |n: u64| {
                lcg = lcg
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (lcg >> 33) % n
            };
            let sequences: Vec<(Vec<u32>, usize)> = (0..1 + next(12))
                .map(|_| {
                    let len = next(9) as usize;
                    let tokens = (0..len)
                        .map(|_| [19, 7, 4, 0, 26, 27][next(6) as usize])
                        .collect();
                    (tokens, next(8) as usize)
                })
                .collect();
            let mut rng = Generator::new(u128::from(seed));
            let one_by_one: Vec<Fitted> = sequences
                .iter()
                .map(|(tokens, target)| {
                    fit_one_by_one(&Merging, tokens.clone(), *target, 26, &mut rng)
                })
                .collect();
            let mut batch_rng = Generator::new(u128::from(seed));
            let batch = fit_to_length_batch(&Merging, sequences, 26, &mut batch_rng).unwrap();
            assert_eq!(batch, one_by_one, "seed {seed}");
            // The generators are left in the same state.
            assert_eq!(
                batch_rng.integers(0, 1 << 30, 4),
                rng.integers(0, 1 << 30, 4),
                "seed {seed}"
            );
        }
    }

    #[test]
    fn fitting_reports_a_mismatch_when_the_tries_run_out() {
        /// Any text encodes as one token, so a target of two is never reached.
        struct OneToken;
        impl Codec for OneToken {
            fn encode(&self, _: &str, _: bool) -> Result<Vec<u32>, PluginError> {
                Ok(vec![0])
            }
            fn decode(&self, ids: &[u32]) -> Result<String, PluginError> {
                Ok("a".repeat(ids.len()))
            }
            fn vocab_size(&self) -> u32 {
                26
            }
            fn special_token_ids(&self) -> Vec<u32> {
                Vec::new()
            }
        }
        let f = fit_to_length(&OneToken, vec![0, 0], 2, 26, &mut Generator::new(1)).unwrap();
        assert_eq!((f.text.as_str(), f.tokens.len(), f.mismatch), ("aa", 1, -1));
    }
}
