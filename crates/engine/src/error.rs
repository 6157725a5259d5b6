//! The engine's one error type.
//!
//! Typed, so that the CLI can tell a user's mistake (a path that is not there, a prompt too
//! long for the context) from a model the engine cannot run and from a failure inside candle,
//! and word each one for the person who has to fix it.

use std::path::PathBuf;

/// Everything [`crate::Engine`] can fail with.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The model (or tokenizer) path does not exist. A Hugging Face hub id such as
    /// `HuggingFaceTB/SmolLM2-135M` lands here too: the engine never downloads.
    #[error("{}: not found on disk; pass a local directory or .gguf file", path.display())]
    NotFound { path: PathBuf },

    /// A model the engine recognises but does not run (an architecture other than GPT-2 and
    /// Llama, a tensor type candle cannot multiply, ...).
    #[error("{}: unsupported: {what}", path.display())]
    Unsupported { path: PathBuf, what: String },

    /// The files are there but inconsistent or unreadable (a missing tensor, a bad
    /// config.json, a shape that does not match the config).
    #[error("{}: bad model: {reason}", path.display())]
    BadModel { path: PathBuf, reason: String },

    /// No usable tokenizer: none in the model directory or GGUF file, or one that fails to
    /// load.
    #[error("tokenizer {}: {reason}", path.display())]
    Tokenizer { path: PathBuf, reason: String },

    /// A prompt that leaves no room for its `max_tokens` within the context
    /// (`max_model_len`); checked for every request before any work, as vLLM does.
    #[error(
        "request {index}: prompt of {len} tokens is longer than {max} (max_model_len minus the request's max_tokens)"
    )]
    PromptTooLong {
        index: usize,
        len: usize,
        max: usize,
    },

    /// A request the engine cannot run for another reason (an empty prompt, `max_tokens` 0,
    /// a token id outside the vocabulary); checked before any work.
    #[error("request {index}: {reason}")]
    BadRequest { index: usize, reason: String },

    /// An [`crate::EngineConfig`] that cannot work (zero `max_num_seqs`, ...).
    #[error("bad engine configuration: {0}")]
    Config(String),

    /// `Device::Cuda` asked of a binary built without the `cuda` feature.
    #[error(
        "this binary was built without CUDA support; rebuild bench with `--features cuda` (needs the CUDA toolkit) or use --device cpu"
    )]
    CudaNotBuilt,

    /// candle runs its CPU kernels on process-wide thread pools whose size is fixed when they
    /// first start; a second engine in the same process cannot ask for another size.
    #[error(
        "{requested} CPU threads requested, but candle's thread pool already runs {running} in this process (its size is fixed at first use)"
    )]
    Threads { requested: usize, running: usize },

    /// A failure inside candle (device, kernel, shape).
    #[error("candle: {0}")]
    Candle(#[from] candle_core::Error),
}
