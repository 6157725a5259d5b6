//! The mock server against a real HTTP client on loopback.

use std::time::{Duration, Instant};

use clap::Parser as _;
use futures_util::StreamExt as _;
use serde_json::{Value, json};

use super::reply::WORDS;
use super::*;
use axum::http::header;

async fn start(config: MockConfig) -> MockServer {
    spawn(config).await.expect("start the mock server")
}

async fn post(server: &MockServer, path: &str, body: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}{path}", server.base_url()))
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .expect("send the request")
}

async fn post_json(server: &MockServer, path: &str, body: Value) -> (StatusCode, Value) {
    let response = post(server, path, &body.to_string()).await;
    let status = response.status();
    let bytes = response.bytes().await.expect("read the body");
    let value = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!(
            "body is not JSON ({e}): {}",
            String::from_utf8_lossy(&bytes)
        )
    });
    (status, value)
}

/// The `data:` payloads of an SSE body, each with the time since `sent` at which the read
/// that completed it returned.
async fn sse_events(response: reqwest::Response, sent: Instant) -> Vec<(Duration, String)> {
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/event-stream"
    );
    let mut body = response.bytes_stream();
    let mut pending = Vec::new();
    let mut events = Vec::new();
    while let Some(read) = body.next().await {
        let at = sent.elapsed();
        pending.extend_from_slice(&read.expect("read the stream"));
        while let Some(end) = pending.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = pending.drain(..end + 2).collect();
            let event = String::from_utf8(event).expect("UTF-8 event");
            let data = event
                .strip_prefix("data: ")
                .and_then(|e| e.strip_suffix("\n\n"))
                .unwrap_or_else(|| panic!("not a single data line: {event:?}"));
            events.push((at, data.to_owned()));
        }
    }
    assert!(
        pending.is_empty(),
        "bytes after the last event: {pending:?}"
    );
    events
}

fn parse(data: &str) -> Value {
    serde_json::from_str(data).unwrap_or_else(|e| panic!("chunk is not JSON ({e}): {data}"))
}

fn words(n: usize) -> String {
    (0..n).map(|i| WORDS[i % WORDS.len()]).collect()
}

#[tokio::test]
async fn streaming_completions_send_one_chunk_per_token_then_usage_and_done() {
    let server = start(MockConfig::default()).await;
    let body = json!({
        "model": "whatever", "prompt": "one two  three\nfour", "max_tokens": 40,
        "stream": true, "stream_options": {"include_usage": true}, "ignore_eos": true,
        "temperature": 0.0, "logprobs": null,
    });
    let response = post(&server, "/v1/completions", &body.to_string()).await;
    let events = sse_events(response, Instant::now()).await;
    assert_eq!(events.len(), 40 + 2, "40 tokens, usage, [DONE]");

    let first = parse(&events[0].1);
    let id = first["id"].as_str().expect("id");
    assert!(id.starts_with("cmpl-"), "{id}");
    let created = first["created"].as_u64().expect("created");
    for (i, (_, data)) in events[..40].iter().enumerate() {
        let finish_reason = if i == 39 {
            json!("length")
        } else {
            Value::Null
        };
        assert_eq!(
            parse(data),
            json!({
                "id": id, "object": "text_completion", "created": created, "model": "mock",
                "choices": [{
                    "index": 0, "text": WORDS[i % WORDS.len()], "logprobs": null,
                    "finish_reason": finish_reason,
                }],
            }),
            "chunk {i}"
        );
    }
    assert_eq!(
        parse(&events[40].1),
        json!({
            "id": id, "object": "text_completion", "created": created, "model": "mock",
            "choices": [],
            "usage": {"prompt_tokens": 4, "completion_tokens": 40, "total_tokens": 44},
        })
    );
    assert_eq!(events[41].1, "[DONE]");
}

#[tokio::test]
async fn streaming_chat_puts_the_role_on_the_first_token_and_prefers_max_completion_tokens() {
    let server = start(MockConfig {
        model: "served/model".to_owned(),
        ..MockConfig::default()
    })
    .await;
    let body = json!({
        "model": "served/model",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [
                {"type": "text", "text": "hello there world"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ]},
            {"role": "assistant", "content": null},
        ],
        "max_completion_tokens": 5, "max_tokens": 9,
        "stream": true, "stream_options": {"include_usage": true},
    });
    let response = post(&server, "/v1/chat/completions", &body.to_string()).await;
    let events = sse_events(response, Instant::now()).await;
    assert_eq!(events.len(), 5 + 2);

    let first = parse(&events[0].1);
    let id = first["id"].as_str().expect("id");
    assert!(id.starts_with("chatcmpl-"), "{id}");
    let created = first["created"].as_u64().expect("created");
    for (i, (_, data)) in events[..5].iter().enumerate() {
        let delta = if i == 0 {
            json!({"role": "assistant", "content": WORDS[0]})
        } else {
            json!({"content": WORDS[i]})
        };
        let finish_reason = if i == 4 { json!("length") } else { Value::Null };
        assert_eq!(
            parse(data),
            json!({
                "id": id, "object": "chat.completion.chunk", "created": created,
                "model": "served/model",
                "choices": [{
                    "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason,
                }],
            }),
            "chunk {i}"
        );
    }
    assert_eq!(
        parse(&events[5].1),
        json!({
            "id": id, "object": "chat.completion.chunk", "created": created,
            "model": "served/model", "choices": [],
            "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
        })
    );
    assert_eq!(events[6].1, "[DONE]");
}

#[tokio::test]
async fn streams_without_include_usage_end_with_done_right_after_the_last_token() {
    let server = start(MockConfig::default()).await;
    for (path, body) in [
        (
            "/v1/completions",
            json!({"prompt": "x", "max_tokens": 3, "stream": true}),
        ),
        (
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": "x"}], "max_tokens": 3,
                   "stream": true, "stream_options": {"include_usage": false}}),
        ),
    ] {
        let response = post(&server, path, &body.to_string()).await;
        let events = sse_events(response, Instant::now()).await;
        let data: Vec<&str> = events.iter().map(|(_, d)| d.as_str()).collect();
        assert_eq!(data.len(), 4, "{path}: {data:?}");
        assert!(data[..3].iter().all(|d| !d.contains("usage")), "{path}");
        assert_eq!(parse(data[2])["choices"][0]["finish_reason"], "length");
        assert_eq!(data[3], "[DONE]", "{path}");
    }
}

