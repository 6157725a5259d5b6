//! Parsing of generation requests: only the fields the mock acts on are read.
//!
//! Everything else (`model`, sampling parameters, `ignore_eos`, `logprobs`, `n`, ...) is
//! accepted and skipped, so any client that talks to vLLM can talk to the mock. Prompt
//! sizes are counted while parsing, without copying the prompt: a text counts one token per
//! whitespace-separated word, a token-id list counts its length. That is a rough count, good
//! enough for `usage.prompt_tokens` of a server whose point is its timing.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};

use super::reply::Api;
use super::structured::{Constraint, Fields as StructuredFields};

/// What a generation request asks for, whichever API it came through.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Generation {
    /// Rough prompt size (see the module documentation).
    pub prompt_tokens: u32,
    /// `max_tokens` (completions), `max_completion_tokens` or else `max_tokens` (chat), or
    /// the field a server's own API names it by (`parameters.max_new_tokens` for TGI,
    /// `max_tokens` for Triton, `sampling_params.max_new_tokens` for SGLang, `n_predict`
    /// for llama.cpp, where a negative value means no limit).
    pub max_tokens: Option<u32>,
    pub stream: bool,
    /// `stream_options.include_usage`: end the stream with a usage chunk.
    pub include_usage: bool,
    /// `stream_options.continuous_usage_stats` (vLLM's): the usage so far in every chunk
    /// of an OpenAI stream.
    pub continuous_usage: bool,
    /// The output constraint (structured output) of a completions or chat request.
    pub constraint: Option<Constraint>,
}

/// Parses a request body for `api`; the error names the offending field.
pub(super) fn parse(api: Api, body: &[u8]) -> Result<Generation, serde_json::Error> {
    match api {
        Api::Completions => {
            let request: CompletionRequest = serde_json::from_slice(body)?;
            Ok(Generation {
                prompt_tokens: request.prompt.0,
                max_tokens: request.max_tokens,
                stream: request.stream.unwrap_or(false),
                include_usage: include_usage(request.stream_options),
                continuous_usage: continuous_usage(request.stream_options),
                constraint: request.structured.constraint().map_err(de::Error::custom)?,
            })
        }
        Api::Chat => {
            let request: ChatRequest = serde_json::from_slice(body)?;
            let prompt_tokens = request
                .messages
                .iter()
                .filter_map(|message| message.content.as_ref())
                .fold(0u32, |sum, content| sum.saturating_add(content.0));
            Ok(Generation {
                prompt_tokens,
                // vLLM's rule: the newer field wins, the deprecated one is the fallback.
                max_tokens: request.max_completion_tokens.or(request.max_tokens),
                stream: request.stream.unwrap_or(false),
                include_usage: include_usage(request.stream_options),
                continuous_usage: continuous_usage(request.stream_options),
                constraint: request.structured.constraint().map_err(de::Error::custom)?,
            })
        }
        Api::Tgi => {
            let request: TgiRequest = serde_json::from_slice(body)?;
            Ok(Generation {
                prompt_tokens: request.inputs.0,
                max_tokens: request.parameters.and_then(|p| p.max_new_tokens),
                // `/generate_stream` streams whatever the body says.
                stream: true,
                include_usage: false,
                continuous_usage: false,
                constraint: None,
            })
        }
        Api::Triton => {
            let request: TritonRequest = serde_json::from_slice(body)?;
            Ok(Generation {
                prompt_tokens: request.text_input.0,
                max_tokens: request.max_tokens,
                // `generate_stream` streams whatever the body says.
                stream: true,
                include_usage: false,
                continuous_usage: false,
                constraint: None,
            })
        }
        Api::Sglang => {
            let request: SglangRequest = serde_json::from_slice(body)?;
            let prompt_tokens = match (request.text, request.input_ids) {
                (Some(text), None) => text.0,
                (None, Some(ids)) => u32::try_from(ids.len()).unwrap_or(u32::MAX),
                _ => {
                    return Err(de::Error::custom(
                        "exactly one of `text` and `input_ids` is required",
                    ));
                }
            };
            Ok(Generation {
                prompt_tokens,
                max_tokens: request.sampling_params.and_then(|p| p.max_new_tokens),
                stream: request.stream.unwrap_or(false),
                include_usage: false,
                continuous_usage: false,
                constraint: None,
            })
        }
        Api::Audio => {
            // Checked by the handler already; parsed again for the fields.
            let form = super::audio::parse(body).map_err(de::Error::custom)?;
            let count = |name: &str| {
                form.field(name)
                    .map(|v| v.parse::<u32>())
                    .transpose()
                    .map_err(|e| de::Error::custom(format!("field {name:?}: {e}")))
            };
            let max_tokens = match count("max_completion_tokens")? {
                Some(n) => Some(n),
                None => count("max_tokens")?,
            };
            Ok(Generation {
                prompt_tokens: super::audio::prompt_tokens(&form),
                max_tokens,
                stream: form.flag("stream").map_err(de::Error::custom)?,
                include_usage: form
                    .flag("stream_include_usage")
                    .map_err(de::Error::custom)?,
                // Its chunks carry the usage themselves (see `audio`).
                continuous_usage: false,
                constraint: None,
            })
        }
        Api::Responses => {
            let request: ResponsesRequest = serde_json::from_slice(body)?;
            Ok(Generation {
                prompt_tokens: request.input.0,
                max_tokens: request.max_output_tokens,
                stream: request.stream.unwrap_or(false),
                // The terminal event always carries the usage.
                include_usage: true,
                continuous_usage: false,
                constraint: None,
            })
        }
        Api::Messages => {
            let request: MessagesRequest = serde_json::from_slice(body)?;
            let prompt_tokens = request
                .messages
                .iter()
                .filter_map(|message| message.content.as_ref())
                .chain(request.system.as_ref())
                .fold(0u32, |sum, content| sum.saturating_add(content.0));
            Ok(Generation {
                prompt_tokens,
                max_tokens: Some(request.max_tokens),
                stream: request.stream.unwrap_or(false),
                // `message_delta` always carries the usage.
                include_usage: true,
                continuous_usage: false,
                constraint: None,
            })
        }
        Api::LlamaCpp => {
            let request: LlamaRequest = serde_json::from_slice(body)?;
            Ok(Generation {
                prompt_tokens: request.prompt.0,
                max_tokens: request.n_predict.and_then(|n| u32::try_from(n).ok()),
                stream: request.stream.unwrap_or(false),
                include_usage: false,
                continuous_usage: false,
                constraint: None,
            })
        }
    }
}

