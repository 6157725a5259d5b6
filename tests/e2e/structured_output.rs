//! Structured output: the `structured-output` dataset's constraints, sent by the chat and
//! completions backends in either form, each answer checked by bench; the mock, which
//! answers a known share wrongly (`--invalid-structured-rate`), records which answers it
//! made valid (`/mock/structured`), and bench's verdicts must equal that record request
//! by request.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::common::*;

/// A mock that answers `rate` of the constrained requests wrongly.
fn mock_with_invalid(rate: f64) -> Mock {
    mock(bench::mock::MockConfig {
        invalid_structured_rate: rate,
        ..Default::default()
    })
}

/// A run of the `structured-output` dataset with `args`, without the ready check (its
/// request would take a place in the mock's plan of wrong answers) and with per-request
/// lists.
fn run(m: &Mock, prompts: u64, args: &[&str]) -> Value {
    Bench::against(&m.url)
        .prompts(prompts)
        .args(["--dataset-name", "structured-output"])
        .args([
            "--ready-check-timeout-sec",
            "0",
            "--request-id-prefix",
            "so-",
        ])
        .args(args)
        .save_detailed()
        .run()
        .assert_success()
        .json()
}

/// The mock's verdict on each answer it made, by request id.
fn mock_verdicts(m: &Mock) -> BTreeMap<String, (Option<String>, Option<bool>)> {
    m.server
        .as_ref()
        .unwrap()
        .structured()
        .into_iter()
        .map(|a| {
            let kind = a.constraint.map(|k| {
                serde_json::to_value(k)
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .to_owned()
            });
            (a.id, (kind, a.structured))
        })
        .collect()
}

/// bench's per-request verdicts (`valid_output`), by request id.
fn bench_verdicts(r: &Value) -> BTreeMap<String, Option<bool>> {
    r["valid_output"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, v)| (format!("so-{i}"), v.as_bool()))
        .collect()
}

fn close(a: &Value, b: f64) {
    let a = a.as_f64().unwrap_or_else(|| panic!("{a} is not a number"));
    assert!((a - b).abs() < 1e-9, "{a} != {b}");
}

#[test]
fn json_schema_answers_are_judged_as_the_mock_made_them_in_both_forms() {
    for (backend, form) in [
        ("openai-chat", "response-format"),
        ("openai", "structured-outputs"),
    ] {
        let m = mock_with_invalid(0.25);
        let r = run(
            &m,
            8,
            &[
                "--backend",
                backend,
                "--backend-option",
                &format!("structured-output={form}"),
                "--structured-output-kind",
                "json",
            ],
        );
        let mock = mock_verdicts(&m);
        assert_eq!(mock.len(), 8, "{backend}: {mock:?}");
        for (id, valid) in bench_verdicts(&r) {
            let (kind, made_valid) = &mock[&id];
            assert_eq!(kind.as_deref(), Some("json_schema"), "{backend} {id}");
            assert_eq!(valid, *made_valid, "{backend} {id}");
        }
        // 0.25 of 8, exactly: 6 valid, 2 not.
        assert_eq!(r["structured_output_requests"], 8, "{backend}");
        assert_eq!(r["valid_outputs"], 6, "{backend}");
        assert_eq!(r["invalid_outputs"], 2, "{backend}");
        assert_eq!(r["unchecked_outputs"], 0, "{backend}");
        close(&r["valid_output_rate"], 0.75);
        let (lo, hi) = wilson(6.0, 8.0);
        close(&r["valid_output_rate_ci95"][0], lo);
        close(&r["valid_output_rate_ci95"][1], hi);
        close(
            &r["valid_output_throughput"],
            6.0 / r["duration"].as_f64().unwrap(),
        );
        // Every invalid answer says why: not JSON, or what the schema refused.
        let reasons: Vec<&str> = r["invalid_output_reasons"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(reasons.len(), 2, "{reasons:?}");
        assert!(
            reasons.iter().any(|r| r.starts_with("not JSON"))
                && reasons.iter().any(|r| r.contains("the schema refuses it")),
            "{reasons:?}"
        );
    }
}

#[test]
fn only_the_ratio_s_requests_carry_a_constraint_and_only_they_are_judged() {
    let m = mock_with_invalid(0.0);
    let r = run(
        &m,
        10,
        &[
            "--backend",
            "openai-chat",
            "--structured-output-kind",
            "json-unique",
            "--structured-output-ratio",
            "0.5",
        ],
    );
    let mock = mock_verdicts(&m);
    let constrained: Vec<&String> = mock
        .iter()
        .filter(|(_, (kind, _))| kind.is_some())
        .map(|(id, _)| id)
        .collect();
    assert_eq!(constrained.len(), 5, "int(10 * 0.5): {mock:?}");
    for (id, valid) in bench_verdicts(&r) {
        assert_eq!(valid, mock[&id].1, "{id}");
    }
    assert_eq!(r["structured_output_requests"], 5);
    assert_eq!(r["valid_outputs"], 5);
    close(&r["valid_output_rate"], 1.0);
}

#[test]
fn choices_are_judged_exactly_and_grammars_are_counted_unchecked() {
    let m = mock_with_invalid(0.5);
    let r = run(
        &m,
        4,
        &[
            "--backend",
            "openai",
            "--backend-option",
            "structured-output=structured-outputs",
            "--structured-output-kind",
            "choice",
        ],
    );
    let mock = mock_verdicts(&m);
    for (id, valid) in bench_verdicts(&r) {
        assert_eq!(mock[&id].0.as_deref(), Some("choice"));
        assert_eq!(valid, mock[&id].1, "{id}");
    }
    assert_eq!(
        (r["valid_outputs"].clone(), r["invalid_outputs"].clone()),
        (2.into(), 2.into())
    );

    let m = mock_with_invalid(0.0);
    let out = Bench::against(&m.url)
        .prompts(3)
        .args(["--dataset-name", "structured-output"])
        .args([
            "--backend",
            "openai-chat",
            "--structured-output-kind",
            "grammar",
        ])
        .args(["--backend-option", "structured-output=structured-outputs"])
        .save_detailed()
        .run()
        .assert_success();
    let r = out.json();
    assert_eq!(r["structured_output_requests"], 3);
    assert_eq!(r["unchecked_outputs"], 3);
    assert_eq!(
        (r["valid_outputs"].clone(), r["invalid_outputs"].clone()),
        (0.into(), 0.into())
    );
    assert_eq!(r["valid_output_rate"], Value::Null, "nothing was checked");
    assert_eq!(r["valid_output"], serde_json::json!([null, null, null]));
    assert!(
        out.stdout.contains("Unchecked outputs (grammars):"),
        "{out}"
    );
}

#[test]
fn a_constraint_a_backend_cannot_send_stops_the_run_before_anything_is_sent() {
    for (backend, kind, says) in [
        (
            "openai-chat",
            "regex",
            "structured-output=structured-outputs",
        ),
        ("openai-responses", "json", "cannot send structured output"),
        ("tgi", "choice", "cannot send structured output"),
    ] {
        let m = mock_with_invalid(0.0);
        let bench = Bench::against(&m.url)
            .prompts(2)
            .args(["--dataset-name", "structured-output"])
            .args(["--backend", backend, "--structured-output-kind", kind]);
        let out = bench.run().assert_failure();
        assert!(out.stderr.contains(says), "{backend}: {out}");
        assert!(mock_verdicts(&m).is_empty(), "{backend}: sent anyway");
        assert!(
            m.server.as_ref().unwrap().requests().is_empty(),
            "{backend}: sent anyway"
        );
    }
}
