//! Accuracy under load: the `gsm8k` and `mcq` datasets attach each question's right answer
//! to its request, and their graders judge every completed answer after the run. The mock,
//! given the same questions (`--answer-key`), answers a known share wrongly
//! (`--wrong-answer-rate`) and records which answers it made right (`/mock/answers`):
//! bench's verdicts must equal that record request by request, and its counts, interval
//! and rates must follow from them.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::common::*;

fn gsm8k() -> String {
    data("datasets/gsm8k/test.jsonl").display().to_string()
}

fn mcq() -> String {
    data("datasets/mcq/arithmetic.jsonl").display().to_string()
}

/// A mock that knows the questions of `key` and answers `wrong` of them wrongly, failing
/// `fail` of all requests.
fn mock_answering(key: &str, wrong: f64, fail: f64) -> Mock {
    mock(bench::mock::MockConfig {
        answer_key: Some(key.into()),
        wrong_answer_rate: wrong,
        fail_rate: fail,
        ..Default::default()
    })
}

/// A graded run of `dataset` over `path` with `args`, without the ready check (its request
/// would take a place in the mock's plan of wrong answers), with per-request lists.
fn run(m: &Mock, dataset: &str, path: &str, prompts: u64, args: &[&str]) -> Value {
    run_shown(m, dataset, path, prompts, args).json()
}

/// [`run`], keeping what the run printed.
fn run_shown(m: &Mock, dataset: &str, path: &str, prompts: u64, args: &[&str]) -> Run {
    Bench::against(&m.url)
        .prompts(prompts)
        .args(["--dataset-name", dataset, "--dataset-path", path])
        .args([
            "--ready-check-timeout-sec",
            "0",
            "--request-id-prefix",
            "q-",
        ])
        .args(args)
        .save_detailed()
        .run()
        .assert_success()
}

/// The mock's verdict on each answer it made, by request id.
fn mock_verdicts(m: &Mock) -> BTreeMap<String, bool> {
    m.server
        .as_ref()
        .unwrap()
        .answers()
        .into_iter()
        .map(|a| (a.id.expect("every request has an id"), a.correct))
        .collect()
}

