//! The `random` dataset: vLLM's `--dataset-name random`, the same request set for the
//! same `--seed`, tokenizer and options (see [`sample`] for the algorithm).
//!
//! Options (vLLM's flag in brackets): `input-len` (`--random-input-len`, 1024),
//! `output-len` (`--random-output-len`, 128), `range-ratio` (`--random-range-ratio`,
//! 0.0; a number, or `{"input": r, "output": r}` for separate ratios), `prefix-len`
//! (`--random-prefix-len`, 0).

pub mod sample;

use bench_sdk::options::option;
use bench_sdk::rng::Generator;
use bench_sdk::sampling::HostTokenizer;
use bench_sdk::{
    Dataset, DatasetConfig, DatasetDescription, OptionInfo, OptionReader, PathUse, PluginError,
    PluginInfo, RequestSpec, SharedFlag, host,
};

use sample::{Params, Sampler};

const NAME: &str = "random";

fn options() -> Vec<OptionInfo> {
    vec![
        option(
            "input-len",
            "Input tokens per request, before the prefix",
            Some("1024"),
        )
        .flag("random-input-len")
        .count()
        .shared(SharedFlag::InputLen),
        option("output-len", "Output tokens per request", Some("128"))
            .flag("random-output-len")
            .count()
            .shared(SharedFlag::OutputLen),
        option(
            "range-ratio",
            "Lengths are drawn uniformly from [floor(len * (1 - r)), ceil(len * (1 + r))], \
             r in [0, 1); a number, or a JSON object {\"input\": r, \"output\": r} for \
             separate input and output ratios",
            Some("0.0"),
        )
        .flag("random-range-ratio"),
        option(
            "prefix-len",
            "Tokens of a fixed random prefix shared by every prompt",
            Some("0"),
        )
        .flag("random-prefix-len")
        .count(),
    ]
}

/// Reads and validates the options (no host call, so it runs natively in tests).
pub fn parse_options(pairs: Vec<(String, String)>) -> Result<Params, PluginError> {
    let mut reader = OptionReader::new(NAME, pairs);
    let defaults = Params::default();
    let input_len = reader.parse_or("input-len", defaults.input_len)?;
    let output_len = reader.parse_or("output-len", defaults.output_len)?;
    let (input_range_ratio, output_range_ratio) = match reader.string("range-ratio") {
        None => (defaults.input_range_ratio, defaults.output_range_ratio),
        Some(text) => parse_range_ratio(&text)?,
    };
    let prefix_len = reader.parse_or("prefix-len", defaults.prefix_len)?;
    reader.finish(&options())?;
    Ok(Params {
        input_len,
        output_len,
        input_range_ratio,
        output_range_ratio,
        prefix_len,
    })
}

/// vLLM's `--random-range-ratio`: a float, else a JSON object with `input` and `output`;
/// each ratio must lie in [0, 1).
fn parse_range_ratio(text: &str) -> Result<(f64, f64), PluginError> {
    let bad = |why: String| {
        PluginError::InvalidConfig(format!("{NAME}: option range-ratio={text:?}: {why}"))
    };
    let (input, output) = match text.trim().parse::<f64>() {
        Ok(r) => (r, r),
        Err(_) => {
            let value: serde_json::Value = serde_json::from_str(text)
                .map_err(|e| bad(format!("expected a number or a JSON object ({e})")))?;
            let part = |key: &str| -> Result<f64, PluginError> {
                let v = value.get(key).ok_or_else(|| {
                    bad("a JSON object needs both \"input\" and \"output\"".into())
                })?;
                // Python's float() takes numbers and numeric strings alike.
                v.as_f64()
                    .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                    .ok_or_else(|| bad(format!("\"{key}\" is not a number")))
            };
            (part("input")?, part("output")?)
        }
    };
    for (which, r) in [("input", input), ("output", output)] {
        if !(0.0..1.0).contains(&r) {
            return Err(bad(format!(
                "the {which} range ratio must be in [0, 1), got {r}"
            )));
        }
    }
    Ok((input, output))
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
        warn_mismatch("the shared prefix", sampler.prefix_mismatch);
        Ok(RandomDataset {
            sampler,
            total: config.num_requests,
        })
    }

    fn size_hint(&self) -> Option<u32> {
        Some(self.total)
    }

    fn next_batch(&mut self, max: u32) -> Result<Vec<RequestSpec>, PluginError> {
        let batch = self.sampler.next_batch(&HostTokenizer, max as usize)?;
        if !batch.is_empty() && self.sampler.remaining() == 0 {
            warn_mismatch("all prompts together", self.sampler.token_mismatch);
        }
        Ok(batch)
    }
}

/// vLLM's warning when re-encoding did not land on the drawn lengths.
fn warn_mismatch(what: &str, mismatch: i64) {
    if mismatch != 0 {
        let sign = if mismatch > 0 { "more" } else { "fewer" };
        host::log_warn(&format!(
            "{NAME}: {what} re-encoded to {} {sign} tokens than asked for (decoding and \
             re-encoding random tokens is not always length-preserving; vLLM shows the same)",
            mismatch.unsigned_abs()
        ));
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
        let d = Params::default();
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
        ]))
        .unwrap();
        assert_eq!(
            p,
            Params {
                input_len: 256,
                output_len: 64,
                input_range_ratio: 0.5,
                output_range_ratio: 0.5,
                prefix_len: 16,
            }
        );
        let p = parse_options(opts(&[(
            "range-ratio",
            r#"{"input": 0.3, "output": "0.5"}"#,
        )]))
        .unwrap();
        assert_eq!((p.input_range_ratio, p.output_range_ratio), (0.3, 0.5));
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
