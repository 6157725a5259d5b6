//! `bench serve` (also the default subcommand): online serving benchmark with vLLM's
//! flags, metrics and result files.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};

use super::args::{DatasetArgs, ModelArgs, parse_interval, seconds, split_key_value};
use super::console::Console;
use super::limits;
use super::plugin_flags::{Parsed, Role, SharedValues};
use crate::benchmark::{LoadConfig, ReportConfig, ServeConfig};
use crate::client::cancellation::Cancellation;
use crate::client::endpoints::Routing;
use crate::client::{HttpClientKind, Tls};
use crate::engine::{Device, EngineConfig};
use crate::metrics;
use crate::metrics::goals::{Goal, UntilConfident};
use crate::report::SaveOptions;
use crate::runtime::PluginRef;
use crate::schedule::{RampUp, RampUpStrategy};
use crate::shard::{Shard, ShardConfig, StartAt};
use crate::targets::engine::{NativeConfig, NativeRun};
use crate::targets::http::HttpConfig;
use crate::tokenizer::hub_cache_roots_from_env;
use crate::workload::{LoraAssignment, LoraModules, TokenizerError, WorkloadConfig};

/// The flags given a value other than their default, by their name in the serialised
/// arguments (`max_concurrency`): every flag is a field, so this is what the command line
/// changed, whatever the flag's type.
pub fn given_flags(args: &ServeArgs) -> std::collections::BTreeSet<String> {
    #[derive(clap::Parser)]
    struct Defaults {
        #[command(flatten)]
        args: ServeArgs,
    }
    let defaults = <Defaults as clap::Parser>::try_parse_from(["bench"])
        .expect("bench serve parses with no flags")
        .args;
    let as_map = |a: &ServeArgs| match serde_json::to_value(a) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    let (given, defaults) = (as_map(args), as_map(&defaults));
    given
        .into_iter()
        .filter(|(k, v)| defaults.get(k) != Some(v))
        .map(|(k, _)| k)
        .collect()
}

/// The flags of `bench serve`, vLLM's by name and meaning. Numeric flags accept a leading
/// minus sign so that a negative value is refused by the flag's own parser, naming it.
#[derive(Args, Debug, Clone, serde::Serialize)]
pub struct ServeArgs {
    /// `--config` and `--dry-run`: recorded as the result's `scenario`, not as arguments.
    #[command(flatten)]
    #[serde(skip)]
    pub scenario: super::scenario::ScenarioArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub model: ModelArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub dataset: DatasetArgs,

    #[command(flatten)]
    #[serde(skip)]
    pub sandbox: super::plugin::SandboxArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub engine: super::engine_args::EngineArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub plots: super::serve_plots::ServePlotArgs,

    /// Backend plugin: a first-party name (openai, openai-chat, ...) or a path to a .wasm
    /// file; `native` runs the model in this process on the native engine instead of a
    /// server.
    #[arg(long, default_value = "openai")]
    pub backend: String,

    /// Server or API base URL, instead of --host and --port. Repeat it for replicas
    /// without a gateway: requests are spread over them (--url-selection-strategy), each
    /// is checked, warmed up and scraped for /metrics, and the result adds each one's
    /// figures (`endpoints`)
    #[arg(long, value_name = "URL", action = clap::ArgAction::Append)]
    #[serde(serialize_with = "one_or_many")]
    pub base_url: Vec<String>,

    /// With several --base-url: round-robin sends request i to URL i mod n (the same
    /// requests to the same server whatever the timing); least-outstanding sends each to
    /// the one with the fewest requests in flight. A conversation's turns stay on one
    /// server either way
    #[arg(long, value_enum, default_value_t = Routing::RoundRobin)]
    pub url_selection_strategy: Routing,

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

    /// Send each request at the time its dataset gives it (trace replay) instead of by
    /// rate; the default when the dataset gives send times. --no-self-timed uses the rate.
    #[arg(long, overrides_with = "no_self_timed")]
    pub self_timed: bool,

    /// Use the request rate even when the dataset gives send times.
    #[arg(long, overrides_with = "self_timed")]
    pub no_self_timed: bool,

    /// Multiplies the dataset's send times when self-timed (0.5 replays twice as fast).
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,

    /// Burstiness of arrivals: 1 is a Poisson process, lower is burstier, higher more uniform.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub burstiness: f64,

    /// Send for this many seconds, however many requests that takes (a soak test): at
    /// --request-rate (at rate inf, as fast as --max-concurrency lets, which it then
    /// needs), or at the trace's own times, the --num-prompts workload sent again from its
    /// first request whenever it runs out, each send under its own request id
    /// (<id>-<round> from the second round). Gaps are not rescaled to a count as vLLM
    /// rescales them; a ramp-up moves with the time passed; a trace starts over one mean
    /// gap after its last request. Requests in flight at the end have --duration-grace to
    /// finish; `num_prompts` in the result is what was sent. Example: `--duration 3600
    /// --request-rate 50`.
    #[arg(long, value_name = "SECONDS", value_parser = parse_interval)]
    #[serde(serialize_with = "super::args::optional_seconds")]
    pub duration: Option<Duration>,

