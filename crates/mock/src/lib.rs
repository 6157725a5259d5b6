//! `bench mock-server`: an OpenAI-compatible server with known delays.
//!
//! It exists so the demo, the tests and the benchmarks of the load generator have a server
//! whose behaviour is known exactly: the first token leaves at request arrival + `ttft`,
//! token `i` at arrival + `ttft + i * itl` (absolute deadlines), every response carries
//! exactly `max_tokens` tokens (or `output_len` when the request sets none), and
//! `fail_rate` of the requests are answered with HTTP 500 in a fixed, reproducible pattern;
//! other faults (HTTP errors with any status, connection resets, cut, stalled, malformed or
//! dribbled streams, in-band errors, empty answers, streams without `[DONE]`) are chosen
//! the same way (see [`Faults`]).
//!
//! Endpoints: `POST /v1/completions`, `POST /v1/chat/completions` (streaming SSE and plain
//! JSON), `POST /v1/responses` (OpenAI's Responses API, see `responses.rs`),
//! `POST /v1/messages` (Anthropic's Messages API as vLLM serves it, see `messages.rs`),
//! `POST /v1/audio/transcriptions` and `/v1/audio/translations` (multipart uploads, see
//! `audio.rs` and [`MockServer::uploads`]), `GET /v1/models`, `GET /health`,
//! `GET /metrics` (Prometheus counters of its stand-in prefix cache, see [`prefix_cache`]),
//! with `--tokenize` vLLM's `POST /tokenize` and `POST /detokenize` (see [`tokenize`]),
//! vLLM's cache resets `POST /reset_prefix_cache`, `/reset_mm_cache` and
//! `/reset_encoder_cache` (counted at `GET /mock/resets`, see `reset.rs`), and
//! the server's own record of what it did: `GET /mock/timing` (aggregates over every
//! stream), `GET /mock/aborted` (the `x-request-id`s of the requests whose client closed
//! the connection before the answer's last token, as a client that gives up does) and
//! `GET /mock/structured` (per completions or chat request with an `x-request-id`: its
//! output constraint and whether the answer kept it, see [`structured`]),
//! `GET /mock/answers` (per request that asked a question of `--answer-key`: its
//! `x-request-id`, the question and whether the answer was right, see [`answers`]),
//! `GET /mock/requests` (per streamed
//! request with an `x-request-id` header: `[{"id", "ttft_ms", "itl_ms": [...],
//! "first_content_ms"}]`, the last the first non-reasoning chunk's time, plus `"metrics"`,
//! the per-request metrics sent, with `--per-request-metrics`, which also records whole
//! answers; in the order the streams finished, within the bound of
//! [`timing::MAX_KEPT_REQUESTS`]). What it
//! does with a request:
//! - Output: token `i` is `reply::WORDS[i % 32]`, each one token for GPT-2, Qwen and
//!   Llama-3 tokenizers, so a tokenizer count of the text equals `usage.completion_tokens`.
//! - Length: always exactly `max_tokens` (completions) or `max_completion_tokens`, else
//!   `max_tokens` (chat); `finish_reason` is `"length"`. A structured-output request (a
//!   JSON schema or a choice) is the exception: its answer keeps the constraint, in pieces
//!   of up to four characters per token, and ends after it (`"stop"`) unless `max_tokens`
//!   cuts it first (see [`structured`]). So is a request whose prompt asks a question of
//!   the `--answer-key` file (GSM8K or multiple choice): it gets that question's answer
//!   (`The answer is N.\n#### N`, `Answer: X`), wrong for `--wrong-answer-rate` of them
//!   in a fixed pattern (see [`answers`]). The mock has no end-of-sequence
//!   token, so it behaves as if `ignore_eos` were always set; the flag is accepted and
//!   changes nothing. `max_tokens: 0` is refused with 400, as vLLM does.
//! - `usage.prompt_tokens` is a rough count: whitespace-separated words of the prompt text
//!   (text parts of chat messages), or the length of a token-id prompt.
//! - Streams end with a usage chunk (`choices: []`) when `stream_options.include_usage` is
//!   set, then `data: [DONE]`. With `--per-request-metrics` that chunk, and a whole
//!   answer next to its usage, carries vLLM's per-request `metrics` (see
//!   [`timing::SentMetrics`]). Non-streaming answers always carry usage and are sent when
//!   the last token would have been, at arrival + `ttft + (n - 1) * itl`.
//! - The first chat chunk carries `"role":"assistant"` together with the first token, so
//!   the number of chunks with `choices` is the number of tokens.
//! - The request's `model` is not checked; answers name the served model. `n`, `logprobs`,
//!   `echo` and sampling parameters are ignored (one choice, `logprobs: null`).
//! - Load: with `--ttft-per-running-ms`, a request's first token (and every later one)
//!   comes that much later for each request still running when it arrived (see
//!   `running.rs`), so latency grows with concurrency and a load search has a known answer.
//! - Connections stay open as long as the client keeps them, unless [`Closing`] asks for
//!   a real server's ways of ending them: a request limit, an idle timeout,
//!   `Connection: close`, or llama.cpp's silent close after every streamed response.
//!
//! "Arrival" is when the kernel received the request's bytes (`SO_TIMESTAMPING`, see
//! `arrival.rs`), so that a request that waited in the socket while the server's core was
//! busy still gets its first token `ttft` after it arrived, and the recorded TTFT includes
//! that wait; where the kernel gives no timestamp, it is when the handler starts.

