//! The `random-mm` dataset: vLLM's `--dataset-name random-mm` (`RandomMultiModalDataset`):
//! `random`'s synthetic prompts, each with synthetic images, the same prompts, item
//! counts, image sizes and pixels as vLLM's for the same `--seed`, tokenizer and options
//! (see [`sample`]); the images are JPEG data URLs as vLLM sends them (another JPEG
//! encoder than PIL's, so not byte-identical, but the same bytes for the same seed).
//!
//! Options (vLLM's flag in brackets): `random`'s `input-len`, `output-len`, `range-ratio`,
//! `prefix-len` and `batch-size` (which must stay 1, as in vLLM); `mm-base-items-per-request`
//! (`--random-mm-base-items-per-request`, 1), `mm-num-mm-items-range-ratio`
//! (`--random-mm-num-mm-items-range-ratio`, 0.0), `mm-limit-mm-per-prompt`
//! (`--random-mm-limit-mm-per-prompt`, `{"image": 255, "video": 1}`), `mm-bucket-config`
//! (`--random-mm-bucket-config`, `{(256, 256, 1): 0.5, (720, 1280, 1): 0.5, (720, 1280,
//! 16): 0.0}`), `enable-multimodal-chat` (`--enable-multimodal-chat`).

pub mod buckets;
pub mod sample;

use bench_sdk::dataset::Positions;
use bench_sdk::options::option;
use bench_sdk::rng::Generator;
use bench_sdk::sampling::HostTokenizer;
use bench_sdk::synthetic::{TextParams, batch_size_option, warn_mismatch};
use bench_sdk::{
    Dataset, DatasetConfig, DatasetDescription, OptionInfo, OptionReader, PathUse, PluginError,
    PluginInfo, RequestSpec, host,
};

use buckets::{ItemPlan, NAME, default_buckets, default_limits, parse_buckets, parse_limits};
use sample::{Params, Sampler};

const DEFAULT_LIMITS: &str = r#"{"image": 255, "video": 1}"#;
const DEFAULT_BUCKETS: &str = "{(256, 256, 1): 0.5, (720, 1280, 1): 0.5, (720, 1280, 16): 0.0}";

fn options() -> Vec<OptionInfo> {
    let mut options = TextParams::options();
    options.extend([
        batch_size_option("Must be 1: vLLM's random-mm does not batch prompts"),
        option(
            "mm-base-items-per-request",
            "Base number of multimodal items per request; the count is drawn from \
             [floor(n * (1 - r)), ceil(n * (1 + r))], r the items range ratio",
            Some("1"),
        )
        .flag("random-mm-base-items-per-request")
        .count(),
        option(
            "mm-num-mm-items-range-ratio",
            "Range ratio r in [0, 1] of the items per request (0 keeps the count fixed, 1 \
             allows none)",
            Some("0.0"),
        )
        .flag("random-mm-num-mm-items-range-ratio")
        .number(),
        option(
            "mm-limit-mm-per-prompt",
            "Per-modality caps of items per request, a JSON object such as {\"image\": 3}; \
             the drawn count is capped by their sum, and a modality at its cap leaves the \
             draw",
            Some(DEFAULT_LIMITS),
        )
        .flag("random-mm-limit-mm-per-prompt"),
        option(
            "mm-bucket-config",
            "Item shapes and their probabilities, a Python dict literal {(height, width, \
             frames): p, ...}; one frame is an image, more a video (sent as Motion JPEG in AVI, \
             where vLLM sends MPEG-4 in MP4; the same frames); probabilities are normalized",
            Some(DEFAULT_BUCKETS),
        )
        .flag("random-mm-bucket-config"),
        option(
            "enable-multimodal-chat",
            "Make each prompt a chat message holding the text and the items",
            Some("false"),
        )
        .flag("enable-multimodal-chat")
        .switch(),
    ]);
    options
}