#[derive(Deserialize)]
struct TgiRequest {
    inputs: WordCount,
    parameters: Option<TgiParameters>,
}

#[derive(Deserialize)]
struct TgiParameters {
    max_new_tokens: Option<u32>,
}

#[derive(Deserialize)]
struct TritonRequest {
    text_input: WordCount,
    max_tokens: Option<u32>,
}

#[derive(Deserialize)]
struct SglangRequest {
    text: Option<WordCount>,
    input_ids: Option<Vec<u64>>,
    sampling_params: Option<TgiParameters>,
    stream: Option<bool>,
}

#[derive(Deserialize)]
struct LlamaRequest {
    prompt: PromptTokens,
    n_predict: Option<i64>,
    stream: Option<bool>,
}

/// Anthropic's Messages API: `max_tokens` is required; `system` is a string or a list of
/// text blocks, and message contents are strings or content blocks, as in chat.
#[derive(Deserialize)]
struct MessagesRequest {
    messages: Vec<Message>,
    system: Option<ContentTokens>,
    max_tokens: u32,
    stream: Option<bool>,
}

/// OpenAI's Responses API: `input` is a string or a list of input messages.
#[derive(Deserialize)]
struct ResponsesRequest {
    input: ResponsesInput,
    max_output_tokens: Option<u32>,
    stream: Option<bool>,
}

/// The size of a Responses `input`: the words of a string, or of the text parts
/// (`input_text`) of its messages.
struct ResponsesInput(u32);

impl<'de> Deserialize<'de> for ResponsesInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ResponsesInput;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or a list of input messages")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<ResponsesInput, E> {
                Ok(ResponsesInput(count_words(text)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ResponsesInput, A::Error> {
                let mut sum = 0u32;
                while let Some(message) = seq.next_element::<Message>()? {
                    sum = sum.saturating_add(message.content.map_or(0, |c| c.0));
                }
                Ok(ResponsesInput(sum))
            }
        }
        deserializer.deserialize_any(V)
    }
}

fn include_usage(options: Option<StreamOptions>) -> bool {
    options.and_then(|o| o.include_usage).unwrap_or(false)
}