pub mod answers;
mod arrival;
mod audio;
mod closing;
mod conn;
mod faults;
mod listen;
mod messages;
mod pooling;
mod prefix_cache;
pub mod profile;
mod reply;
mod request;
mod reset;
mod response;
mod responses;
mod routes;
mod running;
mod server;
mod server_metrics;
pub mod structured;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_native;
pub mod timing;
pub mod tls;
mod tokenize;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use axum::http::StatusCode;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use answers::GradedAnswer;
pub use audio::Upload;
pub use closing::{Closing, SilentClose};
use conn::{Conn, FaultListener};
pub use faults::Faults;
use faults::{Fault, FaultPlan};
pub use reply::{Reasoning, ReasoningField};
use routes::router;
pub use server::Session;
use server::{Shared, unix_now};
pub use server_metrics::{Family as ServerFamily, ServerMetrics};

/// Command-line options of `bench mock-server`.
#[derive(Debug, Clone, clap::Args)]
pub struct MockServerArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Time to first token in milliseconds, from request arrival.
    #[arg(long, default_value_t = 0)]
    pub ttft_ms: u64,
    /// Inter-token latency in milliseconds.
    #[arg(long, default_value_t = 0)]
    pub itl_ms: u64,
    /// Milliseconds added to the time to first token for each request already running
    /// when a request arrives (running: until its last token is due), so that latency
    /// grows with load and a load search has a known capacity to find.
    #[arg(long, default_value_t = 0)]
    pub ttft_per_running_ms: u64,
    /// Spread the time to first token: request k (from 0) waits --ttft-ms plus this many
    /// milliseconds times a uniform draw in [0, 1) from k and --latency-seed, so the
    /// TTFTs follow a known distribution (uniform from --ttft-ms to --ttft-ms plus this)
    /// against which a client's confidence intervals can be checked.
    #[arg(long, default_value_t = 0)]
    pub ttft_spread_ms: u64,
    /// The seed of --ttft-spread-ms's draws.
    #[arg(long, default_value_t = 0)]
    pub latency_seed: u64,
    /// Output tokens for requests that set no max_tokens.
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..))]
    pub output_len: u32,
    /// Model name served by /v1/models and named in every response.
    #[arg(long, default_value = "mock")]
    pub model: String,
    /// Share of generation requests answered with HTTP 500, from 0.0 to 1.0, in a fixed
    /// pattern: request k (from 0) fails iff floor((k+1)*rate) > floor(k*rate).
    #[arg(long, default_value_t = 0.0, value_parser = faults::parse_rate)]
    pub fail_rate: f64,
    #[command(flatten)]
    pub faults: Faults,
    #[command(flatten)]
    pub closing: Closing,
    /// Answer a request whose body repeats an earlier one as if its whole prompt came
    /// from a prefix cache, and count it in `/metrics` (vLLM's counter names).
    #[arg(long)]
    pub prefix_cache: bool,
    /// Serve vLLM's `/tokenize` and `/detokenize` with a one-token-per-character
    /// tokenizer, which no client shares, so that a client's prompt re-alignment shows.
    #[arg(long)]
    pub tokenize: bool,
    #[command(flatten)]
    pub server_metrics: ServerMetrics,
    /// Serve https with this PEM certificate chain (with --tls-key): a TLS front on
    /// --host/--port relays to the mock, to try a client's certificate checks.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub reasoning: Reasoning,
    /// Tokens the server's `usage` counts for each word of an answer (each word is one
    /// GPT-2 token, so 1 agrees with a GPT-2 client): a server whose tokenizer disagrees
    /// with the client's, and, with `stream_options.continuous_usage_stats`, chunks that
    /// carry several tokens each. OpenAI APIs' usage only.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub usage_tokens_per_word: u32,
    /// Send vLLM's per-request timing (`--enable-per-request-metrics`): a `metrics`
    /// object on the final usage chunk of completions and chat streams and next to the
    /// usage of whole answers, with the times this server measured (queue time: its wait
    /// for --ttft-per-running-ms; time to first token: the rest, as vLLM's runs from
    /// scheduling), also reported at /mock/requests.
    #[arg(long)]
    pub per_request_metrics: bool,
    /// Share of the completions and chat requests with a JSON-schema or choice constraint
    /// (structured output) answered wrongly, from 0.0 to 1.0, in --fail-rate's pattern counted
    /// over those requests alone: in turn text that is not JSON and JSON the schema refuses,
    /// or none of the choices.
    #[arg(long, default_value_t = 0.0, value_parser = faults::parse_rate)]
    pub invalid_structured_rate: f64,
    /// A JSONL file of graded questions, read at start: GSM8K lines `{"question",
    /// "answer"}` (a solution ending in `#### N`) or multiple-choice lines `{"question",
    /// "choices", "answer"}` (a letter or a 0-based index). A completions or chat request
    /// whose prompt contains a question (the last one found, past a few-shot prompt's
    /// solved ones) is answered `The answer is N.\n#### N` or `Answer: X`, ending with
    /// "stop", so that a client's accuracy has a known value (see /mock/answers).
    #[arg(long, value_name = "FILE")]
    pub answer_key: Option<std::path::PathBuf>,
    /// Share of the requests that ask an --answer-key question answered wrongly, from 0.0
    /// to 1.0, in --fail-rate's pattern counted over those requests alone: GSM8K's number
    /// plus one, or the next choice's letter.
    #[arg(long, default_value_t = 0.0, value_parser = faults::parse_rate)]
    pub wrong_answer_rate: f64,
}

