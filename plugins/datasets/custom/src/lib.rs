//! The `custom` dataset: vLLM's `--dataset-name custom`, one prompt per line of a JSONL
//! file (`{"prompt": "...", "output_tokens": 12}`), the same request set as vLLM for the
//! same `--seed`, tokenizer and file (see [`sample`]).
//!
//! Needs `--dataset-path` (a `.jsonl` file). Options (vLLM's flag in brackets):
//! `output-len` (`--custom-output-len`, 256; -1 reads each row's `output_tokens`),
//! `skip-chat-template` (`--skip-chat-template`), `disable-shuffle` (`--disable-shuffle`),
//! `no-oversample` (`--no-oversample`).

pub mod sample;

use bench_sdk::options::option;
use bench_sdk::sampling::{HostTokenizer, SampleFlags};
use bench_sdk::{
    Dataset, DatasetConfig, DatasetDescription, OptionInfo, OptionReader, PathUse, PluginError,
    PluginInfo, RequestSpec, SharedFlag, host,
};

use sample::{Params, Sampler};

const NAME: &str = "custom";

fn options() -> Vec<OptionInfo> {
    let mut options = vec![
        option(
            "output-len",
            "Output tokens per request; -1 takes each line's \"output_tokens\"",
            Some("256"),
        )
        .flag("custom-output-len")
        .integer()
        .shared(SharedFlag::OutputLen),
        option(
            "skip-chat-template",
            "Send prompts as they are instead of wrapped in the tokenizer's chat template",
            Some("false"),
        )
        .flag("skip-chat-template")
        .switch(),
    ];
    options.extend(SampleFlags::options());
    options
}

/// Reads and validates the options (no host call, so it runs natively in tests).
pub fn parse_options(pairs: Vec<(String, String)>) -> Result<Params, PluginError> {
    let mut reader = OptionReader::new(NAME, pairs);
    let defaults = Params::default();
    let output_len: i64 = reader.parse_or("output-len", defaults.output_len)?;
    Params::check_output_len(NAME, "output-len", output_len)?;
    let params = Params {
        output_len,
        skip_chat_template: reader.flag("skip-chat-template", defaults.skip_chat_template)?,
        flags: SampleFlags::read(&mut reader)?,
    };
    reader.finish(&options())?;
    Ok(params)
}

/// The request source: vLLM's sampler, run a batch per host call.
pub struct CustomDataset {
    sampler: Sampler,
}

impl Dataset for CustomDataset {
    fn describe() -> DatasetDescription {
        DatasetDescription::new(PluginInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "One prompt per line of a JSONL file ({\"prompt\": ...}, via \
                          --dataset-path), shuffled and templated exactly as vLLM's \
                          `--dataset-name custom`"
                .into(),
            options: options(),
        })
        .path(PathUse::Required)
    }

    fn open(config: DatasetConfig) -> Result<Self, PluginError> {
        let params = parse_options(config.options)?;
        let (path, text) = bench_sdk::custom::read_jsonl_file(NAME, config.path)?;
        let rows = sample::parse(&text, &path)?;
        let n = config.num_requests as usize;
        let sampler = Sampler::new(rows, host::run_seed(), n, params, &path)?;
        Ok(CustomDataset { sampler })
    }

    fn size_hint(&self) -> Option<u32> {
        u32::try_from(self.sampler.total()).ok()
    }

    fn next_batch(&mut self, max: u32) -> Result<Vec<RequestSpec>, PluginError> {
        self.sampler.next_batch(&HostTokenizer, max as usize)
    }
}

bench_sdk::export_dataset!(CustomDataset);

#[cfg(test)]
mod tests {
    use super::*;

    use bench_sdk::options::pairs as opts;
    use sample::OUTPUT_LEN_FROM_DATA;

    #[test]
    fn options_are_read_with_vllms_defaults() {
        assert_eq!(parse_options(vec![]).unwrap(), Params::default());
        assert_eq!(Params::default().output_len, 256);
        let p = parse_options(opts(&[
            ("output-len", "-1"),
            ("skip-chat-template", "true"),
            ("disable-shuffle", "yes"),
            ("no-oversample", "true"),
        ]))
        .unwrap();
        assert_eq!(
            p,
            Params {
                output_len: OUTPUT_LEN_FROM_DATA,
                skip_chat_template: true,
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
            (opts(&[("custom-output-len", "5")]), "unknown option"),
            (opts(&[("output-len", "-2")]), "or -1"),
            (opts(&[("output-len", "5000000000")]), "or -1"),
            (
                opts(&[("skip-chat-template", "perhaps")]),
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
