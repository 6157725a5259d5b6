//! The servers' own APIs (TGI, Triton, SGLang, llama.cpp) against a real HTTP client.

use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use serde_json::{Value, json};

use super::reply::WORDS;
use super::*;
use axum::http::header;

async fn start(config: MockConfig) -> MockServer {
    spawn(config).await.expect("start the mock server")
}

async fn post(server: &MockServer, path: &str, id: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}{path}", server.base_url()))
        .header("content-type", "application/json")
        .header("x-request-id", id)
        .body(body.to_string())
        .send()
        .await
        .expect("send the request")
}

/// The `data` of every SSE event (with or without a space after `data:`), each with the
/// time since `sent` at which the read that completed it returned.
async fn events(response: reqwest::Response, sent: Instant) -> Vec<(Duration, Value)> {
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/event-stream"
    );
    let mut body = response.bytes_stream();
    let (mut pending, mut events) = (Vec::new(), Vec::new());
    while let Some(read) = body.next().await {
        let at = sent.elapsed();
        pending.extend_from_slice(&read.expect("read the stream"));
        while let Some(end) = pending.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = pending.drain(..end + 2).collect();
            let event = String::from_utf8(event).expect("UTF-8 event");
            let data = event
                .strip_prefix("data:")
                .map(|d| d.strip_prefix(' ').unwrap_or(d).trim_end())
                .unwrap_or_else(|| panic!("not a data line: {event:?}"));
            let value = if data == "[DONE]" {
                Value::from("[DONE]")
            } else {
                serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}"))
            };
            events.push((at, value));
        }
    }
    assert!(
        pending.is_empty(),
        "bytes after the last event: {pending:?}"
    );
    events
}

fn words(n: usize) -> String {
    (0..n).map(|i| WORDS[i % WORDS.len()]).collect()
}

const TTFT: Duration = Duration::from_millis(60);
const ITL: Duration = Duration::from_millis(20);

async fn timed_server() -> MockServer {
    start(MockConfig {
        ttft: TTFT,
        itl: ITL,
        ..MockConfig::default()
    })
    .await
}

/// Token event `i` leaves at TTFT + i * ITL (lower bounds exact, upper ones loose), and the
/// server's record of the request has its first token and every gap.
fn check_schedule(server: &MockServer, id: &str, at: &[Duration]) {
    let slack = Duration::from_millis(150);
    for (i, at) in at.iter().enumerate() {
        let due = TTFT + ITL * i as u32;
        assert!(
            *at >= due && *at < due + slack,
            "token {i} at {at:?}, due {due:?}"
        );
    }
    let record = server
        .requests()
        .into_iter()
        .find(|r| r.id == id)
        .expect("the request is recorded");
    assert!(record.ttft_ms >= TTFT.as_secs_f64() * 1e3, "{record:?}");
    assert_eq!(record.itl_ms.len(), at.len() - 1, "{record:?}");
    // Deadlines are absolute: the last token leaves after its own, whatever the gaps.
    let last_ms = record.ttft_ms + record.itl_ms.iter().sum::<f64>();
    let due_ms = (TTFT + ITL * (at.len() as u32 - 1)).as_secs_f64() * 1e3;
    assert!(last_ms >= due_ms, "{record:?}");
}

#[tokio::test]
async fn tgi_streams_one_token_per_event_and_details_last() {
    let server = timed_server().await;
    let body = json!({"inputs": "What is deep learning?",
                      "parameters": {"max_new_tokens": 5, "do_sample": true, "temperature": 0.01}});
    let sent = Instant::now();
    let got = events(
        post(&server, "/generate_stream", "tgi-0", &body).await,
        sent,
    )
    .await;
    assert_eq!(got.len(), 5, "{got:?}");
    for (i, (_, event)) in got.iter().enumerate() {
        assert_eq!(event["index"], i + 1);
        assert_eq!(event["token"]["text"], WORDS[i]);
        assert_eq!(event["token"]["special"], false);
    }
    assert_eq!(got[3].1["generated_text"], Value::Null);
    assert_eq!(got[4].1["generated_text"], words(5));
    assert_eq!(got[4].1["details"]["finish_reason"], "length");
    assert_eq!(got[4].1["details"]["generated_tokens"], 5);
    let at: Vec<Duration> = got.iter().map(|(at, _)| *at).collect();
    check_schedule(&server, "tgi-0", &at);
    // TGI's own event shape: `data:` with no space.
    let raw = post(&server, "/generate_stream", "tgi-1", &body)
        .await
        .text()
        .await
        .unwrap();
    assert!(raw.starts_with("data:{\"index\":1,"), "{raw}");
}

#[tokio::test]
async fn triton_streams_text_output_per_token_for_any_model() {
    let server = timed_server().await;
    let body = json!({"accumulate_tokens": true, "text_input": "What is ML?",
                      "max_tokens": 4, "stream": true});
    let sent = Instant::now();
    let path = "/v2/models/ensemble/generate_stream";
    let got = events(post(&server, path, "trt-0", &body).await, sent).await;
    let texts: Vec<&str> = got
        .iter()
        .map(|(_, e)| e["text_output"].as_str().unwrap())
        .collect();
    assert_eq!(texts, WORDS[..4]);
    assert_eq!(got[0].1["model_name"], "ensemble");
    let at: Vec<Duration> = got.iter().map(|(at, _)| *at).collect();
    check_schedule(&server, "trt-0", &at);
    let other = events(
        post(
            &server,
            "/v2/models/tensorrt_llm_bls/generate_stream",
            "trt-1",
            &body,
        )
        .await,
        Instant::now(),
    )
    .await;
    assert_eq!(other.len(), 4);
}

