//! Flags shared by the subcommands that sample a workload (`serve`, `dataset sample`):
//! the model and tokenizer, and the dataset. The dataset plugin's own flags (vLLM's
//! `--random-input-len` and the like) are not here: the plugin declares them and
//! `plugin_flags` adds them at run time.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;

/// The model and its tokenizer.
#[derive(Args, Debug, Clone, serde::Serialize)]
pub struct ModelArgs {
    /// Name of the model. If not given, `serve` asks the server's /v1/models for the first one.
    /// With `--backend native`: a Hugging Face model directory, a .gguf file, or a hub id whose
    /// copy is in the local cache.
    #[arg(long)]
    pub model: Option<String>,

    /// The model name used in the API; defaults to --model.
    #[arg(long)]
    pub served_model_name: Option<String>,

    /// A tokenizer.json, a directory holding one, or a Hugging Face id already in the local
    /// cache (nothing is downloaded). Defaults to --model.
    #[arg(long)]
    pub tokenizer: Option<String>,

    /// vLLM's tokenizer mode: `auto` and `hf` load the Hugging Face fast tokenizer
    /// (`tokenizer.json`), the one kind bench reads; `mistral`, `deepseek_v32` and plugin
    /// modes are refused.
    #[arg(long, default_value = "auto", value_name = "MODE")]
    pub tokenizer_mode: String,
}

impl ModelArgs {
    /// Refuses a `--tokenizer-mode` bench cannot honour, before anything is loaded.
    pub fn check_tokenizer_mode(&self) -> Result<()> {
        match self.tokenizer_mode.as_str() {
            "auto" | "hf" => Ok(()),
            other => bail!(
                "--tokenizer-mode {other}: bench loads Hugging Face fast tokenizers \
                 (tokenizer.json) only, which --tokenizer-mode auto and hf select; give the \
                 model's tokenizer.json with --tokenizer"
            ),
        }
    }
}

/// The dataset plugin and the options every dataset shares.
///
/// Numeric flags accept a leading minus sign so that a negative value reaches the flag's
/// own parser and is refused with a message naming the flag (clap would otherwise take
/// `-1` for an unknown option and not say which flag it was meant for).
#[derive(Args, Debug, Clone, serde::Serialize)]
pub struct DatasetArgs {
    /// Dataset plugin: a first-party name (random, sharegpt, sonnet, hf, ...: `bench plugin
    /// list` names them all) or a path to a .wasm file.
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

    /// Accepted for vLLM compatibility, where it lets Hugging Face loaders run a
    /// repository's own code: bench runs none, so it changes nothing.
    #[arg(long)]
    pub trust_remote_code: bool,

    /// A JSON object of further variables for the tokenizer's chat template wherever a
    /// dataset renders prompts on the client, as vLLM passes them to
    /// `apply_chat_template` (e.g. '{"enable_thinking": false}').
    #[arg(long, value_name = "JSON")]
    pub chat_template_kwargs: Option<String>,

    /// Any dataset plugin option, as KEY=VALUE (repeatable); wins over the plugin's flags.
    /// `bench plugin inspect NAME` lists them.
    #[arg(long = "dataset-option", value_name = "KEY=VALUE")]
    pub dataset_options: Vec<String>,
}

impl DatasetArgs {
    /// `--chat-template-kwargs` as a JSON object.
    pub fn template_kwargs(&self) -> Result<Option<serde_json::Map<String, serde_json::Value>>> {
        let Some(text) = &self.chat_template_kwargs else {
            return Ok(None);
        };
        match serde_json::from_str(text) {
            Ok(serde_json::Value::Object(kwargs)) => Ok(Some(kwargs)),
            Ok(other) => bail!("--chat-template-kwargs must be a JSON object, not {other}"),
            Err(e) => bail!("--chat-template-kwargs {text:?} is not JSON: {e}"),
        }
    }

    /// `--dataset-option` as pairs, in the order given.
    pub fn option_pairs(&self) -> Result<Vec<(String, String)>> {
        self.dataset_options
            .iter()
            .map(|item| split_key_value(item).with_context(|| format!("--dataset-option {item:?}")))
            .collect()
    }

