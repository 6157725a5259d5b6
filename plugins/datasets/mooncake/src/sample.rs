//! Mooncake trace replay (beyond vLLM): each line of a Mooncake trace
//! (`{"timestamp": ms, "input_length": n, "output_length": m, "hash_ids": [...]}`, one hash
//! id per `block_size` tokens of the prompt, 512 in Mooncake's traces) becomes a request
//! sent at `timestamp / 1000` s, whose prompt is exactly `input_length` token ids: the
//! blocks of its hash ids laid end to end, the last one cut to length.
//!
//! Every hash id stands for one fixed block of `block_size` random token ids, drawn from
//! the vocabulary without special tokens ([`block`]), so two requests that share a hash id
//! share that block's tokens exactly and a server's prefix cache sees the trace's reuse.
//! The prompts are token ids, not text: text decoded from random tokens re-tokenises into
//! other tokens (merges across block boundaries), so neither the lengths nor the shared
//! prefixes would survive; vLLM's `timed_trace` and `random` keep lengths exact the same
//! way (token ids, or re-encoding and fixing up text). A line whose hash ids cover fewer
//! than `input_length` tokens is filled up with blocks of its own (counted and reported).

use bench_sdk::rng::Generator;
use bench_sdk::trace::Entry;
use bench_sdk::{PluginError, Prompt, RequestSpec};

/// Mooncake's block size.
pub const DEFAULT_BLOCK_SIZE: usize = 512;

