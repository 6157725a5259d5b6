//! The `sonnet` dataset: vLLM's `SonnetDataset` (`--dataset-name sonnet` of
//! `benchmark_serving.py`, kept in the newest vLLM as `vllm/benchmarks/datasets/sonnet.py`):
//! a fixed instruction, the first lines of a poem file as a shared prefix, then random
//! lines, wrapped in the chat template; the same request set as vLLM for the same
//! `--seed`, tokenizer and options (see [`sample`]).
//!
//! Needs `--dataset-path` (vLLM's `benchmarks/sonnet.txt`, one poem line per line) and a
//! tokenizer with a chat template. Options (vLLM's flag in brackets): `input-len`
//! (`--sonnet-input-len`, 550), `output-len` (`--sonnet-output-len`, 150), `prefix-len`
//! (`--sonnet-prefix-len`, 200), `skip-chat-template` (`--skip-chat-template`).

pub mod sample;

use bench_sdk::options::option;
use bench_sdk::sampling::HostTokenizer;
use bench_sdk::{
    Dataset, DatasetConfig, DatasetDescription, OptionInfo, OptionReader, PathUse, PluginError,
    PluginInfo, RequestSpec, host,
};

use sample::{Params, Sampler};

const NAME: &str = "sonnet";

fn options() -> Vec<OptionInfo> {
    vec![
        option(
            "input-len",
            "The most tokens a templated prompt may have; prompts over it are drawn again",
            Some("550"),
        )
        .flag("sonnet-input-len")
        .count(),
        option("output-len", "Output tokens per request", Some("150"))
            .flag("sonnet-output-len")
            .count(),
        option(
            "prefix-len",
            "Tokens of the shared prefix (the instruction and the file's first lines)",
            Some("200"),
        )
        .flag("sonnet-prefix-len")
        .count(),
        option(
            "skip-chat-template",
            "Send the prompt without the chat template (what vLLM sends to --backend \
             openai-chat, whose server applies it); lengths are still counted templated, \
             as vLLM does",
            Some("false"),
        )
        .flag("skip-chat-template")
        .switch(),
    ]
}

/// Reads and validates the options (no host call, so it runs natively in tests).
pub fn parse_options(pairs: Vec<(String, String)>) -> Result<Params, PluginError> {
    let mut reader = OptionReader::new(NAME, pairs);
    let d = Params::default();
    let params = Params {
        input_len: reader.parse_or("input-len", d.input_len)?,
        output_len: reader.parse_or("output-len", d.output_len)?,
        prefix_len: reader.parse_or("prefix-len", d.prefix_len)?,
        skip_chat_template: reader.flag("skip-chat-template", d.skip_chat_template)?,
    };
    reader.finish(&options())?;
    Ok(params)
}

/// The request source: vLLM's sampler, run a batch per host call.
pub struct SonnetDataset {
    sampler: Sampler,
    total: u32,
    reported: bool,
}

impl Dataset for SonnetDataset {
    fn describe() -> DatasetDescription {
        DatasetDescription::new(PluginInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Random lines of a poem file after a shared prefix, in the chat \
                          template, identical to vLLM's sonnet dataset for the same seed, \
                          tokenizer and options (--dataset-path: vLLM's sonnet.txt)"
                .into(),
            options: options(),
        })
        .path(PathUse::Required)
    }

    fn open(config: DatasetConfig) -> Result<Self, PluginError> {
        let params = parse_options(config.options)?;
        let path = config.path.ok_or_else(|| {
            PluginError::InvalidConfig(format!(
                "{NAME}: needs --dataset-path (a text file of poem lines, e.g. vLLM's \
                 benchmarks/sonnet.txt)"
            ))
        })?;
        let bytes = std::fs::read(&path)
            .map_err(|e| PluginError::InvalidConfig(format!("{NAME}: cannot read {path}: {e}")))?;
        let text = sample::decode_utf8(&bytes, &path)?;
        let lines = sample::read_lines(&text);
        let sampler = Sampler::new(
            &HostTokenizer,
            lines,
            host::run_seed(),
            config.num_requests as usize,
            params,
            &path,
        )?;
        Ok(SonnetDataset {
            sampler,
            total: config.num_requests,
            reported: false,
        })
    }

    fn size_hint(&self) -> Option<u32> {
        Some(self.total)
    }

    fn next_batch(&mut self, max: u32) -> Result<Vec<RequestSpec>, PluginError> {
        let batch = self.sampler.next_batch(&HostTokenizer, max as usize)?;
        if batch.is_empty() && !self.reported {
            self.reported = true;
            let rejected = self.sampler.rejected;
            if rejected > 0 {
                host::log_warn(&format!(
                    "{NAME}: {rejected} drawn prompts were longer than input-len ({}) and drawn \
                     again, as vLLM does",
                    self.sampler.input_len()
                ));
            }
        }
        Ok(batch)
    }
}

bench_sdk::export_dataset!(SonnetDataset);

#[cfg(test)]
mod tests {
    use super::*;

    use bench_sdk::options::pairs as opts;

    #[test]
    fn options_are_read_with_vllms_defaults() {
        let p = parse_options(vec![]).unwrap();
        assert_eq!(p, Params::default());
        assert_eq!((p.input_len, p.output_len, p.prefix_len), (550, 150, 200));
        assert!(!p.skip_chat_template);
        let p = parse_options(opts(&[
            ("input-len", "300"),
            ("output-len", "5"),
            ("prefix-len", "0"),
            ("skip-chat-template", "true"),
        ]))
        .unwrap();
        assert_eq!(
            p,
            Params {
                input_len: 300,
                output_len: 5,
                prefix_len: 0,
                skip_chat_template: true
            }
        );
        for (pairs, needle) in [
            (opts(&[("input_len", "5")]), "unknown option \"input_len\""),
            (opts(&[("prefix-len", "-1")]), "prefix-len"),
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
