//! The `sharegpt` dataset: vLLM's `--dataset-name sharegpt`, the same request set for the
//! same `--seed`, tokenizer and file (see [`sample`] for the rules).
//!
//! Needs `--dataset-path` (a ShareGPT JSON file). Options (vLLM's flag in brackets):
//! `output-len` (`--sharegpt-output-len`), `disable-shuffle` (`--disable-shuffle`),
//! `no-oversample` (`--no-oversample`).

mod json_array;
pub mod sample;

use bench_sdk::options::option;
use bench_sdk::sampling::{HostTokenizer, SampleFlags};
use bench_sdk::{
    Dataset, DatasetConfig, DatasetDescription, OptionInfo, OptionReader, PathUse, PluginError,
    PluginInfo, RequestSpec, SharedFlag, host,
};

use sample::{Params, Sampler};

const NAME: &str = "sharegpt";

fn options() -> Vec<OptionInfo> {
    let mut options = vec![
        option(
            "output-len",
            "Output tokens per request, replacing the length of each conversation's reply",
            None,
        )
        .flag("sharegpt-output-len")
        .count()
        .shared(SharedFlag::OutputLen),
    ];
    options.extend(SampleFlags::options());
    options
}

/// Reads and validates the options (no host call, so it runs natively in tests).
pub fn parse_options(pairs: Vec<(String, String)>) -> Result<Params, PluginError> {
    let mut reader = OptionReader::new(NAME, pairs);
    let params = Params {
        output_len: reader.parse("output-len")?,
        flags: SampleFlags::read(&mut reader)?,
    };
    reader.finish(&options())?;
    Ok(params)
}

/// The request source: vLLM's sampler, run a batch per host call.
pub struct ShareGptDataset {
    sampler: Sampler,
    /// vLLM makes exactly the number asked for, unless told not to oversample.
    size_hint: Option<u32>,
}

impl Dataset for ShareGptDataset {
    fn describe() -> DatasetDescription {
        DatasetDescription::new(PluginInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "First user turn and reply of ShareGPT conversations (a JSON file via \
                          --dataset-path), filtered, shuffled and oversampled exactly as vLLM's \
                          `--dataset-name sharegpt`"
                .into(),
            options: options(),
        })
        .path(PathUse::Required)
    }

    fn open(config: DatasetConfig) -> Result<Self, PluginError> {
        let params = parse_options(config.options)?;
        let path = config.path.ok_or_else(|| {
            PluginError::InvalidConfig(format!(
                "{NAME}: needs --dataset-path (a ShareGPT JSON file)"
            ))
        })?;
        let conversations = sample::load(&path)?;
        let size_hint = (!params.flags.no_oversample).then_some(config.num_requests);
        let n = config.num_requests as usize;
        let sampler = Sampler::new(conversations, host::run_seed(), n, params, &path);
        Ok(ShareGptDataset { sampler, size_hint })
    }

    fn size_hint(&self) -> Option<u32> {
        self.size_hint
    }

    fn next_batch(&mut self, max: u32) -> Result<Vec<RequestSpec>, PluginError> {
        self.sampler.next_batch(&HostTokenizer, max as usize)
    }
}

bench_sdk::export_dataset!(ShareGptDataset);

#[cfg(test)]
mod tests {
    use super::*;

    use bench_sdk::options::pairs as opts;

    #[test]
    fn options_are_read_with_vllms_defaults() {
        assert_eq!(parse_options(vec![]).unwrap(), Params::default());
        let p = parse_options(opts(&[
            ("output-len", "100"),
            ("disable-shuffle", "true"),
            ("no-oversample", "1"),
        ]))
        .unwrap();
        assert_eq!(
            p,
            Params {
                output_len: Some(100),
                flags: SampleFlags {
                    disable_shuffle: true,
                    no_oversample: true,
                },
            }
        );
    }

    #[test]
    fn bad_options_are_config_errors() {
        for (pairs, needle) in [
            (opts(&[("sharegpt-output-len", "5")]), "unknown option"),
            (opts(&[("output-len", "-1")]), "output-len"),
            (
                opts(&[("disable-shuffle", "maybe")]),
                "expected true or false",
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
