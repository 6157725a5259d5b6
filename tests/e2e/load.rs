//! Scale: ten thousand streaming requests in flight at once against the mock server,
//! without running out of file descriptors or ports.

use std::time::Duration;

use crate::common::*;

const REQUESTS: u64 = 10_000;

#[test]
fn ten_thousand_concurrent_streams_all_complete() {
    // This process serves every connection, so it needs the descriptors too; `bench`
    // raises its own limit the same way.
    let soft = raise_open_file_limit();
    let needed = REQUESTS + 2 * bench::cli::limits::FD_MARGIN;
    assert!(
        soft >= needed,
        "this test needs {needed} open files in the test process but the hard limit allows \
         only {soft}; raise it (ulimit -Hn {needed}) to run it"
    );
    // Every request is held open for 3 s before its first token, so all of them are in
    // flight together once connected; then 4 tokens 10 ms apart.
    let m = mock(bench::mock::MockConfig {
        ttft: Duration::from_secs(3),
        itl: Duration::from_millis(10),
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let n = REQUESTS.to_string();
    let out = bench(&[
        "--backend",
        "openai",
        "--model",
        "mock",
        "--tokenizer",
        &gpt2(),
        "--base-url",
        &m.url,
        "--random-input-len",
        "4",
        "--random-output-len",
        "4",
        "--num-prompts",
        &n,
        "--save-result",
        "--result-dir",
        dir.path().to_str().unwrap(),
        "--disable-tqdm",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let r = result_json(dir.path());
    assert_eq!(r["completed"], REQUESTS, "{}", text(&out));
    assert_eq!(r["failed"], 0);
    assert_eq!(r["total_output_tokens"], 4 * REQUESTS);
    // Peak overlap of the requests' [start, end] intervals: how many were really open at
    // the same time.
    let peak = r["max_concurrent_requests"].as_u64().unwrap();
    assert!(
        peak >= REQUESTS * 9 / 10,
        "only {peak} requests were in flight at once"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("Too many open files"), "{stderr}");
}

#[test]
fn a_concurrency_beyond_the_open_file_limit_fails_before_the_run() {
    // Beyond any open-file limit Linux allows (fs.nr_open is below 2^31).
    let out = bench(&[
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:9",
        "--num-prompts",
        "4000000000",
        "--max-concurrency",
        "4000000000",
    ]);
    assert!(!out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--max-concurrency 4000000000"), "{err}");
    assert!(err.contains("ulimit -n"), "{err}");
    // Failed up front: nothing was loaded, no request was sent.
    assert!(!String::from_utf8_lossy(&out.stdout).contains("Starting main benchmark run"));
}
