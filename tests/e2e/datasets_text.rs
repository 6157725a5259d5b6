//! vLLM's text datasets `prefix_repetition`, `sonnet`, `burstgpt`, `spec_bench` and
//! `speed_bench` against request sets made by vLLM's own dataset code
//! (`tests/data/datasets/vllm-requests`, how each was made is in the README beside the
//! data): `bench dataset sample` with the same seed, tokenizer and options must write the
//! very same prompts, lengths and order. Also what each one promises beyond that (shared
//! prefixes, the filter counts) and its errors.

use serde_json::Value;

use crate::common::{Bench, Run, bench, data, gpt2, vllm_reference};

use crate::common::flag_value as s;

/// `meta[key]`, or `meta[group][key]` (the reference scripts put the class's arguments
/// under `init` and `sample`).
fn field<'a>(meta: &'a Value, key: &str) -> Option<&'a Value> {
    [&meta[key], &meta["sample"][key], &meta["init"][key]]
        .into_iter()
        .find(|v| !v.is_null())
}

/// `vllm bench serve`'s flags for the call recorded in `meta`.
fn flags(meta: &Value) -> Vec<String> {
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
    if let Some(path) = meta.get("dataset_path") {
        args.push("--dataset-path".into());
        args.push(data(&format!("datasets/{}", s(path))).display().to_string());
    }
    let mut flag = |flag: &str, key: &str| {
        if let Some(v) = field(meta, key) {
            // `=` keeps clap from reading a negative number as a flag.
            args.push(format!("{flag}={}", s(v)));
        }
    };
    match dataset.as_str() {
        "prefix_repetition" => {
            flag("--prefix-repetition-prefix-len", "prefix_len");
            flag("--prefix-repetition-suffix-len", "suffix_len");
            flag("--prefix-repetition-num-prefixes", "num_prefixes");
            flag("--prefix-repetition-output-len", "output_len");
        }
        "sonnet" => {
            flag("--sonnet-input-len", "input_len");
            flag("--sonnet-prefix-len", "prefix_len");
            flag("--sonnet-output-len", "output_len");
        }
        "burstgpt" => {}
        "spec_bench" => {
            flag("--spec-bench-output-len", "output_len");
            flag("--spec-bench-category", "category");
        }
        "speed_bench" => {
            flag("--speed-bench-output-len", "output_len");
            flag("--speed-bench-category", "category");
            flag("--speed-bench-dataset-subset", "dataset_subset");
        }
        other => panic!("no flags for dataset {other}"),
    }
    let switch = |key: &str| field(meta, key) == Some(&Value::Bool(true));
    if field(meta, "return_prompt_formatted") == Some(&Value::Bool(false))
        || switch("skip_chat_template")
    {
        args.push("--skip-chat-template".into());
    }
    args
}

/// Runs `bench dataset sample` as the reference `name` was made and compares request by
/// request (request ids too, where vLLM set them).
fn check(name: &str) {
    let (meta, want) = vllm_reference(name);
    let out = bench(&flags(&meta)).assert_success();
    let got: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}")))
        .collect();
    assert_eq!(got.len(), want.len(), "{name}: request count\n{out}");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        for key in ["prompt", "prompt_len", "expected_output_len", "request_id"] {
            if key == "request_id" && w[key].is_null() {
                continue;
            }
            assert_eq!(
                g[key], w[key],
                "{name}: request {i} differs in {key}\n got: {g}\nwant: {w}"
            );
        }
    }
}

#[test]
fn prefix_repetition_gpt2_seed0() {
    check("prefix_repetition-gpt2-seed0");
}

#[test]
fn prefix_repetition_gpt2_seed42() {
    check("prefix_repetition-gpt2-seed42");
}

#[test]
fn prefix_repetition_qwen3_seed0() {
    check("prefix_repetition-qwen3-seed0");
}

#[test]
fn prefix_repetition_qwen3_seed42() {
    check("prefix_repetition-qwen3-seed42");
}

/// Prompts in Qwen3's chat template, some drawn again for being over input-len.
#[test]
fn sonnet_qwen3_seed0() {
    check("sonnet-qwen3-seed0");
}

/// `--skip-chat-template`: the raw prompt (what vLLM sends to openai-chat), measured
/// templated.
#[test]
fn sonnet_qwen3_seed42_untemplated() {
    check("sonnet-qwen3-seed42-raw");
}

#[test]
fn burstgpt_gpt2_seed0() {
    check("burstgpt-gpt2-seed0");
}

