//! Every flag of `bench serve` is checked before anything slow happens (tokenizer,
//! plugins, network): a bad value fails in well under 2 s with a message naming the flag.

use std::time::Duration;

use crate::common::*;

/// No server listens on the discard port: a run that got as far as the network would
/// fail differently (and later).
const NO_SERVER: &str = "http://127.0.0.1:9";

/// Runs `bench` with `args` after a model and a server address and checks that it fails
/// within 2 s with `needle` in its error output and without starting a run.
fn fails_fast(args: &[&str], needle: &str) {
    within_bounds(&format!("{args:?} failing fast"), || {
        let out = Bench::new()
            .args(["--model", "m", "--base-url", NO_SERVER])
            .args(args)
            .run();
        assert!(!out.success(), "{args:?} should fail:\n{out}");
        assert!(
            out.stderr.contains(needle),
            "{args:?}: {needle:?} not in:\n{out}"
        );
        assert!(
            !out.stdout.contains("Starting main benchmark run"),
            "{args:?}: {out}"
        );
        if out.took >= Duration::from_secs(2) {
            return Err(format!("{args:?} took {:?}", out.took));
        }
        Ok(())
    });
}

#[test]
fn rates_and_counts_must_be_in_range() {
    for (args, needle) in [
        (&["--request-rate", "-1"][..], "--request-rate"),
        (&["--request-rate", "0"], "--request-rate"),
        (&["--request-rate", "nan"], "--request-rate"),
        (&["--burstiness", "0"], "--burstiness"),
        (&["--burstiness", "-2"], "--burstiness"),
        (&["--burstiness", "inf"], "--burstiness"),
        (&["--max-concurrency", "0"], "--max-concurrency"),
        (&["--max-concurrency", "-5"], "--max-concurrency"),
        (&["--num-prompts", "0"], "--num-prompts"),
        (&["--num-prompts", "-3"], "--num-prompts"),
        (&["--num-warmups", "-1"], "--num-warmups"),
        (&["--num-warmups", "many"], "--num-warmups"),
        (&["--request-timeout", "0"], "--request-timeout"),
        (&["--request-timeout", "inf"], "--request-timeout"),
        (&["--shutdown-grace-sec", "-1"], "--shutdown-grace-sec"),
        (&["--shutdown-grace-sec", "nan"], "--shutdown-grace-sec"),
        (
            &["--ready-check-timeout-sec", "-1"],
            "--ready-check-timeout-sec",
        ),
        (&["--random-input-len", "-8"], "--random-input-len"),
        (&["--port", "70000"], "--port"),
        (&["--plugin-timeout", "0"], "--plugin-timeout"),
    ] {
        fails_fast(args, needle);
    }
}

/// vLLM's ramp-up checks (`main_async` in vllm/benchmarks/serve.py), each naming its flag.
#[test]
fn ramp_up_misuse_is_refused_as_vllm_refuses_it() {
    for (args, needle) in [
        (
            &["--ramp-up-strategy", "linear", "--ramp-up-start-rps", "1"][..],
            "--ramp-up-end-rps",
        ),
        (
            &[
                "--ramp-up-strategy",
                "linear",
                "--ramp-up-start-rps",
                "1",
                "--ramp-up-end-rps",
                "2",
                "--request-rate",
                "5",
            ],
            "--request-rate",
        ),
        (
            &[
                "--ramp-up-strategy",
                "linear",
                "--ramp-up-start-rps",
                "-1",
                "--ramp-up-end-rps",
                "2",
            ],
            "--ramp-up-start-rps",
        ),
        (
            &[
                "--ramp-up-strategy",
                "linear",
                "--ramp-up-start-rps",
                "5",
                "--ramp-up-end-rps",
                "2",
            ],
            "--ramp-up-start-rps (5) must be less than --ramp-up-end-rps (2)",
        ),
        (
            &[
                "--ramp-up-strategy",
                "exponential",
                "--ramp-up-start-rps",
                "0",
                "--ramp-up-end-rps",
                "2",
            ],
            "For exponential ramp-up, --ramp-up-start-rps cannot be 0",
        ),
        (&["--ramp-up-strategy", "sideways"], "--ramp-up-strategy"),
    ] {
        fails_fast(args, needle);
    }
}

#[test]
fn metric_names_goodput_and_percentiles_are_parsed_up_front() {
    for (args, needle) in [
        (
            &["--percentile-metrics", "ttft,nope"][..],
            "--percentile-metrics",
        ),
        (&["--metric-percentiles", "101"], "--metric-percentiles"),
        (&["--metric-percentiles", "p99"], "--metric-percentiles"),
        (&["--goodput", "ttft=5"], "--goodput"),
        (&["--goodput", "ttft:5:6"], "--goodput"),
        (&["--goodput", "latency:5"], "--goodput"),
        (&["--goodput", "ttft:-1"], "--goodput"),
    ] {
        fails_fast(args, needle);
    }
}

