//! bench's native inference engine.
//!
//! `bench throughput` and `bench latency` (vLLM's `vllm bench throughput|latency`) can run a
//! model in-process instead of against a server; this crate is that in-process engine. It is
//! built on [candle](https://github.com/huggingface/candle) (CPU kernels, and cudarc/cuBLAS
//! on CUDA with the `cuda` feature) rather than on hand-written kernels, so that what bench
//! measures is a well-kept library's speed and the engine stays small enough to review.
//!
//! What it runs:
//! - GPT-2 and Llama-family decoders, from a local Hugging Face directory (`config.json`,
//!   `*.safetensors`, `tokenizer.json`) or from a GGUF file (any tensor type candle reads,
//!   quantized or not), see [`Engine::load`];
//! - batched generation with continuous batching ([`Engine::generate`]): requests join the
//!   running batch as they arrive and slots free up, every step runs the linear layers once
//!   for all running sequences (decode tokens and prefill chunks together), while attention
//!   reads each sequence's own KV cache; greedy or seeded sampling (temperature, top-k,
//!   top-p), with the time of every sampled token reported through [`Events`].
//!
//! What it is not: a server, or a copy of vLLM's scheduler. There is no paged KV cache and
//! no prefix caching; a sequence's cache grows as it needs to and is dropped when it ends.
//!
//! Its speed and its greedy tokens are checked against llama.cpp's `llama-server` on
//! SmolLM2-135M-Instruct by `scripts/real-server.sh` (check k: decode speed on one GGUF
//! file, with a floor; check g: greedy agreement), whose figures the README's real-server
//! block holds; `crates/engine/tests/engine/smollm2.rs` checks the model's answers.
//!
//! On the CPU, quantized weights are held in the types candle has fast kernels for (see
//! `loader::gguf`), and [`ModelInfo::weights`] says what was converted;
//! [`EngineConfig::requantize`] off keeps them as stored, which decodes several times
//! slower.
//!
//! Greedy tokens against llama.cpp's part where the two sum floats in another order: greedy
//! decoding of that model meets near-ties (top-2 logits a fraction of a unit apart), which
//! any change of summation order flips, in llama.cpp against itself (`-fa off` against its
//! default) as in the engine (with and without its KV cache). The example
//! `greedy_margins` (`cargo run --release -p bench-engine --example greedy_margins`)
//! prints, for each prompt, where the two part and the logit margins there.

mod engine;
mod error;
mod gguf_tokenizer;
mod kv;
mod loader;
mod model;
mod sampling;

pub use engine::Engine;
pub use error::EngineError;
/// The `tokenizers` release [`Engine::tokenizer`] returns, re-exported so that callers name the
/// same version.
pub use tokenizers;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Instant;

/// Where the model runs.
///
/// CPU is the default and always available. CUDA needs a binary built with the `cuda` feature
/// (and so the CUDA toolkit at build time); without it, [`Engine::load`] returns
/// [`EngineError::CudaNotBuilt`] rather than silently running on the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Device {
    #[default]
    Cpu,
    /// The CUDA device with this ordinal.
    Cuda(usize),
}

impl FromStr for Device {
    type Err = String;

    /// `cpu`, `cuda` (device 0) or `cuda:N`, as vLLM's and PyTorch's device strings.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().to_ascii_lowercase();
        match t.as_str() {
            "cpu" => Ok(Device::Cpu),
            "cuda" | "gpu" => Ok(Device::Cuda(0)),
            _ => match t.strip_prefix("cuda:") {
                Some(n) => n
                    .parse()
                    .map(Device::Cuda)
                    .map_err(|_| format!("bad CUDA device ordinal in `{s}` (expected cuda:N)")),
                None => Err(format!(
                    "unknown device `{s}` (expected cpu, cuda or cuda:N)"
                )),
            },
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// How to load and run a model; the knobs mirror vLLM's engine arguments of the same names.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// A Hugging Face model directory (`config.json` + `*.safetensors` [+ `tokenizer.json`])
    /// or a `.gguf` file. Local only: the engine never downloads.
    pub model: PathBuf,
    /// A `tokenizer.json`, a directory holding one, or a `.gguf` file whose vocabulary to
    /// use. None: the model directory's `tokenizer.json`, or the GGUF file's embedded
    /// vocabulary.
    pub tokenizer: Option<PathBuf>,
    pub device: Device,
    /// Most sequences in one decode batch (vLLM `--max-num-seqs`); further requests wait for
    /// a slot.
    pub max_num_seqs: usize,
    /// Most tokens run in one step (vLLM `--max-num-batched-tokens`): decode tokens first,
    /// then prompt tokens, a long prompt being prefilled in chunks over several steps. At
    /// least `max_num_seqs`, as vLLM requires.
    pub max_num_batched_tokens: usize,
    /// Context length; None: the model's own. Longer than the model's is an error.
    pub max_model_len: Option<usize>,
    /// CPU threads for candle's kernels; None: candle's default (all physical cores, or
    /// `CANDLE_NUM_THREADS` / `RAYON_NUM_THREADS`). candle's pools are process-wide and sized
    /// once, so the first engine in a process decides; see [`ModelInfo::threads`].
    pub threads: Option<usize>,
    /// On the CPU, convert Q4_1/Q5_0/Q5_1 weights to Q8_0 (and pad for VNNI) for candle's
    /// SIMD kernels: fast, near-lossless. false keeps every tensor as stored (candle's scalar
    /// kernels for those types): slower, and numerically what llama.cpp computes (both
    /// quantize activations to Q8_1 for Q4_1 dot products). No effect on CUDA, which keeps
    /// the stored types either way, or on a Hugging Face directory. See
    /// [`ModelInfo::weights`] for what a load did.
    pub requantize: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            model: PathBuf::new(),
            tokenizer: None,
            device: Device::Cpu,
            max_num_seqs: 256,
            max_num_batched_tokens: 8192,
            max_model_len: None,
            threads: None,
            requantize: true,
        }
    }
}

