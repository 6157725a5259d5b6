//! The `random-rerank` dataset: vLLM's `--dataset-name random-rerank`
//! (`RandomDatasetForReranking`), the same request set for the same `--seed`, tokenizer
//! and options (see [`sample`] for the algorithm).
//!
//! Each request is one synthetic query and `batch-size` synthetic documents: a
//! [`Prompt::Rerank`](bench_sdk::Prompt) for a reranker (vLLM's `vllm-rerank` backend
//! sends `query` and `documents`), or with `no-reranker` a [`Prompt::Texts`](bench_sdk::Prompt)
//! of the query followed by the documents (embedded together, for models that score by
//! embedding similarity).
//!
//! Options (vLLM's flag in brackets): `input-len` (`--random-input-len`, 1024: a query
//! and one document together), `range-ratio` (`--random-range-ratio`, 0.0), `batch-size`
//! (`--random-batch-size`, 1: documents per request), `no-reranker` (`--no-reranker`).

pub mod sample;

use bench_sdk::options::option;
use bench_sdk::rng::Generator;
use bench_sdk::sampling::HostTokenizer;
use bench_sdk::synthetic::{
    batch_size_option, input_len_option, parse_range_ratio, range_ratio_option, warn_mismatch,
};
use bench_sdk::{
    Dataset, DatasetConfig, DatasetDescription, OptionInfo, OptionReader, PathUse, PluginError,
    PluginInfo, RequestSpec, host,
};

use sample::{NAME, Params, Sampler};

fn options() -> Vec<OptionInfo> {
    vec![
        input_len_option(),
        range_ratio_option(),
        batch_size_option("Documents per request, each scored against the request's query"),
        option(
            "no-reranker",
            "The model does not rerank natively: each request is a batch of texts to embed, \
             the query first, then batch-size - 1 documents",
            Some("false"),
        )
        .flag("no-reranker")
        .switch(),
    ]
}

/// Reads and validates the options (no host call, so it runs natively in tests).
pub fn parse_options(pairs: Vec<(String, String)>) -> Result<Params, PluginError> {
    let mut reader = OptionReader::new(NAME, pairs);
    let defaults = Params::default();
    let input_len = reader.parse_or("input-len", defaults.input_len)?;
    let (input_range_ratio, output_range_ratio) = match reader.string("range-ratio") {
        None => (defaults.input_range_ratio, defaults.output_range_ratio),
        Some(text) => parse_range_ratio(NAME, &text)?,
    };
    let batch_size: u32 = reader.parse_or("batch-size", defaults.batch_size)?;
    let reranker = !reader.flag("no-reranker", false)?;
    reader.finish(&options())?;
    if batch_size == 0 {
        return Err(PluginError::InvalidConfig(format!(
            "{NAME}: option batch-size must be at least 1"
        )));
    }
    Ok(Params {
        input_len,
        input_range_ratio,
        output_range_ratio,
        batch_size,
        reranker,
    })
}

/// The request source: vLLM's sampler, run a batch per host call.
pub struct RandomRerankDataset {
    sampler: Sampler,
}

impl Dataset for RandomRerankDataset {
    fn describe() -> DatasetDescription {
        // No dataset file; no output to generate, so no EOS rule; the prompts are not
        // text (vLLM re-tokenises text prompts only).
        DatasetDescription::new(PluginInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "A synthetic query and documents per request, for rerank and \
                          embedding benchmarks, identical to vLLM's `--dataset-name \
                          random-rerank` for the same seed, tokenizer and options"
                .into(),
            options: options(),
        })
        .path(PathUse::Refused)
    }

    fn open(config: DatasetConfig) -> Result<Self, PluginError> {
        let params = parse_options(config.options)?;
        let rng = Generator::new(u128::from(host::run_seed()));
        let sampler = Sampler::new(&HostTokenizer, rng, config.num_requests as usize, &params)?;
        Ok(RandomRerankDataset { sampler })
    }

    fn size_hint(&self) -> Option<u32> {
        u32::try_from(self.sampler.size()).ok()
    }

    fn next_batch(&mut self, max: u32) -> Result<Vec<RequestSpec>, PluginError> {
        let batch = self.sampler.next_batch(&HostTokenizer, max as usize)?;
        if !batch.is_empty() && self.sampler.remaining() == 0 {
            warn_mismatch(NAME, "all prompts together", self.sampler.token_mismatch);
        }
        Ok(batch)
    }
}

bench_sdk::export_dataset!(RandomRerankDataset);

#[cfg(test)]
mod tests {
    use super::*;

    use bench_sdk::options::pairs as opts;

    #[test]
    fn options_are_read_with_vllms_defaults() {
        assert_eq!(parse_options(vec![]).unwrap(), Params::default());
        let p = parse_options(opts(&[
            ("input-len", "64"),
            ("range-ratio", "0.25"),
            ("batch-size", "8"),
            ("no-reranker", "true"),
        ]))
        .unwrap();
        assert_eq!(
            p,
            Params {
                input_len: 64,
                input_range_ratio: 0.25,
                output_range_ratio: 0.25,
                batch_size: 8,
                reranker: false,
            }
        );
        for (pairs, needle) in [
            (
                opts(&[("output-len", "5")]),
                "unknown option \"output-len\"",
            ),
            (opts(&[("range-ratio", "1.5")]), "must be in [0, 1)"),
            (opts(&[("batch-size", "0")]), "at least 1"),
            (opts(&[("no-reranker", "maybe")]), "expected true or false"),
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
