//! The HTTP target: an inference server behind an HTTP API (vLLM, SGLang, TGI,
//! llama.cpp, any OpenAI-compatible API), reached with the requests of a backend plugin.
//!
//! Before the clock, the plugin builds every request body ([`prepare::prepare`]) and,
//! as vLLM's client does, the prompts of the datasets vLLM re-aligns are cut to the
//! server's own tokenizer. The run is the load generator ([`load::run`]) with the decode
//! worker turning responses into records on its own thread; around it, the server's
//! `/metrics` counters are read before and after.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::{RunOptions, RunOutput, Target, WarmUp};
use crate::audio_duration;
use crate::client::endpoints::{Endpoints, Routing};
use crate::client::framing::FramingKind;
use crate::client::load::{self, MoreTurns, NextTurn};
use crate::client::stop::StopSignal;
use crate::client::structured::OutputChecks;
use crate::client::worker::{self, DecodeWorker, TurnDone};
use crate::client::{HttpClient, HttpClientKind, PreparedRequest, Tls};
use crate::observer::{Event, Observer};
use crate::prepare::{self, HostHeaders};
use crate::probe::Probe;
use crate::runtime::{
    BackendDescription, BackendPlugin, ClientConfig, DatasetDescription, Framing, PluginRef,
    Prompt, TurnResult,
};
use crate::server_metrics::{RunScrapes, ScrapeConfig};
use crate::server_tokenizer;
use crate::workload::{self, Workload};

/// How to reach the server and build its requests.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// The servers' base URLs, without a trailing slash (`http://127.0.0.1:8000`), in the
    /// order given (their indices in the records); several are replicas the requests are
    /// spread over by `routing`. Never empty: [`HttpConfig::base_url`] is the first.
    pub base_urls: Vec<String>,
    /// How requests are spread over several base URLs.
    pub routing: Routing,
    /// The API path; `None`: the backend plugin's default (e.g. `/v1/chat/completions`).
    pub endpoint: Option<String>,
    /// The backend plugin, which builds the requests and decodes the responses.
    pub backend: PluginRef,
    /// The backend plugin's options.
    pub backend_options: Vec<(String, String)>,
    /// Ask the server to ignore EOS. When false, vLLM's default still applies: on for the
    /// dataset that asks for it (`ignore-eos-by-default`) with an OpenAI-compatible backend,
    /// so generation runs to the requested length.
    pub ignore_eos: bool,
    /// A JSON object merged into every request body (sampling parameters, extra fields).
    pub extra_body: Option<String>,
    /// Headers sent with every request; they override the plugin's.
    pub headers: Vec<(String, String)>,
    /// Sent as `Authorization: Bearer <key>` (vLLM reads it from `OPENAI_API_KEY`).
    pub api_key: Option<String>,
    /// How long one request may take.
    pub request_timeout: Duration,
    pub http_client: HttpClientKind,
    /// Whether https connections check the server's certificate (`--insecure`).
    pub tls: Tls,
    /// Connections opened before the clock starts (bench's own HTTP/1.1 client only);
    /// never more than there are requests.
    pub preconnect: usize,
    /// Whether and how often the server's `/metrics` is read.
    pub server_metrics: ScrapeConfig,
    /// vLLM's `--probe-request-rate`: probes per second sent beside the run (see
    /// [`crate::probe`]); `None`: no probes.
    pub probe_request_rate: Option<f64>,
}

impl HttpConfig {
    /// The first server: the one asked what one server answers for all (`/v1/models`,
    /// `/tokenize`), and the only one of a run with one.
    pub fn base_url(&self) -> &str {
        &self.base_urls[0]
    }
}

/// An HTTP server (or several replicas) with a prepared workload.
pub struct HttpTarget {
    endpoints: Endpoints,
    /// The instance that built the requests; it decodes the responses too.
    backend: BackendPlugin,
    requests: Arc<Vec<PreparedRequest>>,
    /// The backend plugin's own name (also for a `.wasm` path), so results name the API.
    name: String,
    preconnect: usize,
    /// Each server's `/metrics`, read before, during and after the run.
    server_metrics: Vec<RunScrapes>,
    /// A multi-turn workload's conversations, continued during the run.
    conversations: Option<Conversations>,
    /// Every request's prompt, by index, for the theoretical prefix reuse computed after
    /// the run (moved out of the specs once the requests are built: no copy).
    prompts: Vec<Option<Prompt>>,
    /// Seconds of audio each request uploads, measured before the clock for `rtfx`.
    audio_seconds: Vec<f64>,
    /// The probe loop run beside the workload (`--probe-request-rate`).
    probe: Option<Probe>,
}

