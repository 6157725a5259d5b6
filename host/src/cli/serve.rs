//! `bench serve` (also the default subcommand): online serving benchmark with vLLM's
//! flags, metrics and result files.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};

use super::args::{DatasetArgs, ModelArgs, split_key_value};
use super::limits;
use crate::client::framing::FramingKind;
use crate::client::load;
use crate::client::stop::StopSignal;
use crate::client::worker::{self, DecodeWorker};
use crate::client::{HttpClient, HttpClientKind, PreparedRequest};
use crate::report::save::Interruption;
use crate::runtime::{BackendPlugin, ClientConfig, Framing, PluginRef, Runtime, RuntimeConfig};
use crate::schedule::{self, RampUp, RampUpStrategy, ScheduleConfig};
use crate::tokenizer::Tokenizer;
use crate::workload::{self, HostHeaders};
use crate::{metrics, report, server_metrics};

/// The flags of `bench serve`, vLLM's by name and meaning. Numeric flags accept a leading
/// minus sign so that a negative value is refused by the flag's own parser, naming it.
#[derive(Args, Debug, Clone, serde::Serialize)]
pub struct ServeArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub model: ModelArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub dataset: DatasetArgs,

    #[command(flatten)]
    #[serde(skip)]
    pub sandbox: super::plugin::SandboxArgs,

    /// Backend plugin: a first-party name (openai, openai-chat) or a path to a .wasm file.
    #[arg(long, default_value = "openai")]
    pub backend: String,

    /// Server or API base URL, instead of --host and --port.
    #[arg(long)]
    pub base_url: Option<String>,

    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,

    #[arg(long, default_value_t = 8000, allow_negative_numbers = true)]
    pub port: u16,

    /// API endpoint path; defaults to the backend's own (e.g. /v1/chat/completions).
    #[arg(long)]
    pub endpoint: Option<String>,

    /// Extra headers as KEY=VALUE, sent with every request.
    #[arg(long, value_name = "KEY=VALUE", num_args = 1..)]
    pub header: Vec<String>,

    /// Maximum number of concurrent requests.
    #[arg(long, allow_negative_numbers = true)]
    pub max_concurrency: Option<usize>,

    /// Requests per second; inf sends all requests at time 0.
    #[arg(long, default_value_t = f64::INFINITY, allow_negative_numbers = true)]
    pub request_rate: f64,

    /// Burstiness of arrivals: 1 is a Poisson process, lower is burstier, higher more uniform.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub burstiness: f64,

    /// Ramp the request rate from --ramp-up-start-rps to --ramp-up-end-rps over the run.
    #[arg(long, value_enum)]
    pub ramp_up_strategy: Option<RampUpArg>,

    #[arg(long, allow_negative_numbers = true)]
    pub ramp_up_start_rps: Option<u32>,

    #[arg(long, allow_negative_numbers = true)]
    pub ramp_up_end_rps: Option<u32>,

    /// Ask the server to ignore EOS (default on for the random dataset, as in vLLM).
    #[arg(long)]
    pub ignore_eos: bool,

    /// Comma-separated metrics to report percentiles for (ttft, tpot, itl, e2el).
    #[arg(long)]
    pub percentile_metrics: Option<String>,

    /// Comma-separated percentiles, e.g. "25,50,99".
    #[arg(long, default_value = "99")]
    pub metric_percentiles: String,

    /// Service level objectives for goodput as KEY:VALUE in ms (ttft, tpot, e2el).
    #[arg(long, value_name = "KEY:VALUE", num_args = 1..)]
    pub goodput: Vec<String>,

    /// Which prompt length total_input_tokens and input_lens count: `usage` is vLLM's
    /// rule (the server's usage.prompt_tokens when a response carries one, else the
    /// dataset's prompt_len); `dataset` always the dataset's count. Both totals are in the
    /// Client Diagnostics block and the result either way.
    #[arg(long, value_enum, default_value_t)]
    pub input_tokens: metrics::InputTokenSource,

    /// Save the results to a JSON file.
    #[arg(long)]
    pub save_result: bool,

    /// Include per-request data (ttfts, itls, texts, errors, ...) in the result file.
    #[arg(long)]
    pub save_detailed: bool,

    /// Append the result to an existing JSON file.
    #[arg(long)]
    pub append_result: bool,

    #[arg(long)]
    pub result_dir: Option<PathBuf>,

    #[arg(long)]
    pub result_filename: Option<String>,

    /// KEY=VALUE pairs saved in the result file.
    #[arg(long, value_name = "KEY=VALUE", num_args = 1..)]
    pub metadata: Vec<String>,

    /// Label (prefix) of the result; defaults to --backend.
    #[arg(long)]
    pub label: Option<String>,

    /// Do not show the progress bar.
    #[arg(long)]
    pub disable_tqdm: bool,

    /// Wait up to this many seconds for the endpoint to answer a test request (0: skip).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub ready_check_timeout_sec: u64,

    /// Warm-up requests sent before the measured run (excluded from the statistics).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub num_warmups: u32,

    /// Prefix of request ids; defaults to bench-<8 random hex digits>-.
    #[arg(long)]
    pub request_id_prefix: Option<String>,

    #[arg(
        long,
        help_heading = "Sampling parameters",
        allow_negative_numbers = true
    )]
    pub temperature: Option<f64>,
    #[arg(
        long,
        help_heading = "Sampling parameters",
        allow_negative_numbers = true
    )]
    pub top_p: Option<f64>,
    #[arg(
        long,
        help_heading = "Sampling parameters",
        allow_negative_numbers = true
    )]
    pub top_k: Option<i64>,
    #[arg(
        long,
        help_heading = "Sampling parameters",
        allow_negative_numbers = true
    )]
    pub min_p: Option<f64>,
    #[arg(
        long,
        help_heading = "Sampling parameters",
        allow_negative_numbers = true
    )]
    pub frequency_penalty: Option<f64>,
    #[arg(
        long,
        help_heading = "Sampling parameters",
        allow_negative_numbers = true
    )]
    pub presence_penalty: Option<f64>,
    #[arg(
        long,
        help_heading = "Sampling parameters",
        allow_negative_numbers = true
    )]
    pub repetition_penalty: Option<f64>,

    /// A JSON object merged into every request body.
    #[arg(long)]
    pub extra_body: Option<String>,

    /// A backend plugin option as KEY=VALUE (repeatable); see `bench plugin inspect NAME`.
    #[arg(long = "backend-option", value_name = "KEY=VALUE")]
    pub backend_options: Vec<String>,

    /// Give up on a request after this many seconds (default: 6 hours, as vLLM).
    #[arg(long, default_value_t = 6.0 * 3600.0, allow_negative_numbers = true)]
    pub request_timeout: f64,

    /// The HTTP client that sends the requests: `auto` is bench's own HTTP/1.1 client for
    /// http:// URLs (each socket read timestamped before any parsing, no task hop per
    /// chunk) and reqwest for https://.
    #[arg(long, value_enum, default_value_t = HttpClientKind::Auto)]
    pub http_client: HttpClientKind,

    /// Connections to open before the clock starts (default: --max-concurrency, or none
    /// without it). vLLM opens them during the run, so its first requests' TTFT includes
    /// TCP handshakes made all at once, which is not what the server does; 0 restores that.
    /// bench's own HTTP/1.1 client only.
    #[arg(long, value_name = "N")]
    pub preconnect: Option<usize>,

    /// On Ctrl-C or SIGTERM: no new requests are sent, requests in flight get this many
    /// seconds to finish (then they are cancelled and counted as failed), and the results
    /// so far are reported and saved, marked as interrupted. A second Ctrl-C exits at once.
    #[arg(long, default_value_t = 5.0, allow_negative_numbers = true)]
    pub shutdown_grace_sec: f64,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RampUpArg {
    Linear,
    Exponential,
}

