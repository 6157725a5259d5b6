//! `bench-study`: bench beyond one run. A run is `bench-core`'s (`bench_core::benchmark`);
//! everything here is about several of them, or about runs already made:
//!
//! - [`runs`]: `bench serve --num-runs N`, the same run in a row and the spread of every
//!   figure over them;
//! - [`results`]: result files read back (bench's and vLLM's), for the readers below;
//! - [`plot`], [`html_report`] and [`compare`]: charts, the one-page HTML report and
//!   `bench compare`, from result files;
//! - [`sweep`] and [`startup`]: vLLM's `bench sweep` and `bench startup`, over server
//!   commands that [`server_process`] starts and stops;
//! - [`k8s`]: a sharded run's manifests for Kubernetes;
//! - [`selfcheck`]: the client's ceiling and timing error at increasing concurrency,
//!   against the built-in mock server (crate `bench-mock`).
//!
//! The dependency runs one way: this crate uses the core, the core knows nothing of it.

pub mod compare;
pub mod html_report;
pub mod k8s;
pub mod plot;
pub mod results;
pub mod runs;
pub mod selfcheck;
pub mod server_process;
pub mod startup;
pub mod sweep;
