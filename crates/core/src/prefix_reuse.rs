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
use std::hash::{BuildHasher, Hasher};

use anyhow::Result;

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

/// Counts the reuse of `prompts` (token ids, in send order) in blocks of `block_size`.
pub fn of_token_ids<'a>(
    prompts: impl IntoIterator<Item = &'a [u32]>,
    block_size: usize,
) -> PrefixReuse {
    assert!(block_size > 0, "a block holds at least one token");
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    let mut reuse = PrefixReuse {
        block_size,
        ..PrefixReuse::default()
    };
    // Two independent 64-bit chains (different keys): a false hit needs both to collide.
    let states = [std::hash::RandomState::new(), std::hash::RandomState::new()];
    for ids in prompts {
        reuse.prompts += 1;
        let mut chain = (0u64, 0u64);
        for block in ids.chunks_exact(block_size) {
            let key = |state: &std::hash::RandomState, prev: u64| {
                let mut h = state.build_hasher();
                h.write_u64(prev);
                for &id in block {
                    h.write_u32(id);
                }
                h.finish()
            };
            chain = (key(&states[0], chain.0), key(&states[1], chain.1));
            reuse.blocks += 1;
            if !seen.insert(chain) {
                reuse.reused_blocks += 1;
            }
        }
    }
    reuse
}

/// The reuse of `prompts` (in send order; `None` entries are skipped), text encoded with
/// `tokenizer`. Texts are encoded in parallel in one batch.
pub fn of_prompts(
    prompts: &[&Prompt],
    tokenizer: &Tokenizer,
    block_size: usize,
) -> Result<PrefixReuse> {
    enum Ids<'a> {
        Given(&'a [u32]),
        Text(usize),
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
            Prompt::Texts(_) | Prompt::Rerank(_) => {}
        }
    }
    let encoded = tokenizer.encode_batch(&texts, false)?;
    let ids = order.iter().map(|o| match o {
        Ids::Given(ids) => *ids,
        Ids::Text(i) => encoded[*i].as_slice(),
    });
    Ok(of_token_ids(ids, block_size))
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
}
