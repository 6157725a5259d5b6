//! `bench throughput` and `bench latency`: vLLM's offline benchmarks, with its flags and
//! result keys, on the native engine (`--backend native`, the default, as vLLM's runs on
//! its in-process engine) or on any server through a backend plugin (`--backend openai
//! --base-url ...`). Every `bench serve` flag that describes the server, the dataset, the
//! requests or the native engine ([`EngineArgs`](super::engine_args::EngineArgs), which `serve` has too) works here; the
//! work is `bench_core::offline`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;

use super::console::Console;
use super::plugin_flags::{NATIVE_BACKEND, Parsed};
use super::serve::{self, ServeArgs};
use crate::offline::{
    self, LatencyConfig, OfflineConfig, OfflineOutcome, OfflineTarget, ThroughputConfig,
};

/// What `throughput` and `latency` share.
#[derive(Args, Debug, Clone, serde::Serialize)]
pub struct OfflineArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub serve: ServeArgs,

    /// Number of generated sequences per prompt (each prompt is run this many times).
    #[arg(long = "n", default_value_t = 1, allow_negative_numbers = true)]
    pub n: u32,

    /// Path to save the results in JSON format (vLLM's keys, then bench's), with the
    /// PyTorch-benchmark records beside it (<name>.pytorch.json).
    #[arg(long, value_name = "PATH")]
    pub output_json: Option<PathBuf>,

    /// Do not turn generated tokens into text during the run (the native engine; a
    /// server detokenizes as it does).
    #[arg(long)]
    pub disable_detokenize: bool,
}

/// `bench throughput`'s flags: vLLM's `vllm bench throughput`.
#[derive(Args, Debug, Clone, serde::Serialize)]
pub struct ThroughputArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub offline: OfflineArgs,

    /// Deprecated in vLLM: the dataset path (use --dataset-path).
    #[arg(long, value_name = "PATH", hide = true)]
    pub dataset: Option<PathBuf>,

    /// Fixed prefix tokens before each prompt (the random and sonnet datasets).
    #[arg(long, allow_negative_numbers = true)]
    pub prefix_len: Option<u32>,

    /// LoRA adapter for every request, by name: a server's adapter (the request's model
    /// is the adapter). The native engine has no LoRA.
    #[arg(long, value_name = "NAME")]
    pub lora_path: Option<String>,

    /// Accepted for vLLM compatibility (its async engine); changes nothing here.
    #[arg(long)]
    pub async_engine: bool,

    /// Accepted for vLLM compatibility; changes nothing here.
    #[arg(long)]
    pub disable_frontend_multiprocessing: bool,
}

/// `bench latency`'s flags: vLLM's `vllm bench latency`.
#[derive(Args, Debug, Clone, serde::Serialize)]
pub struct LatencyArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub offline: OfflineArgs,

    /// Requests in the batch (each a --input-len random prompt asking --output-len tokens).
    #[arg(long, default_value_t = 8, allow_negative_numbers = true)]
    pub batch_size: u32,

    /// Iterations run before the measured ones.
    #[arg(long, default_value_t = 10, allow_negative_numbers = true)]
    pub num_iters_warmup: u32,

    /// Measured iterations.
    #[arg(long, default_value_t = 30, allow_negative_numbers = true)]
    pub num_iters: u32,
}

/// `bench serve`'s flags that `throughput` and `latency` accept (they share serve's flags)
/// but whose results and reports have no place for them: each, given, is a warning.
const SERVE_ONLY: &[(&str, &str)] = &[
    ("goodput", "--goodput"),
    ("percentile_metrics", "--percentile-metrics"),
    ("metric_percentiles", "--metric-percentiles"),
    ("prefix_cache_block_size", "--prefix-cache-block-size"),
    ("split_itl_by_tokens", "--split-itl-by-tokens"),
    ("cost_per_hour", "--cost-per-hour"),
    ("save_result", "--save-result"),
    ("save_detailed", "--save-detailed"),
    ("append_result", "--append-result"),
    ("result_dir", "--result-dir"),
    ("result_filename", "--result-filename"),
    ("metadata", "--metadata"),
    ("label", "--label"),
    ("plot_timeline", "--plot-timeline"),
    ("plot_dataset_stats", "--plot-dataset-stats"),
    ("probe_request_rate", "--probe-request-rate"),
    ("request_cancellation_rate", "--request-cancellation-rate"),
    ("request_cancellation_delay", "--request-cancellation-delay"),
];

