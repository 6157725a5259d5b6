//! [`Engine`]: loading, and the continuous-batching loop that runs requests to completion.
//!
//! The loop is vLLM's scheduling in miniature. Each step it
//! 0. releases arrived requests, in order, while fewer than [`GenOptions::max_in_flight`]
//!    are released and unfinished: the client's concurrency cap (`--max-concurrency`),
//!    which holds a request back before it reaches the engine, as a client holds back a
//!    request to a server;
//! 1. admits released requests, in order, while fewer than `max_num_seqs` run (a released
//!    request waiting for a slot is in the engine's queue, as in a server's);
//! 2. gives every running sequence its share of `max_num_batched_tokens`: decoding ones one
//!    token each first (so arrivals never stall running requests' inter-token times), then
//!    prompts in admission order, a prompt longer than what is left being prefilled in
//!    chunks over several steps;
//! 3. runs one forward pass for all of them (see [`crate::model`]), samples a token for each
//!    sequence whose prompt is complete, and reports it with the time it was sampled.
//!
//! Requests leave the batch as soon as they finish, and their KV cache with them.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tokenizers::Tokenizer;

use crate::error::EngineError;
use crate::kv::KvCache;
use crate::loader;
use crate::model::{Model, Segment};
use crate::sampling::Sampler;
use crate::{
    Device, EngineConfig, Events, FinishReason, GenOptions, GenRequest, GenStats, ModelInfo,
};

/// A loaded model, ready to generate.
pub struct Engine {
    model: Model,
    tokenizer: Tokenizer,
    info: ModelInfo,
    tokenizer_config: Option<serde_json::Value>,
    max_num_seqs: usize,
    max_num_batched_tokens: usize,
}

/// A running sequence.
struct Running {
    index: usize,
    cache: KvCache,
    /// Prompt, then the tokens generated so far.
    tokens: Vec<u32>,
    prompt_len: usize,
    /// Positions whose keys and values are in the cache; `tokens[done..]` are still to run.
    done: usize,
    max_tokens: usize,
    ignore_eos: bool,
    sampler: Sampler,
}

impl Running {
    fn generated(&self) -> usize {
        self.tokens.len() - self.prompt_len
    }
}

impl Engine {
    /// Loads the model (see [`EngineConfig::model`] for the formats) and its tokenizer onto
    /// the device.
    pub fn load(config: &EngineConfig) -> Result<Engine, EngineError> {
        if config.max_num_seqs == 0 {
            return Err(EngineError::Config(
                "max_num_seqs must be at least 1".into(),
            ));
        }
        if config.max_num_batched_tokens == 0 {
            return Err(EngineError::Config(
                "max_num_batched_tokens must be at least 1".into(),
            ));
        }
        if config.max_num_batched_tokens < config.max_num_seqs {
            // As vLLM's scheduler config: otherwise a full decode batch cannot run in one step.
            return Err(EngineError::Config(format!(
                "max_num_batched_tokens ({}) must be at least max_num_seqs ({})",
                config.max_num_batched_tokens, config.max_num_seqs
            )));
        }
        if config.threads == Some(0) {
            return Err(EngineError::Config("threads must be at least 1".into()));
        }
        if !config.model.exists() {
            return Err(EngineError::NotFound {
                path: config.model.clone(),
            });
        }
        let device = candle_device(config.device)?;
        let threads = cpu_threads(config.threads)?;
        let loaded = loader::load(&config.model, &device, config.requantize)?;
        let tokenizer = match &config.tokenizer {
            Some(p) => loader::load_tokenizer(p)?,
            None => loaded.tokenizer?,
        };
        let max_model_len = match config.max_model_len {
            None => loaded.max_model_len,
            Some(0) => {
                return Err(EngineError::Config(
                    "max_model_len must be at least 1".into(),
                ));
            }
            Some(n) if n > loaded.max_model_len => {
                return Err(EngineError::Config(format!(
                    "max_model_len {n} is longer than the model's context length {}",
                    loaded.max_model_len
                )));
            }
            Some(n) => n,
        };
        let model = loaded.model;
        // One forward pass before any request: candle repacks quantized weights for its fast
        // CPU kernels at their first matmul (and CUDA loads kernels and cuBLAS handles on
        // first use); paying that here keeps it out of the first request's TTFT.
        let s = &model.shapes;
        let mut cache = KvCache::new(model.blocks.len(), s.n_kv_head, s.head_dim, 1, 1, &device)?;
        let mut warm = [Segment {
            start: 0,
            len: 1,
            cache: &mut cache,
        }];
        model.step(&[0], &mut warm, &[0])?;
        let info = ModelInfo {
            name: loader::model_name(&config.model),
            architecture: model.arch.name().to_string(),
            parameters: loaded.tally.parameters,
            weight_bytes: loaded.tally.bytes,
            weights: loaded.tally.weights(),
            max_model_len,
            vocab_size: model.shapes.vocab,
            eos_token_ids: loaded.eos_token_ids,
            device: config.device,
            threads,
        };
        Ok(Engine {
            model,
            tokenizer,
            info,
            tokenizer_config: loaded.tokenizer_config,
            max_num_seqs: config.max_num_seqs,
            max_num_batched_tokens: config.max_num_batched_tokens,
        })
    }

