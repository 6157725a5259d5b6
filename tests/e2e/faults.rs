//! End-to-end failure handling: the real `bench` binary against the mock server injecting
//! one fault at a time. Every faulted request must fail with the right error kind (in the
//! detailed `errors` and the `failures_by_kind` summary), every other request must be
//! measured exactly, and the run must finish and write its result.
//!
//! The mock picks faulted requests by arrival order: with rate 0.25, the 4th, 8th, ...
//! request to arrive, so of 20 exactly 5 fail, whichever workload indices they are.

use std::time::Duration;

use bench::mock::{Closing, Faults, MockConfig, SilentClose};
use serde_json::Value;

use crate::common::*;

const PROMPTS: usize = 20;
const OUTPUT_LEN: u64 = 8;

/// Runs `bench` (streaming chat, 20 requests of 8 output tokens) against `url` with
/// `extra` flags; returns the run and its saved result.
fn run(url: &str, extra: &[&str]) -> (Run, Value) {
    run_with("openai-chat", url, extra)
}

/// [`run`] with another backend.
fn run_with(backend: &str, url: &str, extra: &[&str]) -> (Run, Value) {
    let out = Bench::against(url)
        .backend(backend)
        .random(16, OUTPUT_LEN as u32)
        .prompts(PROMPTS as u64)
        .save_detailed()
        .args(extra)
        .run();
    let result = out.json();
    (out, result)
}

fn faulty(faults: Faults) -> Mock {
    mock(MockConfig {
        faults,
        ..MockConfig::default()
    })
}

/// A mock that resets connections and answers with `Connection: close`, so that every
/// request goes out on a fresh connection. A reset on a *reused* connection is resent once
/// (the connection may just have gone stale; see
/// `a_server_that_closes_after_every_stream_loses_no_request`),
/// and the resend arrives as a new request that the plan may or may not fault: which
/// connections get reused depends on timing. On fresh connections the count is exact.
fn resetting(config: MockConfig) -> Mock {
    mock(MockConfig {
        closing: Closing {
            connection_close: true,
            ..Closing::default()
        },
        ..config
    })
}

/// Checks a run in which `failed` requests failed, all with errors of `kind` that contain
/// `needle`, and every other request was measured in full.
#[track_caller]
fn assert_failures(out: &Run, r: &Value, kind: &str, failed: usize, needle: &str) {
    let completed = PROMPTS - failed;
    assert_eq!(r["completed"], completed, "{out}");
    assert_eq!(r["failed"], failed);
    let errors = r["errors"].as_array().unwrap();
    assert_eq!(errors.len(), PROMPTS);
    let failures: Vec<&str> = errors
        .iter()
        .map(|e| e.as_str().unwrap())
        .filter(|e| !e.is_empty())
        .collect();
    assert_eq!(failures.len(), failed, "{failures:?}");
    for error in &failures {
        assert!(
            error.starts_with(&format!("{kind}: ")) && error.contains(needle),
            "want `{kind}: ...{needle}...`, got {error:?}"
        );
    }
    assert_measured(r, completed);
    let by_kind = r["failures_by_kind"].as_object().unwrap();
    if failed == 0 {
        assert!(by_kind.is_empty(), "{by_kind:?}");
    } else {
        assert_eq!(by_kind.len(), 1, "{by_kind:?}");
        assert_eq!(by_kind[kind], failed);
    }
    let summary = out
        .stdout
        .lines()
        .find(|l| l.starts_with("Failures by kind:"));
    if failed == 0 {
        assert_eq!(summary, None, "{out}");
    } else {
        assert_eq!(
            summary,
            Some(format!("Failures by kind: {kind}: {failed}").as_str()),
            "{out}"
        );
    }
}

/// Checks a run in which nothing failed and every request was measured in full.
#[track_caller]
fn assert_no_failures(out: &Run, r: &Value) {
    assert_failures(out, r, "none", 0, "");
}

/// The successful requests were measured normally: exact token counts by the server and
/// the tokenizer, a TTFT and one ITL gap per further token; failed ones count 0 tokens.
#[track_caller]
fn assert_measured(r: &Value, completed: usize) {
    let errors = r["errors"].as_array().unwrap();
    let ok = |i: usize| errors[i] == "";
    for i in 0..PROMPTS {
        let (output_len, itls) = (&r["output_lens"][i], r["itls"][i].as_array().unwrap());
        if ok(i) {
            assert_eq!(output_len, OUTPUT_LEN, "request {i}");
            assert_eq!(itls.len() as u64, OUTPUT_LEN - 1, "request {i}");
            assert!(r["ttfts"][i].as_f64().unwrap() > 0.0, "request {i}");
        } else {
            assert_eq!(output_len, 0, "request {i}");
        }
    }
    let tokens = completed as u64 * OUTPUT_LEN;
    assert_eq!(r["total_output_tokens"], tokens);
    assert_eq!(r["output_tokens_server_usage"], tokens);
    assert_eq!(r["output_tokens_tokenizer_count"], tokens);
    assert_eq!(r["requests_sent"], PROMPTS);
}

