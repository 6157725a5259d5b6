//! Measured TTFT and ITL against a server whose delays are known (issue: "tests that would
//! catch a lie"). One test in its own binary so that no other test competes for the CPU.

mod common;

use std::time::Duration;

use common::*;

#[test]
fn measured_ttft_and_itl_match_the_servers_delays_at_concurrency_32() {
    let m = mock(bench::mock::MockConfig {
        ttft: Duration::from_millis(50),
        itl: Duration::from_millis(10),
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let out = bench(&[
        "serve",
        "--backend",
        "openai",
        "--model",
        "mock",
        "--tokenizer",
        &gpt2(),
        "--base-url",
        &m.url,
        "--dataset-name",
        "random",
        "--random-input-len",
        "32",
        "--random-output-len",
        "16",
        "--num-prompts",
        "96",
        "--max-concurrency",
        "32",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        dir.path().to_str().unwrap(),
        "--disable-tqdm",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let r = result_json(dir.path());
    for key in VLLM_RESULT_KEYS.iter().chain(DETAILED_KEYS) {
        assert!(r.get(key).is_some(), "result lacks vLLM key {key}: {r}");
    }
    assert_eq!(r["completed"], 96, "{}", text(&out));
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
    let ttft = r["mean_ttft_ms"].as_f64().unwrap();
    let itl = r["mean_itl_ms"].as_f64().unwrap();
    assert!(
        (ttft - 50.0).abs() < 2.0,
        "mean TTFT {ttft} ms, server's is 50 ms\n{}",
        text(&out)
    );
    assert!(
        (itl - 10.0).abs() < 2.0,
        "mean ITL {itl} ms, server's is 10 ms\n{}",
        text(&out)
    );
    // 15 gaps per request, pooled.
    let itls = r["itls"].as_array().unwrap();
    assert!(itls.iter().all(|l| l.as_array().unwrap().len() == 15));
}
