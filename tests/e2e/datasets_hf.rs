//! The `hf` dataset (vLLM's `--dataset-name hf`) on local copies of Hugging Face datasets
//! (`tests/data/datasets/hf`, see its README): the same request sets as vLLM 0.32's own
//! classes reading the same files with the `datasets` library
//! (`tests/data/datasets/vllm-requests/hf-*.jsonl`, made by `scripts/hf_references.sh`),
//! and clear errors for what cannot be read.

use std::path::Path;

use serde_json::Value;

use crate::common::{Bench, Run, bench, data, flag_value, gpt2, vllm_reference};

fn hf(rel: &str) -> String {
    data(&format!("datasets/hf/{rel}")).display().to_string()
}

/// `bench dataset sample` flags for the call recorded in `meta` (vLLM's flag names).
fn flags(meta: &Value) -> Vec<String> {
    let s = flag_value;
    let init = &meta["init"];
    let sample = &meta["sample"];
    let mut args: Vec<String> = vec![
        "dataset".into(),
        "sample".into(),
        "--dataset-name".into(),
        "hf".into(),
        "--dataset-path".into(),
        hf(&s(&meta["dataset_path"])),
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
        "--hf-split".into(),
        s(&init["dataset_split"]),
    ];
    if let Some(subset) = init.get("dataset_subset") {
        args.extend(["--hf-subset".into(), s(subset)]);
    }
    if let Some(name) = init.get("hf_name") {
        args.extend(["--hf-name".into(), s(name)]);
    }
    if let Some(len) = sample.get("output_len") {
        args.push(format!("--hf-output-len={}", s(len)));
    }
    for (key, flag) in [
        ("skip_chat_template", "--skip-chat-template"),
        ("no_stream", "--no-stream"),
        ("disable_shuffle", "--disable-shuffle"),
    ] {
        if init.get(key) == Some(&Value::Bool(true)) || sample.get(key) == Some(&Value::Bool(true))
        {
            args.push(flag.into());
        }
    }
    for (key, flag) in [
        ("min_distance", "--blazedit-min-distance"),
        ("max_distance", "--blazedit-max-distance"),
        ("asr_min_audio_len_sec", "--asr-min-audio-len-sec"),
        ("asr_max_audio_len_sec", "--asr-max-audio-len-sec"),
    ] {
        if let Some(v) = sample.get(key) {
            args.push(format!("{flag}={}", s(v)));
        }
    }
    args
}

/// The lines `bench dataset sample` printed.
fn lines(out: &Run) -> Vec<Value> {
    out.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}")))
        .collect()
}

/// Runs `bench dataset sample` as the reference `name` was made and compares request by
/// request.
fn check(name: &str) -> Vec<Value> {
    check_keys(
        name,
        &["prompt", "prompt_len", "expected_output_len", "request_id"],
    )
}

fn check_keys(name: &str, keys: &[&str]) -> Vec<Value> {
    let (meta, want) = vllm_reference(name);
    let out = bench(&flags(&meta)).assert_success();
    let got = lines(&out);
    assert_eq!(got.len(), want.len(), "{name}: request count\n{out}");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        for &key in keys {
            assert_eq!(
                g[key], w[key],
                "{name}: request {i} differs in {key}\n got: {g}\nwant: {w}"
            );
        }
    }
    got
}

/// A Hugging Face snapshot folder (subset `main`, a Parquet shard of 1 200 rows: the
/// streamed shuffle's buffer fills and rolls over), Qwen3's chat template.
#[test]
fn gsm8k_snapshot_qwen3_seed0() {
    check("hf-gsm8k-qwen3-seed0");
}

#[test]
fn gsm8k_gpt2_seed42_output_len_without_template() {
    check("hf-gsm8k-gpt2-seed42");
}

/// `--no-stream`: one permutation of all rows, as a non-streamed dataset's shuffle.
#[test]
fn gsm8k_no_stream() {
    check("hf-gsm8k-gpt2-seed0-nostream");
}

#[test]
fn gsm8k_disable_shuffle_keeps_the_file_order() {
    check("hf-gsm8k-gpt2-seed7-noshuffle");
}

/// A plain folder whose path does not show the hub id: `--hf-name` picks the kind.
#[test]
fn humaneval_folder_with_hf_name() {
    check("hf-humaneval-qwen3-seed42");
}

#[test]
fn instructcoder_gpt2_seed0() {
    check("hf-instructcoder-gpt2-seed0");
}