    /// What was loaded, for the run's report and roofline figures.
    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// The tokenizer that goes with the model (or the one `--tokenizer` named), so that
    /// bench's prompts and token counts are the engine's own.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// For a GGUF model, its tokenizer settings shaped like Hugging Face's
    /// `tokenizer_config.json`: `chat_template` (`tokenizer.chat_template`), `bos_token` and
    /// `eos_token` (the vocabulary's strings for `tokenizer.ggml.bos_token_id` and
    /// `eos_token_id`) and `add_bos_token` / `add_eos_token`, each where the file has it. A
    /// GGUF file is one file, so this is how a caller applies the model's chat template or
    /// knows whether prompts start with BOS without a separate tokenizer directory. None for
    /// a Hugging Face directory: its own `tokenizer_config.json` is on disk beside the model.
    pub fn tokenizer_config(&self) -> Option<serde_json::Value> {
        self.tokenizer_config.clone()
    }

    fn new_cache(&self, initial: usize, max: usize) -> Result<KvCache, EngineError> {
        let s = &self.model.shapes;
        Ok(KvCache::new(
            self.model.blocks.len(),
            s.n_kv_head,
            s.head_dim,
            initial,
            max,
            &self.model.device,
        )?)
    }

    fn check_tokens(&self, index: usize, tokens: &[u32]) -> Result<(), EngineError> {
        if tokens.is_empty() {
            return Err(EngineError::BadRequest {
                index,
                reason: "empty prompt".into(),
            });
        }
        let vocab = self.model.shapes.vocab;
        if let Some(t) = tokens.iter().find(|&&t| t as usize >= vocab) {
            return Err(EngineError::BadRequest {
                index,
                reason: format!("token id {t} is outside the vocabulary ({vocab})"),
            });
        }
        Ok(())
    }

    /// Logits at every position of one sequence (rows = positions), f32, by one forward
    /// pass over the whole sequence: the reference the tests hold generation to.
    pub fn logits(&mut self, tokens: &[u32]) -> Result<Vec<Vec<f32>>, EngineError> {
        self.check_tokens(0, tokens)?;
        if tokens.len() > self.info.max_model_len {
            return Err(EngineError::PromptTooLong {
                index: 0,
                len: tokens.len(),
                max: self.info.max_model_len,
            });
        }
        let mut cache = self.new_cache(tokens.len(), tokens.len())?;
        let rows: Vec<u32> = (0..tokens.len() as u32).collect();
        let mut segs = [Segment {
            start: 0,
            len: tokens.len(),
            cache: &mut cache,
        }];
        let logits = self.model.step(tokens, &mut segs, &rows)?;
        Ok(logits.to_vec2::<f32>()?)
    }

    /// Runs every request to completion with continuous batching (see the module docs):
    /// requests are admitted in order once `not_before` has passed and a slot is free; each
    /// step is one forward pass over all running sequences. Every request is checked before
    /// any work starts. Calls `events` from the calling thread.
    pub fn generate(
        &mut self,
        requests: &[GenRequest],
        events: &mut dyn Events,
    ) -> Result<(), EngineError> {
        self.generate_with(requests, &GenOptions::default(), events)
            .map(|_| ())
    }

