//! vLLM's `RandomDataset.sample` (vLLM 0.32), draw for draw, on the SDK's
//! [`bench_sdk::synthetic`] module (which `random-mm` and `random-rerank` share):
//! 1. input lengths, output lengths and vocabulary offsets, `num_requests` each;
//! 2. the shared prefix (token indices), fitted to `prefix_len` tokens;
//! 3. per request, consecutive allowed tokens from its offset after the prefix, fitted
//!    to `prefix_len + input_len` tokens (fitting may draw extra tokens);
//! 4. with `--random-batch-size` above 1 (vLLM's embedding benchmarks), the prompts
//!    grouped into requests of that many texts.
//!
//! The code is generic over the SDK's [`Codec`] so that it runs natively in unit tests.

use bench_sdk::rng::Generator;
use bench_sdk::sampling::Codec;
use bench_sdk::synthetic::{TextParams, TextSampler, check_min_input, prompt_len};
use bench_sdk::{PluginError, Prompt, RequestSpec};

/// The dataset's name, which begins every message it writes.
pub(crate) const NAME: &str = "random";

/// The options of `vllm bench serve --dataset-name random`.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// The length options.
    pub text: TextParams,
    /// `--random-batch-size`: prompts per request, at least 1.
    pub batch_size: u32,
}

impl Default for Params {
    /// vLLM's defaults.
    fn default() -> Self {
        Params {
            text: TextParams::default(),
            batch_size: 1,
        }
    }
}

/// vLLM's `RandomDataset(random_seed=seed).sample(tokenizer, num_requests, ...)` with
/// `rng = np.random.default_rng(seed)`, producing the requests in batches. Request ids
/// are left to the host.
pub struct Sampler {
    text: TextSampler,
    batch_size: usize,
}

impl Sampler {
    /// Validates the options against the tokenizer, then draws lengths, offsets and the
    /// prefix, in vLLM's order.
    pub fn new(
        tok: &impl Codec,
        rng: Generator,
        num_requests: usize,
        p: &Params,
    ) -> Result<Self, PluginError> {
        check_min_input(NAME, tok, &p.text)?;
        Ok(Sampler {
            text: TextSampler::new(NAME, tok, rng, num_requests, &p.text)?,
            batch_size: p.batch_size.max(1) as usize,
        })
    }

    /// How many requests the source makes: one per prompt, or one per batch of prompts.
    pub fn size(num_requests: u32, batch_size: u32) -> u32 {
        num_requests.div_ceil(batch_size.max(1))
    }

    /// How many prompts are left to build.
    pub fn remaining(&self) -> usize {
        self.text.remaining()
    }

    /// Tokens more (positive) or fewer than `prefix_len` in the shared prefix.
    pub fn prefix_mismatch(&self) -> i64 {
        self.text.prefix_mismatch
    }

    /// Tokens more or fewer than asked for, summed over the prompts built so far.
    pub fn token_mismatch(&self) -> i64 {
        self.text.token_mismatch
    }

    /// The next (up to) `max` requests.
    pub fn next_batch(
        &mut self,
        tok: &impl Codec,
        max: usize,
    ) -> Result<Vec<RequestSpec>, PluginError> {
        let prompts = self
            .text
            .next_batch(tok, max.saturating_mul(self.batch_size))?;
        if self.batch_size == 1 {
            return prompts
                .into_iter()
                .map(|p| {
                    let len = prompt_len(NAME, &p.fitted)?;
                    Ok(RequestSpec::text(p.fitted.text, len, p.output_len))
                })
                .collect();
        }
        // vLLM's batches: the texts of `batch_size` consecutive prompts, their lengths
        // summed, no output length (`SampleRequest`'s default of 0).
        prompts
            .chunks(self.batch_size)
            .map(|batch| {
                let mut len = 0u32;
                for p in batch {
                    len = len.saturating_add(prompt_len(NAME, &p.fitted)?);
                }
                let texts = batch.iter().map(|p| p.fitted.text.clone()).collect();
                let mut spec = RequestSpec::text(String::new(), len, 0);
                spec.prompt = Prompt::Texts(texts);
                Ok(spec)
            })
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    pub(crate) use bench_sdk::synthetic::toy::Toy;

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
    fn run(seed: u128, bos: bool, n: usize, text: TextParams) -> Vec<(String, u32, u32)> {
        let p = Params {
            text,
            batch_size: 1,
        };
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
        let p = TextParams {
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
        let p = TextParams {
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
        let p = TextParams {
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
        let p = TextParams {
            input_len: 30,
            input_range_ratio: 0.9,
            ..TextParams::default()
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
            text: TextParams {
                input_len: 1,
                ..TextParams::default()
            },
            batch_size: 1,
        };
        let err = Sampler::new(&Toy { bos: true }, Generator::new(0), 3, &p)
            .err()
            .unwrap();
        assert!(
            matches!(&err, PluginError::InvalidConfig(m) if m.contains("input-len is too small")),
            "{err}"
        );
    }

    #[test]
    fn batches_group_consecutive_prompts_like_vllm() {
        let text = TextParams {
            input_len: 20,
            output_len: 7,
            input_range_ratio: 0.5,
            output_range_ratio: 0.0,
            prefix_len: 2,
        };
        let single = run(11, false, 7, text.clone());
        let p = Params {
            text,
            batch_size: 3,
        };
        assert_eq!(Sampler::size(7, 3), 3);
        let tok = Toy { bos: false };
        for max in [1, 2, 10] {
            let mut sampler = Sampler::new(&tok, Generator::new(11), 7, &p).unwrap();
            let mut got = Vec::new();
            loop {
                let batch = sampler.next_batch(&tok, max).unwrap();
                assert!(batch.len() <= max);
                if batch.is_empty() {
                    break;
                }
                got.extend(batch);
            }
            // 7 prompts in requests of 3, 3 and 1: the texts in order, lengths summed, no
            // output length.
            assert_eq!(got.len(), 3, "max {max}");
            for (request, prompts) in got.iter().zip(single.chunks(3)) {
                let Prompt::Texts(texts) = &request.prompt else {
                    panic!("expected a batch of texts, got {:?}", request.prompt);
                };
                let want: Vec<&String> = prompts.iter().map(|(t, _, _)| t).collect();
                assert_eq!(texts.iter().collect::<Vec<_>>(), want, "max {max}");
                let len: u32 = prompts.iter().map(|(_, l, _)| l).sum();
                assert_eq!(request.prompt_len, len);
                assert_eq!(request.expected_output_len, 0);
            }
        }
    }
}
