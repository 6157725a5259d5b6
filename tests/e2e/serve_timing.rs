//! Measured TTFT and ITL against a server whose delays are known (issue: "tests that would
//! catch a lie"). The test holds the gate alone (`common::gate`), so that no other test in
//! this binary competes for the CPU.

use std::time::Duration;

use crate::common::*;

#[test]
fn measured_ttft_and_itl_match_the_servers_delays_at_concurrency_32() {
    // The truth is what the server did: it records when each chunk left, measured from
    // the request's arrival. Every exact check runs on every attempt; the timings (the
    // server's own timer against its configured delays, and bench's against the server's
    // record) are tried again under the measured load rule of `within_bounds`: missed on a
    // quiet machine, alone in this binary, they fail the test.
    let _alone = gate::exclusive();
    within_bounds("TTFT and ITL against the server's record", run_and_check);
}

/// One run with every check: exact ones panic; `Err(why)` when the server's own timing was
/// off its configured delays, or bench's timing missed its bounds.
fn run_and_check() -> Result<(), String> {
    let m = mock(bench::mock::MockConfig {
        ttft: Duration::from_millis(50),
        itl: Duration::from_millis(10),
        ..Default::default()
    });
    // The explicit subcommand and dataset name, as vLLM's users type them.
    let out = Bench::new()
        .arg("serve")
        .args(["--dataset-name", "random"])
        .with_server(&m.url)
        .backend("openai")
        .random(32, 16)
        .prompts(96)
        .args(["--max-concurrency", "32"])
        .save_detailed()
        .run()
        .assert_success();
    let r = out.json();
    for key in VLLM_RESULT_KEYS.iter().chain(DETAILED_KEYS) {
        assert!(r.get(key).is_some(), "result lacks vLLM key {key}: {r}");
    }
    assert_eq!(r["completed"], 96, "{out}");
    assert_eq!(r["failed"], 0);
    // Token counts are exact: the server's usage and the tokenizer agree on 16 per request.
    assert_eq!(r["total_output_tokens"], 96 * 16);
    assert!(r["output_lens"].as_array().unwrap().iter().all(|v| v == 16));
    assert_eq!(
        r["total_input_tokens"],
        r["input_lens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .sum::<u64>()
    );
    // bench must match what the server actually did.
    let truth = m.server.as_ref().unwrap().timing();
    assert_eq!(truth.first_tokens, 96);
    let ttft = r["mean_ttft_ms"].as_f64().unwrap();
    let itl = r["mean_itl_ms"].as_f64().unwrap();
    eprintln!("bench: TTFT {ttft:.3} ms, ITL {itl:.3} ms; server: {truth:?}");
    // The timing bounds, judged together after every exact check.
    let mut missed = Vec::new();
    if (truth.mean_ttft_ms - 50.0).abs() >= 5.0 || (truth.mean_itl_ms - 10.0).abs() >= 5.0 {
        missed.push(format!(
            "the server's own timer was off its delays: {truth:?}"
        ));
    }
    if (ttft - truth.mean_ttft_ms).abs() >= 2.0 {
        missed.push(format!(
            "mean TTFT {ttft} ms, the server's was {} ms",
            truth.mean_ttft_ms
        ));
    }
    if (itl - truth.mean_itl_ms).abs() >= 2.0 {
        missed.push(format!(
            "mean ITL {itl} ms, the server's was {} ms",
            truth.mean_itl_ms
        ));
    }
    // 15 gaps per request, pooled.
    let itls = r["itls"].as_array().unwrap();
    assert!(itls.iter().all(|l| l.as_array().unwrap().len() == 15));
    // The client's own diagnostics are in every result: which HTTP client ran, how late
    // requests went out (sends at time 0 with a cap of 32: the lag excludes the wait for a
    // slot), and what the run cost the client's CPU.
    assert_eq!(r["http_client"], "h1");
    let lag = r["schedule_lag_ms_p99"].as_f64().unwrap();
    assert!(lag >= 0.0, "schedule lag p99 {lag} ms");
    if lag >= 50.0 {
        missed.push(format!("schedule lag p99 {lag} ms"));
    }
    let cpu = r["client_cpu_seconds"].as_f64().unwrap();
    assert!(
        cpu > 0.0 && cpu < r["duration"].as_f64().unwrap() * 2.0,
        "{cpu}"
    );
    let share = r["decode_cpu_share"].as_f64().unwrap();
    assert!(share > 0.0 && share < 1.0, "{share}");
    if missed.is_empty() {
        Ok(())
    } else {
        Err(missed.join("; "))
    }
}
