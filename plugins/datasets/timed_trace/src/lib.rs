//! The `timed_trace` dataset: vLLM's `--dataset-name timed_trace`, a JSON Lines trace
//! replayed at its time stamps (`{"timestamp": 27482, "input_length": 6955,
//! "output_length": 52, "hash_ids": [46, 47]}` per line), with token-id prompts whose
//! blocks are shared where the trace's hash ids are (see [`sample`]).
//!
//! Needs `--dataset-path`. Options (vLLM's flag in brackets): `chunk-hash-size`
//! (`--timed-trace-chunk-hash-size`, 16 tokens per hash id), `sec-multiplier`
//! (`--timed-trace-sec-multiplier`, 1: time stamps times this are seconds, 0.001 for
//! milliseconds), `label-timestamp`, `label-input-length`, `label-output-length`,
//! `label-hash-ids` (`--timed-trace-label-*`: the field names). Each request carries its
//! send time, so bench replays the trace at those times (vLLM's `--self-timed`, the
//! default then); prompts are token ids, for a completions backend (`openai`), and EOS is
//! ignored by default so that each answer has the trace's output length, as in vLLM.

pub mod pyhash;
pub mod sample;

use bench_sdk::options::option;
use bench_sdk::trace::{self, Labels};
use bench_sdk::{
    Dataset, DatasetConfig, DatasetDescription, OptionInfo, OptionReader, PathUse, PluginError,
    PluginInfo, RequestSpec, host,
};

use sample::{Params, Sampler};

const NAME: &str = "timed_trace";

/// The label options: name, flag, default.
const LABELS: [(&str, &str, &str); 4] = [
    (
        "label-timestamp",
        "timed-trace-label-timestamp",
        "timestamp",
    ),
    (
        "label-input-length",
        "timed-trace-label-input-length",
        "input_length",
    ),
    (
        "label-output-length",
        "timed-trace-label-output-length",
        "output_length",
    ),
    ("label-hash-ids", "timed-trace-label-hash-ids", "hash_ids"),
];

fn options() -> Vec<OptionInfo> {
    let mut options = vec![
        option(
            "chunk-hash-size",
            "Tokens each hash id stands for (16 in Qwen/Alibaba traces, 512 in Mooncake's)",
            Some("16"),
        )
        .flag("timed-trace-chunk-hash-size")
        .count(),
        option(
            "sec-multiplier",
            "Time stamps times this are seconds (0.001 for milliseconds)",
            Some("1"),
        )
        .flag("timed-trace-sec-multiplier")
        .number(),
    ];
    let what = [
        "send time",
        "input length",
        "output length",
        "prompt block hash ids",
    ];
    for ((name, flag, default), what) in LABELS.into_iter().zip(what) {
        options.push(
            option(
                name,
                &format!("The field holding each line's {what}"),
                Some(default),
            )
            .flag(flag),
        );
    }
    options
}

/// Reads and validates the options (no host call, so it runs natively in tests).
pub fn parse_options(pairs: Vec<(String, String)>) -> Result<(Params, Labels), PluginError> {
    let mut reader = OptionReader::new(NAME, pairs);
    let defaults = Params::default();
    let chunk_size: i64 = reader.parse_or("chunk-hash-size", defaults.chunk_size)?;
    if chunk_size < 1 {
        return Err(PluginError::InvalidConfig(format!(
            "{NAME}: option chunk-hash-size={chunk_size}: expected at least 1 token per hash id"
        )));
    }
    let sec_multiplier: f64 = reader.parse_or("sec-multiplier", defaults.sec_multiplier)?;
    if !(sec_multiplier.is_finite() && sec_multiplier >= 0.0) {
        return Err(PluginError::InvalidConfig(format!(
            "{NAME}: option sec-multiplier={sec_multiplier}: expected a number >= 0"
        )));
    }
    let mut label = |i: usize| -> Result<String, PluginError> {
        let (name, _, default) = LABELS[i];
        let value = reader.string(name).unwrap_or_else(|| default.to_string());
        if value.is_empty() {
            return Err(PluginError::InvalidConfig(format!(
                "{NAME}: option {name}: expected a field name"
            )));
        }
        Ok(value)
    };
    let labels = Labels {
        timestamp: label(0)?,
        input_length: label(1)?,
        output_length: label(2)?,
        hash_ids: label(3)?,
        flags: Some(LABELS.map(|(_, flag, _)| flag)),
    };
    reader.finish(&options())?;
    Ok((
        Params {
            chunk_size,
            sec_multiplier,
        },
        labels,
    ))
}

