//! OpenAI's Responses API (`POST /v1/responses`) in vLLM's shapes.
//!
//! The request is read like the others (`input`, a string or input messages, counted in
//! words; `max_output_tokens`; `stream`), and the answer has the configured timing: token
//! `i` leaves at arrival + `ttft + i * itl`. A stream is typed events, each an SSE
//! `event:` line naming its type and a `data:` line:
//! - with the first token: `response.created`, `response.in_progress` and the first
//!   output item (`response.output_item.added`, and `response.content_part.added` for a
//!   message);
//! - one `response.reasoning_text.delta` per reasoning token (the first
//!   `--reasoning-tokens`, in a `reasoning` item), then one `response.output_text.delta`
//!   per content token (in a `message` item), with the events that close the reasoning
//!   item and open the message just before the first content delta;
//! - after the last token: the `.done` events of the open item, then `response.completed`
//!   whose response has `status: "incomplete"` (the mock always stops at the length
//!   limit, which vLLM reports so) and the usage: `input_tokens`, `output_tokens`
//!   (reasoning included), `input_tokens_details.cached_tokens`,
//!   `output_tokens_details.reasoning_tokens`. No `[DONE]`.
//!
//! Faults in this API's shapes: the in-band error is an `error` event (`code`, `message`)
//! after half the tokens, with no terminal event; "no `[DONE]`" drops
//! `response.completed`, the way a stream cut by a proxy ends; a malformed event is cut
//! inside its delta. Without streaming the answer is the response object that
//! `response.completed` would carry.

use std::io::Write as _;

use super::reply::{Reply, WORDS};

fn word(i: u32) -> &'static str {
    WORDS[i as usize % WORDS.len()]
}

/// The words of tokens `from..to`.
fn words(from: u32, to: u32, out: &mut Vec<u8>) {
    for i in from..to {
        out.extend_from_slice(word(i).as_bytes());
    }
}

/// One SSE event: `event: <type>` and its data, whose JSON ends with the `type` member.
fn event(kind: &str, sequence: u32, members: std::fmt::Arguments<'_>, out: &mut Vec<u8>) {
    let _ = write!(
        out,
        "event: {kind}\ndata: {{{members}\"sequence_number\":{sequence},\"type\":\"{kind}\"}}\n\n"
    );
}

/// How many events come before the delta of token `i` (so that `sequence_number` counts
/// every event of the stream from 0): `response.created` and `response.in_progress`, the
/// reasoning item's opening and its deltas, then the closing of the reasoning item (two
/// events) and the opening of the message (two), then the message's deltas.
fn events_before(i: u32, reasoning: u32) -> u32 {
    let mut n = 2;
    if reasoning > 0 {
        n += 1 + i.min(reasoning);
        if i >= reasoning {
            n += 4 + (i - reasoning);
        }
    } else {
        n += 2 + i;
    }
    n
}

/// Token `i`'s delta event of response `id`, whose first `reasoning` tokens are reasoning,
/// preceded by the events that open the response or its items when `i` is where they
/// start. `head` ends inside the delta string, right after the token's text; `tail` closes
/// the event (a malformed chunk is `head` alone).
pub(super) fn delta(id: u64, i: u32, reasoning: u32, head: &mut Vec<u8>, tail: &mut Vec<u8>) {
    if i == 0 {
        for (sequence, (kind, status)) in [
            ("response.created", "in_progress"),
            ("response.in_progress", "in_progress"),
        ]
        .into_iter()
        .enumerate()
        {
            event(
                kind,
                sequence as u32,
                format_args!(
                    r#""response":{{"id":"resp_{id:016x}","object":"response","output":[],"status":"{status}","usage":null}},"#
                ),
                head,
            );
        }
        if reasoning > 0 {
            event(
                "response.output_item.added",
                2,
                format_args!(
                    r#""item":{{"id":"rs_{id:016x}","summary":[],"type":"reasoning","content":null,"status":"in_progress"}},"output_index":0,"#
                ),
                head,
            );
        }
    }
    if i == reasoning {
        let mut sequence = events_before(i, reasoning) - 2;
        if reasoning > 0 {
            sequence -= 2;
            close_reasoning(id, reasoning, sequence, head);
            sequence += 2;
        }
        open_message(id, reasoning, sequence, head);
    }
    let (kind, item, index, logprobs) = if i < reasoning {
        ("response.reasoning_text.delta", "rs", 0, "")
    } else {
        (
            "response.output_text.delta",
            "msg",
            u32::from(reasoning > 0),
            r#""logprobs":[],"#,
        )
    };
    let _ = write!(
        head,
        "event: {kind}\ndata: {{\"content_index\":0,\"delta\":\"{}",
        word(i)
    );
    let _ = write!(
        tail,
        "\",\"item_id\":\"{item}_{id:016x}\",{logprobs}\"output_index\":{index},\"sequence_number\":{},\"type\":\"{kind}\"}}\n\n",
        events_before(i, reasoning)
    );
}

