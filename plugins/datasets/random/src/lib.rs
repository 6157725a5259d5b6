//! The `random` dataset: vLLM's `--dataset-name random`, the same request set for the
//! same `--seed`, tokenizer and options (see [`sample`] for the algorithm).
//!
//! Options (vLLM's flag in brackets): `input-len` (`--random-input-len`, 1024),
//! `output-len` (`--random-output-len`, 128), `range-ratio` (`--random-range-ratio`,
//! 0.0; a number, or `{"input": r, "output": r}` for separate ratios), `prefix-len`
//! (`--random-prefix-len`, 0), `batch-size` (`--random-batch-size`, 1: prompts per
//! request, vLLM's batched inputs for embedding benchmarks).

pub mod sample;

use bench_sdk::rng::Generator;
use bench_sdk::sampling::HostTokenizer;
use bench_sdk::synthetic::{TextParams, batch_size_option, warn_mismatch};
use bench_sdk::{
    Dataset, DatasetConfig, DatasetDescription, OptionInfo, OptionReader, PathUse, PluginError,
    PluginInfo, RequestSpec, host,
};

use sample::{NAME, Params, Sampler};

fn options() -> Vec<OptionInfo> {
    let mut options = TextParams::options();
    options.push(batch_size_option(
        "Prompts per request (vLLM's batched inputs for embedding benchmarks): each \
         request carries this many texts, no output length, and the sum of their lengths",
    ));
    options
}

/// Reads and validates the options (no host call, so it runs natively in tests).
pub fn parse_options(pairs: Vec<(String, String)>) -> Result<Params, PluginError> {
    let mut reader = OptionReader::new(NAME, pairs);
    let text = TextParams::read(NAME, &mut reader)?;
    let batch_size: u32 = reader.parse_or("batch-size", 1)?;
    reader.finish(&options())?;
    if batch_size == 0 {
        return Err(PluginError::InvalidConfig(format!(
            "{NAME}: option batch-size must be at least 1"
        )));
    }
    Ok(Params { text, batch_size })
}

/// The request source: vLLM's sampler, run a batch per host call.
pub struct RandomDataset {
    sampler: Sampler,
    total: u32,
}

impl Dataset for RandomDataset {
    fn describe() -> DatasetDescription {
        // vLLM's rules for `random`: no dataset file, EOS ignored on OpenAI-compatible
        // servers, prompts re-tokenised by the server where it can.
        DatasetDescription::new(PluginInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Synthetic prompts of sampled token lengths, identical to vLLM's \
                          `--dataset-name random` for the same seed, tokenizer and options"
                .into(),
            options: options(),
        })
        .path(PathUse::Refused)
        .ignore_eos_by_default()
        .align_to_server_tokenizer()
    }

    fn open(config: DatasetConfig) -> Result<Self, PluginError> {
        let params = parse_options(config.options)?;
        let rng = Generator::new(u128::from(host::run_seed()));
        let sampler = Sampler::new(&HostTokenizer, rng, config.num_requests as usize, &params)?;
        warn_mismatch(NAME, "the shared prefix", sampler.prefix_mismatch());
        Ok(RandomDataset {
            sampler,
            total: Sampler::size(config.num_requests, params.batch_size),
        })
    }

    fn size_hint(&self) -> Option<u32> {
        Some(self.total)
    }

    fn next_batch(&mut self, max: u32) -> Result<Vec<RequestSpec>, PluginError> {
        let batch = self.sampler.next_batch(&HostTokenizer, max as usize)?;
        if !batch.is_empty() && self.sampler.remaining() == 0 {
            warn_mismatch(NAME, "all prompts together", self.sampler.token_mismatch());
        }
        Ok(batch)
    }
}

bench_sdk::export_dataset!(RandomDataset);

#[cfg(test)]
mod tests {
    use super::*;

    use bench_sdk::options::pairs as opts;

    #[test]
    fn defaults_are_vllms() {
        assert_eq!(parse_options(vec![]).unwrap(), Params::default());
        let d = Params::default().text;
        assert_eq!(Params::default().batch_size, 1);
        assert_eq!((d.input_len, d.output_len, d.prefix_len), (1024, 128, 0));
        assert_eq!((d.input_range_ratio, d.output_range_ratio), (0.0, 0.0));
    }

    #[test]
    fn options_are_read() {
        let p = parse_options(opts(&[
            ("input-len", "256"),
            ("output-len", "64"),
            ("range-ratio", "0.5"),
            ("prefix-len", "16"),
            ("batch-size", "4"),
        ]))
        .unwrap();
        assert_eq!(
            p,
            Params {
                text: TextParams {
                    input_len: 256,
                    output_len: 64,
                    input_range_ratio: 0.5,
                    output_range_ratio: 0.5,
                    prefix_len: 16,
                },
                batch_size: 4,
            }
        );
        let p = parse_options(opts(&[(
            "range-ratio",
            r#"{"input": 0.3, "output": "0.5"}"#,
        )]))
        .unwrap();
        assert_eq!(
            (p.text.input_range_ratio, p.text.output_range_ratio),
            (0.3, 0.5)
        );
    }

    #[test]
    fn bad_options_are_config_errors() {
        for (pairs, needle) in [
            (opts(&[("input_len", "5")]), "unknown option \"input_len\""),
            (opts(&[("range-ratio", "1.0")]), "must be in [0, 1)"),
            (opts(&[("range-ratio", "-0.1")]), "must be in [0, 1)"),
            (opts(&[("range-ratio", "nan")]), "must be in [0, 1)"),
            (opts(&[("range-ratio", r#"{"input": 0.3}"#)]), "needs both"),
            (
                opts(&[("range-ratio", "wide")]),
                "expected a number or a JSON object",
            ),
            (opts(&[("prefix-len", "-1")]), "prefix-len"),
            (opts(&[("output-len", "x")]), "output-len"),
            (
                opts(&[("batch-size", "0")]),
                "batch-size must be at least 1",
            ),
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
