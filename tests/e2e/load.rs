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
    // Both cores are busy for seconds: alone in this binary, for this test's sake and the
    // others'.
    let _alone = gate::exclusive();
    within_bounds("the peak of requests in flight", || {
        // Every request is held open for 3 s before its first token, so all of them are
        // in flight together once connected; then 4 tokens 10 ms apart.
        let m = mock(bench::mock::MockConfig {
            ttft: Duration::from_secs(3),
            itl: Duration::from_millis(10),
            ..Default::default()
        });
        let out = Bench::against(&m.url)
            .backend("openai")
            .random(4, 4)
            .prompts(REQUESTS)
            .save_result()
            .run()
            .assert_success();
        let r = out.json();
        assert_eq!(r["completed"], REQUESTS, "{out}");
        assert_eq!(r["failed"], 0);
        assert_eq!(r["total_output_tokens"], 4 * REQUESTS);
        assert!(!out.stderr.contains("Too many open files"), "{out}");
        // The exact peak overlap of the requests' [start, end) intervals (vLLM's
        // `max_concurrent_requests` counts whole seconds instead): how many were really
        // open at the same time. All of them, unless sending took longer than the
        // server's 3 s hold.
        let peak = r["peak_concurrent_requests"].as_u64().unwrap();
        assert!(peak <= REQUESTS, "{peak} requests in flight of {REQUESTS}");
        if peak < REQUESTS * 9 / 10 {
            return Err(format!(
                "only {peak} requests were in flight at once (run of {:.2} s)",
                r["duration"].as_f64().unwrap()
            ));
        }
        Ok(())
    });
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
    ])
    .assert_failure();
    assert!(out.stderr.contains("--max-concurrency 4000000000"), "{out}");
    assert!(out.stderr.contains("ulimit -n"), "{out}");
    // Failed up front: nothing was loaded, no request was sent.
    assert!(!out.stdout.contains("Starting main benchmark run"), "{out}");
}
