//! The library core: a benchmark from a resolved configuration to its outcome, with no
//! command line below it. [`serve`] is `bench serve`'s whole pipeline: the model and the
//! tokenizer, the workload ([`workload::load`], shared with `bench dataset sample`), the
//! requests built for the [`HttpTarget`], then the part every target shares: the schedule,
//! the warm-up, the measured run under a stop signal, the metrics, the reports and the
//! result files.
//!
//! Nothing here prints, reads the environment or installs signal handlers: what the run
//! shows goes to the caller's [`Observer`], and the caller decides what a signal does
//! through [`Observer::arm_stop`]. The run's [`Outcome`] says how it went; the CLI turns
//! it into an exit code.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, bail};

use crate::client::load::{Releases, Timed};
use crate::client::stop::{Signal, StopSignal};
use crate::grading::Grader;
use crate::metrics::goals::{Ended, Verdicts};
use crate::metrics::{self, Metrics, MetricsConfig};
use crate::observer::{Event, Observer};
use crate::prepare::HostHeaders;
use crate::probe::ProbeResults;
use crate::profiler::{Profiler, ProfilerStep};
use crate::record::{Failure, RequestRecord};
use crate::report::save::Interruption;
use crate::report::{self, RunInfo, SaveOptions};
use crate::runtime::RequestSpec;
use crate::schedule::{self, RampUp, ScheduleConfig};
use crate::shard::record_file::{self, RecordFile};
use crate::shard::{
    Shard, ShardConfig, ShardDiagnostics, ShardDoc, ShardPlan, ShardRun, StartAt, WorkloadId,
};
use crate::side_reports::SideReports;
use crate::targets::http::{self, HttpConfig, HttpTarget};
use crate::targets::{RunOptions, Target, WarmUp};
use crate::tokenizer::Tokenizer;
use crate::workload::{self, WorkloadConfig};

/// Everything [`serve`] needs, resolved and checked (the CLI builds it from its flags).
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The model's name; `None`: the first model the server lists.
    pub model: Option<String>,
    /// The name the API knows the model by; `None`: the model's.
    pub served_model_name: Option<String>,
    /// The tokenizer (see [`Tokenizer::load_from`]); `None`: the model's name.
    pub tokenizer: Option<String>,
    /// vLLM's `--skip-tokenizer-init`: load no tokenizer. A dataset plugin that needs one
    /// fails, saying so; output tokens are the server's usage, or 1 per request without
    /// it (vLLM's rule), and the reports leave out what only a tokenizer can count.
    pub skip_tokenizer_init: bool,
    /// `--backend native`: the model runs in this process on the native engine, and
    /// `http` is not used.
    pub native: Option<crate::targets::engine::NativeConfig>,
    pub workload: WorkloadConfig,
    pub http: HttpConfig,
    pub load: LoadConfig,
    pub metrics: MetricsConfig,
    pub report: ReportConfig,
    /// `--shard I/N`: this process sends its share of the run ([`crate::shard`]) and the
    /// outcome carries its [`ShardDoc`]; `None`: the whole run.
    pub shard: Option<ShardConfig>,
}

/// When requests are sent, how many at once, and what happens before and after.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadConfig {
    /// Requests per second; `f64::INFINITY` sends everything at once. Ignored with a
    /// ramp-up (the CLI then passes infinity, as vLLM does).
    pub request_rate: f64,
    /// The gamma shape of the gaps: 1 is a Poisson process.
    pub burstiness: f64,
    pub ramp_up: Option<RampUp>,
    /// Requests in flight at once; `None`: no cap.
    pub max_concurrency: Option<usize>,
    /// How long to wait for one request to succeed before the run; `None`: no check.
    pub ready_check: Option<Duration>,
    /// Requests sent before the run, excluded from the statistics.
    pub warm_ups: u32,
    /// After a stop, how long requests in flight may go on before they are cancelled.
    pub shutdown_grace: Duration,
    /// vLLM's `--self-timed`: send each request at the time its dataset gave it (trace
    /// replay) instead of by rate. `None`: when the dataset gives send times.
    pub self_timed: Option<bool>,
    /// Multiplies the dataset's send times when self-timed (0.5 replays twice as fast).
    pub time_scale: f64,
    /// vLLM's `--profile`: `POST /start_profile` after the warm-ups, `POST /stop_profile`
    /// after the results; a call that fails is a warning, never a failed run.
    pub profile: bool,
    /// Sample this machine's GPUs during the measured run (`crate::gpu_telemetry`): where
    /// NVIDIA's management library is absent, one note and no GPU figures.
    pub gpu_telemetry: bool,
    /// Requests the client cancels on purpose (`--request-cancellation-rate` and
    /// `-delay`); `None`: none. HTTP servers only.
    pub cancellation: Option<crate::client::cancellation::Cancellation>,
    /// `--until-confident`: stop once these figures are known well enough; `None`: send
    /// the whole workload.
    pub until_confident: Option<crate::metrics::goals::UntilConfident>,
    /// `--metrics-port`: serve the run's live figures as Prometheus text here during the
    /// run; `None`: not served.
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// `--duration`: send for this long, the workload again from its first request when it
    /// runs out, at the arrival process (or trace) continued; `None`: send the workload
    /// once. See [`crate::schedule::Arrivals`] and [`crate::client::load::Timed`].
    pub duration: Option<Duration>,
    /// `--duration-grace`: how long the requests in flight when `duration` is up may go
    /// on; those still running after it are cancelled (kind `cancelled`).
    pub duration_grace: Duration,
}

