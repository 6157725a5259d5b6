//! vLLM's `PrefixRepetitionRandomDataset.sample` (vLLM 0.32), draw for draw.
//!
//! vLLM seeds the legacy global generators (`random.seed(seed)`, `np.random.seed(seed)`)
//! and then, for each of `num_prefixes` prefixes, draws `prefix_len` tokens from the
//! whole vocabulary with `np.random.randint` and fits them to `prefix_len` tokens
//! (`gen_prompt_decode_to_target_len`, which pads with more `np.random.randint` draws),
//! then does the same for each of its `num_requests / num_prefixes` suffixes. A prompt is
//! the decoded prefix and suffix tokens together; the finished list is shuffled with
//! Python's `random.shuffle` unless `--disable-shuffle`.
//!
//! Every draw comes from one stream, so a sequence's padding draws move every later
//! sequence: the sequences are made in vLLM's order, but their round trips through the
//! tokenizer are batched speculatively (see [`fit_drawn`]). Generic over the SDK's
//! [`Codec`] so that it runs natively in unit tests.

use bench_sdk::rng::{Random, RandomState};
use bench_sdk::sampling::{Codec, Fitted, PendingFit, TokenDraws, fit_to_length_pending};
use bench_sdk::{PluginError, RequestSpec};

/// The options of `vllm bench serve --dataset-name prefix_repetition`.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// `--prefix-repetition-prefix-len`.
    pub prefix_len: u32,
    /// `--prefix-repetition-suffix-len`.
    pub suffix_len: u32,
    /// `--prefix-repetition-num-prefixes`, at least 1.
    pub num_prefixes: u32,
    /// `--prefix-repetition-output-len`.
    pub output_len: u32,
    /// `--disable-shuffle`.
    pub disable_shuffle: bool,
}

impl Default for Params {
    /// vLLM's defaults.
    fn default() -> Self {
        Params {
            prefix_len: 256,
            suffix_len: 256,
            num_prefixes: 10,
            output_len: 128,
            disable_shuffle: false,
        }
    }
}

/// vLLM's `PrefixRepetitionRandomDataset(random_seed=seed).sample(...)`. The list is
/// shuffled once complete, so it is made whole at the first [`Sampler::next_batch`] and
/// handed out from there. Request ids are left to the host (vLLM sets none).
pub struct Sampler {
    seed: u64,
    params: Params,
    /// `num_requests / num_prefixes`, at least 1.
    per_prefix: usize,
    /// The requests in their final order, once made.
    requests: Option<Vec<RequestSpec>>,
    next: usize,
    /// Tokens more (positive) or fewer than asked for, summed over every prefix and
    /// suffix (vLLM's `token_mismatch_total`).
    pub token_mismatch: i64,
}

impl Sampler {
    pub fn new(seed: u64, num_requests: usize, params: Params) -> Result<Self, PluginError> {
        if u32::try_from(seed).is_err() {
            // np.random.seed refuses it too.
            return Err(PluginError::InvalidConfig(format!(
                "prefix_repetition: --seed {seed} is out of range: vLLM seeds numpy's legacy \
                 generator, which takes seeds below 2**32"
            )));
        }
        let per_prefix = num_requests / params.num_prefixes as usize;
        if per_prefix == 0 {
            return Err(PluginError::InvalidConfig(format!(
                "prefix_repetition: --num-prompts ({num_requests}) must be at least \
                 num-prefixes ({}): each prefix starts num-prompts / num-prefixes prompts",
                params.num_prefixes
            )));
        }
        Ok(Sampler {
            seed,
            params,
            per_prefix,
            requests: None,
            next: 0,
            token_mismatch: 0,
        })
    }

    /// How many requests there are: `num_prefixes * (num_requests / num_prefixes)`.
    pub fn total(&self) -> usize {
        self.params.num_prefixes as usize * self.per_prefix
    }

    /// `--prefix-repetition-num-prefixes`.
    pub fn num_prefixes(&self) -> u32 {
        self.params.num_prefixes
    }

    /// Whether the requests are made (the first batch was asked for).
    pub fn started(&self) -> bool {
        self.requests.is_some()
    }

    /// The next (up to) `max` requests in vLLM's order.
    pub fn next_batch(
        &mut self,
        tok: &impl Codec,
        max: usize,
    ) -> Result<Vec<RequestSpec>, PluginError> {
        if self.requests.is_none() {
            self.requests = Some(self.make_all(tok)?);
        }
        let requests = self.requests.as_ref().expect("made above");
        let end = requests.len().min(self.next + max);
        let batch = requests[self.next..end].to_vec();
        self.next = end;
        Ok(batch)
    }