#[test]
fn instructcoder_qwen3_seed42() {
    check("hf-instructcoder-qwen3-seed42");
}

#[test]
fn mtbench_qwen3_seed0() {
    check("hf-mtbench-qwen3-seed0");
}

/// Output lengths from the solutions, vLLM's AIMO length filter, and oversampling past
/// the file's 40 rows.
#[test]
fn aimo_filters_and_oversamples_like_vllm() {
    check("hf-aimo-gpt2-seed0");
    check("hf-aimo-qwen3-seed42");
}

#[test]
fn blazedit_distance_range() {
    // vLLM numbers Blazedit's requests by row, counting the rows its distance filter
    // skips (ids with gaps, which collide with its own oversampling's ids); bench's host
    // numbers the requests made.
    let got = check_keys(
        "hf-blazedit-gpt2-seed0",
        &["prompt", "prompt_len", "expected_output_len"],
    );
    let ids: Vec<String> = (0..got.len())
        .map(|i| format!("benchmark-serving{i}"))
        .collect();
    assert!(
        got.iter()
            .zip(&ids)
            .all(|(r, id)| r["request_id"] == id.as_str())
    );
    assert!(got.iter().all(|r| r["expected_output_len"] == 4000));
}

#[test]
fn sharegpt_style_conversations() {
    check("hf-conversation-gpt2-seed0");
    check("hf-conversation-qwen3-seed42");
}

/// VisionArena: the same prompts as vLLM; with `--enable-multimodal-chat` each prompt is a
/// user message holding the text and the stored PNG as a data URL (vLLM re-encodes it as
/// JPEG), which decodes to the picture's size.
#[test]
fn visionarena_prompts_and_images() {
    let (meta, want) = vllm_reference("hf-visionarena-gpt2-seed0");
    check("hf-visionarena-gpt2-seed0");
    let mut args = flags(&meta);
    args.push("--enable-multimodal-chat".into());
    let got = lines(&bench(&args).assert_success());
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        let content = &g["prompt"][0]["content"];
        assert_eq!(g["prompt"][0]["role"], "user");
        assert_eq!(content[0]["text"], w["prompt"]);
        let url = content[1]["image_url"]["url"]
            .as_str()
            .expect("an image part");
        let b64 = url
            .strip_prefix("data:image/png;base64,")
            .unwrap_or_else(|| panic!("a PNG data URL: {url:.60}"));
        let png = base64_decode(b64);
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
        let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
        assert!((4..=6).contains(&width) && height == 3, "{width}x{height}");
    }
}

fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let bytes: Vec<u8> = text.bytes().filter(|&c| c != b'=').collect();
    let mut out = Vec::new();
    for chunk in bytes.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= u32::from(value(c)) << (18 - 6 * i);
        }
        out.extend_from_slice(&acc.to_be_bytes()[1..chunk.len()]);
    }
    out
}

/// Zed's zeta: the edit prompt, output lengths from the reference outputs (no filter).
#[test]
fn zeta_next_edit_prediction() {
    check("hf-zeta-gpt2-seed0");
}

/// MLPerf: system prompt and question in Qwen3's chat template, output lengths from the
/// reference answers (without special tokens), vLLM's length filter.
#[test]
fn mlperf_chat_template_and_filter() {
    check("hf-mlperf-qwen3-seed42");
}

/// MMStar: the question before its options; split `val` as vLLM defaults to.
#[test]
fn mmstar_question_without_options() {
    let got = check("hf-mmstar-gpt2-seed0");
    assert!(
        got.iter()
            .all(|r| !r["prompt"].as_str().unwrap().contains("Options"))
    );
}

/// MMVU: the question and its choices as vLLM joins them; the hub's video URLs point
/// into the local copy instead.
#[test]
fn mmvu_videos_point_into_the_local_copy() {
    let root = hf("yale-nlp/MMVU");
    let out = sample_with(&[
        "--dataset-path",
        &root,
        "--enable-multimodal-chat",
        "--disable-shuffle",
        "--num-prompts",
        "5",
    ])
    .assert_success();
    let got = lines(&out);
    assert_eq!(got.len(), 5);
    let content = &got[0]["prompt"][0]["content"];
    assert_eq!(
        content[0]["text"],
        "What happens in clip 0? A.a ball falls B.a cup breaks C.None"
    );
    let root = std::path::Path::new(&root).canonicalize().unwrap();
    assert_eq!(
        content[1]["video_url"]["url"],
        format!("file://{}/videos/Physics/0.mp4", root.display())
    );
    assert!(got.iter().all(|r| r["expected_output_len"] == 128));
}