    /// With --duration: how long the requests in flight when the time is up may go on
    /// (AIPerf's --benchmark-grace-period); those still running after it are cancelled,
    /// counted as `cancelled` (neither completed nor failed) and listed in
    /// `cancelled_requests`. Example: `--duration 3600 --duration-grace 120`.
    #[arg(long, value_name = "SECONDS", value_parser = parse_interval, default_value = "30",
          requires = "duration")]
    #[serde(serialize_with = "super::args::seconds")]
    pub duration_grace: Duration,

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

    /// Block size in tokens of the theoretical prefix-cache hit rate reported after the
    /// run (the share of prompt blocks an infinite cache would have served, prompts in
    /// send order, text encoded with the tokenizer); 0 leaves it out.
    #[arg(long, value_name = "TOKENS", default_value_t = crate::prefix_reuse::DEFAULT_BLOCK_SIZE)]
    pub prefix_cache_block_size: usize,

    /// ITL with one entry per token: where the response says how many tokens each chunk
    /// carried (a backend whose API reports it, or OpenAI usage with vLLM's
    /// continuous_usage_stats), a chunk's gap is split evenly among its tokens, and tokens
    /// that came with the first chunk get gaps of 0. Off by default: vLLM's ITL has one
    /// entry per chunk, however many tokens it carries. Other responses keep that.
    #[arg(long)]
    pub split_itl_by_tokens: bool,

    /// The deployment's price in US dollars per hour, e.g. --cost-per-hour 3.5 for a
    /// $3.50/h GPU instance: the result adds the run's cost (price x duration) and that
    /// whole cost per million input tokens, per million output tokens, per million tokens
    /// and per request (each takes all of it, so they do not add up), with the GPUs'
    /// energy per token beside it where GPU telemetry ran. Serve runs only: throughput and
    /// latency warn and report no cost.
    #[arg(long, value_name = "USD", value_parser = parse_price, allow_negative_numbers = true)]
    pub cost_per_hour: Option<f64>,

    /// Save the results to a JSON file.
    #[arg(long)]
    pub save_result: bool,

    /// Include per-request data (ttfts, itls, texts, errors, ...) in the result file.
    #[arg(long)]
    pub save_detailed: bool,

    /// Write each request's record to PATH (JSON lines) as it finishes, flushed at least
    /// every second, so that a run killed midway keeps what it measured: `bench merge PATH
    /// -o RESULT` makes the result of what the file holds (marked interrupted when the run
    /// did not end; of a run that ended, the run's own result). One run of one process:
    /// refused with --num-runs, --workers and --shard.
    #[arg(long, value_name = "PATH")]
    pub record_file: Option<PathBuf>,

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

    /// Accepted as `vllm bench serve` accepts it: its request functions never read it,
    /// so it changes no request there, nor here.
    #[arg(long)]
    pub use_beam_search: bool,

    /// Beside the run, send one-token text probes ("Hi") one after another at this rate
    /// (probes per second), ignoring --max-concurrency, and report their latency apart
    /// from the run's (vLLM's probe_* keys): how long the load makes an unrelated request
    /// wait. 0 sends none.
    #[arg(
        long,
        default_value_t = 0.0,
        value_name = "RATE",
        allow_negative_numbers = true
    )]
    pub probe_request_rate: f64,

    /// Start the server's profiler before the run and stop it after (POST /start_profile
    /// and /stop_profile, as vLLM does; a vLLM server needs --profiler-config). A call that
    /// fails is a warning.
    #[arg(long)]
    pub profile: bool,

    /// Load no tokenizer. Output tokens are then the server's usage (1 per request that
    /// reports none, as in vLLM), the token counts and throughputs that need a tokenizer
    /// are left out of the console, and a dataset that needs a tokenizer is an error.
    #[arg(long)]
    pub skip_tokenizer_init: bool,

    /// LoRA adapters the server was started with: each request goes to one of them (the
    /// request's model is the adapter's name), chosen as --lora-assignment says.
    #[arg(long, num_args = 1.., value_name = "NAME")]
    pub lora_modules: Option<Vec<String>>,

    /// How requests are spread over --lora-modules: `random` (a seeded choice per request:
    /// the same --seed, the same assignment) or `round-robin` (request i gets adapter i
    /// modulo their number). The turns of a conversation keep its first turn's adapter.
    #[arg(long, value_enum, default_value_t = LoraAssignmentArg::Random)]
    pub lora_assignment: LoraAssignmentArg,

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

    /// Accept the server's certificate without checking it (a self-signed or expired one)
    /// on https:// URLs: the traffic stays encrypted, but nothing says who answers. Applies
    /// to every connection bench makes to the server (requests, /v1/models, /tokenize,
    /// /metrics, the profiler).
    #[arg(long)]
    pub insecure: bool,

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

    /// Cancel this percentage of the requests (0 to 100) on purpose, as clients that give
    /// up do (a user closing a tab, an agent's timeout; AIPerf's flag): a chosen request's
    /// connection is closed --request-cancellation-delay seconds after the request was
    /// sent, unless its response ended first. Which requests is a seeded choice (--seed:
    /// the same seed, the same requests). Cancelled requests are counted on their own
    /// (`cancelled` in the result), neither completed nor failed, and left out of the
    /// latency and throughput figures. Servers only.
    #[arg(long, value_name = "PERCENT")]
    pub request_cancellation_rate: Option<f64>,

    /// With --request-cancellation-rate: seconds from a request sent whole to its
    /// cancellation (default 0: as soon as it is sent). bench's own HTTP client counts
    /// from the last byte written; over https (reqwest) from the request's start.
    #[arg(long, value_name = "SECONDS", requires = "request_cancellation_rate")]
    pub request_cancellation_delay: Option<f64>,

    /// Also read the server's Prometheus /metrics every SECONDS during the run (off by
    /// default), for the peaks of its gauges (KV-cache usage, requests running and
    /// waiting) and `server_metrics_timeline` in the result. The reads are a task of their
    /// own over one connection, each given up after 80% of the interval; a failed one is
    /// skipped.
    #[arg(long, value_name = "SECONDS", value_parser = parse_interval)]
    pub server_metrics_interval: Option<Duration>,

    /// Do not read the server's /metrics at all (by default it is read before and after
    /// the run, outside the clock).
    #[arg(long, conflicts_with = "server_metrics_interval")]
    pub no_server_metrics: bool,

    /// Run the benchmark this many times in a row (the same workload and settings), each
    /// run saved to its own result file (-run1, -run2, ... before .json), then print the
    /// mean, standard deviation and coefficient of variation of every measured figure over
    /// the runs, saved beside them as <name>-summary.json (bench compare reads it as the
    /// run-to-run noise). A stopped run ends the series; the summary counts the runs
    /// before it.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub num_runs: u32,

    /// Keep sending until the 95% confidence interval of FIGURE lies within REL of it,
    /// then stop: FIGURE is mean_, median_ or pNN_ of ttft, tpot, itl or e2el (as the
    /// result names it, p99_ttft for p99_ttft_ms), REL a percentage or fraction
    /// (p99_ttft:5%). Repeatable: the run stops once every goal is met. Looked at every
    /// 0.2 s from the 30th completed request; requests in flight then finish, unhurried.
    /// --num-prompts is the most it sends, and --until-confident-max-duration ends it if
    /// the goals are not met by then. The result's `until_confident` says whether each
    /// goal holds for the result's own figures (`ci95`) and what ended the run.
    #[arg(long, value_name = "FIGURE:REL", value_parser = parse_goal)]
    pub until_confident: Vec<String>,

    /// With --until-confident: stop after this many seconds whether or not the goals are
    /// met (the result then says they were not).
    #[arg(long, value_name = "SECONDS", default_value = "600", value_parser = parse_interval, requires = "until_confident")]
    #[serde(serialize_with = "seconds")]
    pub until_confident_max_duration: Duration,

    /// Serve the run's figures so far as Prometheus (OpenMetrics) text on
    /// http://--metrics-host:PORT/metrics while the run goes on: requests sent, completed,
    /// failed (by kind) and in flight, output tokens, and TTFT, TPOT, ITL and E2EL at the
    /// 0.5, 0.9, 0.95 and 0.99 quantiles (`bench_ttft_seconds{quantile="0.99"}`), for the
    /// Prometheus a team already runs. Port 0 picks a free one (the run says which).
    /// Example: `--metrics-port 9464`, scraped as `curl http://127.0.0.1:9464/metrics`.
    #[arg(long, value_name = "PORT", help_heading = "Observability")]
    pub metrics_port: Option<u16>,

    /// The address --metrics-port listens on (0.0.0.0 for a Prometheus on another host).
    #[arg(
        long,
        value_name = "HOST",
        default_value = "127.0.0.1",
        requires = "metrics_port",
        help_heading = "Observability"
    )]
    pub metrics_host: std::net::IpAddr,

    #[command(flatten)]
    #[serde(flatten)]
    pub otlp: super::otlp::OtlpArgs,

    /// How the run is shown. `console`: vLLM's lines and progress bar. `dashboard`: while
    /// the measured run goes on, a full-screen view redrawn 4 times a second: requests
    /// sent, completed, failed and in flight, throughput so far (requests/s, output
    /// tokens/s), TTFT, TPOT, ITL and E2EL percentiles so far, failures by kind, and the
    /// warnings of the run; it gives way to the normal result block when the run ends.
    /// Needs standard output and standard error to be a terminal: otherwise a warning,
    /// and the console. Example: `bench serve --ui dashboard --base-url ... --num-prompts 1000`.
    #[arg(
        long,
        value_enum,
        default_value = "console",
        help_heading = "Observability"
    )]
    #[serde(skip)]
    pub ui: super::dashboard::Ui,

    /// Do not sample this machine's GPUs during the run (by default utilisation, memory,
    /// power and energy are read every 100 ms where NVIDIA's management library is
    /// present, giving energy per output token; absent, one note says so).
    #[arg(long)]
    pub no_gpu_telemetry: bool,

    /// Send only shard I of N of the run (I from 0): the requests whose index modulo N is
    /// I, each at its time in the whole run's schedule (same --seed, same workload). Each
    /// shard writes its records (--shard-output); `bench merge` makes them one result.
    #[arg(long, value_name = "I/N", help_heading = "Scaling out")]
    #[serde(skip)]
    pub shard: Option<Shard>,

    /// The shards' shared start, a wall-clock time: RFC 3339 (2026-11-27T17:00:00Z) or
    /// @UNIX_SECONDS. Every shard's schedule counts from it; a shard ready late starts at
    /// once, and its lag shows in its diagnostics. Without it, each shard starts when ready.
    #[arg(
        long,
        value_name = "TIME",
        requires = "shard",
        help_heading = "Scaling out"
    )]
    #[serde(skip)]
    pub start_at: Option<StartAt>,

    /// Where a shard writes its records for `bench merge` (default:
    /// bench-shard-I-of-N.json in --result-dir, else here); `-` prints them to stdout as
    /// one line starting `bench-shard-result: ` (for `kubectl logs`).
    #[arg(
        long,
        value_name = "PATH",
        requires = "shard",
        help_heading = "Scaling out"
    )]
    #[serde(skip)]
    pub shard_output: Option<PathBuf>,

    /// Run the benchmark as N client processes on this machine, each a shard of the run
    /// started together, merged into one result as `bench merge` does: for a client
    /// machine with more cores than one process can use (see `bench selfcheck`).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..),
        conflicts_with = "shard",
        help_heading = "Scaling out"
    )]
    #[serde(skip)]
    pub workers: u32,
}