    fn make_all(&mut self, tok: &impl Codec) -> Result<Vec<RequestSpec>, PluginError> {
        let p = &self.params;
        let vocab_size = tok.vocab_size();
        if vocab_size == 0 {
            return Err(PluginError::InvalidConfig(
                "prefix_repetition: the tokenizer reports an empty vocabulary".into(),
            ));
        }
        let mut rng = RandomState::new(self.seed as u32);
        // Per prefix: the prefix, then its suffixes, in the order vLLM draws them.
        let group = 1 + self.per_prefix;
        let targets: Vec<usize> = (0..p.num_prefixes as usize * group)
            .map(|i| {
                if i % group == 0 {
                    p.prefix_len as usize
                } else {
                    p.suffix_len as usize
                }
            })
            .collect();
        let fitted = fit_drawn(tok, &targets, vocab_size, &mut rng)?;
        self.token_mismatch = fitted.iter().map(|f| f.mismatch).sum();
        let mut requests = Vec::with_capacity(self.total());
        for sequences in fitted.chunks(group) {
            let prefix = &sequences[0].tokens;
            for suffix in &sequences[1..] {
                let mut ids = Vec::with_capacity(prefix.len() + suffix.tokens.len());
                ids.extend_from_slice(prefix);
                ids.extend_from_slice(&suffix.tokens);
                let prompt_len = u32::try_from(ids.len()).map_err(|_| {
                    PluginError::InvalidConfig(format!(
                        "prefix_repetition: a prompt of {} tokens",
                        ids.len()
                    ))
                })?;
                requests.push(RequestSpec::text(
                    tok.decode(&ids)?,
                    prompt_len,
                    p.output_len,
                ));
            }
        }
        if !p.disable_shuffle {
            Random::new(i128::from(self.seed)).shuffle(&mut requests);
        }
        Ok(requests)
    }
}

/// The smallest and largest number of sequences [`fit_drawn`] fits ahead at once.
const MIN_AHEAD: usize = 4;
const MAX_AHEAD: usize = 1024;