    /// `--dataset-path` as the dataset plugin gets it: a file or folder that exists, or a
    /// Hugging Face hub id (`ORG/NAME`, as vLLM takes for `--dataset-name hf`) whose local
    /// copy is in one of the hub caches `roots` (its `datasets--ORG--NAME` folder). Nothing
    /// is downloaded: a path that is neither is an error that says how to point at a copy.
    pub fn resolved_dataset_path(&self, roots: &[PathBuf]) -> Result<Option<PathBuf>> {
        let Some(path) = &self.dataset_path else {
            return Ok(None);
        };
        if path.exists() {
            return Ok(Some(path.clone()));
        }
        let Some(id) = path.to_str().filter(|p| is_hub_id(p)) else {
            bail!(
                "--dataset-path {}: no such file or directory",
                path.display()
            );
        };
        let folder = format!("datasets--{}", id.replace('/', "--"));
        if let Some(found) = roots.iter().map(|r| r.join(&folder)).find(|d| d.is_dir()) {
            return Ok(Some(found));
        }
        let searched: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
        bail!(
            "--dataset-path {id}: no such file or directory, and no local copy of the Hugging \
             Face dataset {id} in the hub cache (looked for {folder} in: {}). bench downloads \
             nothing: fetch it first (`huggingface-cli download --repo-type dataset {id}`, \
             which fills the cache, or copy its files anywhere) and run again, or pass \
             --dataset-path the folder or data file of your copy (with --hf-name {id} so that \
             `hf` knows which dataset it is)",
            if searched.is_empty() {
                "no cache folder: set HF_HUB_CACHE or HF_HOME".to_string()
            } else {
                searched.join(", ")
            }
        );
    }

    /// The general flags as the plugin flags see them.
    pub fn shared_values(&self) -> super::plugin_flags::SharedValues {
        super::plugin_flags::SharedValues {
            input_len: self.input_len,
            output_len: self.output_len,
        }
    }
}

/// Whether `text` has the shape of a hub id, `ORG/NAME` (letters, digits, `-`, `_`, `.`;
/// not starting with a dot, so `./x` and `../x` stay paths).
fn is_hub_id(text: &str) -> bool {
    let part = |p: &str| {
        !p.is_empty()
            && !p.starts_with('.')
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    matches!(text.split_once('/'), Some((org, name)) if part(org) && part(name))
}

/// Splits `KEY=VALUE` (vLLM's format for --header and --metadata), trimming both sides.
pub fn split_key_value(item: &str) -> Result<(String, String)> {
    match item.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => bail!("invalid format {item:?}: use KEY=VALUE"),
    }
}

/// A duration as its seconds, for the serialised arguments.
pub fn seconds<S: serde::Serializer>(d: &std::time::Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// An optional duration as its seconds (`null` when not given), for the serialised
/// arguments.
pub fn optional_seconds<S: serde::Serializer>(
    d: &Option<std::time::Duration>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

/// A flag's positive number of seconds.
pub fn parse_interval(s: &str) -> Result<std::time::Duration, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(std::time::Duration::from_secs_f64(x)),
        _ => Err(format!("expected a positive number of seconds, got {s:?}")),
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
    fn a_hub_id_is_found_in_the_cache_and_otherwise_explained() {
        let cache = tempfile::tempdir().unwrap();
        let roots = vec![cache.path().join("missing"), cache.path().to_path_buf()];
        std::fs::create_dir(cache.path().join("datasets--openai--gsm8k")).unwrap();
        let found = parse(&["--dataset-path", "openai/gsm8k"]).resolved_dataset_path(&roots);
        assert_eq!(
            found.unwrap(),
            Some(cache.path().join("datasets--openai--gsm8k"))
        );
        let err = parse(&["--dataset-path", "nvidia/SPEED-Bench"])
            .resolved_dataset_path(&roots)
            .unwrap_err()
            .to_string();
        for needle in [
            "no local copy of the Hugging Face dataset nvidia/SPEED-Bench",
            "datasets--nvidia--SPEED-Bench",
            "huggingface-cli download --repo-type dataset nvidia/SPEED-Bench",
            "--hf-name nvidia/SPEED-Bench",
        ] {
            assert!(err.contains(needle), "{err:?} lacks {needle:?}");
        }
        // Paths that are not hub ids are only missing.
        for path in ["./data/x.jsonl", "../x/y", "/abs/file.json", "a/b/c"] {
            let err = parse(&["--dataset-path", path])
                .resolved_dataset_path(&roots)
                .unwrap_err()
                .to_string();
            assert_eq!(
                err,
                format!("--dataset-path {path}: no such file or directory")
            );
        }
        assert_eq!(parse(&[]).resolved_dataset_path(&roots).unwrap(), None);
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
