//! Flags shared by the subcommands that sample a workload (`serve`, `dataset sample`):
//! the model and tokenizer, and the dataset with vLLM's dataset flags.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::workload::DatasetOption;

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

/// The dataset plugin and its options. vLLM's per-dataset flags are kept by name; each
/// `--<plugin>-<option>` flag becomes option `<option>` of the plugin named `<plugin>`.
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

    /// General input length; maps to --random-input-len.
    #[arg(long, allow_negative_numbers = true)]
    pub input_len: Option<u32>,

    /// General output length; maps to the dataset's output length option.
    #[arg(long, allow_negative_numbers = true)]
    pub output_len: Option<u32>,

    /// random: number of input tokens per request (default 1024).
    #[arg(long, allow_negative_numbers = true)]
    pub random_input_len: Option<u32>,

    /// random: number of output tokens per request (default 128).
    #[arg(long, allow_negative_numbers = true)]
    pub random_output_len: Option<u32>,

    /// random: range ratio r for lengths sampled uniformly in [L(1-r), L(1+r)] (default
    /// 0.0), or a JSON object {"input": r, "output": r} as vLLM accepts.
    #[arg(long, allow_negative_numbers = true)]
    pub random_range_ratio: Option<String>,

    /// random: number of fixed prefix tokens before the random context (default 0).
    #[arg(long, allow_negative_numbers = true)]
    pub random_prefix_len: Option<u32>,

    /// sharegpt: output length for every request, overriding the dataset's completions.
    #[arg(long, allow_negative_numbers = true)]
    pub sharegpt_output_len: Option<u32>,

    /// custom: output length for every request (default 256).
    #[arg(long, allow_negative_numbers = true)]
    pub custom_output_len: Option<i64>,

    /// custom: do not apply the tokenizer's chat template to prompts.
    #[arg(long)]
    pub skip_chat_template: bool,

    /// sharegpt, custom: keep the file's order instead of shuffling with the seed.
    #[arg(long)]
    pub disable_shuffle: bool,

    /// sharegpt, custom: do not repeat requests when the file has fewer than --num-prompts.
    #[arg(long)]
    pub no_oversample: bool,

    /// Any plugin option, as KEY=VALUE (repeatable); see `bench plugin inspect NAME`.
    #[arg(long = "dataset-option", value_name = "KEY=VALUE")]
    pub dataset_options: Vec<String>,
}

impl DatasetArgs {
    /// The options the flags set, each for the plugins it applies to, in the order: vLLM
    /// flags, then `--dataset-option` (so that those win; see
    /// [`crate::workload::options_for`]).
    pub fn options(&self) -> Result<Vec<DatasetOption>> {
        let mut out = Vec::new();
        let mut add = |plugin: Option<&'static str>, key: &str, value: String, flag: &str| {
            out.push(DatasetOption {
                plugin,
                key: key.to_string(),
                value,
                flag: flag.to_string(),
            })
        };
        let random_input = self.random_input_len.or(self.input_len);
        let random_output = self.output_len.or(self.random_output_len);
        if let Some(v) = random_input {
            add(
                Some("random"),
                "input-len",
                v.to_string(),
                "--random-input-len",
            );
        }
        if let Some(v) = random_output {
            add(
                Some("random"),
                "output-len",
                v.to_string(),
                "--random-output-len",
            );
        }
        if let Some(v) = &self.random_range_ratio {
            add(
                Some("random"),
                "range-ratio",
                v.clone(),
                "--random-range-ratio",
            );
        }
        if let Some(v) = self.random_prefix_len {
            add(
                Some("random"),
                "prefix-len",
                v.to_string(),
                "--random-prefix-len",
            );
        }
        if let Some(v) = self.output_len.or(self.sharegpt_output_len) {
            add(
                Some("sharegpt"),
                "output-len",
                v.to_string(),
                "--sharegpt-output-len",
            );
        }
        if let Some(v) = self.output_len.map(i64::from).or(self.custom_output_len) {
            add(
                Some("custom"),
                "output-len",
                v.to_string(),
                "--custom-output-len",
            );
        }
        if self.skip_chat_template {
            add(
                Some("custom"),
                "skip-chat-template",
                "true".into(),
                "--skip-chat-template",
            );
        }
        for (set, key, flag) in [
            (self.disable_shuffle, "disable-shuffle", "--disable-shuffle"),
            (self.no_oversample, "no-oversample", "--no-oversample"),
        ] {
            if set {
                for plugin in ["sharegpt", "custom"] {
                    add(Some(plugin), key, "true".into(), flag);
                }
            }
        }
        for item in &self.dataset_options {
            let (k, v) =
                split_key_value(item).with_context(|| format!("--dataset-option {item:?}"))?;
            add(None, &k, v, "--dataset-option");
        }
        Ok(out)
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
    use crate::observer::{Event, Observer};
    use clap::Parser;