/// The request source: the trace's first lines, a batch per host call.
pub struct TimedTraceDataset {
    sampler: Sampler,
}

impl Dataset for TimedTraceDataset {
    fn describe() -> DatasetDescription {
        DatasetDescription::new(PluginInfo {
            name: NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "A JSON Lines trace (send time, input and output length, prompt \
                          block hashes) replayed at its times with token-id prompts, as \
                          vLLM's `--dataset-name timed_trace` (its request set under \
                          PYTHONHASHSEED=--seed)"
                .into(),
            options: options(),
        })
        .path(PathUse::Required)
        .ignore_eos_by_default()
    }

    fn open(config: DatasetConfig) -> Result<Self, PluginError> {
        let (params, labels) = parse_options(config.options)?;
        let path = config.path.ok_or_else(|| {
            PluginError::InvalidConfig(format!("{NAME}: needs --dataset-path (a .jsonl trace)"))
        })?;
        let asked = config.num_requests as usize;
        let entries = trace::read(&path, &labels, (asked > 0).then_some(asked))?;
        if entries.len() < asked {
            host::log_warn(&format!(
                "{NAME}: {path} has {} requests, fewer than the {asked} asked for; replaying \
                 them all",
                entries.len()
            ));
        }
        host::log_info(&format!(
            "{NAME}: chunk_size {}, sec_multiplier {}, labels {:?} {:?} {:?} {:?}",
            params.chunk_size,
            params.sec_multiplier,
            labels.timestamp,
            labels.input_length,
            labels.output_length,
            labels.hash_ids
        ));
        let pool = trace::token_pool(host::vocab_size(true), &host::special_token_ids());
        let sampler = Sampler::new(entries, pool, host::run_seed(), params, &path);
        Ok(TimedTraceDataset { sampler })
    }

    fn size_hint(&self) -> Option<u32> {
        u32::try_from(self.sampler.total()).ok()
    }

    fn next_batch(&mut self, max: u32) -> Result<Vec<RequestSpec>, PluginError> {
        self.sampler.next_batch(max as usize)
    }
}

bench_sdk::export_dataset!(TimedTraceDataset);

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::options::pairs as opts;

    #[test]
    fn options_are_read_with_vllms_defaults() {
        let (params, labels) = parse_options(vec![]).unwrap();
        assert_eq!(params, Params::default());
        assert_eq!(
            (labels.timestamp.as_str(), labels.hash_ids.as_str()),
            ("timestamp", "hash_ids")
        );
        let (params, labels) = parse_options(opts(&[
            ("chunk-hash-size", "512"),
            ("sec-multiplier", "0.001"),
            ("label-timestamp", "ts"),
            ("label-input-length", "in"),
            ("label-output-length", "out"),
            ("label-hash-ids", "h"),
        ]))
        .unwrap();
        assert_eq!((params.chunk_size, params.sec_multiplier), (512, 0.001));
        assert_eq!(
            [
                labels.timestamp,
                labels.input_length,
                labels.output_length,
                labels.hash_ids
            ],
            ["ts", "in", "out", "h"]
        );
        let flags: Vec<String> = options().into_iter().filter_map(|o| o.cli_flag).collect();
        assert_eq!(
            flags,
            [
                "timed-trace-chunk-hash-size",
                "timed-trace-sec-multiplier",
                "timed-trace-label-timestamp",
                "timed-trace-label-input-length",
                "timed-trace-label-output-length",
                "timed-trace-label-hash-ids"
            ]
        );
    }

    #[test]
    fn bad_options_are_config_errors() {
        for (pairs, needle) in [
            (opts(&[("chunk-hash-size", "0")]), "at least 1"),
            (opts(&[("sec-multiplier", "-1")]), "expected a number >= 0"),
            (opts(&[("sec-multiplier", "x")]), "sec-multiplier=\"x\""),
            (opts(&[("label-timestamp", "")]), "expected a field name"),
            (opts(&[("timestamp", "t")]), "unknown option"),
        ] {
            match parse_options(pairs) {
                Err(PluginError::InvalidConfig(m)) => assert!(m.contains(needle), "{m}"),
                other => panic!("expected {needle:?}, got {other:?}"),
            }
        }
    }
}