/// What the reports say about the run, and where its result goes.
#[derive(Debug, Clone)]
pub struct ReportConfig {
    /// The result's label; `None` names it after the backend.
    pub label: Option<String>,
    /// Extra top-level keys of the result: `--metadata`'s strings, and values such as the
    /// scenario file's record (`--config`), which is an object.
    pub metadata: Vec<(String, serde_json::Value)>,
    /// The command line as vLLM's `vars(args)`, for the PyTorch records.
    pub command_line: serde_json::Map<String, serde_json::Value>,
    /// Where and how to save the result. `interrupted` is the run's to set.
    pub save: SaveOptions,
    /// `--record-file`: where each finished request is written as it finishes.
    pub record_file: Option<PathBuf>,
}

/// How a run went: what [`serve`] returns when the benchmark itself did not break.
#[derive(Debug)]
pub struct Outcome {
    /// The metrics, with the records they were computed from.
    pub metrics: Metrics,
    /// What was measured beside the records (the server's `/metrics`, GPUs, probes, ...).
    pub side: SideReports,
    /// What the reports say about the run.
    pub run: RunInfo,
    /// The workload's size (requests prepared, sent or not).
    pub requests: usize,
    /// Set when the run was stopped before its workload ended: why, and what it cost.
    pub interrupted: Option<Interruption>,
    /// The first signal the stop signal received during the run (also one that came
    /// after another reason stopped it, or after the run, while saving).
    pub signal: Option<Signal>,
    /// Where the result was written, when it was.
    pub saved: Option<PathBuf>,
    /// A shard's run: what it writes for `bench merge` (records under their global
    /// indices).
    pub shard: Option<ShardDoc>,
}

impl Outcome {
    /// One record per request sent, in workload order.
    pub fn records(&self) -> &[RequestRecord] {
        &self.metrics.per_request.records
    }

    /// Whether no request succeeded.
    pub fn all_failed(&self) -> bool {
        self.metrics.completed == 0
    }

    /// The failure of the first failed request, in workload order.
    pub fn first_failure(&self) -> Option<&Failure> {
        self.records().iter().find_map(RequestRecord::failure)
    }
}

/// Runs `bench serve`'s benchmark: see the module documentation. Errors are the
/// benchmark's own (a tokenizer that does not load is a [`workload::TokenizerError`]);
/// failed requests are not errors, they are in the outcome.
pub fn serve(config: &ServeConfig, observer: &mut dyn Observer) -> Result<Outcome> {
    if let Some(native) = &config.native {
        return serve_native(config, native, observer);
    }
    // Synchronous steps (plugin calls, sampling) run on this thread, outside the async
    // runtime: WASI's synchronous host calls may block on a runtime of their own.
    let rt = runtime()?;
    let model = match &config.model {
        Some(m) => m.clone(),
        None => {
            observer.event(Event::FetchingModel);
            let id = rt.block_on(http::first_model(
                config.http.base_url(),
                &config.http.headers,
                config.http.tls,
            ))?;
            observer.event(Event::ModelFound { id: &id });
            id
        }
    };
    let served_model = config.served_model_name.as_ref().unwrap_or(&model);
    let tokenizer_id =
        (!config.skip_tokenizer_init).then(|| config.tokenizer.as_ref().unwrap_or(&model).as_str());
    let mut workload = workload::load_with(&config.workload, tokenizer_id, observer)?;
    if workload.specs.is_empty() {
        bail!(
            "dataset {} produced no requests",
            config.workload.dataset.display()
        );
    }
    let tokenizer = workload.tokenizer.clone();
    // The whole workload's send times: a shard takes its own from the whole schedule.
    let send_at = self_timed(&config.load, &workload.specs)?;
    let shard = match config.shard {
        Some(shard) => Some(split_shard(shard, &mut workload, config, &rt)?),
        None => None,
    };
    let grader = Grader::of(&mut workload, &config.workload)?;
    let workload_id = config
        .report
        .record_file
        .as_ref()
        .map(|_| WorkloadId::of(&workload.specs, config.workload.seed));
    let target = HttpTarget::prepare(&config.http, &model, served_model, workload, &rt, observer)?;
    let plan = Plan {
        drive: Drive {
            load: &config.load,
            seed: config.workload.seed,
            send_at,
            profiler: match config.load.profile {
                true => Some(profiler(&config.http)?),
                false => None,
            },
            shard,
        },
        metrics: &config.metrics,
        report: &config.report,
        model_id: &model,
        tokenizer_id,
        endpoints: (config.http.base_urls.len() > 1).then(|| crate::report::EndpointsInfo {
            urls: config.http.base_urls.clone(),
            routing: config.http.routing.name().to_owned(),
        }),
        num_prompts: config.workload.num_prompts as usize,
        workload: workload_id,
    };
    measure(&rt, target, tokenizer.as_ref(), &plan, grader, observer)
}

