//! Anthropic's Messages API (`POST /v1/messages`) in the shapes vLLM 0.32 serves it
//! (`vllm/entrypoints/anthropic/serving.py`, which streams its chat completions as
//! Anthropic's events).
//!
//! The request is read like the others (`system` and `messages`, strings or content
//! blocks, counted in words; `max_tokens`; `stream`), and the answer has the configured
//! timing: token `i` leaves at arrival + `ttft + i * itl`. A stream is typed events, each
//! an SSE `event:` line naming its type and a `data:` line, as vLLM writes them:
//! - with the first token: `message_start` (its usage: the prompt, `output_tokens: 0`)
//!   and `content_block_start` of the first block;
//! - one `thinking_delta` per reasoning token (the first `--reasoning-tokens`, in a
//!   `thinking` block at index 0), then one `text_delta` per content token (in a `text`
//!   block), the thinking block closed just before the first text delta by its
//!   `signature_delta` and `content_block_stop`;
//! - after the last token: the open block's stop, then `message_delta` with
//!   `stop_reason: "max_tokens"` (the mock always stops at the length limit) and the
//!   usage, then `message_stop`. No `[DONE]`.
//!
//! The usage is vLLM's translation of its chat usage: `input_tokens` is the prompt less
//! the prefix cache's hits, which are `cache_read_input_tokens` (with the cache on), and
//! `output_tokens` counts `--usage-tokens-per-word` per word, as the chat usage does.
//!
//! Faults in this API's shapes: the in-band error is an `error` event (`type`, `message`)
//! after half the tokens, with no `message_delta` or `message_stop`; "no `[DONE]`" drops
//! `message_stop`, the way a stream cut by a proxy ends; a malformed event is cut inside
//! its delta. Without streaming the answer is the message object.

use std::io::Write as _;

use super::reply::{Reply, word};

/// One SSE event: `event: <type>` and its data, whose JSON starts with the `type` member.
fn event(kind: &str, members: std::fmt::Arguments<'_>, out: &mut Vec<u8>) {
    let _ = write!(
        out,
        "event: {kind}\ndata: {{\"type\":\"{kind}\"{members}}}\n\n"
    );
}

/// The usage object: vLLM's `_build_anthropic_usage` of a chat usage.
fn usage(prompt: u32, cached: Option<u32>, output: u64) -> String {
    match cached {
        Some(cached) => format!(
            r#"{{"input_tokens":{},"output_tokens":{output},"cache_read_input_tokens":{cached}}}"#,
            prompt.saturating_sub(cached)
        ),
        None => format!(r#"{{"input_tokens":{prompt},"output_tokens":{output}}}"#),
    }
}

/// `content_block_start` of block `index`: thinking or text.
fn start_block(index: u32, thinking: bool, out: &mut Vec<u8>) {
    let block = if thinking {
        r#"{"type":"thinking","thinking":""}"#
    } else {
        r#"{"type":"text","text":""}"#
    };
    event(
        "content_block_start",
        format_args!(r#","content_block":{block},"index":{index}"#),
        out,
    );
}

/// The thinking block's end: its signature, then its stop.
fn close_thinking(id: u64, out: &mut Vec<u8>) {
    event(
        "content_block_delta",
        format_args!(r#","delta":{{"type":"signature_delta","signature":"{id:032x}"}},"index":0"#),
        out,
    );
    event("content_block_stop", format_args!(r#","index":0"#), out);
}

/// Token `i`'s delta event of message `id` (prompt `prompt`, `cached` of it from the
/// cache), whose first `reasoning` tokens are thinking, preceded by the events that open
/// the message or its blocks when `i` is where they start. `head` ends inside the delta
/// string, right after the token's text; `tail` closes the event (a malformed chunk is
/// `head` alone).
pub(super) fn delta(
    (id, i, reasoning): (u64, u32, u32),
    (prompt, cached): (u32, Option<u32>),
    head: &mut Vec<u8>,
    tail: &mut Vec<u8>,
) {
    if i == 0 {
        event(
            "message_start",
            format_args!(
                r#","message":{{"id":"msg_{id:016x}","type":"message","role":"assistant","content":[],"stop_reason":null,"stop_sequence":null,"usage":{}}}"#,
                usage(prompt, cached, 0)
            ),
            head,
        );
        start_block(0, reasoning > 0, head);
    }
    if i == reasoning && reasoning > 0 {
        close_thinking(id, head);
        start_block(1, false, head);
    }
    let (kind, key) = if i < reasoning {
        ("thinking_delta", "thinking")
    } else {
        ("text_delta", "text")
    };
    let _ = write!(
        head,
        "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"delta\":{{\"type\":\"{kind}\",\"{key}\":\"{}",
        word(i)
    );
    let index = u32::from(i >= reasoning && reasoning > 0);
    let _ = write!(tail, "\"}},\"index\":{index}}}\n\n");
}

/// The events after the last token: the open block's stop, `message_delta` with the
/// usage, then (when `terminal`) `message_stop`.
pub(super) fn trailer(reply: &Reply<'_>, terminal: bool, out: &mut Vec<u8>) {
    let n = reply.completion_tokens;
    let reasoning = reply.reasoning_tokens();
    if n == 0 {
        // Nothing was opened.
    } else if n == reasoning {
        close_thinking(reply.id, out);
    } else {
        let index = u32::from(reasoning > 0);
        event(
            "content_block_stop",
            format_args!(r#","index":{index}"#),
            out,
        );
    }
    event(
        "message_delta",
        format_args!(
            r#","delta":{{"stop_reason":"max_tokens","stop_sequence":null}},"usage":{}"#,
            usage(
                reply.prompt_tokens,
                reply.cached_tokens,
                reply.usage_tokens(n)
            )
        ),
        out,
    );
    if terminal {
        event("message_stop", format_args!(""), out);
    }
}

/// The whole message object (the non-streaming answer).
pub(super) fn whole(reply: &Reply<'_>, out: &mut Vec<u8>) {
    let (id, n) = (reply.id, reply.completion_tokens);
    let reasoning = reply.reasoning_tokens();
    let text = |from: u32, to: u32| {
        let mut text = Vec::new();
        for i in from..to {
            text.extend_from_slice(word(i).as_bytes());
        }
        String::from_utf8_lossy(&text).into_owned()
    };
    let mut blocks = Vec::new();
    if reasoning > 0 {
        blocks.push(format!(
            r#"{{"type":"thinking","thinking":"{}","signature":"{id:032x}"}}"#,
            text(0, reasoning)
        ));
    }
    if n > reasoning || n == 0 {
        // Anthropic's shape for an empty answer is one empty text block.
        blocks.push(format!(
            r#"{{"type":"text","text":"{}"}}"#,
            text(reasoning, n)
        ));
    }
    let _ = write!(
        out,
        r#"{{"id":"msg_{id:016x}","type":"message","role":"assistant","content":[{}],"model":{},"stop_reason":"max_tokens","usage":{}}}"#,
        blocks.join(","),
        reply.model_json,
        usage(
            reply.prompt_tokens,
            reply.cached_tokens,
            reply.usage_tokens(n)
        ),
    );
}

/// The API's in-band error: an `error` event with the message.
pub(super) fn error_event(message: &serde_json::Value, out: &mut Vec<u8>) {
    event(
        "error",
        format_args!(r#","error":{{"type":"internal_error","message":{message}}}"#),
        out,
    );
}

#[cfg(test)]
mod tests;
