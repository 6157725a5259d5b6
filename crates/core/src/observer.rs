//! What a benchmark run has to show, and the trait of whoever shows it.
//!
//! The library prints nothing: every line the run wants seen (vLLM's progress lines,
//! warnings, the progress bar, the result block, where the result was saved) reaches the
//! caller's [`Observer`] as an [`Event`]. The CLI's observer (`cli::console`) prints them
//! exactly as `vllm bench serve` does; a program embedding the library can log them,
//! collect them or drop them.
//!
//! Observers are called a few times per run, never per request: the progress bar is the
//! one thing advanced per request, and that is a concrete [`ProgressBar`] handle the
//! observer hands out (hidden unless it chooses to draw it), not a call back into it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use indicatif::ProgressBar;

use crate::client::live::LiveStats;
use crate::client::stop::StopSignal;
use crate::metrics::Metrics;
use crate::report::RunInfo;
use crate::report::save::Interruption;
use crate::schedule::RampUp;
use crate::server_tokenizer::Alignment;

/// Something a run wants to show, in the order the run reaches it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Event<'a> {
    /// No model was given: the server is asked for its first one.
    FetchingModel,
    /// The server's first model, now the run's model.
    ModelFound {
        id: &'a str,
    },
    /// The dataset plugin has made `made` of `total` requests in `elapsed` (after each
    /// batch, a few times a second at most).
    Preparing {
        made: u64,
        total: u64,
        elapsed: Duration,
    },
    /// The workload is ready: `requests` made in `took`.
    Prepared {
        requests: usize,
        took: Duration,
    },
    /// What the re-alignment of the prompts to the server's tokenizer did.
    Alignment(&'a Alignment),
    /// The readiness check (one request that must succeed) starts.
    ReadyCheckStarted,
    ReadyCheckPassed,
    /// No readiness check was asked for.
    ReadyCheckSkipped,
    /// Warm-up requests are sent (before the clock, excluded from the statistics).
    WarmUpStarted {
        requests: u32,
    },
    WarmUpDone,
    /// The measured run starts now, with this schedule and concurrency cap.
    RunStarting {
        /// Requests per second; infinite for all at once.
        request_rate: f64,
        burstiness: f64,
        ramp_up: Option<&'a RampUp>,
        max_concurrency: Option<usize>,
        /// Requests go at the dataset's send times (trace replay), not by rate.
        self_timed: bool,
        /// `--duration`: the run sends for this long; `None`: it sends its workload once.
        duration: Option<std::time::Duration>,
    },
    /// `--profile`: the server's profiler is being started or stopped, or it answered.
    /// A call that fails is a [`Event::Warning`] instead of the answer.
    Profiler(crate::profiler::ProfilerStep),
    /// `--probe-request-rate`: the probe loop starts beside the run, at `rate` probes per
    /// second.
    ProbeStarting {
        rate: f64,
    },
    /// Something the user should know about the run's numbers.
    Warning(&'a str),
    /// A remark about the run that is not a problem (what the server's own counters say).
    Note(&'a str),
    /// The run's metrics and what was measured beside them, for vLLM's result block.
    Results {
        metrics: &'a Metrics,
        side: &'a crate::side_reports::SideReports,
        run: &'a RunInfo,
    },
    /// The run was stopped before its workload ended; `requests` is the workload's size
    /// and `grace` the time requests in flight were given to finish.
    Interrupted {
        interruption: &'a Interruption,
        requests: usize,
        grace: Duration,
    },
    /// The native engine loaded its model.
    EngineLoaded {
        info: &'a crate::engine::ModelInfo,
    },
    /// `bench latency`: an iteration of the batch finished in `seconds` (`index` from 0,
    /// of `of` warm-up or measured iterations).
    LatencyIteration {
        warm_up: bool,
        index: usize,
        of: usize,
        seconds: f64,
    },
    /// `bench throughput`'s result, for vLLM's lines.
    ThroughputResults(&'a crate::report::offline::ThroughputResult),
    /// `bench latency`'s result, for vLLM's lines.
    LatencyResults(&'a crate::report::offline::LatencyResult),
    /// The result was written to `path`.
    Saved {
        path: &'a Path,
        interrupted: bool,
    },
}

/// Receives what a run shows. Only [`Observer::event`] is required: by default the
/// progress bar is hidden and nothing is done when the measured run starts.
pub trait Observer {
    fn event(&mut self, event: Event<'_>);

    /// The progress bar of the measured run's `requests` requests, which the run advances
    /// as responses arrive and clears at its end. Default: a hidden bar.
    fn progress_bar(&mut self, requests: u64) -> ProgressBar {
        let _ = requests;
        ProgressBar::hidden()
    }

    /// The measured run is about to be announced, and from now on honours `stop`: raise
    /// it (from any thread) to end the run early, keeping what was measured. Called once,
    /// on the run's tokio runtime, so an observer may spawn tasks here. The CLI arms its
    /// Ctrl-C and SIGTERM handling here, so that a signal before the run (loading, warm-up)
    /// ends the process as the default handlers do. An error ends the run before it starts.
    fn arm_stop(&mut self, stop: &Arc<StopSignal>) -> Result<()> {
        let _ = stop;
        Ok(())
    }

    /// Figures for this observer to watch while the measured run goes on (a live view):
    /// called once per measured run, right after [`Event::RunStarting`]; the run counts
    /// into what is returned (a fresh one per call) as its requests end. Default: `None`,
    /// nothing watched (the run then counts only where its own flags need it).
    fn live_stats(&mut self) -> Option<Arc<LiveStats>> {
        None
    }

    /// A shard started with `--start-at gate` is ready (warmed up, connections open): the
    /// process that started it says when the shards start (`--workers`). Default: nothing
    /// can, an error.
    fn await_start(&mut self) -> Result<std::time::SystemTime> {
        anyhow::bail!("--start-at gate: no process started this one to say when to start")
    }
}