#[test]
fn key_value_flags_and_json_must_be_well_formed() {
    for (args, needle) in [
        (&["--header", "novalue"][..], "--header"),
        (&["--header", "bad name=x"], "--header"),
        (&["--header", "x-ok=line\nbreak"], "--header"),
        (&["--metadata", "novalue"], "--metadata"),
        (&["--metadata", "=v"], "--metadata"),
        (&["--backend-option", "novalue"], "--backend-option"),
        (&["--dataset-option", "novalue"], "--dataset-option"),
        (&["--extra-body", "{not json"], "--extra-body"),
        (&["--extra-body", "[1, 2]"], "--extra-body"),
    ] {
        fails_fast(args, needle);
    }
}

#[test]
fn urls_plugins_and_paths_are_checked_before_loading() {
    for (args, needle) in [
        (&["--base-url", "not a url"][..], "--base-url"),
        (&["--endpoint", "v1/completions"], "--endpoint"),
        (&["--dataset-name", "no-such-dataset"], "--dataset-name"),
        (&["--backend", "/nonexistent/backend.wasm"], "--backend"),
        (
            &[
                "--dataset-name",
                "sharegpt",
                "--dataset-path",
                "/nonexistent/data.json",
            ],
            "--dataset-path",
        ),
        (&["--dataset-path", "x.json"], "--dataset-path"),
    ] {
        fails_fast(args, needle);
    }
}

#[test]
fn an_unwritable_result_dir_fails_before_the_run() {
    // /proc exists and is a directory, but nobody, root included, can create files in it:
    // only the probe file can tell.
    fails_fast(
        &["--save-result", "--result-dir", "/proc"],
        "--result-dir /proc",
    );
    // A path through a regular file cannot be created.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, b"").unwrap();
    let below = file.join("results");
    fails_fast(
        &["--append-result", "--result-dir", below.to_str().unwrap()],
        "--result-dir",
    );
    // Permission bits stop everyone but root.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        use std::os::unix::fs::PermissionsExt;
        let ro = dir.path().join("read-only");
        std::fs::create_dir(&ro).unwrap();
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
        fails_fast(
            &["--save-result", "--result-dir", ro.to_str().unwrap()],
            "--result-dir",
        );
    }
    // Nothing is probed (or created) unless a result is to be saved: this run gets past
    // the flags and fails later, at the tokenizer.
    let unused = dir.path().join("unused");
    let out = Bench::new()
        .args(["--model", "m", "--base-url", NO_SERVER, "--tokenizer"])
        .arg(dir.path().join("none"))
        .arg("--result-dir")
        .arg(&unused)
        .run()
        .assert_failure();
    assert!(out.stderr.contains("--tokenizer"), "{out}");
    assert!(!unused.exists());
}

#[test]
fn a_missing_or_corrupt_tokenizer_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-tokenizer");
    let missing = missing.to_str().unwrap();
    fails_fast(&["--tokenizer", missing], missing);

    let corrupt = dir.path().join("broken");
    std::fs::create_dir(&corrupt).unwrap();
    let file = corrupt.join("tokenizer.json");
    std::fs::write(&file, b"{\"model\": {\"type\": \"BPE\", \"vocab\": ").unwrap();
    let out = Bench::new()
        .args(["--model", "m", "--base-url", NO_SERVER, "--tokenizer"])
        .arg(&corrupt)
        .run()
        .assert_failure();
    assert!(out.stderr.contains("--tokenizer"), "{out}");
    assert!(out.stderr.contains(file.to_str().unwrap()), "{out}");

    // A directory without tokenizer.json says so.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    fails_fast(
        &["--tokenizer", empty.to_str().unwrap()],
        "has no tokenizer.json",
    );
}

#[test]
fn negative_sampling_values_pass_through_as_in_vllm() {
    // vLLM forwards these unchecked (top_k -1 means "no limit" to vLLM's server): the run
    // gets past the flags and only fails later, at the missing tokenizer.
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none");
    let out = Bench::new()
        .args(["--model", "m", "--base-url", NO_SERVER])
        .args(["--top-k", "-1", "--temperature", "-0.5", "--tokenizer"])
        .arg(&missing)
        .run()
        .assert_failure();
    let err = &out.stderr;
    assert!(err.contains("--tokenizer"), "{out}");
    assert!(
        !err.contains("--top-k") && !err.contains("--temperature"),
        "{out}"
    );
}