    /// The options ignored as meant for other datasets.
    #[derive(Default)]
    struct Ignored(Vec<String>);

    impl Observer for Ignored {
        fn event(&mut self, event: Event<'_>) {
            if let Event::DatasetOptionIgnored { option, .. } = event {
                self.0.push(option.to_owned());
            }
        }
    }

    /// The options `d` gives the plugin `name`.
    fn options_for(d: &DatasetArgs, name: &str) -> Result<Vec<(String, String)>> {
        let options = d.options()?;
        Ok(crate::workload::options_for(
            &options,
            name,
            &mut Ignored::default(),
        ))
    }

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
    fn vllm_flags_map_to_the_named_plugin_only() {
        let d = parse(&["--random-input-len", "256", "--sharegpt-output-len", "7"]);
        assert_eq!(
            options_for(&d, "random").unwrap(),
            vec![("input-len".into(), "256".into())]
        );
        assert_eq!(
            options_for(&d, "sharegpt").unwrap(),
            vec![("output-len".into(), "7".into())]
        );
        assert!(options_for(&d, "custom").unwrap().is_empty());
    }

    #[test]
    fn a_flag_is_reported_ignored_only_when_none_of_its_options_applies() {
        let d = parse(&["--random-input-len", "256", "--disable-shuffle"]);
        let mut ignored = Ignored::default();
        let options = d.options().unwrap();
        // --disable-shuffle is two options, sharegpt's and custom's: one applies here.
        assert_eq!(
            crate::workload::options_for(&options, "sharegpt", &mut ignored),
            vec![("disable-shuffle".to_string(), "true".to_string())]
        );
        assert_eq!(ignored.0, ["--random-input-len"]);
    }

    #[test]
    fn general_lengths_map_like_vllm() {
        let d = parse(&[
            "--input-len",
            "100",
            "--output-len",
            "9",
            "--random-output-len",
            "3",
        ]);
        // vLLM: --output-len overrides every dataset's output length.
        assert_eq!(
            options_for(&d, "random").unwrap(),
            vec![
                ("input-len".into(), "100".into()),
                ("output-len".into(), "9".into())
            ]
        );
        assert_eq!(
            options_for(&d, "custom").unwrap(),
            vec![("output-len".into(), "9".into())]
        );
    }

    #[test]
    fn dataset_option_passes_through_and_wins() {
        let d = parse(&[
            "--random-input-len",
            "5",
            "--dataset-option",
            "input-len=6",
            "--dataset-option",
            "x = y",
        ]);
        assert_eq!(
            options_for(&d, "random").unwrap(),
            vec![("input-len".into(), "6".into()), ("x".into(), "y".into())]
        );
        let bad = parse(&["--dataset-option", "novalue"]);
        assert!(
            options_for(&bad, "random")
                .unwrap_err()
                .to_string()
                .contains("--dataset-option")
        );
    }

    #[test]
    fn shared_flags_reach_each_dataset_that_has_them() {
        let d = parse(&[
            "--disable-shuffle",
            "--no-oversample",
            "--random-range-ratio",
            r#"{"input":0.5}"#,
        ]);
        let both = vec![
            ("disable-shuffle".to_string(), "true".to_string()),
            ("no-oversample".to_string(), "true".to_string()),
        ];
        assert_eq!(options_for(&d, "sharegpt").unwrap(), both);
        assert_eq!(options_for(&d, "custom").unwrap(), both);
        assert_eq!(
            options_for(&d, "random").unwrap(),
            vec![("range-ratio".into(), r#"{"input":0.5}"#.into())]
        );
    }

    #[test]
    fn plugin_is_an_alias_of_dataset_name() {
        assert_eq!(parse(&["--plugin", "x.wasm"]).dataset_name, "x.wasm");
        assert_eq!(parse(&[]).dataset_name, "random");
    }
}
