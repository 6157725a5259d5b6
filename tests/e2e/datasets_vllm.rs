//! The first-party datasets (`random`, `sharegpt`, `custom`) against request sets made by
//! vLLM 0.32's own dataset code (`tests/data/datasets/vllm-requests`, see the README
//! there): `bench dataset sample` with the same seed, tokenizer and options must write the
//! very same prompts, lengths, order and request ids.

use std::path::Path;

use serde_json::Value;

use crate::common::{Bench, Run, bench, data, flag_value, gpt2, sharegpt, vllm_reference};

/// vLLM's `vllm bench serve` flags for the call recorded in `meta`.
fn flags(meta: &Value) -> Vec<String> {
    let s = flag_value;
    let dataset = s(&meta["dataset"]);
    let mut args: Vec<String> = vec![
        "dataset".into(),
        "sample".into(),
        "--dataset-name".into(),
        dataset.clone(),
        "--tokenizer".into(),
        data(&format!("tokenizers/{}", s(&meta["tokenizer"])))
            .display()
            .to_string(),
        "--seed".into(),
        s(&meta["seed"]),
        "--num-prompts".into(),
        s(&meta["num_requests"]),
        "--request-id-prefix".into(),
        "benchmark-serving".into(),
    ];
    match dataset.as_str() {
        "random" => {
            for (flag, key) in [
                ("--random-input-len", "input_len"),
                ("--random-output-len", "output_len"),
                ("--random-range-ratio", "range_ratio"),
                ("--random-prefix-len", "prefix_len"),
            ] {
                args.push(format!("{flag}={}", s(&meta[key])));
            }
        }
        "sharegpt" => {
            args.push("--dataset-path".into());
            args.push(sharegpt());
        }
        "custom" => {
            args.push("--dataset-path".into());
            args.push(
                data(&format!("datasets/{}", s(&meta["dataset_path"])))
                    .display()
                    .to_string(),
            );
            // `=` keeps clap from reading -1 as a flag.
            args.push(format!("--custom-output-len={}", s(&meta["output_len"])));
            if meta["skip_chat_template"] == Value::Bool(true) {
                args.push("--skip-chat-template".into());
            }
        }
        other => panic!("no flags for dataset {other}"),
    }
    args
}

/// Runs `bench dataset sample` as the reference `name` was made and compares request by
/// request.
fn check(name: &str) {
    let (meta, want) = vllm_reference(name);
    let out = bench(&flags(&meta)).assert_success();
    let got: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}")))
        .collect();
    assert_eq!(got.len(), want.len(), "{name}: request count");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        for key in ["prompt", "prompt_len", "expected_output_len", "request_id"] {
            assert_eq!(
                g[key], w[key],
                "{name}: request {i} differs in {key}\n got: {g}\nwant: {w}"
            );
        }
    }
}

#[test]
fn random_gpt2_seed0() {
    check("random-gpt2-seed0");
}

#[test]
fn random_gpt2_seed42() {
    check("random-gpt2-seed42");
}

#[test]
fn random_qwen3_seed0() {
    check("random-qwen3-seed0");
}

#[test]
fn random_qwen3_seed42() {
    check("random-qwen3-seed42");
}

#[test]
fn sharegpt_gpt2_seed0() {
    check("sharegpt-gpt2-seed0");
}

#[test]
fn sharegpt_gpt2_seed42() {
    check("sharegpt-gpt2-seed42");
}

#[test]
fn sharegpt_qwen3_seed0() {
    check("sharegpt-qwen3-seed0");
}

#[test]
fn sharegpt_qwen3_seed42() {
    check("sharegpt-qwen3-seed42");
}

/// Qwen3's chat template around every prompt, output length 256.
#[test]
fn custom_qwen3_seed0_chat_template() {
    check("custom-qwen3-seed0");
}

/// No template, lengths from `output_tokens`, oversampled past the file's 12 lines.
#[test]
fn custom_gpt2_seed42_oversampled() {
    check("custom-gpt2-seed42");
}

fn sample_custom(dir: &Path, file: &str, body: &str) -> Run {
    let path = dir.join(file);
    std::fs::write(&path, body).unwrap();
    Bench::new()
        .args([
            "dataset",
            "sample",
            "--dataset-name",
            "custom",
            "--dataset-path",
        ])
        .arg(&path)
        .args([
            "--tokenizer",
            &gpt2(),
            "--skip-chat-template",
            "--num-prompts",
            "2",
        ])
        .run()
}

#[test]
fn custom_malformed_row_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let body = "{\"prompt\": \"first\"}\n\n{\"prompt\": \"second\",}\n{\"prompt\": \"third\"}\n";
    let out = sample_custom(dir.path(), "data.jsonl", body).assert_failure();
    assert!(
        out.stderr
            .contains("data.jsonl:3: trailing comma at column 21"),
        "the error should name the file, line 3 and the column:\n{out}"
    );
}

#[test]
fn custom_row_without_prompt_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = sample_custom(
        dir.path(),
        "rows.jsonl",
        "{\"prompt\": \"a\"}\n{\"text\": \"b\"}\n",
    )
    .assert_failure();
    assert!(
        out.stderr.contains("rows.jsonl:2: no \"prompt\" field"),
        "{out}"
    );
}

#[test]
fn unknown_dataset_option_is_refused() {
    let out = bench(&[
        "dataset",
        "sample",
        "--dataset-name",
        "random",
        "--tokenizer",
        &gpt2(),
        "--num-prompts",
        "1",
        "--dataset-option",
        "inputlen=5",
    ])
    .assert_failure();
    assert!(out.stderr.contains("unknown option \"inputlen\""), "{out}");
}

#[test]
fn sharegpt_needs_a_dataset_path() {
    let out = bench(&[
        "dataset",
        "sample",
        "--dataset-name",
        "sharegpt",
        "--tokenizer",
        &gpt2(),
        "--num-prompts",
        "1",
    ])
    .assert_failure();
    assert!(out.stderr.contains("--dataset-path"), "{out}");
}