/// What continues a multi-turn workload during the run: the dataset plugin that makes the
/// next turns and a backend instance of its own that builds them.
struct Conversations {
    source: workload::Conversations,
    backend: BackendPlugin,
    headers: HostHeaders,
    /// The next turns' output constraints, compiled once each.
    checks: OutputChecks,
}

impl HttpTarget {
    /// Builds every request of `workload` for the server: re-aligns the prompts of the
    /// datasets vLLM re-aligns to the server's tokenizer (asking `model`'s `/tokenize`, on
    /// `rt`), loads and opens the backend plugin for `served_model` (the name the API
    /// knows), and builds the request bodies and the HTTP client.
    ///
    /// Plugin calls run on the calling thread, outside the async runtime: WASI's
    /// synchronous host calls may block on a runtime of their own.
    pub fn prepare(
        config: &HttpConfig,
        model: &str,
        served_model: &str,
        workload: Workload,
        rt: &tokio::runtime::Runtime,
        observer: &mut dyn Observer,
    ) -> Result<HttpTarget> {
        let host = workload.host();
        let Workload {
            runtime,
            description: dataset,
            mut specs,
            conversations,
            ..
        } = workload;
        // vLLM re-aligns the prompts of its synthetic token-id datasets to the server's
        // tokenizer, before the clock; the dataset says whether it is one.
        if dataset.align_to_server_tokenizer {
            let alignment = rt.block_on(server_tokenizer::align(
                config.base_url(),
                model,
                &mut specs,
                config.tls,
            ));
            observer.event(Event::Alignment(&alignment));
        }
        let mut backend = runtime.load_backend(&config.backend, host)?;
        let description = backend.description()?;
        let ignore_eos = ignore_eos(config.ignore_eos, &dataset, &description);
        let name = description.info.name;
        backend.open(ClientConfig {
            model: served_model.to_owned(),
            ignore_eos,
            extra_body: config.extra_body.clone(),
            options: config.backend_options.clone(),
            // vLLM's request functions stream; `--no-stream` comes with the backend issue.
            stream: true,
        })?;
        let framing = match backend.framing()? {
            Framing::Sse => FramingKind::Sse,
            Framing::Ndjson => FramingKind::Ndjson,
            Framing::Raw => FramingKind::Raw,
        };
        let endpoint = match &config.endpoint {
            Some(e) => e.clone(),
            None => backend.default_path()?,
        };
        let host_headers = HostHeaders {
            api_key: config.api_key.clone(),
            extra: config.headers.clone(),
        };
        let requests = Arc::new(prepare::prepare(&mut backend, &specs, &host_headers)?);
        let audio = audio_duration::measure(&specs);
        if let Some(warning) = audio.warning() {
            observer.event(Event::Warning(&warning));
        }
        let url = format!("{}{}", config.base_url(), endpoint);
        let probe = match (config.probe_request_rate, specs.first()) {
            (Some(rate), Some(first)) => {
                // Its own client: its own connection, outside the run's pool.
                let client = HttpClient::new(
                    &url,
                    framing,
                    Some(config.request_timeout),
                    config.http_client,
                    config.tls,
                )?;
                Some(Probe::prepare(
                    rate,
                    &mut backend,
                    first,
                    &host_headers,
                    client,
                )?)
            }
            _ => None,
        };
        let prompts = specs.into_iter().map(|s| Some(s.prompt)).collect();
        let conversations = match conversations {
            Some(source) => Some(Conversations {
                source,
                backend: backend.fork()?,
                headers: host_headers,
                checks: OutputChecks::default(),
            }),
            None => None,
        };
        let clients = config
            .base_urls
            .iter()
            .map(|base_url| {
                HttpClient::new(
                    &format!("{base_url}{endpoint}"),
                    framing,
                    Some(config.request_timeout),
                    config.http_client,
                    config.tls,
                )
                .context("--http-client")
            })
            .collect::<Result<Vec<_>>>()?;
        let several = config.base_urls.len() > 1;
        let server_metrics = config
            .base_urls
            .iter()
            .map(|base_url| {
                let scrapes = RunScrapes::new(base_url, config.server_metrics, config.tls);
                if several {
                    scrapes.named(base_url)
                } else {
                    scrapes
                }
            })
            .collect();
        Ok(HttpTarget {
            endpoints: Endpoints::new(clients, config.routing),
            backend,
            requests,
            name,
            preconnect: config.preconnect,
            server_metrics,
            conversations,
            prompts,
            audio_seconds: audio.seconds,
            probe,
        })
    }
}

