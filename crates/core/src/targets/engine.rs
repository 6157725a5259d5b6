//! The native target: the in-process inference engine (`bench-engine`, on candle), so a
//! model is measured on this machine's CPU or GPU without a server.
//!
//! Everything a server target does before the clock happens here too: the prompts are
//! tokenized with the model's tokenizer when the target is built, never during the run.
//! The run hands the whole workload to the engine, which releases request `i` once its
//! offset has passed and fewer than `--max-concurrency` requests are in flight (the
//! client's cap: the release is the send), admits it once a batch slot is free (continuous
//! batching), and the engine's thread (this one) records the time of every token as it is
//! sampled: the host's clock at the moment the token exists, the equivalent of a server's
//! bytes arriving. So TTFT (release to the first token, the engine's queueing included),
//! ITL, TPOT and E2EL mean what they mean for a server, the wait for the cap is the
//! records' `concurrency_wait`, and the records go through the same metrics and reports.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use super::{RunOptions, RunOutput, Target, WarmUp};
use crate::client::cpu;
use crate::client::load::Releases;
use crate::client::stop::StopSignal;
use crate::engine::{Engine, EngineConfig, Events, FinishReason, GenOptions, GenRequest, Sampling};
use crate::metrics::ClientCpu;
use crate::observer::{Event, Observer};
use crate::record::{FailureKind, RequestRecord};
use crate::runtime::{Prompt, RequestSpec};
use crate::tokenizer::Tokenizer;
use crate::workload::{self, TokenizerError, Workload, WorkloadConfig};

/// The name results give this target (`backend`).
pub const NAME: &str = "native";

/// How the engine samples and what it returns, for every request of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct NativeRun {
    /// 0 is greedy. vLLM's offline benchmarks sample at 1.0.
    pub temperature: f32,
    /// 1.0 turns it off.
    pub top_p: f32,
    /// 0 turns it off.
    pub top_k: usize,
    /// Generate until the request's output length whatever the model says (vLLM's
    /// offline benchmarks always do).
    pub ignore_eos: bool,
    /// Turn the generated tokens into text during the run, as vLLM's engine does unless
    /// `--disable-detokenize`; without it the records' texts are empty.
    pub detokenize: bool,
    /// Request `i` samples with seed `seed + i`, so a run is reproducible.
    pub seed: u64,
}

impl Default for NativeRun {
    fn default() -> Self {
        NativeRun {
            temperature: 1.0,
            top_p: 1.0,
            top_k: 0,
            ignore_eos: true,
            detokenize: true,
            seed: 0,
        }
    }
}

/// One request as the engine takes it.
#[derive(Debug, Clone)]
struct Prepared {
    request_id: String,
    prompt: Vec<u32>,
    /// The dataset's own count (`prompt_len`), kept for the records.
    dataset_prompt_len: u32,
    max_tokens: u32,
}

/// The engine and a workload tokenized for it.
pub struct EngineTarget<'e> {
    engine: &'e mut Engine,
    requests: Vec<Prepared>,
    run: NativeRun,
}

impl<'e> EngineTarget<'e> {
    /// Tokenizes every prompt with the model's tokenizer, as vLLM's `LLM.generate` does
    /// (`add_special_tokens` for text, the chat template then no special tokens for a
    /// conversation, token ids as they are). Multimodal, pooling and structured-output
    /// requests are refused: the engine generates free text from text.
    pub fn prepare(
        engine: &'e mut Engine,
        specs: &[RequestSpec],
        tokenizer: &Tokenizer,
        run: NativeRun,
    ) -> Result<Self> {
        let mut requests = Vec::with_capacity(specs.len());
        for (i, spec) in specs.iter().enumerate() {
            let request_id = spec.request_id.clone().unwrap_or_else(|| i.to_string());
            if !spec.multimodal.is_empty() {
                bail!(
                    "request {request_id}: the native engine takes text only, and this request \
                     carries multimodal content (use a text dataset, or a server backend)"
                );
            }
            if spec.output_constraint.is_some() {
                bail!(
                    "request {request_id}: the native engine has no structured output, and this                      request carries an output constraint (use a server backend)"
                );
            }
            let prompt = match &spec.prompt {
                Prompt::Text(text) => encode(engine, text, true)
                    .with_context(|| format!("request {request_id}: tokenizing its prompt"))?,
                Prompt::TokenIds(ids) => ids.clone(),
                Prompt::Chat(messages) => {
                    let rendered = tokenizer
                        .apply_chat_template(
                            &messages
                                .iter()
                                .map(crate::runtime::chat_message_json)
                                .collect::<Vec<_>>(),
                            true,
                        )
                        .with_context(|| {
                            format!("request {request_id}: rendering its chat template")
                        })?;
                    encode(engine, &rendered, false)
                        .with_context(|| format!("request {request_id}: tokenizing its prompt"))?
                }
                Prompt::Texts(_) | Prompt::Rerank(_) => bail!(
                    "request {request_id}: pooling requests (embeddings, rerank) need a pooling \
                     server backend; the native engine generates text"
                ),
            };
            if prompt.is_empty() {
                bail!("request {request_id}: its prompt has no tokens");
            }
            requests.push(Prepared {
                request_id,
                prompt,
                dataset_prompt_len: spec.prompt_len,
                max_tokens: spec.expected_output_len.max(1),
            });
        }
        Ok(EngineTarget {
            engine,
            requests,
            run,
        })
    }

