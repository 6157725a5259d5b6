//! The Python and JavaScript component tools that `scripts/plugin-tools.sh` installs into
//! `${BENCH_PLUGIN_TOOLS:-$HOME/.cache/bench-plugin-tools}`, for the tests that build
//! plugins in those languages.

use std::path::PathBuf;

/// componentize-py, in the tools folder.
pub const COMPONENTIZE_PY: &str = "py/bin/componentize-py";
/// componentize-js, in the tools folder.
pub const COMPONENTIZE_JS: &str = "js/node_modules/.bin/componentize-js";

/// The tools folder.
pub fn dir() -> PathBuf {
    match std::env::var_os("BENCH_PLUGIN_TOOLS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
            .join(".cache/bench-plugin-tools"),
    }
}

/// The tool at `tool` ([`COMPONENTIZE_PY`], [`COMPONENTIZE_JS`]) in the tools folder. When
/// it is missing the test fails saying how to install it, unless `BENCH_SKIP_PLUGIN_TOOLS=1`
/// (which `.ci/run` sets when PyPI or npm cannot be reached): then `None`, after a line
/// saying why `test` skips.
pub fn tool(test: &str, tool: &str) -> Option<PathBuf> {
    let path = dir().join(tool);
    if path.exists() {
        return Some(path);
    }
    if std::env::var("BENCH_SKIP_PLUGIN_TOOLS").as_deref() == Ok("1") {
        super::timing::skipped(format_args!(
            "{test}: {} is not installed and BENCH_SKIP_PLUGIN_TOOLS=1 (PyPI or npm could not \
             be reached)",
            path.display()
        ));
        return None;
    }
    panic!(
        "{} is not installed: run scripts/plugin-tools.sh (it installs the pinned Python and \
         JavaScript plugin tools), or set BENCH_SKIP_PLUGIN_TOOLS=1 to skip the tests that \
         need them",
        path.display()
    );
}