#[tokio::test]
async fn non_streaming_answers_have_openai_shapes_and_usage() {
    let server = start(MockConfig {
        output_len: 6,
        ..MockConfig::default()
    })
    .await;

    // No max_tokens: the configured output length applies; a token-id prompt counts its ids.
    let (status, body) = post_json(
        &server,
        "/v1/completions",
        json!({"prompt": [1, 2, 3, 4, 5, 6, 7], "stream": false}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let id = body["id"].as_str().expect("id").to_owned();
    assert!(id.starts_with("cmpl-"));
    assert_eq!(
        body,
        json!({
            "id": id, "object": "text_completion", "created": body["created"], "model": "mock",
            "choices": [{"index": 0, "text": words(6), "logprobs": null, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 6, "total_tokens": 13},
        })
    );
    assert!(body["created"].as_u64().expect("created") > 1_700_000_000);

    // Chat honours the deprecated max_tokens when max_completion_tokens is absent.
    let (status, body) = post_json(
        &server,
        "/v1/chat/completions",
        json!({"messages": [{"role": "user", "content": "say three words"}], "max_tokens": 3}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let id = body["id"].as_str().expect("id").to_owned();
    assert!(id.starts_with("chatcmpl-"));
    assert_eq!(
        body,
        json!({
            "id": id, "object": "chat.completion", "created": body["created"], "model": "mock",
            "choices": [{
                "index": 0, "message": {"role": "assistant", "content": words(3)},
                "logprobs": null, "finish_reason": "length",
            }],
            "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6},
        })
    );
}

#[tokio::test]
async fn prompt_forms_are_counted_and_bad_requests_get_400() {
    let server = start(MockConfig::default()).await;
    for (prompt, expected) in [
        (json!(["a b c"]), 3),
        (json!([[7, 8]]), 2),
        (json!([]), 0),
        (json!("  "), 0),
    ] {
        let (status, body) = post_json(
            &server,
            "/v1/completions",
            json!({"prompt": prompt, "max_tokens": 1}),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{prompt}: {body}");
        assert_eq!(body["usage"]["prompt_tokens"], expected, "{prompt}");
    }

    for (path, request) in [
        ("/v1/completions", json!({"prompt": ["a", "b"]}).to_string()),
        ("/v1/completions", json!({"prompt": [1, "a"]}).to_string()),
        ("/v1/completions", json!({"prompt": [-1]}).to_string()),
        ("/v1/completions", json!({"max_tokens": 3}).to_string()),
        (
            "/v1/completions",
            json!({"prompt": "x", "max_tokens": 0}).to_string(),
        ),
        (
            "/v1/completions",
            json!({"prompt": "x", "max_tokens": -2}).to_string(),
        ),
        (
            "/v1/chat/completions",
            json!({"messages": "hi"}).to_string(),
        ),
        (
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0})
                .to_string(),
        ),
        ("/v1/chat/completions", "{\"messages\": [".to_owned()),
    ] {
        let response = post(&server, path, &request).await;
        assert_eq!(
            response.status(),
            StatusCode::BAD_REQUEST,
            "{path} {request}"
        );
        let body: Value = serde_json::from_slice(&response.bytes().await.expect("body"))
            .expect("error body is JSON");
        assert_eq!(body["error"]["code"], 400, "{body}");
        assert_eq!(body["error"]["type"], "BadRequestError");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
    }
}

#[tokio::test]
async fn models_and_health_endpoints() {
    let server = start(MockConfig {
        model: "Qwen/Qwen3-0.6B".to_owned(),
        ..MockConfig::default()
    })
    .await;
    let client = reqwest::Client::new();

    let response = client
        .get(format!("{}/v1/models", server.base_url()))
        .send()
        .await
        .expect("GET /v1/models");
    assert_eq!(response.status(), StatusCode::OK);
    let models: Value =
        serde_json::from_slice(&response.bytes().await.expect("body")).expect("JSON");
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"].as_array().map(Vec::len), Some(1));
    assert_eq!(models["data"][0]["id"], "Qwen/Qwen3-0.6B");
    assert_eq!(models["data"][0]["object"], "model");

    let response = client
        .get(format!("{}/health", server.base_url()))
        .send()
        .await
        .expect("GET /health");
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.bytes().await.expect("body").is_empty());

    let response = client
        .get(format!("{}/v1/completions", server.base_url()))
        .send()
        .await
        .expect("GET /v1/completions");
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn fail_rate_a_quarter_fails_every_fourth_request() {
    let server = start(MockConfig {
        fail_rate: 0.25,
        ..MockConfig::default()
    })
    .await;
    let mut statuses = Vec::new();
    for _ in 0..8 {
        let (status, body) = post_json(
            &server,
            "/v1/completions",
            json!({"prompt": "x", "max_tokens": 2}),
        )
        .await;
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            assert_eq!(body["error"]["code"], 500, "{body}");
            assert_eq!(body["error"]["type"], "InternalServerError");
        } else {
            assert_eq!(body["usage"]["completion_tokens"], 2, "{body}");
        }
        statuses.push(status.as_u16());
    }
    assert_eq!(statuses, [200, 200, 200, 500, 200, 200, 200, 500]);
}

#[test]
fn fault_plan_fails_the_exact_share() {
    let failures = |rate: f64, n: u64| {
        let plan = FaultPlan::new(&[(Fault::ServerError, rate)]);
        (0..n).filter(|_| plan.next().1.is_some()).count()
    };
    assert_eq!(failures(0.0, 1000), 0);
    assert_eq!(failures(1.0, 1000), 1000);
    assert_eq!(failures(0.1, 1000), 100);
    // Over the first n requests exactly floor(n * rate) fail, the rate rounded to 1e-9.
    assert_eq!(failures(1.0 / 3.0, 1000), 333);
    assert_eq!(failures(0.37, 100), 37);
    assert_eq!(failures(0.5, 7), 3);
    let plan = FaultPlan::new(&[(Fault::ServerError, 0.5)]);
    assert_eq!(plan.next(), (0, None));
    assert_eq!(plan.next(), (1, Some(Fault::ServerError)));
}

#[test]
fn fault_plan_shares_requests_between_modes() {
    let modes = [
        (Fault::Reset, 0.25),
        (Fault::Cut, 0.25),
        (Fault::Stall, 0.1),
        (Fault::Dribble, 0.0),
        (Fault::Empty, 0.4),
    ];
    let plan = FaultPlan::new(&modes);
    let verdicts: Vec<Option<Fault>> = (0..1000).map(|_| plan.next().1).collect();
    // The first eight: 0.4 is due at requests 2 and 4 (floor(3 * 0.4) = 1, ...); at 3 the
    // quarter modes are due together and the first listed goes first, the other next.
    assert_eq!(
        verdicts[..8],
        [
            None,
            None,
            Some(Fault::Empty),
            Some(Fault::Reset),
            Some(Fault::Cut),
            Some(Fault::Empty),
            None,
            Some(Fault::Reset),
        ]
    );
    for (fault, rate) in modes {
        for n in [10usize, 100, 999, 1000] {
            let count = verdicts[..n].iter().filter(|v| **v == Some(fault)).count();
            let share = (n as f64 * rate).floor() as usize;
            assert!(
                count.abs_diff(share) <= modes.len(),
                "{fault:?} over {n}: {count}, share {share}"
            );
        }
    }
    // Rates summing to 1: all but a few requests (those before the first shares fall due)
    // get a fault.
    let clean = verdicts.iter().filter(|v| v.is_none()).count();
    assert!(clean <= modes.len(), "{clean} requests without a fault");
}

#[test]
fn fault_rates_are_checked_one_by_one_and_together() {
    assert!(faults::check_rates(&[(Fault::Cut, 0.5), (Fault::Reset, 0.5)]).is_ok());
    let err = faults::check_rates(&[(Fault::Cut, 0.5), (Fault::Reset, 0.6)]).unwrap_err();
    assert!(err.contains("add up to 1.1"), "{err}");
    let err = faults::check_rates(&[(Fault::Stall, f64::NAN)]).unwrap_err();
    assert!(err.contains("--stall-rate"), "{err}");
}

#[tokio::test]
async fn tokens_leave_at_ttft_plus_i_itl_and_non_streaming_at_the_last_token() {
    let (ttft, itl) = (Duration::from_millis(200), Duration::from_millis(30));
    // Loose: this checks the schedule, not the machine; lower bounds are exact.
    let slack = Duration::from_millis(150);
    let server = start(MockConfig {
        ttft,
        itl,
        ..MockConfig::default()
    })
    .await;
    let body = json!({"prompt": "x", "max_tokens": 6, "stream": true,
                      "stream_options": {"include_usage": true}});
    let sent = Instant::now();
    let response = post(&server, "/v1/completions", &body.to_string()).await;
    let events = sse_events(response, sent).await;
    assert_eq!(events.len(), 8);
    for (i, (at, _)) in events[..6].iter().enumerate() {
        let due = ttft + itl * i as u32;
        assert!(*at >= due, "token {i} at {at:?}, before {due:?}");
        assert!(*at < due + slack, "token {i} at {at:?}, due {due:?}");
    }
    let mean_gap = (events[5].0 - events[0].0) / 5;
    assert!(
        mean_gap >= itl / 2 && mean_gap <= itl * 3 / 2,
        "mean gap {mean_gap:?}"
    );

    let body = json!({"prompt": "x", "max_tokens": 4});
    let sent = Instant::now();
    let response = post(&server, "/v1/completions", &body.to_string()).await;
    assert_eq!(response.status(), StatusCode::OK);
    let headers_at = sent.elapsed();
    let due = ttft + itl * 3;
    assert!(
        headers_at >= due,
        "answered at {headers_at:?}, before {due:?}"
    );
    assert!(
        headers_at < due + slack,
        "answered at {headers_at:?}, due {due:?}"
    );
}

async fn post_with_id(server: &MockServer, path: &str, id: &str, body: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}{path}", server.base_url()))
        .header("content-type", "application/json")
        .header("x-request-id", id)
        .body(body.to_owned())
        .send()
        .await
        .expect("send the request")
}

#[tokio::test]
async fn each_streamed_request_with_an_id_is_recorded_with_its_ttft_and_every_gap() {
    let (ttft, itl) = (Duration::from_millis(40), Duration::from_millis(15));
    let server = start(MockConfig {
        ttft,
        itl,
        ..MockConfig::default()
    })
    .await;
    let stream = |n: u32| {
        json!({"prompt": "x", "max_tokens": n, "stream": true,
               "stream_options": {"include_usage": true}})
        .to_string()
    };
    let response = post_with_id(&server, "/v1/completions", "run-0", &stream(5)).await;
    assert_eq!(sse_events(response, Instant::now()).await.len(), 7);
    // Exactly the points in time the aggregates use.
    let (first, t) = (&server.requests()[0], server.timing());
    assert!(
        (first.ttft_ms - t.mean_ttft_ms).abs() < 1e-6,
        "{first:?} {t:?}"
    );
    let mean_gap = first.itl_ms.iter().sum::<f64>() / 4.0;
    assert!((mean_gap - t.mean_itl_ms).abs() < 1e-6, "{first:?} {t:?}");
    let chat = json!({"messages": [{"role": "user", "content": "x"}], "max_tokens": 3,
                      "stream": true});
    let response = post_with_id(&server, "/v1/chat/completions", "run-1", &chat.to_string()).await;
    assert_eq!(sse_events(response, Instant::now()).await.len(), 4);
    // Without an id: counted in the aggregates only. Not streamed: not recorded at all.
    let response = post(&server, "/v1/completions", &stream(2)).await;
    assert_eq!(sse_events(response, Instant::now()).await.len(), 4);
    let plain = json!({"prompt": "x", "max_tokens": 2}).to_string();
    let response = post_with_id(&server, "/v1/completions", "run-2", &plain).await;
    assert_eq!(response.status(), StatusCode::OK);
    response.bytes().await.expect("read the body");

    let requests = server.requests();
    let ids: Vec<&str> = requests.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["run-0", "run-1"]);
    // Slack only above: the server's timer never fires early, only late on a busy machine.
    let slack = 150.0;
    let (ttft_ms, itl_ms) = (ttft.as_secs_f64() * 1e3, itl.as_secs_f64() * 1e3);
    for (r, tokens) in requests.iter().zip([5, 3]) {
        assert_eq!(r.itl_ms.len(), tokens - 1, "{r:?}");
        assert!(r.ttft_ms >= ttft_ms && r.ttft_ms < ttft_ms + slack, "{r:?}");
        // Absolute deadlines: the last chunk leaves no earlier than ttft + (n - 1) * itl.
        let last = r.ttft_ms + r.itl_ms.iter().sum::<f64>();
        let due = ttft_ms + itl_ms * (tokens - 1) as f64;
        assert!(last >= due && last < due + slack, "{r:?}");
        assert!(
            r.itl_ms.iter().all(|&g| g > 0.0 && g < itl_ms + slack),
            "{r:?}"
        );
    }
    // The aggregates also count the stream without an id.
    let t = server.timing();
    assert_eq!((t.first_tokens, t.gaps, t.requests_kept), (3, 4 + 2 + 1, 2));

    // Other processes read the same list as JSON.
    let response = reqwest::get(format!("{}/mock/requests", server.base_url()))
        .await
        .expect("GET /mock/requests");
    let body: Value = serde_json::from_slice(&response.bytes().await.expect("read the body"))
        .expect("a JSON body");
    let body = body.as_array().expect("a list");
    assert_eq!(body.len(), requests.len());
    // serde_json's float parsing may differ from the printed value in the last bit.
    let close = |v: &Value, x: f64| (v.as_f64().expect("a number") - x).abs() < 1e-9;
    for (got, r) in body.iter().zip(&requests) {
        assert_eq!(got["id"], r.id.as_str());
        assert!(close(&got["ttft_ms"], r.ttft_ms), "{got} {r:?}");
        let gaps = got["itl_ms"].as_array().expect("a list of gaps");
        assert_eq!(gaps.len(), r.itl_ms.len());
        assert!(
            gaps.iter().zip(&r.itl_ms).all(|(g, &x)| close(g, x)),
            "{got} {r:?}"
        );
    }
}

/// With `--per-request-metrics` the final usage chunk of a stream, and a whole answer
/// next to its usage, carry vLLM's `metrics`, byte for byte what `/mock/requests` reports
/// was sent: the time to the first token the record's (no load, so no queue), the
/// generation the gaps'.
#[tokio::test]
async fn per_request_metrics_go_with_the_usage_and_into_the_record() {
    let server = start(MockConfig {
        ttft: Duration::from_millis(30),
        itl: Duration::from_millis(5),
        per_request_metrics: true,
        ..MockConfig::default()
    })
    .await;
    let member = |metrics: &timing::SentMetrics| {
        let mut out = Vec::new();
        metrics.write_member(&mut out);
        String::from_utf8(out).unwrap()
    };
    let stream = json!({"prompt": "x", "max_tokens": 4, "stream": true,
                        "stream_options": {"include_usage": true}});
    let response = post_with_id(&server, "/v1/completions", "m-0", &stream.to_string()).await;
    let events = sse_events(response, Instant::now()).await;
    assert_eq!(events.len(), 4 + 2);
    let record = server.requests()[0].clone();
    let sent = record.metrics.expect("metrics sent");
    let usage_chunk = &events[4].1;
    assert!(
        usage_chunk.ends_with(&format!("}}{}}}", member(&sent))),
        "{usage_chunk}"
    );
    assert_eq!(parse(usage_chunk)["choices"], json!([]));
    assert_eq!(sent.queue_time_ms, 0.0);
    assert_eq!(sent.time_to_first_token_ms, record.ttft_ms);
    let generation: f64 = record.itl_ms.iter().sum();
    assert!(
        (sent.generation_time_ms - generation).abs() < 1e-6,
        "{record:?}"
    );
    assert_eq!(sent.mean_itl_ms, Some(sent.generation_time_ms / 3.0));
    // No token chunk carries it.
    assert!(events[..4].iter().all(|(_, e)| !e.contains("metrics")));

    let whole = json!({"messages": [{"role": "user", "content": "x"}], "max_tokens": 3});
    let response = post_with_id(&server, "/v1/chat/completions", "m-1", &whole.to_string()).await;
    let body = String::from_utf8(response.bytes().await.unwrap().to_vec()).unwrap();
    let record = server.requests()[1].clone();
    assert_eq!(record.id, "m-1");
    let sent = record.metrics.expect("metrics sent");
    assert!(body.ends_with(&format!("}}{}}}", member(&sent))), "{body}");
    assert_eq!(parse(&body)["usage"]["completion_tokens"], 3);
    // The body leaves with its last token: the time to it is the first token's and the
    // schedule's generation.
    assert!((sent.generation_time_ms - 10.0).abs() < 1e-9, "{sent:?}");
    assert!(
        (sent.time_to_first_token_ms + sent.generation_time_ms - record.ttft_ms).abs() < 1e-9,
        "{record:?}"
    );
    assert!(sent.time_to_first_token_ms >= 30.0, "{sent:?}");
}

#[tokio::test]
async fn a_stream_cut_short_leaves_the_gaps_it_sent() {
    let server = faulty(Faults {
        cut_rate: 1.0,
        ..Faults::default()
    })
    .await;
    let response = post_with_id(&server, "/v1/completions", "cut-0", STREAM_6).await;
    let (bytes, err, _) = read_body(response).await;
    assert!(err.is_some(), "the body must fail");
    assert_eq!(payloads(&bytes).len(), 3);
    // The entry is kept when the server drops the stream, which may follow the client's
    // error by a moment.
    let deadline = Instant::now() + Duration::from_secs(5);
    let requests = loop {
        let requests = server.requests();
        if !requests.is_empty() || Instant::now() > deadline {
            break requests;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0].id, "cut-0");
    assert_eq!(requests[0].itl_ms.len(), 2, "3 chunks sent, 2 gaps");
}

#[tokio::test]
async fn output_text_tokenizes_to_the_reported_token_count() {
    let server = start(MockConfig::default()).await;
    let (status, body) = post_json(
        &server,
        "/v1/completions",
        json!({"prompt": "x", "max_tokens": 100}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["usage"]["completion_tokens"], 100);
    let text = body["choices"][0]["text"].as_str().expect("text");

    for family in ["gpt2", "qwen3"] {
        let path = format!(
            "{}/../../tests/data/tokenizers/{family}/tokenizer.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let tokenizer =
            tokenizers::Tokenizer::from_file(&path).unwrap_or_else(|e| panic!("load {path}: {e}"));
        let count = |text: &str| {
            tokenizer
                .encode(text, false)
                .unwrap_or_else(|e| panic!("encode {text:?}: {e}"))
                .get_ids()
                .len()
        };
        for word in WORDS {
            assert_eq!(count(word), 1, "{family}: {word:?}");
        }
        for n in 0..=2 * WORDS.len() + 1 {
            assert_eq!(count(&words(n)), n, "{family}: {n} words");
        }
        assert_eq!(count(text), 100, "{family}: the server's text");
    }
}

#[tokio::test]
async fn shutdown_and_drop_stop_the_server() {
    let server = start(MockConfig::default()).await;
    let addr = server.addr();
    assert_eq!(
        server.base_url(),
        format!("http://127.0.0.1:{}", addr.port())
    );
    assert_ne!(addr.port(), 0);
    let (status, _) = post_json(&server, "/v1/completions", json!({"prompt": "x"})).await;
    assert_eq!(status, StatusCode::OK);
    server.shutdown().await.expect("clean shutdown");
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());

    let server = start(MockConfig::default()).await;
    let addr = server.addr();
    drop(server);
    let deadline = Instant::now() + Duration::from_secs(5);
    while tokio::net::TcpStream::connect(addr).await.is_ok() {
        assert!(Instant::now() < deadline, "still accepting after drop");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn bad_configs_are_refused() {
    for fail_rate in [1.5, -0.1, f64::NAN] {
        let config = MockConfig {
            fail_rate,
            ..MockConfig::default()
        };
        assert!(spawn(config).await.is_err(), "fail rate {fail_rate}");
    }
    let config = MockConfig {
        output_len: 0,
        ..MockConfig::default()
    };
    assert!(spawn(config).await.is_err());
    // Rates that are fine alone but add up to more than 1.
    let config = MockConfig {
        fail_rate: 0.5,
        faults: Faults {
            cut_rate: 0.6,
            ..Faults::default()
        },
        ..MockConfig::default()
    };
    let err = spawn(config).await.unwrap_err().to_string();
    assert!(err.contains("more than 1"), "{err}");
    let config = MockConfig {
        faults: Faults {
            http_error_status: 302,
            ..Faults::default()
        },
        ..MockConfig::default()
    };
    assert!(spawn(config).await.is_err());
}

#[derive(clap::Parser)]
struct Cli {
    #[command(flatten)]
    args: MockServerArgs,
}

#[test]
fn flags_map_onto_the_config() {
    let defaults = Cli::try_parse_from(["mock"]).expect("defaults parse").args;
    let config = MockConfig::from(&defaults);
    assert_eq!(
        config,
        MockConfig {
            port: 8000,
            ..MockConfig::default()
        }
    );

    let args = Cli::try_parse_from([
        "mock",
        "--host",
        "0.0.0.0",
        "--port",
        "9001",
        "--ttft-ms",
        "25",
        "--itl-ms",
        "5",
        "--output-len",
        "64",
        "--model",
        "m",
        "--fail-rate",
        "0.1",
        "--ttft-per-running-ms",
        "10",
        "--per-request-metrics",
        "--invalid-structured-rate",
        "0.25",
        "--answer-key",
        "key.jsonl",
        "--wrong-answer-rate",
        "0.5",
        "--ttft-spread-ms",
        "200",
        "--latency-seed",
        "7",
    ])
    .expect("flags parse")
    .args;
    assert_eq!(
        MockConfig::from(&args),
        MockConfig {
            host: "0.0.0.0".to_owned(),
            port: 9001,
            ttft: Duration::from_millis(25),
            itl: Duration::from_millis(5),
            ttft_per_running: Duration::from_millis(10),
            ttft_spread: Duration::from_millis(200),
            latency_seed: 7,
            output_len: 64,
            model: "m".to_owned(),
            fail_rate: 0.1,
            faults: Faults::default(),
            closing: Closing::default(),
            prefix_cache: false,
            tokenize: false,
            reasoning: Reasoning::default(),
            usage_tokens_per_word: 1,
            server_metrics: crate::ServerMetrics::default(),
            per_request_metrics: true,
            invalid_structured_rate: 0.25,
            answer_key: Some("key.jsonl".into()),
            wrong_answer_rate: 0.5,
        }
    );

    let args = Cli::try_parse_from([
        "mock",
        "--http-error-rate",
        "0.1",
        "--http-error-status",
        "429",
        "--reset-rate",
        "0.05",
        "--cut-rate",
        "0.05",
        "--malformed-rate",
        "0.05",
        "--stall-rate",
        "0.05",
        "--stall-ms",
        "250",
        "--error-event-rate",
        "0.05",
        "--empty-rate",
        "0.05",
        "--no-done-rate",
        "0.05",
        "--dribble-rate",
        "0.05",
    ])
    .expect("fault flags parse")
    .args;
    assert_eq!(
        MockConfig::from(&args).faults,
        Faults {
            http_error_rate: 0.1,
            http_error_status: 429,
            reset_rate: 0.05,
            cut_rate: 0.05,
            malformed_rate: 0.05,
            stall_rate: 0.05,
            stall_ms: 250,
            error_event_rate: 0.05,
            empty_rate: 0.05,
            no_done_rate: 0.05,
            dribble_rate: 0.05,
        }
    );

    let args = Cli::try_parse_from([
        "mock",
        "--keep-alive-requests",
        "100",
        "--idle-timeout-ms",
        "5000",
        "--connection-close",
        "--close-after-stream",
        "on-reuse",
    ])
    .expect("closing flags parse")
    .args;
    assert_eq!(
        MockConfig::from(&args).closing,
        Closing {
            keep_alive_requests: Some(100),
            idle_timeout_ms: Some(5000),
            connection_close: true,
            close_after_stream: Some(SilentClose::OnReuse),
        }
    );
    let args = Cli::try_parse_from(["mock", "--close-after-stream", "at-once"])
        .expect("at-once parses")
        .args;
    assert_eq!(args.closing.close_after_stream, Some(SilentClose::AtOnce));

    for bad in [
        ["--keep-alive-requests", "0"],
        ["--idle-timeout-ms", "0"],
        ["--close-after-stream", "later"],
        ["--fail-rate", "1.01"],
        ["--fail-rate", "nan"],
        ["--fail-rate", "x"],
        ["--output-len", "0"],
        ["--reset-rate", "2"],
        ["--invalid-structured-rate", "1.5"],
        ["--wrong-answer-rate", "1.5"],
        ["--wrong-answer-rate", "-0.5"],
        ["--http-error-status", "200"],
        ["--http-error-status", "600"],
    ] {
        let argv = ["mock", bad[0], bad[1]];
        assert!(Cli::try_parse_from(argv).is_err(), "{bad:?}");
    }
}

/// A server whose every generation request gets the fault these `faults` ask for.
async fn faulty(faults: Faults) -> MockServer {
    start(MockConfig {
        faults,
        ..MockConfig::default()
    })
    .await
}

const STREAM_6: &str = r#"{"prompt": "x", "max_tokens": 6, "stream": true,
                            "stream_options": {"include_usage": true}}"#;

/// Reads a body to its end or first error: the bytes, the error, and the number of reads.
async fn read_body(response: reqwest::Response) -> (Vec<u8>, Option<reqwest::Error>, usize) {
    let mut body = response.bytes_stream();
    let (mut bytes, mut reads) = (Vec::new(), 0);
    while let Some(read) = body.next().await {
        match read {
            Ok(chunk) => {
                reads += 1;
                bytes.extend_from_slice(&chunk);
            }
            Err(e) => return (bytes, Some(e), reads),
        }
    }
    (bytes, None, reads)
}

/// The `data:` payloads of a complete SSE body.
fn payloads(body: &[u8]) -> Vec<String> {
    let text = std::str::from_utf8(body).expect("UTF-8 body");
    assert!(text.ends_with("\n\n") || text.is_empty(), "{text:?}");
    text.split_terminator("\n\n")
        .map(|event| {
            event
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not a data line: {event:?}"))
                .to_owned()
        })
        .collect()
}

fn token_text(chunk: &Value) -> &str {
    chunk["choices"][0]["text"].as_str().expect("text")
}

#[tokio::test]
async fn http_errors_carry_the_chosen_status() {
    let server = faulty(Faults {
        http_error_rate: 1.0,
        http_error_status: 429,
        ..Faults::default()
    })
    .await;
    let (status, body) = post_json(&server, "/v1/completions", json!({"prompt": "x"})).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(body["error"]["code"], 429);
    assert_eq!(body["error"]["type"], "BadRequestError");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("--http-error-rate"), "{message}");
}

#[tokio::test]
async fn a_reset_closes_the_connection_with_an_rst_before_any_byte() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let server = faulty(Faults {
        reset_rate: 1.0,
        ..Faults::default()
    })
    .await;
    let mut tcp = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    let body = r#"{"prompt": "x"}"#;
    let request = format!(
        "POST /v1/completions HTTP/1.1\r\nhost: mock\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut got))
        .await
        .expect("the server answers within 5 s");
    let err = read.expect_err("an RST, not a clean close");
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset, "{err}");
    assert!(got.is_empty(), "{:?}", String::from_utf8_lossy(&got));

    // The server goes on: the next request gets its own reset.
    let err = reqwest::Client::new()
        .post(format!("{}/v1/completions", server.base_url()))
        .body(body)
        .send()
        .await
        .expect_err("reset");
    assert!(!err.is_connect() && !err.is_timeout(), "{err:?}");
}

#[tokio::test]
async fn a_cut_stream_sends_half_its_chunks_then_closes_without_the_end() {
    let server = faulty(Faults {
        cut_rate: 1.0,
        ..Faults::default()
    })
    .await;
    let response = post(&server, "/v1/completions", STREAM_6).await;
    assert_eq!(response.status(), StatusCode::OK);
    let (bytes, err, _) = read_body(response).await;
    assert!(err.is_some(), "the body must fail");
    let events = payloads(&bytes);
    assert_eq!(events.len(), 3, "{events:?}");
    for (i, data) in events.iter().enumerate() {
        assert_eq!(token_text(&parse(data)), WORDS[i]);
    }

    // Not streaming: the first half of the JSON arrives, then the cut.
    let response = post(
        &server,
        "/v1/completions",
        r#"{"prompt": "x", "max_tokens": 6}"#,
    )
    .await;
    let (bytes, err, _) = read_body(response).await;
    assert!(err.is_some());
    assert!(bytes.starts_with(br#"{"id":"cmpl-"#), "{bytes:?}");
    assert!(serde_json::from_slice::<Value>(&bytes).is_err());
}

#[tokio::test]
async fn a_malformed_chunk_is_cut_short_and_the_stream_goes_on() {
    let server = faulty(Faults {
        malformed_rate: 1.0,
        ..Faults::default()
    })
    .await;
    let response = post(&server, "/v1/completions", STREAM_6).await;
    let (bytes, err, _) = read_body(response).await;
    assert!(err.is_none(), "{err:?}");
    let events = payloads(&bytes);
    assert_eq!(events.len(), 6 + 2, "{events:?}");
    for (i, data) in events[..6].iter().enumerate() {
        if i == 3 {
            assert!(serde_json::from_str::<Value>(data).is_err(), "{data}");
            assert!(
                data.ends_with(&format!(r#""text":"{}"#, WORDS[3])),
                "{data}"
            );
        } else {
            assert_eq!(token_text(&parse(data)), WORDS[i]);
        }
    }
    assert_eq!(parse(&events[6])["usage"]["completion_tokens"], 6);
    assert_eq!(events[7], "[DONE]");
}

#[tokio::test]
async fn an_error_event_ends_the_stream_like_vllm() {
    let server = faulty(Faults {
        error_event_rate: 1.0,
        ..Faults::default()
    })
    .await;
    let response = post(&server, "/v1/completions", STREAM_6).await;
    let (bytes, err, _) = read_body(response).await;
    assert!(err.is_none(), "{err:?}");
    let events = payloads(&bytes);
    assert_eq!(events.len(), 3 + 2, "{events:?}");
    // No token chunk claims to be the last one.
    for data in &events[..3] {
        assert_eq!(parse(data)["choices"][0]["finish_reason"], Value::Null);
    }
    let error = parse(&events[3]);
    assert_eq!(error["error"]["object"], "error");
    assert_eq!(error["error"]["code"], 500);
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("--error-event-rate"), "{message}");
    assert_eq!(events[4], "[DONE]");

    let (status, body) = post_json(&server, "/v1/completions", json!({"prompt": "x"})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["error"]["code"], 500, "{body}");
}

#[tokio::test]
async fn empty_answers_and_streams_without_done() {
    let server = faulty(Faults {
        empty_rate: 0.5,
        no_done_rate: 0.5,
        ..Faults::default()
    })
    .await;
    // Request 0 is due neither fault: floor(1 * 0.5) = 0; request 1 both, the first
    // listed (empty) wins; request 2 gets the other (no [DONE]).
    let (bytes, _, _) = read_body(post(&server, "/v1/completions", STREAM_6).await).await;
    assert_eq!(payloads(&bytes).len(), 8);
    let (bytes, err, _) = read_body(post(&server, "/v1/completions", STREAM_6).await).await;
    assert!(err.is_none());
    let events = payloads(&bytes);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(parse(&events[0])["usage"]["completion_tokens"], 0);
    assert_eq!(events[1], "[DONE]");
    let (bytes, err, _) = read_body(post(&server, "/v1/completions", STREAM_6).await).await;
    assert!(err.is_none(), "the stream ends cleanly");
    let events = payloads(&bytes);
    assert_eq!(events.len(), 7, "{events:?}");
    assert_eq!(parse(&events[6])["usage"]["completion_tokens"], 6);
}

#[tokio::test]
async fn a_dribbled_answer_arrives_byte_by_byte_and_whole() {
    let server = faulty(Faults {
        dribble_rate: 1.0,
        ..Faults::default()
    })
    .await;
    let (bytes, err, reads) = read_body(post(&server, "/v1/completions", STREAM_6).await).await;
    assert!(err.is_none(), "{err:?}");
    let events = payloads(&bytes);
    assert_eq!(events.len(), 8);
    let text: String = events[..6]
        .iter()
        .map(|e| token_text(&parse(e)).to_owned())
        .collect();
    assert_eq!(text, words(6));
    // Each byte is its own write; reads may still join a few of them.
    assert!(
        reads > bytes.len() / 4,
        "{reads} reads for {} bytes",
        bytes.len()
    );

    let (status, body) = post_json(
        &server,
        "/v1/completions",
        json!({"prompt": "x", "max_tokens": 5}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["choices"][0]["text"], words(5));
}

#[tokio::test]
async fn a_stall_holds_the_stream_then_resumes_or_ends_at_shutdown() {
    let stall = Duration::from_millis(300);
    let server = faulty(Faults {
        stall_rate: 1.0,
        stall_ms: stall.as_millis() as u64,
        ..Faults::default()
    })
    .await;
    let sent = Instant::now();
    let events = sse_events(post(&server, "/v1/completions", STREAM_6).await, sent).await;
    assert_eq!(events.len(), 8);
    assert!(events[2].0 < stall, "{:?}", events[2].0);
    assert!(events[3].0 >= stall, "{:?}", events[3].0);

    // A stall longer than the test: shutting the server down ends it.
    let server = faulty(Faults {
        stall_rate: 1.0,
        ..Faults::default()
    })
    .await;
    let response = post(&server, "/v1/completions", STREAM_6).await;
    let reader = tokio::spawn(read_body(response));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!reader.is_finished(), "the stream is stalled");
    tokio::time::timeout(Duration::from_secs(5), server.shutdown())
        .await
        .expect("shutdown does not wait for the stall")
        .expect("clean shutdown");
    let (bytes, err, _) = reader.await.unwrap();
    assert!(err.is_some(), "the stalled stream is cut");
    assert_eq!(payloads(&bytes).len(), 3);
}

/// A server that ends its connections as `closing` says.
async fn closing(closing: Closing) -> MockServer {
    start(MockConfig {
        closing,
        ..MockConfig::default()
    })
    .await
}

/// Writes a POST of `body` to /v1/completions on a raw connection.
async fn send_raw(tcp: &mut tokio::net::TcpStream, body: &str) {
    use tokio::io::AsyncWriteExt as _;
    let request = format!(
        "POST /v1/completions HTTP/1.1\r\nhost: mock\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
}

/// Reads one response (chunked or with a Content-Length) off a raw connection: its head,
/// lower-cased, and its body as sent.
async fn read_raw(tcp: &mut tokio::net::TcpStream) -> (String, Vec<u8>) {
    use tokio::io::AsyncReadExt as _;
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        let n = tcp.read(&mut byte).await.expect("read the head");
        assert_eq!(n, 1, "the connection closed inside a head: {got:?}");
        got.push(byte[0]);
    }
    let head = String::from_utf8(got).unwrap().to_ascii_lowercase();
    let mut body = Vec::new();
    if head.contains("transfer-encoding: chunked") {
        while !body.ends_with(b"\r\n0\r\n\r\n") {
            let n = tcp.read(&mut byte).await.expect("read the body");
            assert_eq!(n, 1, "the connection closed inside a body");
            body.push(byte[0]);
        }
    } else {
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .expect("a content-length")
            .trim()
            .parse()
            .unwrap();
        body.resize(len, 0);
        tcp.read_exact(&mut body).await.expect("read the body");
    }
    (head, body)
}

/// Waits (up to 5 s) for the server to close the connection: the next read is its end.
async fn read_end(tcp: &mut tokio::net::TcpStream) -> Vec<u8> {
    use tokio::io::AsyncReadExt as _;
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut rest))
        .await
        .expect("the server closes within 5 s")
        .expect("a FIN, not an RST");
    rest
}

const STREAM_2: &str = r#"{"prompt": "x", "max_tokens": 2, "stream": true}"#;
const WHOLE_2: &str = r#"{"prompt": "x", "max_tokens": 2}"#;

#[tokio::test]
async fn connection_close_on_every_response_closes_after_it() {
    let server = closing(Closing {
        connection_close: true,
        ..Closing::default()
    })
    .await;
    for body in [STREAM_2, WHOLE_2] {
        let mut tcp = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
        send_raw(&mut tcp, body).await;
        let (head, _) = read_raw(&mut tcp).await;
        assert!(head.starts_with("http/1.1 200"), "{head}");
        assert!(head.contains("connection: close\r\n"), "{head}");
        assert!(read_end(&mut tcp).await.is_empty());
    }
    assert_eq!(server.connections(), 2);
    assert_eq!(server.dropped_requests(), 0);
}

#[tokio::test]
async fn a_request_limit_says_close_on_the_last_response_and_closes() {
    let server = closing(Closing {
        keep_alive_requests: Some(3),
        ..Closing::default()
    })
    .await;
    let mut tcp = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    // Streamed or not, every response counts.
    for (i, body) in [STREAM_2, WHOLE_2, STREAM_2].into_iter().enumerate() {
        send_raw(&mut tcp, body).await;
        let (head, _) = read_raw(&mut tcp).await;
        assert!(head.starts_with("http/1.1 200"), "{head}");
        assert_eq!(
            head.contains("connection: close"),
            i == 2,
            "response {i}: {head}"
        );
    }
    assert!(read_end(&mut tcp).await.is_empty());
    assert_eq!(server.connections(), 1);
    assert_eq!(server.dropped_requests(), 0);
}

#[tokio::test]
async fn an_idle_connection_is_closed_without_notice_and_a_busy_one_is_not() {
    // A stream that outlasts the idle timeout is not cut: the timer runs only between
    // requests. After it, the connection is idle and closes, with no header saying so.
    let server = start(MockConfig {
        itl: Duration::from_millis(40),
        closing: Closing {
            idle_timeout_ms: Some(50),
            ..Closing::default()
        },
        ..MockConfig::default()
    })
    .await;
    let mut tcp = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    send_raw(
        &mut tcp,
        r#"{"prompt": "x", "max_tokens": 5, "stream": true}"#,
    )
    .await;
    let (head, body) = read_raw(&mut tcp).await;
    assert!(!head.contains("connection: close"), "{head}");
    let events = payloads(&dechunk(&body));
    assert_eq!(events.len(), 5 + 1, "{events:?}");
    assert!(read_end(&mut tcp).await.is_empty());
    assert_eq!(
        server.dropped_requests(),
        0,
        "nothing arrived after the close"
    );
}

/// The payload of a chunked body.
fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let nl = body
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a size line");
        let size = usize::from_str_radix(std::str::from_utf8(&body[..nl]).unwrap(), 16).unwrap();
        body = &body[nl + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&body[..size]);
        body = &body[size + 2..];
    }
}

