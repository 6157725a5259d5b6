//! The native engine's flags (`--backend native`), which `serve`, `throughput`, `latency`
//! and `startup` share.

use clap::Args;

/// The heading of the native engine's flags in `--help`.
const HEADING: &str = "Native engine (--backend native)";

/// The native engine's flags (vLLM's engine arguments where vLLM has one).
#[derive(Args, Debug, Clone, serde::Serialize)]
pub struct EngineArgs {
    /// Where the native engine runs: cpu, cuda or cuda:N (cuda needs a binary built with
    /// `--features cuda`).
    #[arg(long, default_value = "cpu", help_heading = HEADING)]
    pub device: String,

    /// Most sequences the engine decodes in one batch (vLLM's --max-num-seqs); later
    /// requests wait for a slot.
    #[arg(long, default_value_t = 256, help_heading = HEADING)]
    pub max_num_seqs: usize,

    /// Most prompt tokens the engine prefills in one step (vLLM's
    /// --max-num-batched-tokens; longer prompts are prefilled in chunks).
    #[arg(long, default_value_t = 8192, help_heading = HEADING)]
    pub max_num_batched_tokens: usize,

    /// The longest prompt plus output a request may have; defaults to the model's
    /// context length. Longer requests are refused before the run, as vLLM does.
    #[arg(long, help_heading = HEADING)]
    pub max_model_len: Option<usize>,

    /// CPU threads the engine computes with (default: every core).
    #[arg(long, help_heading = HEADING)]
    pub threads: Option<usize>,

    /// Keep Q4_1, Q5_0 and Q5_1 weights as stored on the CPU (candle's scalar kernels:
    /// slower, and numerically what llama.cpp computes) instead of converting them to Q8_0
    /// for its SIMD kernels.
    #[arg(long, help_heading = HEADING)]
    pub no_requantize: bool,
}

/// The native engine's flags (by their name in the serialised arguments, then as typed):
/// given with a server's backend, each is a warning.
pub const ENGINE_FLAGS: &[(&str, &str)] = &[
    ("device", "--device"),
    ("max_num_seqs", "--max-num-seqs"),
    ("max_num_batched_tokens", "--max-num-batched-tokens"),
    ("max_model_len", "--max-model-len"),
    ("threads", "--threads"),
    ("no_requantize", "--no-requantize"),
];