/// `bench serve --backend native`: the workload on the native engine, at the run's rate
/// and concurrency, with the same metrics and reports as a server's.
fn serve_native(
    config: &ServeConfig,
    native: &crate::targets::engine::NativeConfig,
    observer: &mut dyn Observer,
) -> Result<Outcome> {
    // The engine loads before any thread of the run starts (it sizes candle's thread pool
    // from the environment; see `bench_engine::EngineConfig::threads`).
    let mut opened = crate::targets::engine::open_native(
        config.model.as_deref(),
        config.tokenizer.as_deref(),
        &config.workload,
        native,
        observer,
    )?;
    let rt = runtime()?;
    let send_at = self_timed(&config.load, &opened.workload.specs)?;
    let grader = Grader::of(&mut opened.workload, &config.workload)?;
    let specs = std::mem::take(&mut opened.workload.specs);
    if specs.is_empty() {
        bail!(
            "dataset {} produced no requests",
            config.workload.dataset.display()
        );
    }
    if opened.workload.conversations.is_some() {
        bail!("--backend native runs single requests; this dataset is multi-turn");
    }
    if config.shard.is_some() {
        bail!(
            "--shard: --backend native runs the model in this process, which no other \
             process shares; shard a run against a server"
        );
    }
    if config.report.record_file.is_some() {
        bail!("--record-file: --backend native does not write one yet; run against a server");
    }
    let target = crate::targets::engine::EngineTarget::prepare(
        &mut opened.engine,
        &specs,
        &opened.tokenizer,
        opened.run.clone(),
    )?;
    let plan = Plan {
        drive: Drive {
            load: &config.load,
            seed: config.workload.seed,
            send_at,
            profiler: None,
            shard: None,
        },
        metrics: &config.metrics,
        report: &config.report,
        model_id: &opened.model,
        tokenizer_id: Some(&opened.model),
        num_prompts: config.workload.num_prompts as usize,
        endpoints: None,
        workload: None,
    };
    measure(
        &rt,
        target,
        Some(&opened.tokenizer),
        &plan,
        grader,
        observer,
    )
}

/// A shard's part of the workload (the whole one sampled, this shard's requests kept
/// before the backend builds any), and this machine's clock against the server's.
fn split_shard(
    config: ShardConfig,
    workload: &mut workload::Workload,
    serve: &ServeConfig,
    rt: &tokio::runtime::Runtime,
) -> Result<ShardRun> {
    if workload.conversations.is_some() {
        bail!(
            "--shard: this dataset is multi-turn, and a conversation's later turns are made \
             during the run from its answers, so they cannot be assigned to shards up \
             front; run multi-turn workloads in one process"
        );
    }
    // A timed run's shard sends positions of the run, each the workload's request at that
    // position mod its size: it holds the whole workload.
    let plan = match serve.load.duration {
        Some(_) => ShardPlan::whole(config, &workload.specs, workload.seed),
        None => ShardPlan::split(config, &mut workload.specs, workload.seed),
    };
    if !workload.references.is_empty() && serve.load.duration.is_none() {
        workload.references = config.shard.select(&workload.references);
    }
    if workload.specs.is_empty() {
        bail!(
            "--shard {}: the workload has {} requests, none of them this shard's",
            config.shard,
            plan.workload.requests
        );
    }
    let clock_offset = rt.block_on(clock_offset(&serve.http));
    Ok(ShardRun {
        plan,
        max_concurrency: config.max_concurrency,
        started_late_s: 0.0,
        clock_offset,
        audio_seconds: Vec::new(),
        shutdown_grace: serve.load.shutdown_grace,
    })
}

