//! The `mooncake` dataset (beyond vLLM): replays a Mooncake trace (JSON Lines of
//! `{"timestamp": ms, "input_length": n, "output_length": m, "hash_ids": [...]}`) at its
//! times, with token-id prompts of exactly `input_length` tokens in which lines that share a
//! hash id share that block's tokens (see [`sample`]), so the server's prefix cache sees the
//! trace's reuse. Logs the trace's theoretical prefix-cache hit rate (an infinite cache).
//!
//! Needs `--dataset-path`. Option: `block-size` (`--mooncake-block-size`, 512 tokens per
//! hash id). The first `--num-prompts` lines are replayed in order; `--time-scale` scales
//! the times. Prompts are token ids, for a completions backend (`openai`); EOS is ignored
//! by default so that each answer has the trace's output length.

pub mod sample;

use bench_sdk::options::option;
use bench_sdk::trace::{self, Labels};
use bench_sdk::{
    Dataset, DatasetConfig, DatasetDescription, OptionInfo, OptionReader, PathUse, PluginError,
    PluginInfo, RequestSpec, host,
};

use sample::{DEFAULT_BLOCK_SIZE, Sampler};

const NAME: &str = "mooncake";

fn options() -> Vec<OptionInfo> {
    vec![
        option(
            "block-size",
            "Tokens each hash id stands for (Mooncake's traces: 512)",
            Some("512"),
        )
        .flag("mooncake-block-size")
        .count(),
    ]
}

/// Reads and validates the options: the block size.
pub fn parse_options(pairs: Vec<(String, String)>) -> Result<usize, PluginError> {
    let mut reader = OptionReader::new(NAME, pairs);
    let block_size: usize = reader.parse_or("block-size", DEFAULT_BLOCK_SIZE)?;
    if block_size == 0 {
        return Err(PluginError::InvalidConfig(format!(
            "{NAME}: option block-size=0: expected at least 1 token per hash id"
        )));
    }
    reader.finish(&options())?;
    Ok(block_size)
}

/// The hit-rate line, e.g. "... 62.5% (5 of 8 prompt blocks ...)".
pub fn hit_rate_message(hits: u64, blocks: u64, block_size: usize) -> String {
    let rate = if blocks == 0 {
        0.0
    } else {
        100.0 * hits as f64 / blocks as f64
    };
    format!(
        "{NAME}: theoretical prefix-cache hit rate {rate:.1}% ({hits} of {blocks} prompt blocks \
         of {block_size} tokens have a hash id seen earlier in the trace; infinite cache)"
    )
}

/// The request source: the trace's first lines, a batch per host call.
pub struct MooncakeDataset {
    sampler: Sampler,
}

impl Dataset for MooncakeDataset {
    fn describe() -> DatasetDescription {
        DatasetDescription::new(PluginInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "A Mooncake trace (timestamp in ms, input_length, output_length, \
                          hash_ids) replayed at its times, with token-id prompts that share \
                          exactly the blocks whose hash ids they share"
                .into(),
            options: options(),
        })
        .path(PathUse::Required)
        .ignore_eos_by_default()
    }

    fn open(config: DatasetConfig) -> Result<Self, PluginError> {
        let block_size = parse_options(config.options)?;
        let path = config.path.ok_or_else(|| {
            PluginError::InvalidConfig(format!("{NAME}: needs --dataset-path (a .jsonl trace)"))
        })?;
        let asked = config.num_requests as usize;
        let entries = trace::read(&path, &Labels::default(), (asked > 0).then_some(asked))?;
        if entries.len() < asked {
            host::log_warn(&format!(
                "{NAME}: {path} has {} requests, fewer than the {asked} asked for; replaying \
                 them all",
                entries.len()
            ));
        }
        let (hits, blocks) = trace::prefix_hit_rate(&entries, block_size);
        host::log_info(&hit_rate_message(hits, blocks, block_size));
        let pool = trace::token_pool(host::vocab_size(true), &host::special_token_ids());
        let sampler = Sampler::new(entries, pool, host::run_seed(), block_size, &path)?;
        Ok(MooncakeDataset { sampler })
    }

    fn size_hint(&self) -> Option<u32> {
        u32::try_from(self.sampler.total()).ok()
    }

    fn next_batch(&mut self, max: u32) -> Result<Vec<RequestSpec>, PluginError> {
        let before = self.sampler.filled;
        let batch = self.sampler.next_batch(max as usize)?;
        if self.sampler.filled > before {
            host::log_warn(&format!(
                "{NAME}: {} more lines whose hash_ids cover fewer than input_length tokens \
                 were filled up with blocks of their own",
                self.sampler.filled - before
            ));
        }
        Ok(batch)
    }
}

bench_sdk::export_dataset!(MooncakeDataset);

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::options::pairs as opts;

    #[test]
    fn options() {
        assert_eq!(parse_options(vec![]).unwrap(), 512);
        assert_eq!(parse_options(opts(&[("block-size", "16")])).unwrap(), 16);
        for (pairs, needle) in [
            (opts(&[("block-size", "0")]), "at least 1"),
            (opts(&[("block-size", "-3")]), "block-size=\"-3\""),
            (opts(&[("chunk", "3")]), "unknown option"),
        ] {
            match parse_options(pairs) {
                Err(PluginError::InvalidConfig(m)) => assert!(m.contains(needle), "{m}"),
                other => panic!("expected {needle:?}, got {other:?}"),
            }
        }
    }

    #[test]
    fn hit_rate_message_says_the_share() {
        assert_eq!(
            hit_rate_message(5, 8, 512),
            "mooncake: theoretical prefix-cache hit rate 62.5% (5 of 8 prompt blocks of 512 \
             tokens have a hash id seen earlier in the trace; infinite cache)"
        );
        assert!(hit_rate_message(0, 0, 512).contains(" 0.0% "));
    }
}
