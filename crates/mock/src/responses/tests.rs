//! The Responses API against a real HTTP client on loopback.

use std::time::Duration;

use serde_json::{Value, json};

use crate::reply::WORDS;
use crate::{Faults, MockConfig, MockServer, Reasoning, spawn};

async fn server(config: MockConfig) -> MockServer {
    spawn(config).await.expect("start the mock server")
}

async fn post(server: &MockServer, id: &str, body: Value) -> (reqwest::StatusCode, String) {
    post_to(server, "/v1/responses", id, body).await
}

/// A JSON POST to `path` with `id` as its `x-request-id`: the status and the body. (The
/// Messages API's tests post with it too.)
pub(crate) async fn post_to(
    server: &MockServer,
    path: &str,
    id: &str,
    body: Value,
) -> (reqwest::StatusCode, String) {
    let response = reqwest::Client::new()
        .post(format!("{}{path}", server.base_url()))
        .header("x-request-id", id)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("send the request");
    let status = response.status();
    (status, response.text().await.expect("read the body"))
}

/// Each event's `event:` name and `data:` JSON; asserts they agree on the type. (The
/// Messages API's tests read their streams with it too.)
pub(crate) fn events(body: &str) -> Vec<(String, Value)> {
    assert!(body.ends_with("\n\n"), "{body:?}");
    body.split_terminator("\n\n")
        .map(|event| {
            let (name, data) = event
                .strip_prefix("event: ")
                .and_then(|e| e.split_once("\ndata: "))
                .unwrap_or_else(|| panic!("not an event and its data: {event:?}"));
            let data: Value = serde_json::from_str(data)
                .unwrap_or_else(|e| panic!("data is not JSON ({e}): {data}"));
            assert_eq!(data["type"], json!(name), "{event}");
            (name.to_owned(), data)
        })
        .collect()
}

pub(crate) fn words(range: std::ops::Range<usize>) -> String {
    range.map(|i| WORDS[i % WORDS.len()]).collect()
}

#[tokio::test]
async fn a_stream_has_reasoning_then_output_deltas_on_time_and_ends_with_the_usage() {
    let server = server(MockConfig {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(5),
        reasoning: Reasoning {
            tokens: 2,
            ..Reasoning::default()
        },
        ..MockConfig::default()
    })
    .await;
    let body = json!({
        "model": "m", "input": "one two three", "max_output_tokens": 5,
        "stream": true, "store": false, "temperature": 0.0,
    });
    let (status, text) = post(&server, "r-0", body).await;
    assert!(status.is_success(), "{status} {text}");
    let events = events(&text);
    // Every event is numbered, from 0, in order.
    for (i, (_, data)) in events.iter().enumerate() {
        assert_eq!(data["sequence_number"], json!(i), "{data}");
    }
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.reasoning_text.delta",
            "response.reasoning_text.delta",
            "response.reasoning_text.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let deltas = |kind: &str| -> String {
        events
            .iter()
            .filter(|(n, _)| n == kind)
            .map(|(_, d)| d["delta"].as_str().unwrap())
            .collect()
    };
    assert_eq!(deltas("response.reasoning_text.delta"), words(0..2));
    assert_eq!(deltas("response.output_text.delta"), words(2..5));
    assert_eq!(events[5].1["text"], json!(words(0..2)));
    assert_eq!(events[12].1["text"], json!(words(2..5)));
    let response = &events[15].1["response"];
    assert_eq!(response["status"], json!("incomplete"));
    assert_eq!(
        response["usage"],
        json!({
            "input_tokens": 3, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 2},
            "total_tokens": 8,
        })
    );
    assert_eq!(
        response["output"][1]["content"][0]["text"],
        json!(words(2..5))
    );

    let record = server.requests().pop().expect("a record");
    assert_eq!((record.id.as_str(), record.itl_ms.len()), ("r-0", 4));
    assert!(record.ttft_ms >= 20.0, "{record:?}");
    let first_content = record.first_content_ms.expect("content was sent");
    let due = record.ttft_ms + record.itl_ms[..2].iter().sum::<f64>();
    assert!((first_content - due).abs() < 1e-6, "{record:?}");
}

#[tokio::test]
async fn whole_answers_and_input_messages() {
    let server = server(MockConfig::default()).await;
    let body = json!({
        "model": "m", "max_output_tokens": 3, "stream": false,
        "input": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [
                {"type": "input_text", "text": "hello there"},
                {"type": "input_image", "image_url": "data:image/png;base64,AA"},
            ]},
        ],
    });
    let (status, text) = post(&server, "w-0", body).await;
    assert!(status.is_success(), "{status} {text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["object"], json!("response"));
    assert_eq!(answer["output"].as_array().unwrap().len(), 1, "{answer}");
    assert_eq!(
        answer["output"][0]["content"][0]["text"],
        json!(words(0..3))
    );
    assert_eq!(answer["usage"]["input_tokens"], json!(4));
    assert_eq!(answer["usage"]["output_tokens"], json!(3));
    let (status, _) = post(&server, "bad", json!({"model": "m", "input": 7})).await;
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
    let body = json!({"model": "m", "input": "hi", "max_output_tokens": 6, "stream": true});
    // The in-band error: an `error` event after half the tokens, no terminal event.
    let s = server_with(Faults {
        error_event_rate: 1.0,
        ..Faults::default()
    })
    .await;
    let errored = events(&post(&s, "e", body.clone()).await.1);
    let (last, data) = errored.last().unwrap();
    assert_eq!(last, "error");
    assert!(
        data["message"].as_str().unwrap().contains("on purpose"),
        "{data}"
    );
    let deltas = errored
        .iter()
        .filter(|(n, _)| n == "response.output_text.delta")
        .count();
    assert_eq!(deltas, 3);
    assert!(!errored.iter().any(|(n, _)| n == "response.completed"));
    // "No [DONE]": the stream ends without its terminal event.
    let s = server_with(Faults {
        no_done_rate: 1.0,
        ..Faults::default()
    })
    .await;
    let cut = events(&post(&s, "n", body).await.1);
    assert_eq!(cut.last().unwrap().0, "response.output_item.done");
    assert!(!cut.iter().any(|(n, _)| n == "response.completed"));
}

#[tokio::test]
async fn an_answer_of_reasoning_alone_closes_its_reasoning_item() {
    let server = server(MockConfig {
        reasoning: Reasoning {
            tokens: 8,
            ..Reasoning::default()
        },
        ..MockConfig::default()
    })
    .await;
    let body = json!({"model": "m", "input": "hi", "max_output_tokens": 3, "stream": true});
    let events = events(&post(&server, "r", body).await.1);
    for (i, (_, data)) in events.iter().enumerate() {
        assert_eq!(data["sequence_number"], json!(i), "{data}");
    }
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names[names.len() - 3..],
        [
            "response.reasoning_text.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    assert!(!names.contains(&"response.output_text.delta"));
    let usage = &events.last().unwrap().1["response"]["usage"];
    assert_eq!(usage["output_tokens_details"]["reasoning_tokens"], json!(3));
    assert_eq!(server.requests()[0].first_content_ms, None);
}