/// This machine's clock against the server's, for a shard's diagnostics: where it cannot
/// be estimated, why (the run goes on).
async fn clock_offset(http: &HttpConfig) -> Result<crate::clock_offset::ClockOffset, String> {
    let client = crate::client::reqwest_builder(http.tls)
        .build()
        .map_err(|e| format!("clock offset: the HTTP client: {e}"))?;
    let headers = HostHeaders {
        api_key: http.api_key.clone(),
        extra: http.headers.clone(),
    };
    let url = format!("{}/v1/models", http.base_url().trim_end_matches('/'));
    crate::clock_offset::estimate(&client, &url, &headers, crate::clock_offset::DEFAULT_BUDGET)
        .await
        .map_err(|e| e.to_string())
}

/// `--profile`: the server's profiler starts (a failure is a warning, never a failed run).
pub(crate) fn start_profiler(
    profiler: &crate::profiler::Profiler,
    rt: &tokio::runtime::Runtime,
    observer: &mut dyn Observer,
) {
    observer.event(Event::Profiler(ProfilerStep::Starting));
    match rt.block_on(profiler.start()) {
        Ok(()) => observer.event(Event::Profiler(ProfilerStep::Started)),
        Err(e) => observer.event(Event::Warning(&format!(
            "--profile: the server's profiler did not start ({e}); the run goes on"
        ))),
    }
}

/// `--profile`: the server's profiler stops once the run is done (vLLM stops it once the
/// results are shown).
pub(crate) fn stop_profiler(
    profiler: Option<&crate::profiler::Profiler>,
    rt: &tokio::runtime::Runtime,
    observer: &mut dyn Observer,
) {
    let Some(profiler) = profiler else {
        return;
    };
    observer.event(Event::Profiler(ProfilerStep::Stopping));
    match rt.block_on(profiler.stop()) {
        Ok(()) => observer.event(Event::Profiler(ProfilerStep::Stopped)),
        Err(e) => observer.event(Event::Warning(&format!(
            "--profile: the server's profiler did not stop ({e})"
        ))),
    }
}

/// The run's async runtime.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// `--profile`'s calls to the server, with the run's headers and TLS settings.
pub(crate) fn profiler(http: &HttpConfig) -> Result<Profiler> {
    let client = crate::client::reqwest_builder(http.tls)
        .build()
        .context("--profile: the HTTP client")?;
    let headers = HostHeaders {
        api_key: http.api_key.clone(),
        extra: http.headers.clone(),
    };
    Ok(Profiler::new(&http.base_urls, headers, client))
}

/// The requests' send times when the run is self-timed (vLLM's `--self-timed`), else
/// `None`: self-timed when asked, or by default when the dataset gave any request one.
fn self_timed(load: &LoadConfig, specs: &[RequestSpec]) -> Result<Option<Vec<Option<f64>>>> {
    let timed = specs.iter().any(|s| s.send_at.is_some());
    match load.self_timed {
        Some(true) if !timed => {
            bail!("--self-timed: the dataset gave no request a send time; it replays no trace")
        }
        Some(false) => Ok(None),
        _ if timed => Ok(Some(specs.iter().map(|s| s.send_at).collect())),
        _ => Ok(None),
    }
}

/// What [`measure`] needs besides the target: how to drive it, and what the reports say.
struct Plan<'a> {
    drive: Drive<'a>,
    metrics: &'a MetricsConfig,
    report: &'a ReportConfig,
    model_id: &'a str,
    /// `None` with `--skip-tokenizer-init`.
    tokenizer_id: Option<&'a str>,
    num_prompts: usize,
    /// Several servers' URLs and routing, for the reports; `None` with one.
    endpoints: Option<crate::report::EndpointsInfo>,
    /// The whole workload's identity, for `--record-file`'s head; `None` without the flag.
    workload: Option<WorkloadId>,
}