    /// The engine's requests, sampling seeded per request; each admitted no earlier than
    /// its offset after `t0` (all at once for offline throughput).
    fn gen_requests(&self, offsets: &[f64], t0: Instant) -> Vec<GenRequest> {
        self.requests
            .iter()
            .zip(offsets)
            .enumerate()
            .map(|(i, (r, &offset))| GenRequest {
                prompt: r.prompt.clone(),
                max_tokens: r.max_tokens,
                ignore_eos: self.run.ignore_eos,
                sampling: Sampling {
                    temperature: self.run.temperature,
                    top_p: self.run.top_p,
                    top_k: self.run.top_k,
                    seed: self.run.seed.wrapping_add(i as u64),
                },
                not_before: (offset > 0.0).then(|| t0 + std::time::Duration::from_secs_f64(offset)),
            })
            .collect()
    }
}

fn encode(engine: &Engine, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
    let encoding = engine
        .tokenizer()
        .encode(text, add_special_tokens)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(encoding.get_ids().to_vec())
}

impl Target for EngineTarget<'_> {
    fn name(&self) -> &str {
        NAME
    }

    fn requests(&self) -> usize {
        self.requests.len()
    }

    /// No readiness check (the model is loaded); warm-ups are the workload's first
    /// requests, run to completion before the clock.
    async fn warm_up(&mut self, warm_up: &WarmUp, observer: &mut dyn Observer) -> Result<()> {
        if warm_up.requests == 0 {
            return Ok(());
        }
        observer.event(Event::WarmUpStarted {
            requests: warm_up.requests,
        });
        let n = (warm_up.requests as usize).min(self.requests.len());
        let requests = self.gen_requests(&vec![0.0; n], Instant::now());
        self.engine
            .generate(&requests[..n], &mut Discard)
            .context("the engine's warm-up requests")?;
        observer.event(Event::WarmUpDone);
        Ok(())
    }

    async fn run(
        self,
        releases: Releases,
        options: RunOptions,
        _observer: &mut dyn Observer,
    ) -> Result<RunOutput> {
        let Releases::Workload(offsets) = releases else {
            anyhow::bail!(
                "--duration: the native engine runs its workload by count; run it with \
                 --num-prompts"
            );
        };
        let offsets = &offsets[..];
        let clock_origin_s = cpu::monotonic().as_secs_f64();
        let cpu_before = cpu::process();
        let t0 = Instant::now();
        let requests = self.gen_requests(offsets, t0);
        let mut collector = Collector {
            t0,
            offsets,
            released: vec![None; requests.len()],
            tokens: vec![Vec::new(); requests.len()],
            times: vec![Vec::new(); requests.len()],
            finished: vec![None; requests.len()],
            stop: &options.stop,
            progress: &options.progress,
            live: options.live.as_deref(),
        };
        let gen_options = GenOptions {
            max_in_flight: options.max_concurrency,
        };
        let stats = self
            .engine
            .generate_with(&requests, &gen_options, &mut collector)
            .context("the native engine")?;
        let Collector {
            released,
            tokens,
            times,
            finished,
            ..
        } = collector;
        options.progress.finish_and_clear();
        let mut records = Vec::with_capacity(requests.len());
        let mut end = t0;
        let mut cancelled = 0;
        for (i, r) in self.requests.iter().enumerate() {
            let arrival = offsets[i];
            // The send: its arrival, or when the cap let it go (the request whose slot it
            // took finished).
            let start = released[i].map_or(arrival, |at| {
                at.duration_since(t0).as_secs_f64().max(arrival)
            });
            let text = if self.run.detokenize {
                self.engine
                    .tokenizer()
                    .decode(&tokens[i], true)
                    .map_err(|e| anyhow::anyhow!("{e}"))
                    .with_context(|| format!("request {}: detokenizing", r.request_id))?
            } else {
                String::new()
            };
            let secs = |at: Instant| at.duration_since(t0).as_secs_f64() - start;
            let ttft = times[i].first().map(|&t| secs(t)).unwrap_or(0.0);
            let itl = times[i]
                .windows(2)
                .map(|w| w[1].duration_since(w[0]).as_secs_f64())
                .collect();
            let (reason, finished_at) = finished[i].unwrap_or((FinishReason::Aborted, t0));
            end = end.max(finished_at);
            let outcome = match reason {
                FinishReason::Aborted => {
                    cancelled += 1;
                    Err(FailureKind::Interrupted
                        .failure("the run was stopped before this request finished"))
                }
                FinishReason::Length | FinishReason::Stop => Ok(()),
            };
            let prompt_tokens = r.prompt.len() as u32;
            let generated = tokens[i].len() as u32;
            records.push(RequestRecord {
                index: i,
                request_id: r.request_id.clone(),
                outcome,
                prompt_len: r.dataset_prompt_len,
                // What the engine processed, as vLLM's offline benchmarks count it
                // (`len(prompt_token_ids)`): the "server's usage" of this target.
                usage_prompt_len: Some(prompt_tokens),
                server_prompt_tokens: Some(prompt_tokens),
                expected_output_len: r.max_tokens,
                output_tokens: Some(generated),
                server_output_tokens: Some(generated),
                generated_text: text,
                reasoning_text: String::new(),
                ttft,
                ttfc: None,
                itl,
                chunk_tokens: vec![1; generated as usize],
                latency: times[i].last().map(|&t| secs(t)).unwrap_or(0.0),
                start_time: start,
                dispatch_time: arrival,
                intended_start_time: arrival,
                concurrency_wait: start - arrival,
                retried: false,
                turn: None,
                cached_prompt_tokens: None,
                pooled_results: None,
                // In process: no server reports a timing of its own.
                server_timing: None,
                endpoint: 0,
                // Refused in `prepare`: the engine sends no constraint to check.
                output_validity: None,
                grade: None,
            });
        }
        let cpu_total = (cpu::process() - cpu_before).as_secs_f64();
        Ok(RunOutput {
            records,
            duration: end.duration_since(t0).as_secs_f64(),
            stopped: options.stop.reason(),
            not_sent: 0,
            cancelled,
            clock_origin_s,
            cpu: ClientCpu {
                total_s: cpu_total,
                decode_s: 0.0,
            },
            transport: None,
            server_metrics: None,
            endpoint_server_metrics: Vec::new(),
            prompts: Vec::new(),
            audio_seconds: Vec::new(),
            probe: None,
            engine_peak_sequences: Some(stats.peak_running),
        })
    }
}