/// ASR (LibriSpeech's layout, subset `clean`): vLLM's duration filter keeps the same
/// clips (11 of 16 between 0.5 and 2 s), the same empty prompts and output length.
#[test]
fn asr_duration_filter_like_vllm() {
    check("hf-asr-qwen3-seed0");
    let (meta, _) = vllm_reference("hf-asr-qwen3-seed0");
    let mut args = flags(&meta);
    let n = args.iter().position(|a| a == "--num-prompts").unwrap();
    args[n + 1] = "100".into();
    args.push("--no-oversample".into());
    let out = bench(&args).assert_success();
    assert_eq!(lines(&out).len(), 11, "{out}");
    assert!(out.stderr.contains("5 row(s) skipped"), "{out}");
}

/// BFCL: the first turn's messages are the prompt; the row without a question is skipped.
#[test]
fn bfcl_messages_from_the_categories() {
    let out = sample_with(&[
        "--dataset-path",
        &hf("gorilla-llm/Berkeley-Function-Calling-Leaderboard"),
        "--bfcl-categories",
        "simple,multiple",
        "--no-oversample",
        "--num-prompts",
        "50",
    ])
    .assert_success();
    let got = lines(&out);
    assert_eq!(got.len(), 10, "6 + 4 usable rows\n{out}");
    let systems = got
        .iter()
        .filter(|r| r["prompt"][0]["role"] == "system")
        .count();
    assert_eq!(
        systems, 4,
        "the multiple category's rows start with a system message"
    );
    assert!(got.iter().all(|r| r["expected_output_len"] == 512));
    let out = sample_with(&[
        "--dataset-path",
        &hf("gorilla-llm/Berkeley-Function-Calling-Leaderboard"),
        "--bfcl-categories",
        "simple,nope",
        "--num-prompts",
        "5",
    ])
    .assert_failure();
    assert!(
        out.stderr.contains("BFCL category 'nope' not found"),
        "{out}"
    );
}

/// BFCL with Qwen3's chat template, which renders the tool schemas: the prompt lengths
/// count them as vLLM's do (170 and 249 tokens here, where the messages alone are about
/// 15), with vLLM's order, oversampling, messages and tools.
#[test]
fn bfcl_prompt_lengths_count_the_tool_schemas_like_vllm() {
    let (meta, want) = vllm_reference("hf-bfcl-qwen3-seed0");
    let mut args = flags(&meta);
    args.extend([
        "--bfcl-categories".into(),
        flag_value(&meta["bfcl_categories"]),
    ]);
    let got = lines(&bench(&args).assert_success());
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        for key in ["prompt_len", "expected_output_len"] {
            assert_eq!(g[key], w[key], "request {i}: {key}\n got: {g}\nwant: {w}");
        }
        let messages: Vec<Value> = g["prompt"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| serde_json::json!({"role": m["role"], "content": m["content"][0]["text"]}))
            .collect();
        assert_eq!(Value::from(messages), w["chat_messages"], "request {i}");
        assert_eq!(g["extra_body"], w["request_overrides"], "request {i}");
    }
}

fn sample_with(args: &[&str]) -> Run {
    Bench::new()
        .args(["dataset", "sample", "--dataset-name", "hf", "--tokenizer"])
        .arg(gpt2())
        .args(args)
        .run()
}

#[test]
fn a_hub_id_not_on_disk_says_how_to_point_at_a_local_copy() {
    let out = sample_with(&["--hf-name", "likaixin/InstructCoder", "--num-prompts", "2"])
        .assert_failure();
    assert!(out.stderr.contains("never downloads"), "{out}");
    assert!(
        out.stderr
            .contains("--dataset-path ~/.cache/huggingface/hub/datasets--likaixin--InstructCoder "),
        "{out}"
    );
    assert!(
        out.stderr.contains("--hf-name likaixin/InstructCoder"),
        "{out}"
    );
}

