//! Flags shared by the subcommands that sample a workload (`serve`, `dataset sample`):
//! the model and tokenizer, and the dataset. The dataset plugin's own flags (vLLM's
//! `--random-input-len` and the like) are not here: the plugin declares them and
//! `plugin_flags` adds them at run time.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;

/// The model and its tokenizer.
#[derive(Args, Debug, Clone, Default, serde::Serialize)]
pub struct ModelArgs {
    /// Name of the model. If not given, `serve` asks the server's /v1/models for the first one.
    #[arg(long)]
    pub model: Option<String>,

    /// The model name used in the API; defaults to --model.
    #[arg(long)]
    pub served_model_name: Option<String>,

    /// A tokenizer.json, a directory holding one, or a Hugging Face id already in the local
    /// cache (nothing is downloaded). Defaults to --model.
    #[arg(long)]
    pub tokenizer: Option<String>,
}

/// The dataset plugin and the options every dataset shares.
///
/// Numeric flags accept a leading minus sign so that a negative value reaches the flag's
/// own parser and is refused with a message naming the flag (clap would otherwise take
/// `-1` for an unknown option and not say which flag it was meant for).
#[derive(Args, Debug, Clone, serde::Serialize)]
pub struct DatasetArgs {
    /// Dataset plugin: a first-party name (random, sharegpt, custom) or a path to a .wasm file.
    #[arg(
        long = "dataset-name",
        visible_alias = "plugin",
        default_value = "random"
    )]
    pub dataset_name: String,

    /// Path to the dataset file or directory; the plugin gets read-only access to it alone.
    #[arg(long)]
    pub dataset_path: Option<PathBuf>,

    /// Number of prompts to process.
    #[arg(long, default_value_t = 1000, allow_negative_numbers = true)]
    pub num_prompts: u32,

    /// Random seed for the workload and the arrival times.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub seed: u64,

    /// General input length: sets the input length of any dataset plugin that takes it
    /// (as vLLM maps it to each dataset's own flag, which it overrides).
    #[arg(long, allow_negative_numbers = true)]
    pub input_len: Option<u32>,

    /// General output length: sets the output length of any dataset plugin that takes it
    /// (as vLLM maps it to each dataset's own flag, which it overrides).
    #[arg(long, allow_negative_numbers = true)]
    pub output_len: Option<u32>,

    /// Any dataset plugin option, as KEY=VALUE (repeatable); wins over the plugin's flags.
    /// `bench plugin inspect NAME` lists them.
    #[arg(long = "dataset-option", value_name = "KEY=VALUE")]
    pub dataset_options: Vec<String>,
}

impl DatasetArgs {
    /// `--dataset-option` as pairs, in the order given.
    pub fn option_pairs(&self) -> Result<Vec<(String, String)>> {
        self.dataset_options
            .iter()
            .map(|item| split_key_value(item).with_context(|| format!("--dataset-option {item:?}")))
            .collect()
    }

    /// The general flags as the plugin flags see them.
    pub fn shared_values(&self) -> super::plugin_flags::SharedValues {
        super::plugin_flags::SharedValues {
            input_len: self.input_len,
            output_len: self.output_len,
        }
    }
}

/// Splits `KEY=VALUE` (vLLM's format for --header and --metadata), trimming both sides.
pub fn split_key_value(item: &str) -> Result<(String, String)> {
    match item.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => bail!("invalid format {item:?}: use KEY=VALUE"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        d: DatasetArgs,
    }

    fn parse(args: &[&str]) -> DatasetArgs {
        T::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
            .unwrap()
            .d
    }

    #[test]
    fn dataset_options_are_pairs_in_order() {
        let d = parse(&[
            "--dataset-option",
            "input-len=6",
            "--dataset-option",
            "x = y",
        ]);
        assert_eq!(
            d.option_pairs().unwrap(),
            vec![("input-len".into(), "6".into()), ("x".into(), "y".into())]
        );
        let bad = parse(&["--dataset-option", "novalue"]);
        assert!(
            bad.option_pairs()
                .unwrap_err()
                .to_string()
                .contains("--dataset-option")
        );
    }
}
