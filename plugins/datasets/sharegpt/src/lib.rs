//! The `sharegpt` dataset: vLLM's `--dataset-name sharegpt`, the same request set for the
//! same `--seed`, tokenizer and file (see [`sample`] for the rules).
//!
//! Needs `--dataset-path` (a ShareGPT JSON file). Options (vLLM's flag in brackets):
//! `output-len` (`--sharegpt-output-len`), `disable-shuffle` (`--disable-shuffle`),
//! `no-oversample` (`--no-oversample`).
//!
//! Beyond vLLM, `multi-turn` (`--sharegpt-multi-turn`) replays whole conversations turn by
//! turn with the server's real answers in the history ([`turns`]), with `max-turns`,
//! `think-time` and `think-time-distribution` (`--sharegpt-max-turns`,
//! `--sharegpt-think-time`, `--sharegpt-think-time-distribution`).

mod json_array;
pub mod sample;
pub mod turns;

use bench_sdk::conversation::ThinkTime;
use bench_sdk::options::option;
use bench_sdk::sampling::{HostTokenizer, SampleFlags};
use bench_sdk::{
    Dataset, DatasetConfig, DatasetDescription, OptionInfo, OptionReader, PathUse, PluginError,
    PluginInfo, RequestSpec, SharedFlag, TurnResult, host,
};

use sample::{Params, Sampler};
use turns::{MultiTurn, TurnParams};

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
    options.push(
        option(
            "multi-turn",
            "Replay whole conversations turn by turn (--num-prompts counts conversations): \
             each turn's history holds the server's real answers, each turn asks for its \
             reply's length and is sent after the previous answer (plus the think time)",
            Some("false"),
        )
        .flag("sharegpt-multi-turn")
        .switch(),
    );
    options.push(
        option(
            "max-turns",
            "With multi-turn: at most this many turns per conversation (default: all)",
            None,
        )
        .flag("sharegpt-max-turns")
        .count(),
    );
    options.extend(ThinkTime::options(Some("sharegpt")));
    options
}

/// Reads and validates the options (no host call, so it runs natively in tests). The
/// multi-turn options are `None` unless `multi-turn` is on.
pub fn parse_options(
    pairs: Vec<(String, String)>,
) -> Result<(Params, Option<TurnParams>), PluginError> {
    let mut reader = OptionReader::new(NAME, pairs);
    let params = Params {
        output_len: reader.parse("output-len")?,
        flags: SampleFlags::read(&mut reader)?,
        tag_ids: false,
    };
    let multi_turn = reader.flag("multi-turn", false)?;
    let max_turns: Option<u32> = reader.parse("max-turns")?;
    let think = ThinkTime::read(&mut reader).map_err(|e| match e {
        PluginError::InvalidConfig(m) => PluginError::InvalidConfig(format!("{NAME}: {m}")),
        other => other,
    })?;
    reader.finish(&options())?;
    if max_turns == Some(0) {
        return Err(PluginError::InvalidConfig(format!(
            "{NAME}: max-turns must be at least 1"
        )));
    }
    if !multi_turn && (max_turns.is_some() || think != ThinkTime::None) {
        return Err(PluginError::InvalidConfig(format!(
            "{NAME}: max-turns and think-time need multi-turn (--sharegpt-multi-turn)"
        )));
    }
    let turns = multi_turn.then_some(TurnParams { max_turns, think });
    Ok((params, turns))
}

/// The request source: vLLM's sampler, run a batch per host call, or whole conversations.
pub struct ShareGptDataset {
    source: Source,
    /// vLLM makes exactly the number asked for, unless told not to oversample.
    size_hint: Option<u32>,
    num_requests: usize,
    /// Requests (first turns) handed out so far.
    made: usize,
    /// Whether the filter's count has been shown (once, when sampling is done).
    reported: bool,
}

