//! The example third-party plugin (examples/dataset-lines) builds against `sdk/` alone,
//! outside the workspace, and runs in `bench serve` as a `.wasm` file.

use std::process::Command;

use crate::common::*;

#[test]
fn third_party_dataset_plugin_builds_and_runs() {
    gate::enter();
    let example = repo().join("examples/dataset-lines");
    let target = repo().join("target/example-plugin");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let build = Command::new(cargo)
        .current_dir(&example)
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--target-dir",
        ])
        .arg(&target)
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .expect("running cargo");
    assert!(
        build.status.success(),
        "building {}:\n{}",
        example.display(),
        String::from_utf8_lossy(&build.stderr)
    );
    let wasm = target.join("wasm32-wasip2/release/dataset_lines.wasm");
    assert!(wasm.exists(), "{} missing", wasm.display());

    let dir = tempfile::tempdir().unwrap();
    let prompts = dir.path().join("prompts.txt");
    std::fs::write(
        &prompts,
        "Tell me a story.\n\nWhat is the capital of France?\nCount to ten.\n",
    )
    .unwrap();
    let m = mock(Default::default());
    let out = Bench::against(&m.url)
        .arg("--plugin")
        .arg(&wasm)
        .arg("--dataset-path")
        .arg(&prompts)
        .args(["--dataset-option", "output-len=6", "--backend", "openai"])
        .prompts(3)
        .save_detailed()
        .run()
        .assert_success();
    let r = out.json();
    // One request per non-empty line, each asking for 6 tokens.
    assert_eq!(r["completed"], 3, "{out}");
    assert_eq!(r["total_output_tokens"], 18);
    let mut lens: Vec<u64> = r["input_lens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    lens.sort();
    // vLLM's rule: the server's usage.prompt_tokens replaces the dataset's count; the mock
    // counts whitespace-separated words: 3, 4 and 6 for the three lines.
    assert_eq!(lens, vec![3, 4, 6], "{r}");
    assert_eq!(r["total_input_tokens"], 13);
    assert_eq!(r["input_tokens_server_usage"], 13, "{r}");
    assert_eq!(r["requests_with_server_prompt_usage"], 3);
    // The dataset's own counts (the plugin's `encode-batch` with the run's tokenizer) are
    // reported beside them.
    let tokenizer = bench::tokenizer::Tokenizer::load(&gpt2()).unwrap();
    let dataset: u64 = [
        "Tell me a story.",
        "What is the capital of France?",
        "Count to ten.",
    ]
    .iter()
    .map(|line| tokenizer.encode(line, true).unwrap().len() as u64)
    .sum();
    assert_eq!(r["input_tokens_dataset_count"], dataset, "{r}");
}
