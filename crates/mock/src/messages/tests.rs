//! The Messages API against a real HTTP client on loopback.

use std::time::Duration;

use serde_json::{Value, json};

use crate::responses::tests::{events, post_to, words};
use crate::{Faults, MockConfig, MockServer, Reasoning, spawn};

async fn server(config: MockConfig) -> MockServer {
    spawn(config).await.expect("start the mock server")
}

async fn post(server: &MockServer, id: &str, body: Value) -> (reqwest::StatusCode, String) {
    post_to(server, "/v1/messages", id, body).await
}

fn names(events: &[(String, Value)]) -> Vec<&str> {
    events.iter().map(|(n, _)| n.as_str()).collect()
}

/// The text of the deltas of one kind (`text_delta`, `thinking_delta`).
fn deltas(events: &[(String, Value)], kind: &str, key: &str) -> String {
    events
        .iter()
        .filter(|(_, d)| d["delta"]["type"] == json!(kind))
        .map(|(_, d)| d["delta"][key].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn a_stream_has_thinking_then_text_deltas_on_time_and_ends_with_the_usage() {
    let server = server(MockConfig {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(5),
        reasoning: Reasoning {
            tokens: 2,
            ..Reasoning::default()
        },
        usage_tokens_per_word: 2,
        ..MockConfig::default()
    })
    .await;
    let body = json!({
        "model": "m", "system": "be brief", "max_tokens": 5, "stream": true,
        "messages": [{"role": "user", "content": "one two three"}],
    });
    let (status, text) = post(&server, "r-0", body).await;
    assert!(status.is_success(), "{status} {text}");
    let events = events(&text);
    assert_eq!(
        names(&events),
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    // The prompt counts the system prompt's words too.
    assert_eq!(
        events[0].1["message"]["usage"],
        json!({"input_tokens": 5, "output_tokens": 0})
    );
    assert_eq!(
        events[1].1["content_block"],
        json!({"type": "thinking", "thinking": ""})
    );
    assert_eq!(deltas(&events, "thinking_delta", "thinking"), words(0..2));
    assert_eq!(events[4].1["delta"]["type"], json!("signature_delta"));
    assert_eq!(events[5].1["index"], json!(0));
    assert_eq!(
        events[6].1,
        json!({"type": "content_block_start", "content_block": {"type": "text", "text": ""}, "index": 1})
    );
    assert_eq!(deltas(&events, "text_delta", "text"), words(2..5));
    assert_eq!(events[9].1["index"], json!(1));
    assert_eq!(
        events[11].1,
        json!({
            "type": "message_delta",
            "delta": {"stop_reason": "max_tokens", "stop_sequence": null},
            "usage": {"input_tokens": 5, "output_tokens": 10},
        })
    );

    let record = server.requests().pop().expect("a record");
    assert_eq!((record.id.as_str(), record.itl_ms.len()), ("r-0", 4));
    assert!(record.ttft_ms >= 20.0, "{record:?}");
    let first_content = record.first_content_ms.expect("content was sent");
    let due = record.ttft_ms + record.itl_ms[..2].iter().sum::<f64>();
    assert!((first_content - due).abs() < 1e-6, "{record:?}");
}

#[tokio::test]
async fn whole_answers_content_blocks_and_the_cache() {
    let server = server(MockConfig {
        prefix_cache: true,
        reasoning: Reasoning {
            tokens: 1,
            ..Reasoning::default()
        },
        ..MockConfig::default()
    })
    .await;
    let body = json!({
        "model": "m", "max_tokens": 3, "stream": false,
        "system": [{"type": "text", "text": "be brief"}],
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "hello there"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}},
        ]}],
    });
    let (status, text) = post(&server, "w-0", body.clone()).await;
    assert!(status.is_success(), "{status} {text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["type"], json!("message"));
    assert_eq!(answer["content"][0]["thinking"], json!(words(0..1)));
    assert_eq!(
        answer["content"][1],
        json!({"type": "text", "text": words(1..3)})
    );
    assert_eq!(answer["stop_reason"], json!("max_tokens"));
    assert_eq!(
        answer["usage"],
        json!({"input_tokens": 4, "output_tokens": 3, "cache_read_input_tokens": 0})
    );
    // The same prompt again: its cached part is read from the cache, and the input
    // tokens are the rest.
    let (_, text) = post(&server, "w-1", body).await;
    let usage = &serde_json::from_str::<Value>(&text).unwrap()["usage"];
    let cached = usage["cache_read_input_tokens"].as_u64().unwrap();
    assert!(cached > 0, "{usage}");
    assert_eq!(
        usage["input_tokens"].as_u64().unwrap() + cached,
        4,
        "{usage}"
    );
    // max_tokens is required.
    let (status, _) = post(
        &server,
        "bad",
        json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(status, reqwest::StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn faults_in_the_apis_shapes() {
    let server_with = |faults: Faults| {
        server(MockConfig {
            faults,
            ..MockConfig::default()
        })
    };
    let body = json!({
        "model": "m", "max_tokens": 6, "stream": true,
        "messages": [{"role": "user", "content": "hi"}],
    });
    // The in-band error: an `error` event after half the tokens, nothing after it.
    let s = server_with(Faults {
        error_event_rate: 1.0,
        ..Faults::default()
    })
    .await;
    let errored = events(&post(&s, "e", body.clone()).await.1);
    let (last, data) = errored.last().unwrap();
    assert_eq!(last, "error");
    assert_eq!(data["error"]["type"], json!("internal_error"));
    assert!(
        data["error"]["message"]
            .as_str()
            .unwrap()
            .contains("on purpose"),
        "{data}"
    );
    assert_eq!(deltas(&errored, "text_delta", "text"), words(0..3));
    assert!(!names(&errored).contains(&"message_delta"));
    // "No [DONE]": the stream ends without message_stop.
    let s = server_with(Faults {
        no_done_rate: 1.0,
        ..Faults::default()
    })
    .await;
    let cut = events(&post(&s, "n", body).await.1);
    assert_eq!(cut.last().unwrap().0, "message_delta");
}

#[tokio::test]
async fn an_answer_of_thinking_alone_closes_its_thinking_block() {
    let server = server(MockConfig {
        reasoning: Reasoning {
            tokens: 8,
            ..Reasoning::default()
        },
        ..MockConfig::default()
    })
    .await;
    let body = json!({
        "model": "m", "max_tokens": 3, "stream": true,
        "messages": [{"role": "user", "content": "hi"}],
    });
    let events = events(&post(&server, "r", body).await.1);
    let names = names(&events);
    assert_eq!(
        names[names.len() - 4..],
        [
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(
        events[events.len() - 4].1["delta"]["type"],
        json!("signature_delta")
    );
    assert_eq!(deltas(&events, "text_delta", "text"), "");
    assert_eq!(deltas(&events, "thinking_delta", "thinking"), words(0..3));
    assert_eq!(server.requests()[0].first_content_ms, None);
}
