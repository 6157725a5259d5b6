//! `bench-core`: the library core of `bench`. A benchmark is [`benchmark::serve`]: a
//! resolved, typed configuration in, the run's [`benchmark::Outcome`] out, everything it
//! shows on the way through an [`observer::Observer`]; it prints nothing and reads no
//! environment. The targets it drives ([`targets::Target`]) are an HTTP server and the
//! native engine; [`offline`] holds `bench throughput` and `bench latency`.

pub mod audio_duration;
pub mod benchmark;
pub mod clock_offset;
pub(crate) mod gpu_observer;
pub mod gpu_telemetry;
pub mod grading;
pub mod live_metrics;
pub mod metrics;
pub mod observer;
pub mod offline;
pub mod prefix_reuse;
pub mod prepare;
pub mod probe;
pub mod profiler;
pub mod pyjson;
pub mod report;
pub mod schedule;
pub mod server_metrics;
pub mod server_tokenizer;
pub mod shard;
pub mod side_reports;
pub mod steady_state;
pub mod targets;
pub mod until_confident;
pub mod workload;

// The crates below the core, under the names the code uses.
/// The HTTP client and load generator (crate `bench-client`).
pub use bench_client as client;
/// The native inference engine (crate `bench-engine`, on candle).
pub use bench_engine as engine;
/// What one request produced (crate `bench-record`).
pub use bench_record as record;
/// The plugin runtime (crate `bench-runtime`).
pub use bench_runtime as runtime;
/// The run's tokenizer (crate `bench-tokenizer`).
pub use bench_tokenizer as tokenizer;