/// Everything that shapes the mock server's behaviour; `Default` is a zero-delay server on
/// a free loopback port, which is what tests usually want.
#[derive(Debug, Clone, PartialEq)]
pub struct MockConfig {
    pub host: String,
    pub port: u16,
    /// Request arrival to the first token.
    pub ttft: Duration,
    /// Gap between successive tokens.
    pub itl: Duration,
    /// See [`MockServerArgs::ttft_per_running_ms`].
    pub ttft_per_running: Duration,
    /// See [`MockServerArgs::ttft_spread_ms`].
    pub ttft_spread: Duration,
    /// See [`MockServerArgs::latency_seed`].
    pub latency_seed: u64,
    /// Output tokens when a request sets no max_tokens; at least 1.
    pub output_len: u32,
    pub model: String,
    /// Share of generation requests answered with HTTP 500 (see [`MockServerArgs::fail_rate`]).
    pub fail_rate: f64,
    /// The other faults and their shares.
    pub faults: Faults,
    /// How connections end (by default they stay open as long as the client keeps them).
    pub closing: Closing,
    /// See [`MockServerArgs::prefix_cache`].
    pub prefix_cache: bool,
    /// See [`MockServerArgs::tokenize`].
    pub tokenize: bool,
    /// A server family's own `/metrics`, moving with the load (see [`ServerMetrics`]).
    pub server_metrics: ServerMetrics,
    /// The first tokens of chat, Responses and Messages answers are reasoning (see
    /// [`Reasoning`]).
    pub reasoning: Reasoning,
    /// See [`MockServerArgs::usage_tokens_per_word`]; at least 1.
    pub usage_tokens_per_word: u32,
    /// See [`MockServerArgs::per_request_metrics`].
    pub per_request_metrics: bool,
    /// See [`MockServerArgs::invalid_structured_rate`] and `structured.rs`.
    pub invalid_structured_rate: f64,
    /// See [`MockServerArgs::answer_key`] and [`answers`]; read by [`spawn`].
    pub answer_key: Option<std::path::PathBuf>,
    /// See [`MockServerArgs::wrong_answer_rate`]; more than 0 needs an `answer_key`.
    pub wrong_answer_rate: f64,
}

