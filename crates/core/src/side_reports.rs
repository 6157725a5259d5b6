//! What a serve run's caller measured beside the requests: the reports that
//! [`crate::metrics::calculate`] cannot compute from records, because they come from
//! somewhere else (the server's `/metrics`, the GPUs, the probes sent beside the run, the
//! prompts as tokens, a merged run's shards, the client process itself). Reports show them
//! next to the metrics; keeping them out of [`Metrics`](crate::metrics::Metrics) keeps the
//! metrics below the modules that measure them.

use crate::gpu_telemetry::GpuReport;
use crate::metrics::ClientCpu;
use crate::prefix_reuse::PrefixReuse;
use crate::probe::ProbeStats;
use crate::server_metrics::report::ServerReport;
use crate::shard::diagnostics::ShardDiagnostics;

/// The reports measured beside one run's records; [`SideReports::default`] has none.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SideReports {
    /// What the server's own `/metrics` said about the run, when it exposes metrics bench
    /// knows.
    pub server_metrics: Option<ServerReport>,
    /// A run with several endpoints (`--base-url` repeated): each one's `/metrics` report,
    /// in endpoint order (`None` where its server had none bench knows); empty with one
    /// endpoint, whose report is `server_metrics`.
    pub endpoint_server_metrics: Vec<Option<ServerReport>>,
    /// What the GPUs of this machine did during the run (utilisation, memory, power,
    /// energy), where NVIDIA's management library is present.
    pub gpu: Option<GpuReport>,
    /// The workload's own prefix reuse, from the prompts sent ([`crate::prefix_reuse`]);
    /// `None` without a tokenizer or with `--prefix-cache-block-size 0`.
    pub prefix_reuse: Option<PrefixReuse>,
    /// `--probe-request-rate`: vLLM's statistics of the probes sent beside the run (never
    /// among the records); `None` without probes, or when none succeeded.
    pub probe: Option<ProbeStats>,
    /// A merged run (`bench merge`, `--workers`): each shard's client, in shard order;
    /// empty for a run of one process. Set by [`crate::shard::merge::merge`].
    pub shards: Vec<ShardDiagnostics>,
    /// The client's own CPU use during the run.
    pub client_cpu: Option<ClientCpu>,
    /// Which HTTP client sent the requests (`h1` or `reqwest`); `None` for the native
    /// engine.
    pub http_client: Option<&'static str>,
    /// The most sequences the native engine ran in one batch, by its own count; for the
    /// native engine only.
    pub engine_peak_sequences: Option<usize>,
}