#[test]
fn burstgpt_gpt2_seed42() {
    check("burstgpt-gpt2-seed42");
}

#[test]
fn burstgpt_qwen3_seed0() {
    check("burstgpt-qwen3-seed0");
}

#[test]
fn burstgpt_qwen3_seed42() {
    check("burstgpt-qwen3-seed42");
}

/// More requests than kept rows: pandas samples with replacement.
#[test]
fn burstgpt_gpt2_seed42_with_replacement() {
    check("burstgpt-gpt2-seed42-replace");
}

#[test]
fn spec_bench_qwen3_seed0() {
    check("spec_bench-qwen3-seed0");
}

/// One category (6 questions), oversampled to 10.
#[test]
fn spec_bench_qwen3_seed42_category_oversampled() {
    check("spec_bench-qwen3-seed42-qa");
}

/// What a dataset's rules leave out is shown at the default log level, as vLLM prints it
/// (plugins' info messages are shown; the host's own stay quiet).
#[test]
fn a_category_filter_says_how_many_rows_it_kept() {
    let (meta, _) = vllm_reference("spec_bench-qwen3-seed42-qa");
    let out = Bench::new()
        .args(flags(&meta))
        .default_log()
        .run()
        .assert_success();
    assert!(
        out.stderr
            .contains("6 of 78 questions are of category \"qa\""),
        "{out}"
    );
    // No terminal: no colour codes.
    assert!(!out.stderr.contains('\u{1b}'), "{out}");
}

/// `--chat-template-kwargs` reaches the chat template where a dataset renders prompts on
/// the client, as vLLM passes it to `apply_chat_template`: Qwen3's `enable_thinking: false`
/// adds its empty think block to every prompt (the same few tokens longer each); a value
/// that is not a JSON object is refused, naming the flag.
#[test]
fn chat_template_kwargs_reach_client_side_templates() {
    let (meta, _) = vllm_reference("spec_bench-qwen3-seed0");
    let parse = |out: Run| -> Vec<Value> {
        out.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let plain = parse(bench(&flags(&meta)).assert_success());
    let mut args = flags(&meta);
    args.push(r#"--chat-template-kwargs={"enable_thinking": false}"#.into());
    let thinking_off = parse(bench(&args).assert_success());
    assert_eq!(plain.len(), thinking_off.len());
    let mut deltas = std::collections::BTreeSet::new();
    for (p, t) in plain.iter().zip(&thinking_off) {
        let (p_text, t_text) = (p["prompt"].as_str().unwrap(), t["prompt"].as_str().unwrap());
        assert_eq!(t_text, format!("{p_text}<think>\n\n</think>\n\n"));
        deltas.insert(t["prompt_len"].as_i64().unwrap() - p["prompt_len"].as_i64().unwrap());
    }
    assert_eq!(deltas.len(), 1, "{deltas:?}");
    assert!(*deltas.first().unwrap() > 0);

    let mut args = flags(&meta);
    args.push("--chat-template-kwargs=[1]".into());
    let out = bench(&args).assert_failure();
    assert!(
        out.stderr
            .contains("--chat-template-kwargs must be a JSON object"),
        "{out}"
    );
}

#[test]
fn speed_bench_qwen3_seed0() {
    check("speed_bench-qwen3-seed0");
}

/// Another subset, one category, no chat template.
#[test]
fn speed_bench_gpt2_seed42_subset_category() {
    check("speed_bench-gpt2-seed42-throughput_1k");
}

fn sample(args: &[&str]) -> Run {
    Bench::new()
        .args(["dataset", "sample", "--tokenizer", &gpt2()])
        .args(args)
        .run()
}

fn prompts(out: &Run) -> Vec<String> {
    out.stdout
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            s(&v["prompt"])
        })
        .collect()
}

/// Unshuffled, each prefix's prompts come together: they share a long common start
/// (the prefix's 200 tokens) and the groups start differently.
#[test]
fn prefix_repetition_groups_share_their_prefix() {
    let out = sample(&[
        "--dataset-name",
        "prefix_repetition",
        "--num-prompts",
        "13",
        "--prefix-repetition-num-prefixes",
        "3",
        "--prefix-repetition-prefix-len",
        "200",
        "--prefix-repetition-suffix-len",
        "20",
        "--disable-shuffle",
    ])
    .assert_success();
    let got = prompts(&out);
    // 13 / 3 = 4 prompts per prefix.
    assert_eq!(got.len(), 12, "{out}");
    let common = |a: &str, b: &str| a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    for group in got.chunks(4) {
        for p in &group[1..] {
            // 200 GPT-2 tokens of random text are far more than 300 bytes.
            assert!(common(&group[0], p) > 300, "{group:?}");
        }
    }
    assert!(common(&got[0], &got[4]) < 50);
    assert!(common(&got[4], &got[8]) < 50);
}