/// What was loaded, for the report and for roofline figures.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    /// The model directory's name, or the GGUF file's name without `.gguf`.
    pub name: String,
    /// `"gpt2"` or `"llama"`.
    pub architecture: String,
    /// Number of weights (tied embeddings counted once).
    pub parameters: u64,
    /// Bytes of weights as held on the device (after any conversion below): what one decode
    /// step must read, for a memory-bandwidth roofline.
    pub weight_bytes: u64,
    /// Tensor types of the matrices, the most common first, with any load-time conversion
    /// spelled out: `"f32"`, `"F16 as f32"`, `"Q4_1 as Q8_0, Q6_K"`; with
    /// [`EngineConfig::requantize`] off, the stored types as they are (`"Q4_1, Q6_K"`).
    pub weights: String,
    pub max_model_len: usize,
    pub vocab_size: usize,
    /// Tokens that end a request (unless it asks `ignore_eos`).
    pub eos_token_ids: Vec<u32>,
    pub device: Device,
    /// CPU threads candle's kernels run on in this process.
    pub threads: usize,
}

/// One generation request.
#[derive(Debug, Clone)]
pub struct GenRequest {
    /// Prompt token ids (at least one).
    pub prompt: Vec<u32>,
    /// Most tokens to generate (at least one).
    pub max_tokens: u32,
    /// Keep generating past end-of-sequence tokens, to `max_tokens` (fixed output lengths).
    pub ignore_eos: bool,
    pub sampling: Sampling,
    /// Not admitted before this instant (the request's arrival time); None: at once.
    pub not_before: Option<Instant>,
}

/// How a client drives one [`Engine::generate_with`] call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GenOptions {
    /// The most requests released and unfinished at once (the client's `--max-concurrency`):
    /// an arrived request beyond it waits, unreleased, for one to finish. `None`: no cap;
    /// at least 1.
    pub max_in_flight: Option<usize>,
}

/// The engine's own count of one [`Engine::generate_with`] call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GenStats {
    /// The most sequences in one step's batch (at most `max_num_seqs`).
    pub peak_running: usize,
    /// The most requests released and unfinished at once, running or waiting for a slot
    /// (at most [`GenOptions::max_in_flight`]).
    pub peak_in_flight: usize,
}

/// How the next token is chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    /// 0: greedy (argmax; the lowest id among equal logits).
    pub temperature: f32,
    /// Nucleus sampling: keep the most likely tokens up to this probability mass; 1: off.
    pub top_p: f32,
    /// Keep only the k most likely tokens; 0: off.
    pub top_k: usize,
    /// Seed of this request's own random stream, so that its tokens do not depend on which
    /// other requests shared its batches.
    pub seed: u64,
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling {
            temperature: 0.0,
            top_p: 1.0,
            top_k: 0,
            seed: 0,
        }
    }
}

/// Why a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// It generated `max_tokens` tokens (or reached the context length).
    Length,
    /// It sampled an end-of-sequence token (which was reported as its last token).
    Stop,
    /// [`Events::stop`] asked the engine to stop before it ended.
    Aborted,
}

/// What [`Engine::generate`] reports, as it happens, on the calling thread.
pub trait Events {
    /// Request `index` (into the slice given to `generate`) was released: a client would
    /// have sent it when it arrived (`None`), or, when the client's cap
    /// ([`GenOptions::max_in_flight`]) held it back, at `Some(instant)`, when the request
    /// whose slot it took finished.
    fn released(&mut self, index: usize, held_until: Option<Instant>) {
        let _ = (index, held_until);
    }
    /// Request `index` (into the slice given to `generate`) was admitted: its prefill starts.
    fn admitted(&mut self, index: usize, at: Instant) {
        let _ = (index, at);
    }
    /// Request `index` sampled `token`; `at` is taken right after the sampling.
    fn token(&mut self, index: usize, token: u32, at: Instant);
    /// Request `index` ended; no more events for it follow.
    fn finished(&mut self, index: usize, reason: FinishReason, at: Instant);
    /// Polled between steps: true ends every unfinished request with
    /// [`FinishReason::Aborted`], and `generate` returns `Ok`.
    fn stop(&self) -> bool {
        false
    }
}
