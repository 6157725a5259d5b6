//! vLLM 0.32's `TimedTrace`: replays a JSON Lines trace (`timestamp`, `input_length`,
//! `output_length`, `hash_ids`), each request sent at its line's time stamp times
//! `--timed-trace-sec-multiplier`, with a token-id prompt made of one block of
//! `--timed-trace-chunk-hash-size` random tokens per hash id.
//!
//! vLLM draws a block's tokens with `random.Random(hash(f"{h}:{size}") & 0xFFFFFFFF)
//! .choices(pool, k=size)`, where `pool` is the vocabulary without special tokens, sorted,
//! and `size` is the chunk size, or what is left of `input_length` for the last block. So
//! two lines that share a hash id share its block's tokens (unless one of them needs only a
//! part of it, which is drawn with another seed), the prompt is as long as `input_length`
//! where the hash ids cover it, and shorter where they run out (vLLM's rule, kept). Python's
//! `hash` of a string depends on `PYTHONHASHSEED` ([`crate::pyhash`]): the run's `--seed`
//! stands in for it. The first `num_requests` lines are used, in order, none shuffled or
//! repeated.

use std::collections::HashMap;

use bench_sdk::rng::Random;
use bench_sdk::trace::Entry;
use bench_sdk::{PluginError, Prompt, RequestSpec};

use crate::pyhash::str_hash_u32;

/// The options of `vllm bench serve --dataset-name timed_trace` that shape the requests.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// `--timed-trace-chunk-hash-size`: tokens per hash id (default 16).
    pub chunk_size: i64,
    /// `--timed-trace-sec-multiplier`: time stamps times this are seconds (default 1).
    pub sec_multiplier: f64,
}

impl Default for Params {
    /// vLLM's defaults.
    fn default() -> Self {
        Params {
            chunk_size: 16,
            sec_multiplier: 1.0,
        }
    }
}

/// vLLM's `TimedTrace.sample`, a batch per call.
pub struct Sampler {
    entries: Vec<Entry>,
    next: usize,
    /// The token ids blocks are drawn from.
    pool: Vec<u32>,
    /// vLLM's `_expanded_generated_prompts`: `"{h}:{size}"` to its tokens.
    blocks: HashMap<String, Vec<u32>>,
    /// `PYTHONHASHSEED`.
    hash_seed: u32,
    params: Params,
    /// The file name, for errors.
    name: String,
}

impl Sampler {
    /// `entries` are the trace's first `num_requests` lines; `pool` the token ids to draw
    /// from; `seed` the run's seed (as `PYTHONHASHSEED`, so its low 32 bits).
    pub fn new(entries: Vec<Entry>, pool: Vec<u32>, seed: u64, params: Params, name: &str) -> Self {
        Sampler {
            entries,
            next: 0,
            pool,
            blocks: HashMap::new(),
            hash_seed: seed as u32,
            params,
            name: name.to_string(),
        }
    }

    /// How many requests the trace makes.
    pub fn total(&self) -> usize {
        self.entries.len()
    }

    /// The next (up to) `max` requests.
    pub fn next_batch(&mut self, max: usize) -> Result<Vec<RequestSpec>, PluginError> {
        let end = self.entries.len().min(self.next.saturating_add(max));
        let mut out = Vec::with_capacity(end - self.next);
        for i in self.next..end {
            let (ids, send_at, output_len) = {
                let entry = &self.entries[i];
                let send_at = entry.timestamp * self.params.sec_multiplier;
                let ids = expand(
                    &entry.hash_ids,
                    entry.input_length,
                    self.params.chunk_size,
                    &self.pool,
                    self.hash_seed,
                    &mut self.blocks,
                )
                .map_err(|why| entry.place.error(&self.name, why))?;
                (ids, send_at, entry.output_length)
            };
            let prompt_len = u32::try_from(ids.len()).unwrap_or(u32::MAX);
            let mut spec = RequestSpec::text(String::new(), prompt_len, output_len);
            spec.prompt = Prompt::TokenIds(ids);
            spec.send_at = Some(send_at);
            out.push(spec);
        }
        self.next = end;
        Ok(out)
    }
}