enum Source {
    Single(Sampler),
    Turns(MultiTurn),
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
        // Only with `multi-turn`: otherwise no request has a session, and the host runs
        // the workload as single-turn.
        .multi_turn()
    }

    fn open(config: DatasetConfig) -> Result<Self, PluginError> {
        let (params, turns) = parse_options(config.options)?;
        let path = config.path.ok_or_else(|| {
            PluginError::InvalidConfig(format!(
                "{NAME}: needs --dataset-path (a ShareGPT JSON file)"
            ))
        })?;
        let size_hint = (!params.flags.no_oversample).then_some(config.num_requests);
        let n = config.num_requests as usize;
        let seed = host::run_seed();
        let source = match turns {
            None => {
                let conversations = sample::load(&path)?;
                Source::Single(Sampler::new(conversations, seed, n, params, &path))
            }
            Some(turns) => {
                let loaded =
                    sample::load_turns(&path, crate::turns::rest_to_keep(turns.max_turns))?;
                Source::Turns(MultiTurn::new(loaded, seed, n, params, turns, &path))
            }
        };
        Ok(ShareGptDataset {
            source,
            size_hint,
            num_requests: n,
            made: 0,
            reported: false,
        })
    }

    fn size_hint(&self) -> Option<u32> {
        self.size_hint
    }

    fn next_batch(&mut self, max: u32) -> Result<Vec<RequestSpec>, PluginError> {
        let batch = match &mut self.source {
            Source::Single(sampler) => sampler.next_batch(&HostTokenizer, max as usize)?,
            Source::Turns(turns) => turns.next_batch(&HostTokenizer, max as usize)?,
        };
        self.made += batch.len();
        // Sampling is done when the batch falls short or the run has what it asked for
        // (the host asks no further then): show what vLLM's filter left out, once.
        if !self.reported && (batch.len() < max as usize || self.made >= self.num_requests) {
            self.reported = true;
            let left_out = match &self.source {
                Source::Single(sampler) => sampler.left_out(),
                Source::Turns(turns) => turns.left_out(),
            };
            if left_out > 0 {
                host::log_warn(&format!(
                    "{NAME}: vLLM's length filter left out {left_out} of the conversations \
                     looked at (prompt of 4 to 1024 tokens, reply of at least 4 unless \
                     --sharegpt-output-len is set, at most 2048 in all)"
                ));
            }
        }
        Ok(batch)
    }

    fn next_turn(&mut self, turn: TurnResult) -> Result<Option<RequestSpec>, PluginError> {
        match &mut self.source {
            Source::Turns(turns) => turns.next_turn(&HostTokenizer, turn),
            // Single-turn requests carry no session, so the host never asks.
            Source::Single(_) => Err(PluginError::Unsupported(format!(
                "{NAME}: next-turn without --sharegpt-multi-turn"
            ))),
        }
    }
}

bench_sdk::export_dataset!(ShareGptDataset);

#[cfg(test)]
mod tests {
    use super::*;

    use bench_sdk::options::pairs as opts;

    #[test]
    fn options_are_read_with_vllms_defaults() {
        assert_eq!(parse_options(vec![]).unwrap(), (Params::default(), None));
        let p = parse_options(opts(&[
            ("output-len", "100"),
            ("disable-shuffle", "true"),
            ("no-oversample", "1"),
        ]))
        .unwrap();
        assert_eq!(
            p,
            (
                Params {
                    output_len: Some(100),
                    flags: SampleFlags {
                        disable_shuffle: true,
                        no_oversample: true,
                    },
                    tag_ids: false,
                },
                None
            )
        );
        let (_, turns) = parse_options(opts(&[
            ("multi-turn", "true"),
            ("max-turns", "3"),
            ("think-time", "0.5"),
            ("think-time-distribution", "exponential"),
        ]))
        .unwrap();
        assert_eq!(
            turns,
            Some(TurnParams {
                max_turns: Some(3),
                think: ThinkTime::Exponential(0.5)
            })
        );
        assert_eq!(
            parse_options(opts(&[("multi-turn", "1")])).unwrap().1,
            Some(TurnParams::default())
        );
    }

    #[test]
    fn bad_options_are_config_errors() {
        for (pairs, needle) in [
            (opts(&[("sharegpt-output-len", "5")]), "unknown option"),
            (opts(&[("output-len", "-1")]), "output-len"),
            (opts(&[("max-turns", "2")]), "need multi-turn"),
            (opts(&[("think-time", "1")]), "need multi-turn"),
            (
                opts(&[("multi-turn", "1"), ("max-turns", "0")]),
                "at least 1",
            ),
            (
                opts(&[("multi-turn", "1"), ("think-time", "-1")]),
                "sharegpt: think-time",
            ),
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