impl Default for MockConfig {
    fn default() -> Self {
        MockConfig {
            host: "127.0.0.1".to_owned(),
            port: 0,
            ttft: Duration::ZERO,
            itl: Duration::ZERO,
            ttft_per_running: Duration::ZERO,
            ttft_spread: Duration::ZERO,
            latency_seed: 0,
            output_len: 128,
            model: "mock".to_owned(),
            fail_rate: 0.0,
            faults: Faults::default(),
            closing: Closing::default(),
            prefix_cache: false,
            tokenize: false,
            server_metrics: ServerMetrics::default(),
            reasoning: Reasoning::default(),
            usage_tokens_per_word: 1,
            per_request_metrics: false,
            invalid_structured_rate: 0.0,
            answer_key: None,
            wrong_answer_rate: 0.0,
        }
    }
}

impl From<&MockServerArgs> for MockConfig {
    fn from(args: &MockServerArgs) -> Self {
        MockConfig {
            host: args.host.clone(),
            port: args.port,
            ttft: Duration::from_millis(args.ttft_ms),
            itl: Duration::from_millis(args.itl_ms),
            ttft_per_running: Duration::from_millis(args.ttft_per_running_ms),
            ttft_spread: Duration::from_millis(args.ttft_spread_ms),
            latency_seed: args.latency_seed,
            output_len: args.output_len,
            model: args.model.clone(),
            fail_rate: args.fail_rate,
            faults: args.faults.clone(),
            closing: args.closing.clone(),
            prefix_cache: args.prefix_cache,
            tokenize: args.tokenize,
            server_metrics: args.server_metrics.clone(),
            reasoning: args.reasoning,
            usage_tokens_per_word: args.usage_tokens_per_word,
            per_request_metrics: args.per_request_metrics,
            invalid_structured_rate: args.invalid_structured_rate,
            answer_key: args.answer_key.clone(),
            wrong_answer_rate: args.wrong_answer_rate,
        }
    }
}

impl MockConfig {
    /// Every fault with its rate, in the order the plan breaks ties.
    fn fault_rates(&self) -> Vec<(Fault, f64)> {
        let f = &self.faults;
        // Checked at spawn; an out-of-range status would be refused there.
        let status =
            StatusCode::from_u16(f.http_error_status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        vec![
            (Fault::ServerError, self.fail_rate),
            (Fault::Http(status), f.http_error_rate),
            (Fault::Reset, f.reset_rate),
            (Fault::Cut, f.cut_rate),
            (Fault::Malformed, f.malformed_rate),
            (Fault::Stall, f.stall_rate),
            (Fault::ErrorEvent, f.error_event_rate),
            (Fault::Empty, f.empty_rate),
            (Fault::NoDone, f.no_done_rate),
            (Fault::Dribble, f.dribble_rate),
        ]
    }
}

/// A running mock server. Dropping it starts a graceful shutdown (responses in flight are
/// finished); [`MockServer::shutdown`] also waits for it.
#[derive(Debug)]
pub struct MockServer {
    addr: SocketAddr,
    uploads: Arc<audio::Uploads>,
    timing: Arc<timing::TimingRecorder>,
    structured: Arc<structured::StructuredLog>,
    answers: Arc<answers::AnswerLog>,
    closes: Arc<closing::CloseStats>,
    sessions: Arc<std::sync::Mutex<Vec<Session>>>,
    /// See [`MockServer::profile_calls`].
    profile: Arc<profile::ProfileLog>,
    /// Dropping the sender is the shutdown signal (for the server and stalled streams).
    stop: watch::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
}

impl MockServer {
    /// The address actually bound (the real port when the config asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What the server actually did so far: mean time to the first token chunk and mean
    /// gap between chunks, measured when each chunk was handed to the connection.
    pub fn timing(&self) -> timing::TimingSnapshot {
        self.timing.snapshot()
    }

    /// What the server actually did per streamed request that carried an `x-request-id`,
    /// in the order the streams finished (see [`timing::RequestTiming`]). An id sent twice
    /// (bench's ready check reuses request 0's) has two entries; the later one is the
    /// later request's.
    pub fn requests(&self) -> Vec<timing::RequestTiming> {
        self.timing.requests()
    }

