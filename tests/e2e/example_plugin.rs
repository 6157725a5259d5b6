//! The example third-party plugin (examples/dataset-lines) builds against `sdk/` alone,
//! outside the workspace, and runs in `bench serve` as a `.wasm` file.

use std::process::Command;

use crate::common::*;

/// Builds the example plugin (once per process) and returns its `.wasm`.
fn example_wasm() -> std::path::PathBuf {
    static WASM: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    WASM.get_or_init(build_example).clone()
}

fn build_example() -> std::path::PathBuf {
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
    wasm
}

#[test]
fn third_party_dataset_plugin_builds_and_runs() {
    gate::enter();
    let wasm = example_wasm();

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

/// A third-party plugin's flags and rules come from its description: its own flags in
/// `--help` and `plugin inspect`, checked by clap, the general `--output-len` it answers
/// to, and `--dataset-path` required because it says so.
#[test]
fn a_third_party_plugins_flags_and_rules_come_from_its_description() {
    gate::enter();
    let wasm = example_wasm();
    let wasm = wasm.to_str().unwrap();
    let help = Bench::new()
        .args(["serve", "--plugin", wasm, "--help"])
        .run()
        .assert_success();
    assert!(help.stdout.contains("Dataset options ("), "{help}");
    assert!(help.stdout.contains("--lines-output-len <VALUE>"), "{help}");
    assert!(help.stdout.contains("--lines-shuffle"), "{help}");
    let inspect = Bench::new()
        .args(["plugin", "inspect", wasm])
        .run()
        .assert_success();
    assert!(
        inspect
            .stdout
            .contains("output-len (--lines-output-len VALUE, --output-len)"),
        "{inspect}"
    );

    let dir = tempfile::tempdir().unwrap();
    let prompts = dir.path().join("prompts.txt");
    std::fs::write(&prompts, "one\ntwo\nthree\n").unwrap();
    let prompts = prompts.to_str().unwrap().to_owned();
    let tokenizer = gpt2();
    let sample = |extra: &[&str]| {
        let mut args = vec![
            "dataset",
            "sample",
            "--dataset-name",
            wasm,
            "--tokenizer",
            &tokenizer,
            "--num-prompts",
            "3",
        ];
        args.extend_from_slice(extra);
        Bench::new().args(args).run()
    };
    let output_lens = |run: &Run| -> Vec<u64> {
        run.stdout
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                v["expected_output_len"].as_u64().unwrap()
            })
            .collect()
    };
    let path = ["--dataset-path", prompts.as_str()];
    let own = sample(&[&path[..], &["--lines-output-len", "7", "--lines-shuffle"]].concat())
        .assert_success();
    assert_eq!(output_lens(&own), [7, 7, 7], "{own}");
    // vLLM's rule: the general flag wins over the dataset's own...
    let general = sample(&[&path[..], &["--lines-output-len", "7", "--output-len", "9"]].concat())
        .assert_success();
    assert_eq!(output_lens(&general), [9, 9, 9], "{general}");
    // ... and --dataset-option over both.
    let option = sample(
        &[
            &path[..],
            &["--output-len", "9", "--dataset-option", "output-len=4"],
        ]
        .concat(),
    )
    .assert_success();
    assert_eq!(output_lens(&option), [4, 4, 4], "{option}");
    // Clap checks the value against the option's kind, naming the flag.
    let bad = sample(&[&path[..], &["--lines-output-len", "-1"]].concat());
    assert!(
        !bad.success() && bad.stderr.contains("--lines-output-len"),
        "{bad}"
    );
    // The plugin says it reads a file: without one, the host says so.
    let missing = sample(&[]);
    assert!(
        !missing.success() && missing.stderr.contains("--dataset-path"),
        "{missing}"
    );
}
