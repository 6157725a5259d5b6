//! The `scalellm` backend: ScaleLLM's server speaks OpenAI's completions API, and vLLM's
//! older benchmark client maps `--backend scalellm` to its completions request function.
//!
//! The whole backend is [`bench_sdk::completions::Completions`]; this crate names it, so
//! that `--backend scalellm` works as it does with vLLM.

use bench_sdk::completions::Flavor;

/// The name and description of `--backend scalellm`.
pub struct ScaleLlm;

impl Flavor for ScaleLlm {
    const NAME: &'static str = "scalellm";
    const DESCRIPTION: &'static str = "ScaleLLM's OpenAI-compatible completions API (/v1/completions), as \
        vLLM's --backend scalellm (vLLM maps it to its OpenAI completions \
        client). Prompts are text or token ids.";
}

/// The completions backend under this crate's name.
pub type Completions = bench_sdk::completions::Completions<ScaleLlm>;

bench_sdk::export_backend!(Completions);

#[cfg(test)]
mod tests {
    /// The shared completions checks, under this crate's name.
    #[test]
    fn the_completions_backend_under_this_name() {
        bench_sdk::completions::checks::flavor::<super::ScaleLlm>();
    }
}
