//! The end-to-end tests: the real `bench` binary (and the library's plugin runtime) against
//! loopback servers, the fixture plugins and the test data. One test binary: every file in
//! this folder is a module declared below, and `every_test_file_is_a_module` fails when one
//! is not, so a new file cannot be left out of the build.
//!
//! Run one file's tests with `cargo test -p bench --test e2e <module>::`, one test with
//! `cargo test -p bench --test e2e <name>`.

#[path = "../common/mod.rs"]
mod common;

mod accuracy;
mod backends_anthropic;
mod backends_openai_api;
mod backends_pooling;
mod backends_servers;
mod cancellation;
mod compare;
mod confidence;
mod console;
mod contract_versions;
mod conversations;
mod cost;
mod dashboard;
mod datasets_audio;
mod datasets_hf;
mod datasets_random;
mod datasets_text;
mod datasets_traces;
mod datasets_vllm;
mod decode_spans;
mod duration;
mod endpoints;
mod examples;
mod faults;
mod help;
mod interrupts;
mod k8s;
mod live_metrics;
mod load;
mod multi_turn;
mod offline;
mod otlp;
mod plots;
mod plugin_cache;
mod plugin_flags;
mod plugin_new;
mod record_file;
mod report;
mod reproducible;
mod sandbox;
mod scenarios;
mod serve;
mod serve_flags;
mod serve_probe;
mod serve_runs;
mod serve_timing;
mod server_metrics;
mod server_timing;
mod shard;
mod startup;
mod structured_output;
mod sweep;
mod sweep_example;
mod timing_gate;
mod token_accounting;
mod trace_replay;
mod validation;

/// Every `.rs` file in `tests/e2e` is declared as a module of this crate (a file that is
/// not is never compiled, and its tests never run), and no test file lies loose in
/// `tests/`, where no test target builds it.
#[test]
fn every_test_file_is_a_module() {
    let tests = common::repo().join("tests");
    let here = tests.join("e2e");
    let main = std::fs::read_to_string(here.join("main.rs")).unwrap();
    let declared: Vec<&str> = main
        .lines()
        .filter_map(|l| l.strip_prefix("mod ")?.strip_suffix(';'))
        .collect();
    let rust_files = |dir: &std::path::Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "rs"))
            .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let missing: Vec<String> = rust_files(&here)
        .into_iter()
        .filter(|name| name != "main" && !declared.contains(&name.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "tests/e2e/{{{}}}.rs not declared in tests/e2e/main.rs: add `mod NAME;` for each",
        missing.join(",")
    );
    let loose = rust_files(&tests);
    assert!(
        loose.is_empty(),
        "tests/{{{}}}.rs belong to no test target: move them into tests/e2e/ and declare \
         them in tests/e2e/main.rs",
        loose.join(",")
    );
}
