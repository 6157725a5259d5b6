//! What a reply is, whatever its API: the output vocabulary ([`WORDS`]), reasoning, the
//! API a request came through and the shapes of its chunks, and a 200 answer's
//! [`Reply`]. The formats that write replies (`response.rs`, and the Responses, Messages
//! and audio APIs' own) all read it.

use std::io::Write as _;
use std::sync::Arc;

/// The output vocabulary, cycled in order: output token `i` is `WORDS[i % WORDS.len()]`.
///
/// Each word is exactly one token for the GPT-2, Qwen2/Qwen3 and Llama-3 tokenizers, and a
/// concatenation of N of them re-tokenizes to exactly N tokens (each word starts with a
/// space, so byte-level BPE pre-tokenization keeps words apart), hence a client's tokenizer
/// count of the generated text equals the server's `usage.completion_tokens`. Checked with
/// Python `tokenizers` 0.23.3 on `shared/data/tokenizers/{gpt2,qwen3,llama-3-8b-instruct}`
/// for every N up to 101 and N = 4096; the test `words_are_single_tokens` repeats the check
/// in Rust for GPT-2 and Qwen3 and against the server's actual output.
pub(super) const WORDS: [&str; 32] = [
    " the", " of", " and", " to", " in", " a", " is", " that", " for", " it", " as", " was",
    " with", " be", " by", " on", " not", " he", " this", " are", " or", " his", " from", " at",
    " which", " but", " have", " an", " had", " they", " you", " were",
];

pub(super) fn word(i: u32) -> &'static str {
    WORDS[i as usize % WORDS.len()]
}

/// Reasoning in the answers of the APIs that have it (chat completions, Responses,
/// Messages): the first `tokens` output tokens of every answer are reasoning, the rest
/// content, so a client's time to first content token can be checked against the server's
/// record (`first_content_ms` in `/mock/requests`). The words are the same either way:
/// token `i` is `WORDS[i % 32]`, whichever kind it is. Reasoning tokens count as output
/// tokens (`usage.completion_tokens`), as vLLM counts them. Other APIs have no place for
/// reasoning and ignore it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::Args)]
pub struct Reasoning {
    /// The first N output tokens of every chat, Responses or Messages answer are
    /// reasoning (`delta.reasoning_content` in a chat stream,
    /// `response.reasoning_text.delta` events in a Responses stream, `thinking_delta`s in
    /// a Messages stream), the rest content.
    #[arg(long = "reasoning-tokens", default_value_t = 0)]
    pub tokens: u32,
    /// The key of a chat answer's reasoning text: vLLM's `reasoning_content`, or
    /// `reasoning` (newer vLLM, OpenRouter).
    #[arg(long = "reasoning-field", value_enum, default_value_t = ReasoningField::ReasoningContent)]
    pub field: ReasoningField,
}

/// Where a chat answer carries its reasoning text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ReasoningField {
    /// `reasoning_content`, vLLM's reasoning parsers' field.
    #[default]
    ReasoningContent,
    /// `reasoning`.
    Reasoning,
}

impl ReasoningField {
    pub(super) fn key(self) -> &'static str {
        match self {
            ReasoningField::ReasoningContent => "reasoning_content",
            ReasoningField::Reasoning => "reasoning",
        }
    }

    /// Opens a chat chunk's reasoning text (the first chunk carries the role too).
    pub(super) fn chat_open(self, first: bool) -> &'static [u8] {
        match (self, first) {
            (ReasoningField::ReasoningContent, true) => {
                br#""delta":{"role":"assistant","reasoning_content":""#
            }
            (ReasoningField::ReasoningContent, false) => br#""delta":{"reasoning_content":""#,
            (ReasoningField::Reasoning, true) => br#""delta":{"role":"assistant","reasoning":""#,
            (ReasoningField::Reasoning, false) => br#""delta":{"reasoning":""#,
        }
    }
}