    /// [`Engine::generate`] with a client's options (a cap on requests in flight), returning
    /// the engine's own count of how many sequences it ran, and held, at once.
    pub fn generate_with(
        &mut self,
        requests: &[GenRequest],
        options: &GenOptions,
        events: &mut dyn Events,
    ) -> Result<GenStats, EngineError> {
        if options.max_in_flight == Some(0) {
            return Err(EngineError::Config(
                "max_in_flight must be at least 1".into(),
            ));
        }
        let max_len = self.info.max_model_len;
        for (index, r) in requests.iter().enumerate() {
            self.check_tokens(index, &r.prompt)?;
            if r.max_tokens == 0 {
                return Err(EngineError::BadRequest {
                    index,
                    reason: "max_tokens must be at least 1".into(),
                });
            }
            let room = max_len.saturating_sub(r.max_tokens as usize);
            if r.prompt.len() > room {
                return Err(EngineError::PromptTooLong {
                    index,
                    len: r.prompt.len(),
                    max: room,
                });
            }
        }

        let eos = self.info.eos_token_ids.clone();
        let mut running: Vec<Running> = Vec::new();
        let mut stats = GenStats::default();
        // Requests [0, released) are released, [0, next) admitted; `finished` of them ended.
        let mut released = 0usize;
        let mut finished = 0usize;
        let cap = options.max_in_flight.unwrap_or(usize::MAX);
        // When each finished request ended, in order: the k-th release (k >= cap) took the
        // slot the (k - cap + 1)-th finish freed, and a client would have sent it then.
        let mut finishes: Vec<Instant> = Vec::new();
        let started = Instant::now();
        let mut next = 0usize;
        // Per-step buffers, reused.
        let mut tokens: Vec<u32> = Vec::new();
        let mut out_rows: Vec<u32> = Vec::new();
        let mut chunks: Vec<usize> = Vec::new();
        let mut ended: Vec<(usize, FinishReason)> = Vec::new();
        loop {
            if events.stop() {
                let at = Instant::now();
                for r in &running {
                    events.finished(r.index, FinishReason::Aborted, at);
                }
                for index in next..requests.len() {
                    events.finished(index, FinishReason::Aborted, at);
                }
                return Ok(stats);
            }

            // 0. Release (the client's cap), then 1. admission.
            let now = Instant::now();
            while released < requests.len()
                && released - finished < cap
                && requests[released].not_before.is_none_or(|t| t <= now)
            {
                // Sent when it arrived, or when its slot freed if that was later (not at
                // this step's start: a request arriving mid-step waits in the engine's
                // queue, as at a server, and that wait is part of its TTFT).
                let arrival = requests[released].not_before.unwrap_or(started);
                let held_until = released
                    .checked_sub(cap)
                    .map(|k| finishes[k])
                    .filter(|&freed| freed > arrival);
                events.released(released, held_until);
                released += 1;
            }
            stats.peak_in_flight = stats.peak_in_flight.max(released - finished);
            while running.len() < self.max_num_seqs && next < released {
                let r = &requests[next];
                let total = r.prompt.len() + r.max_tokens as usize;
                let mut seq_tokens = Vec::with_capacity(total);
                seq_tokens.extend_from_slice(&r.prompt);
                running.push(Running {
                    index: next,
                    cache: self.new_cache(r.prompt.len() + 1, total)?,
                    tokens: seq_tokens,
                    prompt_len: r.prompt.len(),
                    done: 0,
                    max_tokens: r.max_tokens as usize,
                    ignore_eos: r.ignore_eos,
                    sampler: Sampler::new(&r.sampling),
                });
                events.admitted(next, now);
                next += 1;
            }
            stats.peak_running = stats.peak_running.max(running.len());
            if running.is_empty() {
                if next >= requests.len() {
                    return Ok(stats);
                }
                // Idle until the next arrival, polling `stop` now and then. (Nothing runs,
                // so nothing is in flight: the cap holds no request back.)
                if let Some(t) = requests[next].not_before {
                    let wait = t.saturating_duration_since(Instant::now());
                    std::thread::sleep(wait.min(Duration::from_millis(10)));
                }
                continue;
            }

            // 2. Token budget: decodes first, then prompt chunks in admission order.
            let mut budget = self.max_num_batched_tokens;
            chunks.clear();
            chunks.resize(running.len(), 0);
            for (c, r) in chunks.iter_mut().zip(&running) {
                if budget > 0 && r.tokens.len() - r.done == 1 {
                    *c = 1;
                    budget -= 1;
                }
            }
            for (c, r) in chunks.iter_mut().zip(&running) {
                let pending = r.tokens.len() - r.done;
                if *c == 0 && budget > 0 && pending > 1 {
                    *c = pending.min(budget);
                    budget -= *c;
                }
            }

            // 3. One forward pass.
            tokens.clear();
            out_rows.clear();
            let mut segments = Vec::with_capacity(running.len());
            for (r, &c) in running.iter_mut().zip(&chunks) {
                if c == 0 {
                    continue;
                }
                tokens.extend_from_slice(&r.tokens[r.done..r.done + c]);
                if r.done + c == r.tokens.len() {
                    out_rows.push(tokens.len() as u32 - 1);
                }
                segments.push(Segment {
                    start: r.done,
                    len: c,
                    cache: &mut r.cache,
                });
            }
            let logits = self.model.step(&tokens, &mut segments, &out_rows)?;
            drop(segments);
            let logits = if out_rows.is_empty() {
                Vec::new()
            } else {
                logits.to_vec2::<f32>()?
            };

            // 4. Sampling, events, retirement.
            let mut rows = logits.iter();
            ended.clear();
            for (pos, (r, &c)) in running.iter_mut().zip(&chunks).enumerate() {
                if c == 0 {
                    continue;
                }
                r.done += c;
                if r.done < r.tokens.len() {
                    continue; // a prompt chunk, more to come
                }
                let row = rows.next().expect("one logits row per sampling sequence");
                let token = r.sampler.sample(row);
                let at = Instant::now();
                r.tokens.push(token);
                events.token(r.index, token, at);
                let reason = if !r.ignore_eos && eos.contains(&token) {
                    Some(FinishReason::Stop)
                } else if r.generated() >= r.max_tokens || r.tokens.len() >= max_len {
                    Some(FinishReason::Length)
                } else {
                    None
                };
                if let Some(reason) = reason {
                    events.finished(r.index, reason, at);
                    ended.push((pos, reason));
                    if cap != usize::MAX {
                        finishes.push(at);
                    }
                }
            }
            for &(pos, _) in ended.iter().rev() {
                running.remove(pos);
            }
            finished += ended.len();
        }
    }
}