/// `--server-metrics-interval`: a positive number of seconds.
/// `--cost-per-hour`: refused unless a number of dollars, 0 or more, so that clap's
/// message names the flag before any work.
fn parse_price(s: &str) -> Result<f64, String> {
    let price: f64 = s
        .parse()
        .map_err(|_| format!("expected US dollars per hour, got {s:?}"))?;
    metrics::cost::check_price(price)
        .map(|()| price)
        .map_err(|e| e.to_string())
}

/// An `--until-confident` goal, checked here and kept as written (the arguments are
/// serialised into the result as given).
fn parse_goal(s: &str) -> Result<String, String> {
    s.parse::<Goal>()
        .map(|_| s.to_owned())
        .map_err(|e| e.to_string())
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LoraAssignmentArg {
    Random,
    RoundRobin,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RampUpArg {
    Linear,
    Exponential,
}

/// What `serve`'s flags resolve to before any work.
pub(super) struct Resolved {
    pub(super) config: ServeConfig,
    /// The most connections the run may hold open at once.
    connections: limits::ConnectionNeed,
    /// Flags vLLM accepts but that do nothing here, said once before the run.
    pub(super) warnings: Vec<String>,
}

/// Checks every flag before any work, with messages naming the flag, and resolves them
/// (with `OPENAI_API_KEY` and the Hugging Face cache variables) into the library's
/// configuration, one constructor per piece of it. Nothing here reads more than file
/// metadata, so a bad command line fails in milliseconds; the only side effect is creating
/// `--result-dir` (as vLLM does) to prove it is writable.
pub(super) fn resolve(args: &ServeArgs, plugins: &Parsed) -> Result<Resolved> {
    // Every flag is named here, by the piece that reads it: a flag added to `ServeArgs`
    // and handled nowhere does not compile.
    let ServeArgs {
        // the ServeConfig itself (below)
        model,
        // workload_config
        dataset: _,
        sandbox: _,
        request_id_prefix: _,
        lora_modules: _,
        lora_assignment: _,
        disable_tqdm: _,
        // target (the native engine's flags) and http_config
        engine: _,
        backend: _,
        base_url: _,
        url_selection_strategy: _,
        host: _,
        port: _,
        endpoint: _,
        header: _,
        ignore_eos: _,
        temperature: _,
        top_p: _,
        top_k: _,
        min_p: _,
        frequency_penalty: _,
        presence_penalty: _,
        repetition_penalty: _,
        extra_body: _,
        backend_options: _,
        request_timeout: _,
        http_client: _,
        insecure: _,
        preconnect: _,
        probe_request_rate: _,
        server_metrics_interval: _,
        no_server_metrics: _,
        // load_config
        max_concurrency: _,
        request_rate: _,
        self_timed: _,
        no_self_timed: _,
        time_scale: _,
        burstiness: _,
        duration: _,
        duration_grace: _,
        ramp_up_strategy: _,
        ramp_up_start_rps: _,
        ramp_up_end_rps: _,
        ready_check_timeout_sec: _,
        num_warmups: _,
        shutdown_grace_sec: _,
        request_cancellation_rate: _,
        request_cancellation_delay: _,
        profile: _,
        no_gpu_telemetry: _,
        // metrics_config
        percentile_metrics: _,
        metric_percentiles: _,
        goodput: _,
        input_tokens: _,
        prefix_cache_block_size: _,
        split_itl_by_tokens: _,
        cost_per_hour: _,
        // report_config
        save_result: _,
        save_detailed: _,
        record_file: _,
        append_result: _,
        result_dir: _,
        result_filename: _,
        metadata: _,
        label: _,
        scenario: _,
        // shard_config
        shard: _,
        start_at: _,
        // the ServeConfig itself
        skip_tokenizer_init,
        // read after the run or around it: the plots (serve_plots::write), the OTLP
        // export (otlp::export, its endpoint checked in run), --num-runs (run),
        // --shard-output (run), --workers (cli::run_serve), --ui (run's console)
        plots: _,
        otlp: _,
        num_runs: _,
        until_confident: _,
        until_confident_max_duration: _,
        metrics_port: _,
        metrics_host: _,
        ui: _,
        shard_output: _,
        workers: _,
        // accepted as `vllm bench serve` accepts it, read by nothing (see its help)
        use_beam_search: _,
    } = args;
    let ModelArgs {
        model,
        served_model_name,
        tokenizer,
        // checked before (cli::run_serve: `--tokenizer-mode` is vLLM's; bench has one)
        tokenizer_mode: _,
    } = model;
    let mut warnings = Vec::new();
    check_numbers(args)?;
    let workload = workload_config(args, plugins, &mut warnings)?;
    let (native, backend) = target(args, &mut warnings)?;
    let shard = shard_config(args)?;
    // A shard holds its part of the cap (the parts add up to it).
    let max_concurrency = match (shard, args.max_concurrency) {
        (Some(shard), Some(cap)) => Some(shard.shard.max_concurrency(cap)?),
        _ => args.max_concurrency,
    };
    let load = load_config(args, max_concurrency, &mut warnings)?;
    let http = http_config(args, plugins, backend, shard, max_concurrency)?;
    let metrics = metrics_config(args)?;
    check_result_dir(args)?;
    let report = report_config(args)?;
    Ok(Resolved {
        config: ServeConfig {
            model: model.clone(),
            served_model_name: served_model_name.clone(),
            tokenizer: tokenizer.clone(),
            skip_tokenizer_init: *skip_tokenizer_init,
            native,
            workload,
            http,
            load,
            metrics,
            report,
            shard,
        },
        connections: connection_need(args),
        warnings,
    })
}

/// The numbers that must be positive (or, for some, may be 0 or infinite).
fn check_numbers(args: &ServeArgs) -> Result<()> {
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
    if !(args.time_scale > 0.0 && args.time_scale.is_finite()) {
        bail!(
            "--time-scale must be a positive number, got {}",
            args.time_scale
        );
    }
    if !(args.burstiness > 0.0 && args.burstiness.is_finite()) {
        bail!(
            "--burstiness must be a positive number, got {}",
            args.burstiness
        );
    }
    if !(args.probe_request_rate.is_finite() && args.probe_request_rate >= 0.0) {
        bail!(
            "--probe-request-rate must be a number of probes per second >= 0 (0 sends none), \
             got {}",
            args.probe_request_rate
        );
    }
    Ok(())
}

/// What is sampled: the dataset plugin with its options (its own flags and the general
/// ones, then `--dataset-option`, which wins), the request ids, LoRA adapters, the
/// sandbox's limits.
fn workload_config(
    args: &ServeArgs,
    plugins: &Parsed,
    warnings: &mut Vec<String>,
) -> Result<WorkloadConfig> {
    let DatasetArgs {
        dataset_name,
        num_prompts,
        seed,
        // read by the methods below: resolved_dataset_path, shared_values (the plugins'
        // shared flags), template_kwargs, option_pairs
        dataset_path: _,
        input_len: _,
        output_len: _,
        chat_template_kwargs: _,
        dataset_options: _,
        // accepted as vLLM accepts it; bench runs no repository code (see its help)
        trust_remote_code: _,
    } = &args.dataset;
    let hub_cache = hub_cache_roots_from_env();
    let dataset_path = args.dataset.resolved_dataset_path(&hub_cache)?;
    let dataset = plugin_ref(dataset_name, "--dataset-name")?;
    let shared = args.dataset.shared_values();
    let mut options = plugins.options(Role::Dataset, shared);
    options.extend(args.dataset.option_pairs()?);
    warnings.extend(plugins.warnings(shared));
    Ok(WorkloadConfig {
        dataset,
        dataset_path,
        num_prompts: *num_prompts,
        seed: *seed,
        options,
        request_id_prefix: Some(
            args.request_id_prefix
                .clone()
                .unwrap_or_else(|| default_request_id_prefix(args)),
        ),
        hub_cache,
        chat_template_kwargs: args.dataset.template_kwargs()?,
        lora: args.lora_modules.clone().map(|names| LoraModules {
            names,
            assignment: match args.lora_assignment {
                LoraAssignmentArg::Random => LoraAssignment::Random,
                LoraAssignmentArg::RoundRobin => LoraAssignment::RoundRobin,
            },
        }),
        runtime: args.sandbox.runtime_config()?,
        progress: !args.disable_tqdm,
    })
}

/// What the requests go to: the native engine (`--backend native`, with its flags) or a
/// backend plugin, whose run leaves the engine's flags unused (each a warning).
fn target(
    args: &ServeArgs,
    warnings: &mut Vec<String>,
) -> Result<(Option<NativeConfig>, PluginRef)> {
    if args.backend == super::plugin_flags::NATIVE_BACKEND {
        let native = native_config(args, warnings)?;
        // No plugin: the HTTP settings are not used.
        return Ok((
            Some(native),
            PluginRef::Builtin(super::plugin_flags::NATIVE_BACKEND.into()),
        ));
    }
    let given = given_flags(args);
    for (key, flag) in super::engine_args::ENGINE_FLAGS {
        if given.contains(*key) {
            warnings.push(format!(
                "{flag} is ignored: it configures the native engine (--backend native)"
            ));
        }
    }
    Ok((None, plugin_ref(&args.backend, "--backend")?))
}

/// The server and how requests reach it: its URL, the backend plugin with its options,
/// headers, sampling fields, timeouts, TLS, the probes and the `/metrics` scrapes.
fn http_config(
    args: &ServeArgs,
    plugins: &Parsed,
    backend: PluginRef,
    shard: Option<ShardConfig>,
    max_concurrency: Option<usize>,
) -> Result<HttpConfig> {
    let request_timeout = positive_seconds(args.request_timeout)
        .with_context(|| format!("--request-timeout {}", args.request_timeout))?;
    let headers = args
        .header
        .iter()
        .map(|h| parse_header(h).with_context(|| format!("--header {h:?}")))
        .collect::<Result<Vec<_>>>()?;
    let mut backend_options = plugins.options(Role::Backend, SharedValues::default());
    for item in &args.backend_options {
        backend_options
            .push(split_key_value(item).with_context(|| format!("--backend-option {item:?}"))?);
    }
    let extra_body = sampling_body(args)?;
    let base_urls = if args.base_url.is_empty() {
        let url = if args.host.contains(':') {
            format!("http://[{}]:{}", args.host, args.port)
        } else {
            format!("http://{}:{}", args.host, args.port)
        };
        reqwest::Url::parse(&url).with_context(|| format!("--host {url:?} is not a URL"))?;
        vec![url]
    } else {
        let mut urls: Vec<String> = Vec::with_capacity(args.base_url.len());
        for given in &args.base_url {
            let url = given.trim_end_matches('/').to_string();
            reqwest::Url::parse(&url)
                .with_context(|| format!("--base-url {given:?} is not a URL"))?;
            anyhow::ensure!(
                !urls.contains(&url),
                "--base-url {given:?} is given twice: each server is one endpoint"
            );
            urls.push(url);
        }
        urls
    };
    let base_url = &base_urls[0];
    if let Some(endpoint) = &args.endpoint {
        reqwest::Url::parse(&format!("{base_url}{endpoint}"))
            .ok()
            .filter(|_| endpoint.starts_with('/'))
            .with_context(|| {
                format!("--endpoint {endpoint:?} must be a URL path such as /v1/completions")
            })?;
    }
    Ok(HttpConfig {
        base_urls,
        routing: args.url_selection_strategy,
        endpoint: args.endpoint.clone(),
        backend,
        backend_options,
        ignore_eos: args.ignore_eos,
        extra_body,
        headers,
        api_key: std::env::var("OPENAI_API_KEY")
            .ok()
            .filter(|k| !k.is_empty()),
        request_timeout,
        http_client: args.http_client,
        tls: if args.insecure {
            Tls::Insecure
        } else {
            Tls::Verify
        },
        preconnect: args.preconnect.or(max_concurrency).unwrap_or(0),
        // One process sends the probes of a sharded run: shard 0.
        probe_request_rate: (args.probe_request_rate > 0.0
            && shard.is_none_or(|s| s.shard.index == 0))
        .then_some(args.probe_request_rate),
        server_metrics: crate::server_metrics::ScrapeConfig {
            enabled: !args.no_server_metrics,
            interval: args.server_metrics_interval,
        },
    })
}

/// When and how many requests are sent: the rate, its ramp-up and burstiness, the cap,
/// the ready check and warm-ups, the grace at a stop, `--profile` and GPU telemetry.
fn load_config(
    args: &ServeArgs,
    max_concurrency: Option<usize>,
    warnings: &mut Vec<String>,
) -> Result<LoadConfig> {
    let shutdown_grace = Duration::try_from_secs_f64(args.shutdown_grace_sec)
        .ok()
        .filter(|_| args.shutdown_grace_sec.is_finite())
        .with_context(|| {
            format!(
                "--shutdown-grace-sec must be a number of seconds >= 0, got {}",
                args.shutdown_grace_sec
            )
        })?;
    Ok(LoadConfig {
        request_rate: args.request_rate,
        burstiness: args.burstiness,
        ramp_up: ramp_up(args, warnings)?,
        max_concurrency,
        ready_check: (args.ready_check_timeout_sec > 0)
            .then(|| Duration::from_secs(args.ready_check_timeout_sec)),
        warm_ups: args.num_warmups,
        shutdown_grace,
        self_timed: match (args.self_timed, args.no_self_timed) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        },
        time_scale: args.time_scale,
        profile: args.profile,
        gpu_telemetry: !args.no_gpu_telemetry,
        cancellation: cancellation(args)?,
        until_confident: until_confident(args),
        metrics_addr: args
            .metrics_port
            .map(|port| std::net::SocketAddr::new(args.metrics_host, port)),
        duration: args.duration,
        duration_grace: args.duration_grace,
    })
}

/// `--until-confident`'s goals (checked by the flag's parser) and deadline.
fn until_confident(args: &ServeArgs) -> Option<UntilConfident> {
    let goals: Vec<Goal> = args
        .until_confident
        .iter()
        .filter_map(|g| g.parse().ok())
        .collect();
    (!goals.is_empty()).then_some(UntilConfident {
        goals,
        max_duration: args.until_confident_max_duration,
    })
}

/// `--request-cancellation-rate` and `-delay`: the share of requests the client cancels on
/// purpose, and when.
fn cancellation(args: &ServeArgs) -> Result<Option<Cancellation>> {
    let Some(percent) = args.request_cancellation_rate else {
        return Ok(None);
    };
    if !(0.0..=100.0).contains(&percent) {
        bail!("--request-cancellation-rate is a percentage from 0 to 100, got {percent}");
    }
    let seconds = args.request_cancellation_delay.unwrap_or(0.0);
    let delay = Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|_| seconds.is_finite())
        .with_context(|| {
            format!("--request-cancellation-delay must be a number of seconds >= 0, got {seconds}")
        })?;
    Ok(Some(Cancellation {
        fraction: percent / 100.0,
        delay,
        seed: args.dataset.seed,
    }))
}

