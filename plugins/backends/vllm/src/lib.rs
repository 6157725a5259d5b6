//! The `vllm` backend: vLLM 0.32 maps `--backend vllm` to its completions request
//! function (`async_request_openai_completions`), the same as `openai`.
//!
//! The whole backend is [`bench_sdk::completions::Completions`]; this crate names it, so
//! that `--backend vllm` works as it does with vLLM.

use bench_sdk::completions::Flavor;

/// The name and description of `--backend vllm`.
pub struct Vllm;

impl Flavor for Vllm {
    const NAME: &'static str = "vllm";
    const DESCRIPTION: &'static str = "vLLM's OpenAI-compatible completions API (/v1/completions): vLLM's \
        --backend vllm, which vLLM maps to the same request function as \
        --backend openai. Prompts are text or token ids.";
}

/// The completions backend under this crate's name.
pub type Completions = bench_sdk::completions::Completions<Vllm>;

bench_sdk::export_backend!(Completions);

#[cfg(test)]
mod tests {
    /// The shared completions checks, under this crate's name.
    #[test]
    fn the_completions_backend_under_this_name() {
        bench_sdk::completions::checks::flavor::<super::Vllm>();
    }
}