/// The block keys of each sent request's prompt ([`crate::prefix_reuse::block_keys`]), in
/// the order of `records`; `None` for a prompt that is not counted. A timed run's record
/// `k` sent the workload's prompt `k mod repeats`.
fn prompt_keys(
    records: &[RequestRecord],
    prompts: &[Option<crate::runtime::Prompt>],
    tokenizer: &Tokenizer,
    block_size: usize,
    repeats: Option<usize>,
) -> Result<Vec<Option<Vec<u64>>>> {
    let sent: Vec<Option<&crate::runtime::Prompt>> = records
        .iter()
        .map(|r| {
            let slot = repeats.map_or(r.index, |n| r.index % n);
            prompts.get(slot).and_then(Option::as_ref)
        })
        .collect();
    let present: Vec<&crate::runtime::Prompt> = sent.iter().flatten().copied().collect();
    let mut keys = crate::prefix_reuse::keys_of_prompts(&present, tokenizer, block_size)
        .context("encoding the prompts for the theoretical prefix-cache hit rate")?
        .into_iter();
    Ok(sent
        .iter()
        .map(|prompt| prompt.and_then(|_| keys.next().flatten()))
        .collect())
}

/// The part of every benchmark that drives the target: the schedule, the warm-up, the stop
/// signal, the profiler's start and the measured run. [`measure`] goes on to the metrics
/// and reports of `bench serve`; the offline benchmarks (`crate::offline`) to their own.
pub(crate) fn execute<T: Target>(
    rt: &tokio::runtime::Runtime,
    mut target: T,
    drive: &Drive,
    record_file: Option<RecordFileSpec>,
    observer: &mut dyn Observer,
) -> Result<Executed> {
    let load = drive.load;
    let requests = target.requests();
    let plan = drive.shard.as_ref().map(|shard| &shard.plan);
    let schedule_config = ScheduleConfig {
        // A shard's requests keep their times in the whole workload's schedule.
        num_requests: plan.map_or(requests, |p| p.workload.requests),
        request_rate: load.request_rate,
        burstiness: load.burstiness,
        ramp_up: load.ramp_up,
        seed: drive.seed,
    };
    // The ramp's `rps_change_events`: a timed run's are stamped as it goes.
    let (releases, rps_change_events) = match load.duration {
        None => {
            let schedule = match &drive.send_at {
                Some(send_at) => schedule::timed(send_at, load.time_scale)?,
                None => schedule::build(&schedule_config)?,
            };
            let offsets = match plan {
                Some(plan) => plan.offsets(&schedule.offsets)?,
                None => schedule.offsets,
            };
            let events = Arc::new(std::sync::Mutex::new(schedule.rps_change_events));
            (Releases::Workload(offsets), events)
        }
        Some(duration) => {
            let arrivals = match &drive.send_at {
                Some(send_at) => schedule::Arrivals::trace(send_at, load.time_scale)?,
                None => schedule::Arrivals::drawn(&schedule_config, duration.as_secs_f64())?,
            };
            let events = arrivals.rps_changes();
            // A shard of a timed run holds the whole workload and sends its positions.
            let (first, step) =
                plan.map_or((0, 1), |p| (p.config.shard.index, p.config.shard.count));
            let timed = Timed {
                unpaced: arrivals.unpaced(),
                arrivals: Box::new(arrivals),
                until: duration.as_secs_f64(),
                first,
                step,
                drain: load.duration_grace,
            };
            (Releases::Timed(timed), events)
        }
    };
    // Raised by the caller (Ctrl-C), and by the target when a part of the run cannot go
    // on; armed before the run is announced, so a stop after the announcement is honoured.
    let stop = Arc::new(StopSignal::new());
    // Opened before any request goes out, so that a path that cannot be written fails
    // the run before the server sees it.
    let record_file = record_file
        .map(|spec| RecordFile::create(&spec.path, &spec.head, spec.tokenizer, stop.clone()))
        .transpose()?;
    rt.block_on(target.warm_up(
        &WarmUp {
            ready_check: load.ready_check,
            requests: load.warm_ups,
            max_concurrency: load.max_concurrency,
        },
        observer,
    ))?;
    {
        let _runtime = rt.enter();
        observer.arm_stop(&stop)?;
    }
    if let Some(profiler) = &drive.profiler {
        start_profiler(profiler, rt, observer);
    }
    let start_at = match plan.and_then(|p| p.config.start_at) {
        None => None,
        Some(StartAt::At(at)) => Some(at),
        Some(StartAt::Gate) => Some(observer.await_start()?),
    };
    let started_late_s = start_at.map_or(0.0, |at| {
        SystemTime::now()
            .duration_since(at)
            .map_or(0.0, |late| late.as_secs_f64())
    });
    if let (Some(at), Some(plan)) = (start_at, plan) {
        observer.event(Event::Note(&format!(
            "shard {}: {} of the {} requests, starting at {}",
            plan.config.shard,
            requests,
            plan.workload.requests,
            crate::shard::format_wall_clock(at)
        )));
    }
    observer.event(Event::RunStarting {
        request_rate: load.request_rate,
        burstiness: load.burstiness,
        ramp_up: load.ramp_up.as_ref(),
        max_concurrency: load.max_concurrency,
        self_timed: drive.send_at.is_some(),
        duration: load.duration,
    });
    let backend = target.name().to_owned();
    // The run's figures so far, looked at while it goes on: by the observer's live view
    // (`--ui dashboard`), `--until-confident` and `--metrics-port`, all the same counts.
    let live = observer.live_stats().or_else(|| {
        (load.until_confident.is_some() || load.metrics_addr.is_some())
            .then(|| Arc::new(crate::client::live::LiveStats::default()))
    });
    let metrics_server = match (load.metrics_addr, &live) {
        (Some(addr), Some(live)) => {
            let (bound, task) = rt.block_on(crate::live_metrics::serve(addr, live.clone()))?;
            observer.event(Event::Note(&format!(
                "--metrics-port: the run's live figures at http://{bound}/metrics"
            )));
            Some(task)
        }
        _ => None,
    };
    let watcher = load
        .until_confident
        .clone()
        .zip(live.clone())
        .map(|(goals, live)| {
            let _runtime = rt.enter();
            crate::until_confident::watch(goals, live, stop.clone())
        });
    let options = RunOptions {
        max_concurrency: load.max_concurrency,
        stop: stop.clone(),
        shutdown_grace: load.shutdown_grace,
        // A timed run's number of requests is not known before it ends.
        progress: observer.progress_bar(if load.duration.is_some() {
            0
        } else {
            requests as u64
        }),
        time_scale: load.time_scale,
        start: start_at.map(crate::shard::instant_at),
        cancellation: load.cancellation,
        workload_index: plan.map(|p| Arc::new(p.global_index.clone())),
        live,
        record_copies: record_file.as_ref().and_then(RecordFile::sink),
    };
    let started_at = start_at.map_or_else(chrono::Local::now, chrono::DateTime::from);
    let output = rt.block_on(target.run(releases, options, observer));
    if let Some(task) = metrics_server {
        task.abort();
    }
    let output = output?;
    if load.duration.is_some() && output.stopped.is_none() && output.cancelled > 0 {
        observer.event(Event::Note(&format!(
            "--duration: {} requests still running {:.1} s after the time was up were \
             cancelled (counted as cancelled, not failed; --duration-grace gives them longer)",
            output.cancelled,
            load.duration_grace.as_secs_f64()
        )));
    }
    // A watcher still looking when the run ended saw the workload run out first.
    let ended = watcher.map(|watcher| {
        if watcher.is_finished() {
            rt.block_on(watcher).unwrap_or(Ended::Workload)
        } else {
            watcher.abort();
            Ended::Workload
        }
    });
    Ok(Executed {
        ended,
        record_file,
        output,
        requests,
        backend,
        rps_change_events: std::mem::take(
            &mut *rps_change_events
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        ),
        stop,
        started_at,
        started_late_s,
    })
}

