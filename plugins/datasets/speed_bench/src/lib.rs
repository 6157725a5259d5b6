//! The `speed_bench` dataset: vLLM's `--dataset-name speed_bench` (`SpeedBench`, a
//! `CustomDataset`): NVIDIA's SPEED-Bench as prepared by NeMo-Skills, a folder with one
//! JSONL file per subset (`qualitative.jsonl`, `throughput_1k.jsonl`, ...), each row's
//! prompt the content of its first message, optionally of one category, sampled as the
//! SDK's [`bench_sdk::custom`] does (see [`sample`]).
//!
//! Needs `--dataset-path` (the folder). Options (vLLM's flag in brackets):
//! `dataset-subset` (`--speed-bench-dataset-subset`, qualitative), `category`
//! (`--speed-bench-category`, all), `output-len` (`--speed-bench-output-len`, 4096),
//! `skip-chat-template`, `disable-shuffle`, `no-oversample`.
//!
//! vLLM 0.32 builds `SpeedBench` without the run's seed, so its shuffle always uses seed
//! 0; here `--seed` is honoured (seed 0, vLLM's default, gives vLLM's very request set).

pub mod sample;

use bench_sdk::custom::{CustomParams, CustomSampler};
use bench_sdk::options::option;
use bench_sdk::sampling::{HostTokenizer, SampleFlags};
use bench_sdk::{
    Dataset, DatasetConfig, DatasetDescription, OptionInfo, OptionReader, PathUse, PluginError,
    PluginInfo, RequestSpec, host,
};

use sample::{Params, SUBSETS};

const NAME: &str = "speed_bench";

fn options() -> Vec<OptionInfo> {
    let mut options = vec![
        option(
            "dataset-subset",
            "The subset: the file <subset>.jsonl of the --dataset-path folder",
            Some("qualitative"),
        )
        .flag("speed-bench-dataset-subset")
        .choices(&SUBSETS),
        option(
            "category",
            "Only the rows of this category; all when not given",
            None,
        )
        .flag("speed-bench-category"),
        option("output-len", "Output tokens per request", Some("4096"))
            .flag("speed-bench-output-len")
            .integer(),
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
    let subset = reader
        .string("dataset-subset")
        .unwrap_or_else(|| "qualitative".into());
    if !SUBSETS.contains(&subset.as_str()) {
        return Err(PluginError::InvalidConfig(format!(
            "{NAME}: option dataset-subset={subset:?}: expected one of {}",
            SUBSETS.join(", ")
        )));
    }
    // vLLM treats an empty category as none.
    let category = reader.string("category").filter(|c| !c.is_empty());
    let output_len: i64 = reader.parse_or("output-len", 4096)?;
    CustomParams::check_output_len(NAME, "output-len", output_len)?;
    let skip_chat_template = reader.flag("skip-chat-template", false)?;
    let flags = SampleFlags::read(&mut reader)?;
    reader.finish(&options())?;
    Ok(Params {
        subset,
        category,
        custom: CustomParams {
            output_len,
            skip_chat_template,
            flags,
        },
    })
}

/// The request source: the SDK's `CustomDataset` sampler on the subset's rows.
pub struct SpeedBenchDataset {
    sampler: CustomSampler,
}

impl Dataset for SpeedBenchDataset {
    fn describe() -> DatasetDescription {
        DatasetDescription::new(PluginInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "The first message of each SPEED-Bench row of a subset \
                          (--dataset-path: the folder NeMo-Skills' speed-bench prepare.py \
                          writes), sampled as vLLM's `--dataset-name speed_bench`"
                .into(),
            options: options(),
        })
        .path(PathUse::Required)
    }

    fn open(config: DatasetConfig) -> Result<Self, PluginError> {
        let params = parse_options(config.options)?;
        let dir = config.path.ok_or_else(|| {
            PluginError::InvalidConfig(format!(
                "{NAME}: needs --dataset-path: {}",
                sample::HOW_TO_GET
            ))
        })?;
        let (file, text) = sample::read_subset(&dir, &params.subset)?;
        let rows = sample::parse(&text, &file, params.category.as_deref())?;
        if let Some(category) = &params.category {
            host::log_info(&format!(
                "{NAME}: {file}: {} of {} rows are of category {category:?}",
                rows.rows.len(),
                rows.total
            ));
        }
        let sampler = CustomSampler::new(
            NAME,
            rows.rows,
            host::run_seed(),
            config.num_requests as usize,
            params.custom,
            &file,
        )?;
        Ok(SpeedBenchDataset { sampler })
    }

    fn size_hint(&self) -> Option<u32> {
        u32::try_from(self.sampler.total()).ok()
    }

    fn next_batch(&mut self, max: u32) -> Result<Vec<RequestSpec>, PluginError> {
        self.sampler.next_batch(&HostTokenizer, max as usize)
    }
}

bench_sdk::export_dataset!(SpeedBenchDataset);

#[cfg(test)]
mod tests {
    use super::*;

    use bench_sdk::options::pairs as opts;

    #[test]
    fn options_are_read_with_vllms_defaults() {
        let p = parse_options(vec![]).unwrap();
        assert_eq!(
            (p.subset.as_str(), p.category.as_deref()),
            ("qualitative", None)
        );
        assert_eq!(p.custom.output_len, 4096);
        assert!(!p.custom.skip_chat_template);
        let p = parse_options(opts(&[
            ("dataset-subset", "throughput_1k"),
            ("category", "coding"),
            ("output-len", "64"),
            ("skip-chat-template", "true"),
            ("no-oversample", "true"),
        ]))
        .unwrap();
        assert_eq!(p.subset, "throughput_1k");
        assert_eq!(p.category.as_deref(), Some("coding"));
        assert!(p.custom.skip_chat_template && p.custom.flags.no_oversample);
        for (pairs, needle) in [
            (
                opts(&[("dataset-subset", "tiny")]),
                "expected one of qualitative",
            ),
            (opts(&[("output-len", "-7")]), "or -1"),
            (opts(&[("subset", "x")]), "unknown option"),
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