/// Everything `serve` derives from its flags before doing any work.
struct Plan {
    base_url: String,
    headers: Vec<(String, String)>,
    metadata: Vec<(String, String)>,
    metrics: metrics::MetricsConfig,
    ramp_up: Option<RampUp>,
    extra_body: Option<String>,
    backend_options: Vec<(String, String)>,
    runtime: RuntimeConfig,
    dataset: PluginRef,
    backend: PluginRef,
    request_timeout: Duration,
    shutdown_grace: Duration,
    /// The most connections the run may hold open at once.
    connections: limits::ConnectionNeed,
    /// Flags vLLM accepts but that do nothing here, said once before the run.
    warnings: Vec<String>,
}

/// Checks every flag before any work, with messages naming the flag. Nothing here reads
/// more than file metadata, so a bad command line fails in milliseconds; the only side
/// effect is creating `--result-dir` (as vLLM does) to prove it is writable.
fn plan(args: &ServeArgs) -> Result<Plan> {
    let mut warnings = Vec::new();
    if let Some(c) = args.max_concurrency
        && c == 0
    {
        bail!("--max-concurrency must be greater than 0");
    }
    if args.dataset.num_prompts == 0 {
        bail!("--num-prompts must be greater than 0");
    }
    if args.request_rate.is_nan() || args.request_rate <= 0.0 {
        bail!(
            "--request-rate must be a positive number or inf, got {}",
            args.request_rate
        );
    }
    if !(args.burstiness > 0.0 && args.burstiness.is_finite()) {
        bail!(
            "--burstiness must be a positive number, got {}",
            args.burstiness
        );
    }
    let request_timeout = positive_seconds(args.request_timeout)
        .with_context(|| format!("--request-timeout {}", args.request_timeout))?;
    let shutdown_grace = Duration::try_from_secs_f64(args.shutdown_grace_sec)
        .ok()
        .filter(|_| args.shutdown_grace_sec.is_finite())
        .with_context(|| {
            format!(
                "--shutdown-grace-sec must be a number of seconds >= 0, got {}",
                args.shutdown_grace_sec
            )
        })?;
    let ramp_up = ramp_up(args, &mut warnings)?;
    let is_random = matches!(args.dataset.dataset_name.as_str(), "random");
    if is_random && args.dataset.dataset_path.is_some() {
        bail!(
            "Cannot use the 'random' dataset with --dataset-path. Please specify the appropriate \
             --dataset-name (e.g., 'sharegpt', 'custom') for your dataset file"
        );
    }
    if let Some(path) = &args.dataset.dataset_path
        && !path.exists()
    {
        bail!(
            "--dataset-path {}: no such file or directory",
            path.display()
        );
    }
    let dataset = plugin_ref(&args.dataset.dataset_name, "--dataset-name")?;
    let backend = plugin_ref(&args.backend, "--backend")?;
    args.dataset.options()?;
    let runtime = args.sandbox.runtime_config()?;
    let headers = args
        .header
        .iter()
        .map(|h| parse_header(h).with_context(|| format!("--header {h:?}")))
        .collect::<Result<Vec<_>>>()?;
    let metadata = args
        .metadata
        .iter()
        .map(|h| split_key_value(h).with_context(|| format!("--metadata {h:?}")))
        .collect::<Result<Vec<_>>>()?;
    let backend_options = args
        .backend_options
        .iter()
        .map(|h| split_key_value(h).with_context(|| format!("--backend-option {h:?}")))
        .collect::<Result<Vec<_>>>()?;
    let goodput = metrics::parse_goodput(&args.goodput).context("--goodput")?;
    let percentile_metrics = metrics::parse_percentile_metrics(
        args.percentile_metrics
            .as_deref()
            .unwrap_or(metrics::DEFAULT_PERCENTILE_METRICS),
    )
    .context("--percentile-metrics")?;
    let percentiles =
        metrics::parse_percentiles(&args.metric_percentiles).context("--metric-percentiles")?;
    let extra_body = sampling_body(args)?;
    let base_url = match &args.base_url {
        Some(u) => u.trim_end_matches('/').to_string(),
        None if args.host.contains(':') => format!("http://[{}]:{}", args.host, args.port),
        None => format!("http://{}:{}", args.host, args.port),
    };
    let flag = if args.base_url.is_some() {
        "--base-url"
    } else {
        "--host"
    };
    reqwest::Url::parse(&base_url).with_context(|| format!("{flag} {base_url:?} is not a URL"))?;
    if let Some(endpoint) = &args.endpoint {
        reqwest::Url::parse(&format!("{base_url}{endpoint}"))
            .ok()
            .filter(|_| endpoint.starts_with('/'))
            .with_context(|| {
                format!("--endpoint {endpoint:?} must be a URL path such as /v1/completions")
            })?;
    }
    check_result_dir(args)?;
    let concurrent = u64::from(args.dataset.num_prompts);
    let connections = match args.max_concurrency {
        Some(c) => limits::ConnectionNeed {
            connections: (c as u64).min(concurrent),
            flag: "--max-concurrency",
            certain: true,
        },
        None => limits::ConnectionNeed {
            // Warm-ups run first, as many at once as there are; their connections stay
            // open for the run.
            connections: concurrent.max(u64::from(args.num_warmups)),
            flag: "--num-prompts",
            certain: args.request_rate.is_infinite() && args.ramp_up_strategy.is_none(),
        },
    };
    Ok(Plan {
        base_url,
        headers,
        metadata,
        metrics: metrics::MetricsConfig {
            percentiles,
            percentile_metrics,
            goodput,
            input_tokens: args.input_tokens,
        },
        ramp_up,
        extra_body,
        backend_options,
        runtime,
        dataset,
        backend,
        request_timeout,
        shutdown_grace,
        connections,
        warnings,
    })
}