fn continuous_usage(options: Option<StreamOptions>) -> bool {
    options
        .and_then(|o| o.continuous_usage_stats)
        .unwrap_or(false)
}

#[derive(Deserialize)]
struct CompletionRequest {
    prompt: PromptTokens,
    max_tokens: Option<u32>,
    stream: Option<bool>,
    stream_options: Option<StreamOptions>,
    #[serde(flatten)]
    structured: StructuredFields,
}

#[derive(Deserialize)]
struct ChatRequest {
    messages: Vec<Message>,
    max_completion_tokens: Option<u32>,
    max_tokens: Option<u32>,
    stream: Option<bool>,
    stream_options: Option<StreamOptions>,
    #[serde(flatten)]
    structured: StructuredFields,
}

#[derive(Deserialize, Clone, Copy)]
struct StreamOptions {
    include_usage: Option<bool>,
    continuous_usage_stats: Option<bool>,
}

#[derive(Deserialize)]
struct Message {
    /// Absent or null for an assistant turn that only carries tool calls.
    #[serde(default)]
    content: Option<ContentTokens>,
}

/// A part of a multi-part chat message; only text parts count (images and audio count 0).
#[derive(Deserialize)]
struct ContentPart {
    #[serde(default)]
    text: Option<WordCount>,
}

fn count_words(text: &str) -> u32 {
    u32::try_from(text.split_whitespace().count()).unwrap_or(u32::MAX)
}

/// The word count of a JSON string.
struct WordCount(u32);

impl<'de> Deserialize<'de> for WordCount {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = WordCount;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<WordCount, E> {
                Ok(WordCount(count_words(text)))
            }
        }
        deserializer.deserialize_str(V)
    }
}

/// The size of a chat message's `content`: a string, or a list of parts.
struct ContentTokens(u32);

impl<'de> Deserialize<'de> for ContentTokens {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ContentTokens;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or a list of content parts")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<ContentTokens, E> {
                Ok(ContentTokens(count_words(text)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ContentTokens, A::Error> {
                let mut sum = 0u32;
                while let Some(part) = seq.next_element::<ContentPart>()? {
                    sum = sum.saturating_add(part.text.map_or(0, |t| t.0));
                }
                Ok(ContentTokens(sum))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// The size of a completions `prompt`: a string, a list of token ids, or a list holding
/// exactly one of those (the mock answers one choice, so batched prompts are refused).
struct PromptTokens(u32);

impl<'de> Deserialize<'de> for PromptTokens {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PromptTokens;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string, a list of token ids, or a one-element list of either")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<PromptTokens, E> {
                Ok(PromptTokens(count_words(text)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<PromptTokens, A::Error> {
                let (mut token_ids, mut prompts, mut size) = (0u32, 0u32, 0u32);
                while let Some(piece) = seq.next_element::<PromptPiece>()? {
                    match piece {
                        PromptPiece::TokenId => token_ids = token_ids.saturating_add(1),
                        PromptPiece::Prompt(n) => {
                            prompts += 1;
                            size = n;
                        }
                    }
                }
                match (token_ids, prompts) {
                    (n, 0) => Ok(PromptTokens(n)),
                    (0, 1) => Ok(PromptTokens(size)),
                    (0, _) => Err(de::Error::custom(
                        "batched prompts (more than one per request) are not supported by the \
                         mock server",
                    )),
                    _ => Err(de::Error::custom(
                        "a prompt list mixes token ids with strings or lists",
                    )),
                }
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// One element of a prompt list: a token id, or a whole prompt (a string or an id list).
enum PromptPiece {
    TokenId,
    Prompt(u32),
}

impl<'de> Deserialize<'de> for PromptPiece {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PromptPiece;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a token id, a string, or a list of token ids")
            }
            fn visit_u64<E: de::Error>(self, _id: u64) -> Result<PromptPiece, E> {
                Ok(PromptPiece::TokenId)
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<PromptPiece, E> {
                Ok(PromptPiece::Prompt(count_words(text)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<PromptPiece, A::Error> {
                let mut n = 0u32;
                while seq.next_element::<u64>()?.is_some() {
                    n = n.saturating_add(1);
                }
                Ok(PromptPiece::Prompt(n))
            }
        }
        deserializer.deserialize_any(V)
    }
}