impl Target for HttpTarget {
    fn name(&self) -> &str {
        &self.name
    }

    fn requests(&self) -> usize {
        self.requests.len()
    }

    /// vLLM's readiness check and warm-ups (both send the first request), then the
    /// connections opened ahead and the server's counters read before the clock (after
    /// the warm-ups, whose requests would otherwise count).
    async fn warm_up(&mut self, warm_up: &WarmUp, observer: &mut dyn Observer) -> Result<()> {
        let first = self
            .requests
            .first()
            .context("the workload has no requests")?;
        // Every server is checked and warmed up: each would otherwise take its share of
        // the measured requests cold. A skipped check is said once.
        let clients = match warm_up.ready_check {
            Some(_) => self.endpoints.clients(),
            None => &self.endpoints.clients()[..1],
        };
        for client in clients {
            ready_check(
                client,
                first,
                &mut self.backend,
                warm_up.ready_check,
                observer,
            )
            .await?;
        }
        if warm_up.requests > 0 {
            observer.event(Event::WarmUpStarted {
                requests: warm_up.requests,
            });
            for client in self.endpoints.clients() {
                send_warm_ups(client, first, warm_up).await;
            }
            observer.event(Event::WarmUpDone);
        }
        // The connections each server will need: its share of the requests at once.
        let per_endpoint = self
            .preconnect
            .min(self.requests.len())
            .div_ceil(self.endpoints.len());
        for client in self.endpoints.clients() {
            client
                .preconnect(per_endpoint)
                .await
                .context("--preconnect")?;
        }
        for scrapes in &mut self.server_metrics {
            scrapes.before_run().await;
        }
        Ok(())
    }

