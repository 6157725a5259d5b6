//! The workload's theoretical prefix-cache hit rate: what an infinite prefix cache with
//! blocks of `block_size` tokens would have served, computed after the run from the
//! prompts the run sent, in the order it sent them.
//!
//! A prompt's full blocks are hashed as a chain (each block's key covers the whole prefix
//! up to its end, as vLLM's block hashes do); a block counts as reused when an earlier
//! prompt had the same key. A partial last block is never cached, as in vLLM. Token-id
//! prompts are counted as they are; text prompts are encoded with the run's tokenizer
//! (in parallel), chat prompts after its chat template (or, without one, their messages'
//! text one after the other). Batches of texts and rerank inputs are not counted: they
//! are no prompt a prefix cache sees as one.
//!
//! Next to the hit rate a server reports, it says how much reuse the workload offered:
//! a server below it evicted, or matched less than the prompts shared.

use std::collections::HashSet;

use anyhow::Result;
use sha2::{Digest, Sha256};

use crate::record::RequestRecord;
use crate::runtime::{ChatMessage, ContentPart, Prompt};
use crate::tokenizer::Tokenizer;

/// vLLM's default KV-cache block size, the default of `--prefix-cache-block-size`.
pub const DEFAULT_BLOCK_SIZE: usize = 16;

/// How much of the workload's prompts an infinite prefix cache would have served.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PrefixReuse {
    pub block_size: usize,
    /// Prompts counted.
    pub prompts: usize,
    /// Their full blocks.
    pub blocks: u64,
    /// Blocks whose whole prefix an earlier prompt had.
    pub reused_blocks: u64,
}

impl PrefixReuse {
    /// Reused over all full blocks; 0 when there were none.
    pub fn hit_rate(&self) -> f64 {
        if self.blocks == 0 {
            0.0
        } else {
            self.reused_blocks as f64 / self.blocks as f64
        }
    }
}

/// The keys of the full blocks of one prompt's token `ids`, as a chain: each key covers
/// the whole prefix up to its block's end. Keys are the first 8 bytes of SHA-256 over the
/// previous key and the block's ids, the same in every process, so that the shards of a
/// run (each with its own prompts) are counted together by `bench merge`.
pub fn block_keys(ids: &[u32], block_size: usize) -> Vec<u64> {
    assert!(block_size > 0, "a block holds at least one token");
    let mut chain = 0u64;
    ids.chunks_exact(block_size)
        .map(|block| {
            let mut hash = Sha256::new();
            hash.update(chain.to_le_bytes());
            for &id in block {
                hash.update(id.to_le_bytes());
            }
            let digest = hash.finalize();
            chain = u64::from_le_bytes(digest[..8].try_into().expect("8 of 32 bytes"));
            chain
        })
        .collect()
}

/// Counts the reuse of prompts given as their [`block_keys`] (in send order).
pub fn of_keys<'a>(prompts: impl IntoIterator<Item = &'a [u64]>, block_size: usize) -> PrefixReuse {
    let mut seen: HashSet<u64> = HashSet::new();
    let mut reuse = PrefixReuse {
        block_size,
        ..PrefixReuse::default()
    };
    for keys in prompts {
        reuse.prompts += 1;
        for &key in keys {
            reuse.blocks += 1;
            if !seen.insert(key) {
                reuse.reused_blocks += 1;
            }
        }
    }
    reuse
}

/// Counts the reuse of `prompts` (token ids, in send order) in blocks of `block_size`.
pub fn of_token_ids<'a>(
    prompts: impl IntoIterator<Item = &'a [u32]>,
    block_size: usize,
) -> PrefixReuse {
    let keys: Vec<Vec<u64>> = prompts
        .into_iter()
        .map(|ids| block_keys(ids, block_size))
        .collect();
    of_keys(keys.iter().map(Vec::as_slice), block_size)
}

/// The reuse of `prompts` (in send order), text encoded with `tokenizer`.
pub fn of_prompts(
    prompts: &[&Prompt],
    tokenizer: &Tokenizer,
    block_size: usize,
) -> Result<PrefixReuse> {
    let keys = keys_of_prompts(prompts, tokenizer, block_size)?;
    Ok(of_keys(
        keys.iter().flatten().map(Vec::as_slice),
        block_size,
    ))
}