#[test]
fn http_errors_fail_with_their_status() {
    let m = faulty(Faults {
        http_error_rate: 0.25,
        http_error_status: 503,
        ..Faults::default()
    });
    let (out, r) = run(&m.url, &[]);
    assert!(out.success(), "{out}");
    assert_failures(&out, &r, "http-503", 5, "Service Unavailable");
}

#[test]
fn a_reset_before_the_response_head_is_a_reset() {
    let m = resetting(MockConfig {
        faults: Faults {
            reset_rate: 0.25,
            ..Faults::default()
        },
        ..MockConfig::default()
    });
    let (out, r) = run(&m.url, &[]);
    assert_eq!(
        r["connection_retries"], 0,
        "fresh connections are never resent"
    );
    assert!(out.success(), "{out}");
    assert_failures(
        &out,
        &r,
        "reset",
        5,
        "the connection was closed before a response head arrived",
    );
}

#[test]
fn a_stream_cut_mid_way_is_a_stream_cut() {
    let m = faulty(Faults {
        cut_rate: 0.25,
        ..Faults::default()
    });
    let (out, r) = run(&m.url, &[]);
    assert!(out.success(), "{out}");
    assert_failures(
        &out,
        &r,
        "stream-cut",
        5,
        "the response body broke off after",
    );
    // What arrived before the cut is kept in the detailed result: half the tokens.
    let errors = r["errors"].as_array().unwrap();
    for (i, text) in r["generated_texts"].as_array().unwrap().iter().enumerate() {
        let text = text.as_str().unwrap();
        let words = text.split_whitespace().count() as u64;
        let want = if errors[i] == "" {
            OUTPUT_LEN
        } else {
            OUTPUT_LEN / 2
        };
        assert_eq!(words, want, "request {i}: {text:?}");
    }
}

#[test]
fn a_malformed_chunk_is_an_invalid_chunk() {
    let m = faulty(Faults {
        malformed_rate: 0.25,
        ..Faults::default()
    });
    let (out, r) = run(&m.url, &[]);
    assert!(out.success(), "{out}");
    assert_failures(
        &out,
        &r,
        "invalid-chunk",
        5,
        "invalid JSON in a response frame",
    );
}

#[test]
fn a_stall_past_the_request_timeout_is_a_timeout() {
    within_bounds("a run with stalled responses", || {
        let m = faulty(Faults {
            stall_rate: 0.25,
            ..Faults::default()
        });
        let (out, r) = run(&m.url, &["--request-timeout", "1.5"]);
        assert!(out.success(), "{out}");
        assert_failures(
            &out,
            &r,
            "timeout",
            5,
            "no complete response within the request timeout of 1.5 s",
        );
        assert!(r["duration"].as_f64().unwrap() >= 1.5);
        // The run waited for the timeout, not for the (hour-long) stall.
        if out.took >= Duration::from_secs(10) {
            return Err(format!("the run took {:?}", out.took));
        }
        Ok(())
    });
}

#[test]
fn an_in_band_error_event_is_a_server_error() {
    let m = faulty(Faults {
        error_event_rate: 0.25,
        ..Faults::default()
    });
    let (out, r) = run(&m.url, &[]);
    assert!(out.success(), "{out}");
    assert_failures(
        &out,
        &r,
        "server-error",
        5,
        "the server reported an error: mock server: request",
    );
}

#[test]
fn an_answer_without_tokens_is_no_output() {
    let m = faulty(Faults {
        empty_rate: 0.25,
        ..Faults::default()
    });
    let (out, r) = run(&m.url, &[]);
    assert!(out.success(), "{out}");
    assert_failures(
        &out,
        &r,
        "no-output",
        5,
        "Never received a valid chunk to calculate TTFT.",
    );
}

#[test]
fn a_stream_without_done_is_measured_normally() {
    let m = faulty(Faults {
        no_done_rate: 0.5,
        ..Faults::default()
    });
    let (out, r) = run(&m.url, &[]);
    assert!(out.success(), "{out}");
    assert_no_failures(&out, &r);
}