#[test]
fn an_unknown_dataset_lists_the_supported_ones() {
    let out = sample_with(&[
        "--dataset-path",
        &hf("humaneval"),
        "--hf-name",
        "me/mine",
        "--num-prompts",
        "2",
    ])
    .assert_failure();
    assert!(out.stderr.contains("unsupported dataset me/mine"), "{out}");
    assert!(out.stderr.contains("openai/gsm8k"), "{out}");
    // Without --hf-name, a path that does not show the hub id.
    let out =
        sample_with(&["--dataset-path", &hf("humaneval"), "--num-prompts", "2"]).assert_failure();
    assert!(out.stderr.contains("--hf-name"), "{out}");
}

/// The Hugging Face cache's own layout: snapshot files are links into the repository's
/// `blobs/`. The repository folder is read at the revision `refs/main` names; the
/// snapshot folder alone cannot follow its links, and the error says what to give.
#[cfg(unix)]
#[test]
fn a_hub_cache_repository_folder_is_read_through_its_links() {
    let hub = tempfile::tempdir().unwrap();
    let repo = hub.path().join("datasets--openai--gsm8k");
    let src = data(
        "datasets/hf/datasets--openai--gsm8k/snapshots/0000000000000000000000000000000000000000/main/test-00000-of-00001.parquet",
    );
    std::fs::create_dir_all(repo.join("blobs")).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::create_dir_all(repo.join("snapshots/abc123/main")).unwrap();
    std::fs::copy(&src, repo.join("blobs/5f2e")).unwrap();
    std::os::unix::fs::symlink(
        "../../../blobs/5f2e",
        repo.join("snapshots/abc123/main/test-00000-of-00001.parquet"),
    )
    .unwrap();
    std::fs::write(repo.join("refs/main"), "abc123").unwrap();
    let args = |path: &Path| {
        vec![
            "--dataset-path".to_string(),
            path.display().to_string(),
            "--skip-chat-template".into(),
            "--num-prompts".into(),
            "5".into(),
        ]
    };
    let a: Vec<String> = args(&repo);
    let out = sample_with(&a.iter().map(String::as_str).collect::<Vec<_>>()).assert_success();
    assert_eq!(lines(&out).len(), 5);
    let a: Vec<String> = args(&repo.join("snapshots/abc123"));
    let out = sample_with(&a.iter().map(String::as_str).collect::<Vec<_>>()).assert_failure();
    assert!(
        out.stderr.contains("Give the repository folder instead"),
        "{out}"
    );
}

fn write(dir: &Path, name: &str, body: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path.display().to_string()
}

#[test]
fn a_malformed_row_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "test.jsonl",
        b"{\"question\": \"one?\"}\n{\"prompt\": \"two?\"}\n",
    );
    let out = sample_with(&[
        "--dataset-path",
        &path,
        "--hf-name",
        "openai/gsm8k",
        "--skip-chat-template",
        "--num-prompts",
        "2",
    ])
    .assert_failure();
    assert!(
        out.stderr.contains("test.jsonl:2: no \"question\" field"),
        "{out}"
    );
}

#[test]
fn a_corrupt_parquet_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "test-0.parquet",
        b"PAR1 this is not parquet PAR1",
    );
    let out = sample_with(&[
        "--dataset-path",
        &path,
        "--hf-name",
        "openai/gsm8k",
        "--num-prompts",
        "2",
    ])
    .assert_failure();
    assert!(out.stderr.contains("test-0.parquet"), "{out}");
}

#[test]
fn no_oversample_returns_what_the_file_has() {
    let out = sample_with(&[
        "--dataset-path",
        &hf("vdaita/edit_5k_char"),
        "--skip-chat-template",
        "--blazedit-min-distance",
        "0.5",
        "--no-oversample",
        "--num-prompts",
        "100",
    ])
    .assert_success();
    let got = lines(&out);
    assert!(!got.is_empty() && got.len() < 50, "{}", got.len());
    // Without the flag, exactly the number asked for.
    let out = sample_with(&[
        "--dataset-path",
        &hf("vdaita/edit_5k_char"),
        "--skip-chat-template",
        "--num-prompts",
        "100",
    ])
    .assert_success();
    assert_eq!(lines(&out).len(), 100);
}

#[test]
fn an_unknown_split_lists_the_splits_found() {
    let out = sample_with(&[
        "--dataset-path",
        &hf("datasets--openai--gsm8k/snapshots/0000000000000000000000000000000000000000"),
        "--hf-split",
        "validation",
        "--num-prompts",
        "2",
    ])
    .assert_failure();
    assert!(out.stderr.contains("splits found: test"), "{out}");
}