#[tokio::test]
async fn sglang_streams_the_text_so_far_then_done_and_answers_whole() {
    let server = timed_server().await;
    let body = json!({"text": "The capital of France is",
                      "sampling_params": {"max_new_tokens": 4, "temperature": 0.0},
                      "stream": true});
    let sent = Instant::now();
    let got = events(post(&server, "/generate", "sg-0", &body).await, sent).await;
    assert_eq!(got.len(), 5, "{got:?}");
    for (i, (_, event)) in got[..4].iter().enumerate() {
        assert_eq!(event["text"], words(i + 1));
        assert_eq!(event["meta_info"]["completion_tokens"], i + 1);
        assert_eq!(event["meta_info"]["prompt_tokens"], 5);
    }
    assert_eq!(got[2].1["meta_info"]["finish_reason"], Value::Null);
    assert_eq!(
        got[3].1["meta_info"]["finish_reason"],
        json!({"type": "length", "length": 4})
    );
    assert_eq!(got[4].1, "[DONE]");
    let at: Vec<Duration> = got[..4].iter().map(|(at, _)| *at).collect();
    check_schedule(&server, "sg-0", &at);

    let whole = json!({"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 3}});
    let response = post(&server, "/generate", "sg-1", &whole).await;
    let answer: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    assert_eq!(answer["text"], words(3));
    assert_eq!(answer["meta_info"]["prompt_tokens"], 3);
    assert_eq!(answer["meta_info"]["completion_tokens"], 3);
    let neither = post(&server, "/generate", "sg-2", &json!({"stream": true})).await;
    assert_eq!(neither.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn llama_cpp_streams_content_then_a_stop_event_with_counts() {
    let server = timed_server().await;
    let body = json!({"prompt": "Building a website", "n_predict": 3, "stream": true});
    let sent = Instant::now();
    let got = events(post(&server, "/completion", "ll-0", &body).await, sent).await;
    assert_eq!(got.len(), 4, "{got:?}");
    for (i, (_, event)) in got[..3].iter().enumerate() {
        assert_eq!(event["content"], WORDS[i]);
        assert_eq!(event["stop"], false);
        assert_eq!(event["tokens_predicted"], i + 1);
    }
    let last = &got[3].1;
    assert_eq!(last["content"], "");
    assert_eq!(last["stop"], true);
    assert_eq!(last["stop_type"], "limit");
    assert_eq!(last["tokens_predicted"], 3);
    assert_eq!(last["tokens_evaluated"], 3);
    let at: Vec<Duration> = got[..3].iter().map(|(at, _)| *at).collect();
    check_schedule(&server, "ll-0", &at);

    let whole = json!({"prompt": [1, 2], "n_predict": 2});
    let answer = post(&server, "/completion", "ll-1", &whole).await;
    let answer: Value = serde_json::from_slice(&answer.bytes().await.unwrap()).unwrap();
    assert_eq!(answer["content"], words(2));
    assert_eq!(answer["stop"], true);
    assert_eq!(answer["tokens_evaluated"], 2);
}

#[tokio::test]
async fn native_streams_carry_their_apis_error_events_and_malformed_chunks() {
    let server = start(MockConfig {
        faults: faults::Faults {
            error_event_rate: 1.0,
            ..faults::Faults::default()
        },
        ..MockConfig::default()
    })
    .await;
    let tgi = json!({"inputs": "x", "parameters": {"max_new_tokens": 4}});
    let got = events(
        post(&server, "/generate_stream", "e-0", &tgi).await,
        Instant::now(),
    )
    .await;
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(
        got[2].1["error"]
            .as_str()
            .unwrap()
            .contains("--error-event-rate")
    );
    let llama = json!({"prompt": "x", "n_predict": 4, "stream": true});
    let got = events(
        post(&server, "/completion", "e-1", &llama).await,
        Instant::now(),
    )
    .await;
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(got[2].1["error"]["code"], 500);

    let server = start(MockConfig {
        faults: faults::Faults {
            malformed_rate: 1.0,
            ..faults::Faults::default()
        },
        ..MockConfig::default()
    })
    .await;
    let trt = json!({"text_input": "x", "max_tokens": 4, "stream": true});
    let raw = post(&server, "/v2/models/ensemble/generate_stream", "m-0", &trt)
        .await
        .text()
        .await
        .unwrap();
    let frames: Vec<&str> = raw.split_terminator("\n\n").collect();
    assert_eq!(frames.len(), 4, "{raw}");
    assert!(serde_json::from_str::<Value>(&frames[2]["data: ".len()..]).is_err());
    assert!(serde_json::from_str::<Value>(&frames[3]["data: ".len()..]).is_ok());
}
