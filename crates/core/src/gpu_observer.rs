//! GPU telemetry around the measured run only: an observer that starts the sampler when
//! the run starts (not during loading or warm-ups) and passes every event on.

use std::sync::Arc;

use anyhow::Result;

use crate::gpu_telemetry::{self, GpuReport, GpuSampler};
use crate::observer::{Event, Observer};

/// Starts GPU sampling when the measured run starts (not during loading or warm-ups),
/// passing every event on. `bench serve`'s measurement uses it too.
pub(crate) struct GpuObserver<'o> {
    pub(crate) inner: &'o mut dyn Observer,
    enabled: bool,
    sampler: Option<GpuSampler>,
}

impl<'o> GpuObserver<'o> {
    pub(crate) fn new(inner: &'o mut dyn Observer, enabled: bool) -> Self {
        GpuObserver {
            inner,
            enabled,
            sampler: None,
        }
    }

    pub(crate) fn start(&mut self) {
        if !self.enabled || self.sampler.is_some() {
            return;
        }
        // Asked for once per run: an absent library is one note, not one per iteration.
        self.enabled = false;
        match gpu_telemetry::start(gpu_telemetry::DEFAULT_INTERVAL) {
            Ok(sampler) => self.sampler = Some(sampler),
            // No NVIDIA library at all is the normal state of a machine without an
            // NVIDIA GPU: logged (`BENCH_LOG=info`), not a note on every run.
            Err(absent) if absent.library_absent => tracing::info!("{absent}"),
            Err(failed) => self.inner.event(Event::Note(&failed.to_string())),
        }
    }

    pub(crate) fn finish(&mut self) -> Option<GpuReport> {
        self.sampler.take().map(GpuSampler::finish)
    }
}

impl Observer for GpuObserver<'_> {
    fn event(&mut self, event: Event<'_>) {
        if let Event::RunStarting { .. } = event {
            self.start();
        }
        self.inner.event(event);
    }

    fn progress_bar(&mut self, requests: u64) -> indicatif::ProgressBar {
        self.inner.progress_bar(requests)
    }

    fn arm_stop(&mut self, stop: &Arc<crate::client::stop::StopSignal>) -> Result<()> {
        self.inner.arm_stop(stop)
    }

    fn await_start(&mut self) -> Result<std::time::SystemTime> {
        self.inner.await_start()
    }

    fn live_stats(&mut self) -> Option<Arc<crate::client::live::LiveStats>> {
        self.inner.live_stats()
    }
}