/// Which statistics are reported, and how tokens are counted.
fn metrics_config(args: &ServeArgs) -> Result<metrics::MetricsConfig> {
    let mut config = metrics::MetricsConfig {
        percentiles: metrics::parse_percentiles(&args.metric_percentiles)
            .context("--metric-percentiles")?,
        percentile_metrics: metrics::parse_percentile_metrics(
            args.percentile_metrics
                .as_deref()
                .unwrap_or(metrics::DEFAULT_PERCENTILE_METRICS),
        )
        .context("--percentile-metrics")?,
        goodput: metrics::parse_goodput(&args.goodput).context("--goodput")?,
        input_tokens: args.input_tokens,
        prefix_block_size: args.prefix_cache_block_size,
        split_itl_by_tokens: args.split_itl_by_tokens,
        cost_per_hour_usd: args.cost_per_hour,
    };
    if let Some(goals) = until_confident(args) {
        goals.report_in(&mut config);
    }
    Ok(config)
}

/// What the result says about itself and where it is saved.
fn report_config(args: &ServeArgs) -> Result<ReportConfig> {
    let mut metadata = args
        .metadata
        .iter()
        .map(|h| {
            let (key, value) = split_key_value(h).with_context(|| format!("--metadata {h:?}"))?;
            Ok((key, serde_json::Value::String(value)))
        })
        .collect::<Result<Vec<_>>>()?;
    metadata.extend(args.scenario.record());
    Ok(ReportConfig {
        label: args.label.clone(),
        metadata,
        command_line: args_record(args)?,
        save: SaveOptions {
            // A client process of `--workers` writes its records (`--shard-output`) for
            // its parent, which merges and saves the run's one result.
            save_result: args.save_result && !is_worker(),
            save_detailed: args.save_detailed,
            append_result: args.append_result && !is_worker(),
            result_dir: args.result_dir.clone(),
            result_filename: args.result_filename.clone(),
            // The contract: the PyTorch-benchmark records are always written
            // beside the result (vLLM gates them behind an environment variable).
            pytorch_format: true,
            interrupted: None,
            run_suffix: None,
        },
        record_file: args.record_file.clone(),
    })
}

