//! The examples under `examples/` build as their authors would build them and run in
//! `bench serve` as `.wasm` files: the Rust ones against `sdk/` alone, outside the
//! workspace; the Python and JavaScript ones with componentize-py and componentize-js
//! (installed by `scripts/plugin-tools.sh`) and the helpers in `sdk/python` and `sdk/js`.
//!
//! Each example is built once per test process. Without the Python and JavaScript tools the
//! tests that need them fail, saying how to install them, unless `BENCH_SKIP_PLUGIN_TOOLS=1`
//! (set by `.ci/run` when PyPI or npm cannot be reached), when they pass with a note (see
//! [`plugin_tools::tool`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

use crate::common::*;

/// Builds the Rust example in `examples/<dir>` for wasm32-wasip2 and returns its `.wasm`
/// (`<lib>.wasm`). The examples share one target directory, so the SDK and its
/// dependencies build once for both.
fn build_rust(dir: &str, lib: &str) -> PathBuf {
    let example = repo().join("examples").join(dir);
    let target = repo().join("target/example-plugin");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(cargo);
    build
        .current_dir(&example)
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--target-dir",
        ])
        .arg(&target);
    // The outer build's settings are for the host, not for this wasm build (.ci/run builds
    // the host with clippy's driver as its compiler and warnings denied).
    for var in ["CARGO_TARGET_DIR", "RUSTC_WORKSPACE_WRAPPER", "CLIPPY_ARGS"] {
        build.env_remove(var);
    }
    run_build(build, &example);
    let wasm = target.join(format!("wasm32-wasip2/release/{lib}.wasm"));
    assert!(wasm.exists(), "{} missing", wasm.display());
    wasm
}