#[test]
fn a_dribbled_response_is_measured_normally() {
    let m = faulty(Faults {
        dribble_rate: 0.5,
        ..Faults::default()
    });
    let (out, r) = run(&m.url, &[]);
    assert!(out.success(), "{out}");
    assert_no_failures(&out, &r);
    // The text was reassembled from single bytes: every answer tokenizes to 8 tokens (the
    // tokenizer count above) and reads as the mock's words.
    for text in r["generated_texts"].as_array().unwrap() {
        let text = text.as_str().unwrap();
        assert!(text.starts_with(" the of and to"), "{text:?}");
    }
}

#[test]
fn a_closed_port_fails_every_request_with_connect_and_still_saves() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let (out, r) = run(&url, &[]);
    assert!(!out.success(), "{out}");
    assert!(out.stderr.contains("every request failed"), "{out}");
    assert_failures(&out, &r, "connect", PROMPTS, "Connection refused");
}

#[test]
fn several_kinds_are_counted_apart_most_frequent_first() {
    let m = resetting(MockConfig {
        fail_rate: 0.25,
        faults: Faults {
            reset_rate: 0.25,
            ..Faults::default()
        },
        ..MockConfig::default()
    });
    let (out, r) = run(&m.url, &[]);
    assert!(out.success(), "{out}");
    // Both are due at the 4th, 8th, ... arrival; --fail-rate goes first and the reset
    // follows at the next arrival, so the 20th arrival leaves the fifth reset undone.
    assert_eq!(r["failed"], 9, "{out}");
    assert_measured(&r, PROMPTS - 9);
    assert_eq!(
        r["failures_by_kind"],
        serde_json::json!({"http-500": 5, "reset": 4})
    );
    let stdout = &out.stdout;
    assert!(
        stdout.contains("Failures by kind: http-500: 5, reset: 4\n"),
        "{out}"
    );
    // vLLM's block is unchanged and comes first; the summary follows it.
    let block_end = stdout.find("==================================================\n");
    let summary = stdout.find("Failures by kind:");
    assert!(block_end.unwrap() < summary.unwrap(), "{out}");
}

#[test]
fn non_streaming_faults_fail_the_same_way() {
    let m = faulty(Faults {
        cut_rate: 0.25,
        malformed_rate: 0.25,
        dribble_rate: 0.25,
        ..Faults::default()
    });
    let (out, r) = run_with("openai", &m.url, &["--backend-option", "stream=false"]);
    assert!(out.success(), "{out}");
    let by_kind = r["failures_by_kind"].as_object().unwrap();
    // Cut and malformed are both due at every 4th arrival, dribble too; each arrival
    // serves one, the others follow: 20 arrivals serve cut 5, malformed 4, dribble 4.
    assert_eq!(by_kind["stream-cut"], 5, "{by_kind:?}\n{out}");
    assert_eq!(by_kind["invalid-chunk"], 4, "{by_kind:?}");
    assert_eq!(by_kind.len(), 2, "{by_kind:?}");
    assert_eq!(r["completed"], 11);
    let tokens = 11 * OUTPUT_LEN;
    assert_eq!(r["total_output_tokens"], tokens);
    assert_eq!(r["output_tokens_tokenizer_count"], tokens);
}

/// A server that closes the connection after every streamed response without saying so,
/// as llama.cpp's llama-server does, in the worst case for the client: the connection
/// looks open until the next request arrives on it, and that request is dropped
/// unanswered. With either client, one request at a time or four, every request is
/// measured in full, and exactly the requests the server dropped were sent again
/// (`connection_retries`).
#[test]
fn a_server_that_closes_after_every_stream_loses_no_request() {
    for client in ["h1", "reqwest"] {
        for concurrency in ["1", "4"] {
            let m = mock(MockConfig {
                closing: Closing {
                    close_after_stream: Some(SilentClose::OnReuse),
                    ..Closing::default()
                },
                ..MockConfig::default()
            });
            let (out, r) = run(
                &m.url,
                &["--http-client", client, "--max-concurrency", concurrency],
            );
            assert!(out.success(), "{out}");
            assert_eq!(r["http_client"], client);
            assert_no_failures(&out, &r);
            // The server counts a dropped request before it closes the connection, so
            // before the client can see the close.
            let dropped = m.server.as_ref().unwrap().dropped_requests();
            assert_eq!(r["connection_retries"], dropped, "{client}, {concurrency}");
            if (client, concurrency) == ("h1", "1") {
                // The preconnected connection serves the first request; each later one
                // reuses the connection of the one before, is dropped and sent again.
                assert_eq!(dropped, PROMPTS as u64 - 1);
            }
        }
    }
}