    async fn run(
        self,
        releases: load::Releases,
        options: RunOptions,
        observer: &mut dyn Observer,
    ) -> Result<RunOutput> {
        let (turns, more, driver) = match self.conversations {
            None => (None, None, None),
            Some(conversations) => {
                let (done_tx, done_rx) = std::sync::mpsc::channel();
                let (next_tx, next_rx) = std::sync::mpsc::channel();
                let open = Arc::new(AtomicUsize::new(0));
                let driver = conversations.drive(
                    done_rx,
                    next_tx,
                    open.clone(),
                    self.requests.len(),
                    options.time_scale,
                    options.stop.clone(),
                )?;
                let more = MoreTurns {
                    next: next_rx,
                    open,
                };
                (Some(done_tx), Some(more), Some(driver))
            }
        };
        let worker = DecodeWorker::spawn_with_stop(
            self.backend,
            options.stop.clone(),
            turns,
            options.live.clone(),
            options.record_copies.clone(),
        )?;
        let load = load::LoadOptions {
            max_concurrency: options.max_concurrency,
            stop: options.stop.clone(),
            shutdown_grace: options.shutdown_grace,
            progress: options.progress,
            start: options.start,
            cancellation: options.cancellation,
            workload_index: options.workload_index,
            live: options.live.clone(),
        };
        // vLLM starts its probe loop just before the benchmark clock, and ends it once the
        // workload has been answered.
        let probe = match self.probe {
            Some(probe) => {
                observer.event(Event::ProbeStarting { rate: probe.rate() });
                Some(probe.start(options.stop.clone())?)
            }
            None => None,
        };
        let mut server_metrics = self.server_metrics;
        for scrapes in &mut server_metrics {
            scrapes.start(options.live.as_ref())?;
        }
        let measured = load::run(self.endpoints, self.requests, releases, worker, load, more).await;
        let mut during = Vec::with_capacity(server_metrics.len());
        for scrapes in &mut server_metrics {
            during.push(scrapes.stop().await);
        }
        let measured = measured?;
        let probe = match probe {
            Some(running) => Some(
                tokio::task::spawn_blocking(move || running.finish())
                    .await
                    .context("waiting for the probe thread")??,
            ),
            None => None,
        };
        let mut output = RunOutput {
            records: measured.records,
            duration: measured.duration,
            stopped: measured.stopped,
            not_sent: measured.not_sent,
            cancelled: measured.cancelled,
            clock_origin_s: measured.clock_origin_s,
            cpu: measured.cpu,
            transport: Some(measured.transport),
            server_metrics: None,
            endpoint_server_metrics: Vec::new(),
            prompts: self.prompts,
            audio_seconds: self.audio_seconds,
            probe,
            engine_peak_sequences: None,
        };
        if let Some(driver) = driver {
            let turns = tokio::task::spawn_blocking(move || driver.join())
                .await
                .context("waiting for the conversations' thread")?
                .map_err(|_| anyhow::anyhow!("the conversations' thread panicked"))?;
            for (index, prompt) in turns {
                if output.prompts.len() <= index {
                    output.prompts.resize(index + 1, None);
                }
                output.prompts[index] = Some(prompt);
            }
        }
        let mut reports = Vec::with_capacity(server_metrics.len());
        for (scrapes, during) in server_metrics.into_iter().zip(during) {
            reports.push(scrapes.report(during, observer).await);
        }
        // One server's report is the run's; several servers' are each endpoint's (their
        // gauges and histograms do not add up to one server's).
        if reports.len() == 1 {
            output.server_metrics = reports.pop().flatten();
        } else {
            output.endpoint_server_metrics = reports;
        }
        Ok(output)
    }
}

impl Conversations {
    /// Starts the thread that continues the conversations: for each turn that ended
    /// (`done`, from the decode worker) it asks the dataset for the next one, builds it
    /// with the backend and queues it for the dispatcher (`next`), its send time scaled
    /// by `time_scale`. New turns are numbered from `first_index`. A plugin that fails
    /// stops the run. `open` counts turns whose answer the dataset has not seen yet.
    fn drive(
        mut self,
        done: std::sync::mpsc::Receiver<TurnDone>,
        next: std::sync::mpsc::Sender<NextTurn>,
        open: Arc<AtomicUsize>,
        first_index: usize,
        time_scale: f64,
        stop: Arc<StopSignal>,
    ) -> Result<std::thread::JoinHandle<Vec<(usize, Prompt)>>> {
        std::thread::Builder::new()
            .name("bench-turns".into())
            .spawn(move || {
                let mut index = first_index;
                // The prompt of every turn made, for the prefix reuse after the run.
                let mut prompts = Vec::new();
                // Ends when the decode worker has finished (it holds the sender).
                for TurnDone { turn } in done {
                    if !stop.is_stopped() {
                        match self.next_turn(&turn, index) {
                            Ok(Some((request, due, prompt))) => {
                                prompts.push((index, prompt));
                                index += 1;
                                open.fetch_add(1, Ordering::AcqRel);
                                let due = due.map(|t| t * time_scale);
                                // The dispatcher is gone only once the run has ended.
                                let _ = next.send(NextTurn { request, due });
                            }
                            Ok(None) => {}
                            Err(e) => stop.stop(format!(
                                "conversation {} turn {}: {e:#}",
                                turn.session.id,
                                turn.session.turn + 1
                            )),
                        }
                    }
                    open.fetch_sub(1, Ordering::AcqRel);
                }
                prompts
            })
            .context("starting the conversations' thread")
    }

    /// The next turn after `turn`, built as request `index`, with its send time.
    fn next_turn(
        &mut self,
        turn: &TurnResult,
        index: usize,
    ) -> Result<Option<(PreparedRequest, Option<f64>, Prompt)>> {
        let Some(mut spec) = self.source.dataset.next_turn(turn)? else {
            return Ok(None);
        };
        if spec.request_id.is_none()
            && let Some(prefix) = &self.source.request_id_prefix
        {
            spec.request_id = Some(format!("{prefix}{index}"));
        }
        if let Some(lora) = spec
            .session
            .as_ref()
            .and_then(|s| self.source.lora_by_session.get(&s.id))
        {
            spec.lora_name = Some(lora.clone());
        }
        let request = prepare::prepare_one(
            &mut self.backend,
            index,
            &spec,
            &self.headers,
            &mut self.checks,
        )?;
        Ok(Some((request, spec.send_at, spec.prompt)))
    }
}