/// Runs a build command, failing the test with its output when it fails.
fn run_build(mut command: Command, what: &Path) {
    let out = command.output().expect("running the build");
    assert!(
        out.status.success(),
        "building {}:\n{}\n{}",
        what.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn lines_wasm() -> PathBuf {
    static WASM: OnceLock<PathBuf> = OnceLock::new();
    WASM.get_or_init(|| build_rust("dataset-lines", "dataset_lines"))
        .clone()
}

fn tgi_wasm() -> PathBuf {
    static WASM: OnceLock<PathBuf> = OnceLock::new();
    WASM.get_or_init(|| build_rust("backend-tgi", "backend_tgi"))
        .clone()
}

/// Builds a Python or JavaScript example with its own `build.sh`, into `target/examples`.
fn build_with_script(dir: &str, wasm: &str) -> PathBuf {
    let out = repo().join("target/examples").join(wasm);
    let mut build = Command::new("bash");
    build
        .arg(repo().join("examples").join(dir).join("build.sh"))
        .arg(&out);
    run_build(build, &repo().join("examples").join(dir));
    out
}

fn python_wasm() -> PathBuf {
    static WASM: OnceLock<PathBuf> = OnceLock::new();
    WASM.get_or_init(|| build_with_script("dataset-python", "dataset_python.wasm"))
        .clone()
}

fn js_wasm() -> PathBuf {
    static WASM: OnceLock<PathBuf> = OnceLock::new();
    WASM.get_or_init(|| build_with_script("dataset-js", "dataset_js.wasm"))
        .clone()
}

/// What the mock server received, by request id: bench sends `x-session-id` on every
/// request of these runs (`--header`), so the mock keeps each body. The ready check sends
/// request 0 once more; the same body, kept once.
fn bodies(m: &Mock) -> BTreeMap<String, Value> {
    m.server
        .as_ref()
        .unwrap()
        .sessions()
        .into_iter()
        .map(|s| {
            let id = s.request_id.expect("bench sends x-request-id");
            (id, serde_json::from_slice(&s.body).unwrap())
        })
        .collect()
}

/// `--header x-session-id=...`: see [`bodies`].
const KEEP_BODIES: [&str; 2] = ["--header", "x-session-id=examples"];

/// The numbers of a per-request list of a result, in request order.
fn counts(r: &Value, key: &str) -> Vec<u64> {
    r[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {r}"))
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect()
}

/// What the GPT-2 tokenizer counts in `texts` (with special tokens, as the datasets ask).
fn gpt2_tokens(texts: &[&str]) -> u64 {
    let tokenizer = bench::tokenizer::Tokenizer::load(&gpt2()).unwrap();
    texts
        .iter()
        .map(|t| tokenizer.encode(t, true).unwrap().len() as u64)
        .sum()
}

#[test]
fn third_party_dataset_plugin_builds_and_runs() {
    gate::enter();
    let wasm = lines_wasm();

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
    let wasm = lines_wasm();
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

/// The example backend (examples/backend-tgi) speaks TGI's `/generate_stream` to the mock:
/// the bodies carry the prompts of the example dataset (examples/dataset-lines, so two
/// third-party plugins in one run) with its output length, and the decoder gets what the
/// first-party `tgi` backend gets from the same server, timed per token.
#[test]
fn third_party_backend_plugin_speaks_tgi() {
    gate::enter();
    let (backend, dataset) = (tgi_wasm(), lines_wasm());
    let dir = tempfile::tempdir().unwrap();
    let prompts = dir.path().join("prompts.txt");
    let lines = [
        "Tell me a story.",
        "What is the capital of France?",
        "Count to ten.",
    ];
    std::fs::write(&prompts, lines.join("\n")).unwrap();
    let m = mock(Default::default());
    let run = |backend: &Path, prefix: &str, extra: &[&str]| {
        let out = Bench::against(&m.url)
            .arg("--backend")
            .arg(backend)
            .arg("--plugin")
            .arg(&dataset)
            .arg("--dataset-path")
            .arg(&prompts)
            .args(["--output-len", "6", "--request-id-prefix", prefix])
            .args(KEEP_BODIES)
            .args(extra)
            .prompts(3)
            .save_detailed()
            .run()
            .assert_success();
        let r = out.json();
        assert_eq!(r["completed"], 3, "{out}");
        assert_eq!(r["failed"], 0, "{out}");
        r
    };
    let r = run(&backend, "ex-", &["--tgi-sse-temperature", "0.5"]);
    let first_party = run(Path::new("tgi"), "fp-", &[]);

    // Six tokens per request, each its own timing point: five gaps.
    assert_eq!(r["total_output_tokens"], 18, "{r}");
    assert_eq!(counts(&r, "output_lens"), [6, 6, 6]);
    for gaps in r["itls"].as_array().unwrap() {
        assert_eq!(gaps.as_array().unwrap().len(), 5, "{r}");
    }
    assert_eq!(
        r["generated_texts"], first_party["generated_texts"],
        "the example's text differs from the first-party tgi backend's"
    );
    assert!(
        r["generated_texts"][0]
            .as_str()
            .is_some_and(|t| !t.is_empty()),
        "{r}"
    );
    // The server's side: TGI's body, the dataset's prompts, in order.
    let bodies = bodies(&m);
    for (i, line) in lines.iter().enumerate() {
        let body = &bodies[&format!("ex-{i}")];
        assert_eq!(body["inputs"], *line, "{body}");
        let parameters = &body["parameters"];
        assert_eq!(parameters["max_new_tokens"], 6, "{body}");
        assert_eq!(parameters["details"], true, "{body}");
        assert_eq!(parameters["temperature"], 0.5, "{body}");
    }
    // Each request the server streamed is in its record, under bench's request id.
    let records = m.server.as_ref().unwrap().requests();
    for i in 0..3 {
        let id = format!("ex-{i}");
        let record = records.iter().find(|rec| rec.id == id);
        assert!(
            record.is_some_and(|rec| rec.itl_ms.len() == 5),
            "{id}: {record:?}"
        );
    }
}

/// The Python example (examples/dataset-python): componentize-py builds it with
/// `sdk/python/bench_plugin.py`, and its CSV rows reach the server with their own output
/// lengths; its options are flags, `--output-len` among them.
#[test]
fn python_dataset_plugin_builds_and_runs() {
    if plugin_tools::tool(
        "python_dataset_plugin_builds_and_runs",
        plugin_tools::COMPONENTIZE_PY,
    )
    .is_none()
    {
        return;
    }
    gate::enter();
    let wasm = python_wasm();
    let csv = repo().join("examples/dataset-python/prompts.csv");
    // The file's rows, as CSV reads them (quotes and doubled quotes resolved), and their
    // max_tokens column.
    let rows = [
        ("Write a haiku about a lighthouse in winter.", 12),
        ("Explain, in one paragraph, why the sky is blue.", 40),
        (
            "List three uses of a paperclip that are not holding paper.",
            24,
        ),
        (
            "Translate \"good morning\" into French, Spanish and German.",
            16,
        ),
        (
            "Summarise the plot of a heist film you would like to see.",
            64,
        ),
    ];
    let m = mock(Default::default());
    let run = |prefix: &str, extra: &[&str]| {
        let out = Bench::against(&m.url)
            .arg("--plugin")
            .arg(&wasm)
            .arg("--dataset-path")
            .arg(&csv)
            .args(["--backend", "openai", "--request-id-prefix", prefix])
            .args(KEEP_BODIES)
            .args(extra)
            .prompts(6)
            .save_detailed()
            .run()
            .assert_success();
        let r = out.json();
        assert_eq!(r["completed"], 6, "{out}");
        r
    };
    let r = run("py-", &["--dataset-option", "output-len-column=max_tokens"]);
    let bodies = bodies(&m);
    // Six requests from five rows: the first row again.
    for i in 0..6 {
        let (prompt, max_tokens) = rows[i % rows.len()];
        let body = &bodies[&format!("py-{i}")];
        assert_eq!(body["prompt"], prompt, "{body}");
        assert_eq!(body["max_tokens"], max_tokens, "{body}");
    }
    let want: u64 = (0..6).map(|i| rows[i % rows.len()].1).sum();
    assert_eq!(r["total_output_tokens"], want, "{r}");
    // The prompt lengths came from the run's tokenizer, through the plugin's import.
    let prompts: Vec<&str> = (0..6).map(|i| rows[i % rows.len()].0).collect();
    assert_eq!(
        r["input_tokens_dataset_count"],
        gpt2_tokens(&prompts),
        "{r}"
    );

    // The general --output-len sets the plugin's output-len option.
    let general = run("gen-", &["--output-len", "3"]);
    assert_eq!(counts(&general, "output_lens"), [3; 6], "{general}");
    // A column the file lacks is refused, naming the file's columns.
    let missing = Bench::against(&m.url)
        .arg("--plugin")
        .arg(&wasm)
        .arg("--dataset-path")
        .arg(&csv)
        .args(["--csv-prompt-column", "text"])
        .prompts(1)
        .run()
        .assert_failure();
    assert!(
        missing.stderr.contains("no column 'text'")
            && missing.stderr.contains("id, prompt, max_tokens"),
        "{missing}"
    );
}

/// The JavaScript example (examples/dataset-js): componentize-js builds it with
/// `sdk/js/bench-plugin.js`, and its JSONL lines (the system text before the prompt where a
/// line has one, blank lines skipped) reach the server.
#[test]
fn javascript_dataset_plugin_builds_and_runs() {
    if plugin_tools::tool(
        "javascript_dataset_plugin_builds_and_runs",
        plugin_tools::COMPONENTIZE_JS,
    )
    .is_none()
    {
        return;
    }
    gate::enter();
    let wasm = js_wasm();
    let prompts = [
        "Describe the smell of rain on hot stone.",
        "You are a patient maths teacher.\nWhy is zero not a prime number?",
        "Name a bird that cannot fly and say why.",
        "Write the opening line of a detective story set on a ferry.",
    ];
    let m = mock(Default::default());
    let out = Bench::against(&m.url)
        .arg("--plugin")
        .arg(&wasm)
        .arg("--dataset-path")
        .arg(repo().join("examples/dataset-js/prompts.jsonl"))
        .args(["--backend", "openai", "--request-id-prefix", "js-"])
        .args(["--jsonl-output-len", "9", "--output-len", "5"])
        .args(KEEP_BODIES)
        .prompts(4)
        .save_detailed()
        .run()
        .assert_success();
    let r = out.json();
    assert_eq!(r["completed"], 4, "{out}");
    // vLLM's rule: the general flag wins over the dataset's own.
    assert_eq!(r["total_output_tokens"], 20, "{r}");
    let bodies = bodies(&m);
    for (i, prompt) in prompts.iter().enumerate() {
        let body = &bodies[&format!("js-{i}")];
        assert_eq!(body["prompt"], *prompt, "{body}");
        assert_eq!(body["max_tokens"], 5, "{body}");
    }
    assert_eq!(
        r["input_tokens_dataset_count"],
        gpt2_tokens(&prompts),
        "{r}"
    );
}

/// componentize-js adds `wasi:http` unless told not to; bench refuses such a plugin at
/// load time, naming the import and the flag that removes it.
#[test]
fn a_javascript_plugin_built_with_wasi_http_is_refused_naming_the_flag() {
    let Some(componentize_js) = plugin_tools::tool(
        "a_javascript_plugin_built_with_wasi_http_is_refused_naming_the_flag",
        plugin_tools::COMPONENTIZE_JS,
    ) else {
        return;
    };
    gate::enter();
    let out = repo().join("target/examples/dataset_js_with_http.wasm");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let mut build = Command::new(componentize_js);
    // From the repository's root, as examples/dataset-js/build.sh runs it, without its
    // `-d http fetch-event`.
    build
        .current_dir(repo())
        .args(["--wit", "wit/current", "-n", "dataset-plugin", "-o"])
        .arg(&out)
        .arg("examples/dataset-js/dataset.js");
    run_build(build, &out);
    let refused = Bench::new()
        .args(["plugin", "inspect"])
        .arg(&out)
        .run()
        .assert_failure();
    assert!(
        refused.stderr.contains("wasi:http") && refused.stderr.contains("-d http fetch-event"),
        "{refused}"
    );
}