fn candle_device(d: Device) -> Result<candle_core::Device, EngineError> {
    match d {
        Device::Cpu => Ok(candle_core::Device::Cpu),
        #[cfg(feature = "cuda")]
        Device::Cuda(n) => Ok(candle_core::Device::new_cuda(n)?),
        #[cfg(not(feature = "cuda"))]
        Device::Cuda(_) => Err(EngineError::CudaNotBuilt),
    }
}

/// The number of CPU threads candle's kernels run on in this process.
///
/// candle sizes its CPU pools once, from `CANDLE_NUM_THREADS` (its barrier pool, for the
/// quantized matmuls and element-wise ops) and `RAYON_NUM_THREADS` (gemm), read at first use;
/// it has no API to size them. So the first engine of the process that asks for a count sets
/// both variables before candle reads them, and later engines must agree with it.
fn cpu_threads(requested: Option<usize>) -> Result<usize, EngineError> {
    static THREADS: OnceLock<usize> = OnceLock::new();
    let running = *THREADS.get_or_init(|| {
        if let Some(n) = requested {
            // SAFETY: `set_var` races with any other thread reading or writing the
            // environment. This runs once per process, when the first engine loads, which
            // bench does before it starts the run's threads (its async runtime, the
            // workload's plugins); the only thread already running then is wasmtime's epoch
            // ticker, which sleeps and bumps a counter and never touches the environment.
            // candle reads the variables only afterwards, below.
            unsafe {
                std::env::set_var("CANDLE_NUM_THREADS", n.to_string());
                std::env::set_var("RAYON_NUM_THREADS", n.to_string());
            }
        }
        candle_core::utils::barrier_pool().n_workers() + 1
    });
    match requested {
        Some(n) if n != running => Err(EngineError::Threads {
            requested: n,
            running,
        }),
        _ => Ok(running),
    }
}