/// The engine's events turned into per-request token times. Called on the engine's
/// thread between steps; each call is a push into a vector reserved as it grows.
struct Collector<'a> {
    t0: Instant,
    offsets: &'a [f64],
    released: Vec<Option<Instant>>,
    tokens: Vec<Vec<u32>>,
    times: Vec<Vec<Instant>>,
    finished: Vec<Option<(FinishReason, Instant)>>,
    stop: &'a StopSignal,
    progress: &'a indicatif::ProgressBar,
    live: Option<&'a crate::client::live::LiveStats>,
}

impl Events for Collector<'_> {
    fn released(&mut self, index: usize, held_until: Option<Instant>) {
        self.released[index] = held_until;
        if let Some(live) = self.live {
            live.sent();
        }
    }

    fn token(&mut self, index: usize, token: u32, at: Instant) {
        self.tokens[index].push(token);
        self.times[index].push(at);
    }

    fn finished(&mut self, index: usize, reason: FinishReason, at: Instant) {
        // A request can only finish after it arrived; the engine never admits it before.
        debug_assert!(at >= self.t0 + std::time::Duration::from_secs_f64(self.offsets[index]));
        self.finished[index] = Some((reason, at));
        self.progress.inc(1);
        if let Some(live) = self.live {
            // The send, as the records take it: the arrival, or when the cap released it.
            let arrival = self.t0 + std::time::Duration::from_secs_f64(self.offsets[index]);
            let start = self.released[index].map_or(arrival, |held| held.max(arrival));
            let times = &self.times[index];
            if let Some(&first) = times.first() {
                let gaps = times.windows(2).map(|w| (w[1] - w[0]).as_secs_f64());
                let tokens = u32::try_from(times.len()).unwrap_or(u32::MAX);
                live.add_success(
                    (first - start).as_secs_f64(),
                    (at - start).as_secs_f64(),
                    gaps,
                    tokens,
                );
            }
        }
    }

    fn stop(&self) -> bool {
        self.stop.is_stopped()
    }
}