    /// What each completions or chat request with an `x-request-id` asked of its output
    /// (structured output) and whether its answer kept it, in the order they were
    /// answered (see [`structured::StructuredAnswer`]); `GET /mock/structured` serves the
    /// same. Every such request that was answered has an entry, streamed or not, with a
    /// constraint or without.
    pub fn structured(&self) -> Vec<structured::StructuredAnswer> {
        self.structured.list()
    }

    /// What the mock answered to each request that asked a question of the answer key
    /// (`--answer-key`), in the order they were answered (see [`answers::GradedAnswer`]);
    /// `GET /mock/answers` serves the same. Only such requests have an entry, with an
    /// `x-request-id` or without.
    pub fn answers(&self) -> Vec<answers::GradedAnswer> {
        self.answers.list()
    }

    /// The `x-request-id`s of the requests whose client closed the connection before the
    /// answer's last token (a client that gave up), in the order they did; the count of
    /// all such requests, with or without an id, is [`Self::timing`]'s `aborted`.
    pub fn aborted(&self) -> Vec<String> {
        self.timing.aborted_ids()
    }

    /// The requests that carried an `x-session-id` header, in arrival order, with their
    /// bodies: what a test of multi-turn runs checks a conversation's turns against.
    pub fn sessions(&self) -> Vec<Session> {
        self.sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// What the audio requests uploaded (`/v1/audio/transcriptions` and
    /// `/v1/audio/translations`), in arrival order (see [`audio::Upload`]).
    pub fn uploads(&self) -> Vec<audio::Upload> {
        self.uploads.list()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.closes.connections()
    }

    /// Requests that arrived on a connection the server had already closed without notice
    /// (an idle timeout, a silent close after a stream), read and never answered: each is
    /// one the client had to send again.
    pub fn dropped_requests(&self) -> u64 {
        self.closes.dropped_requests()
    }

    /// The calls to vLLM's profiler endpoints (`/start_profile`, `/stop_profile`), in
    /// arrival order (see [`profile`]).
    pub fn profile_calls(&self) -> Vec<profile::ProfileCall> {
        self.profile.calls()
    }

    /// `http://ip:port`, without a path: endpoints are `{base_url}/v1/completions` etc.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting connections, lets responses in flight finish, and waits until the
    /// server has stopped.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        let MockServer { stop, task, .. } = self;
        drop(stop);
        task.await
            .context("the mock server task panicked")?
            .context("the mock server failed")
    }
}

/// Binds the mock server and serves in the background on the current tokio runtime.
pub async fn spawn(config: MockConfig) -> anyhow::Result<MockServer> {
    let rates = config.fault_rates();
    if let Err(message) = faults::check_rates(&rates) {
        bail!(message);
    }
    let invalid_structured = [(Fault::InvalidStructured, config.invalid_structured_rate)];
    if let Err(message) = faults::check_rates(&invalid_structured) {
        bail!(message);
    }
    let wrong_answers = [(Fault::WrongAnswer, config.wrong_answer_rate)];
    if let Err(message) = faults::check_rates(&wrong_answers) {
        bail!(message);
    }
    let answer_key = match &config.answer_key {
        Some(path) => Some(answers::AnswerKey::read(path)?),
        None if config.wrong_answer_rate > 0.0 => {
            bail!("mock server --wrong-answer-rate needs an --answer-key");
        }
        None => None,
    };
    if !(400..=599).contains(&config.faults.http_error_status) {
        bail!(
            "mock server --http-error-status must be from 400 to 599, got {}",
            config.faults.http_error_status
        );
    }
    if config.output_len == 0 {
        bail!("mock server output length must be at least 1");
    }
    let listener = listen::bind(&config.host, config.port)
        .await
        .with_context(|| format!("binding the mock server to {}:{}", config.host, config.port))?;
    let addr = listener
        .local_addr()
        .context("reading the mock server's bound address")?;
    let (stop, shutdown) = watch::channel(());
    let timing = Arc::new(timing::TimingRecorder::default());
    let sessions: Arc<std::sync::Mutex<Vec<Session>>> = Arc::default();
    let uploads: Arc<audio::Uploads> = Arc::default();
    let structured: Arc<structured::StructuredLog> = Arc::default();
    let answers: Arc<answers::AnswerLog> = Arc::default();
    let shared = Arc::new(Shared {
        ttft: config.ttft,
        ttft_spread: config.ttft_spread,
        latency_seed: config.latency_seed,
        itl: config.itl,
        output_len: config.output_len,
        model_json: serde_json::to_string(&config.model).context("encoding the model name")?,
        model: config.model,
        started: unix_now(),
        faults: FaultPlan::new(&rates),
        stall: Duration::from_millis(config.faults.stall_ms),
        shutdown,
        timing: timing.clone(),
        prefix_cache: prefix_cache::PrefixCache::new(config.prefix_cache),
        sessions: sessions.clone(),
        load: server_metrics::Load::new(config.server_metrics.clone()),
        reasoning: config.reasoning,
        usage_tokens_per_word: config.usage_tokens_per_word.max(1),
        per_request_metrics: config.per_request_metrics,
        uploads: uploads.clone(),
        running: running::Running::new(config.ttft_per_running),
        resets: reset::Resets::default(),
        invalid_structured: FaultPlan::new(&invalid_structured),
        structured: structured.clone(),
        answer_key,
        wrong_answers: FaultPlan::new(&wrong_answers),
        answers: answers.clone(),
    });
    let mut stopped = stop.subscribe();
    let closes = Arc::new(closing::CloseStats::default());
    let listener = FaultListener {
        listener,
        closing: config.closing.io_policy(),
        stats: closes.clone(),
    };
    let profile = Arc::new(profile::ProfileLog::new(timing.clone()));
    let mut app = router(shared, config.tokenize).merge(profile::router(profile.clone()));
    if config.closing.any() {
        app = app.layer(axum::middleware::from_fn_with_state(
            Arc::new(config.closing),
            conn::close_connections,
        ));
    }
    let app = app.into_make_service_with_connect_info::<Conn>();
    let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
        // Nothing is ever sent: the sender's drop means stop.
        let _ = stopped.changed().await;
    });
    let task = tokio::spawn(serve.into_future());
    Ok(MockServer {
        addr,
        uploads,
        timing,
        structured,
        answers,
        closes,
        sessions,
        profile,
        stop,
        task,
    })
}

