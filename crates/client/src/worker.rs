//! The decode worker: a thread that owns a backend plugin instance and turns recorded
//! responses into records as they arrive, off the receive path.
//!
//! A decoder that faults (traps, runs out of time or memory) on one response fails that
//! request only: the faulted instance is dead, so the worker replaces it with a fresh one
//! ([`BackendPlugin::fork`]) before the next response. A plugin that keeps faulting
//! (`MAX_CONSECUTIVE_FAULTS` in a row, or more than `MAX_TOTAL_FAULTS` in all) stops the
//! run through the run's [`StopSignal`]; every record decoded before that is kept, and
//! responses still arriving fail as not decoded.

use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::RawResponse;
use super::decode::{RequestMeta, build_record};
use super::live::LiveStats;
use super::stop::StopSignal;
use crate::record::RequestRecord;
use crate::runtime::{BackendPlugin, Chunks, Decoded, ResponseHead};

/// Consecutive decode faults after which the worker gives up on the plugin. A bug that a
/// rare response shape triggers costs only the requests it hits, and such responses are
/// seldom next to each other; five in a row means the plugin fails on what the server
/// normally sends, and every further response would fail too (each fault also costs a
/// re-instantiation, or a whole call budget for a plugin that hangs).
const MAX_CONSECUTIVE_FAULTS: u32 = 5;

/// More decode faults than this in one run make the worker give up even when successes
/// come in between: past this many, the plugin fails a systematic share of the responses and the
/// run's numbers would describe the plugin rather than the server.
const MAX_TOTAL_FAULTS: u32 = 10;

/// One response waiting to be decoded.
pub(crate) struct Job {
    pub meta: RequestMeta,
    pub raw: RawResponse,
    pub t0: Instant,
}

/// A turn of a conversation that ended (answered or failed), for the dataset's next turn.
#[derive(Debug, Clone)]
pub struct TurnDone {
    pub turn: crate::runtime::TurnResult,
}

/// The thread that owns a backend plugin instance and decodes responses as they arrive.
pub struct DecodeWorker {
    tx: mpsc::Sender<Job>,
    handle: JoinHandle<(Vec<RequestRecord>, Duration)>,
}

impl DecodeWorker {
    /// A worker that raises `stop`, naming the plugin, when the plugin keeps faulting
    /// (the run's signal, so the load generator stops releasing requests). With `turns`,
    /// the record of every request that is a turn of a conversation is also sent there,
    /// as soon as it is built. With `live`, every record is added there as it is built;
    /// with `copies`, a copy of every record is sent there (the record file's writer).
    pub fn spawn_with_stop(
        backend: BackendPlugin,
        stop: Arc<StopSignal>,
        turns: Option<mpsc::Sender<TurnDone>>,
        live: Option<Arc<LiveStats>>,
        copies: Option<mpsc::Sender<RequestRecord>>,
    ) -> Result<Self> {
        let (tx, rx) = mpsc::channel::<Job>();
        let handle = std::thread::Builder::new()
            .name("bench-decode".into())
            .spawn(move || {
                let mut decoding = Decoding::new(backend, stop);
                let start = super::cpu::thread();
                let records = rx
                    .into_iter()
                    .map(|job| {
                        let events = decoding.decode(&job.raw);
                        let record = build_record(&job.meta, &job.raw, events, job.t0);
                        if let (Some(turns), Some(session)) = (&turns, &job.meta.session) {
                            // The driver is gone only once the run has ended.
                            let _ = turns.send(turn_done(&record, session, &job));
                        }
                        if let Some(live) = &live {
                            live.add(&record);
                        }
                        if let Some(copies) = &copies {
                            // Gone only if its writer failed, which stopped the run.
                            let _ = copies.send(record.clone());
                        }
                        record
                    })
                    .collect();
                (records, super::cpu::thread() - start)
            })
            .context("starting the decode thread")?;
        Ok(DecodeWorker { tx, handle })
    }

    pub(crate) fn sender(&self) -> mpsc::Sender<Job> {
        self.tx.clone()
    }

    /// Waits until every response sent so far is decoded; records come back in
    /// workload order, with the CPU time the decoding took (the plugin's work and the
    /// building of records).
    pub fn finish(self) -> Result<(Vec<RequestRecord>, Duration)> {
        drop(self.tx);
        let (mut records, cpu) = self
            .handle
            .join()
            .map_err(|_| anyhow::anyhow!("the decode thread panicked"))?;
        records.sort_by_key(|r| r.index);
        Ok((records, cpu))
    }
}

/// What the dataset plugin learns about a turn: the answer's text and timing, and when it
/// ended (its last frame, in seconds since the benchmark started).
fn turn_done(record: &RequestRecord, session: &crate::runtime::Session, job: &Job) -> TurnDone {
    let end = job.raw.frame_times.last().copied().unwrap_or(job.raw.start);
    TurnDone {
        turn: crate::runtime::TurnResult {
            session: session.clone(),
            success: record.succeeded(),
            generated_text: record.generated_text.clone(),
            ttft: record.ttft,
            latency: record.latency,
            finished_at: end.saturating_duration_since(job.t0).as_secs_f64(),
        },
    }
}