#[test]
fn prefix_repetition_refuses_a_dataset_path_and_too_few_prompts() {
    let out = sample(&[
        "--dataset-name",
        "prefix_repetition",
        "--num-prompts",
        "3",
        "--dataset-path",
        &data("datasets/sonnet/sonnet.txt").display().to_string(),
    ])
    .assert_failure();
    assert!(out.stderr.contains("--dataset-path"), "{out}");
    let out =
        sample(&["--dataset-name", "prefix_repetition", "--num-prompts", "3"]).assert_failure();
    assert!(
        out.stderr
            .contains("--num-prompts (3) must be at least num-prefixes (10)"),
        "{out}"
    );
}

/// GPT-2 has no chat template, which vLLM needs to measure sonnet prompts.
#[test]
fn sonnet_needs_a_chat_template() {
    let out = sample(&[
        "--dataset-name",
        "sonnet",
        "--num-prompts",
        "2",
        "--dataset-path",
        &data("datasets/sonnet/sonnet.txt").display().to_string(),
    ])
    .assert_failure();
    assert!(out.stderr.contains("needs a chat template"), "{out}");
}

#[test]
fn burstgpt_bad_rows_name_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.csv");
    std::fs::write(
        &path,
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n\
         0,GPT-4,12,3,15,API log\n\
         1,GPT-4,twelve,3,15,API log\n",
    )
    .unwrap();
    let file = path.display().to_string();
    let out = sample(&[
        "--dataset-name",
        "burstgpt",
        "--num-prompts",
        "2",
        "--dataset-path",
        &file,
    ])
    .assert_failure();
    assert!(
        out.stderr
            .contains("trace.csv:3: column \"Request tokens\" must be a number, got \"twelve\""),
        "{out}"
    );
    std::fs::write(&path, "Timestamp,Model,Response tokens\n0,GPT-4,3\n").unwrap();
    let out = sample(&[
        "--dataset-name",
        "burstgpt",
        "--num-prompts",
        "2",
        "--dataset-path",
        &file,
    ])
    .assert_failure();
    assert!(
        out.stderr
            .contains("trace.csv:1: no \"Request tokens\" column"),
        "{out}"
    );
}

/// The synthetic trace: 300 rows, 198 kept; the lengths are the rows' own.
#[test]
fn burstgpt_reports_its_filter_and_keeps_the_traced_lengths() {
    let csv = data("datasets/burstgpt/burstgpt_synthetic.csv");
    let out = sample(&[
        "--dataset-name",
        "burstgpt",
        "--num-prompts",
        "198",
        "--dataset-path",
        &csv.display().to_string(),
    ])
    .assert_success();
    assert!(out.stderr.contains("198 of 300 rows kept"), "{out}");
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut kept: Vec<(u64, u64)> = text
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let (req, resp) = (f[2].parse().unwrap(), f[3].parse().unwrap());
            (f[1] == "GPT-4" && resp > 0).then_some((req, resp))
        })
        .collect();
    let mut got: Vec<(u64, u64)> = out
        .stdout
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (
                v["prompt_len"].as_u64().unwrap(),
                v["expected_output_len"].as_u64().unwrap(),
            )
        })
        .collect();
    // Without replacement, all 198 rows once each.
    kept.sort_unstable();
    got.sort_unstable();
    assert_eq!(got, kept);
}

#[test]
fn speed_bench_needs_the_prepared_folder() {
    let file = data("datasets/speed_bench/qualitative.jsonl");
    let out = sample(&[
        "--dataset-name",
        "speed_bench",
        "--num-prompts",
        "2",
        "--dataset-path",
        &file.display().to_string(),
    ])
    .assert_failure();
    assert!(
        out.stderr.contains("is not a folder") && out.stderr.contains("prepare.py"),
        "{out}"
    );
    let out = sample(&[
        "--dataset-name",
        "speed_bench",
        "--num-prompts",
        "2",
        "--dataset-path",
        &data("datasets/speed_bench").display().to_string(),
        "--speed-bench-dataset-subset",
        "throughput_8k",
    ])
    .assert_failure();
    assert!(
        out.stderr.contains("throughput_8k.jsonl") && out.stderr.contains("prepare.py"),
        "{out}"
    );
}