/// `bench mock-server`: serves until Ctrl-C (a second Ctrl-C skips the graceful wait).
pub async fn run(args: MockServerArgs) -> anyhow::Result<()> {
    let mut config = MockConfig::from(&args);
    // With TLS the front takes --host/--port, and the plain mock behind it a loopback port.
    let tls_files = args.tls_cert.as_ref().zip(args.tls_key.as_ref());
    if tls_files.is_some() {
        config.host = "127.0.0.1".to_owned();
        config.port = 0;
    }
    let server = spawn(config).await?;
    let front = match tls_files {
        Some((cert, key)) => {
            let read = |p: &std::path::Path| {
                std::fs::read(p).with_context(|| format!("reading {}", p.display()))
            };
            let (cert, key) = (read(cert)?, read(key)?);
            Some(tls::front((&args.host, args.port), server.addr, &cert, &key).await?)
        }
        None => None,
    };
    println!(
        "bench mock-server listening on {} (model {:?}, ttft {} ms, itl {} ms, output-len {}, \
         fail-rate {})",
        front
            .as_ref()
            .map_or_else(|| server.base_url(), tls::TlsFront::base_url),
        args.model,
        args.ttft_ms,
        args.itl_ms,
        args.output_len,
        args.fail_rate
    );
    if args.faults != Faults::default() {
        println!("faults: {:?}", args.faults);
    }
    if args.closing != Closing::default() {
        println!("closing: {:?}", args.closing);
    }
    if args.invalid_structured_rate > 0.0 {
        println!(
            "invalid structured output: {} of the constrained requests",
            args.invalid_structured_rate
        );
    }
    if let Some(key) = &args.answer_key {
        println!(
            "answer key: {} ({} of the requests that ask its questions answered wrongly)",
            key.display(),
            args.wrong_answer_rate
        );
    }
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    eprintln!(
        "mock server: shutting down, finishing responses in flight (Ctrl-C again to quit now)"
    );
    tokio::select! {
        result = server.shutdown() => result,
        result = tokio::signal::ctrl_c() => result.context("waiting for Ctrl-C"),
    }
}
