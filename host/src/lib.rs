//! `bench`: a benchmark platform for LLM inference servers.
//!
//! The host owns the network, the clock and all I/O; dataset and backend plugins are
//! WebAssembly components (see `wit/`) that turn data into requests and bytes into events.
//!
//! This crate is the command line ([`cli`]) over the library core (`bench-core`: one run),
//! `bench-study` (beyond one run) and the crates below them, re-exported here under the
//! names the tests and embedders use.

pub mod cli;

pub use bench_core::{
    benchmark, client, engine, gpu_telemetry, metrics, observer, offline, prefix_reuse, prepare,
    probe, profiler, pyjson, record, report, runtime, schedule, server_metrics, server_tokenizer,
    shard, targets, tokenizer, until_confident, workload,
};
/// The mock server (crate `bench-mock`).
pub use bench_mock as mock;
pub use bench_study::{
    compare, html_report, k8s, plot, results, runs, server_process, startup, sweep,
};
