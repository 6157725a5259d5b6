//! A check a test did not make, said where CI shows it.
//!
//! Shared by the end-to-end tests (`tests/common`) and the engine's tests on a real model
//! (`crates/engine/tests/engine`, which include this file by path).

use std::io::Write as _;

/// Reports a skipped check (the machine was busy, or a registry could not be reached), as
/// `SKIPPED: <test>: <why>`:
/// - on stderr directly: `cargo test` captures `eprintln!` and shows it only for a failed
///   test, and a skip must be in every log;
/// - appended to the file `BENCH_SKIP_LOG` names, when set: `cargo nextest` shows a passing
///   test's output not at all, and `.ci/run` lists that file's lines at its end. One
///   `write` of one line to a file opened for appending: lines of tests running at once
///   do not interleave.
pub fn skipped(why: std::fmt::Arguments) {
    let thread = std::thread::current();
    let line = format!("SKIPPED: {}: {why}\n", thread.name().unwrap_or("?"));
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
    if let Some(log) = std::env::var_os("BENCH_SKIP_LOG") {
        let written = std::fs::File::options()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut file| file.write_all(line.as_bytes()));
        if let Err(e) = written {
            panic!(
                "writing a skip to BENCH_SKIP_LOG ({}): {e}",
                std::path::Path::new(&log).display()
            );
        }
    }
}