/// 64-bit FNV-1a, to turn a hash id's text into seed bits.
fn fnv1a64(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The `len` first tokens of the block of hash id `key`: numpy's
/// `default_rng((seed << 64) | fnv1a64(key)).integers(0, len(pool), block_size)` mapped into
/// `pool`. A shorter block is a prefix of the full one, so a trace's last, partial block
/// shares its tokens with the same hash id's full block elsewhere.
pub fn block(key: &str, seed: u64, pool: &[u32], len: usize, out: &mut Vec<u32>) {
    let mut rng = Generator::new((u128::from(seed) << 64) | u128::from(fnv1a64(key)));
    let n = pool.len() as i64;
    out.extend(
        rng.integers(0, n, len)
            .into_iter()
            .map(|i| pool[i as usize]),
    );
}

/// The requests of a trace, a batch per call.
pub struct Sampler {
    entries: Vec<Entry>,
    next: usize,
    pool: Vec<u32>,
    seed: u64,
    block_size: usize,
    /// Lines whose hash ids did not cover `input_length` (filled with blocks of their own).
    pub filled: usize,
    name: String,
}

impl Sampler {
    pub fn new(
        entries: Vec<Entry>,
        pool: Vec<u32>,
        seed: u64,
        block_size: usize,
        name: &str,
    ) -> Result<Self, PluginError> {
        if pool.is_empty() {
            return Err(PluginError::Unsupported(
                "mooncake: the tokenizer has no tokens but special ones to draw prompts from"
                    .into(),
            ));
        }
        for entry in &entries {
            if entry.input_length < 0 {
                return Err(entry.place.error(
                    name,
                    format!("\"input_length\" must be >= 0, got {}", entry.input_length),
                ));
            }
        }
        Ok(Sampler {
            entries,
            next: 0,
            pool,
            seed,
            block_size,
            filled: 0,
            name: name.to_string(),
        })
    }

    pub fn total(&self) -> usize {
        self.entries.len()
    }

    /// The next (up to) `max` requests.
    pub fn next_batch(&mut self, max: usize) -> Result<Vec<RequestSpec>, PluginError> {
        let end = self.entries.len().min(self.next.saturating_add(max));
        let mut out = Vec::with_capacity(end - self.next);
        for i in self.next..end {
            let entry = &self.entries[i];
            let len = entry.input_length as usize;
            let mut ids = Vec::with_capacity(len);
            let mut k = 0;
            while ids.len() < len {
                let take = (len - ids.len()).min(self.block_size);
                match entry.hash_ids.get(k) {
                    Some(h) => block(h, self.seed, &self.pool, take, &mut ids),
                    None => {
                        // A block of this line's own, which no other line shares.
                        let own = format!("\0{}:{}:{k}", self.name, entry.place.number());
                        block(&own, self.seed, &self.pool, take, &mut ids);
                    }
                }
                k += 1;
            }
            if k > entry.hash_ids.len() {
                self.filled += 1;
            }
            let prompt_len = u32::try_from(len).map_err(|_| {
                entry
                    .place
                    .error(&self.name, format!("a prompt of {len} tokens is too long"))
            })?;
            let mut spec = RequestSpec::text(String::new(), prompt_len, entry.output_length);
            spec.prompt = Prompt::TokenIds(ids);
            spec.send_at = Some(entry.timestamp / 1000.0);
            out.push(spec);
        }
        self.next = end;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::table::Place;

    fn entry(line: usize, ts: f64, input_length: i64, hash_ids: &[u32]) -> Entry {
        Entry {
            place: Place::Line(line),
            timestamp: ts,
            input_length,
            output_length: 3,
            hash_ids: hash_ids.iter().map(|h| h.to_string()).collect(),
        }
    }

    fn ids(spec: &RequestSpec) -> &[u32] {
        match &spec.prompt {
            Prompt::TokenIds(ids) => ids,
            other => panic!("expected token ids, got {other:?}"),
        }
    }

    fn sample(entries: Vec<Entry>, seed: u64, block_size: usize, batch: usize) -> Vec<RequestSpec> {
        let pool: Vec<u32> = (100..5000).collect();
        let mut sampler = Sampler::new(entries, pool, seed, block_size, "t.jsonl").unwrap();
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
    fn shared_hash_ids_share_exactly_their_blocks() {
        let trace = vec![
            entry(1, 0.0, 20, &[1, 2, 3]),
            entry(2, 250.0, 18, &[1, 2, 4]),
            entry(3, 1250.0, 5, &[3]),
            entry(4, 1300.0, 16, &[9, 2]),
        ];
        let got = sample(trace.clone(), 11, 8, 100);
        // Exact lengths and send times.
        assert_eq!(
            got.iter()
                .map(|s| (ids(s).len(), s.prompt_len))
                .collect::<Vec<_>>(),
            [(20, 20), (18, 18), (5, 5), (16, 16)]
        );
        assert_eq!(
            got.iter().map(|s| s.send_at.unwrap()).collect::<Vec<_>>(),
            [0.0, 0.25, 1.25, 1.3]
        );
        let (a, b, c, d) = (ids(&got[0]), ids(&got[1]), ids(&got[2]), ids(&got[3]));
        // Blocks 1 and 2 shared by the first two, and nothing after them.
        assert_eq!(a[..16], b[..16]);
        assert_ne!(a[16..18], b[16..18]);
        // Hash 3's partial block (5 tokens) is the start of its block in line 1 (4 tokens
        // there): the same tokens where both have them.
        assert_eq!(c[..4], a[16..20]);
        // Hash 2 in second position of line 4 is the same block as in line 1.
        assert_eq!(d[8..16], a[8..16]);
        assert_ne!(d[..8], a[..8]);
        // Every token comes from the pool; blocks differ from each other.
        assert!(a.iter().all(|&t| (100..5000).contains(&t)));
        assert_ne!(a[..8], a[8..16]);
        // Batches change nothing; another seed changes the tokens, not the sharing.
        let again = sample(trace.clone(), 11, 8, 1);
        assert_eq!(format!("{again:?}"), format!("{got:?}"));
        let other = sample(trace, 12, 8, 100);
        assert_ne!(ids(&other[0]), a);
        assert_eq!(ids(&other[0])[..16], ids(&other[1])[..16]);
    }

    #[test]
    fn lines_short_of_hash_ids_are_filled_with_their_own_blocks() {
        let pool: Vec<u32> = (100..5000).collect();
        let trace = vec![entry(1, 0.0, 20, &[1]), entry(2, 0.0, 20, &[1])];
        let mut sampler = Sampler::new(trace, pool.clone(), 3, 8, "t.jsonl").unwrap();
        let got = sampler.next_batch(10).unwrap();
        assert_eq!(sampler.filled, 2);
        let (a, b) = (ids(&got[0]), ids(&got[1]));
        assert_eq!((a.len(), b.len()), (20, 20));
        assert_eq!(a[..8], b[..8]);
        assert_ne!(a[8..], b[8..]);
        let bad = Sampler::new(vec![entry(4, 0.0, -1, &[])], pool, 3, 8, "t.jsonl");
        assert!(matches!(
            bad,
            Err(PluginError::InvalidInput(m)) if m == "t.jsonl:4: \"input_length\" must be >= 0, got -1"
        ));
    }

    #[test]
    fn blocks_are_numpys_draws() {
        // default_rng((5 << 64) | fnv1a64("7")).integers(0, 4900, 6) + 100
        let mut want = Generator::new((5u128 << 64) | u128::from(fnv1a64("7")));
        let want: Vec<u32> = want
            .integers(0, 4900, 6)
            .into_iter()
            .map(|i| i as u32 + 100)
            .collect();
        let mut got = Vec::new();
        block("7", 5, &(100..5000).collect::<Vec<u32>>(), 6, &mut got);
        assert_eq!(got, want);
        assert_eq!(fnv1a64(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64("a"), 0xaf63_dc4c_8601_ec8c);
    }
}