/// The API a request came through; it decides the response's shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Api {
    /// OpenAI's `/v1/completions`.
    Completions,
    /// OpenAI's `/v1/chat/completions`.
    Chat,
    /// TGI's `/generate_stream`: `data:{"token": {...}}` events, one per token, the last
    /// with `generated_text` and `details`; no `[DONE]`.
    Tgi,
    /// Triton's generate extension (`/v2/models/<model>/generate_stream`), as TensorRT-LLM
    /// serves it: `data: {..., "text_output"}` events, one per token; no `[DONE]`.
    Triton,
    /// SGLang's `/generate`: each event's `text` is the whole text so far, `meta_info`
    /// has the counts and the finish reason; then `data: [DONE]`.
    Sglang,
    /// llama.cpp's `/completion`: `{"content", "stop": false}` per token, then a last
    /// event with `"stop": true`, the counts and `stop_type`; no `[DONE]`.
    LlamaCpp,
    /// OpenAI's Responses API (`/v1/responses`): typed events, one delta per token, then
    /// `response.completed` with the usage; no `[DONE]` (see `responses.rs`).
    Responses,
    /// Anthropic's Messages API (`/v1/messages`) as vLLM serves it: typed events, one
    /// delta per token, then `message_delta` with the usage and `message_stop`; no
    /// `[DONE]` (see `messages.rs`).
    Messages,
    /// OpenAI's audio transcriptions and translations: `transcription.chunk` objects
    /// with usage, then `data: [DONE]` (see `audio.rs`).
    Audio,
}

/// The pieces of one streamed token chunk around the token text, per API.
pub(super) struct ChunkShape {
    /// Opens the token's field in the first chunk (chat puts the role there, so that the
    /// first chunk carrying `choices` is also the first token: TTFT and ITL stay exact).
    pub(super) first_open: &'static [u8],
    pub(super) open: &'static [u8],
    pub(super) close: &'static [u8],
    pub(super) last_close: &'static [u8],
    /// The last chunk's close when the answer ended before its limit (a structured answer
    /// that fits its `max_tokens`): `finish_reason` `"stop"`.
    pub(super) stop_close: &'static [u8],
}

const COMPLETIONS_CHUNK: ChunkShape = ChunkShape {
    first_open: br#""text":""#,
    open: br#""text":""#,
    close: b"\",\"logprobs\":null,\"finish_reason\":null}]}\n\n",
    last_close: b"\",\"logprobs\":null,\"finish_reason\":\"length\"}]}\n\n",
    stop_close: b"\",\"logprobs\":null,\"finish_reason\":\"stop\"}]}\n\n",
};

const CHAT_CHUNK: ChunkShape = ChunkShape {
    first_open: br#""delta":{"role":"assistant","content":""#,
    open: br#""delta":{"content":""#,
    close: b"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
    last_close: b"\"},\"logprobs\":null,\"finish_reason\":\"length\"}]}\n\n",
    stop_close: b"\"},\"logprobs\":null,\"finish_reason\":\"stop\"}]}\n\n",
};

impl Api {
    /// Whether answers of this API can carry reasoning (see [`Reasoning`]).
    pub(super) fn has_reasoning(self) -> bool {
        matches!(self, Api::Chat | Api::Responses | Api::Messages)
    }

    /// Whether this is one of OpenAI's APIs (else a server's own, see [`Api`]).
    pub(super) fn is_openai(self) -> bool {
        matches!(self, Api::Completions | Api::Chat)
    }

    pub(super) fn id_prefix(self) -> &'static str {
        match self {
            Api::Chat => "chatcmpl-",
            _ => "cmpl-",
        }
    }

    pub(super) fn chunk_object(self) -> &'static str {
        match self {
            Api::Chat => "chat.completion.chunk",
            _ => "text_completion",
        }
    }

    pub(super) fn object(self) -> &'static str {
        match self {
            Api::Chat => "chat.completion",
            _ => "text_completion",
        }
    }

    pub(super) fn chunk_shape(self) -> &'static ChunkShape {
        match self {
            Api::Chat => &CHAT_CHUNK,
            _ => &COMPLETIONS_CHUNK,
        }
    }
}

/// What a 200 answer carries besides its tokens: normally nothing, or a fault in the
/// content itself (the delivery faults live in `faults::FaultyBody`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Content {
    Normal,
    /// The token chunk half-way through (`floor(n / 2)` of `n`) is cut short before its
    /// closing quote and braces; a non-streaming body loses its second half.
    Malformed,
    /// vLLM's in-band error event with this message after `floor(n / 2)` token chunks,
    /// then `data: [DONE]` (no usage); a non-streaming body is the error object.
    ErrorEvent(String),
    /// The stream ends after its last chunk (usage included) without `data: [DONE]`.
    NoDone,
}