/// The most connections the run may hold open at once, for the open-file check.
fn connection_need(args: &ServeArgs) -> limits::ConnectionNeed {
    let concurrent = u64::from(args.dataset.num_prompts);
    match args.max_concurrency {
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
    }
}

/// The environment variable by which `--workers` tells its client processes that they are
/// its shards (the parent saves the merged result, and draws no progress bar for them).
pub(super) const WORKER_ENV: &str = "BENCH_WORKER_OF";

/// vLLM's default request-id prefix, `bench-` and 8 random hex digits; for a shard, 8 hex
/// digits every shard of the run computes alike (from `--start-at` and `--seed`), so that
/// the shards' requests are one workload's (the merge checks their ids).
fn default_request_id_prefix(args: &ServeArgs) -> String {
    let digits = match (args.shard, args.start_at) {
        (Some(_), Some(StartAt::At(at))) => {
            let at = at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            let mut hash = std::hash::DefaultHasher::new();
            std::hash::Hash::hash(&(at.as_nanos(), args.dataset.seed), &mut hash);
            std::hash::Hasher::finish(&hash) as u32
        }
        (Some(_), _) => args.dataset.seed as u32,
        (None, _) => rand::random::<u32>(),
    };
    format!("bench-{digits:08x}-")
}

/// Whether this process is a client process of `--workers`.
pub(super) fn is_worker() -> bool {
    std::env::var_os(WORKER_ENV).is_some()
}

