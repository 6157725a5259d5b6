//! The decode worker: a thread that owns a backend plugin instance and turns recorded
//! responses into records as they arrive, off the receive path.

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::{Context, Result};

use super::RawResponse;
use super::decode::{RequestMeta, build_record};
use crate::record::RequestRecord;
use crate::runtime::{BackendPlugin, Event, ResponseHead};

/// One response waiting to be decoded.
pub(crate) struct Job {
    pub meta: RequestMeta,
    pub raw: RawResponse,
    pub t0: Instant,
}

/// The thread that owns a backend plugin instance and decodes responses as they arrive.
pub struct DecodeWorker {
    tx: mpsc::Sender<Job>,
    handle: JoinHandle<Vec<RequestRecord>>,
}

impl DecodeWorker {
    pub fn spawn(mut backend: BackendPlugin) -> Result<Self> {
        let (tx, rx) = mpsc::channel::<Job>();
        let handle = std::thread::Builder::new()
            .name("bench-decode".into())
            .spawn(move || {
                let mut records = Vec::new();
                for job in rx {
                    let events = decode_response(&mut backend, &job.raw);
                    records.push(build_record(&job.meta, &job.raw, events, job.t0));
                }
                records
            })
            .context("starting the decode thread")?;
        Ok(DecodeWorker { tx, handle })
    }

    pub(crate) fn sender(&self) -> mpsc::Sender<Job> {
        self.tx.clone()
    }

    /// Waits until every response sent so far is decoded; records come back in
    /// workload order.
    pub fn finish(self) -> Result<Vec<RequestRecord>> {
        drop(self.tx);
        let mut records = self
            .handle
            .join()
            .map_err(|_| anyhow::anyhow!("the decode thread panicked"))?;
        records.sort_by_key(|r| r.index);
        Ok(records)
    }
}

/// Runs the backend decoder over a response that delivered frames.
pub fn decode_response(
    backend: &mut BackendPlugin,
    raw: &RawResponse,
) -> Result<Vec<Event>, String> {
    if raw.frames.ends.is_empty() {
        return Ok(Vec::new());
    }
    let head = ResponseHead {
        status: raw.status.unwrap_or(0),
        headers: raw.headers.clone(),
    };
    backend
        .decode(&head, &raw.frames.buffer, &raw.frames.ends)
        .map_err(|e| format!("{e:#}"))
}
