//! The `prefix_repetition` dataset: vLLM's `--dataset-name prefix_repetition`, random
//! prompts of which groups share a random prefix (to exercise a server's prefix cache),
//! the same request set as vLLM for the same `--seed`, tokenizer and options (see
//! [`sample`] for the algorithm).
//!
//! Options (vLLM's flag in brackets): `prefix-len` (`--prefix-repetition-prefix-len`,
//! 256), `suffix-len` (`--prefix-repetition-suffix-len`, 256), `num-prefixes`
//! (`--prefix-repetition-num-prefixes`, 10), `output-len`
//! (`--prefix-repetition-output-len`, 128; also `--output-len`), `disable-shuffle`
//! (`--disable-shuffle`), `no-oversample` (`--no-oversample`, accepted and without
//! effect, as in vLLM: the dataset never oversamples).

pub mod sample;

use bench_sdk::options::option;
use bench_sdk::sampling::{HostTokenizer, SampleFlags};
use bench_sdk::{
    Dataset, DatasetConfig, DatasetDescription, OptionInfo, OptionReader, PathUse, PluginError,
    PluginInfo, RequestSpec, SharedFlag, host,
};

use sample::{Params, Sampler};

const NAME: &str = "prefix_repetition";

fn options() -> Vec<OptionInfo> {
    let mut options = vec![
        option(
            "prefix-len",
            "Tokens of each random prefix, shared by its group of prompts",
            Some("256"),
        )
        .flag("prefix-repetition-prefix-len")
        .count(),
        option(
            "suffix-len",
            "Tokens of the random suffix after the prefix, one per prompt",
            Some("256"),
        )
        .flag("prefix-repetition-suffix-len")
        .count(),
        option(
            "num-prefixes",
            "How many prefixes; each starts num-prompts / num-prefixes (rounded down) prompts",
            Some("10"),
        )
        .flag("prefix-repetition-num-prefixes")
        .count(),
        option("output-len", "Output tokens per request", Some("128"))
            .flag("prefix-repetition-output-len")
            .count()
            .shared(SharedFlag::OutputLen),
    ];
    let [shuffle, mut oversample] = SampleFlags::options();
    oversample.description = "Accepted as vLLM does and without effect: the dataset makes \
                              num-prefixes * (num-prompts / num-prefixes) requests and never \
                              oversamples"
        .into();
    options.push(shuffle);
    options.push(oversample);
    options
}

/// Reads and validates the options (no host call, so it runs natively in tests).
pub fn parse_options(pairs: Vec<(String, String)>) -> Result<Params, PluginError> {
    let mut reader = OptionReader::new(NAME, pairs);
    let d = Params::default();
    let params = Params {
        prefix_len: reader.parse_or("prefix-len", d.prefix_len)?,
        suffix_len: reader.parse_or("suffix-len", d.suffix_len)?,
        num_prefixes: reader.parse_or("num-prefixes", d.num_prefixes)?,
        output_len: reader.parse_or("output-len", d.output_len)?,
        disable_shuffle: SampleFlags::read(&mut reader)?.disable_shuffle,
    };
    reader.finish(&options())?;
    if params.num_prefixes == 0 {
        return Err(PluginError::InvalidConfig(format!(
            "{NAME}: option num-prefixes must be at least 1"
        )));
    }
    Ok(params)
}

/// The request source: vLLM's sampler; every request is made at the first call (vLLM
/// shuffles the finished list), then handed out in batches.
pub struct PrefixRepetitionDataset {
    sampler: Sampler,
}

impl Dataset for PrefixRepetitionDataset {
    fn describe() -> DatasetDescription {
        // vLLM's rules for `prefix_repetition`: no dataset file, prompts re-tokenised by
        // the server where it can; unlike `random`, vLLM leaves EOS alone.
        DatasetDescription::new(PluginInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Random prompts in groups sharing a random prefix, identical to \
                          vLLM's `--dataset-name prefix_repetition` for the same seed, \
                          tokenizer and options"
                .into(),
            options: options(),
        })
        .path(PathUse::Refused)
        .align_to_server_tokenizer()
    }

    fn open(config: DatasetConfig) -> Result<Self, PluginError> {
        let params = parse_options(config.options)?;
        let sampler = Sampler::new(host::run_seed(), config.num_requests as usize, params)?;
        if sampler.total() < config.num_requests as usize {
            // vLLM makes the same number, silently.
            host::log_warn(&format!(
                "{NAME}: {} requests are made, not {}: each of the {} prefixes starts \
                 num-prompts / num-prefixes (rounded down) prompts",
                sampler.total(),
                config.num_requests,
                sampler.num_prefixes()
            ));
        }
        Ok(PrefixRepetitionDataset { sampler })
    }

    fn size_hint(&self) -> Option<u32> {
        u32::try_from(self.sampler.total()).ok()
    }

    fn next_batch(&mut self, max: u32) -> Result<Vec<RequestSpec>, PluginError> {
        let first = !self.sampler.started();
        let batch = self.sampler.next_batch(&HostTokenizer, max as usize)?;
        if first && self.sampler.token_mismatch != 0 {
            let mismatch = self.sampler.token_mismatch;
            let sign = if mismatch > 0 { "more" } else { "fewer" };
            host::log_warn(&format!(
                "{NAME}: the prompts re-encoded to {} {sign} tokens than asked for in all \
                 (decoding and re-encoding random tokens is not always length-preserving; \
                 vLLM shows the same)",
                mismatch.unsigned_abs()
            ));
        }
        Ok(batch)
    }
}

bench_sdk::export_dataset!(PrefixRepetitionDataset);

#[cfg(test)]
mod tests {
    use super::*;

    use bench_sdk::options::pairs as opts;

    #[test]
    fn defaults_are_vllms() {
        let p = parse_options(vec![]).unwrap();
        assert_eq!(p, Params::default());
        assert_eq!(
            (p.prefix_len, p.suffix_len, p.num_prefixes, p.output_len),
            (256, 256, 10, 128)
        );
        assert!(!p.disable_shuffle);
    }

    #[test]
    fn options_are_read() {
        let p = parse_options(opts(&[
            ("prefix-len", "64"),
            ("suffix-len", "32"),
            ("num-prefixes", "4"),
            ("output-len", "16"),
            ("disable-shuffle", "true"),
            ("no-oversample", "true"),
        ]))
        .unwrap();
        assert_eq!(
            p,
            Params {
                prefix_len: 64,
                suffix_len: 32,
                num_prefixes: 4,
                output_len: 16,
                disable_shuffle: true,
            }
        );
    }

    #[test]
    fn bad_options_are_config_errors() {
        for (pairs, needle) in [
            (
                opts(&[("prefix_len", "5")]),
                "unknown option \"prefix_len\"",
            ),
            (opts(&[("num-prefixes", "0")]), "at least 1"),
            (opts(&[("suffix-len", "-1")]), "suffix-len"),
            (opts(&[("output-len", "many")]), "output-len"),
        ] {
            match parse_options(pairs) {
                Err(PluginError::InvalidConfig(m)) => {
                    assert!(m.contains(needle), "{m:?} lacks {needle:?}")
                }
                other => panic!("expected a config error containing {needle:?}, got {other:?}"),
            }
        }
    }
}
