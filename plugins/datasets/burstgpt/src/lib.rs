//! The `burstgpt` dataset: vLLM's `--dataset-name burstgpt`. Reads a BurstGPT trace
//! (CSV: `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`), keeps
//! the GPT-4 rows that got a response, samples rows as pandas' `DataFrame.sample` does
//! with the seed, and makes a synthetic prompt of each row's request length; the same
//! request set as vLLM for the same `--seed`, tokenizer and file (see [`sample`]).
//!
//! Needs `--dataset-path` (a BurstGPT CSV file); no options of its own, as in vLLM.

pub mod sample;

use bench_sdk::sampling::HostTokenizer;
use bench_sdk::{
    Dataset, DatasetConfig, DatasetDescription, OptionReader, PathUse, PluginError, PluginInfo,
    RequestSpec, host,
};

use sample::Sampler;

const NAME: &str = "burstgpt";

/// The request source: vLLM's sampler, run a batch per host call.
pub struct BurstGptDataset {
    sampler: Sampler,
}

impl Dataset for BurstGptDataset {
    fn describe() -> DatasetDescription {
        DatasetDescription::new(PluginInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Synthetic prompts of the request and response lengths of a BurstGPT \
                          trace's GPT-4 rows (--dataset-path: the CSV), identical to vLLM's \
                          `--dataset-name burstgpt` for the same seed, tokenizer and file"
                .into(),
            options: Vec::new(),
        })
        .path(PathUse::Required)
    }

    fn open(config: DatasetConfig) -> Result<Self, PluginError> {
        OptionReader::new(NAME, config.options).finish(&[])?;
        let path = config.path.ok_or_else(|| {
            PluginError::InvalidConfig(format!(
                "{NAME}: needs --dataset-path (a BurstGPT CSV file)"
            ))
        })?;
        let bytes = std::fs::read(&path)
            .map_err(|e| PluginError::InvalidConfig(format!("{NAME}: cannot read {path}: {e}")))?;
        let trace = sample::parse(&bytes, &path)?;
        // vLLM drops these rows silently; they are shown so that a trace that is mostly
        // left out does not go unnoticed.
        if trace.rows.len() < trace.total {
            host::log_warn(&format!(
                "{NAME}: {path}: {} of {} rows kept (GPT-4 with a response); {} rows of other \
             models and {} failed GPT-4 requests (0 response tokens) left out, as vLLM does",
                trace.rows.len(),
                trace.total,
                trace.other_models,
                trace.failed
            ));
        }
        let sampler = Sampler::new(
            trace.rows,
            host::run_seed(),
            config.num_requests as usize,
            &path,
        )?;
        Ok(BurstGptDataset { sampler })
    }

    fn size_hint(&self) -> Option<u32> {
        u32::try_from(self.sampler.total()).ok()
    }

    fn next_batch(&mut self, max: u32) -> Result<Vec<RequestSpec>, PluginError> {
        self.sampler.next_batch(&HostTokenizer, max as usize)
    }
}

bench_sdk::export_dataset!(BurstGptDataset);