/// bench's per-request verdicts (`correct`) of the graded requests, by request id.
fn bench_verdicts(r: &Value) -> BTreeMap<String, bool> {
    r["correct"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter_map(|(i, v)| Some((format!("q-{i}"), v.as_bool()?)))
        .collect()
}

/// The counts, the rate, its interval and the correct answers per second follow from the
/// per-request verdicts.
#[track_caller]
fn assert_figures(r: &Value, graded: u64, correct: u64) {
    assert_eq!(r["graded_requests"], graded, "{r:#}");
    assert_eq!(r["correct_requests"], correct, "{r:#}");
    let accuracy = correct as f64 / graded as f64;
    assert_eq!(r["accuracy"].as_f64().unwrap(), accuracy);
    assert_eq!(r["mean_grade_score"].as_f64().unwrap(), accuracy);
    let (lo, hi) = wilson(correct as f64, graded as f64);
    let ci = r["accuracy_ci95"].as_array().unwrap();
    assert!((ci[0].as_f64().unwrap() - lo).abs() < 1e-12, "{ci:?}");
    assert!((ci[1].as_f64().unwrap() - hi).abs() < 1e-12, "{ci:?}");
    let duration = r["duration"].as_f64().unwrap();
    let per_second = r["correct_request_throughput"].as_f64().unwrap();
    assert!(
        (per_second - correct as f64 / duration).abs() < 1e-9,
        "{per_second}"
    );
}

/// GSM8K over the completions API: a quarter of the answers wrong, in the mock's fixed
/// pattern. Every verdict equals the mock's; the references are the problems' final
/// numbers; the wrong answers read as the number plus one.
#[test]
fn gsm8k_verdicts_equal_the_mocks_answers() {
    let m = mock_answering(&gsm8k(), 0.25, 0.0);
    let shown = run_shown(&m, "gsm8k", &gsm8k(), 40, &["--backend", "openai"]);
    let r = shown.json();
    let mock = mock_verdicts(&m);
    assert_eq!(mock.len(), 40, "the mock matched every question");
    assert_eq!(mock.values().filter(|&&c| !c).count(), 10, "{mock:?}");
    assert_eq!(bench_verdicts(&r), mock);
    assert_figures(&r, 40, 30);
    assert_eq!(r["invalid_answers"], 0);
    // The first question asked is the sixth line (five shots before it): Kylar's glasses,
    // whose answer is 64. References and extracted answers are kept per request.
    let references = r["reference_answers"].as_array().unwrap();
    let extracted = r["extracted_answers"].as_array().unwrap();
    assert_eq!(references[0], "64", "{references:?}");
    for (i, (reference, answer)) in references.iter().zip(extracted).enumerate() {
        let (reference, answer): (u64, u64) = (
            reference.as_str().unwrap().parse().unwrap(),
            answer.as_str().unwrap().parse().unwrap(),
        );
        let right = mock[&format!("q-{i}")];
        assert_eq!(
            answer,
            if right { reference } else { reference + 1 },
            "q-{i}"
        );
    }
    // The console shows the block, with the interval in percent.
    let (lo, hi) = wilson(30.0, 40.0);
    for line in [
        "Graded requests:                         40".to_string(),
        "Correct answers:                         30".to_string(),
        "Accuracy (%):                            75.00".to_string(),
        format!(
            "Accuracy, 95% interval (%):              {:.2} to {:.2}",
            lo * 100.0,
            hi * 100.0
        ),
    ] {
        assert!(shown.stdout.contains(&line), "{line:?} missing: {shown}");
    }
}

/// The chat API answers the same questions the same way: the grader reads the content.
#[test]
fn gsm8k_over_chat_grades_the_content() {
    let m = mock_answering(&gsm8k(), 0.5, 0.0);
    let r = run(&m, "gsm8k", &gsm8k(), 12, &["--backend", "openai-chat"]);
    assert_eq!(bench_verdicts(&r), mock_verdicts(&m));
    assert_figures(&r, 12, 6);
}

/// A failed request has no answer to judge: it is counted in `failed`, left out of the
/// graded ones (its `correct` is null), and the accuracy is over the completed ones.
#[test]
fn failed_requests_are_not_graded() {
    let m = mock_answering(&gsm8k(), 0.0, 0.25);
    let r = run(&m, "gsm8k", &gsm8k(), 20, &["--backend", "openai"]);
    assert_eq!(
        (r["completed"].as_u64(), r["failed"].as_u64()),
        (Some(15), Some(5))
    );
    let correct = r["correct"].as_array().unwrap();
    let errors = r["errors"].as_array().unwrap();
    for (verdict, error) in correct.iter().zip(errors) {
        assert_eq!(
            verdict.is_null(),
            !error.as_str().unwrap().is_empty(),
            "{r:#}"
        );
    }
    assert_figures(&r, 15, 15);
}

/// Any multiple-choice JSONL: letters and 0-based indices as answers, half answered
/// wrongly; the grader reads the letter after "Answer:".
#[test]
fn multiple_choice_verdicts_equal_the_mocks_answers() {
    let m = mock_answering(&mcq(), 0.5, 0.0);
    let r = run(&m, "mcq", &mcq(), 20, &["--backend", "openai-chat"]);
    assert_eq!(bench_verdicts(&r), mock_verdicts(&m));
    assert_figures(&r, 20, 10);
    assert_eq!(r["invalid_answers"], 0);
    let extracted = r["extracted_answers"].as_array().unwrap();
    assert!(
        extracted
            .iter()
            .all(|a| matches!(a.as_str(), Some("A" | "B" | "C" | "D"))),
        "{extracted:?}"
    );
}

/// `bench dataset sample` shows each request's reference, and a dataset that grades
/// nothing adds no accuracy keys to a result.
#[test]
fn references_are_sampled_and_ungraded_runs_have_no_accuracy() {
    let out = Bench::new()
        .args([
            "dataset",
            "sample",
            "--dataset-name",
            "gsm8k",
            "--dataset-path",
        ])
        .arg(gsm8k())
        .args(["--tokenizer", &gpt2(), "--num-prompts", "2"])
        .run()
        .assert_success();
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert_eq!(lines[0]["reference"], "64", "{out}");
    let prompt = lines[0]["prompt"].as_str().unwrap();
    // Five solved problems (the file's first five), then the question.
    assert!(prompt.starts_with("Question: Janet"), "{prompt}");
    assert_eq!(prompt.matches("Question: ").count(), 6, "{prompt}");
    assert!(prompt.contains("\n\nQuestion: Kylar"), "{prompt}");
    assert!(prompt.ends_with("\nAnswer:"), "{prompt}");
    assert_eq!(
        lines[0]["extra_body"]["stop"],
        serde_json::json!(["Question", "Assistant:", "<|separator|>"])
    );

    let m = mock_answering(&gsm8k(), 0.0, 0.0);
    let r = Bench::against(&m.url)
        .prompts(4)
        .save_detailed()
        .run()
        .assert_success()
        .json();
    for key in ["graded_requests", "accuracy", "correct"] {
        assert!(r.get(key).is_none(), "{key}: {r:#}");
    }
}

/// A run in shards (`--workers 2`): each process grades its own requests against its own
/// references, and the merged result's verdicts, by global position, equal the mock's.
#[test]
fn shards_grade_their_own_requests_and_merge_the_verdicts() {
    let m = mock_answering(&gsm8k(), 0.25, 0.0);
    let r = run(
        &m,
        "gsm8k",
        &gsm8k(),
        24,
        &["--backend", "openai", "--workers", "2"],
    );
    assert_eq!(r["shards"].as_array().unwrap().len(), 2, "{r:#}");
    assert_eq!(bench_verdicts(&r), mock_verdicts(&m));
    assert_figures(&r, 24, 18);
    // The references follow their requests: the first is the sixth line's, 64.
    assert_eq!(r["reference_answers"][0], "64");
}