/// Warm-up events: nothing is kept.
struct Discard;

impl Events for Discard {
    fn token(&mut self, _: usize, _: u32, _: Instant) {}
    fn finished(&mut self, _: usize, _: FinishReason, _: Instant) {}
}

/// The native engine and how it samples.
#[derive(Debug, Clone)]
pub struct NativeConfig {
    /// `model` is filled in from [`OfflineConfig::model`] (resolved to a local path).
    pub engine: EngineConfig,
    pub run: NativeRun,
}

/// The native engine loaded, with the workload sampled with its tokenizer.
pub(crate) struct NativeOpened {
    pub engine: Box<Engine>,
    pub tokenizer: Arc<Tokenizer>,
    pub run: NativeRun,
    pub workload: Workload,
    /// The model as the user named it.
    pub model: String,
}

/// Loads the native engine's model, then its tokenizer (`tokenizer`, else the model
/// directory's `tokenizer.json`, else the GGUF file's vocabulary) and the workload sampled
/// with it. `bench serve --backend native` opens its run here too.
pub(crate) fn open_native(
    model: Option<&str>,
    tokenizer: Option<&str>,
    workload: &WorkloadConfig,
    native: &NativeConfig,
    observer: &mut dyn Observer,
) -> Result<NativeOpened> {
    let Some(model) = model else {
        bail!(
            "the native engine needs --model: a Hugging Face model directory, a .gguf file, or \
             a hub id whose copy is in the local cache"
        );
    };
    let path = resolve_model(model, &workload.hub_cache)?;
    let engine_config = EngineConfig {
        model: path.clone(),
        tokenizer: None,
        ..native.engine.clone()
    };
    let engine =
        Engine::load(&engine_config).with_context(|| format!("loading {}", path.display()))?;
    observer.event(Event::EngineLoaded {
        info: engine.info(),
    });
    let loaded = match tokenizer {
        Some(id) => {
            Tokenizer::load_from(id, &workload.hub_cache).map_err(|source| TokenizerError {
                id: id.to_owned(),
                source,
            })?
        }
        None if path.join("tokenizer.json").is_file() => {
            Tokenizer::from_file(&path.join("tokenizer.json")).map_err(|source| TokenizerError {
                id: path.display().to_string(),
                source,
            })?
        }
        None => {
            Tokenizer::from_tokenizer(engine.tokenizer().clone(), &path, engine.tokenizer_config())
                .with_context(|| format!("the tokenizer of {}", path.display()))?
        }
    };
    let workload = workload::load_with_tokenizer(workload, Some(loaded), observer)?;
    let tokenizer = workload
        .tokenizer
        .clone()
        .context("the workload lost its tokenizer")?;
    Ok(NativeOpened {
        engine: Box::new(engine),
        tokenizer,
        run: native.run.clone(),
        workload,
        model: model.to_owned(),
    })
}

/// Loads the model (native) or finds it (server), then the tokenizer and the workload.
/// Called before the run's async runtime starts: the native engine sizes candle's thread
/// pool from the environment when it loads, before any other thread runs.
/// The native engine's model: a path on disk, or a hub id (`ORG/NAME`) whose snapshot
/// is in one of the hub caches. Nothing is downloaded.
pub fn resolve_model(model: &str, hub_cache: &[PathBuf]) -> Result<PathBuf> {
    let path = Path::new(model);
    if path.exists() {
        return Ok(path.to_path_buf());
    }
    let folder = format!("models--{}", model.replace('/', "--"));
    let is_hub_id = model.split('/').count() == 2 && !model.starts_with('.');
    if is_hub_id {
        for root in hub_cache {
            let snapshots = root.join(&folder).join("snapshots");
            let Ok(entries) = std::fs::read_dir(&snapshots) else {
                continue;
            };
            let mut found: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.join("config.json").is_file())
                .collect();
            found.sort();
            if let Some(snapshot) = found.pop() {
                return Ok(snapshot);
            }
        }
    }
    bail!(
        "--model {model}: not found on disk{}. bench downloads nothing: pass a local Hugging \
         Face model directory (config.json, *.safetensors, tokenizer.json) or a .gguf file{}",
        if is_hub_id {
            format!(", and no copy of {model} in the Hugging Face cache ({folder})")
        } else {
            String::new()
        },
        if is_hub_id {
            format!(", or fetch it first (`huggingface-cli download {model}`)")
        } else {
            String::new()
        }
    )
}
