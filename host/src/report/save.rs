//! `--save-result`, `--append-result`, `--save-detailed`, `--result-dir` and
//! `--result-filename`, as vLLM's `main` handles them: the same default file name, the
//! same bytes (Python `json.dump` formatting), appends separated by a newline, and the
//! PyTorch benchmark records written beside the result when
//! `SAVE_TO_PYTORCH_BENCHMARK_FORMAT` is set.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::json::{pytorch_records, result_json};
use super::pyjson::{self, float_repr};
use super::{RunInfo, strategy_name};
use crate::metrics::Metrics;

/// The environment variable that makes vLLM write `.pytorch.json` records.
pub const PYTORCH_FORMAT_ENV: &str = "SAVE_TO_PYTORCH_BENCHMARK_FORMAT";

/// Where and how to save the result.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SaveOptions {
    pub save_result: bool,
    /// Keep the per-request lists (`input_lens`, `ttfts`, `itls`, ...).
    pub save_detailed: bool,
    /// Append to the file instead of replacing it (also saves without `save_result`).
    pub append_result: bool,
    /// Created when missing.
    pub result_dir: Option<PathBuf>,
    /// Replaces the default name (still placed under `result_dir`).
    pub result_filename: Option<String>,
    /// Also write `<name>.pytorch.json` (see [`pytorch_format_requested`]).
    pub pytorch_format: bool,
}

/// Whether the environment asks for the PyTorch records, as vLLM decides it: the variable
/// is set to a non-empty value.
pub fn pytorch_format_requested() -> bool {
    std::env::var_os(PYTORCH_FORMAT_ENV).is_some_and(|v| !v.is_empty())
}

/// The result file's path (vLLM's `compute_result_filename`), or `None` when nothing is
/// to be saved. The default name is
/// `{label}-{request_rate}qps[-concurrency{N}]-{model basename}-{date}.json`, or with a
/// ramp-up `{label}-ramp-up-{strategy}-{start}qps-{end}qps[-concurrency{N}]-...`; the
/// label defaults to the backend and the rate is written as Python writes floats
/// (`10.0`, `inf`).
pub fn result_path(run: &RunInfo, options: &SaveOptions) -> Option<PathBuf> {
    if !(options.save_result || options.append_result) {
        return None;
    }
    let file_name = match &options.result_filename {
        Some(name) => name.clone(),
        None => {
            let base_model_id = run.model_id.rsplit('/').next().unwrap_or_default();
            let concurrency = run
                .max_concurrency
                .map(|n| format!("-concurrency{n}"))
                .unwrap_or_default();
            let label = run
                .label
                .as_deref()
                .filter(|l| !l.is_empty())
                .unwrap_or(&run.backend);
            let traffic = match &run.ramp_up {
                Some(ramp) => format!(
                    "ramp-up-{}-{}qps-{}qps",
                    strategy_name(ramp.strategy),
                    ramp.start_rps as u64,
                    ramp.end_rps as u64
                ),
                None => format!("{}qps", float_repr(run.request_rate)),
            };
            let date = run.date_string();
            format!("{label}-{traffic}{concurrency}-{base_model_id}-{date}.json")
        }
    };
    Some(match &options.result_dir {
        Some(dir) => dir.join(file_name),
        None => PathBuf::from(file_name),
    })
}

/// Saves the result as requested and returns the result file's path (`None` when
/// nothing was requested). With `append_result` the JSON is appended to an existing file,
/// preceded by a newline when the file is not empty, as vLLM does.
pub fn save(metrics: &Metrics, run: &RunInfo, options: &SaveOptions) -> Result<Option<PathBuf>> {
    let Some(path) = result_path(run, options) else {
        return Ok(None);
    };
    if let Some(dir) = &options.result_dir {
        fs::create_dir_all(dir)
            .with_context(|| format!("creating the result directory {}", dir.display()))?;
    }
    let result = result_json(metrics, run, options.save_detailed);
    let bytes = pyjson::to_vec(&result).context("serialising the result JSON")?;
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .append(options.append_result)
        .truncate(!options.append_result)
        .open(&path)
        .with_context(|| format!("opening the result file {}", path.display()))?;
    let appending_after_data = options.append_result
        && file
            .metadata()
            .with_context(|| format!("reading the size of {}", path.display()))?
            .len()
            > 0;
    if appending_after_data {
        file.write_all(b"\n")
            .with_context(|| format!("writing to {}", path.display()))?;
    }
    file.write_all(&bytes)
        .with_context(|| format!("writing the result to {}", path.display()))?;

    if options.pytorch_format {
        let records = pytorch_records(&result, run);
        if !records.is_empty() {
            let pt_path = pytorch_path(&path);
            let bytes = pyjson::to_vec(&records).context("serialising the PyTorch records")?;
            fs::write(&pt_path, bytes).with_context(|| format!("writing {}", pt_path.display()))?;
        }
    }
    Ok(Some(path))
}

/// `{os.path.splitext(file_name)[0]}.pytorch.json`.
fn pytorch_path(result: &Path) -> PathBuf {
    result.with_extension("pytorch.json")
}
