//! `bench plugin new` writes a project, in each language and for each plugin kind, that
//! builds with the language's real tool and whose own `test.sh`, unchanged, benchmarks the
//! plugin against `bench mock-server` with every request completed; and a Python or
//! JavaScript plugin's unexpected exception reaches the user as its own message and
//! traceback (the language helpers' `guard`).
//!
//! componentize-py and componentize-js are found where `scripts/plugin-tools.sh` installs
//! them (`common::plugin_tools`); when they are missing these tests fail saying so, unless
//! `BENCH_SKIP_PLUGIN_TOOLS=1` skips them. The generated scripts find them there too.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::*;

/// Whether the tool that builds `lang` plugins is there (see `plugin_tools::tool`: a
/// missing one fails the test unless `BENCH_SKIP_PLUGIN_TOOLS=1`).
fn tool_ready(test: &str, lang: &str) -> bool {
    match lang {
        "python" => plugin_tools::tool(test, plugin_tools::COMPONENTIZE_PY).is_some(),
        "js" => plugin_tools::tool(test, plugin_tools::COMPONENTIZE_JS).is_some(),
        _ => true,
    }
}

/// The folder of the generated projects' shared build output (the Rust ones share one
/// target directory, so the SDK compiles once) and compiled-plugin cache.
fn shared_dir() -> PathBuf {
    repo().join("target/plugin-new")
}

/// `bench plugin new NAME --kind KIND --lang LANG --dir PARENT/NAME`; returns the project.
fn new_project(parent: &Path, name: &str, kind: &str, lang: &str) -> PathBuf {
    let dir = parent.join(name);
    Bench::new()
        .args([
            "plugin", "new", name, "--kind", kind, "--lang", lang, "--dir",
        ])
        .arg(&dir)
        .run()
        .assert_success();
    dir
}