/// Reads and validates the options (no host call, so it runs natively in tests).
pub fn parse_options(pairs: Vec<(String, String)>) -> Result<Params, PluginError> {
    let mut reader = OptionReader::new(NAME, pairs);
    let text = TextParams::read(NAME, &mut reader)?;
    let batch_size: u32 = reader.parse_or("batch-size", 1)?;
    let base_items: i64 = reader.parse_or("mm-base-items-per-request", 1)?;
    let items_ratio: f64 = reader.parse_or("mm-num-mm-items-range-ratio", 0.0)?;
    let limits = match reader.string("mm-limit-mm-per-prompt") {
        Some(text) => parse_limits(&text)?,
        None => default_limits(),
    };
    let buckets = match reader.string("mm-bucket-config") {
        Some(text) => parse_buckets(&text)?,
        None => default_buckets(),
    };
    let chat = reader.flag("enable-multimodal-chat", false)?;
    reader.finish(&options())?;
    if batch_size != 1 {
        return Err(PluginError::Unsupported(format!(
            "{NAME}: batch-size {batch_size}: vLLM's random-mm does not batch prompts (only 1)"
        )));
    }
    let plan = ItemPlan::new(base_items, items_ratio, &limits, &buckets)?;
    Ok(Params { text, plan, chat })
}

/// The request source: vLLM's sampler, run a batch per host call.
pub struct RandomMmDataset {
    sampler: Sampler,
    positions: Positions,
}

impl Dataset for RandomMmDataset {
    fn describe() -> DatasetDescription {
        // vLLM's rules for `random-mm`: no dataset file, EOS ignored on OpenAI-compatible
        // servers (the prompts are not re-tokenised by the server: only `random`'s are).
        DatasetDescription::new(PluginInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Synthetic prompts with synthetic images (JPEG data URLs), the \
                          prompts, item counts and image sizes of vLLM's `--dataset-name \
                          random-mm` for the same seed, tokenizer and options"
                .into(),
            options: options(),
        })
        .path(PathUse::Refused)
        .ignore_eos_by_default()
        .shardable()
    }

    fn open(config: DatasetConfig) -> Result<Self, PluginError> {
        let positions = Positions::of(&config)?;
        let params = parse_options(config.options)?;
        let rng = Generator::new(u128::from(host::run_seed()));
        let sampler = Sampler::new(
            &HostTokenizer,
            rng,
            config.num_requests as usize,
            &params,
            positions,
        )?;
        if positions.reports() {
            warn_mismatch(NAME, "the shared prefix", sampler.prefix_mismatch());
        }
        Ok(RandomMmDataset { sampler, positions })
    }

    fn next_batch(&mut self, max: u32) -> Result<Vec<RequestSpec>, PluginError> {
        let batch = self.sampler.next_batch(&HostTokenizer, max as usize)?;
        if self.positions.reports() && !batch.is_empty() && self.sampler.remaining() == 0 {
            warn_mismatch(NAME, "all prompts together", self.sampler.token_mismatch());
            if self.sampler.exhausted > 0 {
                host::log_warn(&format!(
                    "{NAME}: {} requests ran out of buckets before their drawn item count \
                     (every modality at its mm-limit-mm-per-prompt cap)",
                    self.sampler.exhausted
                ));
            }
        }
        Ok(batch)
    }
}

bench_sdk::export_dataset!(RandomMmDataset);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buckets::Modality;

    use bench_sdk::options::pairs as opts;

    #[test]
    fn defaults_are_vllms() {
        let p = parse_options(vec![]).unwrap();
        assert_eq!(p.text, TextParams::default());
        assert!(!p.chat);
        // One item; the zero-probability video bucket and the video limit drop out.
        assert_eq!((p.plan.min_items, p.plan.max_items), (1, 1));
        assert_eq!(p.plan.limits, [(Modality::Image, 255)]);
        assert_eq!(p.plan.buckets.len(), 2);
        assert_eq!(parse_buckets(DEFAULT_BUCKETS).unwrap(), default_buckets());
        assert_eq!(parse_limits(DEFAULT_LIMITS).unwrap(), default_limits());
    }

    #[test]
    fn videos_are_accepted_and_batches_are_clear_errors() {
        let p = parse_options(opts(&[(
            "mm-bucket-config",
            "{(64, 64, 1): 0.5, (32, 32, 4): 0.5}",
        )]))
        .unwrap();
        assert_eq!(p.plan.limit(Modality::Video), 1);
        assert!(p.plan.buckets.iter().any(|(b, _)| b.frames == 4));
        assert!(matches!(
            parse_options(opts(&[("batch-size", "2")])),
            Err(PluginError::Unsupported(m)) if m.contains("does not batch")
        ));
        assert!(matches!(
            parse_options(opts(&[("mm-bucket-config", "{(64, 64, 1): -1}")])),
            Err(PluginError::InvalidConfig(m)) if m.contains("non-negative")
        ));
    }
}