#[tokio::test]
async fn a_silent_close_at_once_follows_every_stream_but_not_other_answers() {
    let server = closing(Closing {
        close_after_stream: Some(SilentClose::AtOnce),
        ..Closing::default()
    })
    .await;
    let mut tcp = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    // Answers that are not streams keep the connection.
    for _ in 0..2 {
        send_raw(&mut tcp, WHOLE_2).await;
        let (head, _) = read_raw(&mut tcp).await;
        assert!(head.starts_with("http/1.1 200"), "{head}");
    }
    send_raw(&mut tcp, STREAM_2).await;
    let (head, body) = read_raw(&mut tcp).await;
    // Whole, and promising nothing: then the FIN.
    assert!(!head.contains("connection: close"), "{head}");
    assert_eq!(payloads(&dechunk(&body)).last().unwrap(), "[DONE]");
    assert!(read_end(&mut tcp).await.is_empty());
    assert_eq!(server.connections(), 1);
    assert_eq!(server.dropped_requests(), 0);
}

#[tokio::test]
async fn a_silent_close_on_reuse_drops_the_next_request_unanswered() {
    let server = closing(Closing {
        close_after_stream: Some(SilentClose::OnReuse),
        ..Closing::default()
    })
    .await;
    let mut tcp = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    send_raw(&mut tcp, STREAM_2).await;
    let (head, body) = read_raw(&mut tcp).await;
    assert!(!head.contains("connection: close"), "{head}");
    assert_eq!(payloads(&dechunk(&body)).len(), 3);
    assert_eq!(server.dropped_requests(), 0);
    // The connection looked reusable; the next request on it is read and never answered.
    send_raw(&mut tcp, WHOLE_2).await;
    assert!(read_end(&mut tcp).await.is_empty(), "no byte of an answer");
    assert_eq!(server.dropped_requests(), 1);
    assert_eq!(server.connections(), 1);
    // Other connections are served as before.
    let (status, body) = post_json(&server, "/v1/completions", json!({"prompt": "x"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn a_server_that_closes_connections_still_shuts_down() {
    let server = closing(Closing {
        close_after_stream: Some(SilentClose::AtOnce),
        idle_timeout_ms: Some(60_000),
        ..Closing::default()
    })
    .await;
    // One connection closed by the server and still open at the client, one idle.
    let mut closed = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    send_raw(&mut closed, STREAM_2).await;
    read_raw(&mut closed).await;
    let mut idle = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    send_raw(&mut idle, WHOLE_2).await;
    read_raw(&mut idle).await;
    tokio::time::timeout(Duration::from_secs(5), server.shutdown())
        .await
        .expect("shutdown does not wait for the clients to close")
        .expect("clean shutdown");
    assert!(read_end(&mut idle).await.is_empty());
}

#[tokio::test]
async fn tokenize_and_detokenize_count_characters_when_asked() {
    let server = start(MockConfig {
        tokenize: true,
        ..MockConfig::default()
    })
    .await;
    let (status, v) = post_json(
        &server,
        "/tokenize",
        json!({"model": "mock", "prompt": "héllo", "add_special_tokens": false}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["count"], 5);
    let tokens = v["tokens"].clone();
    assert_eq!(tokens, json!([104, 233, 108, 108, 111]));
    let (status, v) = post_json(&server, "/detokenize", json!({"tokens": [104, 233]})).await;
    assert_eq!((status, v["prompt"].as_str()), (StatusCode::OK, Some("hé")));
    let (status, v) = post_json(&server, "/detokenize", json!({"tokens": [55296]})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");

    let plain = start(MockConfig::default()).await;
    let response = post(&plain, "/tokenize", r#"{"prompt": "x"}"#).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_prefix_cache_reset_forgets_the_requests_seen_and_is_counted() {
    let server = start(MockConfig {
        prefix_cache: true,
        ..MockConfig::default()
    })
    .await;
    let body = json!({"model": "mock", "prompt": "a b c", "max_tokens": 1});
    let cached = |v: &Value| v["usage"]["prompt_tokens_details"]["cached_tokens"].clone();
    post_json(&server, "/v1/completions", body.clone()).await;
    let (_, warm) = post_json(&server, "/v1/completions", body.clone()).await;
    assert_eq!(cached(&warm), json!(3), "{warm}");
    for path in ["/reset_prefix_cache", "/reset_mm_cache"] {
        assert_eq!(post(&server, path, "").await.status(), StatusCode::OK);
    }
    let (_, cold) = post_json(&server, "/v1/completions", body).await;
    assert_eq!(cached(&cold), json!(0), "{cold}");
    let resets = reqwest::get(format!("{}/mock/resets", server.base_url()))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&resets).unwrap(),
        json!({"reset_prefix_cache": 1, "reset_mm_cache": 1, "reset_encoder_cache": 0})
    );
}

#[tokio::test]
async fn ttft_grows_with_the_requests_already_running() {
    let server = start(MockConfig {
        ttft: Duration::from_millis(20),
        ttft_per_running: Duration::from_millis(50),
        ..MockConfig::default()
    })
    .await;
    let body = json!({"model": "mock", "prompt": "a", "max_tokens": 2, "stream": true});
    let sent = Instant::now();
    let first = post(&server, "/v1/completions", &body.to_string()).await;
    let second_sent = Instant::now();
    let second = post(&server, "/v1/completions", &body.to_string()).await;
    let (first, second) = tokio::join!(sse_events(first, sent), sse_events(second, second_sent));
    // The first found nothing running; the second found the first.
    assert!(first[0].0 < Duration::from_millis(65), "{first:?}");
    assert!(second[0].0 >= Duration::from_millis(70), "{second:?}");
    // Once both are done, a request finds nothing running again.
    let third = Instant::now();
    let events = sse_events(
        post(&server, "/v1/completions", &body.to_string()).await,
        third,
    )
    .await;
    assert!(events[0].0 < Duration::from_millis(65), "{events:?}");
}
