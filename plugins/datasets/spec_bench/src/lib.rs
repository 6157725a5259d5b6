//! The `spec_bench` dataset: vLLM's `--dataset-name spec_bench` (`SpecBench`, a
//! `CustomDataset`): the first turn of each question of Spec-Bench's `question.jsonl`
//! (`{"question_id", "category", "turns": [...]}`), optionally of one category, in the
//! chat template, sampled as the SDK's [`bench_sdk::custom`] does (see [`sample`]).
//!
//! Needs `--dataset-path` (`question.jsonl`). Options (vLLM's flag in brackets):
//! `output-len` (`--spec-bench-output-len`, 256; also `--output-len`), `category`
//! (`--spec-bench-category`, all), `disable-shuffle`, `no-oversample`.
//!
//! vLLM 0.32 builds `SpecBench` without the run's seed, so its shuffle always uses seed 0;
//! here `--seed` is honoured (seed 0, vLLM's default, gives vLLM's very request set).

pub mod sample;

use bench_sdk::custom::{CustomParams, CustomSampler};
use bench_sdk::options::option;
use bench_sdk::sampling::{HostTokenizer, SampleFlags};
use bench_sdk::{
    Dataset, DatasetConfig, DatasetDescription, OptionInfo, OptionReader, PathUse, PluginError,
    PluginInfo, RequestSpec, SharedFlag, host,
};

use sample::Params;

const NAME: &str = "spec_bench";

fn options() -> Vec<OptionInfo> {
    let mut options = vec![
        option("output-len", "Output tokens per request", Some("256"))
            .flag("spec-bench-output-len")
            .integer()
            .shared(SharedFlag::OutputLen),
        option(
            "category",
            "Only the questions of this category (translation, summarization, qa, \
             math_reasoning, rag, writing, roleplay, ...); all when not given",
            None,
        )
        .flag("spec-bench-category"),
    ];
    options.extend(SampleFlags::options());
    options
}

/// Reads and validates the options (no host call, so it runs natively in tests).
pub fn parse_options(pairs: Vec<(String, String)>) -> Result<Params, PluginError> {
    let mut reader = OptionReader::new(NAME, pairs);
    let output_len: i64 = reader.parse_or("output-len", 256)?;
    CustomParams::check_output_len(NAME, "output-len", output_len)?;
    // vLLM treats an empty category as none.
    let category = reader.string("category").filter(|c| !c.is_empty());
    let flags = SampleFlags::read(&mut reader)?;
    reader.finish(&options())?;
    Ok(Params {
        category,
        custom: CustomParams {
            output_len,
            // vLLM always applies the template to spec_bench prompts.
            skip_chat_template: false,
            flags,
        },
    })
}

/// The request source: the SDK's `CustomDataset` sampler on the questions.
pub struct SpecBenchDataset {
    sampler: CustomSampler,
}

impl Dataset for SpecBenchDataset {
    fn describe() -> DatasetDescription {
        DatasetDescription::new(PluginInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "The first turn of each Spec-Bench question (--dataset-path: \
                          question.jsonl), in the chat template, sampled as vLLM's \
                          `--dataset-name spec_bench`"
                .into(),
            options: options(),
        })
        .path(PathUse::Required)
    }

    fn open(config: DatasetConfig) -> Result<Self, PluginError> {
        let params = parse_options(config.options)?;
        let path = config.path.ok_or_else(|| {
            PluginError::InvalidConfig(format!(
                "{NAME}: needs --dataset-path (Spec-Bench's data/spec_bench/question.jsonl)"
            ))
        })?;
        let text = std::fs::read_to_string(&path)
            .map_err(|e| PluginError::InvalidConfig(format!("{NAME}: cannot read {path}: {e}")))?;
        let questions = sample::parse(&text, &path, params.category.as_deref())?;
        if let Some(category) = &params.category {
            host::log_info(&format!(
                "{NAME}: {path}: {} of {} questions are of category {category:?}",
                questions.rows.len(),
                questions.total
            ));
        }
        let sampler = CustomSampler::new(
            NAME,
            questions.rows,
            host::run_seed(),
            config.num_requests as usize,
            params.custom,
            &path,
        )?;
        Ok(SpecBenchDataset { sampler })
    }

    fn size_hint(&self) -> Option<u32> {
        u32::try_from(self.sampler.total()).ok()
    }

    fn next_batch(&mut self, max: u32) -> Result<Vec<RequestSpec>, PluginError> {
        self.sampler.next_batch(&HostTokenizer, max as usize)
    }
}

bench_sdk::export_dataset!(SpecBenchDataset);

#[cfg(test)]
mod tests {
    use super::*;

    use bench_sdk::options::pairs as opts;

    #[test]
    fn options_are_read_with_vllms_defaults() {
        let p = parse_options(vec![]).unwrap();
        assert_eq!(p.category, None);
        assert_eq!(p.custom, CustomParams::default());
        let p = parse_options(opts(&[
            ("output-len", "12"),
            ("category", "qa"),
            ("disable-shuffle", "true"),
        ]))
        .unwrap();
        assert_eq!(p.category.as_deref(), Some("qa"));
        assert_eq!(p.custom.output_len, 12);
        assert!(p.custom.flags.disable_shuffle && !p.custom.skip_chat_template);
        assert_eq!(
            parse_options(opts(&[("category", "")])).unwrap().category,
            None
        );
        for (pairs, needle) in [
            (opts(&[("skip-chat-template", "true")]), "unknown option"),
            (opts(&[("output-len", "-3")]), "or -1"),
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