/// For each target in order: draw `target` tokens from `[0, vocab_size)` with `rng`,
/// then fit them to `target` tokens (`fit_to_length`, padding with more draws from
/// `rng`). The same results and draws as doing exactly that one sequence after another,
/// but with the round trips through the tokenizer batched: the next sequences are drawn
/// ahead on a copy of `rng` and their draw-free steps run together
/// ([`fit_to_length_pending`]); those before the first one that needs padding are right
/// as they are, that one finishes with the real `rng`, and the rest are drawn again after
/// it. How far ahead to draw follows how far the last guess held.
pub fn fit_drawn<R: TokenDraws + Clone>(
    tok: &impl Codec,
    targets: &[usize],
    vocab_size: u32,
    rng: &mut R,
) -> Result<Vec<Fitted>, PluginError> {
    let mut out: Vec<Fitted> = Vec::with_capacity(targets.len());
    let mut ahead = 32;
    while out.len() < targets.len() {
        let rest = &targets[out.len()..];
        let n = ahead.min(rest.len());
        let mut guess = rng.clone();
        let drawn = rest[..n]
            .iter()
            .map(|&target| (guess.draw_tokens(vocab_size, target), target))
            .collect();
        let pending = fit_to_length_pending(tok, drawn)?;
        let held = pending
            .iter()
            .position(PendingFit::needs_draws)
            .unwrap_or(n);
        // The sequences up to the first that draws (included) are right once `rng` has
        // made their draws; the first that draws takes its padding from `rng` itself.
        for (fit, &target) in pending.into_iter().zip(rest).take((held + 1).min(n)) {
            rng.draw_tokens(vocab_size, target);
            out.push(fit.finish(tok, vocab_size, rng)?);
        }
        ahead = if held == n {
            (2 * n).min(MAX_AHEAD)
        } else {
            (2 * (held + 1)).clamp(MIN_AHEAD, MAX_AHEAD)
        };
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::Prompt;
    use bench_sdk::sampling::fit_to_length;

    /// Letters plus two merges: "t" "h" re-encodes as the single token "th" (26), and
    /// "th" then "e" as "the" (27); 28 is a special token that decodes to "<s>" and
    /// re-encodes as its three letters, so round trips both shrink and grow sequences.
    struct Toy;

    impl Codec for Toy {
        fn encode(&self, text: &str, _: bool) -> Result<Vec<u32>, PluginError> {
            let mut out = Vec::new();
            let mut rest = text;
            while !rest.is_empty() {
                let (id, n) = if rest.starts_with("the") {
                    (27, 3)
                } else if rest.starts_with("th") {
                    (26, 2)
                } else {
                    let b = rest.as_bytes()[0];
                    (
                        if b.is_ascii_lowercase() {
                            u32::from(b - b'a')
                        } else {
                            0
                        },
                        1,
                    )
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
                    28 => "<s>".to_string(),
                    _ => char::from(b'a' + id as u8).to_string(),
                })
                .collect())
        }

        fn vocab_size(&self) -> u32 {
            29
        }

        fn special_token_ids(&self) -> Vec<u32> {
            vec![28]
        }
    }

    fn text(spec: &RequestSpec) -> &str {
        match &spec.prompt {
            Prompt::Text(t) => t,
            other => panic!("prefix_repetition makes text prompts, got {other:?}"),
        }
    }

    fn sample(seed: u64, n: usize, p: &Params, batch: usize) -> Vec<RequestSpec> {
        let mut sampler = Sampler::new(seed, n, p.clone()).unwrap();
        let mut all = Vec::new();
        loop {
            let got = sampler.next_batch(&Toy, batch).unwrap();
            assert!(got.len() <= batch);
            if got.is_empty() {
                assert_eq!(all.len(), sampler.total());
                return all;
            }
            all.extend(got);
        }
    }

    /// vLLM's loop as written: draw, then fit, one sequence after another.
    fn one_by_one(targets: &[usize], rng: &mut RandomState) -> Vec<Fitted> {
        targets
            .iter()
            .map(|&target| {
                let tokens = rng.draw_tokens(29, target);
                fit_to_length(&Toy, tokens, target, 29, rng).unwrap()
            })
            .collect()
    }

    #[test]
    fn speculative_fitting_equals_drawing_and_fitting_in_order() {
        let mut padded = 0;
        for seed in 0..60u32 {
            let targets: Vec<usize> = (0..1 + seed as usize * 3)
                .map(|i| [0, 1, 5, 9, 17][(i * 7 + seed as usize) % 5])
                .collect();
            let mut rng = RandomState::new(seed);
            let want = one_by_one(&targets, &mut rng);
            let mut spec_rng = RandomState::new(seed);
            let got = fit_drawn(&Toy, &targets, 29, &mut spec_rng).unwrap();
            assert_eq!(got, want, "seed {seed}");
            // Both generators are left in the same state.
            assert_eq!(spec_rng.randint(0, 1 << 30, 4), rng.randint(0, 1 << 30, 4));
            padded += want.iter().filter(|f| f.tokens.len() == 17).count();
        }
        assert!(padded > 0);
    }

    #[test]
    fn groups_share_their_prefix_and_have_the_asked_lengths() {
        let p = Params {
            prefix_len: 12,
            suffix_len: 6,
            num_prefixes: 3,
            output_len: 7,
            disable_shuffle: true,
        };
        // 11 prompts asked for: 3 prefixes of 3 prompts each.
        let got = sample(5, 11, &p, 100);
        assert_eq!(got.len(), 9);
        let mut prefixes = Vec::new();
        for group in got.chunks(3) {
            // The prompts of a group start with the same text, which encodes to the
            // prefix's 12 tokens; the suffixes differ.
            let first = text(&group[0]);
            let common = group.iter().map(text).fold(first.len(), |n, t| {
                first
                    .bytes()
                    .zip(t.bytes())
                    .take(n)
                    .take_while(|(a, b)| a == b)
                    .count()
            });
            assert!(Toy.encode(&first[..common], false).unwrap().len() >= 11);
            prefixes.push(first[..common.min(6)].to_string());
            for spec in group {
                assert_eq!(spec.prompt_len, 18);
                assert_eq!(spec.expected_output_len, 7);
                assert_eq!(Toy.encode(text(spec), false).unwrap().len(), 18);
            }
        }
        prefixes.dedup();
        assert_eq!(
            prefixes.len(),
            3,
            "the three groups have different prefixes"
        );
    }

    #[test]
    fn shuffles_the_finished_list_like_python() {
        let p = Params {
            prefix_len: 8,
            suffix_len: 4,
            num_prefixes: 2,
            ..Params::default()
        };
        let ordered = sample(
            9,
            10,
            &Params {
                disable_shuffle: true,
                ..p.clone()
            },
            100,
        );
        let mut want: Vec<String> = ordered.iter().map(|s| text(s).to_string()).collect();
        Random::new(9).shuffle(&mut want);
        for batch in [1, 3, 100] {
            let got: Vec<String> = sample(9, 10, &p, batch)
                .iter()
                .map(|s| text(s).to_string())
                .collect();
            assert_eq!(got, want, "batch {batch}");
        }
        // Another seed, other prompts.
        assert_ne!(text(&sample(10, 10, &p, 100)[0]), want[0]);
    }

    #[test]
    fn too_few_prompts_and_seeds_numpy_refuses_are_errors() {
        let p = Params::default();
        assert!(matches!(
            Sampler::new(0, 9, p.clone()),
            Err(PluginError::InvalidConfig(m)) if m.contains("(9) must be at least num-prefixes (10)")
        ));
        assert!(matches!(
            Sampler::new(1 << 32, 10, p.clone()),
            Err(PluginError::InvalidConfig(m)) if m.contains("below 2**32")
        ));
        assert_eq!(Sampler::new(0, 29, p).unwrap().total(), 20);
    }
}
