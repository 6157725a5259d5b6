//! What a benchmark runs its requests against.
//!
//! A [`Target`] holds a workload already turned into its own requests (everything built
//! before the clock starts), gets ready for the run, then runs the requests on a schedule
//! and returns one timestamped [`RequestRecord`](crate::record::RequestRecord) per request
//! sent. The core (`crate::benchmark`) does the rest the same way for every target: the
//! schedule, the stop signal, the metrics, the reports and the result files.
//!
//! Today's one target is [`http::HttpTarget`]: an inference server behind an HTTP API,
//! reached with a backend plugin's requests. How the next ones fit:
//! - an in-process engine generates tokens itself: its constructor loads the model and
//!   tokenizes the prompts, [`Target::warm_up`] runs warm-up batches, and [`Target::run`]
//!   admits each request at its offset and records the time of every token it generates
//!   (the record's `ttft` and `itl`), so TTFT, ITL, TPOT and goodput mean what they mean
//!   for a server;
//! - offline `throughput` and `latency` modes are runs whose schedule sends everything at
//!   time 0 (or one request at a time), through either target; their reports read the
//!   same records.
//!
//! The trait is called a few times per run, never per request, and generically (the core
//! is monomorphised for each target), so it costs the send path nothing.

pub mod engine;
pub mod http;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use indicatif::ProgressBar;

use crate::client::load::Releases;
use crate::client::stop::{StopReason, StopSignal};
use crate::metrics::ClientCpu;
use crate::observer::Observer;
use crate::record::RequestRecord;
use crate::server_metrics::ServerReport;

/// Runs a prepared workload and records what came back.
// The core awaits these on its own runtime (`block_on`), so their futures need no
// `Send` bound, which is what the lint is about.
#[allow(async_fn_in_trait)]
pub trait Target {
    /// The name the result gives the target (`backend` and `endpoint_type`): for the HTTP
    /// target, the backend plugin's own name.
    fn name(&self) -> &str;

    /// How many requests the workload holds.
    fn requests(&self) -> usize;

    /// Everything that happens before the clock starts and is not measured: a readiness
    /// check, warm-up requests, opening connections, reading the server's counters.
    async fn warm_up(&mut self, warm_up: &WarmUp, observer: &mut dyn Observer) -> Result<()>;

    /// The measured run: request `i` is released at `offsets[i]` seconds after the start
    /// ([`Releases::Workload`]), or a timed run's positions at their arrivals
    /// ([`Releases::Timed`]), until `options.stop` is raised. Returns the records of every
    /// request sent; a failed request is a record, never an error (an error means the run
    /// itself broke).
    async fn run(
        self,
        releases: Releases,
        options: RunOptions,
        observer: &mut dyn Observer,
    ) -> Result<RunOutput>;
}

/// What a run does before the clock starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarmUp {
    /// Wait up to this long for one request to succeed (vLLM's
    /// `--ready-check-timeout-sec`); `None` skips the check.
    pub ready_check: Option<Duration>,
    /// Requests sent before the measured run (vLLM's `--num-warmups`).
    pub requests: u32,
    /// The most of them in flight at once (the run's concurrency cap).
    pub max_concurrency: Option<usize>,
}

/// How a run is driven, besides its requests and schedule.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Requests in flight at once (`None`: no cap).
    pub max_concurrency: Option<usize>,
    /// Raised to end the run early (Ctrl-C, a part of the run that cannot go on): no
    /// request is released after it.
    pub stop: Arc<StopSignal>,
    /// How long requests in flight may go on once the run is stopped; those still
    /// running after it are recorded as failed with kind `interrupted`.
    pub shutdown_grace: Duration,
    /// Advanced by one per request answered (hidden unless the observer draws it).
    pub progress: ProgressBar,
    /// Multiplies the dataset's send times (`--time-scale`): the offsets already are, and
    /// a conversation's later turns are scaled by it too.
    pub time_scale: f64,
    /// When the offsets start counting (a shard's shared start); `None`: when the run
    /// starts. Only the HTTP target takes it (the native engine is never sharded).
    pub start: Option<std::time::Instant>,
    /// Requests the client cancels on purpose (`--request-cancellation-rate`). Only the
    /// HTTP target takes it: the native engine has no connection to close.
    pub cancellation: Option<crate::client::cancellation::Cancellation>,
    /// A shard's requests' places in the whole workload (see the load generator's
    /// `LoadOptions::workload_index`); `None` for a whole run.
    pub workload_index: Option<Arc<Vec<usize>>>,
    /// Where each request's figures go as it is measured, for whoever watches the run
    /// while it goes on (`--until-confident`); `None`: nobody does.
    pub live: Option<Arc<crate::client::live::LiveStats>>,
    /// Where a copy of each record goes as it is built (`--record-file`'s writer); `None`:
    /// nowhere. Only the HTTP target takes it (the native engine refuses the flag).
    pub record_copies: Option<std::sync::mpsc::Sender<RequestRecord>>,
}

/// What a run measured.
#[derive(Debug)]
pub struct RunOutput {
    /// One record per request sent, in workload order.
    pub records: Vec<RequestRecord>,
    /// From the first scheduled send to the end of the last response (vLLM's
    /// `benchmark_duration`).
    pub duration: f64,
    /// Why the run was stopped before its workload ended; `None` when it ran to the end.
    pub stopped: Option<StopReason>,
    /// Requests never sent because the run was stopped (not among `records`).
    pub not_sent: usize,
    /// Requests cancelled at the end of the grace period (in `records`, failed).
    pub cancelled: usize,
    /// The monotonic clock ([`crate::client::cpu::monotonic`]) at the benchmark start, in
    /// seconds: added to the records' start times it gives vLLM's `start_times`
    /// (`perf_counter()` values).
    pub clock_origin_s: f64,
    /// What the run cost the client's CPU.
    pub cpu: ClientCpu,
    /// Which HTTP client sent the requests (`h1`, `reqwest`); `None` for a target that
    /// sends no HTTP.
    pub transport: Option<&'static str>,
    /// What the server's `/metrics` said about the run, when it has metrics bench knows.
    pub server_metrics: Option<ServerReport>,
    /// With several endpoints: each one's `/metrics` report, in endpoint order (`None`
    /// where its server had none bench knows); empty with one endpoint, whose report is
    /// `server_metrics`.
    pub endpoint_server_metrics: Vec<Option<ServerReport>>,
    /// The prompt of each request, by index (a conversation's later turns included), for
    /// the workload's theoretical prefix reuse; empty when the target keeps none.
    pub prompts: Vec<Option<crate::runtime::Prompt>>,
    /// Seconds of audio each request uploaded, by index, for vLLM's `rtfx`
    /// ([`crate::audio_duration`]); empty when none uploaded any.
    pub audio_seconds: Vec<f64>,
    /// What the probe loop beside the run measured (`--probe-request-rate`); `None`
    /// when none ran. Not part of the records.
    pub probe: Option<crate::probe::ProbeResults>,
    /// The most sequences the native engine ran in one batch, by its own count (at most
    /// `--max-num-seqs` and `--max-concurrency`); `None` for a server, whose batches the
    /// client cannot see.
    pub engine_peak_sequences: Option<usize>,
}
