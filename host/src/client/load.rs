//! The load generator: releases prepared requests at their scheduled offsets, caps
//! concurrency with a semaphore, and hands every recorded response to the decode worker.
//!
//! The send path does no plugin work, no JSON and takes no lock besides the semaphore;
//! decoding runs on its own thread, overlapped with the run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::Semaphore;

use super::decode::RequestMeta;
use super::worker::{DecodeWorker, Job};
use super::{HttpClient, PreparedRequest};
use crate::record::RequestRecord;

/// What a run measured.
pub struct RunOutput {
    pub records: Vec<RequestRecord>,
    /// From the first scheduled send to the end of the last response (vLLM's
    /// `benchmark_duration`).
    pub duration: f64,
}

/// Drives the whole workload: request `i` is released at `t0 + offsets[i]`.
///
/// Releases happen on a dedicated thread that sleeps until shortly before each target and
/// spins the rest, so the schedule is kept to microseconds; tokio's timer wheel rounds
/// every sleep up to the next millisecond.
pub async fn run(
    client: HttpClient,
    requests: Arc<Vec<PreparedRequest>>,
    offsets: &[f64],
    max_concurrency: Option<usize>,
    worker: DecodeWorker,
    progress: bool,
) -> Result<RunOutput> {
    anyhow::ensure!(
        offsets.len() == requests.len(),
        "schedule and workload differ in length"
    );
    let pb = progress_bar(requests.len() as u64, progress);
    let semaphore = max_concurrency.map(|n| Arc::new(Semaphore::new(n)));
    let handle = tokio::runtime::Handle::current();
    let offsets = offsets.to_vec();
    let tx = worker.sender();
    let pb_task = pb.clone();
    let t0 = Instant::now();
    let dispatcher = std::thread::Builder::new()
        .name("bench-dispatch".into())
        .spawn(move || {
            let mut tasks = Vec::with_capacity(offsets.len());
            for (i, &offset) in offsets.iter().enumerate() {
                sleep_until(t0 + Duration::from_secs_f64(offset));
                let dispatch = Instant::now();
                let (client, requests, semaphore) =
                    (client.clone(), requests.clone(), semaphore.clone());
                let (tx, pb) = (tx.clone(), pb_task.clone());
                tasks.push(handle.spawn(async move {
                    let permit = match semaphore {
                        Some(s) => Some(s.acquire_owned().await.expect("semaphore never closes")),
                        None => None,
                    };
                    let req = &requests[i];
                    let raw = client.send(req).await;
                    drop(permit);
                    let meta = RequestMeta {
                        index: req.index,
                        request_id: req.request_id.clone(),
                        prompt_len: req.prompt_len,
                        expected_output_len: req.expected_output_len,
                        intended_start_time: offset,
                        dispatch,
                    };
                    // The receiver lives until `finish`, after every task has ended.
                    let _ = tx.send(Job { meta, raw, t0 });
                    pb.inc(1);
                }));
            }
            tasks
        })
        .context("starting the dispatch thread")?;
    let tasks = tokio::task::spawn_blocking(move || dispatcher.join())
        .await
        .context("waiting for the dispatch thread")?
        .map_err(|_| anyhow::anyhow!("the dispatch thread panicked"))?;
    for task in tasks {
        task.await.context("a request task failed")?;
    }
    let duration = t0.elapsed().as_secs_f64();
    pb.finish_and_clear();
    let records = tokio::task::spawn_blocking(move || worker.finish())
        .await
        .context("waiting for the decode thread")??;
    Ok(RunOutput { records, duration })
}

/// How long before a target the dispatcher stops sleeping and spins: the OS wakes a
/// sleeping thread up to ~100 us late.
const SPIN_WINDOW: Duration = Duration::from_micros(200);

/// Blocks the calling thread until `target`, sleeping while far and spinning when near.
fn sleep_until(target: Instant) {
    loop {
        let now = Instant::now();
        if now >= target {
            return;
        }
        let left = target - now;
        if left > SPIN_WINDOW {
            std::thread::sleep(left - SPIN_WINDOW);
        } else {
            std::hint::spin_loop();
        }
    }
}

fn progress_bar(len: u64, show: bool) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template(
        "{percent:>3}%|{wide_bar}| {pos}/{len} [{elapsed_precise}<{eta_precise}, {per_sec}]",
    ) {
        pb.set_style(style);
    }
    pb
}