/// `--shard` with what goes with it, checked against the flags a shard cannot take.
fn shard_config(args: &ServeArgs) -> Result<Option<ShardConfig>> {
    let Some(shard) = args.shard else {
        return Ok(None);
    };
    if !is_worker() {
        if args.save_result || args.append_result {
            bail!(
                "--shard: a shard writes its records (--shard-output), not a result; \
                 `bench merge SHARDS... -o RESULT` saves the run's result"
            );
        }
        if args.plots.plot_timeline || args.plots.plot_dataset_stats {
            bail!("--shard: a shard draws no figures; draw them from the merged result");
        }
    }
    if args.num_runs > 1 {
        bail!("--shard and --workers run one run: leave out --num-runs");
    }
    if args.record_file.is_some() {
        bail!(
            "--record-file with --shard or --workers: a shard writes its records with \
             --shard-output, and `bench merge` makes the run's result of them"
        );
    }
    if !args.until_confident.is_empty() {
        bail!(
            "--until-confident judges the figures of the whole run, which no shard or worker \
             process sees: leave it out with --shard and --workers"
        );
    }
    if matches!(args.start_at, Some(StartAt::Gate)) && !is_worker() {
        bail!(
            "--start-at gate is how --workers starts its client processes; \
             give a time (RFC 3339 or @UNIX_SECONDS)"
        );
    }
    Ok(Some(ShardConfig {
        shard,
        start_at: args.start_at,
        max_concurrency: args.max_concurrency,
    }))
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

/// `bench serve` in this process (`--workers N` is [`super::workers`]'s, which runs N of
/// these as client processes).
pub fn run(args: ServeArgs, plugins: &Parsed) -> Result<ExitCode> {
    let Resolved {
        config,
        connections,
        warnings,
    } = resolve(&args, plugins)?;
    check_system_limits(&connections)?;
    for w in &warnings {
        eprintln!("WARNING: {w}");
    }
    // A bad --otlp-endpoint or --otlp-header fails now, not after the run.
    let otlp = super::otlp::exporter(&args.otlp)?;
    let mut console = Console::new(
        !args.disable_tqdm && !is_worker(),
        config.load.shutdown_grace,
    )
    .with_ui(args.ui);
    if args.num_runs > 1 {
        console = console.for_series()?;
    }
    let runs = bench_study::runs::serve_runs(
        &config,
        args.num_runs as usize,
        &mut console,
        |run, outcome| match is_worker() {
            // The parent draws and exports them from the merged result.
            true => Ok(()),
            false => {
                super::serve_plots::write(&args.plots, run, outcome)?;
                super::otlp::export(otlp.as_ref(), run, outcome);
                Ok(())
            }
        },
    )
    .map_err(|e| name_the_tokenizer_flag(e, &args.model))?;
    if let Some(doc) = &runs.last.shard {
        write_shard(&args, doc)?;
    }
    if args.num_runs > 1 && runs.summary.runs > 0 {
        print!("{}", runs.summary.table());
        if let Some(path) = &runs.summary_saved {
            println!("Runs summary saved to {}", path.display());
        }
    }
    Ok(super::console::exit_code(&runs.last))
}

/// Writes a shard's records where `--shard-output` says.
fn write_shard(args: &ServeArgs, doc: &crate::shard::ShardDoc) -> Result<()> {
    match args.shard_output.as_deref() {
        Some(path) if path == Path::new("-") => {
            use std::io::Write;
            let json = doc.to_json()?;
            let mut out = std::io::stdout().lock();
            writeln!(out, "{}{json}", crate::shard::LOG_PREFIX)
                .and_then(|()| out.flush())
                .context("--shard-output -: writing the records to stdout")
        }
        path => {
            let path = match path {
                Some(path) => path.to_path_buf(),
                None => {
                    let name = format!(
                        "bench-shard-{}-of-{}.json",
                        doc.shard.index, doc.shard.count
                    );
                    args.result_dir
                        .as_deref()
                        .unwrap_or(Path::new("."))
                        .join(name)
                }
            };
            doc.write(&path)
                .with_context(|| format!("--shard-output {}", path.display()))?;
            if !is_worker() {
                println!("Shard {} records saved to {}", doc.shard, path.display());
            }
            Ok(())
        }
    }
}

/// A tokenizer that did not load, named by the flag it came from (`--tokenizer`, or
/// `--model` when it defaulted to the model); other errors as they are.
fn name_the_tokenizer_flag(e: anyhow::Error, model: &ModelArgs) -> anyhow::Error {
    match e.downcast::<TokenizerError>() {
        Ok(TokenizerError { id, source }) => {
            let flag = match model.tokenizer {
                Some(_) => "--tokenizer",
                None => "--model (the default --tokenizer)",
            };
            source.context(format!("{flag} {id:?}"))
        }
        Err(e) => e,
    }
}

/// The native engine's configuration from `serve`'s flags (`--backend native`): the
/// engine's flags, and the sampling flags it honours (vLLM's offline sampling, temperature
/// 1.0 and top-p 1.0, unless given). Flags that only mean something to a server are
/// warned about; sampling flags the engine does not implement are refused.
pub fn native_config(args: &ServeArgs, warnings: &mut Vec<String>) -> Result<NativeConfig> {
    let given = given_flags(args);
    for (key, flag) in SERVER_ONLY {
        if given.contains(*key) {
            warnings.push(format!(
                "{flag} is ignored: --backend native runs the model in this process"
            ));
        }
    }
    for (key, flag, why) in NOT_ON_THE_ENGINE {
        if given.contains(*key) {
            warnings.push(format!("{flag} is ignored with --backend native: {why}"));
        }
    }
    if args.shard.is_some() || args.start_at.is_some() || args.shard_output.is_some() {
        bail!(
            "--shard, --start-at and --shard-output split a run against a server over \
             processes; --backend native runs the model in this one process"
        );
    }
    if args.request_cancellation_rate.is_some() {
        bail!(
            "--request-cancellation-rate closes the connections of requests to a server; \
             --backend native has none (its requests run in this process)"
        );
    }
    let engine = &args.engine;
    let device: Device = engine
        .device
        .parse()
        .map_err(|e| anyhow::anyhow!("--device {}: {e}", engine.device))?;
    if engine.max_num_seqs == 0 {
        bail!("--max-num-seqs must be at least 1");
    }
    if engine.max_num_batched_tokens == 0 {
        bail!("--max-num-batched-tokens must be at least 1");
    }
    if engine.threads == Some(0) {
        bail!("--threads must be at least 1");
    }
    let unsupported = [
        ("--min-p", args.min_p.is_some()),
        ("--frequency-penalty", args.frequency_penalty.is_some()),
        ("--presence-penalty", args.presence_penalty.is_some()),
        ("--repetition-penalty", args.repetition_penalty.is_some()),
        ("--extra-body", args.extra_body.is_some()),
    ];
    if let Some((flag, _)) = unsupported.iter().find(|(_, given)| *given) {
        bail!("{flag}: the native engine samples with --temperature, --top-p and --top-k only");
    }
    Ok(NativeConfig {
        engine: EngineConfig {
            device,
            max_num_seqs: engine.max_num_seqs,
            max_num_batched_tokens: engine.max_num_batched_tokens,
            max_model_len: engine.max_model_len,
            threads: engine.threads,
            requantize: !engine.no_requantize,
            ..EngineConfig::default()
        },
        run: NativeRun {
            temperature: args.temperature.unwrap_or(1.0) as f32,
            top_p: args.top_p.unwrap_or(1.0) as f32,
            top_k: match args.top_k {
                None | Some(-1) => 0,
                Some(k) if k > 0 => k as usize,
                Some(k) => bail!("--top-k must be -1 (off) or positive, got {k}"),
            },
            // `bench serve`'s flag; the offline commands always ignore EOS, as vLLM's.
            ignore_eos: args.ignore_eos,
            detokenize: true,
            seed: args.dataset.seed,
        },
    })
}

/// `bench serve`'s flags that only a server's requests read (by their name in the
/// serialised arguments, then as typed): given with `--backend native`, each is a warning.
const SERVER_ONLY: &[(&str, &str)] = &[
    ("base_url", "--base-url"),
    ("url_selection_strategy", "--url-selection-strategy"),
    ("host", "--host"),
    ("port", "--port"),
    ("endpoint", "--endpoint"),
    ("header", "--header"),
    ("backend_options", "--backend-option"),
    ("profile", "--profile"),
    ("lora_modules", "--lora-modules"),
    ("lora_assignment", "--lora-assignment"),
    ("probe_request_rate", "--probe-request-rate"),
    ("request_timeout", "--request-timeout"),
    ("ready_check_timeout_sec", "--ready-check-timeout-sec"),
    ("http_client", "--http-client"),
    ("insecure", "--insecure"),
    ("preconnect", "--preconnect"),
    ("server_metrics_interval", "--server-metrics-interval"),
    ("no_server_metrics", "--no-server-metrics"),
];

/// Flags a server run honours that the native engine does not, with why.
const NOT_ON_THE_ENGINE: &[(&str, &str, &str)] = &[
    (
        "skip_tokenizer_init",
        "--skip-tokenizer-init",
        "the engine needs the model's tokenizer to run",
    ),
    (
        "shutdown_grace_sec",
        "--shutdown-grace-sec",
        "a stopped run ends the engine's requests at its next step",
    ),
    (
        "prefix_cache_block_size",
        "--prefix-cache-block-size",
        "the engine has no prefix cache, and no theoretical hit rate is computed",
    ),
];

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

/// The command line as vLLM's `vars(args)` for the `.pytorch.json` records: snake_case
/// keys, headers redacted, an infinite rate written as "inf".
fn args_record(args: &ServeArgs) -> Result<serde_json::Map<String, serde_json::Value>> {
    let serde_json::Value::Object(mut map) = serde_json::to_value(args)? else {
        bail!("arguments did not serialize to an object");
    };
    for (key, given) in [
        ("header", !args.header.is_empty()),
        ("otlp_header", !args.otlp.otlp_header.is_empty()),
    ] {
        if given {
            map.insert(key.into(), serde_json::json!("<redacted>"));
        }
    }
    if args.request_rate.is_infinite() {
        map.insert("request_rate".into(), serde_json::json!("inf"));
    }
    Ok(map)
}

/// `--base-url` in the arguments' record as vLLM's (`vars(args)`): `null` when not given,
/// the string when given once, and the list of several.
fn one_or_many<S: serde::Serializer>(urls: &[String], s: S) -> Result<S::Ok, S::Error> {
    use serde::Serialize;
    match urls {
        [] => s.serialize_none(),
        [one] => one.serialize(s),
        many => many.serialize(s),
    }
}
