//! `--request-cancellation-rate` and `--request-cancellation-delay` (AIPerf's flags): the
//! client cancels a seeded choice of requests on purpose, a set time after each was sent.
//! Checked against the mock's own record of the clients that went away (`GET
//! /mock/aborted`), request by request.

use std::time::Duration;

use bench::client::cancellation::Cancellation;
use bench::mock::MockConfig;
use serde_json::Value;

use crate::common::*;

const PROMPTS: usize = 40;
/// 20 ms to the first token, then 2 ms a token: a whole answer takes 418 ms, so a
/// request cancelled 100 ms after it was sent is always cut short.
const OUTPUT_LEN: u32 = 200;

fn slow_mock() -> Mock {
    mock(MockConfig {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(2),
        ..MockConfig::default()
    })
}

/// All 40 requests at once, 30% of them cancelled 0.1 s after they were sent, with
/// `extra` flags.
fn run_with(m: &Mock, seed: u64, extra: &[&str]) -> (Run, Value) {
    let out = Bench::against(&m.url)
        .backend("openai-chat")
        .random(16, OUTPUT_LEN)
        .prompts(PROMPTS as u64)
        .save_detailed()
        .args(["--request-id-prefix", "c-", "--seed", &seed.to_string()])
        .args(["--request-cancellation-rate", "30"])
        .args(["--request-cancellation-delay", "0.1"])
        .args(extra)
        .run()
        .assert_success();
    let result = out.json();
    (out, result)
}

fn run(m: &Mock, seed: u64) -> (Run, Value) {
    run_with(m, seed, &[])
}

/// What bench says on standard error when `args` make it refuse to run.
fn refused(m: &Mock, args: &[&str]) -> String {
    let out = Bench::against(&m.url)
        .random(16, 8)
        .prompts(2)
        .args(args)
        .run()
        .assert_failure();
    out.stderr
}

/// The workload indices the seeded choice cancels, as the client computes them.
fn chosen(seed: u64) -> Vec<u64> {
    let c = Cancellation {
        fraction: 0.3,
        delay: Duration::from_millis(100),
        seed,
    };
    (0..PROMPTS as u64)
        .filter(|&i| c.delay_for(i as usize).is_some())
        .collect()
}

/// The mock's record of the requests whose client went away, as workload indices, once
/// every close has reached it.
fn aborted_indices(m: &Mock, want: usize) -> Vec<u64> {
    let mut indices: Vec<u64> = m
        .aborted_ids(want)
        .iter()
        .map(|id| id.strip_prefix("c-").unwrap().parse().unwrap())
        .collect();
    indices.sort_unstable();
    indices
}

#[test]
fn the_chosen_requests_are_cancelled_and_the_server_sees_each_one_go() {
    let m = slow_mock();
    let (out, r) = run(&m, 7);
    let want = chosen(7);
    assert!(
        (5..=20).contains(&want.len()),
        "30% of 40: {} chosen",
        want.len()
    );
    // The result counts them on their own, names them, and echoes the flags.
    assert_eq!(r["cancelled"], want.len(), "{out}");
    assert_eq!(r["completed"], PROMPTS - want.len());
    assert_eq!(r["failed"], 0);
    assert_eq!(r["request_cancellation_rate"], 30.0);
    assert_eq!(r["request_cancellation_delay"], 0.1);
    let named: Vec<u64> = r["cancelled_requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(named, want);
    // The server saw exactly those clients go away.
    assert_eq!(aborted_indices(&m, want.len()), want);
    // The others ran to their end and are measured whole; the cancelled ones are in no
    // figure: every output length left is a whole answer's.
    assert_eq!(
        r["total_output_tokens"],
        (PROMPTS - want.len()) as u64 * u64::from(OUTPUT_LEN)
    );
    let errors = r["errors"].as_array().unwrap();
    assert!(errors.iter().all(|e| e == ""), "{errors:?}");
    assert_eq!(r["failures_by_kind"], serde_json::json!({}));
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("Cancelled requests:"))
        .unwrap_or_else(|| panic!("no cancelled count in the console: {out}"));
    assert_eq!(
        line.split_whitespace().last(),
        Some(&*want.len().to_string())
    );
}

#[test]
fn the_same_seed_cancels_the_same_requests() {
    let first = run(&slow_mock(), 3).1;
    let again = run(&slow_mock(), 3).1;
    let other = run(&slow_mock(), 4).1;
    assert_eq!(first["cancelled_requests"], again["cancelled_requests"]);
    let want: Vec<Value> = chosen(3).into_iter().map(Value::from).collect();
    assert_eq!(first["cancelled_requests"], Value::Array(want));
    let other_want: Vec<Value> = chosen(4).into_iter().map(Value::from).collect();
    assert_eq!(other["cancelled_requests"], Value::Array(other_want));
    assert_ne!(chosen(3), chosen(4));
}

#[test]
fn responses_that_end_before_the_delay_are_not_cancelled() {
    // 8 tokens: 34 ms, well inside a 2 s delay.
    let m = slow_mock();
    let out = Bench::against(&m.url)
        .backend("openai-chat")
        .random(16, 8)
        .prompts(20)
        .save_result()
        .args(["--request-cancellation-rate", "100"])
        .args(["--request-cancellation-delay", "2"])
        .run()
        .assert_success();
    let r = out.json();
    assert_eq!((&r["completed"], &r["cancelled"]), (&20.into(), &0.into()));
    assert_eq!(m.server.as_ref().unwrap().timing().aborted, 0);
}

#[test]
fn bad_cancellation_flags_are_refused_by_name() {
    let m = slow_mock();
    let rate = refused(&m, &["--request-cancellation-rate", "150"]);
    assert!(
        rate.contains("--request-cancellation-rate is a percentage from 0 to 100, got 150"),
        "{rate}"
    );
    let delay = refused(
        &m,
        &[
            "--request-cancellation-rate",
            "10",
            "--request-cancellation-delay",
            "nan",
        ],
    );
    assert!(
        delay.contains("--request-cancellation-delay must be a number of seconds >= 0, got NaN"),
        "{delay}"
    );
    // clap: the delay requires the rate.
    let alone = refused(&m, &["--request-cancellation-delay", "1"]);
    assert!(
        alone.contains("--request-cancellation-rate <PERCENT>"),
        "{alone}"
    );
}

/// A run split over client processes (`--workers 2`, each a shard with its own indices)
/// cancels the requests one process would: the choice is by place in the whole workload.
#[test]
fn shards_cancel_what_one_process_would() {
    let m = slow_mock();
    let (out, r) = run_with(&m, 7, &["--workers", "2"]);
    let want: Vec<Value> = chosen(7).into_iter().map(Value::from).collect();
    assert_eq!(r["cancelled_requests"], Value::Array(want.clone()), "{out}");
    assert_eq!(aborted_indices(&m, want.len()), chosen(7));
}