/// More of them for `latency`, which releases its batch at once, `--num-iters-warmup` times
/// unmeasured.
const LATENCY_UNUSED: &[(&str, &str)] = &[
    ("request_rate", "--request-rate"),
    ("burstiness", "--burstiness"),
    ("ramp_up_strategy", "--ramp-up-strategy"),
    ("ramp_up_start_rps", "--ramp-up-start-rps"),
    ("ramp_up_end_rps", "--ramp-up-end-rps"),
    ("num_warmups", "--num-warmups"),
    ("self_timed", "--self-timed"),
    ("no_self_timed", "--no-self-timed"),
    ("time_scale", "--time-scale"),
];

/// vLLM's latency prompt and output lengths when not given.
const LATENCY_INPUT_LEN: u32 = 32;
const LATENCY_OUTPUT_LEN: u32 = 128;

/// The shared configuration: `serve`'s resolution of the common flags (the native engine's
/// included), then the target.
fn resolve(
    args: &OfflineArgs,
    plugins: &Parsed,
    record: serde_json::Map<String, serde_json::Value>,
    latency: bool,
) -> Result<(OfflineConfig, Vec<String>)> {
    if args.n == 0 {
        bail!("--n must be at least 1");
    }
    // `bench serve`'s flags that these commands take but do not use: each a warning.
    let command = if latency { "latency" } else { "throughput" };
    let given = serve::given_flags(&args.serve);
    let not_used = SERVE_ONLY
        .iter()
        .chain(if latency { LATENCY_UNUSED } else { &[] });
    let mut unused: Vec<String> = not_used
        .filter(|(key, _)| given.contains(*key))
        .map(|(_, flag)| {
            format!("{flag} is ignored: it is bench serve's, and bench {command} does not use it")
        })
        .collect();
    if args.serve.metrics_port.is_some() {
        bail!("--metrics-port is bench serve's: throughput and latency serve no live figures");
    }
    if args.serve.duration.is_some() {
        bail!("--duration is bench serve's: throughput and latency run their batches by count");
    }
    if args.serve.record_file.is_some() {
        bail!("--record-file is bench serve's: throughput and latency keep no per-request records");
    }
    if args.serve.otlp.otlp_endpoint.is_some() {
        bail!(
            "--otlp-endpoint is bench serve's: throughput and latency measure batches, not \
             requests with times of their own to send as spans"
        );
    }
    if !args.serve.until_confident.is_empty() {
        bail!("--until-confident is bench serve's: throughput and latency run a fixed workload");
    }
    if args.serve.num_runs != 1 {
        bail!(
            "--num-runs is bench serve's: throughput runs its workload once and latency \
             repeats its batch --num-iters times"
        );
    }
    if args.serve.shard.is_some() || args.serve.workers > 1 {
        bail!(
            "--shard and --workers are bench serve's: an offline benchmark measures one \
             target's throughput or latency in one process"
        );
    }
    let resolved = serve::resolve(&args.serve, plugins)?;
    let mut warnings = resolved.warnings;
    warnings.append(&mut unused);
    let mut config = resolved.config;
    if args.serve.ignore_eos {
        warnings.push("--ignore-eos: the offline benchmarks always ignore EOS, as vLLM's".into());
    }
    let target = match config.native {
        Some(mut native) => {
            native.run.detokenize = !args.disable_detokenize;
            native.run.ignore_eos = true;
            OfflineTarget::Native(native)
        }
        None => {
            if args.disable_detokenize {
                warnings.push(
                    "--disable-detokenize is ignored: a server detokenizes as it is configured to"
                        .into(),
                );
            }
            let mut http = config.http;
            // vLLM's offline sampling: temperature 1.0 and top-p 1.0 unless given, EOS ignored.
            http.ignore_eos = true;
            let mut body: serde_json::Map<String, serde_json::Value> = match &http.extra_body {
                Some(text) => serde_json::from_str(text).context("--extra-body")?,
                None => serde_json::Map::new(),
            };
            for key in ["temperature", "top_p"] {
                body.entry(key).or_insert(serde_json::json!(1.0));
            }
            http.extra_body = Some(serde_json::Value::Object(body).to_string());
            OfflineTarget::Http(http)
        }
    };
    config.load.request_rate = args.serve.request_rate;
    Ok((
        OfflineConfig {
            model: config.model,
            served_model_name: config.served_model_name,
            tokenizer: config.tokenizer,
            workload: config.workload,
            target,
            n: args.n,
            load: config.load,
            command_line: record,
        },
        warnings,
    ))
}