/// `response.reasoning_text.done` and `response.output_item.done` of the reasoning item.
fn close_reasoning(id: u64, reasoning: u32, sequence: u32, out: &mut Vec<u8>) {
    let mut text = Vec::new();
    words(0, reasoning, &mut text);
    let text = String::from_utf8_lossy(&text);
    event(
        "response.reasoning_text.done",
        sequence,
        format_args!(
            r#""content_index":0,"item_id":"rs_{id:016x}","output_index":0,"text":"{text}","#
        ),
        out,
    );
    event(
        "response.output_item.done",
        sequence + 1,
        format_args!(r#""item":{},"output_index":0,"#, reasoning_item(id, &text)),
        out,
    );
}

/// `response.output_item.added` and `response.content_part.added` of the message.
fn open_message(id: u64, reasoning: u32, sequence: u32, out: &mut Vec<u8>) {
    let index = u32::from(reasoning > 0);
    event(
        "response.output_item.added",
        sequence,
        format_args!(
            r#""item":{{"id":"msg_{id:016x}","content":[],"role":"assistant","status":"in_progress","type":"message"}},"output_index":{index},"#
        ),
        out,
    );
    event(
        "response.content_part.added",
        sequence + 1,
        format_args!(
            r#""content_index":0,"item_id":"msg_{id:016x}","output_index":{index},"part":{{"annotations":[],"text":"","type":"output_text","logprobs":null}},"#
        ),
        out,
    );
}

fn reasoning_item(id: u64, text: &str) -> String {
    format!(
        r#"{{"id":"rs_{id:016x}","summary":[],"type":"reasoning","content":[{{"text":"{text}","type":"reasoning_text"}}],"status":null}}"#
    )
}

fn message_item(id: u64, text: &str) -> String {
    format!(
        r#"{{"id":"msg_{id:016x}","content":[{{"annotations":[],"text":"{text}","type":"output_text","logprobs":null}}],"role":"assistant","status":"completed","type":"message"}}"#
    )
}

/// The events after the last token: the open item's `.done` events, then (when
/// `terminal`) `response.completed` with the whole response.
pub(super) fn trailer(reply: &Reply<'_>, terminal: bool, out: &mut Vec<u8>) {
    let n = reply.completion_tokens;
    let reasoning = reply.reasoning_tokens();
    // After the last delta; an answer of reasoning alone never opened its message.
    let mut sequence = if n == reasoning {
        3 + n
    } else {
        events_before(n, reasoning)
    };
    if n == 0 {
        // Nothing was opened.
    } else if n == reasoning {
        close_reasoning(reply.id, reasoning, sequence, out);
        sequence += 2;
    } else {
        let id = reply.id;
        let index = u32::from(reasoning > 0);
        let mut text = Vec::new();
        words(reasoning, n, &mut text);
        let text = String::from_utf8_lossy(&text);
        event(
            "response.output_text.done",
            sequence,
            format_args!(
                r#""content_index":0,"item_id":"msg_{id:016x}","logprobs":[],"output_index":{index},"text":"{text}","#
            ),
            out,
        );
        event(
            "response.content_part.done",
            sequence + 1,
            format_args!(
                r#""content_index":0,"item_id":"msg_{id:016x}","output_index":{index},"part":{{"annotations":[],"text":"{text}","type":"output_text","logprobs":null}},"#
            ),
            out,
        );
        event(
            "response.output_item.done",
            sequence + 2,
            format_args!(
                r#""item":{},"output_index":{index},"#,
                message_item(id, &text)
            ),
            out,
        );
        sequence += 3;
    }
    if terminal {
        let mut response = Vec::new();
        whole(reply, &mut response);
        let response = String::from_utf8_lossy(&response);
        event(
            "response.completed",
            sequence,
            format_args!(r#""response":{response},"#),
            out,
        );
    }
}

/// The whole response object (the non-streaming answer, and `response.completed`'s).
pub(super) fn whole(reply: &Reply<'_>, out: &mut Vec<u8>) {
    let (id, n) = (reply.id, reply.completion_tokens);
    let reasoning = reply.reasoning_tokens();
    let mut items = Vec::new();
    if reasoning > 0 {
        let mut text = Vec::new();
        words(0, reasoning, &mut text);
        items.push(reasoning_item(id, &String::from_utf8_lossy(&text)));
    }
    if n > reasoning {
        let mut text = Vec::new();
        words(reasoning, n, &mut text);
        items.push(message_item(id, &String::from_utf8_lossy(&text)));
    }
    let prompt = reply.prompt_tokens;
    let _ = write!(
        out,
        r#"{{"id":"resp_{id:016x}","object":"response","created_at":{},"model":{},"status":"incomplete","incomplete_details":{{"reason":"max_output_tokens"}},"output":[{}],"usage":{{"input_tokens":{prompt},"input_tokens_details":{{"cached_tokens":{}}},"output_tokens":{n},"output_tokens_details":{{"reasoning_tokens":{reasoning}}},"total_tokens":{}}},"error":null}}"#,
        reply.created,
        reply.model_json,
        items.join(","),
        reply.cached_tokens.unwrap_or(0),
        u64::from(prompt) + u64::from(n),
    );
}

/// The API's in-band error: an `error` event with the message.
pub(super) fn error_event(message: &serde_json::Value, out: &mut Vec<u8>) {
    let _ = write!(
        out,
        "event: error\ndata: {{\"type\":\"error\",\"code\":\"server_error\",\"message\":{message},\"param\":null}}\n\n"
    );
}

#[cfg(test)]
pub(crate) mod tests;