/// The [`block_keys`] of each of `prompts`; `None` for a prompt that is not counted (a
/// batch of texts, rerank inputs). Texts are encoded in parallel in one batch.
pub fn keys_of_prompts(
    prompts: &[&Prompt],
    tokenizer: &Tokenizer,
    block_size: usize,
) -> Result<Vec<Option<Vec<u64>>>> {
    enum Ids<'a> {
        Given(&'a [u32]),
        Text(usize),
        Skipped,
    }
    let mut texts: Vec<String> = Vec::new();
    let mut order: Vec<Ids> = Vec::with_capacity(prompts.len());
    for prompt in prompts {
        match prompt {
            Prompt::TokenIds(ids) => order.push(Ids::Given(ids)),
            Prompt::Text(text) => {
                order.push(Ids::Text(texts.len()));
                texts.push(text.clone());
            }
            Prompt::Chat(messages) => {
                order.push(Ids::Text(texts.len()));
                texts.push(chat_text(messages, tokenizer));
            }
            Prompt::Texts(_) | Prompt::Rerank(_) => order.push(Ids::Skipped),
        }
    }
    let encoded = tokenizer.encode_batch(&texts, false)?;
    Ok(order
        .iter()
        .map(|o| match o {
            Ids::Given(ids) => Some(block_keys(ids, block_size)),
            Ids::Text(i) => Some(block_keys(&encoded[*i], block_size)),
            Ids::Skipped => None,
        })
        .collect())
}

/// A chat as the server would see it: the tokenizer's chat template when it has one,
/// else the messages' text parts in order.
fn chat_text(messages: &[ChatMessage], tokenizer: &Tokenizer) -> String {
    let content = |m: &ChatMessage| -> String {
        m.content
            .iter()
            .filter_map(|part| match part {
                ContentPart::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    };
    if tokenizer.has_chat_template() {
        let json: Vec<serde_json::Value> = messages
            .iter()
            .map(|m| serde_json::json!({ "role": m.role, "content": content(m) }))
            .collect();
        if let Ok(text) = tokenizer.apply_chat_template(&json, true) {
            return text;
        }
    }
    let mut text = String::new();
    for m in messages {
        text.push_str(&m.role);
        text.push_str(": ");
        text.push_str(&content(m));
        text.push('\n');
    }
    text
}

/// The workload's theoretical prefix reuse over the requests that were sent, in the order
/// they were sent (ties in workload order), from each one's prompt keys (`keys[i]` is
/// `records[i]`'s). A merge counts the shards' requests the same way.
pub(crate) fn of_records(
    records: &[RequestRecord],
    keys: &[Option<Vec<u64>>],
    block_size: usize,
) -> PrefixReuse {
    let mut sent: Vec<(f64, usize, usize)> = records
        .iter()
        .enumerate()
        .map(|(at, r)| (r.start_time, r.index, at))
        .collect();
    sent.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    of_keys(
        sent.iter()
            .filter_map(|&(_, _, at)| keys.get(at).and_then(Option::as_deref)),
        block_size,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reuse(prompts: &[Vec<u32>], block: usize) -> (u64, u64) {
        let r = of_token_ids(prompts.iter().map(Vec::as_slice), block);
        (r.reused_blocks, r.blocks)
    }

    #[test]
    fn blocks_count_when_their_whole_prefix_was_sent_before() {
        let a: Vec<u32> = (0..40).collect();
        // The same first 32 tokens, then different ones.
        let mut b = a.clone();
        b[35] = 999;
        // Same second block as `a`, different first block: nothing reused.
        let mut c = a.clone();
        c[0] = 999;
        // Shorter than a block.
        let d: Vec<u32> = (0..10).collect();
        // Blocks of 16: a has 2 full blocks (the last 8 tokens are no block).
        assert_eq!(reuse(std::slice::from_ref(&a), 16), (0, 2));
        assert_eq!(reuse(&[a.clone(), a.clone()], 16), (2, 4));
        assert_eq!(reuse(&[a.clone(), b.clone()], 16), (2, 4));
        assert_eq!(reuse(&[a.clone(), c.clone()], 16), (0, 4));
        assert_eq!(reuse(&[a.clone(), d.clone()], 16), (0, 2));
        // Blocks of 8: b differs in its fifth block (tokens 32..40).
        assert_eq!(reuse(&[a.clone(), b.clone()], 8), (4, 10));
        // Order matters: only earlier prompts count.
        let long: Vec<u32> = (0..64).collect();
        assert_eq!(reuse(&[a.clone(), long.clone()], 16), (2, 6));
        assert_eq!(reuse(&[long, a], 16), (2, 6));
        let r = of_token_ids([b.as_slice(), b.as_slice()], 16);
        assert_eq!(r.prompts, 2);
        assert!((r.hit_rate() - 0.5).abs() < 1e-12);
        assert_eq!(PrefixReuse::default().hit_rate(), 0.0);
    }

    #[test]
    fn block_keys_chain_their_prefix_and_are_the_same_in_every_process() {
        let a: Vec<u32> = (0..40).collect();
        let keys = block_keys(&a, 16);
        // SHA-256 as Python's hashlib computes it (no per-process key): a shard and the
        // merge, in different processes, agree.
        assert_eq!(keys, [0x9a713de3f650cd26, 0x6eec156543935886]);
        let mut c = a.clone();
        c[0] = 999;
        assert_ne!(
            keys[1],
            block_keys(&c, 16)[1],
            "the second key covers the first block"
        );
    }
}
