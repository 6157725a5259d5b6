//! What the host lends a plugin: the run's tokenizer, seeds and a log.

use crate::dataset_bindings::bench::plugin::{log as wit_log, seed, tokenizer};
use crate::{ChatMessage, PluginError};

fn internal(e: String) -> PluginError {
    PluginError::Internal(format!("host tokenizer: {e}"))
}

/// Token ids of `text`.
pub fn encode(text: &str, add_special_tokens: bool) -> Result<Vec<u32>, PluginError> {
    tokenizer::encode(text, add_special_tokens).map_err(internal)
}

/// Token ids of many texts in one crossing (the host encodes them in parallel).
pub fn encode_batch(
    texts: &[String],
    add_special_tokens: bool,
) -> Result<Vec<Vec<u32>>, PluginError> {
    tokenizer::encode_batch(texts, add_special_tokens).map_err(internal)
}

pub fn decode(ids: &[u32], skip_special_tokens: bool) -> Result<String, PluginError> {
    tokenizer::decode(ids, skip_special_tokens).map_err(internal)
}

/// Hugging Face's `tokenizer.vocab_size` (`false`) or `len(tokenizer)` (`true`).
pub fn vocab_size(with_added_tokens: bool) -> u32 {
    tokenizer::vocab_size(with_added_tokens)
}

/// Hugging Face's `tokenizer.all_special_ids`.
pub fn special_token_ids() -> Vec<u32> {
    tokenizer::special_token_ids()
}

pub fn apply_chat_template(
    messages: &[ChatMessage],
    add_generation_prompt: bool,
) -> Result<String, PluginError> {
    tokenizer::apply_chat_template(messages, add_generation_prompt)
        .map_err(|e| PluginError::Unsupported(format!("chat template: {e}")))
}

/// [`apply_chat_template`] with `tools` (a JSON array of OpenAI tool definitions) in the
/// template's scope, as `transformers` renders `apply_chat_template(..., tools=...)`.
pub fn apply_chat_template_with_tools(
    messages: &[ChatMessage],
    tools: &str,
    add_generation_prompt: bool,
) -> Result<String, PluginError> {
    tokenizer::apply_chat_template_with_tools(messages, tools, add_generation_prompt)
        .map_err(|e| PluginError::Unsupported(format!("chat template: {e}")))
}

/// The run's `--seed`.
pub fn run_seed() -> u64 {
    seed::run_seed()
}

/// A stable seed derived from the run seed and `label`.
pub fn derive_seed(label: &str) -> u64 {
    seed::derive(label)
}

pub fn log_info(message: &str) {
    wit_log::log(wit_log::Level::Info, message);
}

pub fn log_warn(message: &str) {
    wit_log::log(wit_log::Level::Warn, message);
}