/// How [`execute`] drives a target.
pub(crate) struct Drive<'a> {
    pub load: &'a LoadConfig,
    /// The schedule's seed (the workload's).
    pub seed: u64,
    /// The dataset's send times, when the run is self-timed.
    pub send_at: Option<Vec<Option<f64>>>,
    /// `--profile`.
    pub profiler: Option<Profiler>,
    /// A shard's run: its part of the workload (the target holds only its requests).
    pub shard: Option<ShardRun>,
}

/// What [`execute`] measured, with what the reports need to say about it.
pub(crate) struct Executed {
    pub output: crate::targets::RunOutput,
    /// The workload's size (requests prepared, sent or not).
    pub requests: usize,
    /// The target's name (`backend` in results).
    pub backend: String,
    pub rps_change_events: Vec<crate::schedule::RpsChange>,
    /// The run's stop signal, read last for the exit code.
    pub stop: Arc<StopSignal>,
    pub started_at: chrono::DateTime<chrono::Local>,
    /// How long after its shared start a shard was ready (0 when on time, or unsharded).
    pub started_late_s: f64,
    /// How a run with `--until-confident` ended; `None` without it.
    pub ended: Option<Ended>,
    /// `--record-file`, written during the run: its end line is the caller's to write.
    pub record_file: Option<RecordFile>,
}

/// `--record-file`: where, what the run is, and the tokenizer that counts the records'
/// texts.
pub(crate) struct RecordFileSpec {
    pub path: PathBuf,
    pub head: record_file::Head,
    pub tokenizer: Option<Arc<Tokenizer>>,
}