/// vLLM's `_expand_prompt`: the blocks of `hash_ids` laid end to end until `input_length`
/// tokens are covered.
fn expand(
    hash_ids: &[String],
    input_length: i64,
    chunk_size: i64,
    pool: &[u32],
    hash_seed: u32,
    blocks: &mut HashMap<String, Vec<u32>>,
) -> Result<Vec<u32>, String> {
    let mut target = input_length;
    let mut ids = Vec::with_capacity(usize::try_from(input_length.max(0)).unwrap_or(0));
    for h in hash_ids {
        let size = if target >= chunk_size {
            chunk_size
        } else {
            target
        };
        let key = format!("{h}:{size}");
        if !blocks.contains_key(&key) {
            let k = usize::try_from(size.max(0)).unwrap_or(0);
            if k > 0 && pool.is_empty() {
                return Err("the tokenizer has no tokens but special ones to draw from".into());
            }
            let seed = str_hash_u32(&key, hash_seed);
            let drawn = Random::new(i128::from(seed)).choices(pool, k);
            blocks.insert(key.clone(), drawn);
        }
        ids.extend_from_slice(&blocks[&key]);
        target -= size;
        if target <= 0 {
            break;
        }
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::table::Place;

    fn entry(ts: f64, input_length: i64, output_length: u32, hash_ids: &[&str]) -> Entry {
        Entry {
            place: Place::Line(1),
            timestamp: ts,
            input_length,
            output_length,
            hash_ids: hash_ids.iter().map(|h| h.to_string()).collect(),
        }
    }

    fn ids(spec: &RequestSpec) -> &[u32] {
        match &spec.prompt {
            Prompt::TokenIds(ids) => ids,
            other => panic!("expected token ids, got {other:?}"),
        }
    }

    fn sample(entries: Vec<Entry>, params: Params, seed: u64, batch: usize) -> Vec<RequestSpec> {
        let pool: Vec<u32> = (10..1000).collect();
        let mut sampler = Sampler::new(entries, pool, seed, params, "t.jsonl");
        let mut all = Vec::new();
        loop {
            let got = sampler.next_batch(batch).unwrap();
            if got.is_empty() {
                return all;
            }
            all.extend(got);
        }
    }

    #[test]
    fn blocks_follow_vllms_seeds_and_sharing() {
        let entries = vec![
            entry(0.0, 40, 5, &["1", "2", "3"]),
            entry(1500.0, 36, 7, &["1", "2", "4"]),
            // The hash ids run out before input_length: vLLM's prompt is shorter.
            entry(2000.0, 100, 1, &["1"]),
        ];
        let params = Params {
            chunk_size: 16,
            sec_multiplier: 0.001,
        };
        let got = sample(entries.clone(), params.clone(), 7, 100);
        let pool: Vec<u32> = (10..1000).collect();
        let block =
            |key: &str, k: usize| Random::new(i128::from(str_hash_u32(key, 7))).choices(&pool, k);
        let want0 = [block("1:16", 16), block("2:16", 16), block("3:8", 8)].concat();
        assert_eq!(ids(&got[0]), want0);
        let want1 = [block("1:16", 16), block("2:16", 16), block("4:4", 4)].concat();
        assert_eq!(ids(&got[1]), want1);
        assert_eq!(ids(&got[2]), block("1:16", 16));
        assert_eq!(
            got.iter()
                .map(|s| (s.prompt_len, s.expected_output_len))
                .collect::<Vec<_>>(),
            [(40, 5), (36, 7), (16, 1)]
        );
        assert_eq!(
            got.iter().map(|s| s.send_at.unwrap()).collect::<Vec<_>>(),
            [0.0, 1.5, 2.0]
        );
        // Batches change nothing; another seed changes the blocks but not the sharing.
        let one_by_one = sample(entries.clone(), params.clone(), 7, 1);
        assert_eq!(format!("{one_by_one:?}"), format!("{got:?}"));
        let other = sample(entries, params, 8, 100);
        assert_ne!(ids(&other[0]), ids(&got[0]));
        assert_eq!(ids(&other[0])[..32], ids(&other[1])[..32]);
    }

    #[test]
    fn short_and_empty_prompts_follow_vllm() {
        let got = sample(
            vec![entry(0.0, 0, 1, &["5", "6"]), entry(0.0, 3, 1, &[])],
            Params::default(),
            0,
            10,
        );
        assert!(ids(&got[0]).is_empty());
        assert!(ids(&got[1]).is_empty());
    }
}