/// The worker's plugin instance and what it has cost so far.
struct Decoding {
    /// `Err` once the worker has given up: why, for the requests it no longer decodes.
    backend: std::result::Result<BackendPlugin, String>,
    faults: FaultBudget,
    stop: Arc<StopSignal>,
}

impl Decoding {
    fn new(backend: BackendPlugin, stop: Arc<StopSignal>) -> Self {
        Decoding {
            backend: Ok(backend),
            faults: FaultBudget::default(),
            stop,
        }
    }

    /// Decodes one response; after a fault, replaces the instance or gives up.
    fn decode(&mut self, raw: &RawResponse) -> std::result::Result<Decoded, String> {
        if raw.frames.ends.is_empty() {
            // Nothing for the plugin to read: the record fails (or not) on its own.
            return Ok(nothing_decoded());
        }
        let plugin = match &mut self.backend {
            Ok(plugin) => plugin,
            Err(why) => return Err(format!("not decoded: {why}")),
        };
        let events = decode_response(plugin, raw);
        if !plugin.faulted() {
            self.faults.clean();
            return events;
        }
        let name = plugin.name().to_owned();
        // The first line of the error (the rest is the plugin's stderr), without the
        // plugin's name, which the reason gives first.
        let cause = events
            .as_ref()
            .err()
            .and_then(|e| e.lines().next())
            .map(|line| {
                line.strip_prefix(&format!("plugin '{name}': "))
                    .unwrap_or(line)
                    .to_owned()
            })
            .unwrap_or_default();
        let reason = match self.faults.fault() {
            Some(count) => format!("backend plugin '{name}' {count} (last: {cause})"),
            None => match plugin.fork() {
                Ok(fresh) => {
                    *plugin = fresh;
                    return events;
                }
                Err(e) => format!(
                    "backend plugin '{name}' could not be restarted after a fault ({cause}): {e:#}"
                ),
            },
        };
        self.give_up(reason);
        events
    }

    fn give_up(&mut self, reason: String) {
        self.stop.stop(reason.clone());
        self.backend = Err(reason);
    }
}

/// Counts decode faults and says when there have been too many
/// ([`MAX_CONSECUTIVE_FAULTS`] in a row or more than [`MAX_TOTAL_FAULTS`] in all).
#[derive(Debug, Default)]
struct FaultBudget {
    consecutive: u32,
    total: u32,
}

impl FaultBudget {
    /// A response decoded without a fault.
    fn clean(&mut self) {
        self.consecutive = 0;
    }

    /// A fault; `Some(what happened)` when the budget is spent.
    fn fault(&mut self) -> Option<String> {
        self.consecutive += 1;
        self.total += 1;
        if self.consecutive >= MAX_CONSECUTIVE_FAULTS {
            Some(format!(
                "faulted on {} responses in a row",
                self.consecutive
            ))
        } else if self.total > MAX_TOTAL_FAULTS {
            Some(format!(
                "faulted on {} responses in this run (more than {MAX_TOTAL_FAULTS})",
                self.total
            ))
        } else {
            None
        }
    }
}

/// What a response without frames decodes to: no chunks, no events.
fn nothing_decoded() -> Decoded {
    Decoded {
        chunks: Chunks {
            frames: Vec::new(),
            spans: Vec::new(),
            escaped: Vec::new(),
            tokens: Vec::new(),
        },
        events: Vec::new(),
    }
}

/// Runs the backend decoder over a response that delivered frames.
pub fn decode_response(backend: &mut BackendPlugin, raw: &RawResponse) -> Result<Decoded, String> {
    if raw.frames.ends.is_empty() {
        return Ok(nothing_decoded());
    }
    let head = ResponseHead {
        status: raw.status.unwrap_or(0),
        headers: raw.headers.lines(),
    };
    backend
        .decode(&head, &raw.frames.buffer, &raw.frames.ends)
        .map_err(|e| format!("{e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_faults_in_a_row_spend_the_budget() {
        let mut budget = FaultBudget::default();
        for _ in 1..MAX_CONSECUTIVE_FAULTS {
            assert_eq!(budget.fault(), None);
        }
        assert_eq!(
            budget.fault().as_deref(),
            Some("faulted on 5 responses in a row")
        );
    }

    #[test]
    fn a_clean_decode_resets_the_run_of_faults_but_not_the_total() {
        let mut budget = FaultBudget::default();
        // Four faults, a success, four faults, a success: never five in a row.
        for _ in 0..2 {
            for _ in 1..MAX_CONSECUTIVE_FAULTS {
                assert_eq!(budget.fault(), None);
            }
            budget.clean();
        }
        assert_eq!(budget.total, 8);
        assert_eq!(budget.fault(), None);
        budget.clean();
        assert_eq!(budget.fault(), None);
        budget.clean();
        // The eleventh fault is one too many, though it follows a success.
        assert_eq!(
            budget.fault().as_deref(),
            Some("faulted on 11 responses in this run (more than 10)")
        );
    }
}