/// The run's settings as the reports give them, from its plan and what the run learned.
fn run_info(
    plan: &Plan,
    backend: String,
    started_at: chrono::DateTime<chrono::Local>,
    rps_change_events: Vec<crate::schedule::RpsChange>,
) -> RunInfo {
    let (load, report) = (plan.drive.load, plan.report);
    RunInfo {
        date: chrono::Local::now(),
        started_at,
        backend,
        label: report.label.clone(),
        model_id: plan.model_id.to_owned(),
        tokenizer_id: plan.tokenizer_id.map(str::to_owned),
        num_prompts: plan.num_prompts,
        request_rate: load.request_rate,
        burstiness: load.burstiness,
        max_concurrency: load.max_concurrency,
        ramp_up: load.ramp_up,
        rps_change_events,
        metadata: report.metadata.clone(),
        args: report.command_line.clone(),
        cancellation: load.cancellation,
        endpoints: plan.endpoints.clone(),
        duration_limit_s: load.duration.map(|d| d.as_secs_f64()),
    }
}

/// `bench serve`'s whole measurement: [`execute`] (schedule, warm-up, the measured run),
/// then the metrics, reports and the result file. Generic, so the target's calls are static;
/// `tokenizer` counts output tokens a response did not report (`None`: vLLM's count of 1
/// per such request, with `--skip-tokenizer-init`).
fn measure<T: Target>(
    rt: &tokio::runtime::Runtime,
    target: T,
    tokenizer: Option<&Arc<Tokenizer>>,
    plan: &Plan,
    grader: Option<Grader>,
    observer: &mut dyn Observer,
) -> Result<Outcome> {
    let load = plan.drive.load;
    let record_file = match (&plan.report.record_file, &plan.workload) {
        (Some(path), Some(workload)) => Some(RecordFileSpec {
            path: path.clone(),
            head: record_file::Head {
                workload: workload.clone(),
                run: run_info(
                    plan,
                    target.name().to_owned(),
                    chrono::Local::now(),
                    Vec::new(),
                ),
                metrics_config: plan.metrics.clone(),
                has_tokenizer: tokenizer.is_some(),
                shutdown_grace_s: load.shutdown_grace.as_secs_f64(),
                host: crate::shard::host_name(),
                cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            },
            tokenizer: tokenizer.cloned(),
        }),
        _ => None,
    };
    let mut gpu_observer = crate::gpu_observer::GpuObserver::new(observer, load.gpu_telemetry);
    let Executed {
        mut output,
        requests,
        backend,
        rps_change_events,
        stop,
        started_at,
        started_late_s,
        ended,
        record_file,
    } = execute(rt, target, &plan.drive, record_file, &mut gpu_observer)?;
    let gpu = gpu_observer.finish();
    // A timed run's record `k` sent the workload's request `k mod requests`: what is known
    // per workload request (references, prompts, audio) is looked up there.
    let repeats = load.duration.map(|_| requests);
    // Accuracy under load: the answers are judged now that the load is over, by the
    // shard's own indices (the references are the shard's).
    let grading_warnings = match grader {
        Some(grader) => grader.grade(&mut output.records, repeats),
        None => Vec::new(),
    };

    let counter = |text: &str| match tokenizer {
        Some(tokenizer) => tokenizer.count_tokens(text),
        None => anyhow::bail!("no tokenizer is loaded"),
    };
    let mut computed = metrics::calculate(
        output.records,
        output.duration,
        tokenizer.map(|_| &counter as metrics::TokenCounter<'_>),
        plan.metrics,
    )?;
    let mut side = SideReports {
        server_metrics: output.server_metrics,
        endpoint_server_metrics: output.endpoint_server_metrics,
        gpu,
        probe: output.probe.as_ref().and_then(ProbeResults::stats),
        client_cpu: Some(output.cpu),
        http_client: output.transport,
        engine_peak_sequences: output.engine_peak_sequences,
        ..SideReports::default()
    };
    if let Some(probe) = &output.probe {
        computed.warnings.extend(probe.warning());
    }
    computed.warnings.extend(grading_warnings);
    computed.per_request.clock_origin_s = output.clock_origin_s;
    computed.set_rtfx(&output.audio_seconds, repeats);
    // Judged on the result's own exact figures, over every request completed.
    if let (Some(goals), Some(ended)) = (&load.until_confident, ended) {
        let verdicts = Verdicts::new(goals, ended, output.not_sent, |m| computed.summary(m));
        computed.until_confident = Some(verdicts);
    }
    // The theoretical prefix reuse counts prompt tokens: none without a tokenizer. A
    // shard keeps each prompt's block keys for the merge, which counts all shards'.
    let mut prefix_keys = None;
    if let Some(tokenizer) = tokenizer
        && plan.metrics.prefix_block_size > 0
        && !output.prompts.is_empty()
    {
        let keys = prompt_keys(
            &computed.per_request.records,
            &output.prompts,
            tokenizer,
            plan.metrics.prefix_block_size,
            repeats,
        )?;
        side.prefix_reuse = Some(crate::prefix_reuse::of_records(
            &computed.per_request.records,
            &keys,
            plan.metrics.prefix_block_size,
        ));
        prefix_keys = Some(keys);
    }
    if let Some(shard) = &plan.drive.shard {
        // Read by index above (prompts, audio): from here on, the workload's own indices.
        shard.plan.globalise(&mut computed.per_request.records);
    }
    for w in &computed.warnings {
        observer.event(Event::Warning(w));
    }
    for n in &computed.notes {
        observer.event(Event::Note(n));
    }
    let report = plan.report;
    let mut run = run_info(plan, backend, started_at, rps_change_events);
    if load.duration.is_some() {
        // A timed run's request count is what it sent.
        run.num_prompts = computed.per_request.records.len();
    }
    observer.event(Event::Results {
        metrics: &computed,
        side: &side,
        run: &run,
    });
    stop_profiler(plan.drive.profiler.as_ref(), rt, observer);
    // A run that met its own stopping rule is complete, not interrupted.
    let interrupted = output
        .stopped
        .filter(|r| !r.is_goal())
        .map(|reason| Interruption {
            reason: reason.to_string(),
            not_sent: output.not_sent,
            cancelled: output.cancelled,
        });
    if let Some(interruption) = &interrupted {
        observer.event(Event::Interrupted {
            interruption,
            requests,
            grace: load.shutdown_grace,
        });
    }
    let save = SaveOptions {
        interrupted: interrupted.clone(),
        ..report.save.clone()
    };
    let saved = report::save(&computed, &side, &run, &save)?;
    if let Some(path) = &saved {
        observer.event(Event::Saved {
            path,
            interrupted: interrupted.is_some(),
        });
    }
    if let Some(file) = record_file {
        let end = record_file::End {
            run: run.clone(),
            clock_origin_s: computed.per_request.clock_origin_s,
            diagnostics: ShardDiagnostics {
                shard: Shard { index: 0, count: 1 },
                host: crate::shard::host_name(),
                cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
                requests,
                sent: computed.client.sent,
                duration_s: computed.duration_s,
                schedule_lag_ms: computed.client.schedule_lag_ms,
                cpu: side.client_cpu,
                http_client: side.http_client.map(str::to_owned),
                start_at: None,
                started_late_s,
                clock_offset: None,
                clock_offset_note: None,
            },
            interrupted: interrupted.clone(),
            server_metrics: side.server_metrics.clone(),
            endpoint_server_metrics: side.endpoint_server_metrics.clone(),
            probe: side.probe,
            prefix_keys: prefix_keys.as_ref().map(|keys| {
                let records = &computed.per_request.records;
                records
                    .iter()
                    .zip(keys)
                    .filter_map(|(r, k)| Some((r.index, k.clone()?)))
                    .collect()
            }),
            // By record: a timed run's records go past the workload's indices.
            audio_seconds: computed
                .per_request
                .records
                .iter()
                .filter_map(|r| {
                    let slot = repeats.map_or(r.index, |n| r.index % n);
                    let seconds = *output.audio_seconds.get(slot)?;
                    (seconds != 0.0).then_some((r.index, seconds))
                })
                .collect(),
        };
        let path = file.finish(&end)?;
        observer.event(Event::Note(&format!(
            "--record-file: every request's record in {}",
            path.display()
        )));
    }
    let shard = match &plan.drive.shard {
        Some(shard) => Some(ShardDoc::new(
            &computed,
            &side,
            &run,
            &ShardRun {
                started_late_s,
                audio_seconds: output.audio_seconds,
                ..shard.clone()
            },
            interrupted.as_ref(),
            tokenizer.map(|_| &counter as metrics::TokenCounter<'_>),
            prefix_keys,
        )?),
        None => None,
    };
    Ok(Outcome {
        metrics: computed,
        side,
        run,
        requests,
        interrupted,
        // Read last: a signal while saving still decides the exit code.
        signal: stop.signal(),
        saved,
        shard,
    })
}
