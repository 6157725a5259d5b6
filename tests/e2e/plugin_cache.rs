//! The compiled-plugin cache: a component is compiled once, with a progress line, and loaded
//! from the cache afterwards; `bench plugin cache dir` and `clear` show and empty it.

use crate::common::*;

/// `bench plugin inspect` of a third-party plugin with `BENCH_CACHE_DIR` set to `cache`.
fn inspect(cache: &std::path::Path, plugin: &str) -> Run {
    Bench::new()
        .args(["plugin", "inspect", plugin])
        .env("BENCH_CACHE_DIR", cache)
        .run()
        .assert_success()
}

fn cache_cmd(cache: &std::path::Path, action: &str) -> Run {
    Bench::new()
        .args(["plugin", "cache", action])
        .env("BENCH_CACHE_DIR", cache)
        .run()
        .assert_success()
}

#[test]
fn a_plugin_compiles_once_with_a_progress_line_and_cache_clear_forgets_it() {
    let cache = tempfile::tempdir().unwrap();
    let plugin = repo().join("tests/fixtures/api-0.4.0/random.wasm");
    let plugin = plugin.to_str().unwrap();

    let first = inspect(cache.path(), plugin);
    assert!(
        first
            .stderr
            .contains(&format!("compiling plugin {plugin}, 0.2 MB")),
        "{first}"
    );
    assert!(first.stderr.contains("cached in"), "{first}");
    let dir = cache_cmd(cache.path(), "dir");
    assert_eq!(dir.stdout.trim(), cache.path().to_str().unwrap());
    assert!(dir.stderr.contains("1 compiled plugins"), "{dir}");

    // The second load maps the compiled copy: no progress line.
    let second = inspect(cache.path(), plugin);
    assert!(!second.stderr.contains("compiling"), "{second}");
    assert_eq!(second.stdout, first.stdout);

    let cleared = cache_cmd(cache.path(), "clear");
    assert!(
        cleared.stdout.starts_with("deleted 1 compiled plugins"),
        "{cleared}"
    );
    assert!(
        cache_cmd(cache.path(), "dir")
            .stderr
            .contains("0 compiled plugins")
    );
    let third = inspect(cache.path(), plugin);
    assert!(third.stderr.contains("compiling plugin"), "{third}");
}

#[test]
fn version_loads_no_plugin() {
    // `bench --version` on a cold cache answers without compiling the default plugins
    // (serve's `random` and `openai`, whose flags `bench --help` shows).
    let cache = tempfile::tempdir().unwrap();
    for args in [&["--version"][..], &["-V"]] {
        let run = Bench::new()
            .args(args)
            .env("BENCH_CACHE_DIR", cache.path())
            .run()
            .assert_success();
        assert!(run.stdout.starts_with("bench "), "{run}");
        assert!(!run.stderr.contains("compiling plugin"), "{run}");
    }
    let dir = cache_cmd(cache.path(), "dir");
    assert!(dir.stderr.contains("0 compiled plugins"), "{dir}");
    // The help still shows the default plugins' flags: they are loaded for it.
    let help = Bench::new()
        .args(["--help"])
        .env("BENCH_CACHE_DIR", cache.path())
        .run()
        .assert_success();
    assert!(help.stdout.contains("--random-input-len"), "{help}");
}