/// Runs a program in `project` as an author would, with the bench under test and no
/// `BENCH_TOKENIZER`: `test.sh` defaults to this checkout's GPT-2 tokenizer (no network:
/// cargo works offline from its cache).
fn run_in(project: &Path, program: &str, args: &[&str]) -> Output {
    gate::enter();
    let mut command = Command::new(program);
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("BENCH_") && key != "BENCH_PLUGIN_TOOLS" {
            command.env_remove(key);
        }
    }
    // Nor the settings of bench's own build (.ci/run builds it with clippy's driver as
    // its compiler and warnings denied): an author's cargo has none of them.
    for key in ["RUSTC_WORKSPACE_WRAPPER", "CLIPPY_ARGS"] {
        command.env_remove(key);
    }
    let output = command
        .current_dir(project)
        .args(args)
        .env("BENCH", env!("CARGO_BIN_EXE_bench"))
        .env("BENCH_CACHE_DIR", shared_dir().join("cache"))
        .env("BENCH_LOG", "warn")
        .env("CARGO_TARGET_DIR", shared_dir().join("target"))
        .env("CARGO_NET_OFFLINE", "true")
        .output()
        .unwrap_or_else(|e| panic!("running {program} in {}: {e}", project.display()));
    assert!(
        output.status.success(),
        "{program} {args:?} in {} failed ({}):\n{}\n{}",
        project.display(),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A new project passes its own test: it builds, and a benchmark of 8 requests with it
/// against the mock completes all 8 (test.sh checks the result file's counts).
fn generated_project_passes_its_test(kind: &str, lang: &str) {
    let name = format!("my-{lang}-{kind}");
    if !tool_ready(&name, lang) {
        return;
    }
    let parent = tempfile::tempdir().unwrap();
    let project = new_project(parent.path(), &name, kind, lang);
    let out = run_in(&project, "./test.sh", &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("test.sh: OK: 8 of 8 requests completed"),
        "{stdout}"
    );
    if lang == "rust" {
        // The template's unit tests run natively.
        let out = run_in(&project, "cargo", &["test"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("test result: ok. 2 passed"), "{stdout}");
    }
}

#[test]
fn rust_dataset_project_builds_and_passes_its_test() {
    generated_project_passes_its_test("dataset", "rust");
}

#[test]
fn rust_backend_project_builds_and_passes_its_test() {
    generated_project_passes_its_test("backend", "rust");
}

#[test]
fn python_dataset_project_builds_and_passes_its_test() {
    generated_project_passes_its_test("dataset", "python");
}

#[test]
fn python_backend_project_builds_and_passes_its_test() {
    generated_project_passes_its_test("backend", "python");
}

#[test]
fn js_dataset_project_builds_and_passes_its_test() {
    generated_project_passes_its_test("dataset", "js");
}

#[test]
fn js_backend_project_builds_and_passes_its_test() {
    generated_project_passes_its_test("backend", "js");
}

/// Builds a dataset project whose `open` fails unexpectedly where `marker` says (the line
/// that reads the options), with `failure` inserted before it.
fn failing_dataset(
    parent: &Path,
    lang: &str,
    source: &str,
    marker: &str,
    failure: &str,
) -> PathBuf {
    let project = new_project(parent, &format!("failing-{lang}"), "dataset", lang);
    let path = project.join(source);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(marker), "{source} has no `{marker}`:\n{text}");
    std::fs::write(
        &path,
        text.replacen(marker, &format!("{failure}{marker}"), 1),
    )
    .unwrap();
    run_in(&project, "./build.sh", &[]);
    project
}

/// Runs the dataset plugin of `project` to its end with `args` and returns what it printed.
fn run_dataset(project: &Path, wasm: &str, args: &[&str]) -> Run {
    Bench::against("http://127.0.0.1:9")
        .arg("--plugin")
        .arg(project.join(wasm))
        .args(args)
        .env("BENCH_CACHE_DIR", shared_dir().join("cache"))
        .prompts(2)
        .run()
}

/// An exception the plugin did not expect is an `internal` error carrying the plugin's own
/// message and traceback; the errors it raises on purpose keep their kind.
fn errors_show_the_plugins_message(lang: &str, source: &str, marker: &str, failure: &str) {
    if !tool_ready(&format!("{lang} exception"), lang) {
        return;
    }
    let parent = tempfile::tempdir().unwrap();
    let project = failing_dataset(parent.path(), lang, source, marker, failure);
    let wasm = format!("failing-{lang}.wasm");
    let prompts = project.join("prompts.txt");
    let prompts = prompts.to_str().unwrap();

    let out = run_dataset(&project, &wasm, &["--dataset-path", prompts]);
    assert!(!out.status.success(), "{out}");
    let shown = format!(
        "plugin '{}': open: internal error:",
        project.join(&wasm).display()
    );
    assert!(out.stderr.contains(&shown), "{out}");
    // The plugin's own exception, and where it was raised in the plugin's source.
    assert!(out.stderr.contains("the test's own failure 42"), "{out}");
    assert!(
        out.stderr.contains(&format!("{source}\", line "))
            || out.stderr.contains(&format!("{source}:")),
        "{out}"
    );
    assert!(!out.stderr.contains("trapped"), "{out}");
    assert!(!out.stderr.contains("invalid variant tag"), "{out}");
}

#[test]
fn a_python_plugins_exception_shows_its_message_and_traceback() {
    errors_show_the_plugins_message(
        "python",
        "dataset.py",
        "        output_len = read_options(",
        "        int(\"the test's own failure 42\")\n",
    );
}

#[test]
fn a_js_plugins_exception_shows_its_message_and_stack() {
    errors_show_the_plugins_message(
        "js",
        "dataset.js",
        "    const outputLen = readOptions(",
        "    (function parse() { throw new RangeError(\"the test's own failure 42\"); })();\n",
    );
}

/// The errors a plugin raises on purpose with the helpers keep their kind and message: an
/// unknown option (named), and a file without prompts.
#[test]
fn deliberate_errors_keep_their_kind() {
    for (lang, source) in [("python", "dataset.py"), ("js", "dataset.js")] {
        if !tool_ready("deliberate_errors_keep_their_kind", lang) {
            continue;
        }
        let parent = tempfile::tempdir().unwrap();
        let name = format!("deliberate-{lang}");
        let project = new_project(parent.path(), &name, "dataset", lang);
        run_in(&project, "./build.sh", &[]);
        let wasm = format!("{name}.wasm");
        let prompts = project.join("prompts.txt");
        let out = run_dataset(
            &project,
            &wasm,
            &[
                "--dataset-path",
                prompts.to_str().unwrap(),
                "--dataset-option",
                "colour=red",
            ],
        );
        assert!(
            out.stderr.contains(&format!(
                "open: invalid configuration: {name}: unknown option 'colour' (known: output-len)"
            )),
            "{source}: {out}"
        );
        let empty = project.join("empty.txt");
        std::fs::write(&empty, "\n  \n").unwrap();
        let out = run_dataset(
            &project,
            &wasm,
            &["--dataset-path", empty.to_str().unwrap()],
        );
        assert!(
            out.stderr.contains(&format!(
                "open: invalid input: {name}: {} has no non-empty line",
                empty.display()
            )),
            "{source}: {out}"
        );
    }
}

/// What `bench plugin new` refuses: a directory that holds something, a bad name, and a
/// Rust project without an SDK to depend on.
#[test]
fn plugin_new_refuses_what_it_cannot_write() {
    let parent = tempfile::tempdir().unwrap();
    let taken = parent.path().join("taken");
    std::fs::create_dir(&taken).unwrap();
    std::fs::write(taken.join("keep.txt"), "mine").unwrap();
    let out = Bench::new()
        .args([
            "plugin", "new", "lines", "--kind", "dataset", "--lang", "python", "--dir",
        ])
        .arg(&taken)
        .run();
    assert!(!out.status.success(), "{out}");
    assert!(
        out.stderr
            .contains(&format!("{} is not empty", taken.display())),
        "{out}"
    );
    assert_eq!(std::fs::read_dir(&taken).unwrap().count(), 1);

    let out = Bench::new()
        .args([
            "plugin", "new", "My_Lines", "--kind", "dataset", "--lang", "js",
        ])
        .run();
    assert!(!out.status.success(), "{out}");
    assert!(out.stderr.contains("plugin name 'My_Lines'"), "{out}");

    let missing = parent.path().join("no-sdk");
    let out = Bench::new()
        .args([
            "plugin", "new", "lines", "--kind", "dataset", "--lang", "rust", "--dir",
        ])
        .arg(parent.path().join("lines"))
        .arg("--sdk")
        .arg(&missing)
        .run();
    assert!(!out.status.success(), "{out}");
    assert!(
        out.stderr
            .contains(&format!("{} (--sdk) has no Cargo.toml", missing.display())),
        "{out}"
    );
}

/// A Rust project depends on the SDK of the checkout bench was built from, by path.
#[test]
fn a_rust_project_depends_on_the_sdk_bench_was_built_from() {
    let parent = tempfile::tempdir().unwrap();
    let project = new_project(parent.path(), "lines", "dataset", "rust");
    let manifest = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
    let sdk = std::fs::canonicalize(repo().join("sdk")).unwrap();
    assert!(
        manifest.contains(&format!("bench-sdk = {{ path = \"{}\" }}", sdk.display())),
        "{manifest}"
    );
}
