//! A real run's console output, snapshotted (`insta`, in `snapshots/`) with the measured
//! numbers redacted: which lines `bench serve` prints, in what order, with what labels, for
//! a run that takes most of the report's branches. The numbers themselves are pinned by the
//! report's own snapshots (`crates/core/src/report/console_snapshots.rs`).

use bench::mock::MockConfig;

use crate::common::*;

#[test]
fn a_real_runs_console_output_keeps_its_layout() {
    // Every fifth request to arrive fails; one at a time, so always the same ones.
    let m = mock(MockConfig {
        fail_rate: 0.2,
        ..MockConfig::default()
    });
    let out = Bench::against(&m.url)
        .backend("openai-chat")
        .random(16, 8)
        .prompts(10)
        .args(["--max-concurrency", "1", "--request-rate", "200"])
        .args(["--percentile-metrics", "ttft,tpot,itl,e2el"])
        .args(["--metric-percentiles", "50,99", "--goodput", "ttft:1000"])
        .run()
        .assert_success();
    insta::with_settings!({
        filters => vec![
            // The mock's port.
            (r"127\.0\.0\.1:\d+", "127.0.0.1:[port]"),
            // Every measured figure (times, rates, shares), with its column padding.
            (r"(?m)\d+\.\d+ *$", "[measured]"),
        ],
    }, {
        insta::assert_snapshot!(out.stdout);
    });
}