/// vLLM's `vars(args)` for the PyTorch records.
fn record<T: serde::Serialize>(args: &T) -> Result<serde_json::Map<String, serde_json::Value>> {
    match serde_json::to_value(args)? {
        serde_json::Value::Object(mut map) => {
            map.insert("header".into(), serde_json::json!("<redacted>"));
            Ok(map)
        }
        _ => bail!("arguments did not serialize to an object"),
    }
}

pub fn run_throughput(args: ThroughputArgs, plugins: &Parsed) -> Result<ExitCode> {
    let mut args = args;
    let mut warnings = Vec::new();
    if let Some(path) = args.dataset.take() {
        warnings.push(
            "--dataset will be deprecated (as in vLLM): use --dataset-name and --dataset-path"
                .to_string(),
        );
        args.offline.serve.dataset.dataset_path = Some(path);
    }
    for (given, flag) in [
        (args.async_engine, "--async-engine"),
        (
            args.disable_frontend_multiprocessing,
            "--disable-frontend-multiprocessing",
        ),
    ] {
        if given {
            warnings.push(format!(
                "{flag} is accepted for vLLM compatibility and does nothing here"
            ));
        }
    }
    let native = args.offline.serve.backend == NATIVE_BACKEND;
    if let Some(lora) = &args.lora_path {
        if native {
            bail!("--lora-path {lora}: the native engine has no LoRA adapters");
        }
        args.offline.serve.lora_modules = Some(vec![lora.clone()]);
    }
    let (mut offline, more) = resolve(&args.offline, plugins, record(&args)?, false)?;
    warnings.extend(more);
    // vLLM: without a dataset path the dataset is random, and it needs an input length
    // (--input-len, or here the random dataset's own --random-input-len).
    if args.offline.serve.dataset.dataset_name == "random"
        && !offline
            .workload
            .options
            .iter()
            .any(|(k, _)| k == "input-len")
    {
        bail!("input_len must be provided for a random dataset (--input-len)");
    }
    if let Some(prefix_len) = args.prefix_len {
        offline
            .workload
            .options
            .insert(0, ("prefix-len".into(), prefix_len.to_string()));
    }
    for w in &warnings {
        eprintln!("WARNING: {w}");
    }
    let config = ThroughputConfig {
        offline,
        output_json: args.offline.output_json.clone(),
    };
    let mut console = Console::new(
        !args.offline.serve.disable_tqdm,
        config.offline.load.shutdown_grace,
    );
    let outcome = offline::throughput(&config, &mut console)?;
    Ok(exit_code(&outcome))
}

pub fn run_latency(args: LatencyArgs, plugins: &Parsed) -> Result<ExitCode> {
    let mut args = args;
    if args.batch_size == 0 {
        bail!("--batch-size must be at least 1");
    }
    if args.num_iters == 0 {
        bail!("--num-iters must be at least 1");
    }
    let dataset = &mut args.offline.serve.dataset;
    // The batch is the workload: vLLM's dummy prompts are random ones of --input-len
    // tokens asking --output-len tokens.
    dataset.num_prompts = args.batch_size;
    dataset.input_len.get_or_insert(LATENCY_INPUT_LEN);
    dataset.output_len.get_or_insert(LATENCY_OUTPUT_LEN);
    let (offline, warnings) = resolve(&args.offline, plugins, record(&args)?, true)?;
    for w in &warnings {
        eprintln!("WARNING: {w}");
    }
    let config = LatencyConfig {
        offline,
        num_iters_warmup: args.num_iters_warmup,
        num_iters: args.num_iters,
        output_json: args.offline.output_json.clone(),
    };
    let mut console = Console::new(false, config.offline.load.shutdown_grace);
    let outcome = offline::latency(&config, &mut console)?;
    Ok(exit_code(&outcome))
}

/// A signal's exit code when one stopped the run, failure when it was stopped
/// otherwise, success else.
fn exit_code<R>(outcome: &OfflineOutcome<R>) -> ExitCode {
    match &outcome.stopped {
        None => ExitCode::SUCCESS,
        Some(reason) => match reason.signal() {
            Some(signal) => ExitCode::from(signal.exit_code()),
            None => {
                eprintln!("error: the benchmark was stopped early: {reason}");
                ExitCode::FAILURE
            }
        },
    }
}
