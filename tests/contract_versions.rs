//! Plugins built for an older contract run unchanged: `tests/fixtures/api-0.2.0/` holds the
//! first-party `random` dataset and `openai-chat` backend as built for
//! `bench:plugin@0.2.0`. Each run through the host's 0.2.0 adapter must give what the
//! current plugins give: the same requests, the same measurements, the same failure kinds.

mod common;

use bench::mock::{Faults, MockConfig};
use common::*;
use serde_json::Value;

fn old_plugin(name: &str) -> String {
    repo()
        .join("tests/fixtures/api-0.2.0")
        .join(format!("{name}.wasm"))
        .display()
        .to_string()
}

#[test]
fn a_plugin_built_for_0_2_0_loads_and_names_its_version() {
    let plugin = old_plugin("random");
    let out = bench(&["plugin", "inspect", &plugin]);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("random 0.1.0 (dataset plugin, API bench:plugin@0.2.0)"),
        "{stdout}"
    );
    // Its options are listed; 0.2.0 could not give them flags of their own.
    assert!(stdout.contains("input-len"), "{stdout}");
}

/// `bench dataset sample` with `dataset`, as JSON lines.
fn sample(dataset: &str) -> String {
    let tokenizer = gpt2();
    let out = bench(&[
        "dataset",
        "sample",
        "--dataset-name",
        dataset,
        "--tokenizer",
        &tokenizer,
        "--num-prompts",
        "40",
        "--seed",
        "7",
        "--dataset-option",
        "input-len=48",
        "--dataset-option",
        "output-len=9",
        "--dataset-option",
        "range-ratio=0.5",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_0_2_0_dataset_samples_the_same_requests_as_the_current_one() {
    let old = sample(&old_plugin("random"));
    let current = sample("random");
    assert_eq!(old.lines().count(), 40);
    assert_eq!(old, current);
}

/// A serve run of 20 requests against a mock that sends a malformed frame in every 4th
/// response, with `backend` and `dataset`; returns the saved result.
fn serve_with(backend: &str, dataset: &str) -> Value {
    let m = mock(MockConfig {
        faults: Faults {
            malformed_rate: 0.25,
            ..Faults::default()
        },
        ..MockConfig::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let tokenizer = gpt2();
    let out = bench(&[
        "serve",
        "--backend",
        backend,
        "--dataset-name",
        dataset,
        "--model",
        "mock",
        "--tokenizer",
        &tokenizer,
        "--base-url",
        &m.url,
        "--dataset-option",
        "input-len=16",
        "--dataset-option",
        "output-len=8",
        "--ignore-eos",
        // One at a time: the mock faults every 4th arrival, the same requests both runs.
        "--max-concurrency",
        "1",
        "--num-prompts",
        "20",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        dir.path().to_str().unwrap(),
        "--disable-tqdm",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    result_json(dir.path())
}

#[test]
fn a_0_2_0_backend_measures_and_fails_requests_as_the_current_one() {
    let old = serve_with(&old_plugin("openai-chat"), &old_plugin("random"));
    let current = serve_with("openai-chat", "random");
    for key in [
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
        "failures_by_kind",
        "errors",
        "input_lens",
        "output_lens",
    ] {
        assert_eq!(old[key], current[key], "{key}");
    }
    assert_eq!(old["completed"], 15);
    assert_eq!(old["total_output_tokens"], 15 * 8);
    // The 0.2.0 SDK's malformed-frame events keep their kind through the adapter.
    assert_eq!(old["failures_by_kind"]["invalid-chunk"], 5, "{old:#}");
    // Every request was timed (the failed ones up to their bad frame).
    let timed = |r: &Value| {
        r["ttfts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t.as_f64().unwrap() > 0.0)
            .count()
    };
    assert_eq!(timed(&old), 20);
}