/// vLLM's error object (`{"error": {...}}`) with this message, status code 500.
pub(super) fn error_object(message: &str) -> Vec<u8> {
    let error = serde_json::json!({"error": {
        "object": "error",
        "message": message,
        "type": "InternalServerError",
        "param": null,
        "code": 500,
    }});
    error.to_string().into_bytes()
}

/// Everything that varies between answers; the text itself is a function of the length.
pub(super) struct Reply<'a> {
    pub api: Api,
    pub id: u64,
    /// Unix seconds.
    pub created: u64,
    /// The served model name as a JSON string literal, quotes and escapes included.
    pub model_json: &'a str,
    pub prompt_tokens: u32,
    /// Number of output tokens (0 only for the empty-answer fault).
    pub completion_tokens: u32,
    /// Prompt tokens the prefix cache served, reported as
    /// `usage.prompt_tokens_details.cached_tokens` (as vLLM does with its prefix caching
    /// on); `None` when the cache is off, and the usage has no such member.
    pub cached_tokens: Option<u32>,
    /// The run's reasoning setting; it applies where the API has reasoning.
    pub reasoning: Reasoning,
    /// Tokens the OpenAI usage counts per word of the answer (`--usage-tokens-per-word`).
    pub usage_per_word: u32,
    /// The usage so far in every chunk of an OpenAI stream (`continuous_usage_stats`).
    pub continuous_usage: bool,
    /// A structured answer's content tokens (see [`Pieces`]), which take the place of the
    /// words after the reasoning; `None` for an ordinary answer.
    pub pieces: Option<Pieces>,
    /// The answer ended before its limit (`finish_reason` `"stop"`, else `"length"`).
    pub stop: bool,
}

/// The content of a structured answer (completions and chat only, see `structured.rs`):
/// its text in pieces of up to [`PIECE_CHARS`] characters, each one output token, each
/// already escaped for a JSON string.
pub(super) type Pieces = Arc<[Box<str>]>;

/// The most characters of a structured answer's text one token carries.
pub(super) const PIECE_CHARS: usize = 4;

/// Output token `i` of an answer whose first `reasoning` tokens are reasoning: a word, or
/// for a structured answer's content, its piece.
pub(super) fn token_text(pieces: Option<&Pieces>, reasoning: u32, i: u32) -> &str {
    match pieces {
        Some(pieces) if i >= reasoning => &pieces[(i - reasoning) as usize],
        _ => word(i),
    }
}

/// `"usage":{"prompt_tokens":…,"completion_tokens":…,"total_tokens":…` (unclosed).
pub(super) fn usage_counts(out: &mut Vec<u8>, prompt: u32, completion: u64) {
    let total = u64::from(prompt) + completion;
    let _ = write!(
        out,
        r#""usage":{{"prompt_tokens":{prompt},"completion_tokens":{completion},"total_tokens":{total}"#
    );
}

impl Reply<'_> {
    /// What the usage says `words` words of the answer are (`--usage-tokens-per-word`).
    pub(super) fn usage_tokens(&self, words: u32) -> u64 {
        u64::from(words) * u64::from(self.usage_per_word.max(1))
    }

    /// How many of the answer's first tokens are reasoning.
    pub fn reasoning_tokens(&self) -> u32 {
        if self.api.has_reasoning() {
            self.reasoning.tokens.min(self.completion_tokens)
        } else {
            0
        }
    }

    /// The text of the first `n` output tokens.
    pub(super) fn text(&self, n: u32, out: &mut Vec<u8>) {
        for i in 0..n {
            out.extend_from_slice(self.token_text(i).as_bytes());
        }
    }

    /// The text of output token `i` (see [`token_text`]).
    pub(super) fn token_text(&self, i: u32) -> &str {
        token_text(self.pieces.as_ref(), self.reasoning_tokens(), i)
    }

    /// The answer's `finish_reason`.
    pub(super) fn finish_reason(&self) -> &'static str {
        if self.stop { "stop" } else { "length" }
    }
}