/// A positive, finite number of seconds.
fn positive_seconds(secs: f64) -> Result<Duration> {
    Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| secs.is_finite() && !d.is_zero())
        .with_context(|| format!("must be a positive number of seconds, got {secs}"))
}

/// vLLM's ramp-up checks, in its order and with its messages (naming the flags).
fn ramp_up(args: &ServeArgs, warnings: &mut Vec<String>) -> Result<Option<RampUp>> {
    let Some(strategy) = args.ramp_up_strategy else {
        if args.ramp_up_start_rps.is_some() || args.ramp_up_end_rps.is_some() {
            // vLLM ignores them silently; a run it accepts is accepted here too.
            warnings.push(
                "--ramp-up-start-rps and --ramp-up-end-rps do nothing without \
                 --ramp-up-strategy; the request rate is --request-rate"
                    .into(),
            );
        }
        return Ok(None);
    };
    if args.request_rate.is_finite() {
        bail!(
            "When using ramp-up, do not specify --request-rate. The request rate will be \
             controlled by ramp-up parameters. Please remove the --request-rate argument."
        );
    }
    let (Some(start), Some(end)) = (args.ramp_up_start_rps, args.ramp_up_end_rps) else {
        bail!(
            "When using --ramp-up-strategy, both --ramp-up-start-rps and --ramp-up-end-rps must be specified"
        );
    };
    // vLLM's "must be non-negative" check is the flags' unsigned type here.
    if start > end {
        bail!("--ramp-up-start-rps ({start}) must be less than --ramp-up-end-rps ({end})");
    }
    if strategy == RampUpArg::Exponential && start == 0 {
        bail!("For exponential ramp-up, --ramp-up-start-rps cannot be 0");
    }
    Ok(Some(RampUp {
        strategy: match strategy {
            RampUpArg::Linear => RampUpStrategy::Linear,
            RampUpArg::Exponential => RampUpStrategy::Exponential,
        },
        start_rps: f64::from(start),
        end_rps: f64::from(end),
    }))
}

