//! Scenario files (`bench serve --config FILE`): the examples in `examples/scenarios` run
//! against the mock server, their settings visible in the result, a flag on the command
//! line beating the file's, `--dry-run` sending nothing and a mistyped key refused with
//! its line.

use std::path::PathBuf;

use sha2::{Digest, Sha256};

use crate::common::*;

fn example(name: &str) -> PathBuf {
    repo().join("examples/scenarios").join(name)
}

/// The requests the mock answered.
fn requests(m: &Mock) -> usize {
    m.server.as_ref().unwrap().requests().len()
}

fn numbers(v: &serde_json::Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .collect()
}

/// Each example has its test below: a new one fails here until it has one.
#[test]
fn every_example_scenario_is_run_by_a_test() {
    let mut names: Vec<String> = std::fs::read_dir(repo().join("examples/scenarios"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["random-capped.toml", "sharegpt-chat.toml"]);
}

#[test]
fn the_random_capped_scenario_runs_with_the_files_settings() {
    let m = mock(Default::default());
    let file = example("random-capped.toml");
    // --input-tokens dataset: the lengths as sampled, whatever the mock counts.
    let out = Bench::against(&m.url)
        .arg("--config")
        .arg(&file)
        .args(["--input-tokens", "dataset"])
        .save_detailed()
        .run()
        .assert_success();
    let r = out.json();
    assert_eq!(r["num_prompts"], 40, "{out}");
    assert_eq!(r["completed"], 40);
    assert_eq!(requests(&m), 40);
    assert_eq!(r["max_concurrency"], 4);
    // random-input-len 64 and random-output-len 16 within +-25% (random-range-ratio), after
    // a prefix of 8 (dataset-option prefix-len=8).
    let inputs = numbers(&r["input_lens"]);
    assert!(inputs.iter().all(|n| (56..=88).contains(n)), "{inputs:?}");
    let outputs = numbers(&r["output_lens"]);
    assert!(outputs.iter().all(|n| (12..=20).contains(n)), "{outputs:?}");
    assert!(outputs.iter().any(|&n| n != 16), "{outputs:?}");
    assert_eq!(r["purpose"], "example");
    assert_eq!(r["scenario"]["file"], file.display().to_string());
    let digest: String = Sha256::digest(std::fs::read(&file).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(r["scenario"]["sha256"], digest);
    let resolved = &r["scenario"]["resolved"];
    assert_eq!(resolved["num-prompts"], 40);
    assert_eq!(resolved["random-range-ratio"], 0.25);
    assert_eq!(
        resolved["dataset-option"],
        serde_json::json!(["prefix-len=8"])
    );
    assert_eq!(resolved["base-url"], m.url.as_str());
}

#[test]
fn a_flag_on_the_command_line_beats_the_files() {
    let m = mock(Default::default());
    let out = Bench::against(&m.url)
        .arg("--config")
        .arg(example("random-capped.toml"))
        .args(["--max-concurrency", "2", "--metadata", "purpose=override"])
        .prompts(10)
        .save_result()
        .run()
        .assert_success();
    let r = out.json();
    assert_eq!(r["num_prompts"], 10, "{out}");
    assert_eq!(requests(&m), 10);
    assert_eq!(r["max_concurrency"], 2);
    // The command line's list replaces the file's whole.
    assert_eq!(r["purpose"], "override");
    assert!(r.get("example").is_none(), "{out}");
    assert_eq!(r["scenario"]["resolved"]["metadata"], "purpose=override");
    assert_eq!(r["scenario"]["resolved"]["max-concurrency"], 2);
    // The file's other settings still hold.
    assert_eq!(r["scenario"]["resolved"]["random-output-len"], 16);
}

#[test]
fn the_sharegpt_chat_scenario_runs_with_the_files_settings() {
    let m = mock(Default::default());
    // The file's paths are the repository root's; the test runs elsewhere, and says where
    // the dataset is on the command line (which wins).
    let out = Bench::against(&m.url)
        .arg("--config")
        .arg(example("sharegpt-chat.toml"))
        .args(["--dataset-path", &sharegpt()])
        .prompts(10)
        .save_detailed()
        .run()
        .assert_success();
    let r = out.json();
    assert_eq!(r["backend"], "openai-chat", "{out}");
    assert_eq!(r["label"], "sharegpt-chat");
    assert_eq!(r["completed"], 10);
    assert_eq!(r["request_rate"], 5.0);
    // sharegpt-output-len, the dataset plugin's own flag.
    assert_eq!(numbers(&r["output_lens"]), [24; 10]);
    // percentile-metrics and metric-percentiles.
    assert!(r.get("p90_tpot_ms").is_some() && r.get("p50_itl_ms").is_some());
    // 10 measured requests and 2 warm-ups (num-warmups).
    assert_eq!(requests(&m), 12);
}

#[test]
fn a_dry_run_prints_the_resolved_flags_and_sends_nothing() {
    let m = mock(Default::default());
    let out = Bench::against(&m.url)
        .arg("--config")
        .arg(example("random-capped.toml"))
        .args(["--dry-run", "--num-prompts", "9"])
        .run()
        .assert_success();
    for line in [
        "# plugins: dataset random, backend openai\n",
        "random-input-len = 64  # file, line 14\n",
        "max-concurrency = 4  # file, line 24\n",
        "num-prompts = 9  # command line\n",
        "dataset-option = [\"prefix-len=8\"]  # file, line 20\n",
    ] {
        assert!(out.stdout.contains(line), "{line:?} missing:\n{out}");
    }
    assert!(!out.stdout.contains("num-prompts = 40"), "{out}");
    assert!(
        out.stdout
            .contains(&format!("base-url = \"{}\"  # command line\n", m.url))
    );
    let server = m.server.as_ref().unwrap();
    assert_eq!(server.connections(), 0, "{out}");
    assert_eq!(requests(&m), 0);
}

#[test]
fn an_unknown_scenario_key_fails_naming_its_file_and_line() {
    let m = mock(Default::default());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scenario.toml");
    std::fs::write(
        &file,
        "num-prompts = 4\n\n# lengths\nrandom-input-lenn = 8\n",
    )
    .unwrap();
    let out = Bench::against(&m.url)
        .arg("--config")
        .arg(&file)
        .run()
        .assert_failure();
    let want = format!(
        "error: {} line 4: unknown key `random-input-lenn` (did you mean `random-input-len`?)",
        file.display()
    );
    assert!(out.stderr.contains(&want), "{out}");
    assert_eq!(requests(&m), 0);
}

#[test]
fn a_sweeps_bench_command_takes_a_scenario_and_its_parameters_win() {
    let m = mock(Default::default());
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("bench.json");
    std::fs::write(
        &params,
        r#"[{"max_concurrency": 1}, {"max_concurrency": 3}]"#,
    )
    .unwrap();
    let bench_cmd = format!(
        "bench serve --config {} --base-url {} --tokenizer {} --num-prompts 6",
        example("random-capped.toml").display(),
        m.url,
        gpt2()
    );
    let out = Bench::new()
        .args([
            "sweep",
            "serve",
            "--bench-cmd",
            &bench_cmd,
            "--bench-params",
        ])
        .arg(&params)
        .args(["--num-runs", "1", "-e", "grid", "-o"])
        .arg(dir.path())
        .run()
        .assert_success();
    for cap in [1, 3] {
        let run = dir
            .path()
            .join(format!("grid/BENCH--max_concurrency={cap}/run=0.json"));
        let r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&run).unwrap_or_else(|e| panic!("{e}\n{out}")))
                .unwrap();
        assert_eq!(r["max_concurrency"], cap, "{out}");
        assert_eq!(r["num_prompts"], 6);
        assert_eq!(r["scenario"]["resolved"]["max-concurrency"], cap);
        assert_eq!(r["scenario"]["resolved"]["random-input-len"], 64);
    }
    assert_eq!(requests(&m), 12);
}
