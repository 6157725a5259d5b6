//! `bench`: a benchmark platform for LLM inference servers.
//!
//! The host owns the network, the clock and all I/O; dataset and backend plugins are
//! WebAssembly components (see `wit/`) that turn data into requests and bytes into events.

pub mod benchmark;
pub mod cli;
pub mod client;
pub mod metrics;
pub mod mock;
pub mod observer;
pub mod pyjson;
pub mod record;
pub mod report;
pub mod runtime;
pub mod schedule;
pub mod server_metrics;
pub mod server_tokenizer;
pub mod target;
pub mod tokenizer;
pub mod workload;