/// The first model the server lists (vLLM does this when no model is given).
pub async fn first_model(base_url: &str, headers: &[(String, String)], tls: Tls) -> Result<String> {
    let client = HttpClient::new(
        &format!("{base_url}/v1/models"),
        FramingKind::Raw,
        Some(Duration::from_secs(30)),
        HttpClientKind::Reqwest,
        tls,
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

/// vLLM's initial test request: the first request, sent until it succeeds or `timeout`
/// has passed (`None`: skipped).
async fn ready_check(
    client: &HttpClient,
    first: &PreparedRequest,
    backend: &mut BackendPlugin,
    timeout: Option<Duration>,
    observer: &mut dyn Observer,
) -> Result<()> {
    let Some(timeout) = timeout else {
        observer.event(Event::ReadyCheckSkipped);
        return Ok(());
    };
    let t0 = Instant::now();
    let check =
        |raw: &crate::client::RawResponse, backend: &mut BackendPlugin| -> crate::record::Outcome {
            let meta = crate::client::decode::RequestMeta {
                session: None,
                check: first.check.clone(),
                index: 0,
                request_id: first.request_id.clone(),
                prompt_len: first.prompt_len,
                expected_output_len: first.expected_output_len,
                intended_start_time: 0.0,
                dispatch: raw.start,
                concurrency_wait: Duration::ZERO,
                endpoint: 0,
            };
            let events = worker::decode_response(backend, raw);
            let rec = crate::client::decode::build_record(&meta, raw, events, t0);
            rec.outcome
        };
    observer.event(Event::ReadyCheckStarted);
    let deadline = Instant::now() + timeout;
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
    observer.event(Event::ReadyCheckPassed);
    Ok(())
}

/// vLLM's warm-ups: the first request `warm_up.requests` times, at most the concurrency
/// cap at once; their answers are not looked at.
async fn send_warm_ups(client: &HttpClient, first: &PreparedRequest, warm_up: &WarmUp) {
    let limit = warm_up
        .max_concurrency
        .unwrap_or(usize::MAX)
        .min(warm_up.requests as usize);
    let sem = Arc::new(tokio::sync::Semaphore::new(limit));
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..warm_up.requests {
        let (client, req, sem) = (client.clone(), first.clone(), sem.clone());
        set.spawn(async move {
            let _permit = sem.acquire_owned().await;
            client.send(&req).await
        });
    }
    while set.join_next().await.is_some() {}
}

/// Whether requests ask the server to ignore EOS: when the user says so, or by vLLM's rule,
/// which each plugin's description states: a synthetic dataset on an OpenAI-compatible
/// backend, so that generation runs to the requested length.
fn ignore_eos(forced: bool, dataset: &DatasetDescription, backend: &BackendDescription) -> bool {
    forced || (dataset.ignore_eos_by_default && backend.openai_compatible)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{PathUse, PluginInfo};

    fn info() -> PluginInfo {
        PluginInfo {
            name: "p".into(),
            version: "0".into(),
            description: String::new(),
            options: vec![],
        }
    }

    #[test]
    fn eos_is_ignored_by_the_plugins_rule_or_when_asked() {
        let dataset = |synthetic| DatasetDescription {
            info: info(),
            path: PathUse::Refused,
            ignore_eos_by_default: synthetic,
            align_to_server_tokenizer: false,
            multi_turn: false,
            shardable: false,
        };
        let backend = |openai| BackendDescription {
            info: info(),
            openai_compatible: openai,
        };
        assert!(ignore_eos(false, &dataset(true), &backend(true)));
        assert!(!ignore_eos(false, &dataset(true), &backend(false)));
        assert!(!ignore_eos(false, &dataset(false), &backend(true)));
        assert!(ignore_eos(true, &dataset(false), &backend(false)));
    }
}
