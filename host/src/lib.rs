//! `bench`: a benchmark platform for LLM inference servers.
//!
//! The host owns the network, the clock and all I/O; dataset and backend plugins are
//! WebAssembly components (see `wit/`) that turn data into requests and bytes into events.

pub mod benchmark;
pub mod cli;
pub mod client;
pub mod metrics;
pub mod observer;
pub mod pyjson;
pub mod record;
pub mod report;
pub mod schedule;
pub mod server_metrics;
pub mod server_tokenizer;
pub mod target;
pub mod workload;

// The crates below the core, under the names the code and the tests use.
/// The mock server (crate `bench-mock`).
pub use bench_mock as mock;
/// The plugin runtime (crate `bench-runtime`).
pub use bench_runtime as runtime;
/// The run's tokenizer (crate `bench-tokenizer`).
pub use bench_tokenizer as tokenizer;