/// A plugin reference, and for a file that it exists.
fn plugin_ref(spec: &str, flag: &str) -> Result<PluginRef> {
    let r = PluginRef::parse(spec).with_context(|| format!("{flag} {spec:?}"))?;
    if let PluginRef::File(path) = &r
        && !path.is_file()
    {
        bail!("{flag} {}: no such file", path.display());
    }
    Ok(r)
}

/// `--header KEY=VALUE`, checked to be a valid HTTP header.
fn parse_header(item: &str) -> Result<(String, String)> {
    let (k, v) = split_key_value(item)?;
    reqwest::header::HeaderName::from_bytes(k.as_bytes())
        .with_context(|| format!("{k:?} is not a valid header name"))?;
    reqwest::header::HeaderValue::from_str(&v)
        .with_context(|| format!("{v:?} is not a valid header value"))?;
    Ok((k, v))
}

/// When a result is to be saved, proves now that its directory can be written (by
/// creating and removing a probe file), so that a run of hours does not end in "permission
/// denied". vLLM creates `--result-dir` when missing; so does this.
fn check_result_dir(args: &ServeArgs) -> Result<()> {
    if !(args.save_result || args.append_result) {
        return Ok(());
    }
    let file_dir = args
        .result_filename
        .as_deref()
        .map(Path::new)
        .and_then(Path::parent)
        .filter(|p| !p.as_os_str().is_empty());
    let (dir, place) = match (&args.result_dir, file_dir) {
        (Some(d), Some(f)) => (d.join(f), format!("--result-dir {}", d.join(f).display())),
        (Some(d), None) => (d.clone(), format!("--result-dir {}", d.display())),
        (None, Some(f)) => (
            f.to_path_buf(),
            format!("--result-filename: directory {}", f.display()),
        ),
        (None, None) => (
            PathBuf::from("."),
            "--save-result/--append-result: the current directory".to_string(),
        ),
    };
    if args.result_dir.is_some() {
        std::fs::create_dir_all(&dir).with_context(|| format!("{place}: cannot create it"))?;
    }
    let probe = dir.join(format!(".bench-write-probe-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .with_context(|| format!("{place}: cannot write the result there"))?;
    let _ = std::fs::remove_file(&probe);
    if args.append_result
        && let Some(name) = &args.result_filename
    {
        let path = match &args.result_dir {
            Some(d) => d.join(name),
            None => PathBuf::from(name),
        };
        if path.exists() {
            std::fs::File::open(&path).with_context(|| {
                format!(
                    "--append-result: cannot read {} to append to it",
                    path.display()
                )
            })?;
        }
    }
    Ok(())
}

/// vLLM's sampling parameters merged under `--extra-body` (which wins), as a JSON object.
fn sampling_body(args: &ServeArgs) -> Result<Option<String>> {
    let mut body = serde_json::Map::new();
    let floats = [
        ("top_p", args.top_p),
        ("min_p", args.min_p),
        ("temperature", args.temperature),
        ("frequency_penalty", args.frequency_penalty),
        ("presence_penalty", args.presence_penalty),
        ("repetition_penalty", args.repetition_penalty),
    ];
    for (k, v) in floats {
        if let Some(v) = v {
            body.insert(k.into(), serde_json::json!(v));
        }
    }
    if let Some(k) = args.top_k {
        body.insert("top_k".into(), serde_json::json!(k));
    }
    if let Some(extra) = &args.extra_body {
        let v: serde_json::Value =
            serde_json::from_str(extra).context("--extra-body is not valid JSON")?;
        let serde_json::Value::Object(map) = v else {
            bail!("--extra-body must be a JSON object");
        };
        body.extend(map);
    }
    Ok((!body.is_empty()).then(|| serde_json::Value::Object(body).to_string()))
}

pub fn run(args: ServeArgs) -> Result<ExitCode> {
    let plan = plan(&args)?;
    check_system_limits(&plan.connections)?;
    for w in &plan.warnings {
        eprintln!("WARNING: {w}");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let extra_headers = plan.headers.clone();

    // A client for the model lookup; the benchmark's own client is built once the
    // backend's framing is known.
    let (model_id, model_name) = match &args.model.model {
        Some(m) => (
            m.clone(),
            args.model
                .served_model_name
                .clone()
                .unwrap_or_else(|| m.clone()),
        ),
        None => {
            println!("Model not specified, fetching first model from server...");
            let id = rt.block_on(first_model(&plan.base_url, &extra_headers))?;
            println!("First model name: {id}, first model id: {id}");
            (
                id.clone(),
                args.model.served_model_name.clone().unwrap_or(id),
            )
        }
    };
    // Before the plugins are compiled: a missing or broken tokenizer fails at once.
    let (tokenizer_id, tokenizer_flag) = match &args.model.tokenizer {
        Some(t) => (t.clone(), "--tokenizer"),
        None => (model_id.clone(), "--model (the default --tokenizer)"),
    };
    let tokenizer = Arc::new(
        Tokenizer::load(&tokenizer_id)
            .with_context(|| format!("{tokenizer_flag} {tokenizer_id:?}"))?,
    );
    let runtime = Runtime::new(plan.runtime.clone())?;

    let host = crate::runtime::HostContext {
        tokenizer: Some(tokenizer.clone()),
        seed: args.dataset.seed,
    };
    let sample = workload::SampleConfig {
        dataset: &plan.dataset,
        dataset_path: args.dataset.dataset_path.as_deref(),
        num_prompts: args.dataset.num_prompts,
        progress: !args.disable_tqdm,
    };
    let workload::Sampled {
        dataset_name,
        mut specs,
    } = workload::sample(&runtime, host.clone(), &sample, |name| {
        args.dataset.options_for(name)
    })?;
    if specs.is_empty() {
        bail!("dataset {} produced no requests", plan.dataset.display());
    }
    // vLLM re-aligns these datasets' prompts to the server's tokenizer, before the clock.
    if matches!(dataset_name.as_str(), "random" | "prefix_repetition") {
        let alignment = rt.block_on(crate::server_tokenizer::align(
            &plan.base_url,
            &model_id,
            &mut specs,
        ));
        report_alignment(&alignment);
    }
    let prefix = args
        .request_id_prefix
        .clone()
        .unwrap_or_else(|| format!("bench-{:08x}-", rand::random::<u32>()));
    workload::assign_request_ids(&mut specs, &prefix);

    let mut backend = runtime.load_backend(&plan.backend, host)?;
    let backend_name = backend.describe()?.name;
    // vLLM: the random dataset ignores EOS by default on OpenAI-compatible backends, so
    // generation runs to the requested length.
    let ignore_eos =
        args.ignore_eos || (dataset_name == "random" && backend_name.starts_with("openai"));
    backend.open(ClientConfig {
        model: model_name.clone(),
        ignore_eos,
        extra_body: plan.extra_body.clone(),
        options: plan.backend_options.clone(),
        // vLLM's request functions stream; `--no-stream` comes with the backend issue.
        stream: true,
    })?;
    let framing = match backend.framing()? {
        Framing::Sse => FramingKind::Sse,
        Framing::Ndjson => FramingKind::Ndjson,
        Framing::Raw => FramingKind::Raw,
    };
    let endpoint = match &args.endpoint {
        Some(e) => e.clone(),
        None => backend.default_path()?,
    };
    let api_url = format!("{}{}", plan.base_url, endpoint);
    let host_headers = HostHeaders {
        api_key: std::env::var("OPENAI_API_KEY")
            .ok()
            .filter(|k| !k.is_empty()),
        extra: extra_headers,
    };
    let prepared = Arc::new(workload::prepare(&mut backend, &specs, &host_headers)?);
    drop(specs);

    let schedule = schedule::build(&ScheduleConfig {
        num_requests: prepared.len(),
        request_rate: args.request_rate,
        burstiness: args.burstiness,
        ramp_up: plan.ramp_up,
        seed: args.dataset.seed,
    })?;

    let client = HttpClient::new(
        &api_url,
        framing,
        Some(plan.request_timeout),
        args.http_client,
    )
    .context("--http-client")?;
    rt.block_on(ready_and_warm_up(
        &client,
        &prepared[0],
        &mut backend,
        &args,
    ))?;

    // Raised by Ctrl-C/SIGTERM, and by the decode worker when the backend plugin cannot
    // go on; the load generator then stops releasing requests. Installed before the run is
    // announced, so a Ctrl-C after the announcement is always handled.
    let preconnect = args
        .preconnect
        .or(args.max_concurrency)
        .unwrap_or(0)
        .min(prepared.len());
    rt.block_on(client.preconnect(preconnect))
        .context("--preconnect")?;
    // The server's own counters before the clock starts (after the warm-up, whose
    // requests would otherwise count); compared with a second scrape after the run.
    let metrics_before = rt.block_on(server_metrics::scrape(&plan.base_url));
    let stop = Arc::new(StopSignal::new());
    let signalled = rt.block_on(interrupt::watch(stop.clone(), plan.shutdown_grace))?;
    println!("Starting main benchmark run...");
    match &plan.ramp_up {
        Some(r) => {
            println!(
                "Traffic ramp-up strategy: {}.",
                args.ramp_up_strategy
                    .map(|s| format!("{s:?}").to_lowercase())
                    .unwrap_or_default()
            );
            println!(
                "Will increase RPS from {} to {} RPS over the duration of the benchmark.",
                r.start_rps, r.end_rps
            );
        }
        None => println!("Traffic request rate: {}", args.request_rate),
    }
    let distribution = if args.burstiness == 1.0 {
        "Poisson process"
    } else {
        "Gamma distribution"
    };
    println!("Burstiness factor: {} ({distribution})", args.burstiness);
    match args.max_concurrency {
        Some(c) => println!("Maximum request concurrency: {c}"),
        None => println!("Maximum request concurrency: None"),
    }
    let worker = DecodeWorker::spawn_with_stop(backend, stop.clone())?;
    let transport = client.transport();
    let started_at = chrono::Local::now();
    let output = rt.block_on(load::run(
        client,
        prepared.clone(),
        &schedule.offsets,
        worker,
        stop,
        &load::RunOptions {
            max_concurrency: args.max_concurrency,
            shutdown_grace: plan.shutdown_grace,
            progress: !args.disable_tqdm,
        },
    ))?;

    let counter = |text: &str| tokenizer.count_tokens(text);
    let mut computed = metrics::calculate(
        output.records,
        output.duration,
        Some(&counter),
        &plan.metrics,
    )?;
    computed.client.cpu = Some(output.cpu);
    computed.client.http_client = Some(transport);
    computed.per_request.clock_origin_s = output.clock_origin_s;
    computed.server_cache = server_cache(metrics_before, &plan.base_url, &rt);
    for w in &computed.warnings {
        eprintln!("WARNING: {w}");
    }
    let info = report::RunInfo {
        date: chrono::Local::now(),
        started_at,
        // The plugin's own name (also for a .wasm path), so results name the API.
        backend: backend_name.clone(),
        label: args.label.clone(),
        model_id: model_id.clone(),
        tokenizer_id: Some(tokenizer_id),
        num_prompts: args.dataset.num_prompts as usize,
        request_rate: args.request_rate,
        burstiness: args.burstiness,
        max_concurrency: args.max_concurrency,
        ramp_up: plan.ramp_up,
        rps_change_events: schedule.rps_change_events.clone(),
        metadata: plan.metadata.clone(),
        args: args_record(&args)?,
    };
    print!("{}", report::console(&computed, &info));
    let interruption = output.stopped.clone().map(|reason| Interruption {
        reason,
        not_sent: output.not_sent,
        cancelled: output.cancelled,
    });
    if let Some(i) = &interruption {
        println!(
            "Benchmark interrupted ({}): {} of {} requests not sent (not counted), {} \
             cancelled after the {:.1} s grace period (counted as failed with kind '{}').",
            i.reason,
            i.not_sent,
            prepared.len(),
            i.cancelled,
            plan.shutdown_grace.as_secs_f64(),
            crate::record::FailureKind::Interrupted,
        );
    }
    let save = report::SaveOptions {
        save_result: args.save_result,
        save_detailed: args.save_detailed,
        append_result: args.append_result,
        result_dir: args.result_dir.clone(),
        result_filename: args.result_filename.clone(),
        // The contract: the PyTorch-benchmark records are always written beside
        // the result (vLLM gates them behind an environment variable).
        pytorch_format: true,
        interrupted: interruption.clone(),
    };
    if let Some(path) = report::save(&computed, &info, &save)? {
        println!(
            "Results saved to {}{}",
            path.display(),
            if interruption.is_some() {
                " (marked as interrupted)"
            } else {
                ""
            }
        );
    }
    // A signal wins: shells and schedulers read 128 + its number as "stopped by it".
    if let Some(signal) = signalled.get() {
        return Ok(ExitCode::from(signal.exit_code()));
    }
    if let Some(i) = &interruption {
        eprintln!("error: the benchmark was stopped early: {}", i.reason);
        return Ok(ExitCode::FAILURE);
    }
    if computed.completed == 0 {
        eprintln!(
            "error: every request failed ({} of {}); first error: {}",
            computed.failed,
            prepared.len(),
            computed
                .per_request
                .records
                .iter()
                .find_map(|r| r.failure().map(ToString::to_string))
                .unwrap_or_default()
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// Raises the open-file limit as far as allowed and checks that the run's connections
/// fit in it and in the ephemeral port range, before anything is loaded.
fn check_system_limits(need: &limits::ConnectionNeed) -> Result<()> {
    match limits::raise_open_file_limit() {
        Ok(limit) => {
            for w in limits::check_open_files(need, limit)? {
                eprintln!("WARNING: {w}");
            }
        }
        Err(e) => eprintln!("WARNING: cannot read the open-file limit: {e}"),
    }
    if let Some(w) = limits::check_ephemeral_ports(need, limits::ephemeral_port_range()) {
        eprintln!("WARNING: {w}");
    }
    Ok(())
}

/// Ctrl-C and SIGTERM during the measured run.
mod interrupt {
    use std::sync::{Arc, OnceLock};
    use std::time::Duration;

    use anyhow::{Context, Result};
    use tokio::signal::unix::{SignalKind, signal};

    use crate::client::stop::StopSignal;

    /// A signal that stops the run.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Signal {
        Interrupt,
        Terminate,
    }

    impl Signal {
        fn name(self) -> &'static str {
            match self {
                Signal::Interrupt => "SIGINT",
                Signal::Terminate => "SIGTERM",
            }
        }

        /// 128 + the signal number, as a shell reports a process the signal ended.
        pub fn exit_code(self) -> u8 {
            match self {
                Signal::Interrupt => 128 + 2,
                Signal::Terminate => 128 + 15,
            }
        }
    }

    /// From now on, the first SIGINT or SIGTERM raises `stop` (no more requests; those in
    /// flight get `grace`), and a second one ends the process at once with the exit code
    /// of that signal. Returns the first signal received, once there is one.
    ///
    /// Installed only for the measured run: before it (loading, warm-up) nothing is lost
    /// by dying on the spot, which is what the default handlers do.
    pub async fn watch(stop: Arc<StopSignal>, grace: Duration) -> Result<Arc<OnceLock<Signal>>> {
        let mut int = signal(SignalKind::interrupt()).context("installing a SIGINT handler")?;
        let mut term = signal(SignalKind::terminate()).context("installing a SIGTERM handler")?;
        let first = Arc::new(OnceLock::new());
        let seen = first.clone();
        tokio::spawn(async move {
            let next = async |int: &mut tokio::signal::unix::Signal,
                              term: &mut tokio::signal::unix::Signal| {
                tokio::select! {
                    _ = int.recv() => Signal::Interrupt,
                    _ = term.recv() => Signal::Terminate,
                }
            };
            let signal = next(&mut int, &mut term).await;
            let _ = seen.set(signal);
            eprintln!(
                "\n{} received: sending no more requests; requests in flight get {:.1} s to \
                 finish, then the results so far are reported and saved. Press Ctrl-C again \
                 to quit at once.",
                signal.name(),
                grace.as_secs_f64()
            );
            stop.stop(format!("{} received", signal.name()));
            let again = next(&mut int, &mut term).await;
            eprintln!("{} received again: quitting without saving.", again.name());
            std::process::exit(i32::from(again.exit_code()));
        });
        Ok(first)
    }
}

/// The command line as vLLM's `vars(args)` for the `.pytorch.json` records: snake_case
/// keys, headers redacted, an infinite rate written as "inf".
fn args_record(args: &ServeArgs) -> Result<serde_json::Map<String, serde_json::Value>> {
    let serde_json::Value::Object(mut map) = serde_json::to_value(args)? else {
        bail!("arguments did not serialize to an object");
    };
    if !args.header.is_empty() {
        map.insert("header".into(), serde_json::json!("<redacted>"));
    }
    if args.request_rate.is_infinite() {
        map.insert("request_rate".into(), serde_json::json!("inf"));
    }
    Ok(map)
}

/// The server's prefix-cache counters over the run, from a scrape of its `/metrics`
/// before the run and one now; a server without them gets a note on stderr, never an error.
fn server_cache(
    before: Result<server_metrics::Snapshot>,
    base_url: &str,
    rt: &tokio::runtime::Runtime,
) -> Option<server_metrics::ServerCache> {
    let scraped =
        before.and_then(|before| Ok((before, rt.block_on(server_metrics::scrape(base_url))?)));
    let cache = match scraped {
        Ok((before, after)) => server_metrics::ServerCache::between(&before, &after),
        Err(e) => {
            eprintln!("note: no server metrics ({e:#})");
            return None;
        }
    };
    match cache {
        Some(cache) if cache.cached_prompt_tokens > 0 => eprintln!(
            "note: the server served {} of {} prompt tokens ({:.1}%) from its prefix cache \
             during this run; its TTFTs reflect that cache",
            cache.cached_prompt_tokens,
            cache.queried_prompt_tokens,
            100.0 * cache.hit_rate()
        ),
        Some(_) => {}
        None => eprintln!("note: the server's /metrics has no prefix-cache counters bench knows"),
    }
    cache
}

/// vLLM's messages about the prompt re-alignment, with what bench adds in parentheses.
fn report_alignment(alignment: &crate::server_tokenizer::Alignment) {
    use crate::server_tokenizer::Alignment;
    match alignment {
        Alignment::NotText | Alignment::Agrees => {}
        Alignment::Unavailable(why) => {
            println!("WARNING: /tokenize unavailable, skipping alignment. ({why})");
        }
        Alignment::Realigned {
            server,
            expected,
            shortened,
            failed,
        } => {
            println!(
                "WARNING: tokenizer mismatch (server={server}, expected={expected}), \
                 re-aligning prompts."
            );
            println!(
                "Re-aligned prompts: {shortened} cut to their prompt_len in the server's \
                 tokens, {failed} kept as sampled because a /tokenize or /detokenize call \
                 failed."
            );
        }
    }
}

/// The first model the server lists (vLLM does this when --model is not given).
async fn first_model(base_url: &str, headers: &[(String, String)]) -> Result<String> {
    let client = HttpClient::new(
        &format!("{base_url}/v1/models"),
        FramingKind::Raw,
        Some(Duration::from_secs(30)),
        HttpClientKind::Reqwest,
    )?;
    let mut map = reqwest::header::HeaderMap::new();
    for (k, v) in headers {
        map.insert(
            reqwest::header::HeaderName::from_bytes(k.as_bytes())?,
            reqwest::header::HeaderValue::from_str(v)?,
        );
    }
    let v = client.get_json(base_url, "/v1/models", &map).await.context(
        "Failed to fetch models from the server. Check that the server is running and the URL is correct, or pass --model",
    )?;
    v["data"][0]["id"]
        .as_str()
        .map(str::to_string)
        .with_context(|| format!("No models found on the server at {base_url}; pass --model"))
}

/// vLLM's initial test request (when --ready-check-timeout-sec > 0) and warm-ups, both
/// before the clock starts and excluded from the statistics.
async fn ready_and_warm_up(
    client: &HttpClient,
    first: &PreparedRequest,
    backend: &mut BackendPlugin,
    args: &ServeArgs,
) -> Result<()> {
    let t0 = Instant::now();
    let check =
        |raw: &crate::client::RawResponse, backend: &mut BackendPlugin| -> crate::record::Outcome {
            let meta = crate::client::decode::RequestMeta {
                index: 0,
                request_id: first.request_id.clone(),
                prompt_len: first.prompt_len,
                expected_output_len: first.expected_output_len,
                intended_start_time: 0.0,
                dispatch: raw.start,
                concurrency_wait: Duration::ZERO,
            };
            let events = worker::decode_response(backend, raw);
            let rec = crate::client::decode::build_record(&meta, raw, events, t0);
            rec.outcome
        };
    if args.ready_check_timeout_sec > 0 {
        println!("Starting initial single prompt test run...");
        let deadline = Instant::now() + Duration::from_secs(args.ready_check_timeout_sec);
        loop {
            let raw = client.send(first).await;
            match check(&raw, backend) {
                Ok(()) => break,
                Err(e) if Instant::now() >= deadline => bail!(
                    "Initial test run failed - Please make sure benchmark arguments are correctly specified. Error: {e}"
                ),
                Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
            }
        }
        println!("Initial test run completed.");
    } else {
        println!("Skipping endpoint ready check.");
    }
    if args.num_warmups > 0 {
        println!("Warming up with {} requests...", args.num_warmups);
        let limit = args
            .max_concurrency
            .unwrap_or(usize::MAX)
            .min(args.num_warmups as usize);
        let sem = Arc::new(tokio::sync::Semaphore::new(limit));
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..args.num_warmups {
            let (client, req, sem) = (client.clone(), first.clone(), sem.clone());
            set.spawn(async move {
                let _permit = sem.acquire_owned().await;
                client.send(&req).await
            });
        }
        while set.join_next().await.is_some() {}
        println!(
            "Warmup run completed. (Warm-ups repeat the first prompt: a server prefix cache is now warm for it.)"
        );
    }
    Ok(())
}
